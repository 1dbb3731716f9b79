"""``depthwidth exp NAME``: the experiment kinds, each measure → store → analyse → draw its figure.

One subcommand per kind of :data:`depthwidth.pipeline.registry.KINDS` (where a kind is declared
with its parts), in its order. A kind's command is a module, ``depthwidth.pipeline.exp_<name>``
for the built-in ones, with

* ``HELP`` (one line) and ``DESCRIPTION`` (the prediction it tests, where it comes from);
* ``add_args(parser)``: its own flags (the shared ones below are already there);
* ``run(args) -> int``: do the missing units of work (records of kind ``<name>``,
  :mod:`depthwidth.experiments.kinds`, or ordinary training records), then draw the figure
  from the *stored* records and print the result (text, or ``--json``).

They sit in ``pipeline/`` because each one both measures (``experiments``/``models``) and draws
(``paper_figs``) — ARCHITECTURE.md's rule for orchestration. Nothing heavy at module level.

Shared flags: ``--results DIR`` (default: the kind's ``results``, e.g. ``results/exp-<name>``;
records accumulate there and a rerun skips finished units), ``--out DIR`` (figures; default
``RESULTS/figures``), ``--no-figure``, ``--no-progress``, ``--json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from depthwidth import storage
from depthwidth.console import add_json_flag
from depthwidth.errors import UserError
from depthwidth.pipeline.registry import KINDS


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("exp", help=f"the experiment kinds: {', '.join(KINDS)}",
                       description="Run one experiment kind (docs/results/seed-experiments.md): its records go "
                                   "to --results (a rerun skips finished work), its figure to --out.")
    esub = e.add_subparsers(dest="experiment", metavar="NAME", parser_class=type(e))
    for kind in KINDS.values():
        mod = kind.command()
        p = esub.add_parser(kind.name, help=mod.HELP, description=mod.DESCRIPTION)
        p.add_argument("--results", metavar="DIR", default=kind.results,
                       help=f"results directory (default {kind.results})")
        p.add_argument("--out", metavar="DIR", help="where the figure goes (default RESULTS/figures)")
        p.add_argument("--no-figure", action="store_true", help="store the records only")
        p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
        add_json_flag(p)
        mod.add_args(p)
        p.set_defaults(func=_paths_checked(mod.run))
    e.set_defaults(func=_no_name)


def _paths_checked(run):
    """``run`` after a check that ``--results`` and ``--out`` are not files (nor URLs), so such a
    mistake is one line before any work (measuring, training), not an OSError after it."""
    def checked(args: argparse.Namespace) -> int:

        for flag, path in (("--results", args.results), ("--out", args.out)):
            if path and storage.is_url(path):  # the seed experiments' own files are written with local paths
                raise UserError(f"{flag} {path}: the seed experiments read and write local paths; a URL "
                                "(depthwidth.storage) works for train, sweep, fit, figs and reproduce")
            if path and Path(path).exists() and not Path(path).is_dir():
                raise UserError(f"{flag} {path} exists and is not a directory")
        return run(args)

    return checked


def _no_name(args: argparse.Namespace) -> int:
    raise UserError(f"exp needs an experiment name: one of {', '.join(KINDS)} "
                    "(depthwidth exp --help)")
