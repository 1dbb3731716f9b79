"""The sweep runner: train every run of a preset once, across restarts and several workers.

``depthwidth sweep --preset P --results DIR [--worker I --num-workers N]`` calls
:func:`run_sweep` (through the :class:`~depthwidth.experiments.executors.InProcess` executor;
``--jobs`` is :func:`run_local_jobs`, and the Ray executors use the public pieces here too:
:func:`plan`, :class:`SweepProgress`, :class:`LazyTrainFn`, :func:`heartbeat_period`).
For each run of the preset (ARCHITECTURE.md):

* a run whose ``record.json`` exists is skipped without loading anything;
* otherwise the worker claims it (:mod:`depthwidth.experiments.claims`: one claim file per run,
  a heartbeat thread while it trains, stale claims of dead workers taken over) and calls
  :func:`depthwidth.models.train.train_run`, which resumes from the run's last orbax checkpoint
  and writes the record atomically (status "finished" or "diverged");
* the claim is released when the run ends, fails, or the worker is stopped (Ctrl-C, SIGTERM).

Worker I of N first takes the runs at positions I, I+N, I+2N, ... of the preset's run order,
then (unless ``steal=False``) any other run nobody holds, so a fast worker helps a slow one and
a dead worker's runs are picked up once its claims go stale.

Layout: a one-corpus preset writes ``DIR/runs/<run_id>/``; a preset over several corpora
writes ``DIR/<corpus>/runs/<run_id>/``, because a results table (and a fit) holds one corpus.
``DIR`` is a local or mounted directory, or an fsspec URL (``gs://bucket/dir``;
:mod:`depthwidth.storage` says where checkpoints go then).

Progress: train_run's per-run bar, and after every run one line with runs done/total and an ETA
(:func:`eta_seconds`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from depthwidth import interrupts, storage
from depthwidth.config import RunConfig, from_dict
from depthwidth.data import corpora
from depthwidth.errors import UserError
from depthwidth.experiments import claims
from depthwidth.experiments.presets import Preset

DEFAULT_STALE_AFTER_S = 600.0


@dataclass(frozen=True)
class Job:
    """One run of a sweep: its config, the results directory its record goes to, its corpus."""

    cfg: RunConfig
    results: str
    corpus: str

    @property
    def run_id(self) -> str:
        return self.cfg.run_id()


def _safe(name: str) -> str:
    """A corpus name or path as one directory name (``/data/web.txt`` -> ``web``)."""
    stem = Path(name.rstrip("/")).name
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", stem) or "corpus"


def group_dirs(preset: Preset, results: str | Path) -> dict[str, str]:
    """corpus -> results directory of its runs (module doc: one corpus = DIR itself)."""
    if len(preset.corpora) == 1:
        return {preset.corpora[0]: str(results)}
    names = [_safe(c) for c in preset.corpora]
    if len(set(names)) != len(names):
        raise UserError(f"preset {preset.name}: corpora {list(preset.corpora)} map to the same directory names")
    return {c: str(storage.path(results) / n) for c, n in zip(preset.corpora, names)}


def plan(preset: Preset, results: str | Path) -> list[Job]:
    """Every run of ``preset`` with its results directory, in the preset's run order; a corpus
    given as a path is pinned to its content (:func:`depthwidth.data.prepare.pin_corpus`), so
    the run ids that claims and finished records go by change when the file does."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.data.prepare import pin_corpus

    dirs = group_dirs(preset, results)
    return [Job(pin_corpus(cfg), dirs[cfg.data.corpus], cfg.data.corpus) for cfg in preset.runs]


def order_for_worker(jobs: list[Job], worker: int, num_workers: int, steal: bool = True) -> list[Job]:
    """Worker ``worker``'s own runs (positions worker, worker+N, ...) then, if ``steal``, the rest."""
    if num_workers < 1 or not 0 <= worker < num_workers:
        raise UserError(f"--worker must be in 0..{num_workers - 1} (--num-workers {num_workers}), got {worker}")
    own = [j for i, j in enumerate(jobs) if i % num_workers == worker]
    rest = [j for i, j in enumerate(jobs) if i % num_workers != worker]
    return own + rest if steal else own


