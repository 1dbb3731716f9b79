"""The sweep runner on Ray: every run without a record is one Ray task, on any node of a cluster.

``depthwidth sweep --preset P --results DIR --ray ADDRESS|local`` calls :func:`run_ray_sweep`
(through the :class:`~depthwidth.experiments.executors.RayTasks` or, with
``--ray-hosts-per-run``, :class:`~depthwidth.experiments.executors.RayHostGroups` executor).
``local`` starts a Ray cluster on this machine (``ray.init(num_cpus=...)``); any other value is
the address of a running cluster (``auto``, ``ray://host:10001``), joined with
``ray.init(address=...)``. Ray is imported here only, and only when such a sweep starts: the
default CPU path never loads it.

* **Tasks.** The driver submits one task per run that has no ``record.json``, each asking for
  :class:`RayOptions`' resources (default 1 CPU; GPUs or custom resources such as ``TPU=4``).
  A task trains with :func:`depthwidth.models.train.train_run` (``resume=True``) and returns
  the record; the driver collects them as they finish and prints the whole sweep's progress.
* **Retries.** Ray reruns a task whose worker process or node died (``max_retries``); the rerun
  resumes from the run's last orbax checkpoint. An exception raised by training is not retried:
  that run is reported in ``failed`` and the other runs go on (as with :func:`run_sweep`).
* **Claims.** Inside the task the run is claimed through :mod:`depthwidth.experiments.claims`,
  so a Ray sweep and plain ``depthwidth sweep`` workers sharing one results directory never
  train a run twice. The driver gives each task a claim token of its own that every retry of
  that task reuses, so a retry takes over at once the claim its dead attempt left behind, on any
  node (a dead claim of some *other* owner is taken over by the usual rules: dead pid on the
  same machine, or a heartbeat older than ``stale_after_s``).
* **Task groups.** With ``hosts_per_run`` K > 1 a run is K processes joined by jax.distributed
  in a Ray placement group, led by a task that holds the claim
  (:mod:`depthwidth.experiments.ray_groups`).
* **Shared storage.** Every node reads and writes ``DIR`` (records, logs, checkpoints,
  claims), so ``DIR`` must be one place that all nodes see: a bucket URL (``gs://b/dir``,
  :mod:`depthwidth.storage`; checkpoints through orbax's own ``gs://`` support), NFS, a gcsfuse
  mount, or this machine's disk for a local cluster. ``memory://`` is refused (it lives in one
  process). Corpora come from
  ``data_dir`` (or the driver's ``$DEPTHWIDTH_DATA``; the tasks get it as an absolute path, since
  a worker has the environment of ``ray start``, not of the driver), at that path on every node;
  an object store's endpoint (:func:`depthwidth.storage.client_env`) travels with the tasks too.
  Every node needs the same version of this package installed.
* **Cheap reruns.** A sweep with every record written starts or joins no cluster.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from depthwidth import interrupts, storage
from depthwidth.data.corpora import DATA_ENV
from depthwidth.errors import UserError
from depthwidth.experiments import claims, runner
from depthwidth.experiments.presets import Preset
from depthwidth.experiments.ray_groups import train_group

RAY_MISSING = "--ray needs Ray: pip install 'depthwidth[ray]'"
DEFAULT_MAX_RETRIES = 3
STRATEGIES = ("STRICT_SPREAD", "SPREAD", "PACK", "STRICT_PACK")  # Ray placement group strategies
CANCEL_GRACE_S = 30.0  # how long Ctrl-C waits for cancelled tasks to release their claims
FORCE_WAIT_S = 5.0  # then how long for the tasks cancelled by force (their workers exit)


@dataclass(frozen=True)
class RayOptions:
    """Where the tasks run and what each asks for.

    address: "local" (start a cluster here) or a Ray address ("auto", "ray://host:10001");
    num_cpus: CPUs of a local cluster (default os.cpu_count(); unused with an address);
    cpus_per_run, gpus_per_run: Ray resource units requested by each run's task;
    resources: custom resources per task, e.g. {"TPU": 4}; max_retries: how often Ray reruns a
    task whose worker or node died (-1: without limit); hosts_per_run: processes per run (K > 1:
    a task group joined by jax.distributed, :mod:`depthwidth.experiments.ray_groups`; the
    per-run request above is then per process); strategy: the group's placement strategy
    (default STRICT_SPREAD, PACK for a local cluster); env: environment variables of the
    training processes (Ray runtime env).
    """

    address: str = "local"
    num_cpus: int | None = None
    cpus_per_run: float = 1.0
    gpus_per_run: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)
    max_retries: int = DEFAULT_MAX_RETRIES
    hosts_per_run: int = 1
    strategy: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.address:
            raise UserError("--ray needs an address: local, auto or ray://HOST:PORT")
        if self.num_cpus is not None and self.num_cpus < 1:
            raise UserError(f"--ray-num-cpus must be >= 1, got {self.num_cpus}")
        if self.cpus_per_run < 0 or self.gpus_per_run < 0 or any(v <= 0 for v in self.resources.values()):
            raise UserError("--ray-num-cpus-per-run and --ray-num-gpus-per-run must be >= 0, --ray-resources > 0")
        if self.max_retries < -1:
            raise UserError(f"--ray-max-retries must be >= -1, got {self.max_retries}")
        if self.hosts_per_run < 1:
            raise UserError(f"--ray-hosts-per-run must be >= 1, got {self.hosts_per_run}")
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise UserError(f"--ray-group-strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")

    def bundle(self) -> dict[str, float]:
        """What one training process asks for (Ray resource names)."""
        return {"CPU": self.cpus_per_run, "GPU": self.gpus_per_run, **self.resources}

    def group_strategy(self) -> str:
        """The placement strategy of a run's task group (one node only: PACK)."""
        return self.strategy or ("PACK" if self.address == "local" else "STRICT_SPREAD")

    def task_options(self) -> dict[str, Any]:
        """Keyword arguments of ``ray.remote`` for one run's task."""
        # A GPU or TPU stays held by the process that opened it: one run per worker process
        # frees it for the next task. CPU-only workers are reused (jax is imported once).
        if self.hosts_per_run > 1:  # the leader of a task group: its members hold the resources
            return {"num_cpus": 0, "max_retries": self.max_retries, "retry_exceptions": False}
        exclusive = self.gpus_per_run > 0 or bool(self.resources)
        opts = {"num_cpus": self.cpus_per_run, "num_gpus": self.gpus_per_run, "resources": dict(self.resources),
                "max_retries": self.max_retries, "retry_exceptions": False, "max_calls": 1 if exclusive else 0}
        if self.env:
            opts["runtime_env"] = {"env_vars": dict(self.env)}
        return opts


