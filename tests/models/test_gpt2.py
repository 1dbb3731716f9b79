"""GPT-2 compatibility: HF state dicts <-> our stacked LM (depthwidth.models.gpt2).

The HF comparisons need torch and transformers (skipped cleanly when absent); the round-trip and
error tests always run.
"""

import jax
import numpy as np
import pytest
from flax import nnx

from depthwidth.config import ModelConfig
from depthwidth.errors import UserError
from depthwidth.models.gpt2 import (
    hf_config_kwargs,
    hf_shapes,
    load_hf_gpt2_state_dict,
    params_from_hf,
    to_hf_state_dict,
)
from depthwidth.models.model import LM, count_params


def _perturbed(model: LM, seed: int) -> LM:
    """Replace every parameter by a random value so a swapped or dropped tensor cannot pass.

    GPT-2 init has zero biases and unit LN scales, which would hide a mis-mapped bias or LN.
    """
    rng = np.random.default_rng(seed)
    graphdef, state = nnx.split(model, nnx.Param)
    params = nnx.to_pure_dict(state)

    def noisy(path, x):
        x = np.asarray(x)
        base = 1.0 if path[-1].key == "scale" else 0.0
        return base + 0.1 * rng.standard_normal(x.shape).astype(np.float32)

    nnx.replace_by_pure_dict(state, jax.tree_util.tree_map_with_path(noisy, params))
    return nnx.merge(graphdef, state)


def _tokens(cfg: ModelConfig, seed: int, batch: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, cfg.vocab_size, (batch, cfg.seq_len), dtype=np.int32)


SMALL = ModelConfig(n_layer=2, d_model=16, n_head=2, vocab_size=11, seq_len=8)


def _random_sd(cfg: ModelConfig, seed: int) -> dict[str, np.ndarray]:
    """A random HF-style state dict for ``cfg`` (tied: lm_head = wte). Cheaper than LM init."""
    rng = np.random.default_rng(seed)
    sd = {k: (1.0 if k.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0.0)
          + 0.1 * rng.standard_normal(s).astype(np.float32) for k, s in hf_shapes(cfg).items()}
    if cfg.tied_head:
        sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd


# ---------------------------------------------------------------- always runs (numpy only)

@pytest.mark.parametrize("tied", [True, False])
def test_round_trip_identical_logits(tied):
    cfg = ModelConfig(n_layer=3, d_model=24, n_head=3, d_ff=40, vocab_size=13, seq_len=8, tied_head=tied)
    ours = _perturbed(LM(cfg, rngs=nnx.Rngs(0)), seed=1)
    sd = to_hf_state_dict(ours)
    assert {k: v.shape for k, v in sd.items()} == hf_shapes(cfg)
    assert all(v.dtype == np.float32 for v in sd.values())
    back = load_hf_gpt2_state_dict(sd, n_head=3)  # everything else inferred from the arrays
    assert back.cfg == cfg  # d_ff=40 != 4d and tied/untied recovered from shapes and lm_head
    idx = _tokens(cfg, seed=2)
    np.testing.assert_array_equal(np.asarray(back(idx)), np.asarray(ours(idx)))
    # And the params themselves, leaf by leaf.
    a = nnx.to_pure_dict(nnx.state(ours, nnx.Param))
    b = nnx.to_pure_dict(nnx.state(back, nnx.Param))
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_stacking_layout_per_layer():
    """Layer i of HF key h.{i} lands at index i of our stacked leading axis, untransposed."""
    sd = _random_sd(SMALL, seed=3)
    _, params = params_from_hf(sd, SMALL)
    for i in range(SMALL.n_layer):
        for suffix, path in [("attn.c_attn.weight", ("attn", "qkv", "kernel")), ("ln_2.weight", ("ln2", "scale")),
                             ("mlp.c_proj.bias", ("mlp", "proj", "bias"))]:
            leaf = params["blocks"]
            for p in path:
                leaf = leaf[p]
            np.testing.assert_array_equal(leaf[i], sd[f"transformer.h.{i}.{suffix}"])
    assert params["blocks"]["mlp"]["proj"]["kernel"].shape == (2, 64, 16)  # (L, d_ff=4d, d)
    np.testing.assert_array_equal(params["wte"]["embedding"], sd["transformer.wte.weight"])
    assert "head" not in params  # tied: the head is wte


