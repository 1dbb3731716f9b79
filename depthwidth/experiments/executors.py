"""How a sweep's runs are spread out: one :class:`Executor` interface, four executors.

Every way of running a preset's sweep is a small class with one method,
``run(preset, results) -> SweepReport``, and all of them go through the runner's public
pieces (:mod:`depthwidth.experiments.runner`: the plan, the claim files, the
:class:`~depthwidth.experiments.runner.SweepProgress` bookkeeping and the same
:class:`~depthwidth.experiments.runner.SweepReport`), so a run is claimed, trained, skipped and
counted the same way whichever executor trains it, and executors may share one results
directory:

============================  =====================  ==============================================
executor                      chosen by              what trains each run
============================  =====================  ==============================================
:class:`InProcess`            (default)              this process, one run after another
                                                     (:func:`~depthwidth.experiments.runner.run_sweep`)
:class:`LocalProcesses`       ``--jobs J`` (J > 1)   J worker processes on this machine, each pinned
                                                     to its share of the cores
                                                     (:func:`~depthwidth.experiments.runner.run_local_jobs`)
:class:`RayTasks`             ``--ray ADDRESS``      one Ray task per run, on any node
                                                     (:func:`~depthwidth.experiments.ray_runner.run_ray_sweep`)
:class:`RayHostGroups`        ``--ray ADDRESS``      K processes per run joined by ``jax.distributed``
                              ``--ray-hosts-per-run  in a Ray placement group
                              K`` (K > 1)            (:mod:`depthwidth.experiments.ray_groups`)
============================  =====================  ==============================================

:func:`executor_for` picks one from the options (the CLI's ``sweep`` and ``reproduce`` build
those with :func:`depthwidth.experiments.cli.sweep_executor`). What every executor shares, how
one run is claimed and trained, is a :class:`SweepSettings`.

A new executor (a batch queue, say) is one more class here: subclass :class:`Executor`, implement
``run`` with the runner's public API (plan the jobs with ``runner.plan``, keep the books in a
``runner.SweepProgress``, claim each run with :mod:`depthwidth.experiments.claims` wherever it
trains, return ``progress.finish()``), add its branch to :func:`executor_for` and its flags to
``sweep_args``; ``tests/experiments/test_executors.py`` checks that it fits the interface.

Nothing heavy is imported here: Ray only when a Ray executor runs, jax only when a run trains.
"""

from __future__ import annotations

import abc
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.experiments import runner
from depthwidth.experiments.presets import Preset
from depthwidth.experiments.ray_runner import RayOptions, run_ray_sweep


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SweepSettings:
    """How each run is claimed and trained, the same under every executor.

    data_dir: corpora directory (default ``$DEPTHWIDTH_DATA``); stale_after_s / heartbeat_s /
    settle_s: the claim timings in seconds (:func:`~depthwidth.experiments.runner.run_sweep`);
    progress: per-run progress bars (local executors only: Ray tasks have none); verbose: the
    training messages; compile_cache: JAX's persistent compilation cache (True = the default
    place, a path, or False/None = off); trackers: copies of each run's log ("tensorboard",
    "wandb"); train_fn: the training function (default :func:`depthwidth.models.train.train_run`;
    tests pass a stand-in); log: where progress lines go (default stderr).
    """

    data_dir: str | Path | None = None
    stale_after_s: float = runner.DEFAULT_STALE_AFTER_S
    heartbeat_s: float | None = None
    settle_s: float = 1.0
    progress: bool = True
    verbose: bool = True
    compile_cache: str | Path | None | bool = True
    trackers: tuple[str, ...] = ()
    train_fn: Callable[..., dict[str, Any] | None] | None = None
    log: Callable[[str], None] = _stderr

    def kwargs(self, *, progress: bool = True) -> dict[str, Any]:
        """The settings as the runner functions' keyword arguments (without ``progress`` when
        ``progress`` is False: the Ray runner takes none)."""
        kw = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if not progress:
            del kw["progress"]
        return kw


class Executor(abc.ABC):
    """Trains every run of a preset that has no record under a results directory (module doc).

    Subclasses are frozen dataclasses holding their :class:`SweepSettings` as ``settings``.
    """

    settings: SweepSettings

    @abc.abstractmethod
    def run(self, preset: Preset, results: str | Path) -> runner.SweepReport:
        """Train the runs of ``preset`` without a record under ``results`` (a local path or an
        fsspec URL). Returns the whole sweep's :class:`~depthwidth.experiments.runner.SweepReport`.
        Raises UserError for bad options or a UserError from a run (bad data or config), and
        KeyboardInterrupt on Ctrl-C or SIGTERM after every claim it holds is released."""

    def with_child_flags(self, *flags: str) -> Executor:
        """This executor with ``flags`` added to the command line of the worker processes it
        starts (a refinement round's children get ``--refine-round``, so each computes the same
        round's preset from the records); itself when it starts no ``depthwidth`` processes."""
        return self


