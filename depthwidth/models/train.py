"""Training of one run: config -> result record (docs/architecture.md), and back: a kept run -> its model.

:func:`train_run` is a short list of named steps:

1. the run's data and its config with the data's vocabulary (``config.json`` written);
2. the engine (:func:`depthwidth.models.engine.build_engine`), on a CPU pinned to one thread;
3. restore the last checkpoint, or initialise (:func:`_restore_or_init`);
4. the loop (:func:`_train_loop`): a step, and at the end of each log window a log entry
   (:class:`RunLogger`: ``log.jsonl``, the trackers, the progress bar), a validation loss at
   ``eval_every``, a checkpoint at ``ckpt_every``;
5. the final evaluation and the :class:`~depthwidth.records.Record`, written atomically; the
   checkpoints are then deleted unless ``train.keep_weights``.

The batch and the dropout key at step k are pure functions of (seed, k), so a run killed and
resumed from its orbax checkpoint reproduces the uninterrupted run bit for bit.
:func:`load_run` gives back the trained model of a run whose weights were kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import importlib.metadata
import json
import logging
import math
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flax
import jax
import numpy as np
import optax
from flax import nnx

import depthwidth
from depthwidth import hostcpu, interrupts, records, storage
from depthwidth.config import MeshConfig, RunConfig, from_dict
from depthwidth.data.prepare import meta_for_record, pin_corpus, prepared_dir_for
from depthwidth.data.tokenfiles import Prepared, get_batch, open_prepared
from depthwidth.errors import NO_SPACE_ERRNOS, StorageFull, UserError, chain
from depthwidth.models import perf
from depthwidth.models import sharding as sh
from depthwidth.models import trackers as tracking
from depthwidth.models.engine import (
    EVAL_CHUNKS,
    MFU_CONVENTION,
    Engine,
    build_engine,
    evaluate,
    learning_rate_schedule,
    state_layout,
)
from depthwidth.theory import compute


def train_run(cfg: RunConfig, results_dir: str | Path, *, data_dir: str | Path | None = None,
              resume: bool = True, progress: bool = True, stop_after: int | None = None,
              trackers: Sequence[str] = (), verbose: bool = True) -> dict[str, Any] | None:
    """Train one run and write its record atomically to ``results_dir/runs/<run_id>/record.json``.

    Returns the record (:meth:`Record.to_dict`), or None when ``stop_after`` (steps done in
    this call, for tests of kill/resume) stopped the run before the end. A run whose record
    exists is not retrained. A non-finite loss ends the run with status 'diverged' (test_loss
    null), not an exception. ``trackers`` ("tensorboard", "wandb": :mod:`depthwidth.models.trackers`)
    also get each log entry and the final losses. Raises UserError for bad data/config, or for a
    tracker whose package is missing (before anything is compiled).
    """
    with interrupts.sigterm_raises():  # SIGTERM stops a run as Ctrl-C does (interrupts module)
        return _train_run(cfg, results_dir, data_dir=data_dir, resume=resume, progress=progress,
                          stop_after=stop_after, trackers=trackers, verbose=verbose)


def _train_run(cfg: RunConfig, results_dir: str | Path, *, data_dir, resume: bool, progress: bool,
               stop_after: int | None, trackers: Sequence[str], verbose: bool) -> dict[str, Any] | None:
    hostcpu.pin_one_core()  # before jax's backend starts (module doc of hostcpu)
    trackers = tracking.require(trackers)
    cfg = pin_corpus(cfg)  # a corpus given as a path: its content is part of the run id
    store = storage.open_results(results_dir)
    rdir = store.run_dir(cfg.run_id())
    if store.record_path(cfg.run_id()).exists():
        return records.read_record(store.record_path(cfg.run_id()))
    main = jax.process_index() == 0
    if main and (note := storage.local_checkpoint_note(rdir)) and note not in _NOTED:
        _NOTED.add(note)  # once per process: a sweep trains many runs in one worker
        print(note, file=sys.stderr)
    prepared, rcfg = _open_data(cfg, store, data_dir, main)
    hostcpu.require_fixed_threads()
    engine = build_engine(rcfg, verbose=verbose)
    t = rcfg.train
    # a full disk in any write of the run (checkpoint, log, record) is one line: StorageFull
    with _out_of_space_is_one_line(rdir), _checkpoints(rdir, t) as ckpt:
        with interrupts.deferred():  # orbax's first import and restore: a Ctrl-C there broke the import
            state = _restore_or_init(engine, ckpt, resume=resume, verbose=verbose, run_id=cfg.run_id())
        start = int(state["step"])
        meter = _Meter.of(rcfg, engine.mesh.size)
        part = _PartialWindow(store, cfg.run_id(), main)
        with RunLogger(store, cfg.run_id(), start=start, total_steps=t.steps, main=main, progress=progress,
                       trackers=trackers, config=cfg.to_dict()) as logger:
            stop_at = t.steps if stop_after is None else min(t.steps, start + stop_after)
            # Ctrl-C/SIGTERM: finish the step, checkpoint it, then stop. Not over several processes:
            # a checkpoint is collective, and a signal reaches one host, not all (they stop as before)
            graceful = interrupts.graceful() if jax.process_count() == 1 else contextlib.nullcontext(interrupts.Stop())
            with graceful as stop:
                state, end = _train_loop(engine, state, prepared, ckpt, logger, meter, start=start, stop_at=stop_at,
                                         stop=stop, part=part)
            if stop.signum is not None:
                raise interrupts.Interrupted(stop.signum, f"{cfg.run_id()} stopped at step {end.step} of {t.steps} "
                                             f"and saved a checkpoint there: the same command resumes from step {end.step}")
            if end.status == "finished" and end.step < t.steps:
                return None  # stopped early on purpose (stop_after); the checkpoint holds the state
            final = _final_eval_or_stop(engine, state, prepared, end, cfg.run_id(), t.steps)
            logger.summary({"status": final.status, "test_loss": final.test_loss, "val_loss": final.val_loss})
    rec = _record(cfg, rcfg, engine, prepared, final, end, meter, start=start, prior_wall_s=logger.prior_wall_s)
    if main:
        with interrupts.deferred(), _out_of_space_is_one_line(rdir):
            records.write_record(results_dir, rec)
        store.remove(part.rel)  # a partial log window belongs to a checkpoint, and the run is over
        if not t.keep_weights:
            storage.drop_checkpoints(rdir)  # the record is the result; free the disk
    return rec.to_dict()


# ------------------------------------------------------------------------------ the steps

_NOTED: set[str] = set()  # storage.local_checkpoint_note lines this process has printed


def resolve_vocab(cfg: RunConfig, vocab_size: int) -> RunConfig:
    """Fill ``model.vocab_size`` from the data (0 = from data); error if it is set and smaller."""
    if cfg.model.vocab_size == 0:
        return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=vocab_size))
    if cfg.model.vocab_size < vocab_size:
        raise UserError(f"model.vocab_size={cfg.model.vocab_size} is smaller than the data's vocabulary ({vocab_size})")
    return cfg


def _open_data(cfg: RunConfig, store: storage.ResultsStore, data_dir: str | Path | None,
               main: bool) -> tuple[Prepared, RunConfig]:
    """Step 1: the prepared data, and the config with its vocabulary; ``config.json`` records both
    (the config as requested, whose id is the run id, and the resolved vocabulary)."""
    prepared = open_prepared(prepared_dir_for(cfg.data, data_dir))
    rcfg = resolve_vocab(cfg, prepared.vocab_size)
    _check_splits(prepared, rcfg.model.seq_len, cfg.data.corpus)
    if main:
        store.run_dir(cfg.run_id()).mkdir(parents=True, exist_ok=True)
        store.replace(f"{storage.RUNS}/{cfg.run_id()}/{storage.CONFIG}",
                      {"run_id": cfg.run_id(), "config": cfg.to_dict(), "vocab_size": rcfg.model.vocab_size})
    return prepared, rcfg


def _check_splits(prepared: Prepared, seq_len: int, corpus: str) -> None:
    """UserError when a split holds less than one sequence of ``seq_len`` + 1 tokens (what a
    batch and :func:`depthwidth.models.engine.evaluate` need): before anything is compiled or
    trained, not after the training it would have thrown away."""
    for name in ("train", "val", "test"):
        n = len(getattr(prepared, name))
        if n < seq_len + 1:
            raise UserError(f"the {name} split of {corpus} has {n} tokens, fewer than one sequence of "
                            f"{seq_len + 1} (model.seq_len + 1): use a longer corpus or a shorter model.seq_len")


@contextlib.contextmanager
def _checkpoints(rdir: Path, t):
    """The run's orbax CheckpointManager (latest ``keep_ckpts`` kept, synchronous), closed on exit;
    in :func:`depthwidth.storage.checkpoint_dir` (the run's ``ckpt/``, or a local mirror for URL
    schemes orbax cannot write)."""
    with interrupts.deferred():  # a Ctrl-C inside orbax's first import left it half-initialised
        import orbax.checkpoint as ocp

        _drop_late_loop_callbacks()
        ckpt = ocp.CheckpointManager(
            storage.checkpoint_dir(rdir),
            options=ocp.CheckpointManagerOptions(max_to_keep=t.keep_ckpts, save_interval_steps=t.ckpt_every,
                                                 enable_async_checkpointing=False, create=True))
    try:
        yield ckpt
    except BaseException:
        with contextlib.suppress(Exception), _orbax_quiet():  # the first error is the one to report
            ckpt.wait_until_finished()
            ckpt.close()
        raise
    ckpt.wait_until_finished()
    ckpt.close()


def _out_of_space(e: BaseException) -> bool:
    """Whether ``e`` (or an exception it came from) is a write that failed for lack of space:
    an OSError ENOSPC/EDQUOT/EFBIG, or tensorstore's RESOURCE_EXHAUSTED on writing a file."""
    return any((isinstance(x, OSError) and x.errno in NO_SPACE_ERRNOS) or "No space left" in str(x)
               or ("RESOURCE_EXHAUSTED" in str(x) and "writing" in str(x).lower()) for x in chain(e))


