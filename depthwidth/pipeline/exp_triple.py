"""``depthwidth exp triple``: train the equal-weight triple (a sweep preset), compare the shapes.

Steps: (1) train every run of the preset that has no record under ``--results`` with the
ordinary sweep runner (:func:`depthwidth.experiments.runner.run_local_jobs`: finished runs are
skipped, an interrupted one resumes from its checkpoint, so a killed experiment picks up where
it stopped); (2) load the stored kind "train" records (:func:`depthwidth.fits.table.load_table`)
and analyse them (:func:`depthwidth.fits.triple.analyse`: seed-paired differences, the spread
of the triple, the half-budget gap, a paired bootstrap, the verdicts), written to
``RESULTS/triple.json``; (3) draw ``exp_triple`` (PNG + PDF) from that analysis;
(4) print it (text, or one JSON object with ``--json``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.console import emit
from depthwidth.errors import UserError
from depthwidth.fits.options import parse_bootstrap
from depthwidth.units import format_count, parse_int

HELP = "equal-weight shapes (2x96, 8x48, 32x24 at CPU scale) vs halving the budget"
DESCRIPTION = (
    "Train the preset's equal-weight triple and its half-budget control (default preset 'triple': "
    "2x96, 8x48, 32x24 with N = 12*L*d^2 = 221,184 each, and 8x34 at 0.502x; 'triple-full' is the "
    "14.2M-weight accelerator version 2x768, 8x384, 32x192), then compare the shapes seed by seed. "
    "Prediction (Kaplan et al. 2020 sec. 3.1; docs/concepts.md): the middle shape wins, both ends trail it, "
    "and the spread of the three is small next to halving the budget. Finished runs are skipped.")
ANALYSIS_FILE = "triple.json"


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="triple", metavar="NAME|PATH",
                   help="sweep preset holding the triple and its control (default triple; triple-full on an accelerator)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a config field in every run, e.g. train.steps=2000 (repeatable; "
                        "use a fresh --results: runs of other configs do not mix)")
    p.add_argument("--data-dir", metavar="DIR", help="folder holding the corpus files (default $DEPTHWIDTH_DATA)")
    p.add_argument("--jobs", default="1", metavar="J", help="local worker processes (default 1)")
    p.add_argument("--bootstrap", default="2000", metavar="B", help="paired bootstrap replicates (default 2000)")
    p.add_argument("--no-train", action="store_true", help="analyse and draw the stored records only")


def _train(args: argparse.Namespace, preset, jobs: int) -> dict[str, Any]:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.runner import run_local_jobs

    child = ["--preset", args.preset] + [x for o in args.overrides for x in ("--set", o)]
    child += ["--data-dir", args.data_dir] if args.data_dir else []
    log = (lambda line: None) if args.no_progress else (lambda line: print(line, file=sys.stderr, flush=True))
    rep = run_local_jobs(preset, args.results, child, jobs=jobs, data_dir=args.data_dir,
                         progress=not args.no_progress and sys.stderr.isatty(), verbose=not args.no_progress, log=log)
    return rep.to_dict()


def run(args: argparse.Namespace) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.presets import load_preset, with_overrides

    # pandas: ~0.5 s at import; query and --help must not pay it
    from depthwidth.fits.table import load_table

    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits.triple import analyse

    n_boot = parse_bootstrap(args.bootstrap, minimum=1)
    jobs = parse_int(args.jobs, name="--jobs", minimum=1)  # checked with --no-train too
    preset = with_overrides(load_preset(args.preset), args.overrides)
    if Path(args.results).exists() and not Path(args.results).is_dir():
        raise UserError(f"--results {args.results} exists and is not a directory")
    sweep = None if args.no_train else _train(args, preset, jobs)
    if not Path(args.results).is_dir():
        raise UserError(f"--results {args.results}: no records yet (run without --no-train)")
    table = load_table(args.results)
    res = analyse(table, n_boot=n_boot)
    res["preset"] = preset.name
    res["steps"] = sorted({int(s) for s in table.runs.loc[table.runs["reason"].isna(), "steps"].dropna()})
    res["excluded"] = table.summary()["excluded"]
    res["unfinished"] = table.unfinished
    storage.open_results(args.results).write_json_if_changed(ANALYSIS_FILE, res)
    if not args.no_figure:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.paper_figs.triple_fig import draw

        res["figure"] = draw(res, args.out or Path(args.results) / "figures")
    out = {**res, "sweep": sweep}
    emit(args, out, _text(res))
    return 1 if sweep and sweep.get("failed") else 0


def _pm(x: float | None) -> str:
    return "" if x is None else f" ± {x:.4f}"


def _ci(ci: list[float] | None) -> str:
    return "" if ci is None else f" [95% {ci[0]:+.4f}, {ci[1]:+.4f}]"


def _text(res: dict[str, Any]) -> str:
    lines = [f"exp triple ({res['preset']}): N = 12*L*d^2 = {format_count(res['N'])}, {res['steps']} steps, "
             f"paired on seeds {res['seeds']}; test loss in nats/char (mean ± sem over seeds)"]
    for r in res["shapes"]:
        lines.append(f"  L={r['n_layer']:<3} d={r['d_model']:<4} d/L={r['aspect']:<6g} {r['mean']:.4f}{_pm(r['sem'])}"
                     f"  ({len(r['seeds'])} seeds)")
    c = res.get("control")
    if c:
        lines.append(f"  control L={c['n_layer']} d={c['d_model']} N={format_count(c['N'])} "
                     f"({res['control_N_ratio']:.4f}x): {c['mean']:.4f}{_pm(c['sem'])}")
    lines.append("  seed-paired differences a - b (mean ± sem, Student-t 95%):")
    for p in res["pairs"]:
        lines.append(f"    {p['a'][0]}x{p['a'][1]} - {p['b'][0]}x{p['b'][1]}: {p['mean']:+.4f}{_pm(p['sem'])}{_ci(p['ci95'])}")
    b = res["bootstrap"]
    lines.append(f"  winner {res['winner'][0]}x{res['winner'][1]}; bootstrap win shares {b['win_share']} "
                 f"({b['n']} replicates over {b['resample']})")
    lines.append(f"  spread (max - min of the triple) {res['spread']:.4f} ({res['spread_pct']:.2f}%){_ci(b['spread_ci95'])}")
    if res.get("half_gap"):
        g = res["half_gap"]
        ratio = "n/a" if res["ratio"] is None else f"{res['ratio']:.3f}"
        lines.append(f"  half-budget gap (control - middle) {g['mean']:+.4f}{_pm(g['sem'])}{_ci(b['gap_ci95'])}; "
                     f"spread/gap {ratio}; P(spread < gap) {b['p_spread_below_gap']:.3f}")
    v = res["verdict"]
    lines.append("  verdict: " + "; ".join(f"{k.replace('_', ' ')}: {w}" for k, w in v.items()))
    if res.get("excluded"):
        lines.append(f"  excluded: {[(e['run_id'], e['reason']) for e in res['excluded']]}")
    if res.get("figure"):
        lines.append(f"  figure: {res['figure'][0]}")
    return "\n".join(lines)
