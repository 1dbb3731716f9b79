"""``depthwidth exp band``: Kaplan's shape band — train the deep shapes, analyse, draw, print.

Steps: (1) the ``band`` preset's runs that have no record under ``--results`` are trained
(:func:`depthwidth.experiments.runner.run_sweep`; finished runs are skipped, a killed run resumes
from its checkpoint); (2) the kind-"train" records of ``--results`` and of each ``--with``
directory (default ``results/law``, read only) are analysed by :mod:`depthwidth.fits.band`
(spread and parameter multiplier per budget) and the analysis is stored as
``RESULTS/band.json``; (3) the figure is drawn from it (:mod:`depthwidth.paper_figs.band_fig`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.console import emit
from depthwidth.errors import UserError
from depthwidth.fits import options
from depthwidth.units import format_count, parse_float

HELP = "Kaplan's shape band: the loss spread across d/L at fixed N, in percent and as a parameter multiplier"
DESCRIPTION = (
    "Kaplan et al. 2020 (section 3.1, Fig. 5): at fixed non-embedding N the loss varies only a few "
    "percent across aspect ratios d_model/n_layer from about 10 to 1000. Trains the 'band' preset's "
    "deep shapes (L=16) at the law protocol, reads them with the law grid (--with results/law), and "
    "reports per budget the spread of the shapes' losses (each corrected to exactly the budget along "
    "its depth's L(N) power law) in percent and as the factor in N the worst shape needs to match the "
    "best, with seed-paired bootstrap intervals.")
ANALYSIS = "band.json"


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="band", metavar="NAME|PATH", help="the runs to train (default band)")
    p.add_argument("--with", dest="with_dirs", action="append", metavar="DIR",
                   help="another results directory whose records are read too, never written (repeatable; "
                        "default results/law; 'none' for no other)")
    p.add_argument("--budgets", default=options.BAND_BUDGETS, metavar="N,N,...",
                   help=f"Kaplan N budgets (default {options.BAND_BUDGETS})")
    p.add_argument("--tolerance", default=str(options.BAND_TOLERANCE), metavar="FACTOR",
                   help=f"a shape is at budget B when its N is within this factor of B (default {options.BAND_TOLERANCE})")
    p.add_argument("--window", default=str(options.BAND_WINDOW), metavar="FACTOR",
                   help=f"each depth's L(N) slope is fitted on its cells within this factor of B "
                        f"(default {options.BAND_WINDOW})")
    p.add_argument("--bootstrap", default=str(options.BAND_BOOTSTRAP), metavar="B",
                   help=f"seed-paired bootstrap replicates (default {options.BAND_BOOTSTRAP}; 0: none)")
    p.add_argument("--no-sweep", action="store_true", help="train nothing: analyse the stored records only")
    p.add_argument("--data-dir", metavar="DIR", help="folder holding the corpus files (default $DEPTHWIDTH_DATA)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a config field of every run, e.g. train.steps=100 (a different protocol)")


def _factor(text: str, name: str) -> float:
    return parse_float(text, name=name, above=1.0, what="a factor")


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The checked analysis options (UserError, one line, for bad input)."""
    # pandas: ~0.5 s at import; query and --help must not pay it
    from depthwidth.fits import band

    withs = args.with_dirs if args.with_dirs is not None else ["results/law"]
    withs = [] if withs == ["none"] else withs
    for d in withs:
        if not Path(d).is_dir():
            raise UserError(f"--with {d}: no such results directory")
        if Path(d).resolve() == Path(args.results).resolve():
            raise UserError(f"--with {d} is the --results directory itself")
    return {"budgets": band.parse_budgets(args.budgets), "with": withs,
            "tolerance": _factor(args.tolerance, "--tolerance"), "window": _factor(args.window, "--window"),
            "n_boot": options.parse_bootstrap(args.bootstrap, minimum=0)}


def _preset(args: argparse.Namespace):
    """The preset with its --set overrides (UserError, one line, for a bad one: checked with
    --no-sweep too, so that a typo is not silently ignored)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.presets import load_preset, with_overrides

    return with_overrides(load_preset(args.preset), args.overrides)


def _sweep(args: argparse.Namespace, preset) -> dict[str, Any]:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.runner import run_sweep

    quiet = args.no_progress

    def log(msg: str) -> None:
        if not quiet:
            print(msg, file=sys.stderr, flush=True)

    rep = run_sweep(preset, args.results, data_dir=args.data_dir, progress=not quiet and sys.stderr.isatty(),
                    verbose=not quiet, log=log)
    if rep.failed:
        raise UserError(f"{len(rep.failed)} band run(s) failed: {rep.failed[0]}")
    return rep.to_dict()


def run(args: argparse.Namespace) -> int:
    # pandas: ~0.5 s at import; query and --help must not pay it
    from depthwidth.fits import band

    opts = _options(args)
    preset = _preset(args)
    sweep = None if args.no_sweep else _sweep(args, preset)
    table = band.merged_table([args.results, *opts["with"]])
    result = band.analyse(table, opts["budgets"], tolerance=opts["tolerance"], window=opts["window"],
                          n_boot=opts["n_boot"])
    storage.open_results(args.results).write_json_if_changed(ANALYSIS, result)  # last bits: storage.SAME_RTOL
    figures: list[str] = []
    if not args.no_figure:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.paper_figs.band_fig import draw

        figures = draw(result, args.out or str(Path(args.results) / "figures"))
    emit(args, {**result, "sweep": sweep, "analysis": str(Path(args.results) / ANALYSIS), "figures": figures},
         _text(result, sweep, figures))
    return 0


def _text(result: dict[str, Any], sweep: dict[str, Any] | None, figures: list[str]) -> str:
    lines = []
    if sweep is not None:
        lines.append(f"sweep: {len(sweep['trained'])} run(s) trained, {sweep['done_before']} already done, "
                     f"{sweep['remaining']} remaining")
    lines.append(f"Kaplan's claim: {result['claim']}")
    for b in result["budgets"]:
        ci, mci = b["spread_pct_ci"], b["multiplier_ci"]
        lines.append(f"N = {format_count(b['budget'])}: d/L {b['d_over_L_range'][0]:.3g}-{b['d_over_L_range'][1]:.3g} "
                     f"({b['decades']:.2f} decades), spread {b['spread_pct']:.2f} %"
                     + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
                     + f", worst shape needs x{b['multiplier']:.2f} N" + (f" [{mci[0]:.2f}, {mci[1]:.2f}]" if mci else "")
                     + f"; best L{b['best'][0]} d{b['best'][1]}, worst L{b['worst'][0]} d{b['worst'][1]}")
        cs = b.get("common_seeds")
        if cs and cs["seeds"]:
            lines.append(f"   on the seeds all its shapes share ({', '.join(map(str, cs['seeds']))}): spread "
                         f"{cs['spread_pct']:.2f} %, worst needs x{cs['multiplier']:.2f} N; best L{cs['best'][0]} "
                         f"d{cs['best'][1]}, worst L{cs['worst'][0]} d{cs['worst'][1]}")
        for r in sorted(b["shapes"], key=lambda r: -r["d_over_L"]):
            lines.append(f"   L={r['n_layer']:<3} d={r['d_model']:<4} d/L={r['d_over_L']:<7.3g} N={format_count(r['N']):<6} "
                         f"seeds={r['n_seeds']}  loss {r['loss']:.4f}  at N {r['loss_at_budget']:.4f}  "
                         f"+{r['excess_pct']:.2f} %  (alpha {r['alpha']:.3f}, {r['slope_from']})")
    lines += [f"figure: {f}" for f in figures]
    return "\n".join(lines)
