"""Experiment trackers a run's log windows are copied to: TensorBoard and Weights & Biases.

``log.jsonl`` in the run directory stays the source of truth (records, tables and figures read
only it); a tracker is a view for people who watch dashboards. Both are optional extras:

* ``tensorboard`` (``pip install 'depthwidth[tensorboard]'``): tensorboardX events in
  ``<run dir>/tb/``, one scalar per log-entry field, x = the training step.
* ``wandb`` (``pip install 'depthwidth[wandb]'``): one W&B run per training run, whose id *is*
  the run id, opened with ``resume="allow"``, so a run killed and resumed (or retried by a sweep
  on another host) continues the same W&B run instead of starting a second one. Its config is
  the run's config; its summary gets the final test/val loss and status. Files go to
  ``<run dir>/wandb/``. Everything else comes from W&B's own environment variables:
  ``WANDB_PROJECT`` (default here: ``depthwidth``), ``WANDB_ENTITY``, ``WANDB_RUN_GROUP``,
  ``WANDB_MODE=offline`` (no network; ``wandb sync`` uploads later), ``WANDB_API_KEY``. W&B's
  console capture is off, so ``--json`` output on stdout stays one JSON object.

Only the main process (``jax.process_index() == 0``) opens trackers.

**Resume.** A run killed and resumed from a checkpoint at step S keeps its ``log.jsonl`` up to
S, and its trackers are given those entries again (``history``): TensorBoard's writer flushes
each entry as it comes (tensorboardX's default of every 120 s lost a killed run's whole event
file) and, when the run's ``tb/`` already has event files, opens the new one with
``purge_step=1``, so that TensorBoard hides the older files' events and shows the replayed
ones, each step once. W&B gets the entries from its resumed run's step counter on (all of them
offline, where it restarts at 0); a step W&B already holds is not sent twice.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError

__all__ = ["TRACKERS", "require", "Trackers"]

# tracker name -> (module it needs, the extra that installs it)
TRACKERS = {"tensorboard": ("tensorboardX", "tensorboard"), "wandb": ("wandb", "wandb")}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module object without a spec (e.g. set to None in sys.modules)
        return False


def require(names: Iterable[str]) -> tuple[str, ...]:
    """The tracker names, checked; UserError (one line) for an unknown one or a missing package,
    so a sweep fails before it builds or compiles anything."""
    names = tuple(dict.fromkeys(names))
    for n in names:
        if n not in TRACKERS:
            raise UserError(f"unknown tracker {n!r}; known: {', '.join(TRACKERS)}")
        module, extra = TRACKERS[n]
        if not _installed(module):
            raise UserError(f"--{n} needs {module}: pip install 'depthwidth[{extra}]' (or {module})")
    return names


class _TensorBoard:
    def __init__(self, rdir: Path, run_id: str, config: dict[str, Any], history: Sequence[dict[str, Any]] = ()):
        # optional dependency: tensorboardX loaded only where used
        from tensorboardX import SummaryWriter

        earlier = any((rdir / "tb").glob("events.out.tfevents.*"))
        self._w = SummaryWriter(str(rdir / "tb"), purge_step=1 if earlier else None)
        for entry in history:
            self.log(entry)

    def log(self, entry: dict[str, Any]) -> None:
        for k, v in entry.items():
            if k != "step":
                self._w.add_scalar(k, v, entry["step"])
        self._w.flush()  # a log window is seconds apart at least: on disk before a kill can lose it

    def summary(self, final: dict[str, Any]) -> None:
        self._w.add_text("final", ", ".join(f"{k}={v}" for k, v in final.items()))

    def close(self) -> None:
        self._w.close()


class _WandB:
    def __init__(self, rdir: Path, run_id: str, config: dict[str, Any], history: Sequence[dict[str, Any]] = ()):
        # optional dependency: wandb loaded only where used
        import wandb

        try:
            self._run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "depthwidth", id=run_id,
                                   name=run_id, resume="allow", dir=str(rdir), config=config,
                                   settings=wandb.Settings(console="off"))
        except Exception as e:  # no network, no login, a bad entity: the same for every run of a sweep
            first = (str(e).strip().splitlines() or [""])[0]
            raise UserError(f"--wandb: could not start a W&B run ({type(e).__name__}: {first}); log in "
                            "(wandb login / WANDB_API_KEY) or set WANDB_MODE=offline") from None
        try:  # W&B's step of the next log call: past what a resumed run holds (0 offline or new)
            has = int(getattr(self._run, "step", 0) or 0)
        except Exception:  # mode="shared" runs raise here: send everything, W&B drops what it has
            has = 0
        for entry in history:
            if int(entry["step"]) >= has:
                self.log(entry)

    def log(self, entry: dict[str, Any]) -> None:
        self._run.log({k: v for k, v in entry.items() if k != "step"}, step=int(entry["step"]))

    def summary(self, final: dict[str, Any]) -> None:
        self._run.summary.update(final)

    def close(self) -> None:
        self._run.finish()


_OPEN = {"tensorboard": _TensorBoard, "wandb": _WandB}


class Trackers:
    """The trackers of one run (``names`` from :func:`require`), opened at once and given
    ``history``, the log entries a resumed run keeps (module doc); :meth:`log` copies a log
    entry (a dict with ``step``) to each, :meth:`summary` the final metrics, and :meth:`close`
    ends them. With no names every method does nothing."""

    def __init__(self, names: Sequence[str], rdir: Path, run_id: str, config: dict[str, Any],
                 history: Sequence[dict[str, Any]] = ()):
        self._sinks: list[Any] = []
        try:
            for n in require(names):
                self._sinks.append(_OPEN[n](rdir, run_id, config, history))
        except BaseException:
            self.close()
            raise

    def log(self, entry: dict[str, Any]) -> None:
        for s in self._sinks:
            s.log(entry)

    def summary(self, final: dict[str, Any]) -> None:
        for s in self._sinks:
            s.summary(final)

    def close(self) -> None:
        while self._sinks:
            self._sinks.pop().close()