def _flops_per_token(cfg: RunConfig, vocab_size: int) -> float:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory.compute import train_flops_per_token

    m = cfg.model
    return float(train_flops_per_token(m.n_layer, m.d_model, m.seq_len, vocab_size=vocab_size, d_ff=m.ff_width))


def run_cost(cfg: RunConfig, vocab_size: int = 0) -> float:
    """Training FLOPs of a run: steps · B · T · train_flops_per_token (theory.compute, causal
    convention: 6N + 6Vd + 6LTd per token; docs/concepts.md)."""
    t = cfg.train
    return t.steps * t.batch_size * cfg.model.seq_len * _flops_per_token(cfg, vocab_size or cfg.model.vocab_size)


def eta_seconds(done: list[dict[str, Any]], remaining: list[RunConfig], num_workers: int = 1,
                overhead_s: float | None = None) -> float | None:
    """Estimated seconds until ``remaining`` runs are trained by ``num_workers`` workers.

    Model: a run costs a fixed overhead plus its training FLOPs (:func:`run_cost`) at the speed
    the finished runs achieved: the median over them of wall_s / FLOPs (``wall_s`` is a record's
    training time, compilation excluded). Runs of very different size thus get very different
    times, which a plain mean of wall times would not; the median keeps one run that was starved
    of CPU (a record of an hour for two minutes' work) from multiplying the estimate. The overhead
    is ``overhead_s`` when given (the runner passes the median measured time per run outside
    training: compile, data, evaluation, checkpoints), else the median ``compile_s`` of the
    finished runs. Remaining runs take their vocabulary size from a finished run on the same
    corpus and tokenizer (0 if none). None when no finished record has a wall time.
    """
    timed = [r for r in done if isinstance(r.get("wall_s"), (int, float)) and r.get("config")]
    if not remaining:
        return 0.0
    if not timed:
        return None
    rates, overheads = [], []
    vocab: dict[tuple[str, str], int] = {}
    for r in timed:
        cfg = from_dict(r["config"])
        V = int(r.get("vocab_size") or cfg.model.vocab_size or 0)
        vocab[(cfg.data.corpus, cfg.data.tokenizer)] = V
        # a diverged run stops early: its cost is the steps it actually took
        steps = int(r.get("steps") or cfg.train.steps)
        work = steps * cfg.train.batch_size * cfg.model.seq_len * _flops_per_token(cfg, V)
        if work > 0:
            rates.append(float(r["wall_s"]) / work)
        overheads.append(float(r.get("compile_s") or 0.0))
    overhead = overhead_s if overhead_s is not None else statistics.median(overheads)
    rate = statistics.median(rates) if rates else 0.0
    total = sum(overhead + rate * run_cost(c, vocab.get((c.data.corpus, c.data.tokenizer), 0)) for c in remaining)
    return total / max(1, num_workers)


