"""Depth threshold, counting form and published-form bounds (Levine et al. 2020, Theorems 1 and 2), numerically."""

import math

import mpmath
import pytest

from depthwidth.errors import UserError
from depthwidth.theory import constants
from depthwidth.theory.separation import (
    MAX_DEPTH,
    bounds,
    classify,
    count_branches,
    equivalent_width,
    ln_comb,
    log_monomial_count,
    monomial_count,
    threshold_depth,
    width_at_threshold,
)

LOG3 = math.log(3)


def log3(x):
    return math.log(x) / LOG3


def test_threshold_exact_on_powers_of_three():
    assert threshold_depth(729) == 6.0  # 3^6 = 729, exactly, not 5.999...
    assert threshold_depth(3**20) == 20.0
    assert threshold_depth(1) == 0.0
    assert threshold_depth(768) == pytest.approx(math.log(768) / math.log(3), rel=1e-15)  # 6.0474...


def test_threshold_inverse():
    assert width_at_threshold(6) == 729
    assert width_at_threshold(12) == 531_441  # 3^12
    assert threshold_depth(width_at_threshold(17)) == 17.0


def test_regimes():
    # 3^6 = 729 <= 729: on the threshold counts as depth-efficient (L <= log3 d_x)
    assert classify(6, 729)["regime"] == "depth-efficient"
    assert classify(7, 729)["regime"] == "depth-inefficient"
    # GPT-2 small: 3^12 = 531,441 > 768, 12 − 6.047 = 5.95 layers above the threshold
    c = classify(12, 768)
    assert c["regime"] == "depth-inefficient"
    assert c["margin"] == pytest.approx(12 - math.log(768) / LOG3)
    assert classify(6, 768)["regime"] == "depth-efficient"  # 729 <= 768
    # GPT-3: 96 layers at 12,288 is far above log3(12,288) = 8.57
    assert classify(96, 12288)["regime"] == "depth-inefficient"


def test_monomial_count_exact():
    assert monomial_count(1, 3) == 20  # C(3 + 3, 3)
    assert monomial_count(1, 2) == 10  # C(5, 2)
    assert monomial_count(2, 2) == 55  # C(9 + 2, 2) = 11·10/2
    assert log_monomial_count(1, 3) == pytest.approx(log3(20), rel=1e-14)
    assert log_monomial_count(3, 50) == pytest.approx(log3(math.comb(27 + 50, 50)), rel=1e-13)


def test_ln_comb_all_paths_agree_with_exact_integers():
    # small whole a (numpy sum), huge ratio (asymptotic expansion), both large (log-Gamma)
    for n, d in [(5, 10**40), (10**40, 5), (3**12, 768), (0, 7)]:
        exact = math.log(math.comb(n + d, n)) if n and d else 0.0
        assert float(ln_comb(n, d)) == pytest.approx(exact, rel=1e-12)
    # both above 2^20: log-Gamma at raised precision; float64 lgamma is good to ~1e-14 here
    a, b = 2**21, 2**22
    exact = math.lgamma(a + b + 1) - math.lgamma(a + 1) - math.lgamma(b + 1)
    assert float(ln_comb(a, b)) == pytest.approx(exact, rel=1e-12)
    # a non-whole argument uses the Gamma function: C(2.5 + 1, 1) = 3.5
    assert float(ln_comb(2.5, 1)) == pytest.approx(math.log(3.5), rel=1e-14)


def test_branches_cross_at_threshold_and_bracket_the_count():
    # at d_x = 3^L both branches are 3^L·L (log3 units): 3^6·6 = 6·729 = 4374
    assert count_branches(6, 729) == {"shallow": 4374.0, "deep": 4374.0}
    # 3^L << d_x: log3 C(10^6 + 3, 3) ≈ 3·log3(10^6) − log3(3!), so the shallow branch leads
    exact = log3(math.comb(10**6 + 3, 3))
    assert exact == pytest.approx(3 * log3(10**6) - log3(6), rel=1e-5)
    assert count_branches(1, 10**6)["shallow"] == pytest.approx(exact, rel=0.15)
    # 3^L >> d_x: log3 C(3^40 + 2, 2) ≈ 2·40 − log3 2, so the deep branch L·d_x = 80 leads
    assert log_monomial_count(40, 2) == pytest.approx(80 - log3(2), rel=1e-12)
    assert count_branches(40, 2)["deep"] == 80.0


def test_bounds_depth_efficient_by_hand():
    # L = 3, d_x = 768, H = 12: 27 <= 768, so
    # lower = 3^(3−2)·(log3 756 + 2 − log3 2 − 3), upper = ((27 − 1)/2)·log3 780
    r = bounds(3, 768, 12)
    assert r["regime"] == "depth-efficient"
    assert r["log3_sep_lower"] == pytest.approx(3 * (log3(756) + 2 - log3(2) - 3), rel=1e-13)
    assert r["log3_sep_upper"] == pytest.approx(13 * log3(780), rel=1e-13)
    assert r["constants_reconstructed"] is True


