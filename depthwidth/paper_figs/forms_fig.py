"""fig8_law_forms: every law form's curve of the transition width against depth, with its 95 %
band, the measured transition points it was fitted on and, where a forms prediction is given, each
form's predicted interval at the new pair (and the measured point once a fit holds it).

Axes as fig2 (ln d_x against the assigned depth L). The forms and their fit are those of
:mod:`depthwidth.fits.compare` (generalised least squares with the points' joint bootstrap
covariance); a form's band is ±1.96·√(g Σθ gᵀ) of ln d_x (delta method, g = ∂f/∂θ, Σθ scaled
by max(1, χ²/dof) as the predictions are). Predicted and measured N* are converted to d_x by
ln d_x = (ln N* − ln 12L)/2 (Kaplan et al. 2020's non-embedding N = 12·L·d², the fit's N).
Reads stored files only.
"""

from __future__ import annotations

import math
from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits.compare import COMPARE_FORMAT, form_by_key
from depthwidth.fits.law import load_fit_file
from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import COLORS, figure_style, save

_FORM_COLORS = {"constant": "#999999", "linear-depth": COLORS["levine2020"], "log-depth": COLORS["fit"],
                "saturating": COLORS["theory"]}


def load(comparison_path: str, prediction_path: str | None = None,
         measured_path: str | None = None) -> dict[str, Any]:
    """The figure's inputs: the comparison file, optionally a forms prediction and a measured fit.
    UserError (one line) for a file of the wrong kind."""
    cmp = load_fit_file(comparison_path, f"--comparison {comparison_path}")
    if not isinstance(cmp, dict) or cmp.get("format") != COMPARE_FORMAT:
        raise UserError(f"--comparison {comparison_path}: not a form comparison (`fit --compare-forms` writes one)")
    pred = None
    if prediction_path:
        # numpy/scipy: only when a prediction is drawn
        from depthwidth.fits.predict_forms import read_forms_prediction

        pred = read_forms_prediction(prediction_path)
    measured = load_fit_file(measured_path, f"--measured {measured_path}") if measured_path else None
    return {"comparison": cmp, "comparison_path": comparison_path, "prediction": pred,
            "prediction_path": prediction_path, "measured": measured}


def _ln_dx(n: float, L: float) -> float:
    return 0.5 * (math.log(n) - math.log(12.0 * L))


def _jacobian_exact(form, x, theta):
    """∂f/∂θ (n × k) by the complex step, Im f(θ + i·h·e_j) / h (Squire & Trapp 1998): exact to
    rounding, since nothing is subtracted. The comparison's central differences (step 1e-6) carry
    ~1e-10 of rounding noise that moves with the CPU's exp/log, and that was enough to change
    the last digit of 24 band coordinates in the PDF on another host."""
    import numpy as np

    h = 1e-30
    cols = []
    for j in range(len(theta)):
        t = theta.astype(complex)
        t[j] += 1j * h
        cols.append(np.imag(form.f(x, *t)) / h)
    return np.stack(cols, axis=1)


def _band(row: dict[str, Any], x):
    # numpy: only when drawing
    import numpy as np

    form = form_by_key(row["key"])
    theta = np.array([row["params"][p] for p in form.params], dtype=float)
    cov = np.asarray(row["cov"], dtype=float) * max(1.0, row["chi2_red"] or 1.0)
    y = form.f(x, *theta)
    J = _jacobian_exact(form, x, theta)
    half = 1.959963984540054 * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", J, cov, J), 0.0))
    return y, half


