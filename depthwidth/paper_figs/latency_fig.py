"""latency_vs_depth: forward seconds and achieved FLOP/s against depth, from stored latency records.

Draws the groups of :func:`depthwidth.fits.latency.summarize` (records of kind "latency" read
from disk; nothing is timed here): left, the median forward time of each shape against its depth
L (whiskers: min and max of the repeats), one line for the stack alone and one for the whole
model with the head where measured, and the fitted latency model t = F/R + c·L (dashed, at the
measured shapes); right, the achieved FLOP/s (forward FLOPs, full T×T attention, over the
median time), each point labelled with the attention share of its FLOPs.
"""

from __future__ import annotations

from typing import Any

from depthwidth.fits.latency import describe
from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import COLORS, HEIGHT_IN, WIDTH_IN, figure_style, save


def _label(g: dict[str, Any]) -> str:
    return f"+ head (V = {g['rows'][0]['vocab_size']:,})" if g["with_head"] else "stack alone"


def latency_vs_depth(groups: list[dict[str, Any]]) -> tuple[Any, str]:
    """(figure, caption) for the summarised groups (module doc). Each group's rows must share
    one seq_len and batch (the first row's are the ones named in the title)."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_f) = plt.subplots(1, 2, figsize=(WIDTH_IN * 1.25, HEIGHT_IN * 0.85))
    colors = [COLORS["fit"], COLORS["levine2020"], COLORS["theory"], COLORS["neutral"]]
    for i, (g, col) in enumerate(zip(groups, colors)):
        rs = sorted(g["rows"], key=lambda r: r["n_layer"])
        L = [r["n_layer"] for r in rs]
        secs = [r["seconds"] for r in rs]
        err = [[s - r["seconds_min"] for s, r in zip(secs, rs)], [r["seconds_max"] - s for s, r in zip(secs, rs)]]
        ax_t.errorbar(L, secs, yerr=err, marker="o", color=col, label=_label(g))
        if g["model"]:
            m = g["model"]
            pred = {x["shape"]: x["predicted_s"] for x in m["residuals"]}
            ax_t.plot(L, [pred[f"{r['n_layer']}x{r['d_model']}"] for r in rs], ls="--", lw=1.0, color=col,
                      label=f"fit: {describe(m)}")
        ax_f.plot(L, [r["flops_per_s"] / 1e9 for r in rs], marker="o", color=col, label=_label(g))
        for r in rs:
            ax_t.annotate(f"{r['n_layer']}×{r['d_model']}", (r["n_layer"], r["seconds"]), textcoords="offset points",
                          xytext=(4, -10), fontsize=7, color=col)
            ax_f.annotate(f"attn {100 * r['attention_share']:.0f}%", (r["n_layer"], r["flops_per_s"] / 1e9),
                          textcoords="offset points", xytext=(4, 4 - 14 * i), fontsize=7, color=col)
    depths = sorted({r["n_layer"] for g in groups for r in g["rows"]})
    for ax in (ax_t, ax_f):
        ax.set_xscale("log")
        ax.set_xticks(depths, [str(x) for x in depths])
        ax.minorticks_off()
        ax.set_xlabel("depth L (layers; width falls as 1/√L at equal weights)")
    ax_t.set_ylabel("forward time (s, median)")
    ax_t.set_ylim(bottom=0)
    ax_f.set_ylabel("achieved GFLOP/s (forward)")
    ax_f.set_ylim(bottom=0)
    ax_t.legend(fontsize=7, loc="lower right")
    r0, g0 = groups[0]["rows"][0], groups[0]
    threads = f", {g0['threads']} thread{'s' if g0['threads'] != 1 else ''}" if str(g0["device"]).startswith("cpu") else ""
    fig.suptitle(f"Forward latency at equal weights: T = {r0['seq_len']}, B = {r0['batch']}, {g0['dtype']}, "
                 f"{g0['device']}{threads}", fontsize=9.5)
    fig.tight_layout()
    caption = ("Median forward time (min–max whiskers) and achieved FLOP/s against depth for equal-weight shapes; "
               "FLOPs = 2·12·L·d²·B·T + 4·L·T²·d·B (+ 2·V·d·B·T with the head); dashed: the fitted latency model.")
    return fig, caption


def draw(groups: list[dict[str, Any]], out_dir: str) -> list[str]:
    """Render :func:`latency_vs_depth` and save it (PNG + PDF) into ``out_dir``; returns the two paths."""
    with figure_style():
        fig, _ = latency_vs_depth(groups)
        return [str(p) for p in save(fig, out_dir, name_of(latency_vs_depth))]
