"""The decoder-only self-attention LM (Flax NNX), GPT-2 arrangement.

One file, read top to bottom: config -> attention -> MLP -> block -> model. What nanoGPT lacks
is added in lines, not layers: every parameter names its *logical* axes (``embed``, ``mlp``,
``heads``, ``vocab``, ``layers``) so one rule table (``depthwidth.config.MeshConfig.rules``)
shards it, and the L blocks are stacked along a leading ``layers`` axis and run with
``nnx.scan``, so compile time stays nearly flat in depth. Decoding (:meth:`LM.decode`) keeps a
key/value cache per layer, stacked the same way, so a prompt is read in one pass and each new
token costs one position of work (the loop and sampling: :mod:`depthwidth.models.decode`).

Arrangement (Radford et al. 2019, GPT-2): learned token and position embeddings,
L blocks of [LN -> causal multi-head attention (fused QKV d->3d with bias, output proj d->d with
bias)] + [LN -> MLP d->d_ff->d with biases, tanh-GELU], a final LN, and a head tied to the token
embedding (or untied, no bias). n_head is independent of width (Levine et al. use H = 2).
Parameters: L*(12d^2+13d) + 2d non-embedding (d_ff = 4d) + V*d + T*d embedding; the count is
checked against ``depthwidth.theory`` in the tests.

Initialisation (GPT-2 / nanoGPT): normal(0.02) for kernels and embeddings, zero biases, LN
scale 1; the two residual output projections use std 0.02/sqrt(2L) so the residual stream's
variance does not grow with depth (Radford et al. 2019, §2.3).
"""

from __future__ import annotations

import math

import flax
import jax
import jax.numpy as jnp
from flax import nnx

from depthwidth.config import ModelConfig

# Sharding is applied by the training engine from the logical names and the rule table; the
# variables themselves must not try to shard eagerly on creation (they carry logical names,
# not mesh axes).
flax.config.update("flax_always_shard_variable", False)


def _normal(std: float, axes: tuple[str | None, ...]):
    return nnx.with_partitioning(nnx.initializers.normal(std), axes)


def _zeros(axes: tuple[str | None, ...]):
    return nnx.with_partitioning(nnx.initializers.zeros_init(), axes)


def _ones(axes: tuple[str | None, ...]):
    return nnx.with_partitioning(nnx.initializers.ones_init(), axes)


def _layer_norm(d: int, rngs: nnx.Rngs) -> nnx.LayerNorm:
    # epsilon 1e-5 as in GPT-2 (HF layer_norm_epsilon).
    return nnx.LayerNorm(d, epsilon=1e-5, scale_init=_ones(("embed",)), bias_init=_zeros(("embed",)), rngs=rngs)


def _dropout(x: jax.Array, rate: float, key: jax.Array | None) -> jax.Array:
    if rate == 0.0 or key is None:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0).astype(x.dtype)


