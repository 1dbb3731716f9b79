"""``depthwidth presets``, ``depthwidth sweep`` and ``depthwidth reproduce`` (thin: parse, call, print).

Nothing heavy at module level: the runner imports jax (through the engine) only when it trains.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.fits.options import FitOptions

DEFAULT_RESULTS = "results/<preset>"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list the sweep presets, or show one",
                       description="Without NAME: the built-in presets. With NAME (or a .toml path): its "
                                   "description, grid and runs, validated.")
    p.add_argument("name", nargs="?", metavar="NAME|PATH", help="a preset to show")
    add_json_flag(p)
    p.set_defaults(func=_presets)

    s = sub.add_parser("sweep", help="train every run of a preset (resumable, several workers)",
                       description="Train each run of the preset that has no record yet: finished runs are "
                                   "skipped, unfinished ones resume from their checkpoints, and a claim file "
                                   "per run keeps workers sharing one results directory apart.")
    _sweep_args(s, results_required=True)
    add_json_flag(s)
    s.set_defaults(func=_sweep)

    r = sub.add_parser("reproduce", help="sweep + fit + figures + summary for a preset, in one command",
                       description="Run the preset's sweep (skipping finished runs), fit the transition "
                                   "points and the law ln d_x = a + b*L, draw the figures and write "
                                   "summary.json / summary.md next to them.")
    _sweep_args(r, results_required=False)
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


def _sweep_args(p: argparse.ArgumentParser, *, results_required: bool) -> None:
    p.add_argument("--preset", required=True, metavar="NAME|PATH",
                   help="a built-in preset (smoke, cpu, levine2020; see `depthwidth presets`) or a .toml file")
    if results_required:
        p.add_argument("--results", required=True, metavar="DIR", help="results directory shared by all workers")
    else:
        p.add_argument("--results", metavar="DIR", help=f"results directory (default {DEFAULT_RESULTS} in the "
                                                        "current directory)")
    p.add_argument("--worker", default="0", metavar="I", help="this worker's index, 0..N-1 (default 0)")
    p.add_argument("--num-workers", default="1", metavar="N", help="number of workers sharing --results (default 1)")
    p.add_argument("--jobs", default="1", metavar="J",
                   help="worker processes on this machine (default 1); XLA compiles on one core, so on a "
                        "multi-core CPU a few jobs can shorten a compile-bound sweep of small models")
    p.add_argument("--no-steal", action="store_true",
                   help="train only this worker's own runs, not other workers' unclaimed ones")
    p.add_argument("--stale-after", default="600", metavar="SECONDS",
                   help="take over a claim whose heartbeat is older than this (default 600)")
    p.add_argument("--data-dir", metavar="DIR", help="folder holding the corpus files (default $DEPTHWIDTH_DATA)")
    p.add_argument("--download", action="store_true",
                   help="fetch missing corpora that have a canonical URL (tinyshakespeare) into the data dir")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a config field in every run, e.g. train.steps=100 (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no per-run progress bars")
    p.add_argument("--cpus", help=argparse.SUPPRESS)  # set by --jobs for its child workers: cores to pin to


def _load(args: argparse.Namespace):
    from depthwidth.experiments.presets import load_preset, with_overrides

    return with_overrides(load_preset(args.preset), args.overrides)


def _float(text: str, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UserError(f"{name} must be a number, got {text!r}") from None
    if not v > 0:
        raise UserError(f"{name} must be > 0, got {text!r}")
    return v


def _sweep_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    from depthwidth.units import parse_int

    n = parse_int(args.num_workers, name="--num-workers", minimum=1)
    i = parse_int(args.worker, name="--worker", minimum=0)
    if i >= n:
        raise UserError(f"--worker must be in 0..{n - 1} with --num-workers {n}, got {i}")
    stale = _float(args.stale_after, "--stale-after")
    # What a child worker process needs to run the same sweep (--jobs).
    child = ["--preset", args.preset, "--stale-after", args.stale_after]
    child += [x for o in args.overrides for x in ("--set", o)]
    child += ["--data-dir", args.data_dir] if args.data_dir else []
    child += ["--no-steal"] if args.no_steal else []
    return {"worker": i, "num_workers": n, "steal": not args.no_steal, "data_dir": args.data_dir,
            "stale_after_s": stale, "progress": not args.no_progress and sys.stderr.isatty(),
            "jobs": parse_int(args.jobs, name="--jobs", minimum=1), "child_args": child}


def _download(preset, data_dir: str | None) -> None:
    from depthwidth.data import corpora

    for name in preset.corpora:
        if name in corpora.CORPORA and corpora.CORPORA[name].url:
            corpora.locate(name, data_dir, download=True)


def _presets(args: argparse.Namespace) -> int:
    from depthwidth.experiments import presets

    if args.name is None:
        rows = []
        for name in presets.available():
            p = presets.load_preset(name)
            rows.append({"name": p.name, "n_runs": len(p.runs), "depths": list(p.depths), "seeds": len(p.seeds),
                         "corpora": list(p.corpora), "expected_minutes": p.expected_minutes,
                         "description": p.description})
        text = "\n".join(
            f"{r['name']:<11} {r['n_runs']:>4} runs  depths {','.join(map(str, r['depths']))}  "
            f"{r['seeds']} seed(s)  {','.join(r['corpora'])}"
            + (f"  ~{r['expected_minutes']:g} min" if r["expected_minutes"] else "")
            for r in rows)
        emit(args, {"presets": rows}, text + "\n(depthwidth presets NAME shows one)")
        return 0
    p = presets.load_preset(args.name)
    emit(args, p.summary(), _preset_text(p))
    return 0


def _preset_text(p) -> str:
    from depthwidth.theory.accounting import kaplan_n
    from depthwidth.units import format_count

    lines = [f"{p.name} ({p.path})", p.description]
    if p.notes:
        lines.append(f"notes: {p.notes}")
    b = p.base
    lines.append(f"base: H={b.model.n_head} T={b.model.seq_len} B={b.train.batch_size} steps={b.train.steps} "
                 f"lr={b.train.lr:g} warmup={b.train.warmup_steps} tokenizer={b.data.tokenizer}"
                 + (f" V={b.data.bpe_vocab_size}" if b.data.tokenizer == "bpe" else ""))
    lines.append(f"grid: {len(p.runs)} runs = {len(p.corpora)} corpora x {len(p.seeds)} seeds x "
                 f"{sum(len(w) for w in p.widths.values())} (depth, width) cells; corpora {', '.join(p.corpora)}")
    for L in p.depths:
        ws = p.widths[L]
        lines.append(f"  L={L:<3} d = {', '.join(map(str, ws))}   N = 12*L*d^2 = "
                     + ", ".join(format_count(kaplan_n(L, d)) for d in ws))
    if p.expected_minutes:
        lines.append(f"expected wall time: ~{p.expected_minutes:g} min")
    return "\n".join(lines)


def _sweep(args: argparse.Namespace) -> int:
    from depthwidth.experiments.runner import report_text, run_local_jobs

    if args.cpus:
        import os

        from depthwidth.units import parse_int_list

        try:
            os.sched_setaffinity(0, set(parse_int_list(args.cpus, name="--cpus", minimum=0)))
        except (OSError, AttributeError) as e:
            raise UserError(f"--cpus {args.cpus}: cannot pin to these cores ({e})") from None
    preset = _load(args)
    kw = _sweep_kwargs(args)
    if args.download:
        _download(preset, args.data_dir)
    rep = run_local_jobs(preset, args.results, kw.pop("child_args"), **kw)
    emit(args, rep.to_dict(), report_text(rep))
    return 0 if not rep.failed else 1


def _reproduce(args: argparse.Namespace) -> int:
    from depthwidth.experiments.summary import reproduce, summary_text
    from depthwidth.units import parse_int

    preset = _load(args)
    kw = _sweep_kwargs(args)
    options = FitOptions(pairs=args.pairs, assign=args.assign,
                         bootstrap=parse_int(args.bootstrap, name="--bootstrap", minimum=2))
    results = args.results or f"results/{preset.name}"
    if args.download:
        _download(preset, args.data_dir)
    summary = reproduce(preset, results, out=args.out, fit_options=options, figures=not args.no_figures,
                        sweep_kwargs=kw)
    emit(args, summary, summary_text(summary))
    return 0 if summary["complete"] else 1