def test_gpt2model_keys_and_buffers_accepted():
    """No 'transformer.' prefix and no lm_head (GPT2Model), plus HF's causal-mask buffers: loads."""
    cfg = SMALL
    full = _random_sd(cfg, seed=4)
    sd = {k.removeprefix("transformer."): v for k, v in full.items() if k != "lm_head.weight"}
    for i in range(cfg.n_layer):
        sd[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, cfg.seq_len, cfg.seq_len), dtype=bool))
        sd[f"h.{i}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    short = load_hf_gpt2_state_dict(sd, cfg)
    assert short.cfg == cfg
    reference = load_hf_gpt2_state_dict(full, cfg)
    idx = _tokens(cfg, seed=5)
    np.testing.assert_array_equal(np.asarray(short(idx)), np.asarray(reference(idx)))


@pytest.fixture
def good_sd():
    return _random_sd(SMALL, seed=0)


def test_unexpected_key_is_user_error(good_sd):
    good_sd["transformer.h.0.attn.q_proj.weight"] = np.zeros((16, 16), np.float32)
    with pytest.raises(UserError, match=r"unexpected 1 key\(s\), e.g. h.0.attn.q_proj.weight"):
        load_hf_gpt2_state_dict(good_sd, n_head=2)


def test_missing_key_is_user_error(good_sd):
    del good_sd["transformer.h.1.mlp.c_fc.bias"]
    with pytest.raises(UserError, match=r"missing 1 key\(s\), e.g. h.1.mlp.c_fc.bias"):
        load_hf_gpt2_state_dict(good_sd, n_head=2)
    del good_sd["transformer.wte.weight"]
    with pytest.raises(UserError, match="missing key 'transformer.wte.weight'"):
        load_hf_gpt2_state_dict(good_sd, n_head=2)


def test_missing_layer_is_user_error(good_sd):
    # Layers 0 and 2 present, 1 absent: inferred L=3, so every h.1.* key is reported missing.
    for k in [k for k in good_sd if ".h.1." in k]:
        good_sd[k.replace(".h.1.", ".h.2.")] = good_sd.pop(k)
    with pytest.raises(UserError, match=r"n_layer=3: missing 12 key\(s\)"):
        load_hf_gpt2_state_dict(good_sd, n_head=2)


def test_shape_mismatch_is_user_error(good_sd):
    good_sd["transformer.h.1.attn.c_proj.weight"] = np.zeros((16, 17), np.float32)
    with pytest.raises(UserError, match=r"h.1.attn.c_proj.weight' has shape \(16, 17\), expected \(16, 16\)"):
        load_hf_gpt2_state_dict(good_sd, n_head=2)
    # A cfg that disagrees with the arrays (wider model) fails on the first shape checked.
    with pytest.raises(UserError, match="expected"):
        load_hf_gpt2_state_dict(good_sd, ModelConfig(n_layer=2, d_model=32, n_head=2, vocab_size=11, seq_len=8))


def test_other_user_errors(good_sd):
    with pytest.raises(UserError, match="n_head cannot be inferred"):
        load_hf_gpt2_state_dict(good_sd)
    with pytest.raises(UserError, match="tied_head=True"):
        bad = dict(good_sd, **{"lm_head.weight": good_sd["lm_head.weight"] + 1})
        load_hf_gpt2_state_dict(bad, SMALL)
    with pytest.raises(UserError, match="activation_function='gelu'"):
        load_hf_gpt2_state_dict(good_sd, hf_config={"n_head": 2, "activation_function": "gelu"})
    with pytest.raises(UserError, match="disagrees"):
        load_hf_gpt2_state_dict(good_sd, n_head=4, hf_config={"n_head": 2})
    with pytest.raises(UserError, match="pre-LN"):
        load_hf_gpt2_state_dict(good_sd, ModelConfig(n_layer=2, d_model=16, n_head=2, vocab_size=11, seq_len=8,
                                                     pre_ln=False))
    with pytest.raises(UserError, match="non-float"):
        load_hf_gpt2_state_dict(dict(good_sd, **{"transformer.ln_f.bias": np.zeros(16, np.int64)}), n_head=2)
    with pytest.raises(UserError, match="mapping"):
        load_hf_gpt2_state_dict([("transformer.wte.weight", good_sd["transformer.wte.weight"])], n_head=2)
    # n_head must divide d_model: ModelConfig's own check, still a UserError.
    with pytest.raises(UserError, match="divisible"):
        load_hf_gpt2_state_dict(good_sd, n_head=3)


def test_hf_config_dict_supplies_n_head(good_sd):
    model = load_hf_gpt2_state_dict(good_sd, hf_config={"n_head": 2, "activation_function": "gelu_new"})
    assert model.cfg == SMALL


# ---------------------------------------------------------------- against transformers

# (L, d, H, T, V): one with H != 12, one with H = 12 (head size 8); expected parameter counts are
# derived by hand in test_logits_and_param_count_match_hf.
HF_SHAPES = [(2, 64, 2, 32, 100), (3, 96, 12, 24, 77)]


def _hf_model(L, d, H, T, V, seed, **extra):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=V, n_positions=T, n_embd=d, n_layer=L, n_head=H, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
        bos_token_id=None, eos_token_id=None, **extra)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # random LN scales and biases too (HF init leaves them 1 and 0)
        for name, p in model.named_parameters():
            p.copy_((1.0 if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0.0)
                    + 0.1 * torch.randn_like(p))
    return torch, model


