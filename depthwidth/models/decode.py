"""Generation with the KV cache: prefill a prompt in one pass, then one token per jitted step.

:meth:`depthwidth.models.model.LM.decode` is the model's incremental forward; this module holds
what sits around it: the cache (:func:`init_cache`, one (k, v) slice per layer on the leading
``layers`` axis, named by logical axes like every parameter so the one rule table,
``depthwidth.config.MeshConfig.rules``, shards it), the next-token rule (:func:`next_token`:
greedy, or sampling with a temperature and top-k, as nanoGPT's ``sample.py`` and Hugging Face
``generate``), and the loop (:func:`generate`) with its timings.

Timing (:class:`Generation`): the prefill (the prompt's one pass, its first sampled token
included) is timed apart from the steps; each step (one token through the stack, the head, the
sampling) is timed with ``time.perf_counter`` around the jitted call and ``block_until_ready``.
Both functions are compiled ahead of time (``lower().compile()``, not timed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding

from depthwidth.config import MeshConfig
from depthwidth.errors import UserError
from depthwidth.models import sharding as sh
from depthwidth.models.model import LM

# Logical axes of each cache array (L, B, S, H, d/H): the layer stack, the batch, the positions,
# the heads; the head size and positions stay whole (as the parameters' ``heads`` axis: tensor
# parallelism splits heads, data parallelism the batch).
CACHE_AXES = ("layers", "batch", None, "heads", None)


def init_cache(model: LM, batch: int, length: int, dtype=jnp.float32) -> tuple[jax.Array, jax.Array]:
    """Zeroed (k, v) cache for ``batch`` sequences of up to ``length`` positions, each array
    (L, B, S=length, H, d/H) in ``dtype``; memory 2·L·B·S·d·itemsize bytes.
    Raises UserError unless 1 <= length <= cfg.seq_len (the learned positions)."""
    cfg = model.cfg
    if not 1 <= length <= cfg.seq_len:
        raise UserError(f"{length} positions do not fit the model's context of {cfg.seq_len} (model.seq_len)")
    shape = (cfg.n_layer, batch, length, cfg.n_head, cfg.d_model // cfg.n_head)
    return jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)


def cache_sharding(mesh: jax.sharding.Mesh, mesh_cfg: MeshConfig, shape: tuple[int, ...]) -> NamedSharding:
    """Where a cache array of ``shape`` lives on ``mesh``: :data:`CACHE_AXES` through the rule
    table, an axis that does not divide evenly replicated (as the parameters,
    :func:`depthwidth.models.sharding.param_shardings`)."""
    spec = sh.logical_to_spec(CACHE_AXES, dict(mesh_cfg.rules))
    return NamedSharding(mesh, sh._fits(spec, shape, mesh))


def next_token(logits: jax.Array, key: jax.Array, temperature: float, top_k: int | None) -> jax.Array:
    """Next token ids (B,) int32 from the last position's logits (B, V).

    ``temperature`` 0: greedy (argmax, what ``generate(do_sample=False)`` does). Otherwise sample
    from softmax(logits / temperature) restricted to the ``top_k`` largest logits (all when None),
    as nanoGPT's ``sample.py``; ties at the k-th value are kept.
    """
    if temperature == 0:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = jax.lax.top_k(logits, top_k)[0][:, -1:]
        logits = jnp.where(logits < kth, -jnp.inf, logits)
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)


@dataclass
class Generation:
    """What :func:`generate` returns. ``tokens``: int32 (B, T0 + n), the prompt then n new
    tokens. ``prefill_s``: seconds of the prompt's pass (its first new token included).
    ``step_s``: seconds of each later step (n - 1 of them), in order. ``compile_s``: both
    compilations (not in the others)."""

    tokens: np.ndarray
    prefill_s: float
    step_s: list[float] = field(default_factory=list)
    compile_s: float = 0.0

    @property
    def new_tokens(self) -> int:
        return 1 + len(self.step_s)

    def tokens_per_s(self) -> float:
        """Generated tokens per second over the whole generation (prefill included; batch counted):
        B·n / (prefill_s + sum(step_s)), the rate nanoGPT's sample.py and HF ``generate`` give."""
        return self.tokens.shape[0] * self.new_tokens / (self.prefill_s + sum(self.step_s))


