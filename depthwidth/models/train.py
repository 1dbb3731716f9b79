"""Sharded training of one run: config -> result record (DESIGN §2).

The state is a plain pytree ``{"params", "opt_state", "step"}``; the train step is one
``jax.jit`` with explicit in/out shardings and the state donated (what ``pjit`` became),
compiled ahead of time with its memory analysis printed before step 0. The batch at step k
is a pure function of (seed, k), and so is the dropout key, so a run killed and resumed from
its orbax checkpoint reproduces the uninterrupted run bit for bit.

Schedule: linear warm-up to the peak lr, then cosine decay to zero (Levine et al. 2020, §4 /
App. A: 12K warm-up steps, cosine to zero). Optimiser: Adam (AdamW when weight_decay > 0,
decay applied to kernels and embeddings only), global-norm clipping.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from depthwidth import records
from depthwidth.config import RunConfig
from depthwidth.models import perf
from depthwidth.models import sharding as sh
from depthwidth.models.model import LM, cast_params

MFU_CONVENTION = "6N + 6Vd + 6LTd (causal attention, MaxText convention)"


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
    train_step: Any  # compiled: (state, x, y) -> (state, metrics)
    eval_step: Any  # compiled: (params, x, y, mask) -> (sum_nll, count, per-sequence sum_nll (B,))
    compile_s: float
    memory: dict[str, int]
    abstract_state: Any  # ShapeDtypeStructs carrying the state's shardings (restore target)


def _loss(graphdef, params, x, y, key, dtype):
    model = nnx.merge(graphdef, cast_params(params, dtype) if dtype != jnp.float32 else params)
    logits = model(x, dropout_key=key, compute_dtype=dtype)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def build_engine(cfg: RunConfig, *, mesh: jax.sharding.Mesh | None = None, verbose: bool = True) -> Engine:
    """Build and AOT-compile the train and eval steps. ``cfg.model.vocab_size`` must be > 0."""
    mesh = mesh or sh.make_mesh(cfg.mesh)
    m, t = cfg.model, cfg.train
    dtype = jnp.dtype(t.compute_dtype)
    abstract_model = nnx.eval_shape(lambda: LM(m, rngs=nnx.Rngs(0)))
    graphdef, abstract_params = nnx.split(abstract_model, nnx.Param)
    p_shard = sh.param_shardings(abstract_params, mesh, cfg.mesh)
    tx = make_optimizer(cfg)
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def init(seed):
        params = nnx.to_pure_dict(nnx.state(LM(m, rngs=nnx.Rngs(seed)), nnx.Param))
        return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}

    # Optimiser moments follow their parameters' sharding (FSDP/TP shard them too).
    abstract_state = jax.eval_shape(lambda: init(0))
    opt_shard = optax.tree_map_params(tx, lambda _, s: s, abstract_state["opt_state"], p_shard,
                                      transform_non_params=lambda _: replicated)
    state_shard = {"params": p_shard, "opt_state": opt_shard, "step": replicated}
    # Before compiling (which can take very long for absurd shapes): state + gradients spread
    # evenly over the mesh is a lower bound on what every device must hold.
    state_bytes = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(abstract_state))
    param_bytes = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(abstract_state["params"]))
    _check_fits({"argument_bytes": (state_bytes + param_bytes) // mesh.devices.size}, mesh)
    b_shard = sh.batch_sharding(mesh, cfg.mesh)

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
    st = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract_state, state_shard)
    t0 = time.perf_counter()
    compiled = jax.jit(train_step, in_shardings=(state_shard, b_shard, b_shard),
                       out_shardings=(state_shard, replicated), donate_argnums=0).lower(st, xs, xs).compile()
    mask = jax.ShapeDtypeStruct((B,), jnp.float32, sharding=jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec(b_shard.spec[0])))
    ev = jax.jit(eval_step, out_shardings=(replicated, replicated, replicated)).lower(st["params"], xs, xs, mask).compile()
    compile_s = time.perf_counter() - t0
    memory = _memory(compiled)
    _check_fits(memory, mesh)
    if verbose:
        mb = {k: f"{v / 2**20:.1f} MiB" for k, v in memory.items()}
        print(f"compiled train step in {compile_s:.1f}s on {mesh.devices.size} device(s) "
              f"{dict(mesh.shape)}; memory per device: {mb}", file=sys.stderr)
    init_fn = jax.jit(init, static_argnums=0, out_shardings=state_shard)
    return Engine(cfg, mesh, graphdef, tx, state_shard, b_shard, init_fn, compiled, ev, compile_s, memory, st)


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
    the host's physical memory shared by the devices of the mesh is the limit.
    """
    from depthwidth.errors import UserError

    device = mesh.devices.flat[0]
    try:
        limit = (device.memory_stats() or {}).get("bytes_limit")
    except Exception:  # backends without memory_stats
        limit = None
    if not limit and getattr(device, "platform", None) == "cpu":
        try:
            limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // mesh.devices.size
        except (ValueError, OSError, AttributeError):
            limit = None
    need = memory.get("argument_bytes", 0) + memory.get("output_bytes", 0) - memory.get("alias_bytes", 0) \
        + memory.get("temp_bytes", 0)
    if limit and need > limit:
        raise UserError(f"the train step needs {need / 2**30:.1f} GiB per device (at least) but {limit / 2**30:.1f} GiB "
                        "are available: use more devices (mesh), FSDP rules (embed -> data), or a smaller batch")


