"""The law under every estimator: b's 95 % interval by each reasonable way of measuring it.

A law fitted through three transition points has one degree of freedom, and a claim about its
slope b (e.g. "excludes the paper's 0.0555", Levine et al. 2020, arXiv 2006.12467) is only as
good as its weakest estimator. :func:`estimator_table` refits the same records under each of:

    paired bootstrap    the fit itself (:mod:`depthwidth.fits.transitions`, seed-paired + test
                        chunks): b ± 1.96 σ_b from the WLS covariance, and the percentiles of the
                        bootstrap refit (``law.bootstrap``)
    pooled bootstrap    the same with residuals pooled over each depth's widths (``--resample pooled``)
    per-seed fits       the line through each seed's own transition points (unweighted: a single
                        seed's bootstrap sees only its test-set chunks); b's interval is the
                        Student-t interval mean ± t(0.975, n−1)·s/√n over the n seeds with a line
    leave out (L_s,L_d) the WLS line through the other fitted points (their own errors)
    first down-crossing N* at the first instead of the last +→− change of Δ (matters only for
                        pairs whose seed-mean curves cross more than once)
    linear curves       each depth's mean losses joined by straight lines in ln N instead of PCHIP

Each row keeps b, its interval, the points it used with their crossing fractions, and whether the
interval contains the paper's b = 0.0555 and the theory's ln 3; :func:`claims` states, for each of
those, whether every row agrees. Every row fits the fit's own form (``law.form``,
:mod:`depthwidth.fits.forms`); the comparison with 0.0555 and ln 3 is made for the default form
ln d_x = a + b·L only (their b), and is null for any other. Stored beside the fit (``fit --estimators``), not in the fit file,
so a fit file that a prediction was made from stays as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.fits.forms import DEFAULT_FORM, LawForm, form_of_formula
from depthwidth.fits.lawfit import PAPER_SLOPE, THEORY_SLOPE, Z95, build_fit, fit_law
from depthwidth.fits.options import FitOptions

ESTIMATORS_FORMAT = "depthwidth-estimators"


def _points(fit: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"pair": [p["L_s"], p["L_d"]], "N_star": p["N_star"], "fraction": p["bootstrap_fraction"],
             "fitted": bool(p.get("fitted", True))}
            for p in fit.get("points", []) + fit.get("not_fitted", [])]


def _row(name: str, b: float | None, ci: list[float] | None, *, points: list | None = None,
         note: str = "", **extra: Any) -> dict[str, Any]:
    def inside(v: float) -> bool | None:
        return None if ci is None else bool(ci[0] <= v <= ci[1])

    return {"estimator": name, "b": b, "b_ci95": ci, "contains_paper": inside(PAPER_SLOPE),
            "contains_ln3": inside(THEORY_SLOPE), "points": points or [], "note": note, **extra}


def _fit_row(name: str, fit: dict[str, Any], note: str = "") -> dict[str, Any]:
    law = fit.get("law")
    if not law:
        return _row(name, None, None, points=_points(fit), note=note or f"no law (status {fit['status']})")
    boot = (law.get("bootstrap") or {}).get("ci95", {}).get("b")
    ci = law["ci95"]["b"]
    # The covariance query and predict use: Birge-scaled when the points scatter more than their
    # errors allow (chi2_red > 1; fits.law.law_from_fit_dict's "auto"), else the absolute one.
    if (law.get("dof") or 0) > 0 and (law.get("chi2_red") or 0) > 1 and law.get("cov_scaled"):
        half = Z95 * math.sqrt(law["cov_scaled"][1][1])
        ci = [law["b"] - half, law["b"] + half]
        note = (note + "; " if note else "") + f"Birge-scaled (chi2_red {law['chi2_red']:.2f})"
    return _row(name, law["b"], ci, points=_points(fit), note=note, b_ci95_bootstrap=boot,
                n_points=law["n_points"])


def _leave_one_out(fit: dict[str, Any], form: LawForm) -> list[dict[str, Any]]:
    pts = fit.get("points", [])
    rows = []
    if len(pts) < 3:
        return rows
    for i, p in enumerate(pts):
        rest = pts[:i] + pts[i + 1:]
        lf = fit_law([q["L"] for q in rest], [q["ln_d_x"] for q in rest], [q["sigma_ln_d_x"] for q in rest],
                     form=form)
        se = math.sqrt(lf.cov[1, 1])
        rows.append(_row(f"leave out ({p['L_s']},{p['L_d']})", lf.b, [lf.b - Z95 * se, lf.b + Z95 * se],
                         points=[{"pair": [q["L_s"], q["L_d"]], "N_star": q["N_star"],
                                  "fraction": q["bootstrap_fraction"], "fitted": True} for q in rest],
                         n_points=len(rest), note="exact line through 2 points" if len(rest) == 2 else ""))
    return rows


def _per_seed(load: Callable[[list[int] | None], Any], seeds: list[int], options: FitOptions,
              form: LawForm) -> dict[str, Any]:
    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.stats import t

    bs, per = [], []
    for s in seeds:
        f = build_fit(load([s]), **options.kwargs(), conventions=False, law_form=form.key)
        used = f.get("points", [])
        # Unweighted: one seed's own bootstrap sees only its test-set chunks, so its point errors
        # are not the law's; the seeds' spread of b is what this row measures.
        b = float(np.polyfit(form.g(np.array([p["L"] for p in used], dtype=float), np),
                             [p["ln_d_x"] for p in used], 1)[0]) \
            if len({p["L"] for p in used}) >= 2 else None
        per.append({"seed": s, "b": b, "points": _points(f)})
        if b is not None:
            bs.append(b)
    n = len(bs)
    if n < 2:
        return _row("per-seed fits (t-interval)", bs[0] if bs else None, None, per_seed=per,
                    note=f"{n} seed(s) give a line: no interval")
    m, sd = float(np.mean(bs)), float(np.std(bs, ddof=1))
    half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return _row("per-seed fits (t-interval)", m, [m - half, m + half], per_seed=per,
                note=f"mean of {n} seeds' b ({', '.join(f'{b:.3f}' for b in bs)}), t({n - 1})")


def estimator_table(load: Callable[[list[int] | None], Any], options: FitOptions,
                    fit: dict[str, Any]) -> dict[str, Any]:
    """Every estimator's b and 95 % interval (module docstring) for the records ``load`` gives.

    load(seeds): the results table (:class:`~depthwidth.fits.table.ResultsTable`), all seeds for
    None; options: the fit's options (its own row uses ``fit``, already built with them); fit: the
    fit-file dict. Raises UserError when ``fit`` holds no law (nothing to compare).
    """
    if not fit.get("law"):
        raise UserError("--estimators needs a fitted law (the fit has none: see its warnings)")
    form = form_of_formula(fit["law"].get("form"), "the fit")
    table = load(None)
    seeds = sorted({int(s) for s in table.runs["seed"].dropna()})
    kw = options.kwargs()
    refit = {**kw, "conventions": False, "law_form": form.key}
    rows = [_fit_row(f"{options.resample} bootstrap (the fit)", fit)]
    if options.resample != "pooled":
        rows.append(_fit_row("pooled bootstrap", build_fit(table, **{**refit, "resample": "pooled"})))
    rows.append(_per_seed(load, seeds, options, form))
    rows += _leave_one_out(fit, form)
    rows.append(_fit_row("first down-crossing", build_fit(table, **refit, crossing="first")))
    rows.append(_fit_row("linear curves (not PCHIP)", build_fit(table, **refit, curve="linear")))
    if not form.slope_is_levines:  # another form's b is not the slope 0.0555 and ln 3 are of
        rows = [{**r, "contains_paper": None, "contains_ln3": None} for r in rows]
    # "form" only for a non-default form, so the default form's tables stay as committed.
    return {"format": ESTIMATORS_FORMAT, "version": 1, "options": kw,
            **({} if form.key == DEFAULT_FORM else {"form": form.formula}), "seeds": seeds,
            "paper_b": PAPER_SLOPE, "theory_b": THEORY_SLOPE, "rows": rows, "claims": claims(rows)}


def claims(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether "b's interval excludes 0.0555" and "... excludes ln 3" hold in every row with an
    interval, and the rows where they fail."""
    out = {}
    for key, name in (("contains_paper", "excludes_paper"), ("contains_ln3", "excludes_ln3")):
        judged = [r for r in rows if r[key] is not None]
        fails = [r["estimator"] for r in judged if r[key]]
        out[name] = {"holds_in_every_row": bool(judged) and not fails, "fails_in": fails,
                     "rows_judged": len(judged), "rows_without_interval": len(rows) - len(judged)}
    return out


def estimators_path(fit_out: str) -> str:
    """Where ``fit --estimators`` stores the table: ``fit.json`` -> ``estimators.json`` beside it,
    ``NAME.json`` -> ``NAME.estimators.json``."""
    head, sep, tail = str(fit_out).rpartition("/")
    name = "estimators.json" if tail == "fit.json" else tail.removesuffix(".json") + ".estimators.json"
    return f"{head}{sep}{name}"
