"""Forward-pass latency of equal-weight shapes: the stack alone (or the whole LM), timed.

Issue 11, item 1 ("depth is serial, width is parallel"; docs/concepts.md): at a fixed number of
weights N = 12·L·d², a deeper, narrower stack does the same matmul arithmetic in more, smaller,
sequential steps, so the prediction is a monotone slowdown with depth.

What is timed is the real model's code: :meth:`depthwidth.models.model.LM.stack` (the L blocks
and the final LayerNorm, run with ``nnx.scan`` as in training) on a random (B, T, d) input, or
with ``with_head`` the whole :class:`~depthwidth.models.model.LM` (token + position embeddings,
the stack, the tied head: logits (B, T, V)) on random token ids. Random init (GPT-2's, nnx), one
``jax.jit``, compiled ahead of time (``lower().compile()``, not timed), ``warmup`` untimed calls,
then ``repeats`` calls each timed with ``time.perf_counter`` around the call and
``block_until_ready``. A unit's record keeps every time, the median, min and max (seconds).

FLOPs of one forward pass (:func:`forward_flops`): the matmuls 2·N·B·T with N = 12·L·d² (Kaplan
et al. 2020, Table 1), plus 2·V·d·B·T for the head, plus the attention products QKᵀ and A·V,
2·2·L·T²·d·B counted over the *full* T×T matrix ("full" convention of
:mod:`depthwidth.theory.compute`): XLA's ``jax.nn.dot_product_attention(is_causal=True)`` on
CPU computes the whole score matrix and masks it, so that is the work done. The causal count
(half of it) is stored beside it. The attention share of the stack's FLOPs is T/(6d + T).

Threads (:func:`select_threads`): training pins one XLA:CPU thread (:mod:`depthwidth.hostcpu`),
but "width is parallel" is a claim about using the machine, so the default here is all visible
cores; ``1`` pins one. XLA sizes its thread pool once, when the backend starts, so the choice
must be made before jax starts (the command does it first) and one process measures one setting.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from depthwidth import hostcpu
from depthwidth.config import ModelConfig
from depthwidth.errors import UserError
from depthwidth.experiments import kinds
from depthwidth.units import parse_int

KIND = "latency"
DEFAULT_SHAPES = ((3, 1536), (12, 768), (27, 512))  # 12·L·d² = 84,934,656 each (issue 11)
HEAD_SIZE = 64  # --n-head auto: d/64 heads, GPT-2's head size (Radford et al. 2019)
DTYPES = ("float32", "bfloat16")


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """``"3x1536,12x768"`` -> [(3, 1536), (12, 768)] as (L, d). Raises UserError (one line) on an
    empty list, a malformed item, L or d < 1, or a repeated shape."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise UserError("--shapes is empty (expected LxD,..., e.g. 3x1536,12x768)")
    shapes = []
    for item in items:
        parts = item.lower().split("x")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise UserError(f"--shapes: {item!r} is not LxD (depth x width, e.g. 12x768)")
        shapes.append((parse_int(parts[0], name=f"--shapes depth in {item!r}"),
                       parse_int(parts[1], name=f"--shapes width in {item!r}")))
    if len(set(shapes)) != len(shapes):
        raise UserError(f"--shapes repeats a shape: {text!r}")
    return shapes


def heads_for(d_model: int, n_head: str | int) -> int:
    """Heads for width d: ``"auto"`` = d/64 (GPT-2's head size 64, so every shape's heads are
    alike); an int is used for every shape. Raises UserError unless it divides d."""
    if str(n_head).strip().lower() == "auto":
        if d_model % HEAD_SIZE:
            raise UserError(f"--n-head auto needs widths divisible by {HEAD_SIZE} (head size), got {d_model}; "
                            "give --n-head N")
        return d_model // HEAD_SIZE
    h = parse_int(n_head, name="--n-head")
    if d_model % h:
        raise UserError(f"width {d_model} is not divisible by --n-head {h}")
    return h


