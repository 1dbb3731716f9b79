"""Per-token decode latency of equal-weight shapes: the KV-cache step, timed (``exp latency --decode``).

Issue 44, item 2. What serving pays per generated token is one step of
:class:`depthwidth.models.decode.Decoder`: one token through the L blocks (reading each layer's
key/value cache), the final LN, the tied head over V tokens and the greedy choice. At batch 1
the step does 2 FLOPs per weight read, so on a CPU it is bound by memory traffic and by the
per-layer overhead of a serial stack, not by arithmetic.

A unit: the whole LM (GPT-2 arrangement, random GPT-2 init, weights and activations in
``dtype``) with V = ``vocab_size``, B sequences of a random ``context``-token prompt. Each repeat
prefills the prompt (timed apart: ``prefill_s``) and then generates ``new_tokens`` - 1 more
tokens one step at a time (each step timed with ``time.perf_counter`` and ``block_until_ready``);
the repeat's value is the median step. The Decoder's compile and its untimed warm-up call are
excluded. A record keeps every repeat's median step and prefill time, and their median, min and
max over repeats (seconds).

Bytes a step reads (:func:`depthwidth.theory.decode_bytes.step_bytes`): every weight once (the tied head's V·d included; of
the embeddings, one row each), and each layer's cache of S = context + new_tokens positions for
K and V (the step attends over all S and masks the unwritten tail): 2·B·S·d values per layer.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from depthwidth.config import ModelConfig
from depthwidth.errors import UserError
from depthwidth.experiments import kinds
from depthwidth.experiments.latency import DTYPES, provenance
from depthwidth.theory.decode_bytes import step_bytes

KIND = "latency_decode"


@dataclass(frozen=True)
class DecodeSpec:
    """One timed unit: shape (``n_layer`` L, ``d_model`` d, ``n_head`` H), ``context`` T prompt
    tokens, ``new_tokens`` generated per repeat (>= 2: the first comes from the prefill),
    ``batch`` B, ``dtype``, ``vocab_size`` V, ``threads`` (XLA:CPU), ``device``, ``repeats``."""

    n_layer: int
    d_model: int
    n_head: int
    context: int
    new_tokens: int
    batch: int
    dtype: str
    vocab_size: int
    threads: int
    device: str
    repeats: int

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise UserError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.d_model % self.n_head:
            raise UserError(f"width {self.d_model} is not divisible by --n-head {self.n_head}")
        if self.new_tokens < 2:
            raise UserError(f"--new-tokens must be >= 2 (the first token comes from the prefill), got {self.new_tokens}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_unit(spec: DecodeSpec) -> dict[str, Any]:
    """Time one unit (module doc). Returns the record's fields: ``seconds_per_token`` (median over
    repeats of each repeat's median step), ``seconds_per_token_min``/``_max`` (over repeats),
    ``step_medians``, ``prefill_s`` (median) with ``prefill_s_min``/``_max`` and ``prefill_times``,
    ``compile_s``, ``params`` (the whole LM's), the ``step_bytes`` dict as ``bytes_*``, and
    ``bytes_per_s`` (bytes_total / seconds_per_token)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.decode import Decoder
    from depthwidth.models.model import LM, cast_params, count_params

    length = spec.context + spec.new_tokens
    cfg = ModelConfig(n_layer=spec.n_layer, d_model=spec.d_model, n_head=spec.n_head,
                      vocab_size=spec.vocab_size, seq_len=length)
    model, dtype = LM(cfg, rngs=nnx.Rngs(0)), jnp.dtype(spec.dtype)
    params = count_params(model)
    if dtype != jnp.float32:  # inference weights in dtype
        graphdef, state, rest = nnx.split(model, nnx.Param, ...)
        model = nnx.merge(graphdef, cast_params(state, dtype), rest)
    dec = Decoder(model, spec.batch, spec.context, length, compute_dtype=dtype)
    prompt = np.random.default_rng(1).integers(0, spec.vocab_size, (spec.batch, spec.context), dtype=np.int32)
    key = np.asarray(jax.random.PRNGKey(0))
    medians, prefills = [], []
    for _ in range(spec.repeats):
        t0 = time.perf_counter()
        tok = jax.block_until_ready(dec.prefill(prompt, key))
        prefills.append(time.perf_counter() - t0)
        steps = []
        for i in range(1, spec.new_tokens):
            t0 = time.perf_counter()
            tok = jax.block_until_ready(dec.step(tok, spec.context + i - 1, key))
            steps.append(time.perf_counter() - t0)
        medians.append(statistics.median(steps))
    b = step_bytes(spec.n_layer, spec.d_model, spec.vocab_size, length, spec.batch, dtype.itemsize)
    med = statistics.median(medians)
    return {"seconds_per_token": med, "seconds_per_token_min": min(medians), "seconds_per_token_max": max(medians),
            "step_medians": medians, "prefill_s": statistics.median(prefills), "prefill_s_min": min(prefills),
            "prefill_s_max": max(prefills), "prefill_times": prefills, "compile_s": dec.compile_s, "params": params,
            **{f"bytes_{k}": v for k, v in b.items()}, "bytes_per_s": b["total"] / med}


def measure(results, specs: list[DecodeSpec], log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Time every spec without a stored record under ``results``; store one record each (kind
    ``latency_decode``); finished units are skipped. ``log`` gets one line per unit.
    Returns ``{"measured": [run ids], "skipped": [run ids]}``."""
    stored = kinds.done(results, KIND)
    todo = [s for s in specs if kinds.unit_id(KIND, s.to_dict()) not in stored]
    skipped = [kinds.unit_id(KIND, s.to_dict()) for s in specs if s not in todo]
    prov = provenance(specs[0].threads) if todo else {}
    measured = []
    for i, spec in enumerate(todo, 1):
        t0 = time.perf_counter()
        fields = time_unit(spec)
        rec = kinds.write(results, KIND, spec.to_dict(), provenance=prov, n_layer=spec.n_layer,
                          d_model=spec.d_model, n_head=spec.n_head, wall_s=time.perf_counter() - t0, **fields)
        measured.append(rec["run_id"])
        if log:
            log(f"[latency --decode] {i}/{len(todo)} {spec.n_layer}x{spec.d_model} V={spec.vocab_size} "
                f"T={spec.context} B={spec.batch} {spec.dtype}: {1e3 * fields['seconds_per_token']:.4g} ms/token "
                f"(prefill {1e3 * fields['prefill_s']:.4g} ms, {fields['bytes_per_s'] / 1e9:.3g} GB/s)")
    return {"measured": measured, "skipped": skipped}
