"""Pre-registered predictions: a fitted law's transition size for depth pairs it was not fitted on,
and the verdict once those pairs are measured.

A law ln d_x = a + b·g(L) (Levine et al. 2020, arXiv 2006.12467, experiments section: g(L) = L,
the default form; other forms in :mod:`depthwidth.fits.forms`, read from the fit file's
``law.form``; fitted by :mod:`depthwidth.fits.lawfit`) predicts, for a depth pair (L_s, L_d)
standing at the depth L = assigned_depth(L_s, L_d) of the fit's convention
(:mod:`depthwidth.fits.transitions`):

    ln d_x* = a + b·g(L)              (width at the transition, natural log)
    N*      = 12·L·d_x*²              (Kaplan et al. 2020 non-embedding count, the fit's N)
    var(ln N*) = 4·[1, g] Σ [1, g]ᵀ   (Σ the covariance of (a, b); delta method, exact: linear in a, b)

The 95 % interval is exp(ln N* ± 1.96·σ) under the fit's own covariance (``cov``, or
``cov_scaled`` when χ²_red > 1, as ``query`` reads it) and, where the fit has one, under the
covariance of its bootstrap refit (``law.bootstrap.cov``; a normal interval from that covariance:
the fit file keeps the covariance, not the replicates).

For a doubling pair (L, 2L) every depth convention gives the same N* when the fit's pairs are all
doublings (the conventions differ by a constant factor of L, which the intercept absorbs); for any
other ratio (e.g. (2, 3)) they differ, so the prediction also lists N* under each convention of
the fit's ``by_assign`` (point values only: the fit file stores no covariance for them).

Prediction file (JSON, ``depthwidth predict --out``)::

    format "depthwidth-prediction", version 1, created_at (ISO 8601 UTC), git_rev (HEAD or null),
               git_dirty (true when tracked files differed from HEAD; null where git cannot say;
               absent from files written before it existed)
    fit        {"path", "sha256" (of the fit file's bytes), "law": {"a", "b", "form"}, "assign",
                "pairs_fitted": [[L_s, L_d], ...], "depth_range"}
    predictions  [{"pair": [L_s, L_d], "depth_convention", "L", "d_x", "ln_n_star", "n_star",
                   "sigma_ln_n_star", "ci95": [lo, hi], "cov_used", "ci95_bootstrap": [lo, hi] | null,
                   "sigma_ln_n_star_bootstrap": float | null, "extrapolated": bool,
                   "n_star_by_convention": {"geom": N, ...}}]

Verdict (:func:`verdict`) of a measured fit against a prediction file, per predicted pair: the
measured N* and its 95 % interval, whether it lies inside the predicted interval (the registered
rule of issue 22's protocol: docs/results/law-predicts.md), and its distance
z = (ln N*_meas − ln N*_pred) / sqrt(σ_pred² + σ_meas²) in combined standard deviations (also
z_pred, in the prediction's σ alone, i.e. as if the measurement were exact: JSON only). A pair the
measurement does not resolve (no crossing, one found in fewer than 95 % of bootstrap replicates,
or no bootstrap σ) gets status "not resolved" with the reason.

σ_meas is the fit's ``sigma_ln_N_star``: half the 16–84 percentile range of the bootstrap ln N*
(:mod:`depthwidth.fits.transitions`). That equals a normal σ only when the bootstrap is roughly
normal. Where a pair crosses several times, the replicates split between crossings, and the
16–84 range can be much narrower (or wider) than the 95 % interval suggests; the interval can
also be lopsided. The verdict therefore also gives σ_ci95, the σ that the arm of the measured 95 %
interval on the prediction's side implies ((ln N*_meas − ln lo)/1.96 when the prediction is below
the measurement, (ln hi − ln N*_meas)/1.96 when above), z_ci95 with the larger of σ_ci95 and
σ_meas in place of σ_meas (never a larger distance than z: the conservative reading), and
``non_normal`` (true when σ_ci95 and σ_meas differ by more than a factor 1.5 either way). These
are read beside z; they do not replace the registered rule.

``depthwidth predict --check PREDICTION --fit MEASURED --out FILE`` writes the verdict as a verdict
file (:mod:`depthwidth.fits.validation`), in ``results/predictions/verdicts/``, where ``query --fit``
finds the record of the law it answers with.

:func:`protocol_differences` compares the measured fit's options (crossing rule, curve,
resampling, replicates, crossing share) with those of the fit that made the prediction, read from
the path the prediction file names when its sha256 still matches.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import sys
from typing import Any

from depthwidth import storage
from depthwidth.errors import UserError
from depthwidth.fits.forms import LINEAR, LawForm
from depthwidth.fits.law import FIT_FORMAT, FIT_VERSION, Law, law_from_fit_dict
from depthwidth.fits.options import ASSIGN, MIN_FRACTION
from depthwidth.fits.projections import MAX_BUDGET
from depthwidth.fits.transitions import assigned_depth
from depthwidth.fits.validation import (  # noqa: F401 -- this module's API since before validation had them
    NO_SUCH_PAIR,
    PREDICTION_FORMAT,
    PREDICTION_VERSION,
    _num,
    read_prediction,
)
from depthwidth.records import code_is_dirty, code_revision
from depthwidth.units import abbreviate

Z95 = 1.959963984540054
# σ_ci95 / σ_meas above this marks a measured bootstrap far from normal (module docstring).
NON_NORMAL = 1.5


def _sigma_ln_n(law: Law, L: float) -> float | None:
    var_ln_d = law.ln_width_var(L)
    return None if var_ln_d is None else 2.0 * math.sqrt(max(var_ln_d, 0.0))


# ln of the largest float: an N* (or an interval end) past it cannot be computed or written.
_LN_FLOAT_MAX = math.log(sys.float_info.max)


def _check_representable(pair: tuple[int, int], assign: str, law: Law, law_boot: Law,
                         convs: dict[str, dict]) -> None:
    """UserError (naming the pair) when the pair's N* (under the fit's convention or one of
    ``convs``, the fit's ``by_assign``) or the upper end of a 95 % interval is past the largest
    float: e.g. (1000, 2000) under a law fitted on depths 1-8 puts the interval's upper end at
    ~10^333, where math.exp overflows (and the JSON would hold Infinity)."""
    Ls, Ld = pair
    try:
        L = assigned_depth(Ls, Ld, assign)
        lns = [_ln_n_star(law.a, law.b, L, law.form)] + [
            _ln_n_star(v["a"], v["b"], assigned_depth(Ls, Ld, c), law.form) for c, v in convs.items()]
        sigma = max(_sigma_ln_n(law, L) or 0.0, _sigma_ln_n(law_boot, L) or 0.0)
        top = max(lns) + Z95 * sigma
        if top < _LN_FLOAT_MAX:  # also False for NaN
            return
        where = (f"puts N* at ~10^{lns[0] / math.log(10):.0f} parameters and its 95% interval up to "
                 f"~10^{top / math.log(10):.0f}, past the largest float (~10^308): depth {L:.4g}")
    except OverflowError:  # a depth past a float (a 400-digit --pairs element)
        where = "cannot be evaluated in floats: that depth"
    fitted = f" (on depths {law.depth_range[0]:.3g}-{law.depth_range[1]:.3g})" if law.depth_range else ""
    depth = [str(x) if len(str(x)) <= 40 else abbreviate(x) for x in pair]  # no thousands commas in a pair
    raise UserError(f"--pairs {depth[0]},{depth[1]}: the law {law.name} {where} is far outside any range "
                    f"the fit{fitted} can speak for")


def _interval(ln_n: float, sigma: float | None) -> list[float] | None:
    return None if sigma is None else [math.exp(ln_n - Z95 * sigma), math.exp(ln_n + Z95 * sigma)]


def n_star(a: float, b: float, L: float, form: LawForm = LINEAR) -> float:
    """N* = 12·L·exp(2·ln d_x(L)) (default form: 12·L·exp(2(a + b·L))): the Kaplan N at which the
    law puts depth L's transition."""
    return 12.0 * L * math.exp(2.0 * form.ln_width(L, a, b))


