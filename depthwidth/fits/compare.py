"""Which law? Functional forms of the transition width d_x(L) judged on the same points.

The law of Levine et al. 2020 (arXiv 2006.12467 v3, experiments section) is ln d_x = a + b·L.
A few transition points cannot tell it from other monotone forms by χ² alone, so every form is
fitted to the same points with the same joint covariance and judged side by side:

    constant      ln d_x = a                                 k = 1   (no depth dependence)
    linear-depth  ln d_x = a + b·L                           k = 2   (Levine et al. 2020)
    log-depth     ln d_x = a + b·ln L                        k = 2   (a power law d_x ∝ L^b)
    saturating    d_x = c·(1 - e^(-L/τ)),  θ = (ln c, ln τ)  k = 2   (a width that levels off)

Points: y_i = ln d_x of every doubling pair whose seed means cross (``status`` crossing or
multiple, with a finite error; the fit's 95 %-crossing rule for *the law* is not applied here, so
that a pair on the threshold is judged with its error rather than dropped: its crossing share is
printed beside it), at the assigned depth L_i (geometric mean of the pair). Joint covariance
C = D·R·D, D = diag(σ_i) the points' bootstrap errors of ln d_x, R their bootstrap correlation
(:func:`depthwidth.fits.lawfit.point_correlation`: the paired bootstrap draws one set of seeds for
every cell, so points that share a depth or seeds are correlated).

Each form is fitted by generalised least squares, ``scipy.optimize.curve_fit`` with the 2-D
``sigma=C`` and ``absolute_sigma=True`` (θ's covariance (JᵀC⁻¹J)⁻¹ from the errors alone).
Statistics, with r = y - f(L; θ̂):

    χ²        rᵀ C⁻¹ r;  dof = n - k;  p = P(χ²_dof > χ²)
    AIC       χ² + 2k            (−2 ln likelihood up to a constant shared by every form)
    AICc      AIC + 2k(k+1)/(n-k-1)  (Hurvich & Tsai 1989; None when n - k - 1 <= 0)
    BIC       χ² + k ln n        (Schwarz 1978)
    weight    e^(-ΔAIC/2) / Σ e^(-ΔAIC/2)  (Akaike weight, Burnham & Anderson 2002, §2.9)

Leave one pair out: refit on the others (their sub-covariance) and predict the left-out y_j from
the Gaussian conditional of the joint covariance, linearised at the refit (exact for the forms
linear in θ): mean μ_j = f_j + c C₋ⱼ⁻¹ r₋ⱼ, variance v_j = C_jj − c C₋ⱼ⁻¹ cᵀ + g Σθ gᵀ with
c = C_{j,−j}, g = J_j − c C₋ⱼ⁻¹ J₋ⱼ (J the Jacobian of f in θ). z_j = (y_j − μ_j)/√v_j and the
held-out log-likelihood Σ_j ln N(y_j; μ_j, v_j).

Verdict rule (stated here, printed by ``fit --compare-forms``): a form is *excluded* when its fit
p-value is below 0.01 or its ΔAIC exceeds 10 ("essentially no support", Burnham & Anderson 2002,
§2.6); the others *survive*. One form is *preferred* only when every other surviving form has
ΔAIC > 4 ("considerably less support", ibid.); otherwise the survivors are reported side by side.

Prediction of an unseen pair (Ls, Ld) under a form (:func:`predict_pair`): L = √(Ls·Ld),
ln N* = ln(12·L) + 2·f(L; θ̂) (Kaplan N = 12·L·d_x², as the transition points are measured), with
σ(ln N*) = 2·√(g Σθ gᵀ), g = ∂f/∂θ at L, Σθ scaled by max(1, χ²/dof) (Birge ratio).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.fits.transitions import USABLE

COMPARE_FORMAT = "depthwidth-form-comparison"
COMPARE_VERSION = 1
EXCLUDE_P = 0.01
EXCLUDE_DAIC = 10.0
PREFER_DAIC = 4.0
Z95 = statistics.NormalDist().inv_cdf(0.975)


@dataclass(frozen=True)
class Form:
    """One functional form ln d_x = f(L; θ). ``f(L, θ)`` takes an array L (layers) and returns
    ln d_x; ``start(L, y)`` gives starting points for the fit; ``params`` names θ; ``to_text``
    writes the fitted law for people."""

    key: str
    formula: str
    params: tuple[str, ...]
    f: Callable[[np.ndarray, Any], np.ndarray]
    start: Callable[[np.ndarray, np.ndarray], list[tuple[float, ...]]]
    to_text: Callable[[np.ndarray], str]


def _lin_start(L, y):
    return [(float(np.mean(y)), 0.0)]


def _sat_f(L, lnc, lntau):
    # ln(1 - e^{-x}) written with expm1 so small L/τ keeps its digits
    return lnc + np.log(-np.expm1(-np.asarray(L, dtype=float) / np.exp(lntau)))


def _sat_start(L, y):
    top = float(np.max(y))
    return [(top + dy, math.log(t)) for dy in (0.05, 0.3, 1.0) for t in (0.5, 1.0, 2.0, 4.0, 8.0)]


FORMS: tuple[Form, ...] = (
    Form("constant", "ln(d_x) = a", ("a",), lambda L, a: a + 0.0 * np.asarray(L, dtype=float),
         lambda L, y: [(float(np.mean(y)),)], lambda t: f"ln d_x = {t[0]:.4f}"),
    Form("linear-depth", "ln(d_x) = a + b*L", ("a", "b"), lambda L, a, b: a + b * np.asarray(L, dtype=float),
         _lin_start, lambda t: f"ln d_x = {t[0]:.4f} + {t[1]:.4f}*L"),
    Form("log-depth", "ln(d_x) = a + b*ln(L)", ("a", "b"),
         lambda L, a, b: a + b * np.log(np.asarray(L, dtype=float)), _lin_start,
         lambda t: f"ln d_x = {t[0]:.4f} + {t[1]:.4f}*ln L"),
    Form("saturating", "d_x = c*(1 - exp(-L/tau))", ("ln_c", "ln_tau"), _sat_f, _sat_start,
         lambda t: f"d_x = {math.exp(t[0]):.2f}*(1 - exp(-L/{math.exp(t[1]):.3f}))"),
)
FORM_KEYS = tuple(f.key for f in FORMS)


def form_by_key(key: str) -> Form:
    """The comparison's form named ``key``; UserError (one line) for another name."""
    for f in FORMS:
        if f.key == key:
            return f
    raise UserError(f"unknown law form {key!r} (the comparison's forms: {', '.join(FORM_KEYS)})")


