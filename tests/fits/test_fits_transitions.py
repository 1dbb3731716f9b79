"""Transition points: crossings of hand-built curves, statuses, pair selection, assignment."""

import math

import numpy as np
import pandas as pd
import pytest

from depthwidth.errors import UserError
from depthwidth.fits.synthetic import Surface
from depthwidth.fits.transitions import assigned_depth, compute_transitions, find_crossing, select_pairs


def test_linear_curves_cross_where_computed_by_hand():
    # PCHIP reproduces collinear data exactly. Shallow: y = 3 - 0.5 (x - 10); deep:
    # y = 3.5 - 0.75 (x - 10). Difference 0.5 - 0.25 (x - 10) is zero at x = 12, positive before.
    xs = np.array([10.0, 11.0, 12.5, 13.0])
    xd = np.array([10.5, 11.5, 12.2, 13.5])
    c = find_crossing(xs, 3 - 0.5 * (xs - 10), xd, 3.5 - 0.75 * (xd - 10))
    assert c.status == "crossing"
    assert c.x_star == pytest.approx(12.0, abs=1e-10)
    assert c.overlap == (10.5, 13.0)
    assert c.roots_up == []


def test_unsorted_points_give_the_same_crossing():
    # Issue 10: x in another order silently returned "no_overlap". Same curves as above.
    xs = np.array([12.5, 10.0, 13.0, 11.0])
    xd = np.array([13.5, 10.5, 12.2, 11.5])
    c = find_crossing(xs, 3 - 0.5 * (xs - 10), xd, 3.5 - 0.75 * (xd - 10))
    assert c.status == "crossing" and c.x_star == pytest.approx(12.0, abs=1e-10) and c.overlap == (10.5, 13.0)
    with pytest.raises(UserError, match="repeats x = 10"):
        find_crossing([10.0, 10.0, 11.0], [3, 3, 2], xd, xd)
    with pytest.raises(UserError, match="equal length"):
        find_crossing([10.0, 11.0], [3.0], xd, xd)


def test_multiple_crossings_take_the_last_down_crossing():
    # Flat shallow curve at 2.0; the deep one zig-zags 2.1, 1.9, 2.1, 1.9, 1.9. PCHIP sets zero
    # slope at the local extrema x = 1, 2, 3, so on [1, 2] and [2, 3] the Hermite cubic is
    # symmetric and crosses 2.0 at the midpoints 1.5 (up) and 2.5 (down).
    x = np.arange(5.0)
    c = find_crossing(x, np.full(5, 2.0), x, np.array([2.1, 1.9, 2.1, 1.9, 1.9]))
    assert c.status == "multiple"
    assert c.roots_up == pytest.approx([1.5])
    assert len(c.roots_down) == 2 and 0 < c.roots_down[0] < 1
    assert c.x_star == pytest.approx(2.5)


@pytest.mark.parametrize("deep, status", [
    (lambda y: y + 0.1, "deeper_worse_throughout"),
    (lambda y: y - 0.1, "deeper_better_throughout"),
    (lambda y: y - 0.1 + 0.08 * np.arange(5), "reversed"),
])
def test_no_crossing_statuses(deep, status):
    x = np.arange(5.0)
    y = 3.0 - 0.2 * x
    c = find_crossing(x, y, x, deep(y))
    assert c.status == status and c.x_star is None


def test_no_overlap_and_too_few_widths():
    assert find_crossing([0, 1], [2, 1], [2, 3], [2, 1]).status == "no_overlap"
    assert find_crossing([0], [2], [0, 1], [2, 1]).status == "too_few_widths"


def test_pair_selection_and_assignment():
    assert select_pairs([6, 12, 18, 24, 48], "doubling") == [(6, 12), (12, 24), (24, 48)]
    assert select_pairs([6, 12, 18, 24], "adjacent") == [(6, 12), (12, 18), (18, 24)]
    with pytest.raises(UserError):
        select_pairs([6, 12], "triples")
    assert assigned_depth(6, 12, "geom") == pytest.approx(math.sqrt(72))
    assert assigned_depth(6, 12, "arith") == 9.0
    assert (assigned_depth(6, 12, "shallow"), assigned_depth(6, 12, "deep")) == (6.0, 12.0)
    with pytest.raises(UserError):
        assigned_depth(6, 12, "median")


class _Table:
    """In-memory stand-in for ResultsTable (cells + losses), enough for compute_transitions."""

    def __init__(self, surface, depths, n_seeds=1, per_decade=8, rng=None):
        tr = [surface.true_transition(s, d) for s, d in zip(depths, depths[1:])]
        grid = np.geomspace(tr[0] / 4, tr[-1] * 4, int(per_decade * math.log10(16 * tr[-1] / tr[0])) + 1)
        rows, self.losses = [], {}
        for L in depths:
            for d in sorted({max(2, 2 * round(math.sqrt(N / (12 * L)) / 2)) for N in grid}):
                N = 12.0 * L * d * d
                y = surface.loss(N, L) + (surface.noise * rng.standard_normal(n_seeds) if rng else np.zeros(n_seeds))
                self.losses[(L, d)] = list(y)
                rows.append({"n_layer": L, "d_model": d, "ln_N": math.log(N), "mean": float(np.mean(y)),
                             "n_seeds": n_seeds})
        self.cells = pd.DataFrame(rows)
        self.true = tr

    def depths(self):
        return sorted(self.cells["n_layer"].unique())


