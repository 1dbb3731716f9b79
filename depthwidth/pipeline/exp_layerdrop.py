"""``depthwidth exp layerdrop``: train a deep LM once (weights kept), delete layers, compare with width.

Steps: (1) the trained run: ``--run DIR`` (any finished run with kept weights), else the preset's
base config (default ``layerdrop``: L = 16, d = 48 on char Austen) trained through the ordinary
path (:func:`depthwidth.models.train.train_run`, ``train.keep_weights`` forced on) into
``RESULTS/runs/``; a finished run is not retrained. (2) one ``layerdrop`` record per deletion
(:mod:`depthwidth.experiments.layerdrop`; done units are skipped). (3) the summary from the stored
records (:mod:`depthwidth.fits.layerdrop`), (4) the figure (:mod:`depthwidth.paper_figs.layerdrop_fig`),
(5) the printout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from depthwidth import hostcpu, records
from depthwidth.console import emit
from depthwidth.errors import UserError
from depthwidth.units import parse_int_list

HELP = "delete k contiguous layers of a trained LM at every offset; compare with MLP width"
DESCRIPTION = (
    "Train a deep char-level LM once (preset 'layerdrop': L=16, d=48; weights kept), then delete every "
    "contiguous run of k layers (k = 1, 2, 4) at every offset and measure the test loss, next to removing "
    "the same number of parameters as MLP hidden units from every layer (random and smallest-norm units). "
    "Prediction (Gromov et al. 2024, arXiv 2403.17887; Men et al. 2024, ShortGPT, arXiv 2403.03853): late "
    "runs are cheap to delete, early ones expensive, and no comparable 'free' slice of width exists.")


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="layerdrop", metavar="NAME|PATH",
                   help="preset whose base config is the trained model (default layerdrop)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a field of the trained model's config (repeatable)")
    p.add_argument("--run", metavar="DIR", help="use this finished run (weights kept) instead of training one")
    p.add_argument("--k", default="1,2,4", metavar="LIST", help="run lengths to delete (default 1,2,4)")
    p.add_argument("--control-seeds", type=int, default=3, metavar="N",
                   help="random choices of MLP units per k for the width control (default 3; 0 = none)")
    p.add_argument("--data-dir", help="directory with the raw corpora (default: $DEPTHWIDTH_DATA)")


def parse_ks(text: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]; UserError for anything but distinct comma-separated integers
    (a repeated k would measure the same deletions twice)."""
    return parse_int_list(text, name="--k", minimum=0, unique=True)  # 0 and too large: check_ks says the range


def trained_run(args: argparse.Namespace, ks: list[int]) -> tuple[dict[str, Any], Path]:
    """(record, run directory) of the model to delete from: ``--run``, or the preset's trained
    (or already stored) run. k is checked against its depth before any training."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.layerdrop import check_ks

    if args.run:
        rdir = Path(args.run)
        if not (rdir / "record.json").is_file():
            raise UserError(f"--run {rdir}: no record.json there (not a finished run)")
        rec = records.read_record(rdir / "record.json")
        if records.kind_of(rec) != records.TRAIN or rec["status"] != "finished":
            raise UserError(f"--run {rdir}: not a finished training run")
        check_ks(ks, rec["n_layer"])
        return rec, rdir
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.config import override

    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.presets import load_preset

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.train import train_run

    cfg = override(load_preset(args.preset).base, [*args.overrides, "train.keep_weights=true"])
    check_ks(ks, cfg.model.n_layer)
    rec = train_run(cfg, args.results, data_dir=args.data_dir,
                    progress=not args.no_progress and sys.stderr.isatty(), verbose=not args.no_progress)
    if rec["status"] != "finished":
        raise UserError(f"the trained model {rec['run_id']} {rec['status']}: nothing to delete from")
    return rec, records.run_dir(args.results, rec["run_id"])


def _progress(args: argparse.Namespace):
    if args.no_progress:
        return None
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.runner import fmt_duration

    t0 = time.perf_counter()

    def show(done: int, total: int, rec: dict[str, Any]) -> None:
        el = time.perf_counter() - t0
        d = rec["config"]["deletion"]
        what = {"none": "full model", "layers": f"layers k={d['k']} start={d.get('start')}",
                "mlp_units": f"mlp units k={d['k']} {d.get('choice')} {d.get('seed', '')}"}[d["what"]]
        print(f"layerdrop {done}/{total}: {what:<28} delta {rec['delta_test_loss']:+.4f}  "
              f"elapsed {fmt_duration(el)}, ETA {fmt_duration(el / done * (total - done))}", file=sys.stderr, flush=True)

    return show


def run(args: argparse.Namespace) -> int:
    hostcpu.pin_one_core()  # one XLA thread, as the training run had (before jax starts)
    ks = parse_ks(args.k)
    if args.control_seeds < 0:
        raise UserError(f"--control-seeds must be >= 0, got {args.control_seeds}")
    if args.run is None and Path(args.results).exists() and not Path(args.results).is_dir():
        raise UserError(f"--results {args.results} exists and is not a directory")
    rec, rdir = trained_run(args, ks)
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.layerdrop import check_ks, deletions, measure

    L, d = rec["n_layer"], rec["d_model"]
    units = deletions(check_ks(ks, L), L, d, rec["config"]["model"]["d_ff"] or 4 * d, seeds=args.control_seeds)
    n_new = measure(rec, rdir, args.results, units, data_dir=args.data_dir, progress=_progress(args))
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits.layerdrop import load, summarise

    summary = summarise(load(args.results), run_id=rec["run_id"])
    out: dict[str, Any] = {"experiment": "layerdrop", "results": str(args.results), "evaluated": n_new,
                           "units": len(units), "summary": summary}
    if not args.no_figure:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.paper_figs.layerdrop_fig import draw

        paths, out["caption"] = draw(summary, args.out or Path(args.results) / "figures")
        out["figures"] = [str(p) for p in paths]
    emit(args, out, report_text(out))
    return 0


def report_text(out: dict[str, Any]) -> str:
    """The plain-text report of ``run``'s result dict."""
    s = out["summary"]
    lines = [f"layerdrop: run {s['run_id']} (L={s['n_layer']}, d={s['d_model']}), full-model test loss "
             f"{s['base_test_loss']:.4f} nats/token on {s['test_sequences']} test windows; "
             f"{out['evaluated']} of {out['units']} units evaluated now (the rest were stored)"]
    for k, row in s["by_k"].items():
        lines.append(f"k={k} ({row['removed_params']:,} params): delta by first deleted block "
                     + " ".join(f"{o}:{v:+.3f}" for o, v in zip(row["offsets"], row["delta"])))
        if "cheapest" in row:
            lines.append(f"  cheapest start {row['cheapest']['start']} ({row['cheapest']['delta']:+.4f}), dearest "
                         f"start {row['dearest']['start']} ({row['dearest']['delta']:+.4f}); first block(s) "
                         f"{_f(row['first'])}, last {_f(row['last'])}")
        c = row.get("control")
        if c:
            rnd = ", ".join(f"{v:+.4f}" for v in c["random"]) or "none"
            lines.append(f"  width control: {c['units_per_layer']} MLP units of every layer ({c['fraction_of_mlp']:.1%}, "
                         f"{c['removed_params']:,} params): random {rnd}; smallest-norm {_f(c['norm'])}")
    for p in out.get("figures", []):
        lines.append(f"figure: {p}")
    return "\n".join(lines)


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.4f}"