def _check_testable(Ls: int, Ld: int, ln_n: float) -> None:
    """UserError (one line naming the pair) if the predicted N* = e^ln_n is above
    :data:`~depthwidth.fits.projections.MAX_BUDGET` (1e15 parameters, the largest budget ``query``
    answers): no experiment could train models of that size, so the prediction could never be
    judged. Only the size is bounded, not the depth: a deep pair of modest N* is testable."""
    if ln_n > math.log(MAX_BUDGET):
        size = f"{math.exp(ln_n):.3g}" if ln_n < 700 else f"e^{ln_n:.4g}"
        raise UserError(f"pair ({Ls},{Ld}): predicted N* = {size} parameters, above {MAX_BUDGET:.0e} (the largest budget "
                        "query answers, 1,000x the 1T to which Levine et al. 2020 extrapolate their law): no experiment "
                        "could test it; predict shallower pairs")


def _ln_n_star(a: float, b: float, L: float, form: LawForm) -> float:
    """ln N* = ln(12·L) + 2·ln d_x(L), in logs (the N* of :func:`n_star` without its overflow)."""
    return math.log(12.0 * L) + 2.0 * form.ln_width(L, a, b)


def parse_pairs(items: list[str]) -> list[tuple[int, int]]:
    """``["3,6", "2,3"]`` -> [(3, 6), (2, 3)]; UserError unless each is two whole depths L_s < L_d."""
    out = []
    for item in items:
        parts = [p.strip() for p in str(item).split(",")]
        try:
            Ls, Ld = (int(p) for p in parts)
        except ValueError:
            raise UserError(f"--pairs: {item!r} is not a pair of depths like 3,6") from None
        if not (1 <= Ls < Ld):
            raise UserError(f"--pairs: {item!r} needs 1 <= shallower < deeper")
        if (Ls, Ld) in out:
            raise UserError(f"--pairs: {item!r} given twice")
        out.append((Ls, Ld))
    if not out:
        raise UserError("--pairs: give at least one pair, e.g. --pairs 3,6")
    return out