def fmt_duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``12s``; '?' when unknown."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def compile_cache_dir() -> Path:
    """Where the runner keeps JAX's persistent compilation cache: ``<cache>/jax`` next to the
    prepared corpora (``$DEPTHWIDTH_CACHE`` or ``~/.cache/depthwidth``)."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.data.prepare import cache_root

    return cache_root().parent / "jax"


def enable_compile_cache(path: str | Path | None) -> None:
    """Turn on JAX's persistent compilation cache at ``path`` (None: leave JAX as it is).

    The runs of one shape differ only in their seed, which the compiled train step does not
    depend on (dropout off), so every seed after the first loads the step from this cache
    instead of compiling it again: on a CPU, compilation is most of a small run's time.
    """
    if path is None:
        return
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    Path(path).mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


@dataclass
class SweepReport:
    """What one worker's sweep did. Counts are over the whole preset (all workers' records).

    total: runs in the preset; done_before: records present when this worker started;
    finished / diverged: records by status at the end; trained: run ids this command trained (all its --jobs);
    failed: [{run_id, error}] runs whose training raised (claim released, retried next sweep);
    busy: [{run_id, why}] runs held by other live workers when this one stopped looking;
    remaining: runs without a record at the end; wall_s: this worker's wall time (seconds).
    """

    preset: str
    results: str
    groups: dict[str, str]
    worker: int
    num_workers: int
    total: int
    done_before: int = 0
    finished: int = 0
    diverged: int = 0
    trained: list[str] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    busy: list[dict[str, str]] = field(default_factory=list)
    remaining: int = 0
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def complete(self) -> bool:
        return self.remaining == 0


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_sweep(preset: Preset, results: str | Path, *, worker: int = 0, num_workers: int = 1,
              data_dir: str | Path | None = None, stale_after_s: float = DEFAULT_STALE_AFTER_S,
              heartbeat_s: float | None = None, settle_s: float = 1.0, steal: bool = True,
              progress: bool = True, verbose: bool = True, compile_cache: str | Path | None | bool = True,
              trackers: tuple[str, ...] = (),
              train_fn: Callable[..., dict[str, Any] | None] | None = None,
              log: Callable[[str], None] = _stderr) -> SweepReport:
    """Train every run of ``preset`` that has no record under ``results`` (module docstring).

    Args:
        preset: a loaded :class:`~depthwidth.experiments.presets.Preset`.
        results: results directory: a local or mounted path, or an fsspec URL
            (:mod:`depthwidth.storage`; records, logs and claims through fsspec).
        worker, num_workers: this worker's index I in 0..N-1 and the number of workers N.
        data_dir: corpora directory passed to the engine (default ``$DEPTHWIDTH_DATA``).
        stale_after_s: a claim whose heartbeat is older than this (seconds) is taken over.
        heartbeat_s: heartbeat period (seconds); default stale_after_s / 10.
        settle_s: wait (seconds) before re-reading a claim made by takeover or without hard links.
        steal: after its own runs, also take runs assigned to other workers that nobody holds.
        progress, verbose: the engine's per-run progress bar and messages.
        trackers: where each run's log is also copied ("tensorboard", "wandb";
            :mod:`depthwidth.models.trackers`), passed to the training function when not empty.
        compile_cache: True = JAX persistent compilation cache in :func:`compile_cache_dir`,
            a path = there, False/None = off. Only used with the real engine.
        train_fn: the training function (default :func:`depthwidth.models.train.train_run`).
        log: where progress lines go (default stderr).

    Returns a :class:`SweepReport`. Raises UserError for bad arguments or a UserError from the
    engine (bad data or config: every other run would fail the same way); KeyboardInterrupt on
    Ctrl-C or SIGTERM, after releasing the claim. Any other exception from one run is reported
    in ``failed`` and the sweep goes on.
    """
    hb = heartbeat_period(stale_after_s, heartbeat_s)
    if num_workers > 1:
        storage.require_shared(results, f"--num-workers {num_workers}")
    jobs = plan(preset, results)
    order = order_for_worker(jobs, worker, num_workers, steal)
    sweep = SweepProgress(preset, results, jobs, worker=worker, num_workers=num_workers, log=log)
    if train_fn is None:  # a missing corpus fails here, in one line, before any run directory is made
        corpora.require({j.corpus for j in sweep.left()}, data_dir)
    sweep.announce()
    engine = LazyTrainFn(train_fn, compile_cache)
    train_kw = {"data_dir": data_dir, "resume": True, "progress": progress, "verbose": verbose}
    if trackers:  # only then: a test's stand-in train_fn need not know the keyword
        train_kw["trackers"] = tuple(trackers)
    with interrupts.sigterm_raises():  # so every claim is released on the way out
        for job in order:
            interrupts.check()  # a Ctrl-C that a library swallowed during the last run stops here
            sweep.run(job, engine, stale_after_s=stale_after_s, settle_s=settle_s, heartbeat_s=hb, train_kw=train_kw)
    return sweep.finish()


def heartbeat_period(stale_after_s: float, heartbeat_s: float | None) -> float:
    """The heartbeat period (seconds) of a claim: ``heartbeat_s``, default stale_after_s / 10.

    Shared by every executor (:mod:`depthwidth.experiments.executors`). Raises UserError unless
    ``stale_after_s`` > 0 and the period lies in (0, stale_after_s), so a live worker's claim is
    never taken for a dead one's.
    """
    if not stale_after_s > 0:
        raise UserError(f"--stale-after must be > 0 seconds, got {stale_after_s}")
    hb = heartbeat_s if heartbeat_s is not None else stale_after_s / 10.0
    if not 0 < hb < stale_after_s:
        raise UserError(f"heartbeat period must be in (0, stale_after={stale_after_s:g}) seconds, got {hb:g}")
    return hb


class LazyTrainFn:
    """The function that trains one run (``fn(cfg, results, **train_kw) -> record | None``),
    loaded when a run first needs training, so a finished sweep never imports jax.

    ``train_fn`` None means :func:`depthwidth.models.train.train_run`, which also gets JAX's
    persistent compilation cache (``compile_cache``: True = :func:`compile_cache_dir`, a path =
    there, False/None = off). Not the compiled model engine (:mod:`depthwidth.models.engine`):
    this only decides which training function a sweep calls.
    """

    def __init__(self, train_fn: Callable[..., dict[str, Any] | None] | None, compile_cache: str | Path | None | bool):
        self._fn, self._cache = train_fn, compile_cache

    def get(self) -> Callable[..., dict[str, Any] | None]:
        """The training function (imports jax the first time, for the default one)."""
        if self._fn is None:
            # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
            from depthwidth.models.train import train_run

            enable_compile_cache(compile_cache_dir() if self._cache is True else (self._cache or None))
            self._fn = train_run
        return self._fn


def _counts(recs: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """(finished, diverged) among records."""
    statuses = [r.get("status") for r in recs]
    return statuses.count("finished"), statuses.count("diverged")


class SweepProgress:
    """One driver's bookkeeping of a sweep, whichever executor trains the runs: the records seen
    so far (its own and other workers'), the runs other workers hold, the report, the ETA and the
    progress lines (``log``).

    Attributes an executor reads: ``jobs`` (the plan), ``done`` ({run_id: record}), ``report``
    (the :class:`SweepReport` being filled), ``tag`` (the prefix of every progress line:
    ``[sweep NAME]``, ``[sweep NAME wI/N]`` for a worker of several, ``[sweep NAME LABEL]`` with
    ``label``). It changes them only through the ``add_*`` methods.
    """

    def __init__(self, preset: Preset, results: str | Path, jobs: list[Job], *, worker: int = 0, num_workers: int = 1,
                 log: Callable[[str], None] = _stderr, label: str = ""):
        self.jobs, self.log, self.t0 = jobs, log, time.perf_counter()
        self.stores = {d: storage.open_results(d) for d in {j.results for j in jobs}}
        self.done: dict[str, dict[str, Any]] = {}
        self._busy: dict[str, str] = {}
        self._overheads: list[float] = []  # per run trained here: elapsed seconds minus the record's wall_s
        self.report = SweepReport(preset=preset.name, results=str(results), groups=group_dirs(preset, results),
                                  worker=worker, num_workers=num_workers, total=len(jobs))
        self.refresh()
        self.report.done_before = len(self.done)
        self.tag = (f"[sweep {preset.name}" + (f" {label}" if label else "")
                    + (f" w{worker}/{num_workers}]" if num_workers > 1 else "]"))
        self._results = results

    def announce(self) -> None:
        """The sweep's first progress line: how many runs, how many done, where."""
        self.log(f"{self.tag} {len(self.jobs)} runs, {self.report.done_before} already done, results in {self._results}")

    def record_of(self, job: Job) -> dict[str, Any] | None:
        """``job``'s record (read once, then remembered), or None while it has none."""
        if job.run_id not in self.done:
            rec = self.stores[job.results].read_json(f"runs/{job.run_id}/record.json")
            if not isinstance(rec, dict):
                return None
            self.done[job.run_id] = rec
        return self.done[job.run_id]

    def refresh(self) -> None:
        """Read the records that appeared since (other workers finish runs too)."""
        for j in self.jobs:
            self.record_of(j)

    def left(self) -> list[Job]:
        """The jobs without a record, after :meth:`refresh`."""
        self.refresh()
        return [j for j in self.jobs if j.run_id not in self.done]

    def add_record(self, job: Job, rec: dict[str, Any]) -> None:
        """``job`` has a record that this driver did not train (another worker wrote it)."""
        self.done[job.run_id] = rec

    def add_trained(self, job: Job, rec: dict[str, Any], elapsed_s: float) -> None:
        """``job`` was trained for this sweep in ``elapsed_s`` seconds (compile and I/O included):
        counted, its overhead beyond the record's ``wall_s`` kept for the ETA, a divergence said."""
        self.done[job.run_id] = rec
        self.report.trained.append(job.run_id)
        if isinstance(rec.get("wall_s"), (int, float)):
            self._overheads.append(max(0.0, elapsed_s - rec["wall_s"]))
        if rec.get("status") == "diverged":
            self.log(f"{self.tag} {job.run_id} diverged (recorded)")

    def add_failed(self, job: Job, error: str) -> None:
        """``job``'s training raised ``error`` (one line); the run is retried by the next sweep."""
        self.report.failed.append({"run_id": job.run_id, "error": error})

    def add_busy(self, job: Job, why: str | None) -> None:
        """Another live worker holds ``job`` (``why``); None: this driver holds it now."""
        if why is None:
            self._busy.pop(job.run_id, None)
        else:
            self._busy[job.run_id] = why

    def eta(self, slots: int, left: list[Job] | None = None) -> float | None:
        """Seconds until the runs ``left`` (default :meth:`left`) are trained by ``slots`` parallel
        workers (:func:`eta_seconds`, with the median overhead per run measured here)."""
        left = self.left() if left is None else left
        return eta_seconds(list(self.done.values()), [j.cfg for j in left], slots,
                           statistics.median(self._overheads) if self._overheads else None)

    def run(self, job: Job, engine: LazyTrainFn, *, stale_after_s: float, settle_s: float, heartbeat_s: float,
            train_kw: dict[str, Any]) -> None:
        """Claim ``job``, train it in this process, release it; skipped when it has a record or
        another worker holds it (the in-process executor's step, :func:`run_sweep`)."""
        if self.record_of(job) is not None:
            return
        store = self.stores[job.results]
        claim, why = claims.try_claim(store, job.run_id, worker=self.report.worker, num_workers=self.report.num_workers,
                                      stale_after_s=stale_after_s, settle_s=settle_s, log=self.log)
        if claim is None:
            self.add_busy(job, why)
            return
        self.add_busy(job, None)
        try:
            if self.record_of(job) is None:  # not finished by another worker just before our claim
                self._train(job, store, claim, engine, heartbeat_s, train_kw)
        finally:
            claims.release(store, claim)

    def _train(self, job: Job, store, claim, engine: LazyTrainFn, heartbeat_s: float, train_kw: dict[str, Any]) -> None:
        m = job.cfg.model
        self.log(f"{self.tag} training {job.run_id} (L={m.n_layer} d={m.d_model} seed={job.cfg.train.seed} "
                 f"corpus={job.corpus}; {len(self.done)}/{len(self.jobs)} done)")
        train = engine.get()  # outside the per-run handler: an engine that cannot load is not a run failure
        t_run = time.perf_counter()
        with claims.Heartbeat(store, claim, heartbeat_s, log=self.log):
            try:
                rec = train(job.cfg, job.results, **train_kw)
            except (UserError, KeyboardInterrupt):
                raise
            except Exception as e:  # one broken run (a bug, out of memory) must not stop the sweep
                self.add_failed(job, f"{type(e).__name__}: {e}")
                self.log(f"{self.tag} run {job.run_id} failed:\n{traceback.format_exc()}")
                return
        if rec is not None:
            self.add_trained(job, rec, time.perf_counter() - t_run)
        self.log(self.status_line())

    def status_line(self) -> str:
        """Runs done, diverged and failed, trained here, and the ETA."""
        left = self.left()
        eta = self.eta(self.report.num_workers, left)
        n_div = _counts(self.done.values())[1]
        extra = f", {n_div} diverged" if n_div else ""
        extra += f", {len(self.report.failed)} failed" if self.report.failed else ""
        return (f"{self.tag} {len(self.done)}/{len(self.jobs)} runs done{extra}; trained here "
                f"{len(self.report.trained)}; ETA {fmt_duration(eta)}" + (f" ({len(left)} left)" if left else ""))

    def finish(self) -> SweepReport:
        """The report, counted over every record now on disk."""
        self.refresh()
        rep = self.report
        rep.busy = [{"run_id": k, "why": v} for k, v in self._busy.items() if k not in self.done]
        rep.finished, rep.diverged = _counts(self.done.values())
        rep.remaining = sum(1 for j in self.jobs if j.run_id not in self.done)
        rep.wall_s = time.perf_counter() - self.t0
        return rep


def _recount(preset: Preset, results: str | Path, rep: SweepReport) -> None:
    """Set the report's whole-sweep counts from the records now on disk."""
    jobs = plan(preset, results)
    stores = {d: storage.open_results(d) for d in {j.results for j in jobs}}
    recs = {j.run_id: stores[j.results].read_json(f"runs/{j.run_id}/record.json") for j in jobs}
    recs = {k: v for k, v in recs.items() if isinstance(v, dict)}
    rep.finished, rep.diverged = _counts(recs.values())
    rep.remaining = len(jobs) - len(recs)
    rep.busy = [b for b in rep.busy if b["run_id"] not in recs]


def core_sets(jobs: int, cores: list[int] | None = None) -> list[set[int]] | None:
    """Split this process's CPU cores into ``jobs`` contiguous, equal-as-possible sets (one per
    local worker), or None when there are fewer cores than jobs or affinity is not available
    (non-Linux). ``cores`` overrides the cores found (for tests)."""
    if cores is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        cores = sorted(os.sched_getaffinity(0))
    if jobs < 1 or len(cores) < jobs:
        return None
    k, r = divmod(len(cores), jobs)
    out, i = [], 0
    for j in range(jobs):
        n = k + (1 if j < r else 0)
        out.append(set(cores[i:i + n]))
        i += n
    return out


def _cores() -> int:
    """The cores this process may run on (its affinity set; ``os.cpu_count`` without one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cap_jobs(jobs: int, runs: int, cores: int, *, num_workers: int = 1, log: Callable[[str], None] = _stderr,
             name: str = "") -> int:
    """``jobs`` local workers, capped at the preset's ``runs`` (a worker more has nothing to
    train) and at this machine's ``cores`` (each worker is one XLA thread pinned to its cores:
    more would time-share them and start hundreds of processes); a cap is said in one line
    through ``log``. With several hosts (``num_workers`` > 1) every host must start the same
    number of workers, whose indices share out the runs: UserError instead of a cap."""
    cap = max(1, min(jobs, runs, cores))
    if cap == jobs:
        return jobs
    over = [x for x, n in ((f"the preset's {runs} runs", runs), (f"this machine's {cores} cores", cores)) if jobs > n]
    why = f"--jobs {jobs} is more than {' and '.join(over)}"
    if num_workers > 1:
        raise UserError(f"{why}: give every one of the {num_workers} hosts --jobs {cap} or fewer")
    log(f"[sweep {name}] {why}: running {cap} local worker{'s' if cap > 1 else ''}")
    return cap


def die_with_parent(parent_pid: int, poll_s: float = 1.0) -> None:
    """Make this process (a ``--jobs`` child worker) get SIGTERM when its parent dies, so a
    SIGKILLed parent leaves no orphan training on (the SIGTERM releases the claim, as ever).

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGTERM)``; elsewhere, or if prctl fails, a daemon thread
    that polls the parent pid every ``poll_s`` seconds. Raises UserError if the parent is gone
    already (the death signal would never come).
    """
    armed = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            armed = libc.prctl(1, signal.SIGTERM, 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # died before prctl took effect
        raise UserError(f"the sweep's parent process {parent_pid} is gone; not starting this worker")
    if armed:
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run_local_jobs(preset: Preset, results: str | Path, child_args: list[str], *, jobs: int, worker: int = 0,
                   num_workers: int = 1, log: Callable[[str], None] = _stderr, **kw: Any) -> SweepReport:
    """Run ``jobs`` worker processes on this machine: this process and ``jobs - 1`` children
    (``depthwidth sweep`` with ``child_args`` + worker options), sharing ``results`` through the
    claim files. Host ``worker`` of ``num_workers`` runs workers worker·jobs .. worker·jobs+jobs-1
    of num_workers·jobs in all.

    Why: XLA compiles on one core, and a CPU sweep of small models is mostly compilation, so
    a second process can use an idle core (how much it saves depends on what else runs). Each
    process is pinned to its own share of the cores (:func:`core_sets`, Linux), so their XLA
    thread pools do not fight over the same cores.
    Returns one merged :class:`SweepReport`; a child that dies is reported in ``failed``.
    Ctrl-C or SIGTERM stops the children too (each releases its claim).
    """
    if jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {jobs}")
    if jobs > 1:  # a memory:// store is refused for what was asked, before any cap
        storage.require_shared(results, f"--jobs {jobs}")
    # The machine's cores, not this process's affinity set: a harness (pytest-xdist, taskset) may
    # pin the parent to one core while the workers are spread over the machine's (core_sets).
    jobs = cap_jobs(jobs, len(preset.runs), os.cpu_count() or _cores(), num_workers=num_workers, log=log,
                    name=preset.name)
    if jobs == 1:
        return run_sweep(preset, results, worker=worker, num_workers=num_workers, log=log, **kw)
    storage.require_shared(results, f"--jobs {jobs}")
    total, first = num_workers * jobs, worker * jobs
    cmd = [sys.executable, "-m", "depthwidth.cli", "sweep", *child_args, "--results", str(results),
           "--num-workers", str(total), "--json", "--no-progress"]
    pins = core_sets(jobs)
    # Each child pins itself (hidden --cpus option) before it loads jax: no preexec_fn in a
    # process that may run threads.
    cmd += ["--parent-pid", str(os.getpid())]  # the child dies with this process (die_with_parent)
    procs = [subprocess.Popen(cmd + ["--worker", str(first + j)]
                              + (["--cpus", ",".join(map(str, sorted(pins[j])))] if pins else []),
                              stdout=subprocess.PIPE, text=True)
             for j in range(1, jobs)]
    own = os.sched_getaffinity(0) if pins else None
    # Said just before the sweep's first line, so a sweep that stops at once (a missing corpus)
    # prints only its one error line.
    waiting = [f"[sweep {preset.name}] {jobs} local workers pinned to cores "
               + " | ".join(",".join(map(str, sorted(c))) for c in pins)] if pins else []

    def log_after_pins(msg: str) -> None:
        while waiting:
            log(waiting.pop())
        log(msg)

    try:
        if pins:
            os.sched_setaffinity(0, pins[0])
        rep = run_sweep(preset, results, worker=first, num_workers=total, log=log_after_pins, **kw)
        outs = [p.communicate()[0] for p in procs]
    except BaseException:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
        raise
    finally:
        if own is not None:
            os.sched_setaffinity(0, own)
    for j, (p, out) in enumerate(zip(procs, outs), start=1):
        try:
            child = json.loads(out)
        except ValueError:
            rep.failed.append({"run_id": f"worker {first + j}", "error": f"worker process exited with code {p.returncode}"})
            continue
        rep.trained += child["trained"]
        rep.failed += child["failed"]
        rep.busy += [b for b in child["busy"] if b not in rep.busy]
    _recount(preset, results, rep)
    rep.busy = [b for b in rep.busy if b["run_id"] not in rep.trained]
    rep.worker, rep.num_workers = worker, num_workers
    return rep


def report_text(rep: SweepReport) -> str:
    """The human summary of a :class:`SweepReport` (what ``depthwidth sweep`` prints)."""
    lines = [f"sweep {rep.preset}: {rep.finished + rep.diverged}/{rep.total} runs have records "
             f"({rep.finished} finished, {rep.diverged} diverged); this command trained {len(rep.trained)} "
             f"in {fmt_duration(rep.wall_s)}; {rep.done_before} were done before"]
    for corpus, d in rep.groups.items():
        lines.append(f"  results ({corpus}): {d}")
    for f in rep.failed:
        lines.append(f"  failed: {f['run_id']}: {f['error']}")
    if rep.busy:
        lines.append(f"  {len(rep.busy)} run(s) held by other workers: "
                     + ", ".join(b["run_id"] for b in rep.busy[:5]) + (" ..." if len(rep.busy) > 5 else ""))
    if rep.remaining and not rep.busy and not rep.failed:
        lines.append(f"  {rep.remaining} run(s) without a record")
    return "\n".join(lines)
