"""fig6_pair_delta: per depth pair, Δ test loss (deeper − shallower) vs N, from records only.

One panel per depth pair: a thin line per seed, the seed-mean Δ (thick), the 95 % bootstrap
band of that mean, the zero line, and the fit's N* with its 95 % interval. Δ < 0 means the deeper
network is better at that size; a transition is real where the band leaves zero on both sides of
N*. Data: :func:`depthwidth.fits.delta.pair_deltas` (the fit's own curves and resampling).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from depthwidth.fits.delta import pair_deltas
from depthwidth.fits.options import FitOptions
from depthwidth.paper_figs.style import COLORS, HEIGHT_IN, WIDTH_IN
from depthwidth.units import format_count


def _options(inputs, options: FitOptions) -> FitOptions:
    """The fit's own pairs and resampling when there is a fit file, so the band is its band."""
    o = (inputs.fit or {}).get("options") or {}
    try:
        return FitOptions(pairs=o.get("pairs", options.pairs), resample=o.get("resample", options.resample),
                          bootstrap=int(o.get("bootstrap", options.bootstrap)), seed=int(o.get("seed", options.seed)))
    except (TypeError, ValueError):
        return options


def pair_delta(inputs, options: FitOptions = FitOptions()) -> tuple[Any, str]:
    """The figure (module docstring) and its caption; never fits or writes."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.ticker import NullFormatter


    opts = _options(inputs, options)
    rows = pair_deltas(inputs.table, opts)
    n = max(1, len(rows))
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(WIDTH_IN, HEIGHT_IN * 0.8 * nrows), squeeze=False)
    points = {(p["L_s"], p["L_d"]): p for p in inputs.transitions()}
    seed_colors = plt.get_cmap("tab10")
    for ax in axes.flat[len(rows):]:
        ax.axis("off")
    if not rows:
        axes[0, 0].text(0.5, 0.5, f"no {opts.pairs} depth pair with overlapping sizes", ha="center",
                        transform=axes[0, 0].transAxes)
    for ax, r in zip(axes.flat, rows):
        N = np.asarray(r["N"])
        for i, (seed, d) in enumerate(sorted(r["seeds"].items())):
            if d is not None:
                ax.plot(N, d, lw=0.8, alpha=0.75, color=seed_colors(i % 10), label=f"seed {seed}")
        ax.fill_between(N, r["band"][0], r["band"][1], color=COLORS["fit"], alpha=0.2, lw=0,
                        label=f"95% band ({opts.resample})")
        ax.plot(N, r["mean"], color="black", lw=1.8, label="seed mean")
        ax.axhline(0.0, color=COLORS["neutral"], lw=0.8)
        p = points.get(tuple(r["pair"]))
        title = f"L{r['pair'][0]}→L{r['pair'][1]}"
        if p and p.get("N_star"):
            ci = p.get("N_star_ci95") or [None, None]
            ax.axvspan(ci[0] or N[0], ci[1] or N[-1], color=COLORS["transition"], alpha=0.12, lw=0)
            ax.axvline(p["N_star"], color=COLORS["transition"], ls="--", lw=1.1)
            title += f": N* {format_count(p['N_star'])}"
        elif p:
            title += f": {p.get('status', '').replace('_', ' ')}"
        ax.set_title(title, fontsize=9)
        ax.set_xscale("log")
        ticks = np.geomspace(N[0], N[-1], 3)  # the range's ends and middle: log minor labels collide
        ax.set_xticks(ticks, [format_count(t) for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(labelsize=7)
        ax.set_xlabel("N = 12·L·d²", fontsize=8)
    axes[0, 0].set_ylabel("Δ test loss, deeper − shallower\n(nats/token)", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=7,
                   bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    caption = (f"Loss gap Δ = deeper − shallower at equal N per depth pair ({opts.pairs} pairs): per seed, the "
               f"seed mean and its 95% {opts.resample} bootstrap band ({opts.bootstrap} replicates); dashed: "
               "the fit's N* with its 95% interval. Below zero the deeper network is better.")
    return fig, caption
