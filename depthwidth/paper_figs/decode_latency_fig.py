"""decode_latency_vs_depth: milliseconds per generated token against depth at fixed weights, from records.

Draws the groups of :func:`depthwidth.fits.latency_decode.summarize` (records of kind
"latency_decode" read from disk; nothing is timed here): for each budget of non-embedding
weights 12·L·d², the median step time of each shape against its depth L (whiskers: min and max
over repeats), the fitted decode-latency model at the measured shapes (dashed), and the depth
the published law (Levine et al. 2020, ln d_x = 5.039 + 0.0555·L) calls optimal for that budget
(dotted vertical line; none for a budget the law does not answer). ``budget_ms``: a per-token budget drawn as a horizontal line (as
``query --max-ms-per-token`` takes it).
"""

from __future__ import annotations

from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits import projections as P
from depthwidth.fits.latency_decode import describe
from depthwidth.fits.law import load_law
from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import COLORS, HEIGHT_IN, WIDTH_IN, figure_style, save
from depthwidth.units import format_count


def decode_latency_vs_depth(groups: list[dict[str, Any]], budget_ms: float | None = None) -> tuple[Any, str]:
    """(figure, caption) for the summarised groups (module doc): one panel per group."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    law = load_law("levine2020", "auto")
    fig, axes = plt.subplots(1, len(groups), figsize=(WIDTH_IN * 0.75 * len(groups), HEIGHT_IN * 0.85), squeeze=False)
    colors = [COLORS["fit"], COLORS["levine2020"], COLORS["theory"], COLORS["neutral"]]
    for ax, g in zip(axes[0], groups):
        budgets = sorted({r["n_layer"] * r["d_model"] ** 2 for r in g["rows"]})
        pred = {x["shape"]: x["predicted_s"] for x in g["model"]["residuals"]} if g["model"] else {}
        for b, col in zip(budgets, colors):
            rs = sorted((r for r in g["rows"] if r["n_layer"] * r["d_model"] ** 2 == b), key=lambda r: r["n_layer"])
            L, ms = [r["n_layer"] for r in rs], [1e3 * r["seconds_per_token"] for r in rs]
            err = [[m - 1e3 * r["seconds_per_token_min"] for m, r in zip(ms, rs)],
                   [1e3 * r["seconds_per_token_max"] - m for m, r in zip(ms, rs)]]
            ax.errorbar(L, ms, yerr=err, marker="o", color=col, label=f"12·L·d² = {format_count(12 * b)}")
            if pred:
                ax.plot(L, [1e3 * pred[f"{r['n_layer']}x{r['d_model']}"] for r in rs], ls="--", lw=1.0, color=col)
            try:
                L_opt = P.query_budget(12 * b, law, vocab=0, round_width=128, n_head=None, level=0.95, samples=100,
                                       seed=0)["optimal_depth"]
                ax.axvline(L_opt, ls=":", lw=1.0, color=col, label=f"law's optimum L = {L_opt:.1f}")
            except UserError:  # a budget outside what the law answers (below one optimal layer): no line
                pass
            for r, m in zip(rs, ms):
                ax.annotate(f"{r['n_layer']}×{r['d_model']}", (r["n_layer"], m), textcoords="offset points",
                            xytext=(4, -10), fontsize=7, color=col)
        if budget_ms is not None:
            ax.axhline(budget_ms, color=COLORS["neutral"], lw=1.0, label=f"budget {budget_ms:g} ms/token")
        ax.set_xscale("log")
        depths = sorted({r["n_layer"] for r in g["rows"]})
        ax.set_xticks(depths, [str(x) for x in depths])
        ax.minorticks_off()
        ax.set_xlabel("depth L (layers; width falls as 1/√L at equal weights)")
        ax.set_ylabel("decode step (ms per token, median)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="upper right")
        threads = f", {g['threads']} thread(s)" if str(g["device"]).startswith("cpu") else ""
        model = f"\nfit: {describe(g['model'])}" if g["model"] else ""
        ax.set_title(f"B = {g['batch']}, context {g['context']}, {g['dtype']}, {g['device']}{threads}{model}",
                     fontsize=8)
    fig.tight_layout()
    caption = ("Median milliseconds per generated token (KV-cache decode step, whole LM with its head; min–max "
               "whiskers over repeats) against depth at fixed non-embedding weights 12·L·d²; dashed: the fitted "
               "decode-latency model; dotted: the depth Levine et al. (2020)'s law calls optimal for that budget.")
    return fig, caption


def draw(groups: list[dict[str, Any]], out_dir: str, budget_ms: float | None = None) -> list[str]:
    """Render :func:`decode_latency_vs_depth` and save it (PNG + PDF) into ``out_dir``; returns the paths."""
    with figure_style():
        fig, _ = decode_latency_vs_depth(groups, budget_ms)
        return [str(p) for p in save(fig, out_dir, name_of(decode_latency_vs_depth))]