def test_noise_free_surface_gives_the_true_transitions_and_assignments():
    # Synthetic surface (symmetric in ln L): depths L and 2L cross at N(sqrt(2) L); with the
    # shallow assignment the point is ln d = (ln N* - ln 12 L)/2 = a + ln(2)/4 + sqrt(2) b L.
    s = Surface(noise=0.0)
    t = _Table(s, [2, 4, 8, 16])
    pts, boot = compute_transitions(t, bootstrap=2, assign="geom")
    assert boot.shape == (2, 3)
    for p, n_true in zip(pts, t.true):
        assert p.status == "crossing"
        assert math.log(p.N_star / n_true) == pytest.approx(0, abs=3e-3)  # PCHIP error only
        assert p.L == pytest.approx(math.sqrt(p.L_s * p.L_d))
        assert p.ln_d_x == pytest.approx(s.a + s.b * p.L, abs=2e-3)
        assert p.d_x_shallow == pytest.approx(math.sqrt(p.N_star / (12 * p.L_s)))
        assert p.d_x_deep == pytest.approx(math.sqrt(p.N_star / (12 * p.L_d)))
    shallow, _ = compute_transitions(t, bootstrap=2, assign="shallow")
    for p in shallow:
        assert p.L == p.L_s
        assert p.ln_d_x == pytest.approx(s.a + math.log(2) / 4 + math.sqrt(2) * s.b * p.L_s, abs=2e-3)


def test_range_without_crossing_is_reported_not_extrapolated():
    s = Surface(noise=0.0)
    t = _Table(s, [2, 4])
    t.cells = t.cells[t.cells["ln_N"] < math.log(t.true[0] / 1.5)]  # only sizes below N*
    (p,), _ = compute_transitions(t, bootstrap=2)
    assert p.status == "deeper_worse_throughout" and p.N_star is None
    assert p.N_range[1] < t.true[0]


def test_bootstrap_spread_and_fraction():
    s = Surface()
    t = _Table(s, [2, 4, 8], n_seeds=3, rng=np.random.default_rng(5))
    pts, boot = compute_transitions(t, bootstrap=300, seed=1)
    for j, p in enumerate(pts):
        xs = boot[:, j][np.isfinite(boot[:, j])]
        # sigma: half the 16-84 percentile range of the replicates (non-crossing ones at +-inf)
        q16, q84 = np.quantile(boot[:, j][~np.isnan(boot[:, j])], [0.16, 0.84], method="inverted_cdf")
        assert p.sigma_ln_N_star == pytest.approx((q84 - q16) / 2)
        assert p.sigma_ln_N_star == pytest.approx(np.std(xs, ddof=1), rel=0.25)  # ~normal replicates
        assert p.sigma_ln_d_x == pytest.approx(p.sigma_ln_N_star / 2)
        assert p.bootstrap_fraction == xs.size / 300
        lo, hi = p.N_star_ci95
        assert lo < p.N_star < hi
    again, _ = compute_transitions(t, bootstrap=300, seed=1)
    assert [p.to_dict() for p in again] == [p.to_dict() for p in pts]  # fixed seed: reproducible
    for mode in ("seeds", "pooled+widths", "seeds+widths"):
        other, _ = compute_transitions(t, bootstrap=300, seed=1, resample=mode)
        assert all(o.sigma_ln_N_star > 0 for o in other)
        assert [o.N_star for o in other] == [p.N_star for p in pts]  # the estimate is not resampled


def test_bootstrap_means_variance_by_hand():
    # Cells [1, 2, 3] and [5, 5, 5]. Residuals rescaled by sqrt(n/(n-1)) = sqrt(1.5):
    # cell 1 -> (-1.22, 0, 1.22), population variance 1.0, so the mean of 3 draws has variance
    # 1/3 = s^2/n (s^2 = 1, the sample variance). Pooled over the depth: (+-1.22, 0, 0, 0, 0),
    # population variance 3/6 = 0.5, mean of 3 draws 0.5/3 = 1/6 for both cells.
    from depthwidth.fits.transitions import _DepthData, bootstrap_means

    dd = _DepthData.__new__(_DepthData)
    dd.losses = [np.array([1.0, 2.0, 3.0]), np.array([5.0, 5.0, 5.0])]
    own = bootstrap_means({4: dd}, 40000, np.random.default_rng(0), pooled=False)[4]
    assert np.var(own[:, 0]) == pytest.approx(1 / 3, rel=0.03)
    assert np.all(own[:, 1] == 5.0)
    pooled = bootstrap_means({4: dd}, 40000, np.random.default_rng(0), pooled=True)[4]
    assert np.var(pooled, axis=0) == pytest.approx([1 / 6, 1 / 6], rel=0.03)
    assert pooled.mean(axis=0) == pytest.approx([2.0, 5.0], abs=0.01)


