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
Bootstrap with a fixed seed. Each replicate redraws every (depth, width) cell's mean as the
measured mean plus the mean of n draws with replacement (n = the cell's seed count) from seed
residuals (deviations from the cell means, rescaled by sqrt(n/(n-1)) to undo the plain
bootstrap's small-sample bias), then recomputes the curves and N*. ``resample`` says where the
residuals come from:

    pooled (default)  all cells of the same depth (noise assumed alike across widths of a depth)
    seeds             the cell's own seeds only (the literal seed bootstrap)
    ...+widths        also redraw each depth's set of widths with replacement (distinct ones kept)

Default pooled because with the 3 seeds per cell of Levine et al. a cell's own spread has 2
degrees of freedom and the per-point errors swing by factors of several between realizations.
Measured on 60 realizations of the synthetic sweep (depths 2..32, 3 seeds, 200 replicates):
the mean bootstrap sigma matched the true spread of ln N* to within 5% for pooled (0.95–1.04)
and the law's 95% intervals covered the true a and b in 95% of cases; with ``seeds`` the
coverage was 87%. The reported sigma of ln N* is the standard deviation over replicates that
have a crossing (their share is ``bootstrap_fraction``); the 95% interval is their 2.5–97.5
percentiles. Replicates are shared across pairs (same redrawn cells), so a whole-law bootstrap
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
from depthwidth.fits.options import ASSIGN, PAIRS, RESAMPLE, FitOptions

USABLE = ("crossing", "multiple")  # statuses with an N*


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


def find_crossing(x_s, y_s, x_d, y_d) -> Crossing:
    """Crossing of the deeper curve (x_d, y_d) below the shallower (x_s, y_s).

    x: ln N (strictly increasing arrays), y: mean test loss (nats/token). PCHIP curves, the
    exact cubic difference and its roots as described in the module docstring.
    """
    from scipy.interpolate import CubicHermiteSpline, PchipInterpolator

    x_s, y_s, x_d, y_d = (np.asarray(v, dtype=float) for v in (x_s, y_s, x_d, y_d))
    if len(x_s) < 2 or len(x_d) < 2:
        return Crossing("too_few_widths", None)
    lo, hi = max(x_s[0], x_d[0]), min(x_s[-1], x_d[-1])
    if not hi > lo:
        return Crossing("no_overlap", None)
    f_s = PchipInterpolator(x_s, y_s, extrapolate=False)
    f_d = PchipInterpolator(x_d, y_d, extrapolate=False)
    knots = np.unique(np.concatenate([[lo, hi], x_s[(x_s > lo) & (x_s < hi)], x_d[(x_d > lo) & (x_d < hi)]]))
    delta = f_d(knots) - f_s(knots)
    slope = f_d.derivative()(knots) - f_s.derivative()(knots)
    diff = CubicHermiteSpline(knots, delta, slope, extrapolate=False)
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
    return Crossing(status, down[-1], down, up, overlap)


@dataclass
class TransitionPoint:
    """One depth pair's transition. Units: N in parameters (Kaplan 12·L·d²), widths in units of
    d_model, ln natural. Fields without a crossing are None. ``L`` is the assigned depth;
    ``d_x`` = sqrt(N*/(12·L)) and ``ln_d_x``/``sigma_ln_d_x`` are what the law fits;
    ``d_x_shallow``/``d_x_deep`` are the widths of the two depths at N*."""

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
    """Per depth: cells sorted by ln N, with their seeds' losses (what the bootstrap resamples)."""

    def __init__(self, table, depth: int):
        c = table.cells[table.cells["n_layer"] == depth].sort_values("ln_N")
        self.x = c["ln_N"].to_numpy(dtype=float)
        self.y = c["mean"].to_numpy(dtype=float)
        self.losses = [np.asarray(table.losses[(depth, int(d))], dtype=float) for d in c["d_model"]]


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


def bootstrap_widths(data: dict[int, _DepthData], B: int, rng: np.random.Generator) -> dict[int, list[np.ndarray]]:
    """Per depth, B sorted index arrays of the distinct widths drawn with replacement."""
    return {L: [np.unique(rng.integers(0, len(dd.x), size=len(dd.x))) for _ in range(B)] for L, dd in data.items()}


def compute_transitions(table, *, pairs: str = FitOptions.pairs, assign: str = FitOptions.assign,
                        bootstrap: int = FitOptions.bootstrap, resample: str = FitOptions.resample,
                        seed: int = FitOptions.seed) -> tuple[list[TransitionPoint], np.ndarray]:
    """Transition points of ``table`` (a :class:`~depthwidth.fits.table.ResultsTable`) for the
    selected depth pairs, with bootstrap uncertainties.

    Returns (points, boot) where boot has shape (bootstrap, n_pairs): ln N* per replicate and
    pair (NaN without a crossing), replicates shared across pairs. Raises UserError for unknown
    options, bootstrap < 2, or when fewer than 2 depths / no pair is available.
    """
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
    means = bootstrap_means(data, bootstrap, rng, pooled=resample.startswith("pooled"))
    widths = bootstrap_widths(data, bootstrap, rng) if resample.endswith("+widths") else None

    points: list[TransitionPoint] = []
    boot = np.full((bootstrap, len(pair_list)), np.nan)
    for j, (Ls, Ld) in enumerate(pair_list):
        s, d = data[Ls], data[Ld]
        c = find_crossing(s.x, s.y, d.x, d.y)
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
            cr = find_crossing(s.x[ks], means[Ls][r, ks], d.x[kd], means[Ld][r, kd])
            if cr.x_star is not None:
                boot[r, j] = cr.x_star
        tp.bootstrap_replicates = bootstrap
        if c.x_star is not None:
            xs = boot[:, j][np.isfinite(boot[:, j])]
            x = c.x_star
            tp.N_star, tp.ln_N_star = math.exp(x), x
            tp.d_x = math.sqrt(math.exp(x) / (12.0 * Lp))
            tp.ln_d_x = 0.5 * (x - math.log(12.0 * Lp))
            tp.d_x_shallow = math.sqrt(math.exp(x) / (12.0 * Ls))
            tp.d_x_deep = math.sqrt(math.exp(x) / (12.0 * Ld))
            tp.bootstrap_with_crossing = int(xs.size)
            tp.bootstrap_fraction = xs.size / bootstrap
            if xs.size >= 2:
                # Replicates that all agree to rounding (one seed per cell, nothing resampled)
                # carry no error: np.std of equal floats can come out 1e-17, not 0.
                sd = float(np.std(xs, ddof=1)) if np.ptp(xs) > 1e-12 * max(1.0, abs(float(np.mean(xs)))) else 0.0
                tp.sigma_ln_N_star = sd
                tp.sigma_ln_d_x = 0.5 * sd  # ln d_x = (ln N* - ln 12L)/2 with L fixed
                lo, hi = np.quantile(xs, [0.025, 0.975])
                tp.N_star_ci95 = [math.exp(lo), math.exp(hi)]
        else:
            tp.bootstrap_with_crossing = int(np.isfinite(boot[:, j]).sum())
            tp.bootstrap_fraction = tp.bootstrap_with_crossing / bootstrap
        points.append(tp)
    return points, boot
