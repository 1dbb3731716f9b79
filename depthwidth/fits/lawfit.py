"""Fitting the law to transition points, and assembling the fit file.

The law's functional form (default ln d_x = a + b·L; ``fit --law-form``) and its fit live in
:mod:`depthwidth.fits.forms`; this module applies them to the transition points. Weighted least
squares as in Levine et al. 2020 (arXiv 2006.12467 v3: "weighted least squares with the
empirical errors of the transition points"): ``scipy.optimize.curve_fit`` with ``sigma`` = the
points' bootstrap errors on ln d_x and ``absolute_sigma=True``, so the covariance of (a, b) is
(JᵀWJ)⁻¹ from those errors alone, not rescaled by the residuals. Statistics:

    chi2       Σ ((y - ŷ)/σ)²;     dof = n - 2;     chi2_red = chi2/dof
    r2         1 - Σ w(y - ŷ)² / Σ w(y - ȳ_w)²,  w = 1/σ², ȳ_w the weighted mean (weighted R²)
    r2_unweighted  the ordinary R² of the same line
    ci95       a ± z·σ_a with z = Φ⁻¹(0.975) (normal: absolute errors, no t-correction)

Number of points: n >= 3 is a fit with χ²; n = 2 is the exact line through both points, its
covariance still propagated from their errors, with dof = 0 and chi2/chi2_red/r2 null;
n < 2 raises :class:`InsufficientPoints` (:func:`build_fit` instead returns a fit file with
status "insufficient" listing the transitions found; the CLI writes it and exits 0: too few
crossings is a result, not bad input). Points whose bootstrap error is zero
or undefined (a single seed per cell, or fewer than 2 bootstrap replicates with a crossing)
cannot be weighted: UserError, asking for more seeds or ``--resample pooled+widths``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth import __version__, storage
from depthwidth.fits.forms import (  # InsufficientPoints is re-exported: callers catch it from here
    DEFAULT_FORM,
    LINEAR,
    InsufficientPoints,  # noqa: F401
    LawFit,
    LawForm,
    form_named,
)
from depthwidth.fits.law import FIT_FORMAT, FIT_VERSION, levine2020
from depthwidth.fits.options import ASSIGN, MIN_FRACTION, FitOptions
from depthwidth.fits.transitions import USABLE, TransitionPoint, assigned_depth, compute_transitions
from depthwidth.records import stored_path

Z95 = statistics.NormalDist().inv_cdf(0.975)


def fit_law(L, y, sigma, *, absolute: bool = True, form: LawForm = LINEAR) -> LawFit:
    """Weighted least-squares fit of ``form`` (default ln d_x = a + b·L) to the points: y = ln d_x
    at assigned depths L (layers) with standard errors sigma, all shape (n,). See
    :meth:`depthwidth.fits.forms.LawForm.fit` (``absolute=False``: unweighted, covariance from
    the scatter). Raises InsufficientPoints if n < 2, UserError for unweightable points or a
    single depth."""
    return form.fit(L, y, sigma, absolute=absolute)


def _bootstrap_law(points: list[TransitionPoint], boot: np.ndarray, sigma: np.ndarray,
                   form: LawForm = LINEAR) -> dict[str, Any] | None:
    """Refit the law on every bootstrap replicate (same weights) where all used pairs crossed:
    a covariance that, unlike the WLS one, includes the correlation between pairs sharing a depth."""
    if boot.shape[1] == 0:
        return None
    L = np.array([p.L for p in points])
    ok = np.all(np.isfinite(boot), axis=1)
    if ok.sum() < 10:
        return None
    y = 0.5 * (boot[ok] - np.log(12.0 * L))  # (B_ok, n) ln d_x per replicate
    a, b = form.fit_replicates(L, y, 1.0 / sigma**2)
    cov = np.cov(np.stack([a, b]))
    return {"replicates": int(ok.sum()), "cov": cov.tolist(),
            "ci95": {"a": np.quantile(a, [0.025, 0.975]).tolist(), "b": np.quantile(b, [0.025, 0.975]).tolist()}}


THEORY_SLOPE = math.log(3.0)  # ln d_x = ln 3 · L at the threshold L = log_3 d_x (Levine et al. 2020)
PAPER_SLOPE = levine2020().b  # Levine et al. 2020 v3, the fitted b (0.0555)
ERROR_CONVENTION = ("cov: absolute, from the points' bootstrap errors alone (curve_fit absolute_sigma=True); "
                    "cov_scaled: cov * max(1, chi2_red) (Birge ratio); bootstrap.cov: the line refitted on "
                    "every replicate in which all fitted pairs cross")


def _warnings(points: list[TransitionPoint], table, crossing: str = "last") -> list[str]:
    out = list(getattr(table, "warnings", []))
    for p in points:
        where = f"pair ({p.L_s}, {p.L_d})"
        if p.status == "multiple":
            out.append(f"{where}: several crossings, N* taken as the {crossing} down-crossing")
        if p.status in USABLE and not p.fitted and p.bootstrap_fraction is not None \
                and p.bootstrap_fraction >= MIN_FRACTION and not p.sigma_ln_d_x:
            out.append(f"{where}: zero or undefined bootstrap error (one seed per cell?): add seeds or use "
                       "--resample pooled+widths; reported, not fitted")
        elif p.status in USABLE and not p.fitted:
            out.append(f"{where}: crosses in only {p.bootstrap_fraction:.1%} of bootstrap replicates "
                       f"({p.bootstrap_above} above, {p.bootstrap_below} below the range): reported, not fitted")
        if p.status not in USABLE:
            out.append(f"{where}: {p.status} ({p.meaning})")
    n_single = int((table.cells["n_seeds"] < 2).sum())
    if n_single:
        out.append(f"{n_single} (depth, width) cell(s) have one seed: no seed spread to resample there")
    return out


def _law(points: list[TransitionPoint], boot: np.ndarray, form: LawForm = LINEAR) -> dict[str, Any] | None:
    """The WLS law of the fitted points (None when fewer than 2), with its bootstrap refit and,
    for the linear form, the comparison of b with the theory's ln 3 and the paper's 0.0555."""
    idx = [i for i, p in enumerate(points) if p.fitted]
    if len(idx) < 2 or len({points[i].L for i in idx}) < 2:
        return None
    used = [points[i] for i in idx]
    sigma = np.array([p.sigma_ln_d_x for p in used])
    degenerate = bool(np.all(sigma == 0))
    if degenerate and len(used) < 3:
        return None
    law = form.fit([p.L for p in used], [p.ln_d_x for p in used], sigma, absolute=not degenerate).to_dict()
    law["bootstrap"] = None if degenerate else _bootstrap_law(used, boot[:, idx], sigma, form)
    law["degenerate_bootstrap"] = degenerate
    lo, hi = law["ci95"]["b"]
    # 0.0555 and ln 3 are slopes of ln d_x = a + b·L: another form's b is not comparable with them.
    law["b_vs"] = None if not form.slope_is_levines else {
        "theory_ln3": THEORY_SLOPE, "paper": PAPER_SLOPE, "b_ci95": [lo, hi],
        "theory_inside": bool(lo <= THEORY_SLOPE <= hi), "paper_inside": bool(lo <= PAPER_SLOPE <= hi)}
    law["error_convention"] = (ERROR_CONVENTION if not degenerate else
                               "degenerate bootstrap (every point has zero error: the seeds' paired differences "
                               "agree exactly): unweighted line, cov from the residual scatter")
    return law


def point_correlation(points: list[TransitionPoint], boot: np.ndarray) -> dict[str, Any] | None:
    """Bootstrap correlation of ln N* between the pairs whose seed means cross (status crossing or
    multiple, with a finite error), over the replicates in which all of them cross: the paired
    bootstrap draws one set of seeds for every cell, so pairs that share a depth or seeds are
    correlated. With the points' sigma_ln_d_x, D·R·D is their joint covariance (the form
    comparison's, :mod:`depthwidth.fits.compare`; ln d_x = (ln N* - ln 12L)/2 has the same
    correlation). None with fewer than 2 such pairs or 10 such replicates.

    Returns {"pairs": [[Ls, Ld], ...], "replicates": n, "corr": n_pairs × n_pairs nested list}."""
    idx = [i for i, p in enumerate(points) if p.status in USABLE and p.sigma_ln_d_x]
    if len(idx) < 2:
        return None
    sub = boot[:, idx]
    ok = np.all(np.isfinite(sub), axis=1)
    if ok.sum() < 10:
        return None
    corr = np.corrcoef(sub[ok], rowvar=False)
    return {"pairs": [[points[i].L_s, points[i].L_d] for i in idx], "replicates": int(ok.sum()),
            "corr": np.round(corr, 12).tolist()}


def stored_fit(fit: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """``fit`` as written to ``path``: its ``table.results`` (and ``table.lr_tuned.dirs``, ``table.also``,
    ``table.cells_of``) stored by the one rule of result files (:func:`depthwidth.records.stored_path`:
    relative to the file's folder when in its tree or checkout, else absolute), so the file is the
    same from any directory."""
    table = fit.get("table")
    if not isinstance(table, dict) or not table.get("results"):
        return fit
    parent = str(path).rsplit("/", 1)[0] if storage.is_url(path) else Path(path).parent
    stored = {**table, "results": stored_path(table["results"], parent)}
    if isinstance(table.get("lr_tuned"), dict):
        tuned = table["lr_tuned"]
        stored["lr_tuned"] = {**tuned, "dirs": [stored_path(d, parent) for d in tuned["dirs"]]}
    if table.get("also"):
        stored["also"] = [stored_path(d, parent) for d in table["also"]]
    if table.get("cells_of"):
        stored["cells_of"] = stored_path(table["cells_of"], parent)
    return {**fit, "table": stored}


def build_fit(table, *, pairs: str = FitOptions.pairs, assign: str = FitOptions.assign,
              bootstrap: int = FitOptions.bootstrap, resample: str = FitOptions.resample,
              seed: int = FitOptions.seed, conventions: bool = True, curve: str = "pchip",
              crossing: str = "last", law_form: str = DEFAULT_FORM, correlation: bool = False) -> dict[str, Any]:
    """Transitions + law for a results table, as the fit-file dict (format in fits.law).

    Status "ok" with a law when at least 2 points are fitted (a crossing in >= 95% of the
    bootstrap replicates, options.MIN_FRACTION, and a finite error); otherwise status
    "insufficient" and law null (no exception: a result, not bad input). With ``conventions``
    the law is refitted under every depth-assignment convention (``by_assign``: the same
    replicates, only the depth given to each point changes). ``curve``/``crossing``: how each
    depth's means are joined and which down-crossing is N* (:func:`~depthwidth.fits.transitions.find_crossing`;
    the defaults are the fit's; others are the robustness rows of :mod:`depthwidth.fits.estimators`).
    ``law_form``: the functional form fitted (a key of :data:`depthwidth.fits.forms.FORMS`; its
    formula is stored as ``law.form``). ``correlation``: also store the points' bootstrap
    correlation (:func:`point_correlation`, what ``fit --compare-forms`` needs). Raises UserError for bad options.
    """
    form = form_named(law_form)
    points, boot = compute_transitions(table, pairs=pairs, assign=assign, bootstrap=bootstrap,
                                       resample=resample, seed=seed, curve=curve, crossing=crossing)
    cand = [p for p in points if p.fitted]
    zero = [p for p in cand if p.sigma_ln_d_x == 0]
    # A zero error cannot be weighted: with other points it is dropped; if every point has one
    # the bootstrap is degenerate and _law fits an unweighted line (3+ points) or nothing.
    if zero and (len(zero) < len(cand) or len(cand) < 3):
        for p in zero:
            p.fitted = False
    out: dict[str, Any] = {
        "format": FIT_FORMAT,
        "version": FIT_VERSION,
        "status": "insufficient",
        "law": None,
        "points": [p.to_dict() for p in points if p.fitted],
        "not_fitted": [p.to_dict() for p in points if p.status in USABLE and not p.fitted],
        "no_crossing": [p.to_dict() for p in points if p.status not in USABLE],
        "options": {"pairs": pairs, "assign": assign, "curve": f"{curve}-lnN", "bootstrap": bootstrap,
                    "resample": resample, "seed": seed, "n_param": "kaplan 12*L*d^2",
                    "min_fraction": MIN_FRACTION, **({"crossing": crossing} if crossing != "last" else {})},
        "table": table.summary(),
        "warnings": _warnings(points, table, crossing),
        "depthwidth_version": __version__,
    }
    if correlation:  # only on request: a fit file's bytes (and the predictions hashed on them) stay as they were
        out["point_correlation"] = point_correlation(points, boot)
    law = _law(points, boot, form)
    if law is not None:
        out["status"], out["law"] = "ok", law
        if law["degenerate_bootstrap"]:
            out["warnings"].append("degenerate bootstrap: every point has zero error (the seeds' paired differences "
                                   "agree exactly); the law is an unweighted line with errors from its scatter")
    if conventions:
        by = {}
        for conv in ASSIGN:
            moved = [dataclasses.replace(p, assign=conv, L=assigned_depth(p.L_s, p.L_d, conv),
                                         ln_d_x=None if p.ln_N_star is None else
                                         0.5 * (p.ln_N_star - math.log(12.0 * assigned_depth(p.L_s, p.L_d, conv))))
                     for p in points]
            lw = _law(moved, boot, form)
            by[conv] = None if lw is None else {k: lw[k] for k in ("a", "b", "ci95", "chi2_red", "dof", "r2", "b_vs")}
        out["by_assign"] = by
    return out