def test_bad_options():
    t = _Table(Surface(noise=0.0), [2, 4])
    with pytest.raises(UserError, match="--resample"):
        compute_transitions(t, resample="widths")
    with pytest.raises(UserError, match="--bootstrap"):
        compute_transitions(t, bootstrap=1)
    t3 = _Table(Surface(noise=0.0), [2, 3])
    with pytest.raises(UserError, match="no doubling depth pairs"):
        compute_transitions(t3, bootstrap=2)


def _seed_table(cells, chunks=None):
    """A stand-in table from {(L, d): (ln_N, [loss per seed 0..n-1])}."""
    t = _Table.__new__(_Table)
    t.cells = pd.DataFrame([{"n_layer": L, "d_model": d, "ln_N": x, "mean": float(np.mean(y)), "n_seeds": len(y),
                             "seeds": list(range(len(y)))} for (L, d), (x, y) in cells.items()])
    t.losses = {k: list(y) for k, (_, y) in cells.items()}
    t.chunks = chunks
    return t


def test_paired_bootstrap_keeps_a_shared_seed_effect_out_of_the_differences():
    # Every cell = its own level + the same seed effect u_s (a seed fixes init and batch order
    # for every shape). Paired draws: cell differences never move. Unpaired: they do.
    from depthwidth.fits.transitions import _DepthData, bootstrap_means, paired_bootstrap_means

    u = np.array([-0.03, 0.0, 0.05])
    t = _seed_table({(1, 8): (1.0, 2.0 + u), (1, 16): (2.0, 1.8 + u), (2, 8): (1.5, 1.9 + u)})
    data = {L: _DepthData(t, L) for L in (1, 2)}
    paired = paired_bootstrap_means(data, 4000, np.random.default_rng(0))
    diff = paired[1][:, 1] - paired[2][:, 0]
    assert np.ptp(diff) == pytest.approx(0.0, abs=1e-12)
    # each cell alone still spreads with variance s^2/n: s^2 = var(u, ddof=1) = 0.00163
    assert np.var(paired[1][:, 0]) == pytest.approx(np.var(u, ddof=1) / 3, rel=0.1)
    own = bootstrap_means(data, 4000, np.random.default_rng(0), pooled=False)
    assert np.var(own[1][:, 1] - own[2][:, 0]) > 1e-4


def test_paired_bootstrap_redraws_the_test_chunks():
    # One seed per cell, 4 test chunks each: only the evaluation set moves the means. The same
    # chunks are drawn for every run, so a run whose chunks are its neighbour's + 0.1 moves alike.
    from depthwidth.fits.transitions import _DepthData, paired_bootstrap_means

    ch = np.array([1.0, 1.2, 0.8, 1.0])
    t = _seed_table({(1, 8): (1.0, [1.0]), (2, 8): (1.0, [1.1])},
                    chunks={(1, 8): [list(ch)], (2, 8): [list(ch + 0.1)]})
    data = {L: _DepthData(t, L) for L in (1, 2)}
    m = paired_bootstrap_means(data, 20000, np.random.default_rng(1))
    # mean of 4 chunks drawn with replacement: variance = pop. variance / 4 = 0.02 / 4
    assert np.var(m[1][:, 0]) == pytest.approx(0.02 / 4, rel=0.05)
    assert np.ptp(m[2][:, 0] - m[1][:, 0] - 0.1) == pytest.approx(0.0, abs=1e-12)


def test_non_crossing_replicates_are_counted_and_open_the_interval():
    # A noisy pair whose crossing sits at the top of the range: many replicates put N* above it.
    s = Surface()
    t = _Table(s, [2, 4], n_seeds=3, rng=np.random.default_rng(2))
    top = t.true[0] * 1.15
    t.cells = t.cells[t.cells["ln_N"] < math.log(top)]
    for key in list(t.losses):
        if key not in set(zip(t.cells.n_layer, t.cells.d_model)):
            del t.losses[key]
    t.cells = t.cells.assign(seeds=[[0, 1, 2]] * len(t.cells))
    (p,), boot = compute_transitions(t, bootstrap=400, seed=3)
    above = int(np.sum(boot[:, 0] == np.inf))
    assert p.bootstrap_above == above and above > 0
    assert p.bootstrap_fraction == pytest.approx(np.isfinite(boot[:, 0]).mean())
    if p.bootstrap_fraction < 0.95:
        assert not p.fitted
    if above / 400 > 0.025:
        # open above; "entirely_above" when even the 2.5% quantile is above the range (here: all
        # 400 replicates, the measured means do not cross either; TransitionPoint's docstring)
        assert p.N_star_ci95[1] is None and p.ci95_open in ("above", "both", "entirely_above")