# ---------------------------------------------------------------- points and covariance


def comparison_points(fit: dict[str, Any], source: str) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The points a comparison judges (module docstring) and their joint covariance C (n × n, of
    ln d_x), from a fit file (``fit`` written by ``depthwidth fit`` with ``point_correlation``).
    UserError when the fit has fewer than 3 such points or no bootstrap correlation."""
    every = [p for k in ("points", "not_fitted") for p in fit.get(k) or []]
    pts = sorted((p for p in every if p.get("status") in USABLE and p.get("sigma_ln_d_x")),
                 key=lambda p: p["L"])
    if len(pts) < 3:
        raise UserError(f"{source}: {len(pts)} transition point(s) with a crossing and an error; comparing "
                        "forms needs at least 3")
    pc = fit.get("point_correlation")
    if not isinstance(pc, dict):
        raise UserError(f"{source} holds no point_correlation (a fit written before it existed): refit it")
    order = [tuple(p) for p in pc["pairs"]]
    R_all = np.asarray(pc["corr"], dtype=float)
    try:
        idx = [order.index((p["L_s"], p["L_d"])) for p in pts]
    except ValueError:
        raise UserError(f"{source}: point_correlation does not cover every crossing pair") from None
    R = R_all[np.ix_(idx, idx)]
    s = np.array([p["sigma_ln_d_x"] for p in pts], dtype=float)
    return pts, R * np.outer(s, s)


# ---------------------------------------------------------------- fitting


def _jacobian(form: Form, L: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """∂f/∂θ at θ (n × k), by central differences (step 1e-6 relative)."""
    cols = []
    for i in range(len(theta)):
        h = 1e-6 * max(1.0, abs(theta[i]))
        up, dn = theta.copy(), theta.copy()
        up[i] += h
        dn[i] -= h
        cols.append((form.f(L, *up) - form.f(L, *dn)) / (2 * h))
    return np.stack(cols, axis=1)


def gls_fit(form: Form, L: np.ndarray, y: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """θ̂, its covariance (k × k) and χ² of ``form`` fitted to y (n,) at L (n,) with covariance
    C (n × n): ``curve_fit(sigma=C, absolute_sigma=True)`` from every starting point of the form,
    keeping the lowest χ². Raises UserError when no start converges."""
    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.optimize import curve_fit

    Ci = np.linalg.inv(C)
    best = None
    for p0 in form.start(L, y):
        try:
            theta, cov = curve_fit(form.f, L, y, p0=p0, sigma=C, absolute_sigma=True, maxfev=20000)
        except (RuntimeError, ValueError):
            continue
        r = y - form.f(L, *theta)
        chi2 = float(r @ Ci @ r)
        if np.all(np.isfinite(cov)) and (best is None or chi2 < best[2] - 1e-12):
            best = (np.asarray(theta, dtype=float), np.asarray(cov, dtype=float), chi2)
    if best is None:
        raise UserError(f"the {form.key} form did not converge on these points")
    return best


def _loo(form: Form, L: np.ndarray, y: np.ndarray, C: np.ndarray) -> list[dict[str, Any]]:
    """Leave-one-pair-out predictions (module docstring): per point its μ, √v, z and log-likelihood."""
    out = []
    for j in range(len(L)):
        keep = np.arange(len(L)) != j
        try:
            theta, cov, _ = gls_fit(form, L[keep], y[keep], C[np.ix_(keep, keep)])
        except UserError:
            out.append({"mu": None, "sd": None, "z": None, "loglik": None})
            continue
        Ck_inv = np.linalg.inv(C[np.ix_(keep, keep)])
        c = C[j, keep]
        J = _jacobian(form, L, theta)
        r = y[keep] - form.f(L[keep], *theta)
        mu = float(form.f(L[j:j + 1], *theta)[0] + c @ Ck_inv @ r)
        g = J[j] - c @ Ck_inv @ J[keep]
        v = float(C[j, j] - c @ Ck_inv @ c + g @ cov @ g)
        sd = math.sqrt(max(v, 1e-300))
        z = (float(y[j]) - mu) / sd
        out.append({"mu": mu, "sd": sd, "z": z, "loglik": -0.5 * (z * z + math.log(2 * math.pi * sd * sd))})
    return out


def _chi2_sf(chi2: float, dof: int) -> float | None:
    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.stats import chi2 as chi2_dist

    return float(chi2_dist.sf(chi2, dof)) if dof > 0 else None


def fit_form(form: Form, L: np.ndarray, y: np.ndarray, C: np.ndarray) -> dict[str, Any]:
    """Every statistic of one form on the points (module docstring), JSON-ready."""
    n, k = len(L), len(form.params)
    theta, cov, chi2 = gls_fit(form, L, y, C)
    dof = n - k
    se = np.sqrt(np.diag(cov))
    loo = _loo(form, L, y, C)
    held = [x["loglik"] for x in loo]
    return {
        "key": form.key, "formula": form.formula, "law": form.to_text(theta), "k": k,
        "params": {name: float(v) for name, v in zip(form.params, theta)},
        "stderr": {name: float(v) for name, v in zip(form.params, se)},
        "ci95": {name: [float(v - Z95 * s), float(v + Z95 * s)] for name, v, s in zip(form.params, theta, se)},
        "cov": cov.tolist(), "chi2": chi2, "dof": dof, "chi2_red": chi2 / dof if dof > 0 else None,
        "p_value": _chi2_sf(chi2, dof), "aic": chi2 + 2 * k,
        "aicc": chi2 + 2 * k + 2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else None,
        "bic": chi2 + k * math.log(n),
        "loo": [{"pair": None, **x} for x in loo],
        "heldout_loglik": float(sum(held)) if all(h is not None for h in held) else None,
        "fitted": [float(v) for v in form.f(L, *theta)],
    }


def _verdicts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Akaike weights, ΔAIC, and the exclusion / preference rule (module docstring), in place."""
    best = min(r["aic"] for r in rows)
    w = np.array([math.exp(-0.5 * (r["aic"] - best)) for r in rows])
    w = w / w.sum()
    for r, wi in zip(rows, w):
        r["delta_aic"] = r["aic"] - best
        r["aic_weight"] = float(wi)
        why = []
        if r["p_value"] is not None and r["p_value"] < EXCLUDE_P:
            why.append(f"fit p = {r['p_value']:.2g} < {EXCLUDE_P}")
        if r["delta_aic"] > EXCLUDE_DAIC:
            why.append(f"dAIC = {r['delta_aic']:.1f} > {EXCLUDE_DAIC:g}")
        r["excluded"] = bool(why)
        r["excluded_because"] = "; ".join(why) or None
    alive = [r for r in rows if not r["excluded"]]
    preferred = None
    if alive:
        top = min(alive, key=lambda r: r["aic"])
        if all(r is top or r["aic"] - top["aic"] > PREFER_DAIC for r in alive):
            preferred = top["key"]
    return {"surviving": [r["key"] for r in alive], "preferred": preferred,
            "rule": (f"excluded: fit p-value < {EXCLUDE_P} or dAIC > {EXCLUDE_DAIC:g}; one form preferred only "
                     f"when every other surviving form has dAIC > {PREFER_DAIC:g} (Burnham & Anderson 2002, "
                     "2.6); otherwise the surviving forms are reported side by side")}


