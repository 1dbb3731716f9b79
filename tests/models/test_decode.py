"""KV-cache decoding (LM.decode, depthwidth.models.decode): the cache gives the full forward's
logits, the sampling rules, and greedy generation from GPT-2 weights against Hugging Face
``generate`` (skipped, with the reason, where torch/transformers are not installed)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec

from depthwidth.config import MeshConfig, ModelConfig
from depthwidth.errors import UserError
from depthwidth.models import decode
from depthwidth.models import sharding as sh
from depthwidth.models.gpt2 import load_hf_gpt2_state_dict
from depthwidth.models.model import LM


def _perturbed(cfg: ModelConfig, seed: int) -> LM:
    """A model whose every parameter is random (GPT-2 init has zero biases and unit LN scales,
    which would hide a cached path that skipped a bias or a LayerNorm)."""
    model = LM(cfg, rngs=nnx.Rngs(seed))
    graphdef, state = nnx.split(model, nnx.Param)
    rng = np.random.default_rng(seed)

    def noisy(path, x):
        base = 1.0 if path[-1].key == "scale" else 0.0
        return base + 0.1 * rng.standard_normal(np.shape(x)).astype(np.float32)

    nnx.replace_by_pure_dict(state, jax.tree_util.tree_map_with_path(noisy, nnx.to_pure_dict(state)))
    return nnx.merge(graphdef, state)


def _incremental_logits(model: LM, idx: np.ndarray, prefill: int, length: int) -> np.ndarray:
    """Logits of idx (B, T): the first ``prefill`` tokens in one call, then one call per token."""
    cache = decode.init_cache(model, idx.shape[0], length)
    logits, cache = model.decode(jnp.asarray(idx[:, :prefill]), cache, jnp.int32(0))
    out = [np.asarray(logits)]
    for t in range(prefill, idx.shape[1]):
        logits, cache = model.decode(jnp.asarray(idx[:, t:t + 1]), cache, jnp.int32(t))
        out.append(np.asarray(logits))
    return np.concatenate(out, axis=1)


@pytest.mark.parametrize("pre_ln,tied,prefill", [(True, True, 1), (True, False, 5), (False, True, 3)])
def test_cached_steps_equal_the_full_forward(pre_ln, tied, prefill):
    cfg = ModelConfig(n_layer=3, d_model=32, n_head=4, vocab_size=37, seq_len=12, pre_ln=pre_ln, tied_head=tied)
    model = _perturbed(cfg, seed=prefill)
    idx = np.random.default_rng(prefill).integers(0, cfg.vocab_size, (2, cfg.seq_len), dtype=np.int32)
    full = np.asarray(model(idx))
    np.testing.assert_allclose(_incremental_logits(model, idx, prefill, cfg.seq_len), full, rtol=0, atol=2e-5)
    # A cache longer than the tokens fed (its tail unwritten and masked) changes nothing.
    np.testing.assert_allclose(_incremental_logits(model, idx[:, :7], prefill, cfg.seq_len), full[:, :7],
                               rtol=0, atol=2e-5)
    # The comparison sees a wrong cache: decoding token 3 against a cache that lacks token 2.
    cache = decode.init_cache(model, 2, cfg.seq_len)
    _, cache = model.decode(jnp.asarray(idx[:, :2]), cache, jnp.int32(0))
    skipped, _ = model.decode(jnp.asarray(idx[:, 3:4]), cache, jnp.int32(3))
    assert np.abs(np.asarray(skipped)[:, 0] - full[:, 3]).max() > 1e-3


def test_generate_greedy_is_the_argmax_of_the_full_forward():
    cfg = ModelConfig(n_layer=2, d_model=16, n_head=2, vocab_size=23, seq_len=10)
    model = _perturbed(cfg, seed=4)
    prompt = np.array([[3, 1, 4], [1, 5, 9]], np.int32)
    gen = decode.generate(model, prompt, 5)
    seq = prompt
    for _ in range(5):  # the uncached loop: the whole sequence through the model each time
        seq = np.concatenate([seq, np.asarray(model(seq))[:, -1].argmax(-1)[:, None].astype(np.int32)], axis=1)
    np.testing.assert_array_equal(gen.tokens, seq)
    assert gen.new_tokens == 5 and len(gen.step_s) == 4 and gen.prefill_s > 0
    assert gen.tokens_per_s() == pytest.approx(2 * 5 / (gen.prefill_s + sum(gen.step_s)))


def test_next_token_rules():
    logits = jnp.array([[0.0, 3.0, 1.0, 2.9], [5.0, -1.0, 4.0, 0.0]])
    key = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(decode.next_token(logits, key, 0.0, None), [1, 0])
    np.testing.assert_array_equal(decode.next_token(logits, key, 5.0, 1), [1, 0])  # top-1 is greedy
    draws = np.stack([np.asarray(decode.next_token(logits, k, 10.0, 2)) for k in jax.random.split(key, 200)])
    assert set(draws[:, 0]) == {1, 3} and set(draws[:, 1]) == {0, 2}  # only the two largest, both drawn
    # Temperature 1 without top-k draws from softmax(logits): frequencies of 4000 draws.
    many = np.asarray(decode.next_token(jnp.tile(logits[:1], (4000, 1)), key, 1.0, None))
    p = np.exp(logits[0]) / np.exp(logits[0]).sum()
    np.testing.assert_allclose(np.bincount(many, minlength=4) / 4000, p, atol=0.03)


def test_sampling_is_seeded():
    cfg = ModelConfig(n_layer=2, d_model=16, n_head=2, vocab_size=23, seq_len=16)
    model = _perturbed(cfg, seed=5)
    prompt = np.array([[2]], np.int32)
    a, b, c = (decode.generate(model, prompt, 12, temperature=2.0, top_k=10, seed=s).tokens for s in (7, 7, 8))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_bad_generation_requests_are_user_errors():
    cfg = ModelConfig(n_layer=1, d_model=8, n_head=2, vocab_size=5, seq_len=6)
    model = LM(cfg, rngs=nnx.Rngs(0))
    with pytest.raises(UserError, match=r"prompt of 4 token\(s\) \+ --max-new-tokens 3 = 7 exceeds the model's context of 6"):
        decode.generate(model, np.zeros((1, 4), np.int32), 3)
    for kwargs, msg in [({"max_new_tokens": 0}, "max-new-tokens must be >= 1"),
                        ({"max_new_tokens": 1, "temperature": -1.0}, "temperature must be >= 0"),
                        ({"max_new_tokens": 1, "top_k": 0}, "top-k must be >= 1")]:
        with pytest.raises(UserError, match=msg):
            decode.generate(model, np.zeros((1, 2), np.int32), **kwargs)
    with pytest.raises(UserError, match="at least one token"):
        decode.generate(model, np.zeros((1, 0), np.int32), 1)


def test_cache_follows_the_rule_table():
    """(L, B, S, H, d/H): the batch on 'data', the heads on 'model' (tensor parallel), as the
    parameters' heads; a head count the model axis does not divide is replicated."""
    mesh = sh.make_mesh(MeshConfig(data=2, model=4))
    assert decode.cache_sharding(mesh, MeshConfig(), (3, 4, 16, 8, 4)).spec == PartitionSpec(
        None, "data", None, "model", None)
    assert decode.cache_sharding(mesh, MeshConfig(), (3, 4, 16, 2, 4)).spec == PartitionSpec(
        None, "data", None, None, None)
    cfg = ModelConfig(n_layer=2, d_model=32, n_head=8, vocab_size=11, seq_len=8)
    model = _perturbed(cfg, seed=6)
    k, v = decode.init_cache(model, 4, 8)
    shard = decode.cache_sharding(mesh, MeshConfig(), k.shape)
    idx = np.random.default_rng(6).integers(0, 11, (4, 8), dtype=np.int32)
    graphdef, state = nnx.split(model)
    logits, _ = jax.jit(lambda s, i, c: nnx.merge(graphdef, s).decode(i, c, jnp.int32(0)))(
        state, idx, (jax.device_put(k, shard), jax.device_put(v, shard)))
    np.testing.assert_allclose(np.asarray(logits), np.asarray(model(idx)), rtol=0, atol=2e-5)


def test_greedy_generation_equals_hugging_face_generate():
    torch = pytest.importorskip("torch", reason="torch not installed: the HF generate comparison needs it")
    transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install '.[peers]')")
    torch.manual_seed(3)
    config = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=48, n_layer=3, n_head=4,
                                     activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, layer_norm_epsilon=1e-5, bos_token_id=None, eos_token_id=None)
    hf = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # random LN scales and biases too (HF init leaves them 1 and 0)
        for name, p in hf.named_parameters():
            p.copy_((1.0 if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0.0)
                    + 0.1 * torch.randn_like(p))
    ours = load_hf_gpt2_state_dict(hf.state_dict(), hf_config=hf.config)
    prompt = np.random.default_rng(3).integers(0, 97, (2, 5))
    with torch.no_grad():
        want = hf.generate(torch.from_numpy(prompt), attention_mask=torch.ones(2, 5, dtype=torch.long),
                           max_new_tokens=8, do_sample=False, pad_token_id=0).numpy()
    got = decode.generate(ours, prompt, 8).tokens
    assert want.shape == (2, 13)
    np.testing.assert_array_equal(got, want)