def parse_resources(items: list[str]) -> dict[str, float]:
    """``["TPU=4", "accel=0.5"]`` -> {"TPU": 4.0, "accel": 0.5}. Raises UserError on a bad item."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            n = float(value)
        except ValueError:
            n = float("nan")
        if not sep or not name or not n > 0 or n == float("inf") or name in ("CPU", "GPU"):
            raise UserError(f"--ray-resources {item!r}: expected NAME=N with N > 0 (e.g. TPU=4; CPUs and GPUs "
                            "have their own flags)")
        out[name] = n
    return out


def parse_env(items: list[str]) -> dict[str, str]:
    """``["XLA_FLAGS=--a", "X=1"]`` -> {"XLA_FLAGS": "--a", "X": "1"}. Raises UserError on an
    item without ``=`` or with an empty or repeated name."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or name.strip() in out or any(c.isspace() for c in name.strip()):
            raise UserError(f"--ray-env {item!r}: expected NAME=VALUE, each NAME once")
        out[name.strip()] = value
    return out


# Ray's switch for its single-machine mode (its default on macOS and Windows): every node address
# is 127.0.0.1 and the cluster's servers listen on loopback only. Read when ray is imported;
# ray.init(_node_ip_address="127.0.0.1") alone does not do it (Ray turns it into the host's IP).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def import_ray(local: bool = False):
    """The ``ray`` module; UserError (:data:`RAY_MISSING`) when it is not installed. With
    ``local`` (a ``--ray local`` cluster) the cluster this process starts binds loopback only
    (:data:`LOOPBACK_ENV`, set before Ray's first import in this process; its servers and
    workers inherit it)."""
    if local and "ray" not in sys.modules:
        os.environ.setdefault(LOOPBACK_ENV, "0")
    try:
        # ray: seconds at import, optional extra; only Ray sweeps pay it
        import ray
    except ImportError:
        raise UserError(RAY_MISSING) from None
    return ray


