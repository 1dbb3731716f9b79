"""The depth-k sawtooth and the exact linear-piece counter (Telgarsky 2016)."""

from fractions import Fraction

import numpy as np
import pytest

from depthwidth.errors import UserError
from depthwidth.theory.sawtooth import (
    MAX_COUNTED_DEPTH,
    count_linear_pieces,
    evaluate,
    hat,
    linear_pieces,
    sawtooth_layers,
    sawtooth_summary,
    shallow_sawtooth_layers,
)


def _hat_k(x, k):
    for _ in range(k):
        x = hat(x)
    return x


@pytest.mark.parametrize("k", range(1, 11))
def test_sawtooth_has_two_to_the_k_pieces(k):
    # each hat composition maps every piece onto [0, 1] twice, doubling the count
    assert count_linear_pieces(sawtooth_layers(k)) == 2**k


def test_depth_two_pieces_by_hand():
    # g(g(x)): breakpoints at 1/4, 1/2, 3/4; slopes 4, −4, 4, −4; values 0, 1, 0, 1, 0
    q = Fraction(1, 4)
    assert linear_pieces(sawtooth_layers(2)) == [
        (0, q, 4, 0),
        (q, 2 * q, -4, 2),
        (2 * q, 3 * q, 4, -2),
        (3 * q, 1, -4, 4),
    ]


@pytest.mark.parametrize("k", [1, 2, 5])
def test_network_equals_iterated_hat(k):
    for j in range(0, 2 ** (k + 2) + 1):
        x = Fraction(j, 2 ** (k + 2))
        assert evaluate(sawtooth_layers(k), x) == _hat_k(x, k)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_deep_params_are_six_k_plus_one(k):
    layers = sawtooth_layers(k)
    n = sum(len(W) * len(W[0]) + len(b) for W, b in layers)
    assert n == 6 * k + 1  # 4 + 6(k − 1) + 3
    assert sawtooth_summary(k)["deep_params"] == 6 * k + 1


def test_summary_values():
    # k = 3: 8 pieces; a one-layer net with m units has <= m + 1 pieces, so m >= 7,
    # costing 7·(1 + 1 + 1) + 1 = 22 parameters against the deep net's 19.
    r = sawtooth_summary(3)
    assert r == {
        "depth": 3,
        "pieces": 8,
        "counted": True,
        "deep_units": 6,
        "deep_params": 19,
        "shallow_units_needed": 7,
        "shallow_params_needed": 22,
        "shallow_units_construction": 8,
    }
    big = sawtooth_summary(MAX_COUNTED_DEPTH + 8)
    k = MAX_COUNTED_DEPTH + 8
    assert big["counted"] is False and big["pieces"] == 2**k
    assert big["shallow_units_needed"] == 2**k - 1 and big["deep_params"] == 6 * k + 1


@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_shallow_construction_equals_deep_sawtooth(k):
    deep, shallow = sawtooth_layers(k), shallow_sawtooth_layers(k)
    assert count_linear_pieces(shallow) == 2**k
    # two piecewise-linear functions that agree at every breakpoint and midpoint are equal
    for p in linear_pieces(deep):
        for x in (p.start, (p.start + p.end) / 2, p.end):
            assert evaluate(shallow, x) == evaluate(deep, x)


def test_one_hidden_layer_bound_on_random_nets():
    rng = np.random.default_rng(0)
    for m in range(1, 13):
        for _ in range(5):
            layers = [
                (rng.normal(size=(m, 1)), rng.normal(size=m)),
                (rng.normal(size=(1, m)), rng.normal(size=1)),
            ]
            assert count_linear_pieces(layers, -3, 3) <= m + 1


def test_one_hidden_layer_reaches_m_plus_one():
    # units relu(x − t_i) at distinct t_i inside (0, 1) with non-zero output weights:
    # each breakpoint changes the slope, so there are exactly m + 1 pieces.
    m = 9
    W = [[1] for _ in range(m)]
    b = [Fraction(-(i + 1), m + 1) for i in range(m)]
    v = [(-1) ** i * (i + 1) for i in range(m)]
    assert count_linear_pieces([(W, b), ([v], [0])]) == m + 1


def test_dead_and_linear_units_add_no_piece():
    # second unit has output weight 0; third unit's breakpoint (x = 5) is outside [−1, 1]
    layers = [([[1], [1], [1]], [0, -0.5, -5]), ([[1, 0, 3]], [0])]
    assert count_linear_pieces(layers, -1, 1) == 2
    assert count_linear_pieces(layers, 1, 2) == 1


def test_pieces_are_exact_on_random_deep_nets():
    rng = np.random.default_rng(1)
    for _ in range(5):
        widths = [1, 5, 4, 3, 1]
        layers = [(rng.normal(size=(b, a)), rng.normal(size=b)) for a, b in zip(widths[:-1], widths[1:])]
        pieces = linear_pieces(layers, -2, 2)
        assert pieces[0].start == -2 and pieces[-1].end == 2
        for p, q in zip(pieces[:-1], pieces[1:]):
            assert p.end == q.start
            assert (p.slope, p.intercept) != (q.slope, q.intercept)  # maximal pieces
        for p in pieces:  # the affine form is the network, exactly, across each piece
            for x in (p.start, (p.start + p.end) / 2, p.end):
                assert evaluate(layers, x) == p.slope * x + p.intercept


@pytest.mark.parametrize(
    "call",
    [
        lambda: sawtooth_layers(0),
        lambda: sawtooth_summary(-1),
        lambda: count_linear_pieces([]),
        lambda: count_linear_pieces([([[1, 2]], [0])]),  # first layer must take one input
        lambda: count_linear_pieces([([[1], [1]], [0])]),  # bias length mismatch
        lambda: count_linear_pieces([([[1], [1]], [0, 0])]),  # two outputs
        lambda: count_linear_pieces([([[float("nan")]], [0])]),
        lambda: count_linear_pieces(sawtooth_layers(1), 1, 0),
    ],
)
def test_bad_networks(call):
    with pytest.raises(UserError):
        call()
