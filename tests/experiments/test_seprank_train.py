"""Separation rank of trained tiny analysed networks (experiments.seprank_train), on real text."""

import math

import numpy as np
import pytest

from depthwidth.experiments import seprank_train as st
from depthwidth.theory import separation, seprank


@pytest.fixture(scope="module")
def text(large_corpora_dir):
    return st.load_chars("austen", large_corpora_dir)


@pytest.fixture(scope="module")
def trained_1x4(text):
    return st.train(st.TrainSpec(1, 4, 1, steps=200), text)


def test_austen_chars(text):
    # austen.txt: 81 distinct characters; the default 90/5/5 split's train and val parts.
    assert len(text.vocab) == 81
    assert len(text.train) > 3_500_000 and len(text.heldout) > 190_000


def test_windows_latest_at_position_0():
    ids = np.arange(10)
    ctx, tgt = st.windows(ids, np.array([3, 7]), 4)
    assert ctx.tolist() == [[3, 2, 1, 0], [7, 6, 5, 4]] and tgt.tolist() == [4, 8]


def test_jax_forward_is_seprank_evaluate():
    # forward() is the function seprank.evaluate measures (coordinate 0 at position 0), float64.
    import jax

    jax.config.update("jax_enable_x64", True)
    try:
        for residual in (False, True):
            net = seprank.random_network(2, 4, 2, seed=3, residual=residual)
            layers = [[tuple(np.asarray(w, np.float64) for w in h) for h in layer] for layer in net.layers]
            X = np.random.default_rng(0).normal(size=(5, 3, 4))
            got = np.asarray(st.forward(layers, jax.numpy.asarray(X), residual))[:, 0]
            want = seprank.evaluate(st.float_network(layers, residual), X)
            np.testing.assert_allclose(got, want.astype(np.float64), rtol=1e-10)
    finally:
        jax.config.update("jax_enable_x64", False)


def test_training_beats_the_unigram_baseline(trained_1x4):
    # The read-out bias alone reaches the unigram loss (3.068 nats/char on these held-out
    # windows); 200 steps of the 1-layer d_x = 4 network reach ~2.8 (measured 2.77 at 400).
    r = trained_1x4
    assert r.finite
    assert math.isclose(r.loss_first, math.log(81), rel_tol=1e-5)  # zero read-out: uniform guess
    assert 3.0 < r.unigram_loss < 3.1
    assert r.heldout_loss < r.unigram_loss - 0.1


def test_training_is_deterministic(text):
    spec = st.TrainSpec(2, 2, 1, residual=True, steps=30, seed=5)
    a, b = st.train(spec, text), st.train(spec, text)
    assert a.heldout_loss == b.heldout_loss and a.loss_last == b.loss_last
    for la, lb in zip(a.layers, b.layers):
        for ha, hb in zip(la, lb):
            assert all(np.array_equal(x, y) for x, y in zip(ha, hb))
    c = st.train(st.TrainSpec(2, 2, 1, residual=True, steps=30, seed=6), text)
    assert c.heldout_loss != a.heldout_loss


def test_quantise_is_exact_multiples_of_one_over_g(trained_1x4):
    net = st.quantise(trained_1x4.layers, 64, False)
    assert net.denominator == 64
    Wq = trained_1x4.layers[0][0][0]
    assert np.abs(net.layers[0][0][0].astype(np.float64) / 64 - Wq).max() <= 0.5 / 64 + 1e-12


def test_trained_rank_within_generic_rank_and_counting_bound(trained_1x4):
    # L = 1, d_x = 4: the generic rank is 5 = d_x + 1 (results/seprank/table.json; the counting
    # bound is C(3 + 4, 4) = 35). The rounded trained weights reach it on both grids, and the
    # float weights' SVD rank agrees.
    m = st.measure_trained(trained_1x4, max_templates=32)
    ranks = {g: t["rank"] for g, t in m["trained"].items()}
    assert ranks == {"64": 5, "256": 5} and m["stable_across_grids"]
    assert m["random"]["rank"] == 5 and m["init"]["rank"] == 5
    assert m["rank_float_trained"] == 5
    assert m["log3_rank_trained"] <= separation.log_monomial_count(1, 4) and m["within_counting_bound"]
    assert m["counting_bound"] == math.comb(3 + 4, 4) and m["log3_counting_bound"] == pytest.approx(math.log(35, 3))
    assert m["trained_vs_init"] == "equal"


def test_verdict_capped_when_either_is_a_lower_bound():
    lo, hi = {"rank": 3, "lower_bound": False}, {"rank": 5, "lower_bound": False}
    assert st.verdict(lo, hi) == "below" and st.verdict(hi, lo) == "above" and st.verdict(lo, lo) == "equal"
    assert st.verdict(lo, {"rank": 5, "lower_bound": True}) == "capped"


def test_bad_spec_and_cli_input():
    from depthwidth.cli import main
    from depthwidth.errors import UserError

    with pytest.raises(UserError):
        st.TrainSpec(1, 3, 2)
    with pytest.raises(UserError):
        st.TrainSpec(1, 2, lr=0.0)
    assert main(["seprank-trained", "--width", "2"]) == 2
    assert main(["seprank-trained", "--layers", "1", "--width", "3", "--heads", "2"]) == 2
    assert main(["seprank-trained", "--layers", "0", "--width", "2"]) == 2
