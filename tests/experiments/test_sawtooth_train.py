"""The trained sawtooth (experiments.sawtooth_train, theory.sawtooth.sup_error): exact counts and
errors checked against values derived by hand or by an independent dense evaluation."""

from fractions import Fraction

import numpy as np
import pytest

from depthwidth.errors import UserError
from depthwidth.experiments import sawtooth_train as st
from depthwidth.theory import sawtooth as th
from depthwidth.theory.mlp import mlp_params


def _float32(layers):
    return [(np.array(W, dtype=np.float64).astype(np.float32), np.array(b, dtype=np.float64).astype(np.float32))
            for W, b in layers]


def test_construction_k3_has_8_pieces_and_zero_error_with_float32_weights():
    # The construction's weights (1, -1/2, 2, -4) are dyadic: float32 stores them exactly, so the
    # trained-net path (float weights -> Fraction) must give the exact 2^3 pieces and error 0.
    m = st.measure(_float32(th.sawtooth_layers(3)), 3, eval_grid=64)
    assert m["pieces"] == 8 and m["sup_error"] == 0.0 and m["rms_error"] == 0.0 and m["sup_error_bound"] == 0.0
    for k in (1, 4, 6):
        assert st.measure(_float32(th.shallow_sawtooth_layers(k)), k, eval_grid=4 * 2**k)["pieces"] == 2**k
    assert st.construction(5, "deep_construction", eval_grid=128)["pieces"] == 32


def test_hand_built_one_layer_net_pieces_and_sup_error():
    # f = relu(x-1/4) - 2 relu(x-1/2) + relu(x-3/4): slopes 0, 1, -1, 0 on the quarters (4 pieces),
    # a tent of height 1/4 at x = 1/2. Against the hat g (k = 1): |g - f| = 1 - 1/4 = 3/4 at 1/2,
    # 1/2 at 1/4 and 3/4, 0 at the ends: the sup is 3/4.
    net = [([[1.0], [1.0], [1.0]], [-0.25, -0.5, -0.75]), ([[1.0, -2.0, 1.0]], [0.0])]
    m = st.measure(net, 1, eval_grid=16)
    assert m["pieces"] == 4
    assert th.sup_error(net, 1) == Fraction(3, 4) and m["sup_error"] == 0.75 == m["max_error_grid"]
    assert [(p.start, p.end, p.slope) for p in th.linear_pieces(net)] == [
        (0, Fraction(1, 4), 0), (Fraction(1, 4), Fraction(1, 2), 1), (Fraction(1, 2), Fraction(3, 4), -1),
        (Fraction(3, 4), 1, 0)]


def test_sup_error_of_the_constant_half_is_half_and_the_bound():
    half = [([[0.0]], [0.5]), ([[0.0]], [0.5])]  # dead unit, output bias 1/2
    for k in (1, 3, 7):
        assert th.sup_error(half, k) == Fraction(1, 2) == th.sup_error_lower_bound(1, k)
        assert th.sup_error_lower_bound(2**k - 1, k) == Fraction(1, 2) and th.sup_error_lower_bound(2**k, k) == 0
    with pytest.raises(UserError):
        th.sup_error_lower_bound(0, 3)


@pytest.mark.parametrize("seed", range(4))
def test_exact_sup_error_matches_dense_dyadic_grid(seed):
    # Weights on the 1/8 grid with breakpoints at multiples of 1/8 in [0, 1] (first layer w = 1):
    # f and g^3 are then affine between multiples of 1/8, so the max over the 1/1024 grid is the sup.
    rng = np.random.default_rng(seed)
    W1 = np.ones((5, 1))
    b1 = -rng.integers(0, 8, 5) / 8
    W2 = rng.integers(-16, 17, (1, 5)) / 8
    net = [(W1, b1), (W2, np.array([rng.integers(-8, 9) / 8]))]
    x = np.linspace(0, 1, 1025)
    dense = np.max(np.abs(st.forward(net, x) - st.target(x, 3)))
    assert float(th.sup_error(net, 3)) == pytest.approx(dense, abs=1e-12)


@pytest.mark.parametrize("k", range(3, 9))
def test_same_parameter_count_rule(k):
    deep = st.init_layers(st.hidden_widths(k, "deep"), 0)
    shallow = st.init_layers(st.hidden_widths(k, "shallow_same"), 0)
    assert st.n_params(deep) == st.n_params(shallow) == 6 * k + 1 == mlp_params(1, [2] * k, 1)
    assert st.hidden_widths(k, "shallow_same") == [2 * k] and st.hidden_widths(k, "shallow_exact") == [2**k]
    assert st.n_params(st.init_layers([2**k], 0)) == 3 * 2**k + 1


@pytest.mark.parametrize("k", range(1, 11))
def test_over_parameterised_control_widths(k):
    # shallow_wide: 8 units per piece of g^k, capped at 512 but never below 2 per piece; deep_wide: k layers of 8
    wide = st.hidden_widths(k, "shallow_wide")
    assert wide == [{7: 512, 8: 512, 9: 1024, 10: 2048}.get(k, 8 * 2**k)] and wide[0] >= 2 * 2**k
    assert st.hidden_widths(k, "deep_wide") == [8] * k
    deep_wide = st.init_layers(st.hidden_widths(k, "deep_wide"), 0)
    assert st.n_params(deep_wide) == mlp_params(1, [8] * k, 1) == 72 * k - 47
    assert st.n_params(st.init_layers(wide, 0)) == 3 * wide[0] + 1
    for arch in ("shallow_wide", "deep_wide"):
        assert st.SawtoothSpec(k, arch, grid=4 * 2**k, eval_grid=4 * 2**k).to_dict()["hidden"] == st.hidden_widths(k, arch)


def test_tiny_training_run_beats_its_init_and_is_deterministic():
    spec = st.SawtoothSpec(1, "shallow_exact", seed=2, steps=300, lr=1e-2, grid=32, eval_grid=256)
    r = st.train(spec)
    assert r["finite"] and r["loss_last"] < r["loss_first"]
    assert r["rms_error"] < r["init"]["rms_error"] and r["sup_error"] < r["init"]["sup_error"]
    # the exact sup bounds the grid max from above and the piece count obeys the 1-layer limit u + 1
    assert r["sup_error"] >= r["max_error_grid"] - 1e-12 and r["pieces"] <= 3
    W = [(np.array(a, np.float32), np.array(b, np.float32)) for a, b in r["weights"]]
    assert st.measure(W, 1, 256)["pieces"] == r["pieces"]  # stored weights reproduce the count
    x = np.linspace(0, 1, 257)
    assert np.sqrt(np.mean((st.forward([(a.astype(np.float64), b.astype(np.float64)) for a, b in W], x)
                            - st.target(x, 1)) ** 2)) == pytest.approx(r["rms_error"], rel=1e-12)
    assert st.train(spec)["weights"] == r["weights"]


@pytest.mark.parametrize("kw", [dict(k=0, arch="deep"), dict(k=11, arch="deep"), dict(k=3, arch="wide"),
                                dict(k=3, arch="deep", steps=0), dict(k=3, arch="deep", lr=-1.0),
                                dict(k=3, arch="deep", lr=float("nan")), dict(k=3, arch="deep", grid=30),
                                dict(k=3, arch="deep", grid=16), dict(k=3, arch="deep", seed=-1)])
def test_bad_specs(kw):
    with pytest.raises(UserError):
        st.SawtoothSpec(**kw)