@dataclass(frozen=True)
class InProcess(Executor):
    """Every run in this process, one after another: worker ``worker`` of ``num_workers``
    sharing ``results`` (other workers may be other hosts), stealing other workers' unclaimed
    runs after its own unless ``steal`` is False."""

    settings: SweepSettings = field(default_factory=SweepSettings)
    worker: int = 0
    num_workers: int = 1
    steal: bool = True

    def run(self, preset: Preset, results: str | Path) -> runner.SweepReport:
        return runner.run_sweep(preset, results, worker=self.worker, num_workers=self.num_workers, steal=self.steal,
                                **self.settings.kwargs())


@dataclass(frozen=True)
class LocalProcesses(Executor):
    """``jobs`` worker processes on this machine: this one and ``jobs - 1`` children started as
    ``depthwidth sweep`` with ``child_args`` (the options that rebuild the same preset) and
    hidden worker flags (:func:`~depthwidth.experiments.runner.run_local_jobs`). Host
    ``worker`` of ``num_workers`` runs workers worker·jobs .. worker·jobs + jobs - 1."""

    jobs: int = 2
    child_args: tuple[str, ...] = ()
    settings: SweepSettings = field(default_factory=SweepSettings)
    worker: int = 0
    num_workers: int = 1
    steal: bool = True

    def run(self, preset: Preset, results: str | Path) -> runner.SweepReport:
        return runner.run_local_jobs(preset, results, list(self.child_args), jobs=self.jobs, worker=self.worker,
                                     num_workers=self.num_workers, steal=self.steal, **self.settings.kwargs())

    def with_child_flags(self, *flags: str) -> LocalProcesses:
        return dataclasses.replace(self, child_args=(*self.child_args, *flags))


@dataclass(frozen=True)
class RayTasks(Executor):
    """One Ray task per run (``options.hosts_per_run`` == 1), each asking for the per-run
    resources of ``options`` (:class:`~depthwidth.experiments.ray_runner.RayOptions`)."""

    options: RayOptions
    settings: SweepSettings = field(default_factory=SweepSettings)

    def __post_init__(self) -> None:
        if self.options.hosts_per_run != 1:
            raise UserError(f"{type(self).__name__} trains a run in one process; {self.options.hosts_per_run} hosts "
                            "per run is RayHostGroups")

    def run(self, preset: Preset, results: str | Path) -> runner.SweepReport:
        return run_ray_sweep(preset, results, self.options, **self.settings.kwargs(progress=False))


@dataclass(frozen=True)
class RayHostGroups(Executor):
    """Each run as ``options.hosts_per_run`` K > 1 processes joined by ``jax.distributed``, one
    per bundle of a Ray placement group, led by a task that holds the run's claim
    (:mod:`depthwidth.experiments.ray_groups`); ``options.group_strategy()`` places them."""

    options: RayOptions
    settings: SweepSettings = field(default_factory=SweepSettings)

    def __post_init__(self) -> None:
        if self.options.hosts_per_run < 2:
            raise UserError(f"{type(self).__name__} needs hosts_per_run K > 1, got {self.options.hosts_per_run}")

    def run(self, preset: Preset, results: str | Path) -> runner.SweepReport:
        return run_ray_sweep(preset, results, self.options, **self.settings.kwargs(progress=False))


EXECUTORS: tuple[type[Executor], ...] = (InProcess, LocalProcesses, RayTasks, RayHostGroups)


def executor_for(settings: SweepSettings = SweepSettings(), *, jobs: int = 1, worker: int = 0, num_workers: int = 1,
                 steal: bool = True, child_args: tuple[str, ...] = (), ray: RayOptions | None = None) -> Executor:
    """The executor the options ask for (module doc's table): Ray with ``ray`` (a
    :class:`~depthwidth.experiments.ray_runner.RayOptions`: :class:`RayHostGroups` when it asks
    for more than one host per run, else :class:`RayTasks`), else :class:`LocalProcesses` for
    ``jobs`` > 1, else :class:`InProcess`.

    Raises UserError (naming the flag) when ``ray`` is given with a local-worker option that Ray
    would ignore (jobs, worker, num_workers, steal), or for ``jobs`` < 1.
    """
    if ray is not None:
        local = [f for f, v in (("--jobs", jobs != 1), ("--worker", worker != 0), ("--num-workers", num_workers != 1),
                                ("--no-steal", not steal)) if v]
        if local:
            raise UserError(f"--ray places every run itself; drop {local[0]}")
        return (RayHostGroups if ray.hosts_per_run > 1 else RayTasks)(ray, settings)
    if jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {jobs}")
    if jobs > 1:
        return LocalProcesses(jobs, tuple(child_args), settings, worker, num_workers, steal)
    return InProcess(settings, worker, num_workers, steal)