def predict(fit: dict[str, Any], source: str, raw: bytes, pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """The prediction file (module docstring) of ``pairs`` from a parsed fit file ``fit``.

    ``raw`` is the fit file's bytes (hashed into the prediction). Raises UserError for a fit
    that holds no law, or a pair the fit was fitted on (a prediction is of what it has not seen).
    """
    law = law_from_fit_dict(fit, source)  # validates format, status and (a, b, cov)
    law_boot = law_from_fit_dict(fit, source, "bootstrap")
    assign = (fit.get("options") or {}).get("assign", "geom")
    if assign not in ASSIGN:
        raise UserError(f"{source}: options.assign {assign!r} is not one of {', '.join(ASSIGN)}")
    seen = sorted({(int(p["L_s"]), int(p["L_d"])) for p in fit.get("points", []) if p.get("fitted", True)})
    preds = []
    for Ls, Ld in pairs:
        if (Ls, Ld) in seen:
            raise UserError(f"pair ({Ls},{Ld}) is one the fit {source} was fitted on: nothing to predict")
        convs = {c: v for c, v in (fit.get("by_assign") or {}).items() if v and c in ASSIGN}
        _check_representable((Ls, Ld), assign, law, law_boot, convs)
        L = assigned_depth(Ls, Ld, assign)
        _check_testable(Ls, Ld, _ln_n_star(law.a, law.b, L, law.form))  # in logs: before anything overflows
        ln_n = math.log(n_star(law.a, law.b, L, law.form))
        sigma, sigma_b = _sigma_ln_n(law, L), _sigma_ln_n(law_boot, L)
        by_conv = {c: n_star(v["a"], v["b"], assigned_depth(Ls, Ld, c), law.form) for c, v in convs.items()}
        lo, hi = law.depth_range or (L, L)
        preds.append({
            "pair": [Ls, Ld], "depth_convention": assign, "L": L, "d_x": math.exp(law.ln_width(L)),
            "ln_n_star": ln_n, "n_star": math.exp(ln_n), "sigma_ln_n_star": sigma,
            "ci95": _interval(ln_n, sigma), "cov_used": law.source.partition("(cov: ")[2].rstrip(")"),
            "sigma_ln_n_star_bootstrap": sigma_b, "ci95_bootstrap": _interval(ln_n, sigma_b),
            "extrapolated": not (lo <= L <= hi), "n_star_by_convention": by_conv,
        })
    return {
        "format": PREDICTION_FORMAT, "version": PREDICTION_VERSION,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "git_rev": code_revision(), "git_dirty": code_is_dirty(),
        "fit": {"path": source, "sha256": hashlib.sha256(raw).hexdigest(),
                "law": {"a": law.a, "b": law.b, "form": law.form.formula},
                "assign": assign, "pairs_fitted": [list(p) for p in seen],
                "depth_range": list(law.depth_range) if law.depth_range else None},
        "predictions": preds,
    }


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _measured_point(p: dict[str, Any], where: str) -> str | None:
    """What is wrong with a measured point's numbers the verdict reads (None: nothing). A fit file
    edited by hand must give one line, not a traceback or a z of inf."""
    n, frac, sig, ci = p.get("N_star"), p.get("bootstrap_fraction"), p.get("sigma_ln_N_star"), p.get("N_star_ci95")
    if n is not None and not (_num(n) and n > 0):
        return f"{where}: N_star must be a positive number, got {n!r}"
    if frac is not None and not (_num(frac) and 0 <= frac <= 1):
        return f"{where}: bootstrap_fraction must be a number in [0, 1], got {frac!r}"
    if sig is not None and not (_num(sig) and sig >= 0):
        return f"{where}: sigma_ln_N_star must be a number >= 0 or null, got {sig!r}"
    ok_end = lambda v: v is None or (_num(v) and v > 0)  # noqa: E731 - an open end is null
    if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(ok_end(v) for v in ci)
                               and (None in ci or ci[0] <= ci[1])):
        return f"{where}: N_star_ci95 must be [lo, hi] with 0 < lo <= hi (either may be null) or null, got {ci!r}"
    return None