@dataclass(frozen=True)
class LatencySpec:
    """One timed unit: shape (``n_layer`` L, ``d_model`` d, ``n_head`` H), ``seq_len`` T tokens,
    ``batch`` B sequences, ``dtype`` of activations and weights, ``with_head`` (whole LM with a
    tied head over ``vocab_size`` V; 0 when the stack alone), ``threads`` (XLA:CPU threads),
    ``device`` (what ran it: platform and model), ``warmup``/``repeats`` calls, ``scan_unroll``."""

    n_layer: int
    d_model: int
    n_head: int
    seq_len: int
    batch: int
    dtype: str
    with_head: bool
    vocab_size: int
    threads: int
    device: str
    warmup: int
    repeats: int
    scan_unroll: int = 1

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise UserError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.d_model % self.n_head:
            raise UserError(f"width {self.d_model} is not divisible by --n-head {self.n_head}")
        if self.with_head and self.vocab_size < 1:
            raise UserError("--vocab-size must be >= 1 with --with-head")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def forward_flops(n_layer: int, d_model: int, seq_len: int, batch: int, vocab_size: int = 0) -> dict[str, int]:
    """FLOPs of one forward pass of B sequences of T tokens (module doc; a multiply-add = 2).

    Returns ints: ``matmul`` 2·12·L·d²·B·T (+ 2·V·d·B·T with a head, V > 0), ``attention`` the full
    T×T products 4·L·T²·d·B, ``attention_causal`` half of it, ``total`` = matmul + attention,
    ``total_causal``. Source: Kaplan et al. 2020 Table 1; :func:`depthwidth.theory.compute.
    forward_flops_per_token` ("full" and "causal" conventions). Raises UserError on bad sizes.
    """
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory import compute

    head = vocab_size > 0
    tokens = batch * seq_len
    full = int(compute.forward_flops_per_token(n_layer, d_model, seq_len, vocab_size, "full", head)) * tokens
    causal = int(compute.forward_flops_per_token(n_layer, d_model, seq_len, vocab_size, "causal", head)) * tokens
    attention = 2 * (full - causal)  # full - causal = the causal half, 2·L·T·d per token
    return {"matmul": full - attention, "attention": attention, "attention_causal": attention // 2,
            "total": full, "total_causal": causal}


def select_threads(choice: str) -> int:
    """Fix XLA:CPU's thread count for this process and return it: ``"1"`` pins one core
    (:func:`depthwidth.hostcpu.pin_one_core`), ``"all"`` leaves every core of the affinity set.

    Must run before jax starts its backend (module doc; :func:`device_name` checks afterwards).
    Raises UserError for another choice, or for ``"all"`` in a process already pinned.
    """
    if choice not in ("1", "all"):
        raise UserError(f"--threads must be 1 or all, got {choice!r}")
    if choice == "1":
        hostcpu.pin_one_core()
        return 1
    if hostcpu.host_info()["pinned"]:
        raise UserError("--threads all: this process was pinned to one core before jax started "
                        "(depthwidth.hostcpu); run the command in a fresh process")
    return _affinity()


def _affinity() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def device_name(threads: int) -> str:
    """What runs the jitted call: ``cpu/<cpu model>`` or ``<platform>/<device kind>``. Starts jax.

    Raises UserError when the CPU backend sees another core count than ``threads`` (jax had
    started before :func:`select_threads`, e.g. unpinned; run a fresh process).
    """
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax


    dev = jax.devices()[0]
    if dev.platform != "cpu":
        return f"{dev.platform}/{dev.device_kind}"
    if _affinity() != threads:
        raise UserError(f"--threads {threads}: jax runs on {_affinity()} cores in this process; "
                        "run the command in a fresh process")
    return f"cpu/{hostcpu.host_info()['cpu_model'] or 'unknown'}"


