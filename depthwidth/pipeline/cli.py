"""``depthwidth reproduce`` (thin: parse, call :func:`depthwidth.pipeline.reproduce`, print),
and ``depthwidth sweep --refine``.

The sweep options are the ``sweep`` command's (:mod:`depthwidth.experiments.cli`); the fit
options' defaults are :class:`~depthwidth.fits.options.FitOptions`'. Nothing heavy at module level.

Refinement (:mod:`depthwidth.pipeline.refine`) fits the records between rounds of training, so
it cannot live in ``experiments`` (a sibling of ``fits``). :func:`register` therefore adds its
flags to the ``sweep`` command that :mod:`depthwidth.experiments.cli` registered before it
(``depthwidth.cli._COMMANDS`` order) and routes that command through :func:`_sweep`, the
experiments' sweep steps with a refinement round around them when asked.
"""

from __future__ import annotations

import argparse

from depthwidth import storage
from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.experiments.cli import (
    default_results,
    download,
    end_sweep,
    load,
    start_sweep,
    sweep_args,
    sweep_kwargs,
)
from depthwidth.fits.options import FitOptions


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("reproduce", help="sweep + fit + figures + summary for a preset, in one command",
                       description="Run the preset's sweep (skipping finished runs), fit the transition "
                                   "points and the law ln d_x = a + b*L, draw the figures and write "
                                   "summary.json / summary.md next to them.")
    sweep_args(r, results_required=False)
    r.add_argument("--out", metavar="DIR",
                   help="where fit.json, figures/ and summary.{json,md} go (default: the results directory)")
    r.add_argument("--pairs", default=FitOptions.pairs,
                   help=f"depth pairs for the fit: {FitOptions.pairs} (default) or adjacent")
    r.add_argument("--assign", default=FitOptions.assign,
                   help=f"depth of a transition point: {FitOptions.assign} (default), arith, shallow, deep")
    r.add_argument("--bootstrap", default=str(FitOptions.bootstrap),
                   help=f"bootstrap replicates for the transition errors (default {FitOptions.bootstrap})")
    r.add_argument("--no-figures", action="store_true", help="skip the figures")
    add_json_flag(r)
    r.set_defaults(func=_reproduce)
    _add_refine(sub)


def _add_refine(sub: argparse._SubParsersAction) -> None:
    """``--refine`` and the hidden ``--refine-round`` on the ``sweep`` command (module doc)."""
    s = sub.choices.get("sweep")
    if s is None:
        raise RuntimeError("depthwidth.pipeline.cli.register needs the sweep command registered first")
    s.add_argument("--refine", action="store_true",
                   help="after the grid, add widths inside each transition's bracket until it is resolved "
                        "(the preset's [refine] table; depthwidth.pipeline.refine)")
    s.add_argument("--refine-round", action="store_true", help=argparse.SUPPRESS)  # a refinement round's child
    s.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    """``depthwidth sweep`` (:mod:`depthwidth.experiments.cli`'s steps), refining after the grid
    with ``--refine``; a ``--refine-round`` child worker trains the round its parent computed
    (the same, from the same records)."""
    from depthwidth.experiments.ray_runner import run_sweep_on

    if args.refine or args.refine_round:
        from depthwidth.pipeline import refine  # fits and pandas: only when refining
    preset, kw = start_sweep(args)
    child = kw.pop("child_args")
    if args.refine_round:
        preset, _ = refine.round_preset(preset, args.results)
    rep = run_sweep_on(preset, args.results, child, **kw)
    if args.refine and not rep.failed:
        rep = refine.refine_after_grid(preset, args.results, child, kw, rep)
    return end_sweep(args, rep)


def _reproduce(args: argparse.Namespace) -> int:
    from depthwidth.pipeline.run import reproduce
    from depthwidth.pipeline.summary import summary_text
    from depthwidth.units import parse_int

    preset = load(args)
    kw = sweep_kwargs(args)
    options = FitOptions(pairs=args.pairs, assign=args.assign,
                         bootstrap=parse_int(args.bootstrap, name="--bootstrap", minimum=2))
    results = args.results or default_results(preset.name)
    if args.out and (blocker := storage.file_in_the_way(args.out)):  # before the sweep, which may train for hours
        raise UserError(f"--out {args.out}: {blocker} exists and is not a directory")
    if args.download:
        download(preset, args.data_dir)
    summary = reproduce(preset, results, out=args.out, fit_options=options, figures=not args.no_figures,
                        sweep_kwargs=kw)
    emit(args, summary, summary_text(summary))
    return 0 if summary["complete"] else 1
