"""Transition points: the size N* at which a deeper network starts to beat a shallower one.

Levine et al. 2020 (arXiv 2006.12467 v3, experiments) train, for each depth, a sweep of widths,
and locate for a depth pair (L_s < L_d) the size where the deeper network's test loss goes from
above to below the shallower network's at equal N = 12·L·d² (Kaplan et al. 2020).

Curve model
-----------
Per depth, the mean test loss over seeds is interpolated against x = ln N by a monotone
piecewise-cubic Hermite interpolant (``scipy.interpolate.PchipInterpolator``, Fritsch–Carlson).
Chosen over a fitted per-depth saturating power law E + A·N^(-α) because it (1) assumes no
functional form for the small sweeps this project runs (3 parameters per depth would leave few
degrees of freedom, and the power law is a poor description of under-trained small models),
(2) passes through the measured means and, being shape-preserving, adds no wiggles between them,
so every crossing it reports is bracketed by measured points, and (3) is never evaluated outside
the measured range (``extrapolate=False``). Its cost is that noise in the means moves the curve;
the bootstrap below measures exactly that.

Crossing
--------
On the overlap of the two depths' N ranges, the difference Δ(x) = f_deep(x) - f_shallow(x) is a
cubic between consecutive knots of either curve; it is rebuilt exactly as one cubic Hermite
spline on the union of knots (values and slopes of both PCHIPs there) and all its real roots
found with ``PPoly.roots``. Sign changes classify the pair (``status``):

    crossing                  one change, from + to -: N* = that root
    multiple                  several changes (noise, or a real non-monotone gap): N* = the last
                              +→- change (the largest N where the deeper curve drops below); flagged
    deeper_worse_throughout   Δ > 0 on the whole overlap: the transition, if any, lies above the
                              largest common N (no N*, never extrapolated)
    deeper_better_throughout  Δ < 0 on the whole overlap: the transition lies below the smallest
                              common N
    reversed                  only -→+ changes: the deeper network wins small and loses large
    no_overlap                the depths' N ranges do not overlap
    too_few_widths            a depth has fewer than 2 usable widths

Uncertainty
-----------
Bootstrap with a fixed seed. ``paired`` (the default) resamples what the runs share: a seed fixes
the initialisation and the batch order of *every* shape, so one replicate draws n seeds with
replacement (n = the number of seeds) and uses that same draw in every cell, each cell's mean
becoming its measured mean plus the mean of its drawn seeds' residuals (rescaled by
sqrt(n/(n-1)), as below). When every run records ``test_loss_chunks`` (32 consecutive groups
of its test sequences), the replicate also redraws the 32 groups with replacement, the same
groups for every run, and shifts each run's loss by the mean of the drawn groups minus the mean
of all groups: the evaluation set's share of the uncertainty. Paired differences between depths
are far less noisy than unpaired ones (the CPU audit: per-seed spread of Δ 0.0046 paired vs
0.013 unpaired), and this is what the paired draw preserves.

The older, unpaired modes: each replicate redraws every (depth, width) cell's mean as the
measured mean plus the mean of n draws with replacement (n = the cell's seed count) from seed
residuals (deviations from the cell means, rescaled by sqrt(n/(n-1)) to undo the plain
bootstrap's small-sample bias), then recomputes the curves and N*. ``resample`` says where the
residuals come from:

    pooled            all cells of the same depth (noise assumed alike across widths of a depth)
    seeds             the cell's own seeds only (the literal seed bootstrap)
    ...+widths        also redraw each depth's set of widths with replacement (distinct ones kept)

Pooled was the default before paired: with the 3 seeds per cell of Levine et al. a cell's own
spread has 2 degrees of freedom and the per-point errors swing by factors of several between
realizations. Measured on 60 realizations of the synthetic sweep (depths 2..32, 3 seeds, 200 replicates):
the mean bootstrap sigma matched the true spread of ln N* to within 5% for pooled (0.95–1.04)
and the law's 95% intervals covered the true a and b in 95% of cases; with ``seeds`` the
coverage was 87%.

Replicates without a crossing are counted, not dropped: one whose deeper curve is worse on the
whole overlap stands for N* above the range (+∞), better throughout for N* below it (−∞), any
other outcome (reversed, several crossings in the wrong order) for "undefined" and counts
against the point. The 95% interval is the 2.5–97.5 percentiles of that extended sample; a
bound at ±∞ is reported as open (``N_star_ci95`` holds null there and ``ci95_open`` says
which side). The point's error ``sigma_ln_N_star`` is half the 16–84 percentile range of the
same sample (the standard deviation for a normal distribution, robust to the tails), null
when that range is unbounded. ``bootstrap_fraction`` is the share of replicates with a
crossing; a point below :data:`MIN_FRACTION` (95%) is reported but not fitted.
Replicates are shared across pairs (same redrawn cells), so a whole-law bootstrap
can refit them (see lawfit).

Depth assigned to a point
-------------------------
A point records both depths. For the law ln d_x = a + b·L it needs one depth L and the width
d_x = sqrt(N*/(12·L)) so that the law's N(L) = 12·L·d_x² passes through N*. Options:

    geom (default)   sqrt(L_s·L_d)
    arith            (L_s + L_d)/2
    shallow          L_s   ("the size at which L_s stops being optimal")
    deep             L_d   ("the size at which L_d starts being optimal")

Default geom: the law is used as "depth L is optimal at N(L)"; at N* the optimum lies between
L_s and L_d, and if loss at fixed N is about symmetric in ln L around the optimum (Kaplan et al.
2020 §3.1, Fig. 5, loss vs aspect ratio on a log axis) equal losses at L_s and L_d put the optimum
at their geometric mean. shallow/deep bias the law by half a pair spacing in opposite
directions. Which convention Levine et al. used for their 5 points could not be checked here;
compare fits across conventions with ``--assign``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.fits.options import ASSIGN, MIN_FRACTION, PAIRS, RESAMPLE, FitOptions
from depthwidth.units import format_count

USABLE = ("crossing", "multiple")  # statuses with an N*
CURVES = ("pchip", "linear")  # how a depth's mean losses are joined (find_crossing)
CROSSINGS = ("last", "first")  # which down-crossing is N* when there are several


def assigned_depth(L_s: float, L_d: float, assign: str = "geom") -> float:
    """The depth a transition point between L_s < L_d stands for (module docstring)."""
    if assign == "geom":
        return math.sqrt(L_s * L_d)
    if assign == "arith":
        return 0.5 * (L_s + L_d)
    if assign == "shallow":
        return float(L_s)
    if assign == "deep":
        return float(L_d)
    raise UserError(f"--assign must be one of {', '.join(ASSIGN)}, got {assign!r}")


def select_pairs(depths: list[int], pairs: str = "doubling") -> list[tuple[int, int]]:
    """Depth pairs: ``doubling`` = (L, 2L) with both measured; ``adjacent`` = consecutive
    measured depths. Raises UserError for an unknown selection."""
    ds = sorted(set(int(x) for x in depths))
    if pairs == "doubling":
        s = set(ds)
        return [(L, 2 * L) for L in ds if 2 * L in s]
    if pairs == "adjacent":
        return list(zip(ds, ds[1:]))
    raise UserError(f"--pairs must be one of {', '.join(PAIRS)}, got {pairs!r}")


@dataclass
class Crossing:
    """Result of comparing two curves: status (module docstring), x_star = ln N* or None,
    roots_up/roots_down = ln N of the -→+ / +→- sign changes, overlap = (x_lo, x_hi)."""

    status: str
    x_star: float | None
    roots_down: list[float] = field(default_factory=list)
    roots_up: list[float] = field(default_factory=list)
    overlap: tuple[float, float] | None = None


def _sorted_curve(x, y) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) as float arrays sorted by x (issue 10: unsorted x silently gave "no_overlap")."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise UserError(f"a curve needs x and y of one equal length, got shapes {x.shape} and {y.shape}")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if np.any(np.diff(x) == 0):
        raise UserError(f"a curve repeats x = {x[:-1][np.diff(x) == 0][0]:g}; average its points first")
    return x, y


def _difference(x_s, y_s, x_d, y_d, lo: float, hi: float, curve: str):
    """Δ = f_deep − f_shallow on [lo, hi] as a piecewise polynomial on the union of knots, and
    its values there: exact cubic Hermite pieces for "pchip", straight pieces for "linear"."""
    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.interpolate import CubicHermiteSpline, PchipInterpolator, PPoly

    knots = np.unique(np.concatenate([[lo, hi], x_s[(x_s > lo) & (x_s < hi)], x_d[(x_d > lo) & (x_d < hi)]]))
    if curve == "linear":
        delta = np.interp(knots, x_d, y_d) - np.interp(knots, x_s, y_s)
        slope = np.diff(delta) / np.diff(knots)
        return PPoly(np.stack([slope, delta[:-1]]), knots, extrapolate=False), delta
    f_s = PchipInterpolator(x_s, y_s, extrapolate=False)
    f_d = PchipInterpolator(x_d, y_d, extrapolate=False)
    delta = f_d(knots) - f_s(knots)
    slope = f_d.derivative()(knots) - f_s.derivative()(knots)
    return CubicHermiteSpline(knots, delta, slope, extrapolate=False), delta


def find_crossing(x_s, y_s, x_d, y_d, curve: str = "pchip", which: str = "last") -> Crossing:
    """Crossing of the deeper curve (x_d, y_d) below the shallower (x_s, y_s).

    x: ln N, y: mean test loss (nats/token); each curve's points in any order (sorted by x
    here). PCHIP curves (``curve="pchip"``, the default) or straight lines between the measured
    points (``"linear"``, the robustness check of :mod:`depthwidth.fits.estimators`), the exact
    difference and its roots as described in the module docstring. With several down-crossings
    N* is the last (``which="last"``, the default) or the first (``"first"``). Raises UserError
    if a curve's x and y differ in length or repeat an x, or for an unknown curve or which.
    """
    if curve not in CURVES:
        raise UserError(f"--curve must be one of {', '.join(CURVES)}, got {curve!r}")
    if which not in CROSSINGS:
        raise UserError(f"--crossing must be one of {', '.join(CROSSINGS)}, got {which!r}")

    x_s, y_s = _sorted_curve(x_s, y_s)
    x_d, y_d = _sorted_curve(x_d, y_d)
    if len(x_s) < 2 or len(x_d) < 2:
        return Crossing("too_few_widths", None)
    lo, hi = max(x_s[0], x_d[0]), min(x_s[-1], x_d[-1])
    if not hi > lo:
        return Crossing("no_overlap", None)
    diff, delta = _difference(x_s, y_s, x_d, y_d, lo, hi, curve)
    roots = np.sort(diff.roots(discontinuity=False, extrapolate=False))
    edges = np.concatenate([[lo], roots, [hi]])
    mids = 0.5 * (edges[:-1] + edges[1:])
    signs = np.sign(diff(mids))
    # Walk the segments; zero-width segments and exact zeros (touching, identical) carry no sign.
    seq: list[tuple[float, float]] = []  # (sign, left edge)
    for s, left in zip(signs, edges[:-1]):
        if s == 0 or not np.isfinite(s):
            continue
        if not seq or seq[-1][0] != s:
            seq.append((float(s), float(left)))
    overlap = (float(lo), float(hi))
    if not seq:
        return Crossing("deeper_worse_throughout" if delta.mean() > 0 else "deeper_better_throughout",
                        None, overlap=overlap)
    down = [left for (s, left), (s0, _) in zip(seq[1:], seq[:-1]) if s0 > 0 > s]
    up = [left for (s, left), (s0, _) in zip(seq[1:], seq[:-1]) if s0 < 0 < s]
    if not down and not up:
        status = "deeper_worse_throughout" if seq[0][0] > 0 else "deeper_better_throughout"
        return Crossing(status, None, overlap=overlap)
    if not down:
        return Crossing("reversed", None, down, up, overlap)
    status = "crossing" if len(down) == 1 and not up else "multiple"
    return Crossing(status, down[-1] if which == "last" else down[0], down, up, overlap)


@dataclass
class TransitionPoint:
    """One depth pair's transition. Units: N in parameters (Kaplan 12·L·d²), widths in units of
    d_model, ln natural. Fields without a crossing are None. ``L`` is the assigned depth;
    ``d_x`` = sqrt(N*/(12·L)) and ``ln_d_x``/``sigma_ln_d_x`` are what the law fits;
    ``d_x_shallow``/``d_x_deep`` are the widths of the two depths at N*. bootstrap_above /
    bootstrap_below: replicates with N* above / below the measured range (no crossing);
    ci95_open: "above"/"below"/"both" when a bound of the 95% interval is open (N* beyond the
    measured range: the bound is null), "entirely_above"/"entirely_below" when the whole interval
    lies beyond that end of the range (both bounds null); fitted: whether
    the law uses the point (a crossing in >= MIN_FRACTION of replicates and a finite error; a zero
    error is resolved by :func:`depthwidth.fits.lawfit.build_fit`)."""

    L_s: int
    L_d: int
    assign: str
    L: float
    status: str
    N_range: list[float] | None
    N_star: float | None = None
    ln_N_star: float | None = None
    sigma_ln_N_star: float | None = None
    N_star_ci95: list[float] | None = None
    d_x: float | None = None
    ln_d_x: float | None = None
    sigma_ln_d_x: float | None = None
    d_x_shallow: float | None = None
    d_x_deep: float | None = None
    crossings_N_down: list[float] = field(default_factory=list)
    crossings_N_up: list[float] = field(default_factory=list)
    bootstrap_replicates: int = 0
    bootstrap_with_crossing: int = 0
    bootstrap_fraction: float | None = None
    bootstrap_above: int = 0
    bootstrap_below: int = 0
    ci95_open: str | None = None
    fitted: bool = False
    meaning: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_MEANING = {
    "crossing": "deeper wins above N*, loses below",
    "multiple": "several sign changes; N* is the last +→- change (noisy, check the curves)",
    "deeper_worse_throughout": "deeper worse over the whole common range: transition above it (not extrapolated)",
    "deeper_better_throughout": "deeper better over the whole common range: transition below it (not extrapolated)",
    "reversed": "deeper better at small N and worse at large N: no transition of the expected kind",
    "no_overlap": "the two depths' N ranges do not overlap",
    "too_few_widths": "a depth has fewer than 2 usable widths",
}


class _DepthData:
    """Per depth: cells sorted by ln N, with their seeds' losses (what the bootstrap resamples),
    the seeds (in the losses' order) and, when recorded, each seed's test-chunk losses."""

    def __init__(self, table, depth: int):
        c = table.cells[table.cells["n_layer"] == depth].sort_values("ln_N")
        self.x = c["ln_N"].to_numpy(dtype=float)
        self.y = c["mean"].to_numpy(dtype=float)
        self.losses = [np.asarray(table.losses[(depth, int(d))], dtype=float) for d in c["d_model"]]
        self.seeds = [list(sd) if "seeds" in c else list(range(len(y)))
                      for sd, y in zip(c["seeds"] if "seeds" in c else [None] * len(c), self.losses)]
        chunks = getattr(table, "chunks", None) or {}
        ch = [chunks.get((depth, int(d))) for d in c["d_model"]]
        self.chunks = [np.asarray(v, dtype=float) if v is not None else None for v in ch]


def _residuals(y: np.ndarray) -> np.ndarray:
    """Deviations from the cell mean, rescaled by sqrt(n/(n-1)) so that resampled means spread
    with variance s²/n rather than s²(n-1)/n² (the plain bootstrap's bias: 0.82x sd at n = 3)."""
    n = len(y)
    if n < 2:
        return np.zeros(0)
    return (y - y.mean()) * math.sqrt(n / (n - 1))


def bootstrap_means(data: dict[int, _DepthData], B: int, rng: np.random.Generator,
                    pooled: bool = True) -> dict[int, np.ndarray]:
    """Per depth an array (B, n_widths) of bootstrap cell means: each cell's mean plus the mean of
    n draws (n = its seed count) from its own residuals (``pooled=False``) or from the residuals
    of all cells of that depth (``pooled=True``); a cell with nothing to draw from stays fixed."""
    out = {}
    for L, dd in data.items():
        pool = np.concatenate([_residuals(y) for y in dd.losses]) if pooled else None
        cols = []
        for y in dd.losses:
            r = pool if pooled else _residuals(y)
            if r.size == 0:
                cols.append(np.full(B, y.mean()))
                continue
            draws = r[rng.integers(0, r.size, size=(B, len(y)))]
            cols.append(y.mean() + draws.mean(axis=1))
        out[L] = np.stack(cols, axis=1) if cols else np.empty((B, 0))
    return out


def paired_bootstrap_means(data: dict[int, _DepthData], B: int, rng: np.random.Generator) -> dict[int, np.ndarray]:
    """Per depth an array (B, n_widths) of seed-paired bootstrap cell means (module docstring).

    Replicate r draws n seeds with replacement from the union of the n seeds (the same draw for
    every cell) and, when every cell has test-chunk losses of one length K, K chunk indices (the
    same for every run). With w_s the share of the cell's drawn seeds that are s, the cell's mean
    becomes ȳ + Σ_s w_s·[sqrt(n_c/(n_c-1))·(y_s - ȳ) + (mean of s's drawn chunks - mean of its
    chunks)]. A cell none of whose seeds was drawn weights its seeds equally; a cell with one
    seed moves by the chunk term only.
    """
    seeds = union_seeds(data)
    seed_draw = np.asarray(seeds)[rng.integers(0, len(seeds), size=(B, len(seeds)))]
    chunks = [c for dd in data.values() for c in dd.chunks]
    chunk_draw = None
    if chunks and all(c is not None for c in chunks) and len({c.shape[1] for c in chunks}) == 1:
        K = chunks[0].shape[1]
        chunk_draw = rng.integers(0, K, size=(B, K))
    return paired_means_of_draws(data, seed_draw, chunk_draw)


def union_seeds(data: dict[int, _DepthData]) -> list[int]:
    """Every seed of any cell of ``data``, sorted: what one paired replicate draws from."""
    return sorted({s for dd in data.values() for sd in dd.seeds for s in sd})


def paired_means_of_draws(data: dict[int, _DepthData], seed_draw: np.ndarray,
                          chunk_draw: np.ndarray | None = None) -> dict[int, np.ndarray]:
    """The cell means of :func:`paired_bootstrap_means` for given draws: ``seed_draw`` (B, n) seeds,
    ``chunk_draw`` (B, K) chunk indices or None (no evaluation-set term)."""
    B = seed_draw.shape[0]
    out = {}
    for L, dd in data.items():
        cols = []
        for y, sd, ch in zip(dd.losses, dd.seeds, dd.chunks):
            nc = len(y)
            term = np.tile(math.sqrt(nc / (nc - 1)) * (y - y.mean()) if nc > 1 else np.zeros(nc), (B, 1))
            if chunk_draw is not None:
                term = term + (ch[:, chunk_draw].mean(axis=2).T - ch.mean(axis=1)[None, :])
            counts = np.stack([(seed_draw == s).sum(axis=1) for s in sd], axis=1).astype(float)
            counts[counts.sum(axis=1) == 0] = 1.0
            w = counts / counts.sum(axis=1, keepdims=True)
            cols.append(y.mean() + (w * term).sum(axis=1))
        out[L] = np.stack(cols, axis=1) if cols else np.empty((B, 0))
    return out


def bootstrap_widths(data: dict[int, _DepthData], B: int, rng: np.random.Generator) -> dict[int, list[np.ndarray]]:
    """Per depth, B sorted index arrays of the distinct widths drawn with replacement."""
    return {L: [np.unique(rng.integers(0, len(dd.x), size=len(dd.x))) for _ in range(B)] for L, dd in data.items()}


def format_interval(ci: list | None, open_side: str | None, N_range: list | None) -> str:
    """A point's 95% interval of N* as text, bounds beyond the measured range as '< lo' / '> hi'
    (``ci95_open`` of :class:`TransitionPoint`); '-' without an interval."""
    if not ci:
        return "-"
    lo_r, hi_r = (format_count(v) for v in N_range) if N_range else ("range", "range")
    if open_side == "entirely_above":
        return f"> {hi_r}"
    if open_side == "entirely_below":
        return f"< {lo_r}"
    lo = format_count(ci[0]) if ci[0] is not None else f"< {lo_r}"
    hi = format_count(ci[1]) if ci[1] is not None else f"> {hi_r}"
    return f"[{lo}, {hi}]"


def format_fraction(f: float | None) -> str:
    """A point's crossing fraction (``bootstrap_fraction``) as a per cent floored to 0.1, so a
    reader checking the 95 % rule never sees 0.998 as "100%" or 0.946 as "95%"; '-' for None."""
    return "-" if f is None else ("100%" if f == 1 else f"{math.floor(f * 1000) / 10:.1f}%")


_SIDE = {"deeper_worse_throughout": math.inf, "deeper_better_throughout": -math.inf}


def _summarise(tp: TransitionPoint, x: float | None, xb: np.ndarray, Ls: int, Ld: int) -> None:
    """Fill the point's estimate and its bootstrap statistics (module docstring) in place.

    x: ln N* of the measured means (None without a crossing); xb: the replicates' ln N*
    (+-inf: above/below the range, NaN: undefined)."""
    B = len(xb)
    tp.bootstrap_replicates = B
    crossing = np.isfinite(xb)
    tp.bootstrap_with_crossing = int(crossing.sum())
    tp.bootstrap_fraction = tp.bootstrap_with_crossing / B
    tp.bootstrap_above, tp.bootstrap_below = int(np.sum(xb == math.inf)), int(np.sum(xb == -math.inf))
    # Undefined replicates (NaN) cannot be placed on either side: they count against the
    # fraction and are left out of the quantiles. The interval is reported even when the
    # measured means do not cross (then it is usually open on one side).
    ext = np.sort(xb[~np.isnan(xb)])
    if ext.size >= 2:
        q = np.quantile(ext, [0.025, 0.16, 0.84, 0.975], method="inverted_cdf")
        lo = math.exp(q[0]) if np.isfinite(q[0]) else None
        hi = math.exp(q[3]) if np.isfinite(q[3]) else None
        tp.N_star_ci95 = [lo, hi]
        if q[0] == math.inf or q[3] == -math.inf:  # the whole interval lies beyond one end
            tp.ci95_open = "entirely_above" if q[0] == math.inf else "entirely_below"
        else:
            tp.ci95_open = None if lo and hi else "both" if not lo and not hi else "below" if not lo else "above"
    if x is None:
        return
    Lp = tp.L
    tp.N_star, tp.ln_N_star = math.exp(x), x
    tp.d_x = math.sqrt(math.exp(x) / (12.0 * Lp))
    tp.ln_d_x = 0.5 * (x - math.log(12.0 * Lp))
    tp.d_x_shallow = math.sqrt(math.exp(x) / (12.0 * Ls))
    tp.d_x_deep = math.sqrt(math.exp(x) / (12.0 * Ld))
    if ext.size >= 2 and np.all(np.isfinite(q[1:3])):
        half = 0.5 * float(q[2] - q[1])
        # Replicates equal to rounding (one seed per cell, nothing resampled) carry no error.
        tp.sigma_ln_N_star = half if half > 1e-12 * max(1.0, abs(x)) else 0.0
        tp.sigma_ln_d_x = 0.5 * tp.sigma_ln_N_star  # ln d_x = (ln N* - ln 12L)/2 with L fixed
    tp.fitted = tp.status in USABLE and tp.bootstrap_fraction >= MIN_FRACTION and tp.sigma_ln_d_x is not None


def compute_transitions(table, *, pairs: str = FitOptions.pairs, assign: str = FitOptions.assign,
                        bootstrap: int = FitOptions.bootstrap, resample: str = FitOptions.resample,
                        seed: int = FitOptions.seed, curve: str = "pchip",
                        crossing: str = "last") -> tuple[list[TransitionPoint], np.ndarray]:
    """Transition points of ``table`` (a :class:`~depthwidth.fits.table.ResultsTable`) for the
    selected depth pairs, with bootstrap uncertainties.

    Returns (points, boot) where boot has shape (bootstrap, n_pairs): ln N* per replicate and
    pair (+inf / -inf when the replicate has N* above / below the measured range, NaN for any
    other outcome without a crossing), replicates shared across pairs. Raises UserError for unknown
    options, bootstrap < 2, or when fewer than 2 depths / no pair is available. ``curve`` and
    ``crossing``: :func:`find_crossing`'s ``curve`` and ``which``, for every replicate too.
    """
    find_crossing([0, 1], [0, 1], [0, 1], [0, 1], curve, crossing)  # validates both before any work
    if resample not in RESAMPLE:
        raise UserError(f"--resample must be one of {', '.join(RESAMPLE)}, got {resample!r}")
    if bootstrap < 2:
        raise UserError(f"--bootstrap must be >= 2 replicates, got {bootstrap}")
    assigned_depth(1, 2, assign)  # validates the option before any work
    depths = table.depths()
    pair_list = select_pairs(depths, pairs)
    if not pair_list:
        raise UserError(f"no {pairs} depth pairs among measured depths {depths}"
                        + (" (try --pairs adjacent)" if pairs == "doubling" and len(depths) > 1 else ""))
    used = sorted({L for p in pair_list for L in p})
    data = {L: _DepthData(table, L) for L in used}
    rng = np.random.default_rng(seed)
    if resample == "paired":
        means = paired_bootstrap_means(data, bootstrap, rng)
    else:
        means = bootstrap_means(data, bootstrap, rng, pooled=resample.startswith("pooled"))
    widths = bootstrap_widths(data, bootstrap, rng) if resample.endswith("+widths") else None

    points: list[TransitionPoint] = []
    boot = np.full((bootstrap, len(pair_list)), np.nan)
    for j, (Ls, Ld) in enumerate(pair_list):
        s, d = data[Ls], data[Ld]
        c = find_crossing(s.x, s.y, d.x, d.y, curve, crossing)
        Lp = assigned_depth(Ls, Ld, assign)
        tp = TransitionPoint(L_s=Ls, L_d=Ld, assign=assign, L=Lp, status=c.status, meaning=_MEANING[c.status],
                             N_range=[math.exp(c.overlap[0]), math.exp(c.overlap[1])] if c.overlap else None,
                             crossings_N_down=[math.exp(v) for v in c.roots_down],
                             crossings_N_up=[math.exp(v) for v in c.roots_up])
        for r in range(bootstrap):
            if widths is None:
                ks, kd = slice(None), slice(None)
            else:
                ks, kd = widths[Ls][r], widths[Ld][r]
            cr = find_crossing(s.x[ks], means[Ls][r, ks], d.x[kd], means[Ld][r, kd], curve, crossing)
            boot[r, j] = cr.x_star if cr.x_star is not None else _SIDE.get(cr.status, np.nan)
        _summarise(tp, c.x_star, boot[:, j], Ls, Ld)
        points.append(tp)
    return points, boot
