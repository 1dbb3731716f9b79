"""Symbolic forms (sympy) of the separation-rank theory, their derivations, and LaTeX for each.

Everything numeric in :mod:`depthwidth.theory.separation` has its expression here:

- ``threshold``: L_th = log₃ d_x, and its inverse d_x = 3^L;
- ``monomial_count`` C(3^L + d_x, d_x) and its log; ``branch_shallow`` 3^L·log d_x (3^L << d_x)
  and ``branch_deep`` L·d_x·log 3 (3^L >> d_x), natural logs as in docs/concepts.md;
- ``crossing``: the two branches solved for L with :func:`sympy.solve`; sympy answers with the
  Lambert W function, L = −W(−ln d_x / d_x)/ln 3. The real equation has two roots, one per real
  branch of W. On the branch W₋₁ (values <= −1) the identity W₋₁(w·e^w) = w with w = −ln d_x
  (<= −1 for d_x >= e) gives L = ln d_x / ln 3 = log₃ d_x, the threshold;
  :func:`crossing_depth` checks the identity symbolically. The W₀ root lies below L = 1, where
  3^L << d_x and the deep branch does not apply;
- the published-form bounds (constants from the one table in
  :mod:`depthwidth.theory.constants`, *reconstructed*);
- the equivalent-width asymptotes d' = d_x^(3^(L−L')) (depth-efficient) and d' = d_x·L/L'
  (depth-inefficient), solved by sympy from equating one branch at (L', d') and (L, d_x).

Importing this module imports sympy (about half a second); the CLI does so only for --latex.
"""

from __future__ import annotations

import functools

import sympy as sp

from depthwidth.theory.constants import value

L, L_prime = sp.symbols("L L'", positive=True)
d_x, H = sp.symbols("d_x H", positive=True)
L_th, d_prime = sp.symbols("L_{th} d'", positive=True)
BASE = sp.Integer(int(value("base")))


def _c(name: str) -> sp.Rational:
    v = value(name)
    return sp.Rational(v.numerator, v.denominator)


def _log3(x):
    return sp.log(x, BASE)


def threshold_expr():
    """L_th = log₃ d_x (sympy writes it log(d_x)/log(3)). Source: Levine et al. 2020 (arXiv 2006.12467), the depth threshold."""
    return _log3(d_x)


def branches() -> tuple:
    """(3^L·log d_x, L·d_x·log 3): the log of C(3^L + d_x, d_x) for 3^L << d_x and 3^L >> d_x."""
    return BASE**L * sp.log(d_x), L * d_x * sp.log(BASE)


@functools.cache
def crossing_depth() -> dict:
    """Solve 3^L·log d_x = L·d_x·log 3 for L symbolically and take the threshold root.

    Returns:
        dict with ``lambertw_form`` (sympy's solution, principal branch), ``lambertw_branch``
        (the same with W₋₁, the threshold root), ``identity_holds`` (True when
        w·e^w simplifies to W's argument for w = −ln d_x) and ``crossing`` (the W₋₁ root, which
        simplifies to log(d_x)/log(3)).

    Raises:
        RuntimeError: if sympy's solution has no Lambert W or the identity fails (a sympy change).
    """
    shallow, deep = branches()
    solutions = sp.solve(sp.Eq(shallow, deep), L)
    with_w = [s for s in solutions if s.has(sp.LambertW)]
    if not with_w:
        raise RuntimeError(f"sympy returned no Lambert W solution: {solutions}")
    general = with_w[0]
    w = -sp.log(d_x)
    holds = []

    def on_minus_one_branch(e):
        # W_{-1}(z) is the w <= -1 with w e^w = z; check z really is w e^w for w = -ln d_x.
        holds.append(sp.simplify(w * sp.exp(w) - e.args[0]) == 0)
        return w

    crossing = sp.simplify(general.replace(lambda e: isinstance(e, sp.LambertW), on_minus_one_branch))
    if not (holds and all(holds)):
        raise RuntimeError("the Lambert W identity did not hold for w = -log(d_x)")
    branch = general.replace(lambda e: isinstance(e, sp.LambertW), lambda e: sp.LambertW(e.args[0], -1))
    return {"lambertw_form": general, "lambertw_branch": branch, "identity_holds": True, "crossing": crossing}


def bound_exprs() -> dict:
    """The four published-form bounds on log₃(sep) (constants from the table, reconstructed)."""
    a_L = _c("a_L_constant") - _c("a_L_log3_2_coefficient") * _log3(2) - _c("a_L_depth_coefficient") * L
    return {
        "lower_bound_efficient": BASE ** (L - _c("lower_efficient_exponent_offset")) * (_log3(d_x - H) + a_L),
        "upper_bound_efficient": _c("upper_efficient_factor") * (BASE**L - 1) * _log3(d_x + H),
        "lower_bound_inefficient": _c("lower_inefficient_scale") * (d_x - H) * (L - _log3(d_x - H)),
        "upper_bound_inefficient": _c("upper_inefficient_scale")
        * d_x
        * (L + _c("upper_inefficient_log_coefficient") * _log3(d_x + H)),
    }


@functools.cache
def equations() -> dict:
    """Every expression of the theory as a named sympy equation (left side a symbol)."""
    shallow, deep = branches()
    cross = crossing_depth()
    sep = sp.Symbol(r"\log_{3} \mathrm{sep}")
    log_c = sp.Symbol(r"\log C")
    eqs = {
        "threshold": sp.Eq(L_th, threshold_expr()),
        "threshold_inverse": sp.Eq(d_x, BASE**L),
        "monomial_count": sp.Eq(sp.Symbol("C"), sp.binomial(BASE**L + d_x, d_x)),
        "log_monomial_count": sp.Eq(log_c, sp.log(sp.binomial(BASE**L + d_x, d_x))),
        "branch_shallow": sp.Eq(log_c, shallow),
        "branch_deep": sp.Eq(log_c, deep),
        "crossing_lambertw": sp.Eq(L, cross["lambertw_branch"]),
        "crossing": sp.Eq(L, cross["crossing"]),
    }
    eqs.update({k: sp.Eq(sep, v) for k, v in bound_exprs().items()})
    eqs["equivalent_width_efficient"] = sp.Eq(d_prime, equivalent_width_expr(shallow))
    eqs["equivalent_width_inefficient"] = sp.Eq(d_prime, equivalent_width_expr(deep))
    return eqs


def equivalent_width_expr(branch):
    """Solve branch(L', d') = branch(L, d_x) for d' (one of :func:`branches`).

    The shallow branch gives d_x^(3^(L−L')) (double-exponential in L − L'); the deep branch gives
    L·d_x/L' (linear). Raises RuntimeError unless sympy finds exactly one positive solution.
    """
    solutions = sp.solve(sp.Eq(branch.subs({L: L_prime, d_x: d_prime}, simultaneous=True), branch), d_prime)
    if len(solutions) != 1:
        raise RuntimeError(f"expected one solution for d', got {solutions}")
    return solutions[0]


def latex(names=None) -> dict:
    """LaTeX of the named equations (all by default), name → string. KeyError on an unknown name."""
    eqs = equations()
    return {n: sp.latex(eqs[n]) for n in (names or eqs)}
