"""Per depth pair, the loss gap Δ(N) = loss(deeper) − loss(shallower) at equal size: the view that
shows whether a transition is real (Levine et al. 2020, arXiv 2006.12467, experiments section:
N* is where Δ goes from + to −).

Δ is evaluated on a grid of x = ln N over the pair's common range, from the same PCHIP curves in
ln N that :mod:`depthwidth.fits.transitions` uses (so the seed-mean Δ crosses zero exactly at the
fit's N*): per seed (each depth's losses of that one seed, on the cells that have it), for the
seed means, and for every bootstrap replicate of the means (the fit's resampling, e.g. seed-paired
with test-set chunks), whose 2.5–97.5 percentiles at each x are the band.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from depthwidth.fits.options import FitOptions
from depthwidth.fits.transitions import _DepthData, bootstrap_means, paired_bootstrap_means, select_pairs

GRID = 80  # points of the ln N grid per pair: smooth at figure scale


def _curve(x: np.ndarray, y: np.ndarray, xs: np.ndarray) -> np.ndarray:
    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.interpolate import PchipInterpolator

    return PchipInterpolator(x, y, extrapolate=False)(xs)


def _seed_curve(dd: _DepthData, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(ln N, loss) of one seed over the cells of this depth that have it."""
    xs, ys = [], []
    for x, y, sd in zip(dd.x, dd.losses, dd.seeds):
        if seed in sd:
            xs.append(x)
            ys.append(y[sd.index(seed)])
    return np.asarray(xs), np.asarray(ys)


def pair_deltas(table, options: FitOptions = FitOptions()) -> list[dict[str, Any]]:
    """Δ(N) of every depth pair of ``table`` (a :class:`~depthwidth.fits.table.ResultsTable`).

    Returns per pair {"pair": [L_s, L_d], "N": grid (parameters), "mean": Δ of the seed means,
    "band": [lo, hi] (2.5/97.5 percentiles over ``options.bootstrap`` replicates of
    ``options.resample``), "seeds": {seed: Δ or None when the seed has < 2 cells at a depth}},
    Δ in nats/token (NaN where a seed's curve does not reach); pairs whose N ranges do not overlap
    or with < 2 widths at a depth are left out. Raises UserError for bad options.
    """
    pairs = select_pairs(table.depths(), options.pairs)
    used = sorted({L for p in pairs for L in p})
    data = {L: _DepthData(table, L) for L in used}
    data = {L: dd for L, dd in data.items() if len(dd.x) >= 2}
    rng = np.random.default_rng(options.seed)
    if options.resample == "paired":
        means = paired_bootstrap_means(data, options.bootstrap, rng)
    else:
        means = bootstrap_means(data, options.bootstrap, rng, pooled=options.resample.startswith("pooled"))
    out = []
    for Ls, Ld in pairs:
        if Ls not in data or Ld not in data:
            continue
        s, d = data[Ls], data[Ld]
        lo, hi = max(s.x[0], d.x[0]), min(s.x[-1], d.x[-1])
        if not hi > lo:
            continue
        xs = np.linspace(lo, hi, GRID)
        boot = np.stack([_curve(d.x, means[Ld][r], xs) - _curve(s.x, means[Ls][r], xs)
                         for r in range(options.bootstrap)])
        seeds = sorted({k for sd in s.seeds + d.seeds for k in sd})
        per = {}
        for k in seeds:
            (xs_s, ys_s), (xs_d, ys_d) = _seed_curve(s, k), _seed_curve(d, k)
            per[k] = (_curve(xs_d, ys_d, xs) - _curve(xs_s, ys_s, xs)).tolist() \
                if len(xs_s) >= 2 and len(xs_d) >= 2 else None
        out.append({"pair": [Ls, Ld], "N": np.exp(xs).tolist(),
                    "mean": (_curve(d.x, d.y, xs) - _curve(s.x, s.y, xs)).tolist(),
                    "band": np.quantile(boot, [0.025, 0.975], axis=0).tolist(), "seeds": per})
    return out
