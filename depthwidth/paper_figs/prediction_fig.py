"""fig7_prediction: a pre-registered prediction next to its measurement, on the law's own axes.

ln d_x against the assigned depth L (the axes of fig2): the law that made the prediction,
ln d_x = a + b·g(L), with its 95 % band from the fit's covariance (Levine et al. 2020, arXiv
2006.12467, experiments section; the band as in :func:`depthwidth.fits.predict.predict`); the
transition points it was fitted on; per predicted pair, the predicted width and its 95 % interval
(open diamond) and, where a measured fit holds the pair, the measured transition and its 95 %
bootstrap interval (filled square), each interval converted from N* to d_x by
ln d_x = (ln N* − ln 12L)/2 (Kaplan et al. 2020 non-embedding count, the fit's N). A measured
point whose interval is lopsided keeps its asymmetric bars: that is the verdict's caution
(:mod:`depthwidth.fits.predict`). Reads stored files only: the prediction, the fit it names
(its sha256 must still match) and the measured fits.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits.law import law_from_fit_dict, load_fit_file
from depthwidth.fits.predict import NO_SUCH_PAIR, Z95, predicting_fit, read_prediction, verdict
from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import COLORS, HEIGHT_IN, WIDTH_IN, figure_style, save
from depthwidth.units import format_count


def load(prediction_path: str, measured_paths: list[str]) -> dict[str, Any]:
    """The figure's inputs: {"prediction", "fit" (the predicting fit), "measured": [(path, fit)],
    "verdicts": {pair: resolved verdict row}}.
    UserError (one line) when a file is missing or malformed, or the predicting fit is not at the
    path the prediction names or no longer has the recorded sha256."""
    pred = read_prediction(prediction_path)
    where, fit = predicting_fit(pred, prediction_path)
    if len(set(measured_paths)) < len(measured_paths):
        raise UserError("--measured names a file twice")
    measured, seen, resolved = [], {}, {}
    for p in measured_paths:
        m = load_fit_file(p, f"--measured {p}")
        # a malformed or other-convention measured fit fails here, in one line
        rows = [v for v in verdict(pred, m, f"--measured {p}")
                if v.get("reason") != NO_SUCH_PAIR]
        if not rows:
            raise UserError(f"--measured {p} holds none of the predicted pairs "
                            f"({', '.join(f'({a},{b})' for a, b in (q['pair'] for q in pred['predictions']))})")
        for v in rows:
            pair = tuple(v["pair"])
            if pair in seen:
                raise UserError(f"--measured {seen[pair]} and {p} both hold the pair ({pair[0]},{pair[1]}): give one")
            seen[pair] = p
            if v["status"] == "resolved":
                resolved[pair] = v
        measured.append((p, m))
    return {"prediction": pred, "prediction_path": prediction_path, "fit": fit, "fit_path": where,
            "measured": measured, "verdicts": resolved}


def _ln_dx(n: float, L: float) -> float:
    return 0.5 * (math.log(n) - math.log(12.0 * L))


def prediction_vs_measurement(inputs: dict[str, Any]) -> tuple[Any, str]:
    """(figure, caption) of :func:`load`'s inputs (module docstring)."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt
    import numpy as np

    pred, fit = inputs["prediction"], inputs["fit"]
    law = law_from_fit_dict(fit, inputs["fit_path"])
    fitted = [p for p in fit.get("points", []) if p.get("fitted") and p.get("ln_d_x") is not None]
    rows = [(p, inputs["verdicts"].get(tuple(p["pair"]))) for p in pred["predictions"]]
    Ls = [p["L"] for p in fitted] + [p["L"] for p, _ in rows]
    x = np.linspace(0.7 * min(Ls), 1.15 * max(Ls), 200)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    y = law.ln_width(x, np)
    ax.plot(x, y, color=COLORS["fit"], label=f"law that predicted: {law.describe('.3f', '.4f', pretty=True)}")
    var = law.ln_width_var(x, np)
    if var is not None:
        se = np.sqrt(var)
        ax.fill_between(x, y - Z95 * se, y + Z95 * se, color=COLORS["fit"], alpha=0.15, lw=0,
                        label="its 95% band (fit covariance)")
    # every bar a 95 % interval: the fitted points' bootstrap intervals too (not ±1σ as in fig2)
    fy = [p["ln_d_x"] for p in fitted]
    ferr = [[y - _ln_dx(p["N_star_ci95"][0], p["L"]) if (p.get("N_star_ci95") or [None])[0] else 0.0
             for p, y in zip(fitted, fy)],
            [_ln_dx(p["N_star_ci95"][1], p["L"]) - y if (p.get("N_star_ci95") or [None, None])[1] else 0.0
             for p, y in zip(fitted, fy)]]
    ax.errorbar([p["L"] for p in fitted], fy, yerr=ferr, fmt="o", color=COLORS["neutral"],
                zorder=4, label="points it was fitted on (95% bootstrap interval)")
    for p in fitted:
        ax.annotate(f"({p['L_s']},{p['L_d']})", (p["L"], p["ln_d_x"]), xytext=(6, -3), textcoords="offset points",
                    fontsize=7.5, color=COLORS["neutral"])
    dx = 0.02 * (x[-1] - x[0])  # predicted left, measured right of the pair's depth
    summary = []
    for i, (p, v) in enumerate(rows):
        L, name = p["L"], f"({p['pair'][0]},{p['pair'][1]})"
        lo, hi = p["ci95"] or (p["n_star"], p["n_star"])
        yp = _ln_dx(p["n_star"], L)
        ax.errorbar([L - dx], [yp], yerr=[[yp - _ln_dx(lo, L)], [_ln_dx(hi, L) - yp]], fmt="D", mfc="white",
                    color=COLORS["levine2020"], zorder=5, label="predicted (95% interval)" if i == 0 else None)
        text = f"{name}: predicted {format_count(p['n_star'])}"
        if v is not None:
            ym = _ln_dx(v["measured_n_star"], L)
            mlo, mhi = v["measured_ci95"] or (None, None)
            err = [[ym - _ln_dx(mlo, L) if mlo else 0.0], [_ln_dx(mhi, L) - ym if mhi else 0.0]]
            ax.errorbar([L + dx], [ym], yerr=err, fmt="s", color=COLORS["theory"], zorder=5,
                        label="measured (95% bootstrap interval)" if all(r[1] is None for r in rows[:i]) else None)
            text += f", measured {format_count(v['measured_n_star'])} (×{v['ratio']:.2f})"
        summary.append(text)
        ax.annotate(name, (L - dx, yp), xytext=(-6, 0), textcoords="offset points", fontsize=7.5, ha="right",
                    va="center", color=COLORS["levine2020"])
    ax.text(0.02, 0.97, "\n".join(summary), transform=ax.transAxes, va="top", fontsize=7.5, color=COLORS["neutral"])
    ax.set_xlabel("depth L (layers; a pair at its geometric mean)" if pred["predictions"][0]["depth_convention"] == "geom"
                  else f"depth L (layers; depth convention {pred['predictions'][0]['depth_convention']})")
    ax.set_ylabel("ln d_x (transition width)")
    ax.set_title("Pre-registered prediction vs measurement")
    ax.set_xlim(x[0], x[-1])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7.5)
    sources = ", ".join(Path(p).as_posix() for p, _ in inputs["measured"]) or "none"
    caption = (f"The law of {inputs['fit_path']} (line, 95% band) and the points it was fitted on; per predicted "
               f"pair the prediction of {inputs['prediction_path']} and the measured transition ({sources}), "
               "N* converted to d_x = sqrt(N*/12L).")
    return fig, caption


def draw(prediction_path: str, measured_paths: list[str], out_dir: str) -> list[str]:
    """Load (:func:`load`), draw and save fig7 under ``out_dir``; the files written (PNG, PDF)."""
    inputs = load(prediction_path, measured_paths)
    with figure_style():
        fig, _ = prediction_vs_measurement(inputs)
        return [str(p) for p in save(fig, out_dir, name_of(prediction_vs_measurement))]
