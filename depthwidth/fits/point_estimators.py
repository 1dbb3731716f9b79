"""Each transition point under several estimators, with per-seed N* and exact crossing shares.

The registered rule of the project's transitions (:mod:`depthwidth.fits.transitions`: PCHIP curves
of the seed-mean loss against ln N, N* the last down-crossing, paired bootstrap) is one way to
read a depth pair's crossing. Beside it, per doubling pair of a results table:

    registered     PCHIP, last down-crossing (the fit's N*)
    first          PCHIP, first down-crossing
    linear         straight lines between the measured means, last down-crossing
    smooth         per depth, the curve loss = E + A·N^(-α) fitted to the seed means of every width
                   (scipy curve_fit; a saturating power law as in Kaplan et al. 2020, eq. 1.1),
                   N* where the deeper curve drops below the shallower one on the common N range

For each: N*, a 95 % interval and the crossing share from 1,000 paired-bootstrap replicates (the
same replicates for every estimator, the fit's ``paired`` resampling with its evaluation-set
term), the share's Monte Carlo error √(p(1−p)/B), and N* of every seed alone (the cells that
have that seed; None where the seed's curves do not cross).

Exact crossing share: where the union of seeds has at most :data:`EXACT_MAX_SEEDS`, the seed part
of the paired bootstrap is enumerated instead of sampled. A replicate draws n seeds with
replacement from n; the cell means depend only on how often each seed is drawn, so the
C(2n−1, n) compositions (462 for n = 6) with their multinomial probabilities n!/(∏cᵢ!)/nⁿ give
the share with no Monte Carlo error. This enumerates the seeds only (the evaluation-set chunk
draw has 32³² outcomes), so it is the share of the paired bootstrap without its chunk term.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.fits.transitions import (
    _DepthData,
    find_crossing,
    paired_bootstrap_means,
    paired_means_of_draws,
    select_pairs,
    union_seeds,
)

EXACT_MAX_SEEDS = 8
ESTIMATORS = ("registered", "first", "linear", "smooth")
_RULES = {"registered": ("pchip", "last"), "first": ("pchip", "first"), "linear": ("linear", "last")}


def _power_law(x, E, lnA, alpha):
    return E + np.exp(lnA - alpha * x)


def _quiet_curve_fit(*args, **kwargs):
    # scipy: ~0.8 s at import; only fitting pays it
    import warnings

    from scipy.optimize import OptimizeWarning, curve_fit

    with warnings.catch_warnings():  # 3 points, 3 parameters: no covariance, and none is used
        warnings.simplefilter("ignore", OptimizeWarning)
        return curve_fit(*args, **kwargs)


def smooth_curve(x: np.ndarray, y: np.ndarray, p0: np.ndarray | None = None) -> np.ndarray | None:
    """(E, ln A, α) of loss = E + A·N^(-α) fitted to mean losses y at x = ln N (None with fewer
    than 3 widths or no convergence). ``p0``: one starting point (a bootstrap replicate starts
    from the measured means' fit); otherwise three starts in α, keeping the best."""
    if len(x) < 3:
        return None
    E0 = float(y.min()) - 0.05
    starts = [p0] if p0 is not None else [
        (E0, float(np.log(max(y[0] - E0, 1e-6)) + a * x[0]), a) for a in (0.1, 0.3, 0.6)]
    best = None
    for start in starts:
        try:
            p, _ = _quiet_curve_fit(_power_law, x, y, p0=start, maxfev=5000)
        except (RuntimeError, ValueError):
            continue
        sse = float(np.sum((y - _power_law(x, *p)) ** 2))
        if best is None or sse < best[1]:
            best = (p, sse)
    return None if best is None else best[0]


def smooth_crossing(ps, xs, pd_, xd) -> float | str:
    """ln N* where the fitted deeper curve (params ``pd_``) drops below the shallower one (``ps``)
    on the common range of the widths' x = ln N: the last +→- sign change on a 400-point grid,
    refined by bisection; or the status string (deeper_worse_throughout, deeper_better_throughout,
    reversed, no_fit, no_overlap)."""
    if ps is None or pd_ is None:
        return "no_fit"
    lo, hi = max(xs.min(), xd.min()), min(xs.max(), xd.max())
    if not hi > lo:
        return "no_overlap"
    f = lambda x: _power_law(x, *pd_) - _power_law(x, *ps)  # noqa: E731
    g = np.linspace(lo, hi, 400)
    diff = f(g)
    down = np.nonzero((diff[:-1] > 0) & (diff[1:] <= 0))[0]
    if down.size == 0:
        if np.all(diff > 0):
            return "deeper_worse_throughout"
        return "deeper_better_throughout" if np.all(diff <= 0) else "reversed"
    a, b = g[down[-1]], g[down[-1] + 1]
    for _ in range(60):
        m = 0.5 * (a + b)
        a, b = (m, b) if f(m) > 0 else (a, m)
    return 0.5 * (a + b)


class _Smooth:
    """The smooth curve of each (depth, replicate), fitted once and shared by the pairs and
    estimators that need it; replicates start from the measured means' fit."""

    def __init__(self):
        self.cache: dict[tuple, Any] = {}

    def params(self, key, x, y, base=None):
        if key not in self.cache:
            self.cache[key] = smooth_curve(np.asarray(x), np.asarray(y), base)
        return self.cache[key]


def _estimate(name: str, xs, ys, xd, yd, smooth: tuple | None = None) -> float | str:
    """ln N* under estimator ``name`` for one pair of curves, or a status string. ``smooth``:
    (params of the shallow curve, params of the deep curve) when already fitted."""
    if name == "smooth":
        ps, pd_ = smooth if smooth is not None else (smooth_curve(np.asarray(xs), np.asarray(ys)),
                                                     smooth_curve(np.asarray(xd), np.asarray(yd)))
        return smooth_crossing(ps, np.asarray(xs), pd_, np.asarray(xd))
    curve, which = _RULES[name]
    c = find_crossing(xs, ys, xd, yd, curve, which)
    return c.x_star if c.x_star is not None else c.status


def _per_seed(name: str, s: _DepthData, d: _DepthData, seeds: list[int]) -> dict[str, float | None]:
    out = {}
    for seed in seeds:
        cols = []
        for dd in (s, d):
            keep = [i for i, sd in enumerate(dd.seeds) if seed in sd]
            cols.append((dd.x[keep], np.array([dd.losses[i][dd.seeds[i].index(seed)] for i in keep])))
        if min(len(cols[0][0]), len(cols[1][0])) < 2:
            out[str(seed)] = None
            continue
        v = _estimate(name, cols[0][0], cols[0][1], cols[1][0], cols[1][1])
        out[str(seed)] = math.exp(v) if isinstance(v, float) else None
    return out


def compositions(n: int):
    """Every way of drawing n seeds from n with replacement, as (counts, probability)."""
    logfact = [math.lgamma(k + 1) for k in range(n + 1)]
    for bars in itertools.combinations(range(2 * n - 1), n - 1):
        edges = (-1, *bars, 2 * n - 1)
        counts = [edges[i + 1] - edges[i] - 1 for i in range(n)]
        logp = logfact[n] - sum(logfact[c] for c in counts) - n * math.log(n)
        yield counts, math.exp(logp)


def exact_share(name: str, data: dict[int, _DepthData], Ls: int, Ld: int, cache: _Smooth | None = None) -> float | None:
    """The crossing share of the seed-paired bootstrap by exact enumeration (module docstring);
    None with more than EXACT_MAX_SEEDS seeds."""
    seeds = union_seeds(data)
    n = len(seeds)
    if n > EXACT_MAX_SEEDS or n < 2:
        return None
    cache = cache or _Smooth()
    comps = list(compositions(n))
    draws = np.array([np.repeat(seeds, c) for c, _ in comps])
    probs = np.array([p for _, p in comps])
    means = paired_means_of_draws(data, draws)
    share = 0.0
    for r in range(len(comps)):
        sm = None if name != "smooth" else tuple(
            cache.params(("exact", L, r), data[L].x, means[L][r], cache.params(("measured", L), data[L].x, data[L].y))
            for L in (Ls, Ld))
        v = _estimate(name, data[Ls].x, means[Ls][r], data[Ld].x, means[Ld][r], sm)
        share += probs[r] * isinstance(v, float)
    return float(share)


def point_estimators(table, *, pairs: str = "doubling", bootstrap: int = 1000, seed: int = 0,
                     exact: bool = True) -> dict[str, Any]:
    """Per depth pair of ``table`` and per estimator (module docstring): N*, its 95 % interval,
    the bootstrap crossing share with its Monte Carlo error, the exact seed-enumerated share
    (None beyond EXACT_MAX_SEEDS seeds or with ``exact=False``) and per-seed N*. UserError when
    ``table`` has no pair."""
    pair_list = select_pairs(table.depths(), pairs)
    if not pair_list:
        raise UserError(f"no {pairs} depth pairs among measured depths {table.depths()}")
    used = sorted({L for p in pair_list for L in p})
    data = {L: _DepthData(table, L) for L in used}
    means = paired_bootstrap_means(data, bootstrap, np.random.default_rng(seed))
    seeds = union_seeds(data)
    cache = _Smooth()

    def smooth(r, L):
        base = cache.params(("measured", L), data[L].x, data[L].y)
        return base if r is None else cache.params(("boot", L, r), data[L].x, means[L][r], base)

    rows = []
    for Ls, Ld in pair_list:
        s, d = data[Ls], data[Ld]
        for name in ESTIMATORS:
            sm = (lambda r, Ls=Ls, Ld=Ld: (smooth(r, Ls), smooth(r, Ld))) if name == "smooth" else (lambda r: None)
            v = _estimate(name, s.x, s.y, d.x, d.y, sm(None))
            xb = np.array([_estimate(name, s.x, means[Ls][r], d.x, means[Ld][r], sm(r)) for r in range(bootstrap)],
                          dtype=object)
            ok = np.array([isinstance(x, float) for x in xb])
            p = float(ok.mean())
            ci = np.exp(np.quantile(xb[ok].astype(float), [0.025, 0.975])).tolist() if ok.sum() > 1 else None
            rows.append({"pair": [Ls, Ld], "estimator": name,
                         "N_star": math.exp(v) if isinstance(v, float) else None,
                         "status": "crossing" if isinstance(v, float) else v, "ci95_of_crossing_replicates": ci,
                         "share": p, "share_mc_error": math.sqrt(p * (1 - p) / bootstrap),
                         "share_exact_seeds": exact_share(name, data, Ls, Ld, cache) if exact else None,
                         "per_seed": _per_seed(name, s, d, seeds)})
    return {"pairs": [list(p) for p in pair_list], "seeds": seeds, "bootstrap": bootstrap, "seed": seed,
            "estimators": list(ESTIMATORS), "rows": rows}