def _arm_sigma(ln_m: float, ln_p: float, ci: list | None) -> float | None:
    """σ of ln N* that the arm of the measured 95 % interval towards the prediction implies (module
    docstring); None when that end is open or missing, or does not lie on the prediction's side."""
    if not ci:
        return None
    end = ci[0] if ln_p < ln_m else ci[1]
    if end is None:
        return None
    arm = abs(ln_m - math.log(end))
    return arm / Z95 if arm > 0 and (math.log(end) - ln_m) * (ln_p - ln_m) > 0 else None


# The reason of a pair whose depths the measured fit does not hold (its records trained others):
# validation.NO_SUCH_PAIR, which query's lookup of a law's record reads.


def _not_resolved(pred: dict, reason: str, point: dict | None = None) -> dict[str, Any]:
    return {"pair": pred["pair"], "status": "not resolved", "reason": reason,
            "predicted_n_star": pred["n_star"], "predicted_ci95": pred["ci95"],
            "measured_n_star": point.get("N_star") if point else None,
            "bootstrap_fraction": point.get("bootstrap_fraction") if point else None}


def verdict(prediction: dict[str, Any], measured_fit: dict[str, Any], source: str = "measured fit") -> list[dict[str, Any]]:
    """Per predicted pair, measured vs predicted (module docstring). ``measured_fit`` is a fit
    file (any status) whose ``points``/``no_crossing``/``not_fitted`` hold the pair; ``source``
    names it in errors. UserError (one line) when the file is not a fit file of this version, when the measured point uses another depth convention
    than the prediction (its d_x is not comparable), when a pair is there twice, or when a number
    the verdict reads is malformed."""
    if isinstance(measured_fit, dict) and measured_fit.get("format") == PREDICTION_FORMAT:
        raise UserError(f"{source} is a prediction file, not a measured fit (a `depthwidth fit` file of the predicted "
                        "pairs' records)")
    if not isinstance(measured_fit, dict) or measured_fit.get("format") != FIT_FORMAT:
        raise UserError(f"{source}: not a depthwidth fit file")
    if measured_fit.get("version") != FIT_VERSION:
        raise UserError(f"{source}: unsupported fit file version {measured_fit.get('version')!r} (expected {FIT_VERSION})")
    options = measured_fit.get("options", {})
    if not isinstance(options, dict):
        raise UserError(f"{source}: 'options' must be the fit's options (a JSON object)")
    assign = options.get("assign")
    groups = [measured_fit.get(k, []) for k in ("points", "not_fitted", "no_crossing")]
    if not all(isinstance(g, list) and all(isinstance(p, dict) and _int(p.get("L_s")) and _int(p.get("L_d"))
                                           and 1 <= p["L_s"] < p["L_d"] for p in g) for g in groups):
        raise UserError(f"{source}: points, not_fitted and no_crossing must be lists of points with integer "
                        "1 <= L_s < L_d")
    by_pair: dict[tuple[int, int], dict[str, Any]] = {}
    for p in (p for g in groups for p in g):
        key = (p["L_s"], p["L_d"])
        if key in by_pair:
            raise UserError(f"{source}: pair ({key[0]},{key[1]}) is there more than once")
        by_pair[key] = p
    out = []
    for pred in prediction["predictions"]:
        if assign != pred["depth_convention"]:
            raise UserError(f"{source} assigns depth {assign!r}, the prediction {pred['depth_convention']!r}: "
                            f"refit with --assign {pred['depth_convention']} (the verdict compares like with like)")
        p = by_pair.get(tuple(pred["pair"]))
        if p is None:
            out.append(_not_resolved(pred, NO_SUCH_PAIR))
            continue
        if bad := _measured_point(p, f"{source}: pair ({p['L_s']},{p['L_d']})"):
            raise UserError(bad)
        if p.get("status") not in ("crossing", "multiple") or p.get("N_star") is None:
            out.append(_not_resolved(pred, f"status {p.get('status')!r}: {p.get('meaning', 'no crossing')}", p))
            continue
        frac = p.get("bootstrap_fraction") or 0.0
        if frac < MIN_FRACTION:
            out.append(_not_resolved(pred, f"crosses in {frac:.1%} of bootstrap replicates (< {MIN_FRACTION:.0%})", p))
            continue
        if not p.get("sigma_ln_N_star"):
            out.append(_not_resolved(pred, "the measured fit gives no bootstrap sigma of ln N* (one seed per cell?)", p))
            continue
        ln_m, s_m, ln_p = math.log(p["N_star"]), p["sigma_ln_N_star"], pred["ln_n_star"]
        s_p = pred.get("sigma_ln_n_star")
        lo, hi = pred["ci95"] or (None, None)
        s_ci = _arm_sigma(ln_m, ln_p, p.get("N_star_ci95"))
        out.append({
            "pair": pred["pair"], "status": "resolved", "bootstrap_fraction": frac,
            "predicted_n_star": pred["n_star"], "predicted_ci95": pred["ci95"],
            "measured_n_star": p["N_star"], "measured_ci95": p.get("N_star_ci95"),
            "ratio": p["N_star"] / pred["n_star"],
            "inside_predicted_ci95": None if lo is None else bool(lo <= p["N_star"] <= hi),
            "z": None if s_p is None else (ln_m - ln_p) / math.hypot(s_p, s_m),
            "z_pred": None if not s_p else (ln_m - ln_p) / s_p,
            "sigma_ln_measured": s_m, "sigma_ln_measured_ci95": s_ci,
            "z_ci95": None if s_p is None or s_ci is None else (ln_m - ln_p) / math.hypot(s_p, max(s_m, s_ci)),
            "non_normal": None if s_ci is None else bool(not 1 / NON_NORMAL <= s_ci / s_m <= NON_NORMAL),
        })
    return out


