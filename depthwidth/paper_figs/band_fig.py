"""exp_band: loss excess over the best shape vs aspect ratio d/L at fixed N, next to Kaplan's band.

Draws the analysis of :func:`depthwidth.fits.band.analyse` (computed from stored records; nothing
is trained or fitted here): per budget, each shape's loss corrected to exactly the budget, as a
percentage above the best shape of that budget (ŷ_s/ŷ_best − 1), against d_model/n_layer on a
log axis, with its seed-paired bootstrap 95 % interval. The grey box is Kaplan et al.'s (2020,
§3.1, Fig. 5) statement: a few percent (drawn as 0–3 %, their example of a shape within 3 %)
across d/L 10–1000.
"""

from __future__ import annotations

from typing import Any

from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import HEIGHT_IN, WIDTH_IN, figure_style, save
from depthwidth.units import format_count

KAPLAN_BOX = ((10.0, 1000.0), (0.0, 3.0))  # (d/L range, loss excess in %)


def band_figure(result: dict[str, Any]) -> tuple[Any, str]:
    """(figure, caption) of the band (module docstring); ``result`` as returned by
    :func:`depthwidth.fits.band.analyse`."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    (x0, x1), (y0, y1) = KAPLAN_BOX
    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, color="0.6", alpha=0.25, lw=0,
                           label="Kaplan et al. 2020: a few % across d/L 10–1000"))
    cmap = matplotlib.colormaps["plasma"]
    budgets = result["budgets"]
    for i, b in enumerate(budgets):
        col = cmap(0.1 + 0.7 * i / max(1, len(budgets) - 1))
        rows = sorted(b["shapes"], key=lambda r: r["d_over_L"])
        x = [r["d_over_L"] for r in rows]
        y = [r["excess_pct"] for r in rows]
        lo = [r["excess_pct"] - r["excess_pct_ci"][0] if r["excess_pct_ci"] else 0.0 for r in rows]
        hi = [r["excess_pct_ci"][1] - r["excess_pct"] if r["excess_pct_ci"] else 0.0 for r in rows]
        ax.errorbar(x, y, yerr=[lo, hi], color=col, marker="o", lw=1.4,
                    label=f"N = {format_count(b['budget'])}: spread {b['spread_pct']:.1f} %, "
                          f"worst needs ×{b['multiplier']:.2f} N")
        for r in rows:
            ax.annotate(f"{r['n_layer']}×{r['d_model']}", (r["d_over_L"], r["excess_pct"]), fontsize=7,
                        color=col, xytext=(4, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlim(0.4, 1500)
    ax.set_ylim(bottom=-0.5)
    ax.set_xlabel("aspect ratio d_model / n_layer")
    ax.set_ylabel("test loss above the best shape at N (%)")
    ax.set_title("The shape band at fixed N (char Austen, 4,000 steps)")
    ax.legend(loc="upper right")
    caption = ("Loss of each shape, corrected to exactly the budget N along its own depth's L(N) power "
               "law, as % above the best shape at that N, vs d/L (log); bars: seed-paired bootstrap 95 % "
               "intervals; grey: Kaplan et al. 2020's 'few percent' across d/L 10-1000. Labels: L×d.")
    return fig, caption


def draw(result: dict[str, Any], out_dir: str) -> list[str]:
    """Draw :func:`band_figure` in the fixed style and save it as PNG + PDF under ``out_dir``;
    returns the two paths."""
    with figure_style():
        fig, _ = band_figure(result)
        return [str(p) for p in save(fig, out_dir, name_of(band_figure))]