def _is_late_loop_callback(u) -> bool:
    return isinstance(u.exc_value, RuntimeError) and str(u.exc_value) == "Event loop is closed"


def _drop_late_loop_callbacks() -> None:
    """Process-wide, once: drop the "Event loop is closed" errors of tensorstore callbacks.

    When a checkpoint write fails (a full disk, a signal), orbax closes its asyncio loop while
    tensorstore futures are still pending; each one that completes later calls the closed loop's
    ``call_soon_threadsafe`` from a C++ thread, and Python prints that RuntimeError through
    ``sys.unraisablehook`` as a bare traceback (seen in CI after the one-line full-disk report).
    Nothing is waiting for those futures, so the error carries no information; every other
    unraisable exception still reaches the previous hook."""
    prev = sys.unraisablehook
    if getattr(prev, "_depthwidth", False):
        return

    def hook(u):
        if not _is_late_loop_callback(u):
            prev(u)

    hook._depthwidth = True
    sys.unraisablehook = hook


@contextlib.contextmanager
def _orbax_quiet():
    """Mute absl's ERROR log lines (orbax's worker threads log each failure with a traceback)
    for the block; the exception the block raises still says what went wrong."""
    log = logging.getLogger("absl")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _out_of_space_is_one_line(rdir: Path):
    """A write that fails for lack of space becomes :class:`StorageFull` (one line, exit 1);
    half-written checkpoint steps (orbax's ``*.orbax-checkpoint-tmp``) are removed to give the
    space back. Other errors pass through unchanged."""
    try:
        yield
    except Exception as e:
        if not _out_of_space(e):
            raise
        # orbax's worker threads (absl) and its unretrieved futures (asyncio, when they are
        # garbage-collected, even at exit) still log their copies of the failure after we unwind:
        # the one line below is the report, so both stay muted for the rest of this process
        for name in ("absl", "asyncio"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        ckdir = storage.checkpoint_dir(rdir)
        for tmp in ([] if storage.is_url(ckdir) else Path(ckdir).glob("*.orbax-checkpoint-tmp*")):
            shutil.rmtree(tmp, ignore_errors=True)
        raise StorageFull(f"out of disk space writing {rdir} ({type(e).__name__}); free some space and rerun: "
                          "finished records are intact and the run resumes from its last complete checkpoint") from None


def _save_checkpoint(ckpt, step: int, state) -> None:
    """Save ``state`` at ``step``; a kill signal waits for the save to complete (interrupts.deferred)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import orbax.checkpoint as ocp

    with interrupts.deferred(), _orbax_quiet():  # a full disk: _train_run's _out_of_space_is_one_line
        ckpt.save(step, args=ocp.args.StandardSave(state), force=True)


def _restore_or_init(engine: Engine, ckpt, *, resume: bool, verbose: bool, run_id: str):
    """Step 3: the state of the last readable checkpoint (into the engine's sharded target), or
    a fresh one. A checkpoint that cannot be restored (truncated by a kill or a full disk) is
    deleted, said in one line on stderr, and the next older one tried: the batch at a step is a
    pure function of (seed, step), so resuming from an older step is as exact."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import orbax.checkpoint as ocp

    if resume:
        _say_incomplete(ckpt, run_id)
    for step in sorted(ckpt.all_steps(), reverse=True) if resume else ():
        try:
            state = ckpt.restore(step, args=ocp.args.StandardRestore(engine.abstract_state))
        except Exception as e:  # orbax and tensorstore raise many types for a damaged checkpoint
            print(f"{run_id}: checkpoint at step {step} is unreadable ({type(e).__name__}); deleted it and "
                  "trying an older one", file=sys.stderr)
            with contextlib.suppress(Exception):
                ckpt.delete(step)
            continue
        if verbose:
            print(f"resumed {run_id} from step {step}", file=sys.stderr)
        return state
    return engine.init_fn(engine.cfg.train.seed)


def _say_incomplete(ckpt, run_id: str) -> None:
    """One line on stderr per checkpoint step that was begun but never committed (a kill during
    its write: on a local disk orbax's ``N.orbax-checkpoint-tmp-*`` folder, on gs:// a step
    folder without its ``commit_success.txt``): orbax skips it silently, and a run whose only
    checkpoint it was would start again from step 0 without a word (issue 25)."""
    done = set(ckpt.all_steps())
    try:
        names = [q.name for q in storage.path(str(ckpt.directory)).iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return
    begun = {int(n.split(".")[0]) for n in names if n.split(".")[0].isdigit()}
    for step in sorted(begun - done, reverse=True):
        older = max((s for s in done if s < step), default=None)
        then = f"resuming from step {older}" if older is not None else "starting from step 0"
        print(f"{run_id}: the checkpoint at step {step} was never completed (stopped while it was being "
              f"written); ignored it, {then}", file=sys.stderr)


@dataclass(frozen=True)
class _Meter:
    """What a log window's numbers are computed with: tokens per step, training FLOPs per token
    (6N + 6Vd + 6LTd, the causal MaxText convention, theory.compute), the measured peak FLOP/s
    of one device, the devices that train (the mesh's), and the lr schedule (built once, for
    the log only)."""

    tokens_per_step: int
    flops_per_token: int
    peak: float
    lr_at: optax.Schedule
    n_devices: int = 1

    def mfu(self, tokens_per_s: float) -> float:
        return perf.mfu(tokens_per_s, self.flops_per_token, self.peak, self.n_devices)

    @classmethod
    def of(cls, cfg: RunConfig, n_devices: int = 1) -> _Meter:
        m, t = cfg.model, cfg.train
        fpt = int(compute.train_flops_per_token(m.n_layer, m.d_model, m.seq_len, vocab_size=m.vocab_size,
                                                d_ff=m.ff_width))
        return cls(t.batch_size * m.seq_len, fpt, perf.measured_peak_flops(t.compute_dtype),
                   learning_rate_schedule(t.steps, t.warmup_steps, t.lr), n_devices)


class RunLogger:
    """Where a run's progress goes, from the main process only: ``log.jsonl`` (one JSON line per
    log window; on resume the lines up to the restored step are kept and the rest dropped),
    the trackers (:mod:`depthwidth.models.trackers`: TensorBoard, W&B; optional; on resume
    they are given the kept lines again, so that a kill loses none of their steps) and a tqdm
    bar (optional).

    ``prior_wall_s`` is the training time logged before the restored step (seconds) and
    ``prior_loss`` the last kept window's mean loss (nats/token; NaN with none). For a run
    directory on a URL the log is rewritten whole at each window (object stores cannot append)
    and the trackers write to its local mirror (:func:`depthwidth.storage.scratch_dir`).
    ``store``: the results directory (:func:`depthwidth.storage.open_results`).
    """

    def __init__(self, store: storage.ResultsStore, run_id: str, *, start: int, total_steps: int, main: bool,
                 progress: bool, trackers: Sequence[str] = (), config: dict[str, Any] | None = None):
        rdir = store.run_dir(run_id)
        path = rdir / storage.LOG
        kept = _read_log(path, start) if start > 0 else []
        self.prior_wall_s = kept[-1].get("wall_s", 0.0) if kept else 0.0
        # a run stopped in its last step resumes with no step left: its train loss is the logged one
        self.prior_loss = float(kept[-1].get("loss", math.nan)) if kept else math.nan
        self._fh = self._bar = None
        self._track = tracking.Trackers((), rdir, run_id, {})
        self._last_val: float | None = None
        if not main:
            return
        text = "".join(json.dumps(e) + "\n" for e in kept)
        self._fh = store.open_log(f"{storage.RUNS}/{run_id}/{storage.LOG}", text)
        local = storage.scratch_dir(rdir)
        if trackers and store.is_url:
            local.mkdir(parents=True, exist_ok=True)
        self._track = tracking.Trackers(trackers, local, run_id, config or {}, history=kept)
        if progress:
            # optional dependency: tqdm loaded only where used
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start, desc=run_id, unit="step", file=sys.stderr,
                             dynamic_ncols=True)

    def log(self, entry: dict[str, Any]) -> None:
        """Write one log window's entry (step, loss, lr, grad_norm, tokens_per_s, mfu, wall_s[, val_loss])."""
        self._last_val = entry.get("val_loss", self._last_val)
        if self._fh:
            self._fh.write(json.dumps(entry, allow_nan=True) + "\n")
            self._fh.flush()
        self._track.log(entry)
        if self._bar:
            self._bar.update(entry["step"] - self._bar.n)
            self._bar.set_postfix(loss=f"{entry['loss']:.4f}", tok_s=f"{entry['tokens_per_s']:,.0f}",
                                  **({"val": f"{self._last_val:.4f}"} if self._last_val is not None else {}))

    def summary(self, final: dict[str, Any]) -> None:
        """The run's final metrics, for the trackers (the record holds them for everything else)."""
        self._track.summary(final)

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, *exc) -> None:
        for sink in (self._bar, self._fh, self._track):
            if sink:
                sink.close()


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


@dataclass
class _LoopEnd:
    """Where the loop stopped: status ("finished" | "diverged"), the step reached, the last log
    window's mean loss, and the training time of this call (seconds, no eval or checkpoint I/O)."""

    status: str
    step: int
    last_loss: float = math.nan
    train_wall: float = 0.0


def _train_loop(engine: Engine, state, prepared: Prepared, ckpt, logger: RunLogger, meter: _Meter, *,
                start: int, stop_at: int, stop: interrupts.Stop | None = None,
                part: _PartialWindow | None = None):
    """Step 4: train from ``start`` to ``stop_at``; returns (state, :class:`_LoopEnd`).

    A log window ends every ``log_every`` steps, at each checkpoint, at ``stop_at`` and at an
    ``eval_every`` step; a non-finite loss in it ends the run as diverged. When ``stop`` has
    caught a signal (:func:`depthwidth.interrupts.graceful`), the loop ends after the step in
    progress, with a checkpoint at that step and the open log window's steps saved beside it
    (``part``: :class:`_PartialWindow`), so the resumed run logs the same windows, bit for bit.
    """

    t, T = engine.cfg.train, engine.cfg.model.seq_len
    end = _LoopEnd(status="finished", step=start, last_loss=logger.prior_loss)
    pending, took = part.resume(start) if part else ([], 0.0)
    window_t0 = time.perf_counter() - took  # a window cut by a stop goes on from where it was
    while end.step < stop_at:
        x, y = get_batch(prepared.train, t.seed, end.step, t.batch_size, T)
        state, metrics = engine.train_step(state, sh.global_batch(x, engine.batch_sharding),
                                           sh.global_batch(y, engine.batch_sharding))
        end.step += 1
        step = end.step
        pending.append(metrics)
        at_eval = bool(t.eval_every) and step % t.eval_every == 0 and step < t.steps
        if step % t.log_every == 0 or step % t.ckpt_every == 0 or step == stop_at or at_eval:
            got = jax.device_get(pending)
            entry = _close_window(end, got, time.perf_counter() - window_t0, meter, logger.prior_wall_s)
            pending = []
            if at_eval and end.status == "finished":
                entry["val_loss"], _ = evaluate(engine, state["params"], prepared.val, t.eval_batches * t.batch_size)
            logger.log(entry)
            if end.status == "diverged":
                break
            window_t0 = time.perf_counter()
        if step % t.ckpt_every == 0 or step == stop_at:
            _save_checkpoint(ckpt, step, state)
            window_t0 = time.perf_counter()  # checkpoint I/O is not training time
        elif stop is not None and stop.signum is not None:
            took = time.perf_counter() - window_t0
            if part:
                part.save(step, jax.device_get(pending), took)  # before the checkpoint that it completes
            _save_checkpoint(ckpt, step, state)
        if stop is not None and stop.signum is not None:
            break
    return state, end


class _PartialWindow:
    """The steps of a log window that a stop cut (``window.json`` in the run directory: the
    step of the checkpoint they belong to, each step's loss and grad_norm, and the window's
    training seconds so far), so the resumed run closes that window with the same mean loss
    as an uninterrupted one. Used only when the restored step is the one it names."""

    def __init__(self, store: storage.ResultsStore, run_id: str, main: bool):
        self.store, self.main = store, main
        self.rel = f"{storage.RUNS}/{run_id}/window.json"

    def save(self, step: int, got: list[dict], took: float) -> None:
        if self.main:
            with interrupts.deferred():
                self.store.replace(self.rel, {"step": step, "train_s": took,
                                              "metrics": [{k: float(v) for k, v in g.items()} for g in got]})

    def resume(self, start: int) -> tuple[list[dict], float]:
        """The cut window's per-step metrics and seconds, if the run resumes at its step."""
        got = self.store.read_json(self.rel) if start > 0 else None
        if not isinstance(got, dict) or got.get("step") != start:
            return [], 0.0
        # float(a float32) is exact and JSON round-trips it: _close_window's sums are the same
        return [{k: float(v) for k, v in g.items()} for g in got["metrics"]], float(got["train_s"])


def _close_window(end: _LoopEnd, got: list[dict], dt: float, meter: _Meter, prior_wall_s: float) -> dict[str, Any]:
    """Account a finished log window of ``len(got)`` steps that took ``dt`` seconds; its log entry."""
    end.train_wall += dt
    losses = [float(g["loss"]) for g in got]
    end.last_loss = float(np.mean(losses))
    if not all(math.isfinite(v) for v in losses):
        end.status = "diverged"
    tok_s = len(got) * meter.tokens_per_step / dt
    return {"step": end.step, "loss": end.last_loss, "lr": float(meter.lr_at(end.step - 1)),
            "grad_norm": float(got[-1]["grad_norm"]), "tokens_per_s": tok_s,
            "mfu": meter.mfu(tok_s), "wall_s": prior_wall_s + end.train_wall}


@dataclass(frozen=True)
class _FinalEval:
    status: str
    val_loss: float | None = None
    test_loss: float | None = None
    test_sequences: int = 0
    test_loss_chunks: list[float] | None = None
    diverged_reason: str | None = None


def _final_eval(engine: Engine, params, prepared: Prepared, status: str) -> _FinalEval:
    """Step 5a: validation and test loss of a run that did not diverge; the test loss also per
    chunk (:data:`EVAL_CHUNKS`). A loss that is non-finite or far above ln V makes the run
    diverged (:func:`depthwidth.records.diverged_reason`)."""
    if status != "finished":
        return _FinalEval(status, diverged_reason="non-finite training loss")
    t = engine.cfg.train
    val_loss, _ = evaluate(engine, params, prepared.val, t.eval_batches * t.batch_size)
    test_loss, n_test, chunks = evaluate(engine, params, prepared.test, t.test_sequences, chunks=EVAL_CHUNKS)
    V = engine.cfg.model.vocab_size
    why = records.diverged_reason(val_loss, V, "val loss") or records.diverged_reason(test_loss, V, "test loss")
    if why:
        return _FinalEval("diverged", test_sequences=n_test, diverged_reason=why)
    return _FinalEval("finished", val_loss, test_loss, n_test, chunks)


def _final_eval_or_stop(engine: Engine, state, prepared: Prepared, end: _LoopEnd, run_id: str, steps: int) -> _FinalEval:
    """:func:`_final_eval`, where a Ctrl-C or SIGTERM stops the run as one in its last step does:
    the checkpoint of that step is on disk (the loop saves at its last step), so the message
    says where the rerun resumes (its evaluation is redone, the result is the same)."""
    try:
        return _final_eval(engine, state["params"], prepared, end.status)
    except KeyboardInterrupt as e:
        if end.status != "finished" or isinstance(e, interrupts.Interrupted):
            raise
        raise interrupts.Interrupted(interrupts.exit_code(e) - 128,
                                     f"{run_id} stopped at step {end.step} of {steps} in its final evaluation, with "
                                     f"a checkpoint there: the same command resumes from step {end.step}") from None


def _record(cfg: RunConfig, rcfg: RunConfig, engine: Engine, prepared: Prepared, ev: _FinalEval,
            end: _LoopEnd, meter: _Meter, *, start: int, prior_wall_s: float) -> records.Record:
    """Step 5b: the run's record. ``config`` is the config the id was derived from
    (model.vocab_size 0 = taken from the data); the resolved vocabulary is ``vocab_size``."""
    m, t = rcfg.model, rcfg.train
    tok_s = (end.step - start) * meter.tokens_per_step / end.train_wall if end.train_wall > 0 else None
    mfu = meter.mfu(tok_s) if tok_s else None
    extra = {"diverged_reason": ev.diverged_reason} if ev.status == "diverged" else {}
    if perf.mfu_warning(mfu):
        extra["mfu_warning"] = perf.mfu_warning(mfu)
    if jax.process_count() > 1:
        extra["processes"] = jax.process_count()
    return records.Record(
        run_id=cfg.run_id(), status=ev.status, config=cfg.to_dict(),
        n_layer=m.n_layer, d_model=m.d_model, n_head=m.n_head, vocab_size=m.vocab_size, seq_len=m.seq_len,
        seed=t.seed, params=records.params_of(m.n_layer, m.d_model, n_head=m.n_head, vocab_size=m.vocab_size,
                                              seq_len=m.seq_len, tied_head=m.tied_head, d_ff=m.ff_width),
        tokens=end.step * meter.tokens_per_step, steps=end.step,
        train_loss=end.last_loss if math.isfinite(end.last_loss) else None,
        val_loss=ev.val_loss, test_loss=ev.test_loss, test_sequences=ev.test_sequences,
        test_loss_chunks=ev.test_loss_chunks, wall_s=prior_wall_s + end.train_wall, compile_s=engine.compile_s,
        tokens_per_s=tok_s, mfu=mfu, flops_per_token=meter.flops_per_token, mfu_convention=MFU_CONVENTION,
        peak_flops_per_s=meter.peak, mfu_devices=meter.n_devices,
        git_rev=records.code_revision(), versions=_versions(), device=f"{jax.devices()[0].platform} x{jax.device_count()}",
        host=hostcpu.host_info(), data=meta_for_record(prepared.meta),
        finished_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        extra=extra)


def provenance() -> dict[str, Any]:
    """``git_rev``, ``versions`` and ``host`` as a training record stores them, for the records of
    other experiment kinds (:mod:`depthwidth.experiments.kinds`)."""
    return {"git_rev": records.code_revision(), "versions": _versions(), "host": hostcpu.host_info()}


def _versions() -> dict[str, str]:
    """Library versions, this package's first: from a pip install (no git) it is what says
    which code made the record (the installed distribution's version, else ``__version__``)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import orbax.checkpoint


    try:
        own = importlib.metadata.version("depthwidth")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        own = depthwidth.__version__
    out = {"depthwidth": own, "jax": jax.__version__, "flax": flax.__version__, "optax": optax.__version__,
           "orbax": orbax.checkpoint.__version__, "numpy": np.__version__, "python": platform.python_version()}
    # the compiled kernels (jaxlib), the BPE (tokenizers) and scipy also decide a record's numbers
    for dist in ("jaxlib", "scipy", "tokenizers"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    lock = records.lock_hash()
    if lock:
        out["uv.lock"] = lock
    return out


# ------------------------------------------------------------------------------ reloading


def load_run(run_dir: str | Path):
    """The config and the trained model of a finished run whose weights were kept
    (``train.keep_weights = true``): ``(RunConfig, depthwidth.models.model.LM)``.

    The config is the recorded one with ``model.vocab_size`` resolved from the data (so its
    run id is not the record's, which is the id of the config as requested). The model is an
    nnx LM holding the parameters of the run's last checkpoint (the final step) in float32
    on one device; call it as the engine does, ``model(x, compute_dtype=...)`` with the
    config's ``train.compute_dtype``. For later experiments on a trained model (layer
    deletion, export with :func:`depthwidth.models.gpt2.to_hf_state_dict`).

    Raises UserError when ``run_dir`` has no record, the run is not a finished training run,
    or its weights were not kept.
    """
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import orbax.checkpoint as ocp

    rdir = storage.path(run_dir)
    rec = records.read_record(rdir / "record.json")
    if records.kind_of(rec) != records.TRAIN or rec["status"] != "finished":
        raise UserError(f"{rdir}: not a finished training run (kind {records.kind_of(rec)!r}, status {rec['status']!r})")
    cfg = resolve_vocab(from_dict(rec["config"]), int(rec["vocab_size"]))
    ckdir = storage.checkpoint_dir(rdir)
    if not storage.path(ckdir).is_dir():
        raise UserError(f"{run_dir}: its weights were not kept; train it with --set train.keep_weights=true")
    layout = state_layout(cfg, sh.make_mesh(MeshConfig(data=1, model=1)))
    mngr = ocp.CheckpointManager(ckdir, options=ocp.CheckpointManagerOptions(create=False))
    try:
        step = mngr.latest_step()
        if step != rec["steps"]:
            raise UserError(f"{rdir}: the last checkpoint is at step {step}, the record at step {rec['steps']}")
        state = mngr.restore(step, args=ocp.args.StandardRestore(layout.abstract))
    finally:
        mngr.close()
    return cfg, nnx.merge(layout.graphdef, state["params"])