def _connect(ray, opts: RayOptions) -> bool:
    """Start or join the cluster unless this process already did; True if this call did.
    A local cluster binds loopback only when ray was imported by ``import_ray(local=True)``.
    UserError (one line) when it cannot start or be joined, naming a refused auth token."""
    if ray.is_initialized():
        return False
    try:
        if opts.address == "local":
            # address="local": a new cluster even where RAY_ADDRESS or a `ray start` one exists
            ray.init(address="local", num_cpus=opts.num_cpus or os.cpu_count() or 1, include_dashboard=False)
        else:
            ray.init(address=opts.address)
    except Exception as e:  # ConnectionError, ValueError, RuntimeError, ray's AuthenticationError
        raise UserError(f"--ray {opts.address}: cannot start or join the Ray cluster ({_why_not(e)})") from None
    if opts.address == "local":
        try:
            _check_fits(opts, ray.cluster_resources())
        except UserError:
            ray.shutdown()
            raise
    return True


# what Ray's errors say when the cluster runs with token authentication and the driver's token
# is missing or another one (RAY_AUTH_MODE=token; Ray 2.60 turns it on for a `--ray local`
# cluster, which writes ~/.ray/auth_token, and for `ray start --head` where that file exists;
# a driver given an address, not `auto`, turns it on only with RAY_AUTH_MODE=token)
_AUTH_WORDS = ("InvalidAuthToken", "UNAUTHENTICATED", "AuthenticationError", "auth token", "authentication")


def _why_not(e: BaseException) -> str:
    """The first line of why ``ray.init`` failed; for a refused token, what to do about it.
    The refusal can be in a cause: with an address, Ray 2.60 raises ``ConnectionError("Failed
    to connect to Ray cluster at ...")`` from the GCS client's ``Unauthenticated`` error."""
    lines, c = [], e
    while c is not None and len(lines) < 200:
        lines += [f"{type(c).__name__}: {x.strip()}" for x in str(c).splitlines() or [""]]
        c = c.__cause__ or c.__context__
    for word in _AUTH_WORDS:  # the most specific first
        for x in lines:
            if (i := x.lower().find(word.lower())) >= 0:
                return (f"token authentication: {x[i:i + 160]}; the cluster runs with RAY_AUTH_MODE=token: give "
                        "this driver RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN, "
                        "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)")
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _check_nodes(ray, opts: RayOptions) -> None:
    """UserError if a task group's STRICT_SPREAD (one process per node) needs more nodes than the
    cluster has alive: Ray would wait for the placement group without a word, for ever."""
    k = opts.hosts_per_run
    if k < 2 or opts.group_strategy() != "STRICT_SPREAD":
        return
    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    if nodes < k:
        raise UserError(f"--ray-hosts-per-run {k} with STRICT_SPREAD needs {k} nodes (one process on each); the "
                        f"cluster at {opts.address} has {nodes} alive; start more nodes, or give "
                        "--ray-group-strategy SPREAD or PACK")


