"""Every experiment kind, declared once: what measures it, what analyses it, what draws it, its
command and its results directory.

An experiment *kind* (ARCHITECTURE.md, "Where to add") is a measurement beside the law's sweep:
the seed experiments (README, "The seed experiments") and the measured separation rank. Each is
one :class:`Kind` in :data:`KINDS`, and everything that lists kinds reads it:
``depthwidth exp NAME`` (:mod:`depthwidth.pipeline.exp`) registers one subcommand per kind with
the kind's default ``--results``; the figures a kind draws are the ones registered with it as
their producer (:mod:`depthwidth.paper_figs.registry`), so neither table repeats the other;
``tests/test_registry.py`` checks that every kind has all its parts.

The parts sit in the layers that own them (measure: ``theory``/``models``/``experiments``;
analysis: ``fits``; figure: ``paper_figs``; the command that runs them in turn: ``pipeline``), so
this table, which ties them together, lives at the ``pipeline`` layer. It refers to each part by a
dotted ``"module:function"`` name, resolved only when asked (:func:`resolve`): listing the kinds
(``depthwidth --help``) imports no measuring code, and a part may be any callable where a test
registers a toy kind (``tests/test_recipes.py``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from depthwidth.theory.cli import SEPRANK_RESULTS


@dataclass(frozen=True)
class Kind:
    """One experiment kind.

    ``name``: ``depthwidth exp NAME``, the producer named by its figures, and (where it writes
    records of its own) the records' ``kind``. ``cli``: the command's module (or an object) with
    ``HELP`` (one line), ``DESCRIPTION`` (the prediction tested, with its source),
    ``add_args(parser)`` and ``run(args) -> int`` (measure the missing units, analyse the stored
    ones, draw, print). ``measure``: the functions that measure and store (one or more). ``fit``:
    the function that analyses the stored measurements. ``results``: the default ``--results``
    (a directory relative to the checkout; the committed result where there is one).
    ``records``: the ``kind`` of the records it writes (``"train"`` for a sweep), or None where it
    stores a table instead. ``aliases``: other documented commands that run one of its parts.
    Each reference is ``"module:function"`` (``"module"`` for ``cli``) or the object itself.
    """

    name: str
    cli: Any
    measure: tuple[Any, ...]
    fit: Any
    results: str
    records: str | None
    aliases: tuple[str, ...] = ()

    def command(self) -> Any:
        """The command's module (imported now)."""
        return resolve(self.cli)

    def figures(self) -> tuple[str, ...]:
        """The names of the figures it draws (registered with it as their producer)."""
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.paper_figs import registry as figures

        return figures.names(self.name)


def resolve(ref: Any) -> Any:
    """``"module:attr"`` as that attribute, ``"module"`` as the module (imported now); any other
    object as itself. Raises ImportError/AttributeError for a name that does not resolve."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    mod = importlib.import_module(module)
    return getattr(mod, attr) if attr else mod


_E, _F = "depthwidth.experiments", "depthwidth.fits"
# In `depthwidth exp --help` order.
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("latency", "depthwidth.pipeline.exp_latency", (f"{_E}.latency:measure",), f"{_F}.latency:summarize",
         "results/exp-latency", "latency"),
    Kind("triple", "depthwidth.pipeline.exp_triple", (f"{_E}.runner:run_local_jobs",), f"{_F}.triple:analyse",
         "results/exp-triple", "train"),
    Kind("layerdrop", "depthwidth.pipeline.exp_layerdrop",
         ("depthwidth.models.train:train_run", f"{_E}.layerdrop:measure"), f"{_F}.layerdrop:summarise",
         "results/exp-layerdrop", "layerdrop"),
    Kind("sawtooth", "depthwidth.pipeline.exp_sawtooth",
         (f"{_E}.sawtooth_train:train", f"{_E}.sawtooth_train:construction"), f"{_F}.sawtooth:summarise",
         "results/exp-sawtooth", "sawtooth"),
    Kind("band", "depthwidth.pipeline.exp_band", (f"{_E}.runner:run_sweep",), f"{_F}.band:analyse",
         "results/exp-band", "train"),
    # Random weights (theory: exact arithmetic, no training) and trained ones (a short training
    # run on text); each part keeps its own documented command.
    Kind("seprank", "depthwidth.pipeline.exp_seprank",
         ("depthwidth.theory.seprank:write_table", f"{_E}.seprank_train:write_table"), f"{_F}.seprank:summarise",
         SEPRANK_RESULTS, None,
         aliases=("theory seprank --table", "seprank-trained --table", "seprank-fig")),
)}


def register(kind: Kind) -> Kind:
    """Add ``kind`` (last in ``exp --help``); returns it. Raises ValueError for a name taken.
    Register its figures with :func:`depthwidth.paper_figs.registry.register` under its name."""
    if kind.name in KINDS:
        raise ValueError(f"experiment kind {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove the kind called ``name`` (a test's toy); KeyError when there is none."""
    del KINDS[name]


def _resolves(ref: Any) -> Any:
    try:
        return resolve(ref)
    except (ImportError, AttributeError):
        return None


def missing_parts(kind: Kind) -> list[str]:
    """What ``kind`` lacks, one phrase each (empty when it is whole): a command module with
    ``HELP``, ``DESCRIPTION``, ``add_args`` and ``run``; at least one callable measure; a callable
    fit; at least one registered figure, each resolving to a callable; a results directory. Imports
    every part it names (the registry test runs it on every kind)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.paper_figs import registry as figures

    out = []
    cmd = _resolves(kind.cli)
    if cmd is None:
        out.append(f"command {kind.cli!r} does not import")
    else:
        out += [f"command has no {a}" for a in ("HELP", "DESCRIPTION") if not isinstance(getattr(cmd, a, None), str)]
        out += [f"command has no {a}()" for a in ("add_args", "run") if not callable(getattr(cmd, a, None))]
    if not kind.measure:
        out.append("no measure")
    out += [f"measure {m!r} is not callable" for m in kind.measure if not callable(_resolves(m))]
    if not callable(_resolves(kind.fit)):
        out.append(f"fit {kind.fit!r} is not callable")
    if not kind.figures():
        out.append("no figure registered with it as producer (depthwidth.paper_figs.registry)")
    out += [f"figure {n!r} does not resolve" for n in kind.figures()
            if not callable(_resolves(figures.get(n).function))]
    if not kind.results:
        out.append("no results directory")
    return out
