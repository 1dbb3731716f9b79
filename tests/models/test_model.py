"""The LM's own parameter count equals theory/'s exact count; shapes; causality; scan."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from depthwidth.config import ModelConfig
from depthwidth.models.model import LM, count_params
from depthwidth.theory.accounting import param_counts


@pytest.mark.parametrize("L,d,H,V,T,tied", [(1, 8, 2, 11, 16, True), (3, 64, 2, 65, 32, True),
                                             (2, 48, 4, 100, 8, False), (6, 96, 12, 2000, 128, True)])
def test_param_count_matches_theory(L, d, H, V, T, tied):
    cfg = ModelConfig(n_layer=L, d_model=d, n_head=H, vocab_size=V, seq_len=T, tied_head=tied)
    model = LM(cfg, rngs=nnx.Rngs(0))
    # Hand formula (GPT-2 arrangement, docs/concepts.md): L(12d^2+13d) + 2d + V d + T d (+ V d untied head).
    expected = L * (12 * d * d + 13 * d) + 2 * d + V * d + T * d + (0 if tied else V * d)
    assert count_params(model) == expected
    assert count_params(model) == param_counts(L, d, n_head=H, vocab_size=V, seq_len=T, tied_head=tied)["total_params"]


def test_logits_shape_and_causality():
    cfg = ModelConfig(n_layer=2, d_model=32, n_head=2, vocab_size=17, seq_len=12)
    model = LM(cfg, rngs=nnx.Rngs(1))
    idx = jnp.asarray(np.random.default_rng(0).integers(0, 17, (3, 12)), jnp.int32)
    out = model(idx)
    assert out.shape == (3, 12, 17) and out.dtype == jnp.float32
    # Changing token 7 must not change logits at positions < 7 (causal mask).
    idx2 = idx.at[:, 7].set((idx[:, 7] + 1) % 17)
    out2 = model(idx2)
    np.testing.assert_array_equal(np.asarray(out[:, :7]), np.asarray(out2[:, :7]))
    assert not np.allclose(np.asarray(out[:, 7:]), np.asarray(out2[:, 7:]))


def test_layers_are_stacked_and_initialised_like_gpt2():
    L, d = 4, 64
    model = LM(ModelConfig(n_layer=L, d_model=d, n_head=2, vocab_size=50, seq_len=16), rngs=nnx.Rngs(0))
    qkv = np.asarray(model.blocks.attn.qkv.kernel[...])
    proj = np.asarray(model.blocks.mlp.proj.kernel[...])
    assert qkv.shape == (L, d, 3 * d) and proj.shape == (L, 4 * d, d)
    # std 0.02, residual projections 0.02/sqrt(2L) (Radford et al. 2019 §2.3); loose sample bounds.
    assert abs(qkv.std() - 0.02) < 0.002
    assert abs(proj.std() - 0.02 / np.sqrt(2 * L)) < 0.001
    # Layers are independently initialised, not copies.
    assert not np.allclose(qkv[0], qkv[1])


def test_bf16_compute_close_to_fp32():
    cfg = ModelConfig(n_layer=2, d_model=32, n_head=2, vocab_size=20, seq_len=8)
    model = LM(cfg, rngs=nnx.Rngs(0))
    idx = jnp.zeros((2, 8), jnp.int32)
    a = model(idx)
    from depthwidth.models.model import cast_params

    g, p = nnx.split(model, nnx.Param)
    b = nnx.merge(g, cast_params(nnx.to_pure_dict(p), jnp.bfloat16))(idx, compute_dtype=jnp.bfloat16)
    assert b.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=0.05)


def test_dropout_only_with_key():
    cfg = ModelConfig(n_layer=2, d_model=32, n_head=2, vocab_size=20, seq_len=8, dropout=0.5)
    model = LM(cfg, rngs=nnx.Rngs(0))
    idx = jnp.zeros((2, 8), jnp.int32)
    np.testing.assert_array_equal(np.asarray(model(idx)), np.asarray(model(idx)))
    assert not np.allclose(np.asarray(model(idx)), np.asarray(model(idx, dropout_key=jax.random.key(0))))


def test_vocab_must_be_resolved():
    with pytest.raises(ValueError):
        LM(ModelConfig(vocab_size=0), rngs=nnx.Rngs(0))
