"""exp_sawtooth: linear pieces and sup error of trained ReLU nets on g^k, from the stored records.

Reads the ``sawtooth`` records (:func:`depthwidth.fits.sawtooth.summarise`; nothing is trained
here) and draws three panels against the target depth k. Left: the exact piece count of every
trained net (one dot per seed, the line through the medians) on a log₂ axis, next to the 2^k
pieces of g^k (which both constructions reach) and the 2k + 1 that a one-hidden-layer net of
2k units can have at most (Telgarsky 2016, Lemma 2.1). Middle: the exact sup error
max |f − g^k| on [0, 1], with the line 1/2 that every net with fewer than 2^k pieces must reach
or exceed (:func:`depthwidth.theory.sawtooth.sup_error_lower_bound`). Right: the RMS error on the
dense grid, with 1/√12, the RMS of the constant 1/2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from depthwidth.fits.sawtooth import summarise
from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import HEIGHT_IN, WIDTH_IN, figure_style, save

STYLE = {  # arch: (label, colour, marker); Okabe & Ito colours as in style.COLORS
    "deep": ("deep, k×2 hidden (6k+1 params), trained", "#0072B2", "o"),
    "shallow_same": ("1 hidden layer, 2k units (same params), trained", "#D55E00", "s"),
    "shallow_exact": ("1 hidden layer, 2^k units, trained", "#009E73", "^"),
    "shallow_wide": ("1 hidden layer, 8·2^k units (≤ 512 for k ≥ 7), trained", "#CC79A7", "v"),
    "deep_wide": ("deep, k×8 hidden, trained", "#56B4E9", "D"),
}


def sawtooth_panels(rows: list[dict[str, Any]], jitter: float = 0.08) -> tuple[Any, str]:
    """(figure, caption) from :func:`~depthwidth.fits.sawtooth.summarise` rows (module doc)."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(WIDTH_IN * 2.1, HEIGHT_IN))
    ks = sorted({r["k"] for r in rows})
    ax.plot(ks, [2**k for k in ks], color="k", lw=1.2, label="2^k: g^k, and both exact constructions")
    ax.plot(ks, [2 * k + 1 for k in ks], color="#D55E00", ls=":", lw=1.2, label="2k + 1: most a 2k-unit layer has")
    for i, (arch, (label, col, mk)) in enumerate(STYLE.items()):
        rs = [r for r in rows if r["arch"] == arch]
        if not rs:
            continue
        dx = (i - (len(STYLE) - 1) / 2) * jitter
        for r in rs:
            ax.plot([r["k"] + dx] * r["n"], r["pieces"], mk, color=col, ms=4, alpha=0.6, mfc="none")
            bx.plot([r["k"] + dx] * r["n"], r["sup_errors"], mk, color=col, ms=4, alpha=0.6, mfc="none")
            cx.plot([r["k"] + dx] * r["n"], r["rms_errors"], mk, color=col, ms=4, alpha=0.6, mfc="none")
        ax.plot([r["k"] + dx for r in rs], [r["pieces_median"] for r in rs], color=col, marker=mk, label=label)
        bx.plot([r["k"] + dx for r in rs], [r["sup_median"] for r in rs], color=col, marker=mk, label=label)
        cx.plot([r["k"] + dx for r in rs], [r["rms_median"] for r in rs], color=col, marker=mk, label=label)
    cons = sorted({r["k"] for r in rows if r["arch"].endswith("construction") and r["sup_median"] == 0})
    if cons:
        bx.plot(cons, [0] * len(cons), "kx", ms=6, label="exact constructions (0)")
    bx.axhline(0.5, color="k", ls="--", lw=1.0, label="1/2: forced by < 2^k pieces")
    cx.axhline(12**-0.5, color="k", ls="--", lw=1.0, label="1/√12: RMS of the constant 1/2")
    ax.set_yscale("log", base=2)
    ax.set_ylim(0.7, 2.0 ** (max(ks) + 4))  # headroom for the legend
    for a in (ax, bx, cx):
        a.set_xlabel("k (target g^k, the k-fold hat map)")
        a.set_xticks(ks)
    ax.set_ylabel("linear pieces on [0, 1] (exact)")
    bx.set_ylabel("sup error max|f − g^k| on [0, 1] (exact)")
    bx.set_ylim(-0.03, max(0.6, *(max(r["sup_errors"]) for r in rows if r["sup_errors"])) + 0.1)
    ax.set_title("Pieces of the trained nets", fontsize=10)
    bx.set_title("Error of the trained nets", fontsize=10)
    cx.set_ylabel("RMS error on 65,537 points")
    cx.set_ylim(0, 0.32)
    cx.set_title("RMS error of the trained nets", fontsize=10)
    cx.legend(fontsize=7, loc="lower left")
    ax.legend(fontsize=7, loc="upper left")
    bx.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    caption = ("Exact linear-piece count (left, log2), exact sup error (middle) and grid RMS error (right) of ReLU nets trained on the k-fold "
               "hat map g^k, one open marker per seed, lines through the medians; the deep net has the exact "
               "construction's shape (k hidden layers of 2), the one-hidden-layer nets have 2k units (same "
               "parameters) or 2^k units; two over-parameterised controls: one hidden layer of 8·2^k units "
               "(512 for k = 7, 8) and k hidden layers of 8.")
    return fig, caption


def draw(recs: list[dict[str, Any]], out_dir: str | Path) -> list[str]:
    """Draw the figure from stored ``sawtooth`` records into ``out_dir`` (PNG + PDF); the paths.
    UserError (:func:`~depthwidth.fits.sawtooth.summarise`) on a malformed record."""
    rows = summarise(recs)
    with figure_style():
        fig, _ = sawtooth_panels(rows)
        return [str(p) for p in save(fig, out_dir, name_of(sawtooth_panels))]