def compare_forms(fit: dict[str, Any], source: str, forms: tuple[Form, ...] = FORMS) -> dict[str, Any]:
    """The comparison of ``forms`` on a fit file's transition points (module docstring), as the
    comparison file's dict (format ``depthwidth-form-comparison``, version 1). UserError as
    :func:`comparison_points` says, or when a form does not converge."""
    pts, C = comparison_points(fit, source)
    L = np.array([p["L"] for p in pts], dtype=float)
    y = np.array([p["ln_d_x"] for p in pts], dtype=float)
    rows = [fit_form(f, L, y, C) for f in forms]
    for r in rows:
        for x, p in zip(r["loo"], pts):
            x["pair"] = [p["L_s"], p["L_d"]]
    decision = _verdicts(rows)
    s = np.sqrt(np.diag(C))
    return {
        "format": COMPARE_FORMAT, "version": COMPARE_VERSION,
        "points": [{"pair": [p["L_s"], p["L_d"]], "L": p["L"], "ln_d_x": p["ln_d_x"], "d_x": p["d_x"],
                    "sigma_ln_d_x": p["sigma_ln_d_x"], "N_star": p["N_star"], "N_star_ci95": p["N_star_ci95"],
                    "bootstrap_fraction": p["bootstrap_fraction"], "fitted_by_law": bool(p.get("fitted"))}
                   for p in pts],
        "covariance": C.tolist(), "correlation": (C / np.outer(s, s)).tolist(),
        "forms": rows, **decision,
        "method": "GLS with the joint bootstrap covariance (fits.compare); leave-one-pair-out from the "
                  "Gaussian conditional; AIC/AICc/BIC up to a shared constant",
    }


