"""The depth-efficiency threshold of self-attention and its separation-rank bounds, numerically.

Levine et al. 2020 ("The Depth-to-Width Interplay in Self-Attention", arXiv 2006.12467) bound
the separation rank of an L-layer, width-d_x, H-head self-attention network (Levine et al. 2020; docs/concepts.md):

- threshold L_th = log₃ d_x; a shape is *depth-efficient* when L <= L_th (3^L <= d_x, checked
  in exact integers) and *depth-inefficient* above;
- counting form: the separation rank is at most the number of monomials of degree <= 3^L in
  d_x variables, C(3^L + d_x, d_x); its log is ≈ 3^L·log d_x while 3^L << d_x and
  ≈ L·d_x·log 3 while 3^L >> d_x (the branches cross at L = log₃ d_x, derived symbolically in
  :mod:`depthwidth.theory.symbolic`);
- published-form bounds (constants *reconstructed*, one table in
  :mod:`depthwidth.theory.constants`), log base 3.

Numbers here use exact integers and mpmath (no sympy import, so the CLI stays quick); every
log in a result key named ``log3_*`` is base 3, ``log10_*`` base 10. Depth is capped at
``MAX_DEPTH`` because 3^L overflows float64 above L ≈ 646.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from depthwidth.errors import UserError
from depthwidth.theory.constants import CONSTANTS, value
from depthwidth.theory.validate import heads_divide_width, positive_int

MAX_DEPTH = 500
BASE = int(value("base"))
EFFICIENT = "depth-efficient"
INEFFICIENT = "depth-inefficient"
_LN_BASE = mpmath.log(BASE)


def _depth(n_layer, name: str = "n_layer") -> int:
    L = positive_int(n_layer, name)
    if np.ndim(L) or L > MAX_DEPTH:
        raise UserError(f"{name} must be a whole number in 1..{MAX_DEPTH}, got {n_layer!r}")
    return L


def _width(d_model, name: str = "d_model") -> int:
    d = positive_int(d_model, name)
    if np.ndim(d):
        raise UserError(f"{name} must be a single whole number")
    return d


def _exact_log(d: int) -> int | None:
    """k with BASE**k == d, else None."""
    k, p = 0, 1
    while p < d:
        p *= BASE
        k += 1
    return k if p == d else None


def threshold_depth(d_model) -> float:
    """L_th = log₃ d_x, the depth at which self-attention turns depth-inefficient.

    Exact for powers of 3 (d_x = 729 gives 6.0, not 5.999…); irrational otherwise.

    Args:
        d_model: width d_x (whole number >= 1).

    Returns:
        L_th as a float (layers).

    Raises:
        UserError: d_model not a whole number >= 1.

    Source: Levine et al. 2020 (arXiv 2006.12467), the depth threshold.
    """
    d = _width(d_model)
    k = _exact_log(d)
    return float(k) if k is not None else float(mpmath.log(d) / _LN_BASE)


def width_at_threshold(n_layer) -> int:
    """The inverse of the threshold: the width d_x = 3^L at which depth L sits exactly on it.

    Raises UserError unless 1 <= n_layer <= MAX_DEPTH. Source: Levine et al. 2020 (docs/concepts.md).
    """
    return BASE ** _depth(n_layer)


def classify(n_layer, d_model) -> dict:
    """Regime of a shape: depth-efficient when L <= log₃ d_x (i.e. 3^L <= d_x), else inefficient.

    Returns:
        dict with ``n_layer``, ``d_model``, ``threshold_depth`` (L_th), ``width_at_threshold``
        (3^L), ``margin`` (L − L_th, layers above the threshold) and ``regime``
        ("depth-efficient" or "depth-inefficient").

    Raises:
        UserError: sizes not whole numbers >= 1 or depth above MAX_DEPTH.

    Source: Levine et al. 2020 (arXiv 2006.12467), the depth threshold. The comparison is exact (integers).
    """
    L, d = _depth(n_layer), _width(d_model)
    lth = threshold_depth(d)
    return {
        "n_layer": L,
        "d_model": d,
        "threshold_depth": lth,
        "width_at_threshold": BASE**L,
        "margin": L - lth,
        "regime": EFFICIENT if BASE**L <= d else INEFFICIENT,
    }


def ln_comb(n, d) -> mpmath.mpf:
    """ln C(n + d, n) for reals n, d >= 0 (via the Gamma function), without cancellation.

    With a = min(n, d), b = max(n, d): for a whole a <= 2^20 the exact sum
    Σ_{i<=a} ln(1 + b/i) (numpy, float64 terms); for b > 10^30·a the expansion
    a·ln b − ln Γ(a + 1) + a(a + 1)/(2b) (error O(a³/b²)); otherwise ln Γ at enough digits to
    resolve the difference of the two large log-Gammas. b may be astronomically large (mpf).

    Returns an mpmath ``mpf`` (natural log). Raises UserError if n or d is negative.
    """
    n, d = mpmath.mpf(n), mpmath.mpf(d)
    if n < 0 or d < 0:
        raise UserError("ln_comb needs n, d >= 0")
    a, b = (n, d) if n <= d else (d, n)
    if a == 0:
        return mpmath.mpf(0)
    if a == mpmath.floor(a) and a <= 2**20:
        i = np.arange(1, int(a) + 1, dtype=float)
        return mpmath.mpf(float(np.sum(np.logaddexp(0.0, float(mpmath.log(b)) - np.log(i)))))
    if b > a * mpmath.mpf(10) ** 30:
        return a * mpmath.log(b) - mpmath.loggamma(a + 1) + a * (a + 1) / (2 * b)
    with mpmath.workdps(30 + int(mpmath.log10(b))):
        return +(mpmath.loggamma(a + b + 1) - mpmath.loggamma(a + 1) - mpmath.loggamma(b + 1))


def monomial_count(n_layer, d_model) -> int:
    """C(3^L + d_x, d_x) exactly: monomials of degree <= 3^L in d_x variables.

    Raises:
        UserError: bad sizes, or a result of more than 100,000 decimal digits (use
        :func:`log_monomial_count`).

    Source: our derivation of the paper's counting argument (docs/concepts.md, separation rank).
    """
    L, d = _depth(n_layer), _width(d_model)
    digits = float(ln_comb(BASE**L, d) / mpmath.log(10))
    if digits > 1e5:
        raise UserError(f"C(3^{L} + {d}, {d}) has about {digits:.3g} digits; use its logarithm")
    return math.comb(BASE**L + d, d)


def log_monomial_count(n_layer, d_model) -> float:
    """log₃ C(3^L + d_x, d_x), the counting bound on log₃(separation rank). Raises UserError."""
    L, d = _depth(n_layer), _width(d_model)
    return float(ln_comb(BASE**L, d) / _LN_BASE)


def count_branches(n_layer, d_model) -> dict:
    """The two asymptotic branches of log₃ C(3^L + d_x, d_x), in log₃ units.

    ``shallow`` = 3^L·log₃ d_x (valid while 3^L << d_x) and ``deep`` = L·d_x (valid while
    3^L >> d_x); the count follows the smaller one, and they are equal at L = log₃ d_x.
    Raises UserError on bad sizes. Source: Levine et al. 2020 (docs/concepts.md).
    """
    L, d = _depth(n_layer), _width(d_model)
    return {"shallow": float(mpmath.mpf(BASE) ** L * mpmath.log(d) / _LN_BASE), "deep": float(L * d)}


def _c(name: str) -> mpmath.mpf:
    v = value(name)
    return mpmath.mpf(v.numerator) / v.denominator


def _log3(x) -> mpmath.mpf:
    return mpmath.log(x) / _LN_BASE


def _lower(L, d, H):
    if BASE**L <= d:
        a_L = _c("a_L_constant") - _c("a_L_log3_2_coefficient") * _log3(2) - _c("a_L_depth_coefficient") * L
        return mpmath.mpf(BASE) ** (L - _c("lower_efficient_exponent_offset")) * (_log3(d - H) + a_L)
    return _c("lower_inefficient_scale") * (d - H) * (L - _log3(d - H))


def _upper_efficient(L, d, H):
    return _c("upper_efficient_factor") * (mpmath.mpf(BASE) ** L - 1) * _log3(d + H)


def _upper_inefficient(L, d, H):
    return _c("upper_inefficient_scale") * d * (L + _c("upper_inefficient_log_coefficient") * _log3(d + H))


def _upper(L, d, H):
    """Upper bound at a real width d (the equivalent-width search needs non-integer widths)."""
    return _upper_efficient(L, d, H) if BASE**L <= d else _upper_inefficient(L, d, H)


def _shape_with_heads(n_layer, d_model, n_head):
    L, d, H = _depth(n_layer), _width(d_model), positive_int(n_head, "n_head")
    heads_divide_width(d, H)
    if d <= H:
        raise UserError(f"the bounds need width > heads (they use log3(d_x - H)); got d_x={d}, H={H}")
    return L, d, H


def bounds(n_layer, d_model, n_head) -> dict:
    """Published-form bounds on log₃(separation rank), for all weights but a measure-zero set.

    - L <= log₃ d_x: 3^(L−2)·(log₃(d_x − H) + a_L) <= log₃ sep <= ((3^L − 1)/2)·log₃(d_x + H),
      a_L = 2 − log₃ 2 − L;
    - L > log₃ d_x: c·(d_x − H)·(L − log₃(d_x − H)) <= log₃ sep <= c'·d_x·(L + 2·log₃(d_x + H)).

    *Reconstructed:* the functional forms follow the paper's Theorems 1 and 2 (docs/concepts.md); every constant is read from
    :data:`depthwidth.theory.constants.CONSTANTS` and may differ from the paper's Theorems 1
    and 2 (the proportionality constants c, c' are not known and set to 1).

    Args:
        n_layer: L (1..MAX_DEPTH); d_model: d_x; n_head: H (divides d_x, H < d_x).

    Returns:
        dict with the shape, ``regime``, ``threshold_depth``, ``log3_sep_lower``,
        ``log3_sep_upper``, ``log3_monomial_count`` (the counting bound, for comparison) and
        ``constants_reconstructed`` (True while any constant used is unchecked).

    Raises:
        UserError: bad sizes, H not dividing d_x, or d_x <= H.

    Source: Levine et al. 2020, arXiv 2006.12467, Theorems 1 and 2 (forms as in docs/concepts.md).
    """
    L, d, H = _shape_with_heads(n_layer, d_model, n_head)
    regime = EFFICIENT if BASE**L <= d else INEFFICIENT

    return {
        "n_layer": L,
        "d_model": d,
        "n_head": H,
        "regime": regime,
        "threshold_depth": threshold_depth(d),
        "log3_sep_lower": float(_lower(L, d, H)),
        "log3_sep_upper": float(_upper(L, d, H)),
        "log3_monomial_count": log_monomial_count(L, d),
        "constants_reconstructed": any(c.reconstructed for c in CONSTANTS.values()),
    }


def _first_u(f, lo: float, hi: float) -> mpmath.mpf:
    """Root in u of an increasing f, bracketed by growing ``hi`` until f(hi) >= 0."""
    for _ in range(400):
        if f(hi) >= 0:
            break
        lo, hi = hi, 2 * hi + 8
    else:  # pragma: no cover - f grows at least like u
        raise UserError("equivalent width search did not bracket a root")
    # Bisection in u = ln(width): 200 halvings of the bracket reach float precision.
    lo, hi = mpmath.mpf(lo), mpmath.mpf(hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) >= 0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-13 * max(1, abs(hi)):
            break
    return hi


METHODS = ("count", "bounds")


def equivalent_width(n_layer, d_model, n_layer_other, method: str = "count", n_head: int = 1) -> dict:
    """The width d' that a depth-L' network needs to match a depth-L, width-d_x network.

    ``method="count"`` solves C(3^L' + d', d') = C(3^L + d_x, d_x) for real d' (the counting form;
    monotone in d'). ``method="bounds"`` finds the smallest d' at which the published-form upper
    bound of depth L' reaches the lower bound of (L, d_x) (the paper's notion: below it the
    shallower network provably cannot match; constants reconstructed, see :func:`bounds`).
    Below the threshold the answer is double-exponential in L − L' (d' ≈ d_x^(3^(L−L'))); above
    it, about linear (d' ≈ d_x·L/L').

    Args:
        n_layer, d_model: the reference shape (L, d_x).
        n_layer_other: L' (1..MAX_DEPTH).
        method: "count" or "bounds".
        n_head: H, used by ``method="bounds"`` only (divides d_x, H < d_x).

    Returns:
        dict with ``n_layer`` (L'), ``reference`` ({n_layer, d_model}), ``method``,
        ``log10_width`` (log₁₀ d'), ``width`` (d' as a float, None above 1e300),
        ``log10_width_double_exponential`` (log₁₀ of d_x^(3^(L−L'))) and
        ``width_linear`` (d_x·L/L').

    Raises:
        UserError: bad sizes or method.

    Source: Levine et al. 2020, Theorem 1 (double-exponential depth efficiency below L_th).
    """
    if method not in METHODS:
        raise UserError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    L, d = _depth(n_layer), _width(d_model)
    Lp = _depth(n_layer_other, "n_layer_other")
    if method == "count":
        target = ln_comb(BASE**L, d)
        u = _first_u(lambda u: ln_comb(BASE**Lp, mpmath.exp(u)) - target, -60.0, math.log(d) + 1)
    else:
        L, d, H = _shape_with_heads(L, d, n_head)
        target = _lower(L, d, H)
        if target <= 0:
            raise UserError(f"the lower bound for L={L}, d_x={d}, H={H} is not positive; it asks no width")
        n = BASE**Lp
        # Widths below 3^L' are in L''s inefficient regime, where the upper bound increases with
        # d'; if that piece reaches the target (at its right end), the answer lies in it.
        if _upper_inefficient(Lp, n, H) >= target:
            u = _first_u(lambda u: _upper_inefficient(Lp, mpmath.exp(u), H) - target, -60.0, math.log(n))
        else:
            # Efficient piece: c·(3^L' − 1)·log₃(d' + H) = target, solved in closed form.
            log3_dh = target / (_c("upper_efficient_factor") * (mpmath.mpf(n) - 1))
            needed = mpmath.mpf(BASE) ** log3_dh - H
            u = mpmath.log(n) if needed <= n else mpmath.log(needed)
    log10 = float(u / mpmath.log(10))
    return {
        "n_layer": Lp,
        "reference": {"n_layer": L, "d_model": d},
        "method": method,
        "log10_width": log10,
        "width": float(mpmath.exp(u)) if log10 < 300 else None,
        "log10_width_double_exponential": float(mpmath.mpf(BASE) ** (L - Lp) * mpmath.log10(d)),
        "width_linear": d * L / Lp,
    }