EVAL_CHUNKS = 32  # test-set chunks whose losses a record keeps (evaluation-set uncertainty)


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
        from depthwidth.errors import UserError

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


def _git_rev() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict[str, str]:
    import flax
    import orbax.checkpoint

    return {"jax": jax.__version__, "flax": flax.__version__, "optax": optax.__version__,
            "orbax": orbax.checkpoint.__version__, "numpy": np.__version__, "python": platform.python_version()}


def resolve_vocab(cfg: RunConfig, vocab_size: int) -> RunConfig:
    """Fill ``model.vocab_size`` from the data (0 = from data); error if it is set and smaller."""
    from depthwidth.errors import UserError

    if cfg.model.vocab_size == 0:
        return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=vocab_size))
    if cfg.model.vocab_size < vocab_size:
        raise UserError(f"model.vocab_size={cfg.model.vocab_size} is smaller than the data's vocabulary ({vocab_size})")
    return cfg


def _read_log(path: Path, upto_step: int) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a kill
            continue
        if e.get("step", 0) <= upto_step:
            out.append(e)
    return out


def train_run(cfg: RunConfig, results_dir: str | Path, *, data_dir: str | Path | None = None,
              resume: bool = True, progress: bool = True, stop_after: int | None = None,
              tensorboard: bool = False, verbose: bool = True) -> dict[str, Any] | None:
    """Train one run and write its record atomically to ``results_dir/runs/<run_id>/record.json``.

    Returns the record, or None when ``stop_after`` (steps done in this call, for tests of
    kill/resume) stopped the run before the end. A run whose record exists is not retrained.
    A non-finite loss ends the run with status 'diverged' (test_loss null), not an exception.
    Raises UserError for bad data/config.
    """
    from depthwidth import hostcpu

    hostcpu.pin_one_core()  # before jax's backend starts (module doc of hostcpu)
    import orbax.checkpoint as ocp

    from depthwidth.data import prepare, tokenfiles
    from depthwidth.theory import accounting, compute

    run_id = cfg.run_id()
    rdir = records.run_dir(results_dir, run_id)
    rec_path = rdir / "record.json"
    if rec_path.exists():
        return records.read_record(rec_path)
    is_main = jax.process_index() == 0

    prepared = tokenfiles.open_prepared(prepare.prepared_dir_for(cfg.data, data_dir))
    rcfg = resolve_vocab(cfg, prepared.vocab_size)
    m, t = rcfg.model, rcfg.train
    if is_main:
        rdir.mkdir(parents=True, exist_ok=True)
        records.write_json_atomic(rdir / "config.json", {"run_id": run_id, "config": cfg.to_dict(),
                                                          "vocab_size": m.vocab_size})

    hostcpu.require_fixed_threads()
    engine = build_engine(rcfg, verbose=verbose)
    ckpt = ocp.CheckpointManager(
        (rdir / "ckpt").absolute(),
        options=ocp.CheckpointManagerOptions(max_to_keep=t.keep_ckpts, save_interval_steps=t.ckpt_every,
                                             enable_async_checkpointing=False, create=True))
    latest = ckpt.latest_step() if resume else None
    if latest is not None:
        state = ckpt.restore(latest, args=ocp.args.StandardRestore(engine.abstract_state))
        if verbose:
            print(f"resumed {run_id} from step {latest}", file=sys.stderr)
    else:
        state = engine.init_fn(t.seed)
    start = int(state["step"])
    log_path = rdir / "log.jsonl"
    log = _read_log(log_path, start) if start > 0 else []
    prior_wall = log[-1].get("wall_s", 0.0) if log else 0.0
    if is_main:
        log_path.write_text("".join(json.dumps(e) + "\n" for e in log))
    log_fh = open(log_path, "a") if is_main else None
    tb = None
    if tensorboard and is_main:
        from tensorboardX import SummaryWriter

        tb = SummaryWriter(str(rdir / "tb"))

    counts = accounting.param_counts(m.n_layer, m.d_model, n_head=m.n_head, vocab_size=m.vocab_size,
                                     seq_len=m.seq_len, tied_head=m.tied_head, d_ff=m.ff_width)
    # MFU numerator: 6N + 6Vd + 6LTd, the causal (MaxText) convention (theory.compute).
    flops_per_token = int(compute.train_flops_per_token(m.n_layer, m.d_model, m.seq_len, vocab_size=m.vocab_size,
                                                        d_ff=m.ff_width))
    peak = perf.measured_peak_flops(t.compute_dtype)
    tokens_per_step = t.batch_size * m.seq_len
    lr_at = learning_rate_schedule(t.steps, t.warmup_steps, t.lr)  # for the log only

    bar = None
    if progress and is_main:
        from tqdm import tqdm

        bar = tqdm(total=t.steps, initial=start, desc=run_id, unit="step", file=sys.stderr, dynamic_ncols=True)

    status, pending, window_t0, train_wall = "finished", [], time.perf_counter(), 0.0
    last_loss, last_val = float("nan"), None
    tok_s = mfu = None
    step = start
    stop_at = t.steps if stop_after is None else min(t.steps, start + stop_after)
    try:
        while step < stop_at:
            x, y = tokenfiles.get_batch(prepared.train, t.seed, step, t.batch_size, m.seq_len)
            state, metrics = engine.train_step(state, sh.global_batch(x, engine.batch_sharding),
                                               sh.global_batch(y, engine.batch_sharding))
            step += 1
            pending.append(metrics)
            at_eval = t.eval_every and step % t.eval_every == 0 and step < t.steps
            if step % t.log_every == 0 or step % t.ckpt_every == 0 or step == stop_at or at_eval:
                got = jax.device_get(pending)
                now = time.perf_counter()
                dt = now - window_t0
                train_wall += dt
                losses = [float(g["loss"]) for g in got]
                last_loss = float(np.mean(losses))
                tok_s = len(got) * tokens_per_step / dt
                mfu = perf.mfu(tok_s, flops_per_token, peak)
                entry = {"step": step, "loss": last_loss, "lr": float(lr_at(step - 1)),
                         "grad_norm": float(got[-1]["grad_norm"]), "tokens_per_s": tok_s, "mfu": mfu,
                         "wall_s": prior_wall + train_wall}
                pending = []
                if not all(math.isfinite(v) for v in losses):
                    status = "diverged"
                if at_eval and status == "finished":
                    last_val, _ = evaluate(engine, state["params"], prepared.val, t.eval_batches * t.batch_size)
                    entry["val_loss"] = last_val
                if log_fh:
                    log_fh.write(json.dumps(entry, allow_nan=True) + "\n")
                    log_fh.flush()
                if tb:
                    for k, v in entry.items():
                        if k != "step":
                            tb.add_scalar(k, v, step)
                if bar:
                    bar.update(step - bar.n)
                    bar.set_postfix(loss=f"{last_loss:.4f}", tok_s=f"{tok_s:,.0f}",
                                    **({"val": f"{last_val:.4f}"} if last_val is not None else {}))
                if status == "diverged":
                    break
                window_t0 = time.perf_counter()
            if step % t.ckpt_every == 0 or step == stop_at:
                ckpt.save(step, args=ocp.args.StandardSave(state), force=True)
                window_t0 = time.perf_counter()  # checkpoint I/O is not training time
    finally:
        if bar:
            bar.close()
        if log_fh:
            log_fh.close()
        if tb:
            tb.close()
        ckpt.wait_until_finished()
        ckpt.close()

    if status == "finished" and step < t.steps:
        return None  # stopped early on purpose (stop_after); the checkpoint holds the state

    val_loss = test_loss = None
    n_test, test_chunks = 0, None
    if status == "finished":
        val_loss, _ = evaluate(engine, state["params"], prepared.val, t.eval_batches * t.batch_size)
        test_loss, n_test, test_chunks = evaluate(engine, state["params"], prepared.test, t.test_sequences,
                                                  chunks=EVAL_CHUNKS)
        if not (math.isfinite(val_loss) and math.isfinite(test_loss)):
            status, val_loss, test_loss, test_chunks = "diverged", None, None, None
    rec = {
        # "config" is the config the id was derived from (model.vocab_size 0 = taken from the data);
        # the resolved vocabulary is the top-level "vocab_size".
        "schema": records.SCHEMA, "run_id": run_id, "status": status, "config": cfg.to_dict(),
        "n_layer": m.n_layer, "d_model": m.d_model, "n_head": m.n_head, "vocab_size": m.vocab_size,
        "seq_len": m.seq_len, "seed": t.seed,
        "params": {"non_embedding": counts["stack_params"], "kaplan": counts["kaplan_params"],
                   "embedding": counts["embedding_params"], "total": counts["total_params"]},
        "tokens": step * tokens_per_step, "steps": step,
        "train_loss": last_loss if math.isfinite(last_loss) else None,
        "val_loss": val_loss, "test_loss": test_loss, "test_sequences": n_test,
        "test_loss_chunks": test_chunks,
        "wall_s": prior_wall + train_wall, "compile_s": engine.compile_s,
        "tokens_per_s": (step - start) * tokens_per_step / train_wall if train_wall > 0 else None,
        "mfu": None, "flops_per_token": flops_per_token, "mfu_convention": MFU_CONVENTION,
        "peak_flops_per_s": peak, "git_rev": _git_rev(), "versions": _versions(),
        "device": f"{jax.devices()[0].platform} x{jax.device_count()}", "host": hostcpu.host_info(),
        "data": prepared.meta,
        "finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    if rec["tokens_per_s"]:
        rec["mfu"] = perf.mfu(rec["tokens_per_s"], flops_per_token, peak)
    if is_main:
        records.write_json_atomic(rec_path, rec)
        if os.environ.get("DEPTHWIDTH_KEEP_CKPT", "0") != "1":
            import shutil

            shutil.rmtree(rdir / "ckpt", ignore_errors=True)  # the record is the result; free the disk
    return rec

