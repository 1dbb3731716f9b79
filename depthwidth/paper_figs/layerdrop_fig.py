"""exp_layerdrop: test-loss increase after deleting k contiguous layers, per offset, beside the width control.

Drawn from the stored ``layerdrop`` records only (:func:`depthwidth.fits.layerdrop.summarise`;
nothing is evaluated here). One line per run length k (k = 1, 2, 4): Δ test loss (nats/token,
deleted model minus the full model) against the first deleted block (0-based; block 0 is the
first after the embedding), error bars the paired evaluation-set standard error. At the right
edge, per k in the same colour, the width control (the same number of parameters removed as MLP
hidden units from every block): a band from the lowest to the highest random choice with its mean
as a line, and a diamond for the smallest-norm choice. The y axis is logarithmic when every Δ is
positive (else symmetric-log), so cheap and dear deletions both read.
"""

from __future__ import annotations

from typing import Any

from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import COLORS, HEIGHT_IN, WIDTH_IN, figure_style, save

K_COLORS = ("#0072B2", "#E69F00", "#CC79A7", "#009E73", "#D55E00")  # Okabe & Ito, one per k


def layerdrop_figure(summary: dict[str, Any]) -> tuple[Any, str]:
    """(figure, caption) of ``summary`` (:func:`depthwidth.fits.layerdrop.summarise`)."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.lines import Line2D

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.patches import Patch

    L = summary["n_layer"]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    values: list[float] = []
    for i, (k, row) in enumerate(sorted(summary["by_k"].items(), key=lambda kv: int(kv[0]))):
        c = K_COLORS[i % len(K_COLORS)]
        se = [s or 0.0 for s in row["se"]]
        ax.errorbar(row["offsets"], row["delta"], yerr=se, color=c, marker="o", ms=4,
                    label=f"delete {k} contiguous layer{'s' if int(k) > 1 else ''}")
        values += row["delta"]
        ctl = row.get("control")
        if ctl:
            values += _draw_control(ax, ctl, L, i, c)
    positive = all(v > 0 for v in values)
    ax.set_yscale("log" if positive else "symlog", **({} if positive else {"linthresh": 1e-3}))
    ax.set_xlim(-0.6, L + 1.6)
    ax.set_xticks(range(0, L, max(1, L // 8)))
    ax.axvline(L - 0.3, color=COLORS["neutral"], lw=0.8, ls=":")
    ax.text(L + 0.4, 0.02, "width\ncontrol", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=8)
    handles, _ = ax.get_legend_handles_labels()
    handles += [Patch(color=COLORS["neutral"], alpha=0.35, label="same params as MLP units, random (range, mean)"),
                Line2D([], [], marker="D", ls="", color=COLORS["neutral"], mfc="white",
                       label="same params as MLP units, smallest norm")]
    ax.set_xlabel("first deleted block (0 = nearest the embedding)")
    ax.set_ylabel("Δ test loss (nats/token)")
    ax.set_title(f"Layer deletion, L = {L}, d = {summary['d_model']}: Δ vs offset; width control at right")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    caption = (f"Test-loss increase after deleting k contiguous blocks of a trained {L}-layer char LM "
               f"(full model {summary['base_test_loss']:.4f} nats/token on {summary['test_sequences']} test "
               "windows), per first deleted block; at the right, the same parameter count removed as MLP "
               "hidden units of every block (band: random choices, line: their mean, diamond: smallest norm).")
    return fig, caption


def _draw_control(ax, ctl: dict[str, Any], L: int, i: int, color) -> list[float]:
    """The width control of one k at x = L + 0.4·i (module doc); returns the values drawn."""
    x = L + 0.4 * i
    drawn: list[float] = []
    if ctl["random"]:
        lo, hi = min(ctl["random"]), max(ctl["random"])
        ax.fill_between([x - 0.15, x + 0.15], [lo, lo], [hi, hi], color=color, alpha=0.35, lw=0)
        ax.plot([x - 0.18, x + 0.18], [ctl["random_mean"]] * 2, color=color, lw=2)
        drawn += ctl["random"]
    if ctl["norm"] is not None:
        ax.plot([x], [ctl["norm"]], marker="D", ms=5, color=color, mfc="white")
        drawn.append(ctl["norm"])
    return drawn


def draw(summary: dict[str, Any], out_dir) -> tuple[list, str]:
    """Render and save (PNG + PDF) into ``out_dir``; returns (paths, caption)."""
    with figure_style():
        fig, caption = layerdrop_figure(summary)
        return save(fig, out_dir, name_of(layerdrop_figure)), caption
