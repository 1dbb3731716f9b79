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
   with :func:`depthwidth.models.train.train_run`, which writes the record from process 0;
5. if a member's process or node dies, the members left are killed (they would wait in a
   collective forever), the placement group is released, and the whole group starts again, up
   to ``max_retries`` times, resuming from the run's last checkpoint (which every process saved
   its part of). An exception raised by training is not retried: the other members are killed
   and the run is reported failed (a UserError stops the sweep, as with one process).

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
MEMBER_ENV = "DEPTHWIDTH_RAY_MEMBER"  # set in members' runtime env: a worker pool of their own


def coordinator_address() -> str:
    """``IP:PORT`` of this node and a port free on it now (runs in bundle 0 of the group)."""
    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    ip = ray.util.get_node_ip_address()
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def member_task(job: runner.Job, coordinator: str, num_processes: int, process_id: int, *,
                train_kw: dict[str, Any], train_fn: Callable[..., dict[str, Any] | None] | None,
                compile_cache: str | Path | None | bool) -> dict[str, Any] | None:
    """Process ``process_id`` of the group: join the jax cluster, train ``job`` (the record is
    written by process 0), return train_run's result."""
    from depthwidth.models.sharding import initialize_distributed

    initialize_distributed(coordinator, num_processes, process_id)
    train = runner._Engine(train_fn, compile_cache).get()
    return train(job.cfg, job.results, **train_kw)


def train_group(job: runner.Job, opts, *, train_kw: dict[str, Any], train_fn, compile_cache,
                log: Callable[[str], None]) -> dict[str, Any] | None:
    """Steps 2-5 of the module doc for one claimed run; returns process 0's result (the record).
    Raises the members' exception (UserError or another) when training raised one, or
    RuntimeError when the group died more than ``opts.max_retries`` times."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
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
                job, coordinator, k, i, train_kw=train_kw, train_fn=train_fn, compile_cache=compile_cache)
                for i in range(k)]
            outs, died = _wait_members(ray, refs)
            if died is None:
                return outs[0]
            last = died
            log(f"[ray group] {job.run_id}: a member died ({died}); attempt {attempt} of "
                f"{attempts or 'unlimited'}, the group restarts from the last checkpoint")
        finally:
            for r in refs:
                ray.cancel(r, force=True)  # a member still waiting in a collective; a no-op for finished ones
            remove_placement_group(pg)
    raise RuntimeError(f"the group of {k} processes died {attempt} time(s); last: {last}")


def _wait_members(ray, refs: list) -> tuple[list, str | None]:
    """Wait until every member has finished or one has failed. Returns (results, None) when all
    finished, (partial, why) when a member's process or node died; re-raises a member's own
    exception (the original type, via RayTaskError.as_instanceof_cause)."""
    pending, outs = list(refs), {}
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=READY_POLL_S)
        for r in ready:
            try:
                outs[r] = ray.get(r)
            except ray.exceptions.RayTaskError as e:  # training raised: not a crash, not retried
                cause = e.as_instanceof_cause()
                if isinstance(getattr(e, "cause", None), UserError):
                    raise UserError(str(e.cause)) from None
                raise cause from None
            except ray.exceptions.RayError as e:  # the worker process or its node died
                return [outs.get(x) for x in refs], f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return [outs[r] for r in refs], None