class Decoder:
    """The two jitted functions of a generation, compiled for one shape (``lower().compile()``):
    ``prefill`` reads a (B, T0) prompt into a fresh cache of ``length`` positions, ``step`` one
    (B,) token at position ``pos``; each returns the next tokens (B,) (:func:`next_token`). The
    cache is held here and donated to each step, so XLA writes it in place. Every array op of a
    call is inside the compiled function: an op outside (an index, a reshape) would compile on
    its first use, inside a timed step. ``compile_s``: seconds the two compilations took; each
    function is called once untimed before it is returned (warm-up)."""

    def __init__(self, model: LM, batch: int, prompt_len: int, length: int, *, temperature: float = 0.0,
                 top_k: int | None = None, compute_dtype=jnp.float32):
        graphdef, self.state = nnx.split(model)
        self.shape = (batch, prompt_len, length)

        def run(state, idx, cache, pos, key):
            logits, cache = nnx.merge(graphdef, state).decode(idx, cache, pos, compute_dtype=compute_dtype)
            return next_token(logits[:, -1], key, temperature, top_k), cache

        def prefill(state, prompt, key):
            return run(state, prompt, init_cache(model, batch, length, compute_dtype), jnp.int32(0), key)

        def step(state, tok, cache, pos, key):
            return run(state, tok[:, None], cache, pos, key)

        key, tok = jax.random.PRNGKey(0), jnp.zeros((batch,), jnp.int32)
        t0 = time.perf_counter()
        self._prefill = jax.jit(prefill).lower(self.state, jnp.zeros((batch, prompt_len), jnp.int32), key).compile()
        cache = jax.eval_shape(lambda: init_cache(model, batch, length, compute_dtype))
        self._step = jax.jit(step, donate_argnums=(2,)).lower(self.state, tok, cache, jnp.int32(0), key).compile()
        self.compile_s = time.perf_counter() - t0
        # The first call of a compiled function pays one-off costs (buffer allocation, thread-pool
        # start-up: ~0.1 s on the CPU, measured), which are not the decoding's: one untimed call each.
        jax.block_until_ready(self.step(self.prefill(np.zeros((batch, prompt_len), np.int32), key), 0, key))

    def prefill(self, prompt, key) -> jax.Array:
        """Read ``prompt`` (B, T0) at positions 0..T0-1 into a fresh cache -> next tokens (B,)."""
        tok, self.cache = self._prefill(self.state, prompt, key)
        return tok

    def step(self, tok: jax.Array, pos: int, key) -> jax.Array:
        """Feed tokens (B,) at position ``pos`` (< length) -> next tokens (B,)."""
        tok, self.cache = self._step(self.state, tok, self.cache, np.int32(pos), key)
        return tok


def generate(model: LM, prompt: np.ndarray, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, seed: int = 0, compute_dtype=jnp.float32) -> Generation:
    """Continue ``prompt`` (int (B, T0), T0 >= 1) by ``max_new_tokens`` (>= 1) tokens with the KV cache.

    Sampling as :func:`next_token`; one PRNG key per step from ``seed`` (same seed, same text).
    Raises UserError when T0 + max_new_tokens exceeds cfg.seq_len (the learned positions: the
    model has no position beyond them), a count is < 1, the temperature is negative or top_k < 1.
    """
    prompt = np.asarray(prompt, dtype=np.int32)
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise UserError(f"the prompt must be (batch, tokens) with at least one token, got shape {prompt.shape}")
    if max_new_tokens < 1:
        raise UserError(f"--max-new-tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0 or not np.isfinite(temperature):
        raise UserError(f"--temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise UserError(f"--top-k must be >= 1, got {top_k}")
    B, T0 = prompt.shape
    length = T0 + max_new_tokens
    if length > model.cfg.seq_len:
        raise UserError(f"prompt of {T0} token(s) + --max-new-tokens {max_new_tokens} = {length} exceeds the "
                        f"model's context of {model.cfg.seq_len} positions (model.seq_len)")
    dec = Decoder(model, B, T0, length, temperature=float(temperature), top_k=top_k, compute_dtype=compute_dtype)
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(seed), max_new_tokens))  # host: no op per step
    t0 = time.perf_counter()
    out = [jax.block_until_ready(dec.prefill(prompt, keys[0]))]
    prefill_s, step_s = time.perf_counter() - t0, []
    for i in range(1, max_new_tokens):
        t0 = time.perf_counter()
        out.append(jax.block_until_ready(dec.step(out[-1], T0 + i - 1, keys[i])))
        step_s.append(time.perf_counter() - t0)
    new = np.stack([np.asarray(t) for t in out], axis=1)
    return Generation(np.concatenate([prompt, new], axis=1), prefill_s, step_s, dec.compile_s)

