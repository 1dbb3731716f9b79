"""One run over several hosts on Ray: a task group of K processes joined by ``jax.distributed``.

``depthwidth sweep --ray ADDRESS --ray-hosts-per-run K`` (K > 1) trains each run as K processes,
one per bundle of a Ray placement group, for models sharded over more devices than one host
has (the mesh is the run's ``mesh`` config over all K hosts' devices). For each run the sweep
submits one *leader* task (:func:`group_task`, no resources of its own), which:

1. claims the run (:mod:`depthwidth.experiments.claims`, with the sweep's token for this run, so
   Ray's retry of a dead leader takes its claim over at once) and heartbeats it;
2. reserves K bundles of the per-run request (``placement_group``; strategy ``STRICT_SPREAD``,
   one host per bundle, by default; ``PACK`` on a ``--ray local`` cluster, which has one node);
3. asks bundle 0's node for its IP and a free port: the coordinator address (the port is free
   when asked; another process could take it before jax listens there, a small race);
4. starts the K members (:func:`member_task`), member i in bundle i, each a fresh worker process
   (jax can be initialised once per process) that calls
   :func:`depthwidth.models.sharding.initialize_distributed` (coordinator, K, i) and trains
   with :func:`depthwidth.models.train.train_run`, which writes the record from process 0.
   Members do not use JAX's persistent compilation cache (:func:`member_task` says why);
5. if a member's process or node dies, the members left are killed (they would wait in a
   collective forever), the placement group is released, and the whole group starts again, up
   to ``max_retries`` times, resuming from the run's last checkpoint (which every process saved
   its part of). So is a group that could not form (joining jax.distributed failed, or a
   collective's set-up timed out waiting for a peer). Any other exception raised by training
   is not retried: the other members are killed and the run is reported failed (a UserError
   stops the sweep, as with one process).

The results directory must be one place every host sees (a bucket URL or a shared filesystem):
all K processes save and restore their part of each checkpoint there.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.experiments import runner

READY_POLL_S = 1.0  # how often the leader checks its placement group (Ctrl-C reaches it between)
# A member waits this long at exit for its peers at jax's shutdown barrier (jax's default is
# 300 s): a member whose peer failed or was killed outlived the cluster that long (fresh-user
# finding: alive 38 s after the driver, SIGTERM handled but not acted on inside that wait).
MEMBER_SHUTDOWN_S = 30
MEMBER_ENV = "DEPTHWIDTH_RAY_MEMBER"  # set in members' runtime env: a worker pool of their own


def coordinator_address() -> str:
    """``IP:PORT`` of this node and a port free on it now (runs in bundle 0 of the group)."""
    # ray: seconds at import, optional extra; only Ray sweeps pay it
    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    ip = ray.util.get_node_ip_address()
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


class GroupSetupError(RuntimeError):
    """Joining the group failed (the coordinator's port was taken, a peer never came): an
    infrastructure failure, retried with the whole group like a dead member."""


# What jax raises when a peer is too late for a collective's set-up (gloo waits 30 s for it):
# an infrastructure failure too, retried (measured: a member that found its program in the
# persistent compilation cache while the other compiled for 80 s failed this way).
_SETUP_TIMEOUTS = ("Gloo context initialization failed", "DEADLINE_EXCEEDED")


def member_task(job: runner.Job, coordinator: str, num_processes: int, process_id: int, *,
                train_kw: dict[str, Any], train_fn: Callable[..., dict[str, Any] | None] | None,
                compile_cache: str | Path | None | bool = False) -> dict[str, Any] | None:
    """Process ``process_id`` of the group: join the jax cluster, train ``job`` (the record is
    written by process 0), return train_run's result. Raises GroupSetupError when joining fails.

    ``compile_cache`` is off by default: with JAX's persistent cache one member could load its
    program at once while another compiled it, and the early one timed out waiting for the
    late one in the first collective (see ``_SETUP_TIMEOUTS``)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.sharding import initialize_distributed

    try:
        initialize_distributed(coordinator, num_processes, process_id, shutdown_timeout_s=MEMBER_SHUTDOWN_S)
    except UserError as e:
        raise GroupSetupError(str(e)) from None
    train = runner.LazyTrainFn(train_fn, compile_cache).get()
    return train(job.cfg, job.results, **train_kw)


def _retryable(e: BaseException) -> bool:
    return isinstance(e, GroupSetupError) or any(m in str(e) for m in _SETUP_TIMEOUTS)


def train_group(job: runner.Job, opts, *, train_kw: dict[str, Any], train_fn,
                log: Callable[[str], None]) -> dict[str, Any] | None:
    """Steps 2-5 of the module doc for one claimed run; returns process 0's result (the record).
    Raises the members' exception (UserError or another) when training raised one, or
    RuntimeError when the group died more than ``opts.max_retries`` times."""
    # ray: seconds at import, optional extra; only Ray sweeps pay it
    import ray

    # ray: seconds at import, optional extra; only Ray sweeps pay it
    from ray.util.placement_group import placement_group, remove_placement_group

    # ray: seconds at import, optional extra; only Ray sweeps pay it
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    k = opts.hosts_per_run
    bundle = {name: v for name, v in opts.bundle().items() if v > 0} or {"CPU": 0.001}
    member_opts = {"num_cpus": opts.cpus_per_run, "num_gpus": opts.gpus_per_run, "resources": dict(opts.resources),
                   "max_retries": 0, "max_calls": 1,
                   "runtime_env": {"env_vars": {**opts.env, MEMBER_ENV: "1"}}}
    member = ray.remote(**member_opts)(member_task)
    address = ray.remote(num_cpus=0, max_retries=0)(coordinator_address)
    attempts = opts.max_retries + 1 if opts.max_retries >= 0 else None
    attempt, last = 0, None
    while attempts is None or attempt < attempts:
        attempt += 1
        pg = placement_group([dict(bundle) for _ in range(k)], strategy=opts.group_strategy())
        refs: list = []
        try:
            while not ray.wait([pg.ready()], timeout=READY_POLL_S)[0]:
                pass
            at = [PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i) for i in range(k)]
            coordinator = ray.get(address.options(scheduling_strategy=at[0]).remote())
            refs = [member.options(scheduling_strategy=at[i]).remote(
                job, coordinator, k, i, train_kw=train_kw, train_fn=train_fn, compile_cache=False)
                for i in range(k)]
            outs, died = _wait_members(ray, refs)
            if died is None:
                return outs[0]
            last = died
            log(f"[ray group] {job.run_id}: {died}; attempt {attempt} of {attempts or 'unlimited'}, "
                "the group restarts from the last checkpoint")
        finally:
            for r in refs:
                ray.cancel(r, force=True)  # a member still waiting in a collective; a no-op for finished ones
            remove_placement_group(pg)
    raise RuntimeError(f"the group of {k} processes died {attempt} time(s); last: {last}")


def _wait_members(ray, refs: list) -> tuple[list, str | None]:
    """Wait until every member has finished or one has failed. Returns (results, None) when all
    finished, (partial, why) when a member's process or node died or the group could not form
    (:func:`_retryable`); re-raises a member's own exception otherwise (the original one, whose
    message is one line, not Ray's wrapper with the remote traceback)."""
    pending, outs = list(refs), {}
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=READY_POLL_S)
        for r in ready:
            try:
                outs[r] = ray.get(r)
            except ray.exceptions.RayTaskError as e:  # the member raised
                cause = e.cause if isinstance(getattr(e, "cause", None), Exception) else e
                if _retryable(cause):
                    return [outs.get(x) for x in refs], f"the group could not form ({_first_line(cause)})"
                raise cause from None
            except ray.exceptions.RayError as e:  # the worker process or its node died
                return [outs.get(x) for x in refs], f"a member died ({type(e).__name__}: {_first_line(e)})"
    return [outs[r] for r in refs], None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