class CausalSelfAttention(nnx.Module):
    """Causal multi-head attention. x: (B, T, d) -> (B, T, d); head size d/H."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d, std = cfg.d_model, 0.02
        self.n_head = cfg.n_head
        self.qkv = nnx.Linear(d, 3 * d, kernel_init=_normal(std, ("embed", "heads")),
                              bias_init=_zeros(("heads",)), rngs=rngs)
        self.proj = nnx.Linear(d, d, kernel_init=_normal(std / math.sqrt(2 * cfg.n_layer), ("heads", "embed")),
                               bias_init=_zeros(("embed",)), rngs=rngs)

    def heads(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """q, k, v of x (B, T, d), each (B, T, H, d/H): the layout jax.nn.dot_product_attention takes."""
        B, T, d = x.shape
        q, k, v = jnp.split(self.qkv(x), 3, axis=-1)
        return tuple(t.reshape(B, T, self.n_head, d // self.n_head) for t in (q, k, v))

    def __call__(self, x: jax.Array) -> jax.Array:
        q, k, v = self.heads(x)
        # XLA (or cuDNN on GPU) fuses the masked softmax instead of us materialising a (B, H, T, T) mask.
        y = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.reshape(x.shape))

    def cached(self, x: jax.Array, cache: tuple[jax.Array, jax.Array], pos: jax.Array):
        """x (B, T, d) at positions pos..pos+T-1, with this layer's cache (k, v), each (B, S, H, d/H)
        holding positions < pos -> (y (B, T, d), the cache with this call's keys and values written).

        Each query attends to the cached and new positions up to its own (the causal mask of
        ``__call__``, shifted by pos); the cache's unwritten tail is masked out.
        """
        q, k, v = self.heads(x)
        ck = jax.lax.dynamic_update_slice(cache[0], k.astype(cache[0].dtype), (0, pos, 0, 0))
        cv = jax.lax.dynamic_update_slice(cache[1], v.astype(cache[1].dtype), (0, pos, 0, 0))
        T, S = x.shape[1], ck.shape[1]
        mask = jnp.arange(S)[None, :] <= pos + jnp.arange(T)[:, None]  # (T, S): key j visible to query i
        y = jax.nn.dot_product_attention(q, ck.astype(q.dtype), cv.astype(q.dtype), mask=mask[None, None])
        return self.proj(y.reshape(x.shape)), (ck, cv)


class MLP(nnx.Module):
    """Position-wise MLP d -> d_ff -> d with tanh-GELU (GPT-2's 'gelu_new')."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d, f, std = cfg.d_model, cfg.ff_width, 0.02
        self.fc = nnx.Linear(d, f, kernel_init=_normal(std, ("embed", "mlp")), bias_init=_zeros(("mlp",)), rngs=rngs)
        self.proj = nnx.Linear(f, d, kernel_init=_normal(std / math.sqrt(2 * cfg.n_layer), ("mlp", "embed")),
                               bias_init=_zeros(("embed",)), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.proj(jax.nn.gelu(self.fc(x), approximate=True))


class Block(nnx.Module):
    """One transformer block, pre-LN (GPT-2) or post-LN (Vaswani et al. 2017)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.pre_ln, self.dropout = cfg.pre_ln, cfg.dropout
        self.ln1 = _layer_norm(cfg.d_model, rngs)
        self.attn = CausalSelfAttention(cfg, rngs=rngs)
        self.ln2 = _layer_norm(cfg.d_model, rngs)
        self.mlp = MLP(cfg, rngs=rngs)

    def __call__(self, x: jax.Array, key: jax.Array | None = None) -> jax.Array:
        k1, k2 = jax.random.split(key) if key is not None else (None, None)
        if self.pre_ln:
            x = x + _dropout(self.attn(self.ln1(x)), self.dropout, k1)
            return x + _dropout(self.mlp(self.ln2(x)), self.dropout, k2)
        x = self.ln1(x + _dropout(self.attn(x), self.dropout, k1))
        return self.ln2(x + _dropout(self.mlp(x), self.dropout, k2))

    def cached(self, x: jax.Array, cache: tuple[jax.Array, jax.Array], pos: jax.Array):
        """``__call__`` without dropout, attending through this layer's KV cache (CausalSelfAttention.cached)."""
        if self.pre_ln:
            a, cache = self.attn.cached(self.ln1(x), cache, pos)
            x = x + a
            return x + self.mlp(self.ln2(x)), cache
        a, cache = self.attn.cached(x, cache, pos)
        x = self.ln1(x + a)
        return self.ln2(x + self.mlp(x)), cache


class LM(nnx.Module):
    """Decoder-only LM. ``LM(cfg, rngs=nnx.Rngs(seed))``; cfg.vocab_size must be set (> 0).

    Call: ``idx`` int32 (B, T) token ids with T <= cfg.seq_len -> logits float32 (B, T, V).
    ``dropout_key``: a PRNG key when cfg.dropout > 0 (training); None = deterministic.
    ``compute_dtype``: activations and matmuls in this dtype (bf16 on accelerators); the
    parameters stay float32 and the logits are returned in float32.
    """

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        if cfg.vocab_size <= 0:
            raise ValueError("LM needs cfg.vocab_size > 0 (resolve it from the prepared data first)")
        self.cfg = cfg
        self.wte = nnx.Embed(cfg.vocab_size, cfg.d_model, embedding_init=_normal(0.02, ("vocab", "embed")), rngs=rngs)
        self.wpe = nnx.Embed(cfg.seq_len, cfg.d_model, embedding_init=_normal(0.02, (None, "embed")), rngs=rngs)

        # L independent blocks stacked on a leading 'layers' axis (one set of arrays, one scan).
        @nnx.split_rngs(splits=cfg.n_layer)
        @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
        def make_blocks(rngs: nnx.Rngs) -> Block:
            return Block(cfg, rngs=rngs)

        self.blocks = make_blocks(rngs)
        self.ln_f = _layer_norm(cfg.d_model, rngs)
        self.head = None if cfg.tied_head else nnx.Linear(
            cfg.d_model, cfg.vocab_size, use_bias=False, kernel_init=_normal(0.02, ("embed", "vocab")), rngs=rngs)

    def __call__(self, idx: jax.Array, *, dropout_key: jax.Array | None = None,
                 compute_dtype: jnp.dtype = jnp.float32) -> jax.Array:
        B, T = idx.shape
        x = (self.wte(idx) + self.wpe(jnp.arange(T))[None]).astype(compute_dtype)
        keys = None
        if dropout_key is not None and self.cfg.dropout > 0:
            dropout_key, k0 = jax.random.split(dropout_key)
            x = _dropout(x, self.cfg.dropout, k0)
            keys = jax.random.split(dropout_key, self.cfg.n_layer)
        x = self.stack(x, keys)
        logits = self.wte.attend(x) if self.head is None else self.head(x)
        return logits.astype(jnp.float32)

    def stack(self, x: jax.Array, keys: jax.Array | None = None) -> jax.Array:
        """The stack alone: the L blocks and the final LN, (B, T, d) -> (B, T, d) in x's dtype.

        What ``__call__`` runs between the embeddings and the head; on its own it is what
        ``depthwidth exp latency`` times (no vocabulary work). ``keys``: (L,) dropout keys, or None.
        """

        @nnx.scan(in_axes=(nnx.Carry, 0, 0 if keys is not None else None), out_axes=nnx.Carry,
                  unroll=min(self.cfg.scan_unroll, self.cfg.n_layer),
                  transform_metadata={nnx.PARTITION_NAME: "layers"})
        def run_stack(x: jax.Array, block: Block, key: jax.Array | None) -> jax.Array:
            return block(x, key)

        return self.ln_f(run_stack(x, self.blocks, keys))

    def decode(self, idx: jax.Array, cache: tuple[jax.Array, jax.Array], pos: jax.Array, *,
               compute_dtype: jnp.dtype = jnp.float32):
        """Incremental forward: ``idx`` int32 (B, T) at positions pos..pos+T-1, after the ``pos``
        tokens whose keys and values ``cache`` holds -> (logits float32 (B, T, V), updated cache).

        ``cache``: (k, v), each (L, B, S, H, d/H) with S <= cfg.seq_len (one slice per layer on the
        ``layers`` axis, as the blocks; built by :func:`depthwidth.models.decode.init_cache`).
        A prompt is one call at pos 0 (prefill); each new token one call with T = 1. The logits
        equal ``__call__``'s on the whole sequence (tested, float32). Deterministic (no dropout);
        pos + T must not exceed S (not checked here: jax clamps the write; the caller checks).
        """
        T = idx.shape[1]
        x = (self.wte(idx) + self.wpe(pos + jnp.arange(T))[None]).astype(compute_dtype)

        @nnx.scan(in_axes=(nnx.Carry, 0, 0), out_axes=(nnx.Carry, 0),
                  unroll=min(self.cfg.scan_unroll, self.cfg.n_layer),
                  transform_metadata={nnx.PARTITION_NAME: "layers"})
        def run_stack(x: jax.Array, block: Block, layer_cache):
            return block.cached(x, layer_cache, pos)

        x, cache = run_stack(x, self.blocks, cache)
        x = self.ln_f(x)
        logits = self.wte.attend(x) if self.head is None else self.head(x)
        return logits.astype(jnp.float32), cache


def cast_params(params, dtype):
    """Cast floating parameters to ``dtype`` for compute (mixed precision keeps fp32 masters)."""
    return jax.tree.map(lambda p: p.astype(dtype) if jnp.issubdtype(p.dtype, jnp.floating) else p, params)


def count_params(model: nnx.Module) -> int:
    """Total number of trainable parameters (count) in ``model``."""
    return sum(int(p.size) for p in jax.tree.leaves(nnx.state(model, nnx.Param)))