def test_bounds_depth_inefficient_by_hand():
    # L = 12 > log3 768: lower = (768 − 12)·(12 − log3 756), upper = 768·(12 + 2·log3 780)
    r = bounds(12, 768, 12)
    assert r["regime"] == "depth-inefficient"
    assert r["log3_sep_lower"] == pytest.approx(756 * (12 - log3(756)), rel=1e-13)
    assert r["log3_sep_upper"] == pytest.approx(768 * (12 + 2 * log3(780)), rel=1e-13)


def test_bounds_are_ordered_on_a_grid():
    for L in range(1, 16):
        for d, H in [(64, 2), (768, 12), (1536, 2), (12288, 96)]:
            r = bounds(L, d, H)
            assert r["log3_sep_lower"] <= r["log3_sep_upper"]


def test_constants_table_marks_reconstructed():
    rows = constants.table()
    assert {r["name"] for r in rows if not r["reconstructed"]} == {"base"}
    assert constants.value("upper_efficient_factor") == constants.Fraction(1, 2)
    assert all(r["provenance"] for r in rows)


def test_equivalent_width_count_solves_its_equation():
    r = equivalent_width(12, 768, 12)
    assert r["width"] == pytest.approx(768, rel=1e-9)  # same depth, same width
    for Lp in (1, 3, 6, 24):
        r = equivalent_width(12, 768, Lp)
        w = mpmath.mpf(10) ** r["log10_width"]  # up to 10^838 at L' = 1
        assert float(ln_comb(3**Lp, w)) == pytest.approx(float(ln_comb(3**12, 768)), rel=1e-9)


def test_equivalent_width_double_exponential_below_threshold():
    # L = 3, d_x = 10^6 (27 << 10^6). With n << d, C(n + d, n) ≈ d^n / n!, so
    # 3^L'·log10 d' − log10(3^L'!) = 27·6 − log10(27!): log10 d' = (162 − log10 27! + log10 n'!)/n'.
    lg = lambda n: math.lgamma(n + 1) / math.log(10)  # noqa: E731
    for Lp in (1, 2):
        n = 3**Lp
        expect = (27 * 6 - lg(27) + lg(n)) / n
        assert equivalent_width(3, 10**6, Lp)["log10_width"] == pytest.approx(expect, rel=0.01)
    # one layer less triples log d' (up to the factorial terms): double exponential in depth
    one, two = (equivalent_width(3, 10**6, Lp)["log10_width"] for Lp in (1, 2))
    assert 2.5 < one / two < 3.5
    assert equivalent_width(3, 10**6, 1)["log10_width_double_exponential"] == pytest.approx(54)  # 3^2·6


def test_equivalent_width_about_linear_above_threshold():
    # L = 40, d_x = 8 (3^40 >> 8): halving depth roughly doubles width, d' ≈ 8·40/20 = 16
    r = equivalent_width(40, 8, 20)
    assert r["width_linear"] == 16.0
    assert abs(r["width"] / 16 - 1) < 0.1


def test_equivalent_width_bounds_method():
    # reference L = 5, d_x = 732, H = 12 (243 <= 732): target lower = 27·(log3 720 + 2 − log3 2 − 5)
    target = 27 * (log3(720) + 2 - log3(2) - 5)
    # L' = 1: the inefficient piece tops out at 3·(1 + 2·log3 15) < target, so the efficient
    # piece decides: (1/2)·(3 − 1)·log3(d' + 12) = target, d' = 3^target − 12.
    assert 3 * (1 + 2 * log3(15)) < target
    r = equivalent_width(5, 732, 1, method="bounds", n_head=12)
    assert r["log10_width"] == pytest.approx(target * math.log10(3), rel=1e-12)
    # L' = 2: 9·(2 + 2·log3 21) >= target, so d' < 9 solves d'·(2 + 2·log3(d' + 12)) = target
    assert 9 * (2 + 2 * log3(21)) >= target
    w = equivalent_width(5, 732, 2, method="bounds", n_head=12)["width"]
    assert w < 9
    assert w * (2 + 2 * log3(w + 12)) == pytest.approx(target, rel=1e-9)


@pytest.mark.parametrize(
    "call",
    [
        lambda: threshold_depth(0),
        lambda: threshold_depth(2.5),
        lambda: width_at_threshold(MAX_DEPTH + 1),
        lambda: classify(0, 768),
        lambda: bounds(3, 12, 12),  # d_x <= H
        lambda: bounds(3, 770, 12),  # not divisible
        lambda: equivalent_width(3, 768, 2, method="guess"),
        lambda: equivalent_width(3, 768, 0),
        lambda: monomial_count(60, 10**5),  # far too many digits to write out
    ],
)
def test_bad_input(call):
    with pytest.raises(UserError):
        call()
