"""Depth separation for ReLU networks on a line: the sawtooth and an exact linear-piece counter.

The hat map g(x) = 2x on [0, 1/2], 2 − 2x on [1/2, 1] is 2·relu(x) − 4·relu(x − 1/2): two ReLU
units. Composing it k times gives a sawtooth with 2^k linear pieces, computed by a depth-k ReLU
network with two units per layer, 6k + 1 parameters. A network with one hidden layer of m units
is affine between its m breakpoints, so it has at most m + 1 pieces and needs m >= 2^k − 1 units
to produce 2^k (Telgarsky 2016, "Benefits of depth in neural networks", Lemma 2.1 and §3;
Telgarsky 2016 §3). The bound is not quite reached: the one-layer network of
:func:`shallow_sawtooth_layers` needs 2^k units for the exact sawtooth, because every slope
change is ±2^(k+1) while the first slope is 2^k, so one unit must act linearly on [0, 1].

A network here is a list of layers ``(W, b)``, ``W`` of shape (out, in) as nested sequences or a
numpy array, ``b`` of length out; ReLU follows every layer but the last. Input and output are
scalars. :func:`linear_pieces` is exact: weights become :class:`fractions.Fraction` (a float
becomes the exact rational it stores), each unit's pre-activation is tracked as an affine
function of x on every interval, intervals are split where a unit's pre-activation crosses zero,
and neighbouring intervals with the same affine output are merged. Nothing is sampled.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from depthwidth.errors import UserError
from depthwidth.theory.mlp import mlp_params, single_hidden_layer_params
from depthwidth.theory.validate import positive_int

MAX_DEPTH = 10_000
MAX_COUNTED_DEPTH = 12
"""Deepest sawtooth counted piece by piece by default (2^12 pieces take about 0.3 s)."""


class Piece(NamedTuple):
    """One maximal interval [start, end] on which the network output is slope·x + intercept."""

    start: Fraction
    end: Fraction
    slope: Fraction
    intercept: Fraction


def _frac(x, name: str) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, bool):
        raise UserError(f"{name} must be a number, got {x!r}")
    if isinstance(x, numbers.Integral):
        return Fraction(int(x))
    if isinstance(x, numbers.Real):
        f = float(x)
        if not math.isfinite(f):
            raise UserError(f"{name} must be finite, got {x!r}")
        return Fraction(f)
    raise UserError(f"{name} must be a number, got {x!r}")


def _exact_layers(layers) -> list[tuple[list[list[Fraction]], list[Fraction]]]:
    if len(layers) == 0:
        raise UserError("a network needs at least one layer")
    out, width = [], 1
    for i, (W, b) in enumerate(layers):
        rows = [[_frac(w, f"layer {i} weight") for w in row] for row in W]
        bias = [_frac(v, f"layer {i} bias") for v in b]
        if not rows or len(rows) != len(bias):
            raise UserError(f"layer {i}: W has {len(rows)} rows but b has {len(bias)} entries")
        if any(len(r) != width for r in rows):
            raise UserError(f"layer {i}: W rows must have {width} entries (the previous width)")
        out.append((rows, bias))
        width = len(rows)
    if width != 1:
        raise UserError(f"the last layer must have one output, got {width}")
    return out


def linear_pieces(layers: Sequence, lo=0, hi=1) -> list[Piece]:
    """The maximal linear pieces of a scalar ReLU MLP on [lo, hi], exactly.

    Args:
        layers: ``[(W, b), ...]``; W of shape (out, in), first in = 1, last out = 1.
        lo, hi: the interval (numbers, lo < hi; converted exactly to rationals).

    Returns:
        pieces in order, covering [lo, hi]; neighbours have different affine maps.

    Raises:
        UserError: shapes that do not chain, non-finite weights, or lo >= hi.

    Cost: O(pieces · width²) rational operations per layer.
    """
    net = _exact_layers(layers)
    a, z = _frac(lo, "lo"), _frac(hi, "hi")
    if not a < z:
        raise UserError(f"the interval needs lo < hi, got [{lo}, {hi}]")
    # Each interval carries the affine forms (slope, intercept) of the current layer's outputs.
    intervals: list[tuple[Fraction, Fraction, list[tuple[Fraction, Fraction]]]] = [
        (a, z, [(Fraction(1), Fraction(0))])
    ]
    last = len(net) - 1
    for index, (W, b) in enumerate(net):
        nxt = []
        for start, end, forms in intervals:
            pre = [
                (
                    sum((w * s for w, (s, _) in zip(row, forms)), Fraction(0)),
                    sum((w * c for w, (_, c) in zip(row, forms)), bias),
                )
                for row, bias in zip(W, b)
            ]
            if index == last:
                nxt.append((start, end, pre))
                continue
            roots = (-c / s for s, c in pre if s != 0)
            cuts = sorted({t for t in roots if start < t < end})
            edges = [start, *cuts, end]
            for s0, s1 in zip(edges[:-1], edges[1:]):
                mid = (s0 + s1) / 2
                # A unit is either on or off on the whole sub-interval; decide at its midpoint.
                post = [(s, c) if s * mid + c > 0 else (Fraction(0), Fraction(0)) for s, c in pre]
                nxt.append((s0, s1, post))
        intervals = nxt
    pieces: list[Piece] = []
    for start, end, forms in intervals:
        slope, intercept = forms[0]
        if pieces and (pieces[-1].slope, pieces[-1].intercept) == (slope, intercept):
            pieces[-1] = pieces[-1]._replace(end=end)
        else:
            pieces.append(Piece(start, end, slope, intercept))
    return pieces


def count_linear_pieces(layers: Sequence, lo=0, hi=1) -> int:
    """Number of maximal linear pieces of a scalar ReLU MLP on [lo, hi]; see :func:`linear_pieces`."""
    return len(linear_pieces(layers, lo, hi))


def evaluate(layers: Sequence, x) -> Fraction:
    """The network output at x, in exact rational arithmetic (ReLU after all but the last layer).

    Raises UserError on shapes that do not chain or a non-finite x or weight.
    """
    net = _exact_layers(layers)
    h = [_frac(x, "x")]
    for index, (W, b) in enumerate(net):
        h = [sum((w * v for w, v in zip(row, h)), bias) for row, bias in zip(W, b)]
        if index < len(net) - 1:
            h = [max(v, Fraction(0)) for v in h]
    return h[0]


def hat(x) -> Fraction:
    """The hat map g(x) = 2x for x <= 1/2, 2 − 2x above, as an exact Fraction; UserError on a non-number.

    Source: Telgarsky 2016, §3.
    """
    x = _frac(x, "x")
    return 2 * x if x <= Fraction(1, 2) else 2 - 2 * x


def sawtooth_layers(depth: int) -> list[tuple[list[list[Fraction]], list[Fraction]]]:
    """The depth-k ReLU network computing the k-fold hat map g∘…∘g exactly on [0, 1].

    Layer 1 is x → (relu(x), relu(x − 1/2)); each further hidden layer applies
    y = 2·h₁ − 4·h₂ (= g of the previous value) and feeds (relu(y), relu(y − 1/2)); the output is
    2·h₁ − 4·h₂. Widths 1 → 2 → … → 2 → 1 with k hidden layers: 4 + 6(k − 1) + 3 = 6k + 1
    parameters. Raises UserError if depth < 1. Source: Telgarsky 2016 §3.
    """
    k = positive_int(depth, "depth")
    half = Fraction(1, 2)
    layers = [([[Fraction(1)], [Fraction(1)]], [Fraction(0), -half])]
    layers += [([[Fraction(2), Fraction(-4)], [Fraction(2), Fraction(-4)]], [Fraction(0), -half])] * (k - 1)
    layers.append(([[Fraction(2), Fraction(-4)]], [Fraction(0)]))
    return layers


def shallow_sawtooth_layers(depth: int) -> list[tuple[list[list[Fraction]], list[Fraction]]]:
    """A one-hidden-layer ReLU network with 2^k units equal to the depth-k sawtooth on [0, 1].

    f(x) = 2^k·relu(x) + Σ_{i=1}^{2^k − 1} (−1)^i·2^(k+1)·relu(x − i/2^k): slope 2^k on the first
    piece, and at every breakpoint i/2^k the slope flips sign. Raises UserError if depth < 1.
    """
    k = positive_int(depth, "depth")
    n = 2**k
    W = [[Fraction(1)] for _ in range(n)]
    b = [Fraction(-i, n) for i in range(n)]
    v = [Fraction(n)] + [Fraction((-1) ** i * 2 * n) for i in range(1, n)]
    return [(W, b), ([v], [Fraction(0)])]


def sawtooth_summary(depth: int, count: bool | None = None) -> dict:
    """Deep vs shallow cost of the depth-k sawtooth.

    Args:
        depth: k (>= 1).
        count: count the pieces of the deep network exactly with :func:`count_linear_pieces`
            (True), or report the proven 2^k (False); None (default) counts up to
            ``MAX_COUNTED_DEPTH`` and reports 2^k beyond, where counting takes too long.

    Returns:
        dict with ``depth``, ``pieces`` (counted, 2^k), ``counted`` (bool), ``deep_units`` (2k),
        ``deep_params`` (6k + 1), ``shallow_units_needed`` (2^k − 1, from "m units give <= m + 1
        pieces"), ``shallow_params_needed`` (3·(2^k − 1) + 1, that one-layer net's count) and
        ``shallow_units_construction`` (2^k, the explicit exact one-layer network).

    Raises:
        UserError: depth < 1, or depth > MAX_DEPTH (2^k would have more digits than Python
        prints as an integer, and JSON consumers could not read it anyway).
    """
    k = positive_int(depth, "depth")
    if k > MAX_DEPTH:
        raise UserError(f"depth must be <= {MAX_DEPTH} (2^depth has ~0.3*depth decimal digits), got {k}")
    if count is None:
        count = k <= MAX_COUNTED_DEPTH
    pieces = count_linear_pieces(sawtooth_layers(k)) if count else 2**k
    needed = pieces - 1
    return {
        "depth": k,
        "pieces": pieces,
        "counted": bool(count),
        "deep_units": 2 * k,
        "deep_params": mlp_params(1, [2] * k, 1),
        "shallow_units_needed": needed,
        "shallow_params_needed": single_hidden_layer_params(1, needed, 1),
        "shallow_units_construction": 2**k,
    }


def sawtooth(x, depth: int) -> Fraction:
    """g^k(x), the k-fold hat map (:func:`hat` applied ``depth`` times), exactly; UserError on bad input.

    Source: Telgarsky 2016, §3.
    """
    k = positive_int(depth, "depth")
    y = _frac(x, "x")
    for _ in range(k):
        y = hat(y)
    return y


def sup_error(layers: Sequence, depth: int, pieces: list[Piece] | None = None) -> Fraction:
    """max over x in [0, 1] of |f(x) − g^k(x)| for the ReLU MLP f = ``layers``, exactly.

    Both f and g^k are affine between the union of f's piece boundaries (:func:`linear_pieces`)
    and g^k's breakpoints j/2^k, so |f − g^k| (convex on each such interval) peaks at one of
    these points; all are evaluated in rational arithmetic, nothing is sampled.

    ``pieces``: ``linear_pieces(layers, 0, 1)`` if already computed (it is the costly part).
    Raises UserError as :func:`linear_pieces` and on depth < 1. Cost: O(pieces + 2^k) points.
    """
    k = positive_int(depth, "depth")
    pieces = linear_pieces(layers, 0, 1) if pieces is None else pieces
    points = {Fraction(j, 2**k) for j in range(2**k + 1)} | {p.start for p in pieces} | {p.end for p in pieces}
    at = iter(sorted(points))
    worst, x = Fraction(0), next(at)
    for p in pieces:  # walk the sorted points and the pieces together
        while x is not None and x <= p.end:
            worst = max(worst, abs(p.slope * x + p.intercept - sawtooth(x, k)))
            x = next(at, None)
    return worst


def sup_error_lower_bound(pieces: int, depth: int) -> Fraction:
    """The least sup-norm error on [0, 1] of any continuous piecewise-linear f with ``pieces``
    pieces against g^k: 1/2 when pieces < 2^k, else 0 (the exact sawtooth has 2^k).

    Derivation (an alternation argument, the one behind Telgarsky 2016, §3; written out here):
    g^k is 0 at the even and 1 at the odd points x_j = j/2^k, j = 0…2^k. If sup|f − g^k| < 1/2,
    then h = f − 1/2 is < 0 at even and > 0 at odd x_j: it changes sign on each of the 2^k
    disjoint gaps (x_j, x_{j+1}), so it has a zero in each. A piece on which h is affine and not
    identically 0 has at most one zero; a piece on which h ≡ 0 contains no x_j (h(x_j) ≠ 0), so
    it lies inside one gap. Each piece thus serves at most one gap: pieces >= 2^k. Hence fewer
    than 2^k pieces force sup|f − g^k| >= 1/2, and f ≡ 1/2 (one piece) attains it: the bound is
    tight. A one-hidden-layer ReLU net of u units has at most u + 1 pieces (Telgarsky 2016,
    Lemma 2.1), so with u <= 2^k − 2 its sup error is >= 1/2.

    Raises UserError on pieces < 1 or depth < 1.
    """
    p = positive_int(pieces, "pieces")
    k = positive_int(depth, "depth")
    return Fraction(1, 2) if p < 2**k else Fraction(0)
