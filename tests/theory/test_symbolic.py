"""Symbolic forms: the crossing of the two branches is log3(d_x), derived by sympy."""

import math

import mpmath
import pytest
import sympy as sp

from depthwidth.theory import separation, symbolic
from depthwidth.theory.symbolic import H, L, L_prime, d_x


def test_threshold_expression():
    assert sp.simplify(symbolic.threshold_expr() - sp.log(d_x) / sp.log(3)) == 0
    assert sp.simplify(symbolic.threshold_expr().subs(d_x, 729)) == 6  # log(3^6)/log(3)


def test_crossing_is_log3_width():
    c = symbolic.crossing_depth()
    assert c["identity_holds"] is True
    assert sp.simplify(c["crossing"] - sp.log(d_x) / sp.log(3)) == 0
    shallow, deep = symbolic.branches()
    assert sp.simplify(shallow.subs(L, c["crossing"]) - deep.subs(L, c["crossing"])) == 0


def test_lambert_w_roots_numerically():
    # L = −W(−ln d / d)/ln 3: branch −1 gives log3 d; branch 0 gives the spurious root below 1.
    d = 768
    z = -math.log(d) / d
    on_minus_one = -mpmath.lambertw(z, -1).real / math.log(3)
    assert float(on_minus_one) == pytest.approx(math.log(d) / math.log(3), rel=1e-14)
    principal = float(-mpmath.lambertw(z, 0).real / math.log(3))
    assert 0 < principal < 1
    # both are roots of 3^L·ln d = L·d·ln 3
    for root in (float(on_minus_one), principal):
        assert 3**root * math.log(d) == pytest.approx(root * d * math.log(3), rel=1e-10)
    # sympy's symbolic form evaluated on branch −1 agrees
    expr = symbolic.crossing_depth()["lambertw_branch"].subs(d_x, d)
    assert float(sp.N(expr, 30)) == pytest.approx(math.log(d) / math.log(3), rel=1e-14)


def test_equivalent_width_asymptotes():
    shallow, deep = symbolic.branches()
    assert sp.simplify(symbolic.equivalent_width_expr(shallow) - d_x ** (3 ** (L - L_prime))) == 0
    assert sp.simplify(symbolic.equivalent_width_expr(deep) - L * d_x / L_prime) == 0


def test_monomial_count_expression():
    eq = symbolic.equations()["monomial_count"]
    assert eq.rhs.subs({L: 1, d_x: 3}) == 20  # C(6, 3)


@pytest.mark.parametrize("shape", [(3, 768, 12), (12, 768, 12), (1, 64, 2), (5, 1536, 2)])
def test_symbolic_bounds_match_numeric(shape):
    # one table of constants feeds both modules, so the two must agree everywhere
    n_layer, width, heads = shape
    num = separation.bounds(n_layer, width, heads)
    exprs = symbolic.bound_exprs()
    kind = "efficient" if num["regime"] == "depth-efficient" else "inefficient"
    subs = {L: n_layer, d_x: width, H: heads}
    assert float(sp.N(exprs[f"lower_bound_{kind}"].subs(subs))) == pytest.approx(
        num["log3_sep_lower"], rel=1e-12
    )
    assert float(sp.N(exprs[f"upper_bound_{kind}"].subs(subs))) == pytest.approx(
        num["log3_sep_upper"], rel=1e-12
    )


def test_latex_for_every_expression():
    tex = symbolic.latex()
    expected = {
        "threshold",
        "threshold_inverse",
        "monomial_count",
        "log_monomial_count",
        "branch_shallow",
        "branch_deep",
        "crossing_lambertw",
        "crossing",
        "lower_bound_efficient",
        "upper_bound_efficient",
        "lower_bound_inefficient",
        "upper_bound_inefficient",
        "equivalent_width_efficient",
        "equivalent_width_inefficient",
    }
    assert set(tex) == expected
    assert tex["threshold"] == r"L_{th} = \frac{\log{\left(d_{x} \right)}}{\log{\left(3 \right)}}"
    assert "W_{-1}" in tex["crossing_lambertw"]
    assert tex["equivalent_width_efficient"] == "d' = d_{x}^{3^{L - L'}}"
    assert symbolic.latex(["threshold_inverse"]) == {"threshold_inverse": "d_{x} = 3^{L}"}
