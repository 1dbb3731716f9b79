"""The training engine: one (config, vocabulary, mesh) -> sharded, AOT-compiled train and eval steps.

The state is a plain pytree ``{"params", "opt_state", "step"}``; the train step is one
``jax.jit`` with explicit in/out shardings and the state donated (what ``pjit`` became),
compiled ahead of time with its memory analysis printed before step 0. The dropout key at
step k is a pure function of (seed, k), like the batch (:func:`depthwidth.data.tokenfiles.get_batch`),
so a run killed and resumed from its checkpoint reproduces the uninterrupted run bit for bit.

Schedule: linear warm-up to the peak lr, then cosine decay to zero (Levine et al. 2020, §4 /
App. A: 12K warm-up steps, cosine to zero). Optimiser: Adam (AdamW when weight_decay > 0,
decay applied to kernels and embeddings only), global-norm clipping.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from depthwidth import hostcpu, interrupts
from depthwidth.config import RunConfig
from depthwidth.errors import UserError
from depthwidth.models import sharding as sh
from depthwidth.models.model import LM, cast_params

MFU_CONVENTION = "6N + 6Vd + 6LTd (causal attention, MaxText convention)"
EVAL_CHUNKS = 32  # test-set chunks whose losses a record keeps (evaluation-set uncertainty)


def learning_rate_schedule(steps: int, warmup_steps: int, lr: float) -> optax.Schedule:
    """Linear warm-up 0 -> lr over ``warmup_steps``, then cosine decay to 0 at ``steps``."""
    if warmup_steps == 0:
        return optax.cosine_decay_schedule(lr, steps, alpha=0.0)
    return optax.warmup_cosine_decay_schedule(0.0, lr, warmup_steps, steps, end_value=0.0)


def make_optimizer(cfg: RunConfig) -> optax.GradientTransformation:
    t = cfg.train
    sched = learning_rate_schedule(t.steps, t.warmup_steps, t.lr)

    def decay_mask(params):
        # Biases, LayerNorm scales/biases are not decayed (GPT-2 / nanoGPT convention).
        return jax.tree_util.tree_map_with_path(
            lambda path, _: str(getattr(path[-1], "key", "")) in ("kernel", "embedding"), params)

    opt = optax.adamw(sched, b1=t.b1, b2=t.b2, eps=1e-8, weight_decay=t.weight_decay, mask=decay_mask)
    return optax.chain(optax.clip_by_global_norm(t.grad_clip), opt) if t.grad_clip > 0 else opt


@dataclass(frozen=True)
class StateLayout:
    """The train state's structure without its values: what init, restore and compile need.

    graphdef: the LM's nnx graph (merge it with params to get a model); tx: the optimiser;
    init: seed -> state (not jitted); shardings: the state pytree of NamedShardings (optimiser
    moments follow their parameters); abstract: ShapeDtypeStructs carrying those shardings
    (the target of a checkpoint restore).
    """

    graphdef: Any
    tx: optax.GradientTransformation
    init: Callable[[int], dict[str, Any]]
    shardings: Any
    abstract: Any


def state_layout(cfg: RunConfig, mesh: jax.sharding.Mesh) -> StateLayout:
    """The state layout of ``cfg`` on ``mesh`` (``cfg.model.vocab_size`` must be > 0)."""
    m = cfg.model
    abstract_model = nnx.eval_shape(lambda: LM(m, rngs=nnx.Rngs(0)))
    graphdef, abstract_params = nnx.split(abstract_model, nnx.Param)
    p_shard = sh.param_shardings(abstract_params, mesh, cfg.mesh)
    tx = make_optimizer(cfg)
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def init(seed):
        params = nnx.to_pure_dict(nnx.state(LM(m, rngs=nnx.Rngs(seed)), nnx.Param))
        return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}

    abstract_state = jax.eval_shape(lambda: init(0))
    opt_shard = optax.tree_map_params(tx, lambda _, s: s, abstract_state["opt_state"], p_shard,
                                      transform_non_params=lambda _: replicated)
    shardings = {"params": p_shard, "opt_state": opt_shard, "step": replicated}
    abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract_state, shardings)
    return StateLayout(graphdef, tx, init, shardings, abstract)


@dataclass
class Engine:
    """Everything compiled for one (config, vocab, mesh): shardings, optimiser, steps."""

    cfg: RunConfig
    mesh: jax.sharding.Mesh
    graphdef: Any
    tx: optax.GradientTransformation
    state_sharding: Any
    batch_sharding: jax.sharding.NamedSharding
    init_fn: Callable
    train_step: Any  # compiled: (state, x, y) -> (state, metrics); None for an eval-only engine
    eval_step: Any  # compiled: (params, x, y, mask) -> (sum_nll, count, per-sequence sum_nll (B,))
    compile_s: float
    memory: dict[str, int]
    abstract_state: Any  # ShapeDtypeStructs carrying the state's shardings (restore target)


def _loss(graphdef, params, x, y, key, dtype):
    model = nnx.merge(graphdef, cast_params(params, dtype) if dtype != jnp.float32 else params)
    logits = model(x, dropout_key=key, compute_dtype=dtype)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def build_engine(cfg: RunConfig, *, mesh: jax.sharding.Mesh | None = None, verbose: bool = True,
                 train: bool = True) -> Engine:
    """Build and AOT-compile the train and eval steps. ``cfg.model.vocab_size`` must be > 0.

    ``train=False``: the eval step only (``Engine.train_step`` is None, ``memory`` empty), for
    evaluating stored weights (``exp layerdrop``): the same compiled eval step as a training
    run's, so the same parameters give the same loss, without compiling a train step (a minute
    for a 16-layer stack on a shared CPU).

    Raises UserError before compiling when the state cannot fit the devices, and after
    compiling when the compiled step cannot (:func:`_check_fits`).
    """
    mesh = mesh or sh.make_mesh(cfg.mesh)
    axis = dict(cfg.mesh.rules).get("batch", "data")
    if axis is not None and cfg.train.batch_size % mesh.shape[axis]:  # else jax's IndivisibleError at the first step
        raise UserError(f"train.batch_size={cfg.train.batch_size} does not split over the {mesh.shape[axis]} devices of "
                        f"mesh axis '{axis}' (the batch rule): use a multiple of {mesh.shape[axis]}, or set mesh.{axis}")
    layout = state_layout(cfg, mesh)
    # Before compiling (which can take very long for absurd shapes): state + gradients spread
    # evenly over the mesh is a lower bound on what every device must hold.
    state_bytes = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(layout.abstract))
    param_bytes = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(layout.abstract["params"]))
    _check_fits({"argument_bytes": (state_bytes + param_bytes) // mesh.devices.size}, mesh)
    b_shard = sh.batch_sharding(mesh, cfg.mesh)
    t0 = time.perf_counter()
    # a Ctrl-C inside XLA's compile left it running under the exiting interpreter: exit 139
    with interrupts.deferred():
        train_step, eval_step = _compile_steps(cfg, mesh, layout, b_shard, train=train)
    compile_s = time.perf_counter() - t0
    memory = _memory(train_step) if train else {}
    _check_fits(memory, mesh)
    if verbose and train:
        mb = {k: f"{v / 2**20:.1f} MiB" for k, v in memory.items()}
        print(f"compiled train step in {compile_s:.1f}s on {mesh.devices.size} device(s) "
              f"{dict(mesh.shape)}; memory per device: {mb}", file=sys.stderr)
    init_fn = jax.jit(layout.init, static_argnums=0, out_shardings=layout.shardings)
    return Engine(cfg, mesh, layout.graphdef, layout.tx, layout.shardings, b_shard, init_fn, train_step,
                  eval_step, compile_s, memory, layout.abstract)


def _compile_steps(cfg: RunConfig, mesh: jax.sharding.Mesh, layout: StateLayout,
                   b_shard: jax.sharding.NamedSharding, *, train: bool = True) -> tuple[Any, Any]:
    """The AOT-compiled train step (state donated; None unless ``train``) and eval step."""
    m, t = cfg.model, cfg.train
    dtype = jnp.dtype(t.compute_dtype)
    graphdef, tx, state_shard = layout.graphdef, layout.tx, layout.shardings
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def train_step(state, x, y):
        step = state["step"]
        key = jax.random.fold_in(jax.random.key(t.seed), step) if m.dropout > 0 else None
        loss, grads = jax.value_and_grad(lambda p: _loss(graphdef, p, x, y, key, dtype))(state["params"])
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        metrics = {"loss": loss, "grad_norm": optax.tree.norm(grads)}
        return {"params": params, "opt_state": opt_state, "step": step + 1}, metrics

    def eval_step(params, x, y, mask):
        model = nnx.merge(graphdef, cast_params(params, dtype) if dtype != jnp.float32 else params)
        nll = optax.softmax_cross_entropy_with_integer_labels(model(x, compute_dtype=dtype), y)
        return (nll * mask[:, None]).sum(), mask.sum() * x.shape[1], nll.sum(axis=1) * mask

    B, T = t.batch_size, m.seq_len
    xs = jax.ShapeDtypeStruct((B, T), jnp.int32, sharding=b_shard)
    st = layout.abstract
    compiled = jax.jit(train_step, in_shardings=(state_shard, b_shard, b_shard),
                       out_shardings=(state_shard, replicated), donate_argnums=0).lower(st, xs, xs).compile() \
        if train else None
    mask = jax.ShapeDtypeStruct((B,), jnp.float32, sharding=jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec(b_shard.spec[0])))
    ev = jax.jit(eval_step, out_shardings=(replicated, replicated, replicated)).lower(st["params"], xs, xs, mask).compile()
    return compiled, ev


def _memory(compiled) -> dict[str, int]:
    try:
        ma = compiled.memory_analysis()
    except Exception:  # some backends do not implement it
        return {}
    if ma is None:
        return {}
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
            "generated_code_size_in_bytes", "alias_size_in_bytes")
    return {k.replace("_size_in_bytes", "_bytes"): int(getattr(ma, k)) for k in keys if hasattr(ma, k)}


def _check_fits(memory: dict[str, int], mesh: jax.sharding.Mesh) -> None:
    """Fail before step 0 (seconds, not after a long start) when the compiled step cannot fit.

    The limit is the device's (GPU/TPU ``memory_stats``); a CPU device reports none, and then
    the host memory available now (:func:`depthwidth.hostcpu.available_memory_bytes`, not the
    total), shared by the devices of the mesh, is the limit.
    """
    device = mesh.devices.flat[0]
    try:
        limit = (device.memory_stats() or {}).get("bytes_limit")
    except Exception:  # backends without memory_stats
        limit = None
    if not limit and getattr(device, "platform", None) == "cpu":
        avail = hostcpu.available_memory_bytes()
        limit = avail // mesh.devices.size if avail else None
    need = memory.get("argument_bytes", 0) + memory.get("output_bytes", 0) - memory.get("alias_bytes", 0) \
        + memory.get("temp_bytes", 0)
    if limit and need > limit:
        raise UserError(f"the train step needs {need / 2**30:.1f} GiB per device (at least) but {limit / 2**30:.1f} GiB "
                        "are available: use more devices (mesh), FSDP rules (embed -> data), or a smaller batch")


def evaluate(engine: Engine, params, tokens: np.ndarray, n_sequences: int,
             chunks: int = 0) -> tuple[float, int] | tuple[float, int, list[float]]:
    """Mean next-token loss (nats/token) over the first ``n_sequences`` non-overlapping windows.

    Returns (loss, sequences used); fewer are used when the split is shorter. With ``chunks``
    = K > 0 also the mean loss of each of K consecutive, equal-as-possible groups of those
    sequences (group c holds sequences [c·n//K, (c+1)·n//K); K is capped at n): resampling
    the groups estimates how much the loss depends on which held-out text was used. The final
    batch is padded and masked so one compiled step serves every batch.
    """
    B, T = engine.cfg.train.batch_size, engine.cfg.model.seq_len
    n = min(n_sequences, (len(tokens) - 1) // T)
    if n < 1:
        raise UserError(f"held-out split has {len(tokens)} tokens, fewer than one sequence of {T + 1}")
    total, count = 0.0, 0.0
    per_seq: list[np.ndarray] = []
    mask_shard = jax.sharding.NamedSharding(engine.mesh, jax.sharding.PartitionSpec(engine.batch_sharding.spec[0]))
    for start in range(0, n, B):
        rows = min(B, n - start)
        idx = (start + np.arange(B) % rows)[:, None] * T + np.arange(T + 1)[None]
        seq = np.asarray(tokens[idx], dtype=np.int32)
        mask = (np.arange(B) < rows).astype(np.float32)
        s, c, rowsum = engine.eval_step(params, sh.global_batch(seq[:, :-1], engine.batch_sharding),
                                        sh.global_batch(seq[:, 1:], engine.batch_sharding),
                                        jax.make_array_from_process_local_data(mask_shard, mask, mask.shape))
        total += float(s)
        count += float(c)
        if chunks:
            per_seq.append(np.asarray(rowsum, dtype=np.float64)[:rows])
    if not chunks:
        return total / count, n
    nll = np.concatenate(per_seq)
    k = min(chunks, n)
    bounds = [c * n // k for c in range(k + 1)]
    return total / count, n, [float(nll[a:b].sum() / ((b - a) * T)) for a, b in zip(bounds[:-1], bounds[1:])]
