"""`query` under every surviving law form: the optimal depth and width for a budget, per form.

A form ln d_x = f(L; θ) of :mod:`depthwidth.fits.compare` says that depth L is optimal at the
size N(L) = 12·L·d_x(L)² (Kaplan et al. 2020's non-embedding count, the N of Levine et al. 2020,
arXiv 2006.12467, and of the transition points the forms were fitted to). For a budget B the
optimal depth is the root of N(L) = B. Every form of the comparison has N(L) strictly increasing
in L where d_x(L) does not fall (constant, and linear/log with b >= 0, saturating with c, τ > 0),
so the root is unique and found by bisection on ln L in [0, 60] (L up to e^60 layers).

Interval: :data:`DRAWS` draws of θ from N(θ̂, Σθ·max(1, χ²/dof)) (the predictions' covariance),
each solved for its depth; the 2.5–97.5 percentiles. Draws whose d_x falls with depth somewhere
on [1, L] (a negative slope) have no unique optimum and are counted, not solved.

What is printed per surviving form (the comparison's exclusion rule decides which survive): the
optimal depth with its 95 % interval, the width, d_x/L, the Akaike weight and the held-out
log-likelihood; and how far apart the forms are (the ratio of the deepest to the shallowest
answer). One number is named only when the comparison prefers one form (:mod:`depthwidth.fits.compare`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.fits.compare import COMPARE_FORMAT, form_by_key

DRAWS = 2000
_LN_L_MAX = 60.0


def _ln_n(form, ln_L: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """ln N(L) = ln 12 + ln L + 2·f(L; θ) for depths e^ln_L (shape (..,)) and θ (shape (.., k))."""
    L = np.exp(ln_L)
    return math.log(12.0) + ln_L + 2.0 * form.f(L, *np.moveaxis(theta, -1, 0))


def optimal_depth(form, theta: np.ndarray, log_budget: float) -> np.ndarray:
    """The depth L with N(L) = e^log_budget for each row of θ (shape (M, k)), by 80 bisections
    on ln L in [0, 60]; NaN where N(1) > B (the budget is below a one-layer model's optimum)."""
    lo = np.zeros(theta.shape[0])
    hi = np.full(theta.shape[0], _LN_L_MAX)
    below = _ln_n(form, lo, theta) > log_budget
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        short = _ln_n(form, mid, theta) < log_budget
        lo, hi = np.where(short, mid, lo), np.where(short, hi, mid)
    L = np.exp(0.5 * (lo + hi))
    return np.where(below, np.nan, L)


def _monotone(form, theta: np.ndarray, L_max: np.ndarray) -> np.ndarray:
    """Whether d_x(L) does not fall on [1, L_max] (checked on 64 log-spaced depths), per row."""
    grid = np.exp(np.linspace(0.0, 1.0, 64)[None, :] * np.log(np.maximum(L_max, 1.0))[:, None])
    f = form.f(grid, *[theta[:, i:i + 1] for i in range(theta.shape[1])])
    return np.all(np.diff(f, axis=1) >= -1e-12, axis=1)


def answer_form(row: dict[str, Any], budget: float, draws: int = DRAWS, seed: int = 0) -> dict[str, Any]:
    """One form's answer for ``budget`` (parameters, non-embedding): depth, width, 95 % interval
    (module docstring), its support and its standing in the comparison."""
    form = form_by_key(row["key"])
    theta = np.array([[row["params"][p] for p in form.params]], dtype=float)
    log_b = math.log(budget)
    L = float(optimal_depth(form, theta, log_b)[0])
    cov = np.asarray(row["cov"], dtype=float) * max(1.0, row["chi2_red"] or 1.0)
    rng = np.random.default_rng(seed)
    sample = rng.multivariate_normal(theta[0], cov, size=draws, method="eigh")
    Ls = optimal_depth(form, sample, log_b)
    ok = np.isfinite(Ls) & _monotone(form, sample, np.nan_to_num(Ls, nan=1.0))
    ci = np.quantile(Ls[ok], [0.025, 0.975]).tolist() if ok.sum() >= 0.5 * draws else None
    d = math.exp(float(form.f(np.array([L]), *theta[0])[0])) if math.isfinite(L) else math.nan
    return {"form": row["key"], "law": row["law"], "depth": L, "width": d, "aspect": d / L if L else math.nan,
            "depth_ci95": ci, "draws": draws, "draws_solved": int(ok.sum()), "aic_weight": row["aic_weight"],
            "heldout_loglik": row["heldout_loglik"], "excluded": row["excluded"],
            "excluded_because": row["excluded_because"]}


def answer_forms(cmp: dict[str, Any], source: str, budget: float, draws: int = DRAWS) -> dict[str, Any]:
    """Every surviving form's answer for ``budget`` and the summary (module docstring). UserError
    for a file that is not a form comparison, or when no form survives."""
    if not isinstance(cmp, dict) or cmp.get("format") != COMPARE_FORMAT:
        raise UserError(f"{source}: not a form comparison (`fit --compare-forms` writes one)")
    rows = [answer_form(r, budget, draws) for r in cmp["forms"] if not r["excluded"]]
    if not rows:
        raise UserError(f"{source}: every form is excluded by the comparison; no law to answer from")
    depths = [r["depth"] for r in rows if math.isfinite(r["depth"])]
    return {"budget": budget, "forms": rows, "excluded": [r["key"] for r in cmp["forms"] if r["excluded"]],
            "preferred": cmp["preferred"], "rule": cmp["rule"],
            "spread": max(depths) / min(depths) if len(depths) > 1 else None,
            "single_answer": next((r for r in rows if r["form"] == cmp["preferred"]), None)}