def _check_fits(opts: RayOptions, have: dict[str, float]) -> None:
    """UserError if one run's request exceeds what a local cluster has: Ray would wait for a
    node that can never join (an autoscaler message, forever). Not checked for an address:
    a remote cluster may grow."""
    k = opts.hosts_per_run
    want = {name: v * k for name, v in opts.bundle().items()}
    short = [f"{name}={v:g} (the local cluster has {have.get(name, 0):g})" for name, v in want.items()
             if v > 0 and v > have.get(name, 0)]
    if short:
        per = f" ({k} processes)" if k > 1 else ""
        raise UserError(f"--ray local: each run{per} asks for {', '.join(short)}; no run could ever start")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def train_task(job: runner.Job, token: str, *, train_kw: dict[str, Any], stale_after_s: float, settle_s: float,
               heartbeat_s: float, train_fn: Callable[..., dict[str, Any] | None] | None,
               compile_cache: str | Path | None | bool, group: RayOptions | None = None) -> dict[str, Any]:
    """What one Ray task does (on a worker): claim ``job``'s run with ``token``, train it, release.
    With ``group`` (hosts_per_run > 1) this task is the leader of the run's task group and the
    training happens in its members (:func:`depthwidth.experiments.ray_groups.train_group`).

    Returns {"outcome": ..., ...}: "done" (a record existed; "record"), "busy" (another live
    worker holds it; "why"), "trained" ("record", "elapsed_s" seconds in the task, "host"),
    "failed" or "user_error" ("error", one line; "traceback"). Only a dead process (which Ray
    retries) ends it otherwise; KeyboardInterrupt (ray.cancel) releases the claim and re-raises.
    """
    with interrupts.sigint_handled():  # ray.cancel interrupts the main thread: a SIGINT Python must handle
        return _train_task(job, token, train_kw=train_kw, stale_after_s=stale_after_s, settle_s=settle_s,
                           heartbeat_s=heartbeat_s, train_fn=train_fn, compile_cache=compile_cache, group=group)