def predict_pair(row: dict[str, Any], pair: tuple[int, int]) -> dict[str, Any]:
    """The transition (N*, 95 % interval) of ``pair`` under a fitted form (a ``forms`` row of a
    comparison; module docstring for the formula). N* in Kaplan parameters (12·L·d_x²)."""
    form = form_by_key(row["key"])
    theta = np.array([row["params"][p] for p in form.params], dtype=float)
    cov = np.asarray(row["cov"], dtype=float) * max(1.0, row["chi2_red"] or 1.0)
    L = math.sqrt(pair[0] * pair[1])
    g = _jacobian(form, np.array([L]), theta)[0]
    ln_d = float(form.f(np.array([L]), *theta)[0])
    ln_n = math.log(12.0 * L) + 2.0 * ln_d
    sigma = 2.0 * math.sqrt(max(float(g @ cov @ g), 0.0))
    return {"form": row["key"], "pair": list(pair), "L": L, "d_x": math.exp(ln_d), "ln_n_star": ln_n,
            "n_star": math.exp(ln_n), "sigma_ln_n_star": sigma,
            "ci95": [math.exp(ln_n - Z95 * sigma), math.exp(ln_n + Z95 * sigma)],
            "cov_used": "absolute x max(1, chi2_red)"}


def forms_path(fit_out: str) -> str:
    """Where ``fit --compare-forms`` writes the comparison: beside the fit, X.json -> X.forms.json."""
    return (fit_out[:-5] if fit_out.endswith(".json") else fit_out) + ".forms.json"
