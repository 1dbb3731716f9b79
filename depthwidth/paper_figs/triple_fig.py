"""exp_triple: test loss of the equal-weight shapes against depth, with the half-budget control.

Draws the dict of :func:`depthwidth.fits.triple.analyse` (computed from stored records; nothing
is trained or fitted here): for each shape of the triple, one small marker per seed and the
mean ± its standard error over seeds (ddof=1); the half-budget control (the middle depth at
about N/2) the same way in another colour. x = depth L on a log axis, each shape labelled with
its width and aspect ratio d/L. Two brackets on the right compare the triple's spread
(max − min of its means) with the half-budget gap (control − middle, seed-paired).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import COLORS, HEIGHT_IN, WIDTH_IN, figure_style, save
from depthwidth.units import format_count

JITTER = 0.035  # per-seed markers are spread by this much in log10(L) so they do not hide each other


def _points(ax, row: dict[str, Any], color: str, marker: str, label: str) -> None:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    L, ys = row["n_layer"], row["losses"]
    offs = (np.arange(len(ys)) - (len(ys) - 1) / 2) * JITTER
    ax.scatter(L * 10 ** offs, ys, s=14, color=color, alpha=0.55, marker=marker, lw=0, zorder=2)
    ax.errorbar([L], [row["mean"]], yerr=[row["sem"] or 0.0], fmt=marker, ms=7, color=color, mfc="white",
                mew=1.6, elinewidth=1.4, capsize=4, zorder=3, label=label)


def _bracket(ax, x: float, lo: float, hi: float, text: str, color: str) -> None:
    ax.annotate("", xy=(x, lo), xytext=(x, hi), arrowprops={"arrowstyle": "|-|", "color": color, "lw": 1.2,
                                                             "shrinkA": 0, "shrinkB": 0, "mutation_scale": 3})
    ax.text(x * 1.08, (lo + hi) / 2, text, color=color, va="center", ha="left", fontsize=8)


def triple_figure(res: dict[str, Any]) -> tuple[Any, str]:
    """(figure, caption) of an :func:`~depthwidth.fits.triple.analyse` result (module docstring)."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    rows, ctl = res["shapes"], res.get("control")
    ax.plot([r["n_layer"] for r in rows], [r["mean"] for r in rows], color=COLORS["fit"], lw=1.0, alpha=0.6, zorder=1)
    _points_all(ax, rows, ctl, res)
    Ls = [r["n_layer"] for r in rows]
    ax.set_xscale("log")
    ax.set_xticks(Ls, [f"L = {r['n_layer']}\nd = {r['d_model']}\nd/L = {r['aspect']:g}" for r in rows])
    ax.minorticks_off()
    ax.set_xlim(min(Ls) / 1.6, max(Ls) * 3.2)
    tm = [r["mean"] for r in rows]
    x_b = max(Ls) * 1.35
    _bracket(ax, x_b, min(tm), max(tm), f"spread\n{res['spread']:.4f}", COLORS["fit"])
    if ctl and res.get("half_gap"):
        mid = next(r for r in rows if [r["n_layer"], r["d_model"]] == res["middle"])
        _bracket(ax, x_b * 1.55, mid["mean"], mid["mean"] + res["half_gap"]["mean"],
                 f"halving N\n{res['half_gap']['mean']:.4f}", COLORS["levine2020"])
    ax.set_xlabel("depth L (log scale), width d, aspect ratio d/L")
    ax.set_ylabel("test loss (nats/char)")
    per = "/".join(str(len(r["seeds"])) for r in rows)
    ax.set_title(f"Equal-weight shapes at N = 12·L·d² = {format_count(res['N'])}; seeds per shape {per}, "
                 f"brackets on common seed(s) {', '.join(map(str, res['seeds']))}",
                 fontsize=10)
    ax.legend(fontsize=7.5, loc="upper left")
    fig.tight_layout()
    caption = (f"Test loss of {len(rows)} shapes with the same non-embedding count N = {format_count(res['N'])} "
               "(small markers: seeds; open markers: mean ± standard error over seeds)"
               + (f", and the middle depth at {res['control_N_ratio']:.3f}× N (half-budget control)" if ctl else "")
               + ". Brackets: the spread of the shape means and the loss cost of halving N. A seed's shift is "
               "shared by every shape (same init seed and batch order), so the seed-paired differences "
               "(triple.json) are tighter than these unpaired bars.")
    return fig, caption


def _points_all(ax, rows, ctl, res) -> None:
    for i, r in enumerate(rows):
        _points(ax, r, COLORS["fit"], "o", f"equal N = {format_count(res['N'])}" if i == 0 else None)
    if ctl:
        _points(ax, ctl, COLORS["levine2020"], "s",
                f"L = {ctl['n_layer']}, d = {ctl['d_model']}: N = {format_count(ctl['N'])} "
                f"({res['control_N_ratio']:.3f}×): half-budget control")


def draw(res: dict[str, Any], out_dir: str | Path) -> list[str]:
    """Draw the figure of ``res`` into ``out_dir`` (PNG + PDF); returns the two paths."""
    with figure_style():
        fig, _ = triple_figure(res)
        return [str(p) for p in save(fig, out_dir, name_of(triple_figure))]