def _train_task(job: runner.Job, token: str, *, train_kw: dict[str, Any], stale_after_s: float, settle_s: float,
                heartbeat_s: float, train_fn: Callable[..., dict[str, Any] | None] | None,
                compile_cache: str | Path | None | bool, group: RayOptions | None) -> dict[str, Any]:
    store = storage.open_results(job.results)
    rel = f"runs/{job.run_id}/record.json"
    if isinstance(rec := store.read_json(rel), dict):
        return {"outcome": "done", "record": rec}
    claim, why = claims.try_claim(store, job.run_id, worker=0, num_workers=1, stale_after_s=stale_after_s,
                                  settle_s=settle_s, token=token, log=_log)
    if claim is None:
        return {"outcome": "busy", "why": why}
    try:
        if isinstance(rec := store.read_json(rel), dict):  # finished by another worker just before our claim
            return {"outcome": "done", "record": rec}
        t0 = time.perf_counter()
        with claims.Heartbeat(store, claim, heartbeat_s, log=_log):
            try:
                if group is not None:
                    rec = train_group(job, group, train_kw=train_kw, train_fn=train_fn,
                                      log=_log)
                else:
                    fn = runner.LazyTrainFn(train_fn, compile_cache).get()  # jax's import: seconds under load
                    interrupts.check()  # a cancel whose KeyboardInterrupt the import swallowed stops here
                    rec = fn(job.cfg, job.results, **train_kw)
            except UserError as e:
                return {"outcome": "user_error", "error": str(e)}
            except Exception as e:  # one broken run (a bug, out of memory) must not stop the sweep
                return {"outcome": "failed", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        if rec is None:
            return {"outcome": "failed", "error": "training stopped before the end without a record", "traceback": ""}
        return {"outcome": "trained", "record": rec, "elapsed_s": time.perf_counter() - t0, "host": socket.gethostname()}
    finally:
        claims.release(store, claim)


def run_ray_sweep(preset: Preset, results: str | Path, opts: RayOptions, *, data_dir: str | Path | None = None,
                  stale_after_s: float = runner.DEFAULT_STALE_AFTER_S, heartbeat_s: float | None = None,
                  settle_s: float = 1.0, verbose: bool = True, compile_cache: str | Path | None | bool = True,
                  train_fn: Callable[..., dict[str, Any] | None] | None = None, trackers: tuple[str, ...] = (),
                  log: Callable[[str], None] = _log) -> runner.SweepReport:
    """Train every run of ``preset`` without a record under ``results`` as Ray tasks (module doc).

    Args:
        preset: a loaded :class:`~depthwidth.experiments.presets.Preset`.
        results: the results directory, a place every Ray node sees (a bucket URL or a shared
            filesystem; ``memory://`` raises UserError). A local path is sent to the tasks as
            an absolute path.
        opts: cluster address and per-run resources (:class:`RayOptions`).
        data_dir: corpora directory on the nodes (default the driver's ``$DEPTHWIDTH_DATA``), sent
            to every task as an absolute path: each node must have the corpora there.
        stale_after_s, heartbeat_s, settle_s: the claim timings (seconds), as in run_sweep.
        verbose: the engine's messages (they reach the driver through Ray's log forwarding).
        compile_cache: JAX compilation cache on each node, as in run_sweep.
        train_fn: the training function (default train_run); it is pickled to the workers.
        trackers: copies of each run's log ("tensorboard", "wandb"), as in run_sweep; the
            package must be installed on every node.
        log: where the driver's progress lines go (default stderr).

    Returns the same :class:`~depthwidth.experiments.runner.SweepReport` as run_sweep (worker 0
    of 1). Raises UserError for bad arguments, a cluster that cannot be reached, no Ray, or a
    UserError from a run (bad data or config: the other tasks are cancelled);
    KeyboardInterrupt on Ctrl-C or SIGTERM after cancelling the tasks. A run whose task fails
    for good (an exception, or its worker died more than ``max_retries`` times) is reported in
    ``failed``. A local cluster started here is shut down on return. A task group with
    STRICT_SPREAD over more hosts than the cluster has nodes is a UserError at once.
    """
    hb = runner.heartbeat_period(stale_after_s, heartbeat_s)
    storage.require_shared(results, "--ray")
    ray = import_ray(local=opts.address == "local")
    jobs = runner.plan(preset, results)
    sweep = runner.SweepProgress(preset, results, jobs, log=log, label="ray")
    sweep.announce()  # the nodes read their own corpora: no check on the driver
    todo = [j for j in jobs if sweep.record_of(j) is None]
    if not todo:  # a finished sweep: starting or joining a cluster would only cost time
        log(f"{sweep.tag} 0 task(s) submitted: every run has a record (no Ray cluster started or joined)")
        return sweep.finish()
    started = _connect(ray, opts)
    try:
        _check_nodes(ray, opts)
        # ray.init put in a SIGTERM handler of its own (exit at once): ours again, so that
        # SIGTERM cancels the tasks and releases their claims as Ctrl-C does.
        with interrupts.sigterm_raises():
            refs = _submit(ray, todo, opts, _task_kw(data_dir, trackers, verbose), stale_after_s=stale_after_s,
                           settle_s=settle_s, heartbeat_s=hb, train_fn=train_fn, compile_cache=compile_cache)
            log(f"{sweep.tag} {len(refs)} task(s) submitted to {opts.address} ({_request_text(opts)}); "
                f"{_slots(ray, opts)} can run at once")
            _collect(ray, refs, sweep, opts, log)
            return sweep.finish()
    finally:
        if started:
            ray.shutdown()


def _task_kw(data_dir, trackers: tuple[str, ...], verbose: bool) -> dict[str, Any]:
    """train_run's keyword arguments in every task. The corpora directory is the driver's
    (``data_dir``, else its ``$DEPTHWIDTH_DATA``), absolute: a worker of a standalone cluster
    has the environment of ``ray start``, not of the driver (issue 25)."""
    data_dir = data_dir or os.environ.get(DATA_ENV)
    kw = {"data_dir": str(Path(data_dir).absolute()) if data_dir else None, "resume": True,
          "progress": False, "verbose": verbose}
    if trackers:
        kw["trackers"] = tuple(trackers)
    return kw


class Submitted(NamedTuple):
    """One run's task: its job and the claim token it was given (:func:`train_task`)."""

    job: runner.Job
    token: str


def _submit(ray, todo: list[runner.Job], opts: RayOptions, kw: dict[str, Any], **task_kw: Any) -> dict:
    """One task per job (``task_kw``: train_task's timing and engine arguments); {ref:
    :class:`Submitted`}. The tasks' environment gets the object-store clients'
    (:func:`depthwidth.storage.client_env`, e.g. an emulator's endpoint) under ``--ray-env``."""
    env = {**storage.client_env(), **opts.env}
    task = ray.remote(**dataclasses.replace(opts, env=env).task_options())(train_task)
    group = dataclasses.replace(opts, env=env) if opts.hosts_per_run > 1 else None
    refs = {}
    for job in todo:
        remote_job = job if storage.is_url(job.results) else \
            dataclasses.replace(job, results=str(Path(job.results).absolute()))
        token = uuid.uuid4().hex
        refs[task.remote(remote_job, token, train_kw=kw, group=group, **task_kw)] = Submitted(job, token)
    return refs


def _request_text(opts: RayOptions) -> str:
    parts = [f"{opts.cpus_per_run:g} CPU"] + ([f"{opts.gpus_per_run:g} GPU"] if opts.gpus_per_run else [])
    each = " + ".join(parts + [f"{v:g} {k}" for k, v in opts.resources.items()])
    if opts.hosts_per_run > 1:
        return f"{opts.hosts_per_run} processes per run ({opts.group_strategy()}), {each} each"
    return each + " per run"


def _slots(ray, opts: RayOptions) -> int:
    """How many runs the cluster's resources fit at once (at least 1), for the ETA."""
    total = ray.cluster_resources()
    need = {name: v * opts.hosts_per_run for name, v in opts.bundle().items()}
    fits = [int(total.get(k, 0) // v) for k, v in need.items() if v > 0]
    return max(1, min(fits)) if fits else max(1, int(total.get("CPU", 1)))


def _collect(ray, refs: dict, sweep: runner.SweepProgress, opts: RayOptions, log: Callable[[str], None]) -> None:
    """Wait for the tasks ({ref: :class:`Submitted`}), file each outcome in ``sweep``'s report,
    log progress; on Ctrl-C, SIGTERM or a UserError from a run, cancel what is left
    (:func:`_cancel`) and re-raise."""
    pending = list(refs)
    slots = _slots(ray, opts)
    try:
        while pending:
            # A timeout, so that Ctrl-C and SIGTERM reach Python between waits.
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            # Ray's C++ turns a KeyboardInterrupt raised by our handler inside its calls into a
            # status; a call that drops that status drops the Ctrl-C: the CLI's record of the
            # signal (interrupts.honoured) stops the loop all the same.
            interrupts.check()
            for ref in ready:
                job = refs[ref].job
                try:
                    out = ray.get(ref, timeout=60)
                except ray.exceptions.RayError as e:  # the worker or node died more than max_retries times
                    out = {"outcome": "failed", "error": f"{type(e).__name__}: {str(e).splitlines()[0]}", "traceback": ""}
                _file(job, out, sweep, log)
                log(_status_line(sweep, [refs[r].job for r in pending], slots, job, out))
    except KeyboardInterrupt:
        _cancel(ray, {r: refs[r] for r in pending}, log)
        # Ray raises a plain KeyboardInterrupt of its own in place of our Terminated: SIGTERM exits 143
        interrupts.check()
        raise
    except BaseException:
        _cancel(ray, {r: refs[r] for r in pending}, log)
        raise


def _file(job: runner.Job, out: dict[str, Any], sweep: runner.SweepProgress, log: Callable[[str], None]) -> None:
    """Put one task's outcome (:func:`train_task`) into the sweep's bookkeeping."""
    kind = out["outcome"]
    if kind == "user_error":
        raise UserError(out["error"])
    if kind == "busy":
        sweep.add_busy(job, out["why"])
    elif kind == "failed":
        sweep.add_failed(job, out["error"])
        log(f"{sweep.tag} run {job.run_id} failed: {out['error']}" + (f"\n{out['traceback']}" if out["traceback"] else ""))
    elif kind == "trained":
        sweep.add_trained(job, out["record"], out["elapsed_s"])
    else:
        sweep.add_record(job, out["record"])


def _status_line(sweep: runner.SweepProgress, pending: list[runner.Job], slots: int, job: runner.Job,
                 out: dict[str, Any]) -> str:
    """Runs done / running / queued / failed, the finished run's tokens/s, and the ETA."""
    running = sum(1 for j in pending if storage.open_results(j.results).exists(claims.claim_rel(j.run_id)))
    eta = sweep.eta(slots)
    tps = (out.get("record") or {}).get("tokens_per_s")
    what = {"trained": f"{job.run_id} trained on {out.get('host')}"
                       + (f", {tps:,.0f} tokens/s" if isinstance(tps, (int, float)) else ""),
            "done": f"{job.run_id} had a record", "busy": f"{job.run_id} held by another worker",
            "failed": f"{job.run_id} failed"}[out["outcome"]]
    return (f"{sweep.tag} {len(sweep.done)}/{len(sweep.jobs)} runs done, {running} running, "
            f"{len(pending) - running} queued, {len(sweep.report.failed)} failed; {what}; "
            f"ETA {runner.fmt_duration(eta)}")


def _claim_state(sub: Submitted) -> str:
    """Whether a task had started its run when it was stopped by force: its claim file carries
    the task's token once the task began (claims.try_claim). Said in the log so that a task that
    missed the grace can be told apart: one still starting (worker start, imports) or one training."""
    try:
        cur = storage.open_results(sub.job.results).read_json(claims.claim_rel(sub.job.run_id))
    except Exception:  # noqa: BLE001 -- a diagnostic: it must not stop the cancel
        return "claim unreadable"
    if isinstance(cur, dict) and cur.get("token") == sub.token:
        return "had claimed its run"
    return "had not claimed its run yet"


def _cancel(ray, pending: dict, log: Callable[[str], None]) -> None:
    """Cancel the tasks not yet finished ({ref: :class:`Submitted`}); give running ones
    ``CANCEL_GRACE_S`` to stop, then stop the rest by force. Never waits longer than that (plus
    :data:`FORCE_WAIT_S`).

    ``force=False`` raises KeyboardInterrupt inside a running task (Ray's ``ray.cancel``), so
    it checkpoints the step it reached, its claim is released and the record is not written; a
    second Ctrl-C skips the wait. A task that has not stopped by then (a KeyboardInterrupt
    swallowed in a jax callback, a compile that holds the signal longer than the grace) is
    cancelled with ``force=True``: its worker exits, and once Ray reports it ended the driver
    removes the claim that carries its token (:func:`depthwidth.experiments.claims.release_token`).
    """
    if not pending:
        return
    t0 = time.monotonic()
    log(f"[sweep ray] cancelling {len(pending)} task(s); a running one checkpoints its step first")
    left = list(pending)
    try:
        for ref in pending:
            ray.cancel(ref, force=False)
        _, left = ray.wait(list(pending), num_returns=len(pending), timeout=CANCEL_GRACE_S)
    except KeyboardInterrupt:
        pass
    if left:
        log(f"[sweep ray] {len(left)} task(s) still running after {time.monotonic() - t0:.0f} s: stopped by force: "
            + ", ".join(f"{pending[ref].job.run_id} ({_claim_state(pending[ref])})" for ref in left))
        ended = []
        try:
            for ref in left:
                ray.cancel(ref, force=True)
            ended, _ = ray.wait(left, num_returns=len(left), timeout=FORCE_WAIT_S)
        except KeyboardInterrupt:
            pass
        for ref in ended:  # its worker is gone: its claim would only wait for the stale rules
            sub = pending[ref]
            claims.release_token(storage.open_results(sub.job.results), sub.job.run_id, sub.token)
    log(f"[sweep ray] tasks cancelled in {time.monotonic() - t0:.1f} s")