# Fit options that are part of the protocol a prediction is judged by (FitOptions; "crossing" is
# absent from fit files written with the default "last").
PROTOCOL_OPTIONS = ("crossing", "curve", "resample", "bootstrap", "min_fraction", "n_param")
OPTION_DEFAULTS = {"crossing": "last"}


def predicting_fit(prediction: dict[str, Any], source: str = "the prediction") -> tuple[str, Any]:
    """(path, parsed JSON) of the fit the prediction was made from, read at the path the
    prediction names. UserError (one line) when it cannot be read or parsed there (``source``
    names the prediction file) or no longer has the recorded sha256."""
    where = str((prediction.get("fit") or {}).get("path"))
    try:
        raw = storage.read_bytes(where)
    except (OSError, ValueError, UserError):
        raise UserError(f"{source}: the fit it was made from, {where}, cannot be read "
                        "(run from the directory the prediction was made in)") from None
    if hashlib.sha256(raw).hexdigest() != prediction["fit"].get("sha256"):
        raise UserError(f"{where} has changed since {source} was made from it (sha256 differs)")
    try:
        return where, json.loads(raw)
    except ValueError:
        raise UserError(f"{where}: not JSON") from None


def protocol_differences(prediction: dict[str, Any], measured_fit: dict[str, Any]) -> list[str] | None:
    """How the measured fit's options (and its seeds, when it was fitted on some: ``fit --seeds``)
    differ from those of the fit that made the prediction, as "crossing first (the predicting fit:
    last)" strings; [] when they agree, None when the predicting fit cannot be read at the path
    the prediction names (a URL without its file system counts as unreadable) or its sha256 has
    changed."""
    try:
        theirs = predicting_fit(prediction)[1].get("options") or {}
    except (UserError, AttributeError):
        return None
    ours = measured_fit.get("options") or {}
    out = []
    for k in PROTOCOL_OPTIONS:
        a, b = ours.get(k, OPTION_DEFAULTS.get(k)), theirs.get(k, OPTION_DEFAULTS.get(k))
        if a != b:
            out.append(f"{k} {a} (the predicting fit: {b})")
    seeds = (measured_fit.get("table") or {}).get("seeds")
    if seeds is not None:  # the predicting fit used every seed of its records
        out.append(f"seeds {','.join(map(str, seeds))} only (the predicting fit: all its records' seeds)")
    return out