def _hf_logits(torch, model, idx: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(idx.astype(np.int64))).logits.numpy()


@pytest.mark.parametrize("L,d,H,T,V", HF_SHAPES)
def test_logits_and_param_count_match_hf(L, d, H, T, V):
    torch, hf = _hf_model(L, d, H, T, V, seed=L)
    ours = load_hf_gpt2_state_dict(hf.state_dict(), n_head=H)  # torch tensors straight in
    assert ours.cfg == ModelConfig(n_layer=L, d_model=d, n_head=H, vocab_size=V, seq_len=T)
    idx = np.random.default_rng(L).integers(0, V, (4, T), dtype=np.int32)
    hf_logits = _hf_logits(torch, hf, idx)
    np.testing.assert_allclose(np.asarray(ours(idx)), hf_logits, rtol=0, atol=1e-4)
    # The comparison is sensitive to the head split: the same weights read with 2H heads differ.
    wrong_heads = load_hf_gpt2_state_dict(hf.state_dict(), n_head=2 * H)
    assert np.abs(np.asarray(wrong_heads(idx)) - hf_logits).max() > 1e-2
    # Shorter sequences use the first positions only, in both.
    np.testing.assert_allclose(np.asarray(ours(idx[:, :5])), _hf_logits(torch, hf, idx[:, :5]), rtol=0, atol=1e-4)
    # GPT-2 count with d_ff = 4d and a tied head: L*(12d^2 + 13d) + 2d (final LN) + V*d + T*d.
    # (2,64,2,32,100): 2*(49152+832) + 128 + 6400 + 2048 = 108544
    # (3,96,12,24,77): 3*(110592+1248) + 192 + 7392 + 2304 = 345408
    expected = {(2, 64): 108544, (3, 96): 345408}[(L, d)]
    assert count_params(ours) == expected
    assert sum(p.numel() for p in hf.parameters()) == expected  # tied lm_head counted once


def test_hf_config_object_and_untied_head():
    torch, hf = _hf_model(2, 64, 4, 16, 50, seed=7, tie_word_embeddings=False, n_inner=96)
    assert hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr()
    ours = load_hf_gpt2_state_dict(hf.state_dict(), hf_config=hf.config)
    assert not ours.cfg.tied_head and ours.cfg.ff_width == 96 and ours.cfg.n_head == 4
    idx = np.random.default_rng(0).integers(0, 50, (2, 16), dtype=np.int32)
    np.testing.assert_allclose(np.asarray(ours(idx)), _hf_logits(torch, hf, idx), rtol=0, atol=1e-4)
    assert count_params(ours) == sum(p.numel() for p in hf.parameters())


def test_export_loads_into_hf():
    """Our model -> to_hf_state_dict -> GPT2LMHeadModel(strict load) gives the same logits."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = ModelConfig(n_layer=2, d_model=32, n_head=2, vocab_size=40, seq_len=16)
    ours = load_hf_gpt2_state_dict(_random_sd(cfg, seed=8), cfg)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**hf_config_kwargs(cfg))).eval()
    result = hf.load_state_dict({k: torch.from_numpy(v) for k, v in to_hf_state_dict(ours).items()}, strict=False)
    assert not result.unexpected_keys
    assert all(k.endswith(("attn.bias", "attn.masked_bias")) for k in result.missing_keys)  # buffers only
    idx = _tokens(cfg, seed=9)
    np.testing.assert_allclose(np.asarray(ours(idx)), _hf_logits(torch, hf, idx), rtol=0, atol=1e-4)