def _predictions(ax, inputs: dict[str, Any]) -> list[str]:
    """Each form's predicted interval (open markers, side by side) and the measured point."""
    notes = []
    for pp in (inputs["prediction"] or {}).get("predictions", []):
        L = pp["L"]
        forms = [f for f in pp["forms"]]
        for i, f in enumerate(forms):
            dx = 0.09 * (i - (len(forms) - 1) / 2)
            y = _ln_dx(f["n_star"], L)
            lo, hi = (_ln_dx(v, L) for v in f["ci95"])
            ax.errorbar([L + dx], [y], yerr=[[y - lo], [hi - y]], fmt="D", mfc="white",
                        color=_FORM_COLORS.get(f["form"], COLORS["neutral"]), zorder=5,
                        label=f"predicted ({pp['pair'][0]},{pp['pair'][1]}), 95%, colour of its form" if i == 0 else None)
        notes.append(f"({pp['pair'][0]},{pp['pair'][1]}) predicted, one diamond per form")
        meas = inputs["measured"]
        pts = [p for k in ("points", "not_fitted") for p in (meas or {}).get(k) or []
               if [p.get("L_s"), p.get("L_d")] == pp["pair"] and p.get("N_star")]
        if pts:
            p = pts[0]
            y = _ln_dx(p["N_star"], L)
            ci = p.get("N_star_ci95") or [None, None]
            err = [[y - _ln_dx(ci[0], L) if ci[0] else 0.0], [_ln_dx(ci[1], L) - y if ci[1] else 0.0]]
            ax.errorbar([L + 0.3], [y], yerr=err, fmt="s", color=COLORS["neutral"], zorder=6, label="measured (new pair)")
    return notes


def forms_figure(inputs: dict[str, Any]) -> tuple[Any, str]:
    """Draw fig8 from :func:`load`'s inputs; returns (figure, caption)."""
    # matplotlib and numpy: only when drawing
    import matplotlib.pyplot as plt
    import numpy as np

    cmp = inputs["comparison"]
    pts = cmp["points"]
    L_pts = [p["L"] for p in pts]
    L_max = max([*L_pts, *(pp["L"] for pp in (inputs["prediction"] or {}).get("predictions", []))]) + 0.6
    x = np.linspace(1.0, L_max, 200)
    fig, ax = plt.subplots()
    for row in cmp["forms"]:
        y, half = _band(row, x)
        c = _FORM_COLORS.get(row["key"], COLORS["neutral"])
        status = "excluded" if row["excluded"] else f"AIC weight {row['aic_weight']:.2f}"
        ax.plot(x, y, color=c, ls="--" if row["excluded"] else "-", label=f"{row['key']}: {row['law']} ({status})")
        if not row["excluded"]:
            ax.fill_between(x, y - half, y + half, color=c, alpha=0.12, lw=0)
    s = [p["sigma_ln_d_x"] for p in pts]
    ax.errorbar(L_pts, [p["ln_d_x"] for p in pts], yerr=[1.96 * v for v in s], fmt="o", color="black", zorder=6,
                label="measured transitions (95%)")
    for p in pts:
        ax.annotate(f"({p['pair'][0]},{p['pair'][1]})", (p["L"], p["ln_d_x"]), xytext=(5, -10),
                    textcoords="offset points", fontsize=7.5)
    notes = _predictions(ax, inputs)
    ax.set_xlabel("depth L (layers; a pair at its geometric mean)")
    ax.set_ylabel("ln d_x (transition width)")
    ax.set_title("Which law? Every form on the same transition points")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1, fontsize=7.5)
    caption = (f"The forms of {inputs['comparison_path']} (GLS with the joint bootstrap covariance; bands 95%, "
               "excluded forms dashed) and the transition points; " + ("; ".join(notes) or "no prediction drawn") + ".")
    return fig, caption


def draw(comparison_path: str, prediction_path: str | None, measured_path: str | None, out_dir: str) -> list[str]:
    """Load, draw and save fig8 under ``out_dir``; the files written (PNG, PDF)."""
    inputs = load(comparison_path, prediction_path, measured_path)
    with figure_style():
        fig, _ = forms_figure(inputs)
        return [str(p) for p in save(fig, out_dir, name_of(forms_figure))]