def _build(spec: LatencySpec):
    """(compiled fn, its arguments, parameters counted, compile seconds) for one unit."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from flax import nnx

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.model import LM, cast_params

    cfg = ModelConfig(n_layer=spec.n_layer, d_model=spec.d_model, n_head=spec.n_head,
                      vocab_size=spec.vocab_size if spec.with_head else 1, seq_len=spec.seq_len,
                      scan_unroll=spec.scan_unroll)
    dtype = jnp.dtype(spec.dtype)
    graphdef, params, rest = nnx.split(LM(cfg, rngs=nnx.Rngs(0)), nnx.Param, ...)
    if spec.with_head:
        counted = sum(int(p.size) for p in jax.tree.leaves(params))
    else:  # the stack: the blocks and the final LayerNorm (what theory.stack_n counts)
        counted = sum(int(p.size) for k in ("blocks", "ln_f") for p in jax.tree.leaves(params[k]))
    params = cast_params(params, dtype) if dtype != jnp.float32 else params  # inference weights in dtype

    def forward(params, rest, inp):
        model = nnx.merge(graphdef, params, rest)
        return model(inp, compute_dtype=dtype) if spec.with_head else model.stack(inp)

    key = jax.random.PRNGKey(1)
    if spec.with_head:
        inp = jax.random.randint(key, (spec.batch, spec.seq_len), 0, spec.vocab_size, dtype=jnp.int32)
    else:
        inp = jax.random.normal(key, (spec.batch, spec.seq_len, spec.d_model), dtype)
    t0 = time.perf_counter()
    compiled = jax.jit(forward).lower(params, rest, inp).compile()
    return compiled, (params, rest, inp), counted, time.perf_counter() - t0


def time_unit(spec: LatencySpec) -> dict[str, Any]:
    """Time one unit (module doc). Returns the record's fields: ``seconds`` (median), ``seconds_min``,
    ``seconds_max``, ``times`` (s, in call order), ``compile_s``, ``params`` (counted in the
    built model: the stack's, or the whole LM's with the head), the :func:`forward_flops` dict as
    ``flops_*``, ``flops_per_s`` (total / median), ``attention_share`` (attention / total)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    compiled, args, counted, compile_s = _build(spec)
    for _ in range(spec.warmup):
        jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(spec.repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    fl = forward_flops(spec.n_layer, spec.d_model, spec.seq_len, spec.batch,
                       spec.vocab_size if spec.with_head else 0)
    return {"seconds": med, "seconds_min": min(times), "seconds_max": max(times), "times": times,
            "compile_s": compile_s, "params": counted, **{f"flops_{k}": v for k, v in fl.items()},
            "flops_per_s": fl["total"] / med, "attention_share": fl["attention"] / fl["total"]}


def provenance(threads: int) -> dict[str, Any]:
    """The training records' provenance, with the host's thread fields set to what this
    measurement used (hostcpu's cpu_threads is the training rule, 1, not the timing's)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.train import provenance as train_provenance

    prov = train_provenance()
    prov["host"] = {**prov["host"], "cpu_threads": threads, "cores_visible": os.cpu_count(),
                    "cores_affinity": _affinity(), "pinned": threads == 1}
    return prov


def measure(results, specs: list[LatencySpec], log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Time every spec without a stored record under ``results`` and store one record each
    (kind "latency", :mod:`depthwidth.experiments.kinds`); finished units are skipped.

    ``log``: receives one progress line per unit (done/total, the time, an ETA from the FLOPs
    left at the rate so far). Returns ``{"measured": [run ids], "skipped": [run ids]}``.
    """
    stored = kinds.done(results, KIND)
    todo = [s for s in specs if kinds.unit_id(KIND, s.to_dict()) not in stored]
    skipped = [kinds.unit_id(KIND, s.to_dict()) for s in specs if s not in todo]
    prov = provenance(specs[0].threads) if todo else {}
    measured, flops_done, t_start = [], 0, time.perf_counter()
    flops_of = {s: forward_flops(s.n_layer, s.d_model, s.seq_len, s.batch, s.vocab_size if s.with_head else 0)
                ["total"] * (s.warmup + s.repeats + 2) for s in todo}  # +2: compile ~ a couple of calls
    for i, spec in enumerate(todo, 1):
        t0 = time.perf_counter()
        fields = time_unit(spec)
        rec = kinds.write(results, KIND, spec.to_dict(), provenance=prov, n_layer=spec.n_layer,
                          d_model=spec.d_model, n_head=spec.n_head, wall_s=time.perf_counter() - t0, **fields)
        measured.append(rec["run_id"])
        flops_done += flops_of[spec]
        if log:
            elapsed = time.perf_counter() - t_start
            eta = elapsed / flops_done * sum(flops_of[s] for s in todo[i:])
            head = f" +head V={spec.vocab_size}" if spec.with_head else ""
            log(f"[latency] {i}/{len(todo)} {spec.n_layer}x{spec.d_model}{head} T={spec.seq_len} B={spec.batch} "
                f"{spec.dtype}: median {fields['seconds']:.4g} s ({fields['flops_per_s'] / 1e9:.3g} GFLOP/s); "
                f"ETA {eta:.0f} s")
    return {"measured": measured, "skipped": skipped}


def stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
