"""``depthwidth sweep`` and ``depthwidth reproduce`` (thin: parse, call, print).

Both take the same sweep options (:func:`depthwidth.experiments.cli.sweep_args`), which become
one executor (:mod:`depthwidth.experiments.executors`: in this process, ``--jobs`` local worker
processes, Ray tasks, or Ray host groups) that trains the preset's runs; the fit options'
defaults are :class:`~depthwidth.fits.options.FitOptions`'. Nothing heavy at module level.

``sweep`` is registered here, once, because of ``--refine``: refinement
(:mod:`depthwidth.pipeline.refine`) fits the records between rounds of training, so it cannot
live in ``experiments`` (a sibling of ``fits``).
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
    say_default_results,
    start_sweep,
    sweep_args,
    sweep_executor,
)
from depthwidth.fits.options import FitOptions, parse_bootstrap


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("sweep", help="train every run of a preset (resumable, several workers)",
                       description="Train each run of the preset that has no record yet: finished runs are "
                                   "skipped, unfinished ones resume from their checkpoints, and a claim file "
                                   "per run keeps workers sharing one results directory apart. The runs are "
                                   "trained in this process, by --jobs local worker processes, or on Ray "
                                   "(--ray, one task or --ray-hosts-per-run processes per run).")
    sweep_args(s, results_required=True)
    s.add_argument("--refine", action="store_true",
                   help="after the grid, add widths inside each transition's bracket until it is resolved "
                        "(the preset's [refine] table; depthwidth.pipeline.refine)")
    s.add_argument("--refine-round", metavar="CELLS", help=argparse.SUPPRESS)  # a refinement round's child: LxD,...
    add_json_flag(s)
    s.set_defaults(func=_sweep)

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


def _sweep(args: argparse.Namespace) -> int:
    """``depthwidth sweep``: the preset's runs through the executor the options ask for, then,
    with ``--refine``, refinement rounds; a ``--refine-round CELLS`` child worker trains the
    round's cells that its parent planned."""
    if args.refine or args.refine_round is not None:
        # pandas: ~0.5 s at import; query and --help must not pay it
        from depthwidth.pipeline import refine  # fits and pandas: only when refining
    preset, executor = start_sweep(args)
    if args.refine_round is not None:
        preset = refine.cells_preset(preset, refine.parse_cells(args.refine_round))
    rep = executor.run(preset, args.results)
    if args.refine and not rep.failed:
        rep = refine.refine_after_grid(preset, args.results, executor, rep)
    return end_sweep(args, rep)


def _reproduce(args: argparse.Namespace) -> int:
    # looked up at call time: tests replace it with monkeypatch
    from depthwidth.pipeline.run import reproduce

    # loaded when the command runs: at the top it loaded numpy (fits.lawfit, fits.transitions)
    # whenever the parser was built; without numpy `depthwidth query` takes 0.31 s, not 0.51 s
    from depthwidth.pipeline.summary import summary_text

    preset = load(args)
    executor = sweep_executor(args)
    options = FitOptions(pairs=args.pairs, assign=args.assign,
                         bootstrap=parse_bootstrap(args.bootstrap))
    results = args.results
    if not results:
        results = default_results(preset.name)
        say_default_results(preset.name, results)
    if args.out and (blocker := storage.file_in_the_way(args.out)):  # before the sweep, which may train for hours
        raise UserError(f"--out {args.out}: {blocker} exists and is not a directory")
    if args.download:
        download(preset, args.data_dir)
    summary = reproduce(preset, results, out=args.out, fit_options=options, figures=not args.no_figures,
                        executor=executor)
    emit(args, summary, summary_text(summary))
    return 0 if summary["complete"] else 1
