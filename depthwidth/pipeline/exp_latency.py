"""``depthwidth exp latency``: time the forward pass of equal-weight shapes → records → fit → figure.

Steps: check the flags (bad input: one line, exit 2, before jax starts); fix the XLA:CPU
thread count (:func:`depthwidth.experiments.latency.select_threads`); time every unit without a
record (:func:`~depthwidth.experiments.latency.measure`: one record per shape, and per shape
with the head when ``--with-head``); read the stored records of the requested units back, fit
the latency model (:mod:`depthwidth.fits.latency`; ``RESULTS/latency_model.json`` holds the model
of every group of stored records, one group per device, threads, dtype and head/no head),
draw the figure (:mod:`depthwidth.paper_figs.latency_fig`) and print the table.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from depthwidth import records, storage
from depthwidth.console import emit
from depthwidth.errors import UserError
from depthwidth.pipeline.registry import KINDS
from depthwidth.units import format_count, parse_int

HELP = "forward latency of equal-weight shapes: depth is serial, width is parallel"
DESCRIPTION = (
    "Time the forward pass of the transformer stack alone (L blocks + final LN; no embedding, no head) "
    "for shapes of equal weight 12·L·d² (default 3x1536, 12x768, 27x512: 84,934,656 each), B=1, T=1024, "
    "median of --repeats calls after compile and --warmup. Prediction (issue 11; docs/concepts.md): at equal "
    "matmul arithmetic the time grows monotonically with depth, because depth is serial work and larger "
    "matmuls run nearer the machine's peak; the attention FLOPs grow as L·d (4,608 / 9,216 / 13,824). "
    "Reports seconds, achieved FLOP/s, the attention share and the slowdown against the shallowest shape, "
    "and fits the latency model seconds = FLOPs/R + c·L. --with-head also times the whole LM (embeddings "
    "and the tied vocabulary head), to show the vocabulary's share. One record per unit; a rerun skips "
    "measured units.")
MODEL_FILE = "latency_model.json"
COMMITTED = KINDS["latency"].results  # the default --results, whose records are the checkout's result


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", default="3x1536,12x768,27x512", metavar="LxD,...",
                   help="depth x width shapes (default 3x1536,12x768,27x512)")
    p.add_argument("--seq-len", default="1024", metavar="T", help="tokens per sequence (default 1024)")
    p.add_argument("--batch", default="1", metavar="B", help="sequences per call (default 1)")
    p.add_argument("--repeats", default="5", metavar="N", help="timed calls per unit; the median is reported (default 5)")
    p.add_argument("--warmup", default="1", metavar="N", help="untimed calls after compiling (default 1)")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                   help="weights and activations (default float32)")
    p.add_argument("--n-head", default="auto", metavar="H",
                   help="heads of every shape, or auto = d/64 (GPT-2's head size; default auto)")
    p.add_argument("--threads", default="all", choices=("1", "all"),
                   help="XLA:CPU threads: all visible cores (default; width's parallelism needs them) or 1 "
                        "(the training setting); fixed when jax starts, so one setting per process")
    p.add_argument("--with-head", action="store_true",
                   help="also time the whole LM (embeddings + tied head over --vocab-size tokens)")
    p.add_argument("--vocab-size", default="50257", metavar="V", help="vocabulary of --with-head (default 50257, GPT-2)")
    p.add_argument("--scan-unroll", default="1", metavar="K",
                   help="layers per scan iteration, as model.scan_unroll (default 1, the training default)")
    p.add_argument("--decode", action="store_true",
                   help="time KV-cache decoding instead: median seconds per generated token of the whole LM "
                        "(vocabulary --vocab-size) after a --seq-len-token prompt, prefill timed apart; records "
                        "of kind latency_decode beside the forward ones")
    p.add_argument("--new-tokens", default="16", metavar="N",
                   help="--decode: tokens generated per repeat (the first from the prefill; default 16)")


def _checked(args: argparse.Namespace) -> dict[str, Any]:
    """The flags as numbers; UserError (one line) on bad input. Nothing here starts jax."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import latency

    shapes = latency.parse_shapes(args.shapes)
    heads = {d: latency.heads_for(d, args.n_head) for _, d in shapes}
    return {"shapes": shapes, "heads": heads, "seq_len": parse_int(args.seq_len, name="--seq-len"),
            "batch": parse_int(args.batch, name="--batch"), "repeats": parse_int(args.repeats, name="--repeats"),
            "warmup": parse_int(args.warmup, name="--warmup", minimum=0),
            "vocab_size": parse_int(args.vocab_size, name="--vocab-size"),
            "scan_unroll": parse_int(args.scan_unroll, name="--scan-unroll"),
            "new_tokens": parse_int(args.new_tokens, name="--new-tokens", minimum=2)}


def _specs(c: dict[str, Any], args: argparse.Namespace, threads: int, device: str) -> list:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.latency import LatencySpec

    heads = (False, True) if args.with_head else (False,)
    return [LatencySpec(n_layer=L, d_model=d, n_head=c["heads"][d], seq_len=c["seq_len"], batch=c["batch"],
                        dtype=args.dtype, with_head=h, vocab_size=c["vocab_size"] if h else 0, threads=threads,
                        device=device, warmup=c["warmup"], repeats=c["repeats"], scan_unroll=c["scan_unroll"])
            for h in heads for L, d in c["shapes"]]


def run(args: argparse.Namespace) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import kinds, latency

    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits import latency as fit

    c = _checked(args)
    if args.decode:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.pipeline import exp_latency_decode

        return exp_latency_decode.run(args, c)
    threads = latency.select_threads(args.threads)  # before jax starts its backend
    device = latency.device_name(threads)
    refuse_another_machine(args.results, device)
    specs = _specs(c, args, threads, device)
    done = latency.measure(args.results, specs, log=None if args.no_progress else latency.stderr_log)
    ids = {kinds.unit_id(latency.KIND, s.to_dict()) for s in specs}
    stored = records.records_of_kind(args.results, latency.KIND)
    groups = fit.summarize(fit.latency_rows([r for r in stored if r["run_id"] in ids]))  # this command's units
    models = [g["model"] for g in fit.summarize(fit.latency_rows(stored)) if g["model"]]
    store = storage.open_results(args.results)
    store.write_if_changed(MODEL_FILE, storage.json_text(  # every stored group's model, for a later query
        {"formula": fit.FORMULA, "group_keys": list(fit.GROUP_KEYS), "models": models}))
    if args.no_figure:
        figures = []
    else:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.paper_figs.latency_fig import draw

        figures = draw(groups, args.out or str(Path(args.results) / "figures"))
    out = {"results": str(args.results), "measured": len(done["measured"]), "skipped": len(done["skipped"]),
           "groups": groups, "model_file": str(store.path(MODEL_FILE)), "figures": figures}
    emit(args, out, _text(out))
    return 0


def refuse_another_machine(results: str, device: str, kind: str = "latency") -> None:
    """UserError when ``results`` is the checkout's :data:`COMMITTED` directory and its records
    of ``kind`` (latency, or latency_decode) were measured on other devices only: measuring there
    would add this machine's records and rewrite the committed model file and figure, so a
    committed result would change because the command ran on another CPU. Any other --results is the caller's to fill."""
    if Path(results).resolve() != Path(COMMITTED).resolve() or not Path(results).is_dir():
        return
    theirs = sorted({str(r["config"].get("device")) for r in records.records_of_kind(results, kind)
                     if isinstance(r.get("config"), dict)})
    if theirs and device not in theirs:
        raise UserError(f"{results} holds the committed measurements of {', '.join(theirs)}, not of this machine "
                        f"({device}); they stay as they are: pass --results DIR to measure this machine")


def _text(out: dict[str, Any]) -> str:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits import latency as fit

    lines = [f"exp latency: {out['measured']} unit(s) measured, {out['skipped']} already stored in {out['results']}"]
    for g in out["groups"]:
        r0 = g["rows"][0]
        lines.append(f"\n{'whole model, V=' + format(r0['vocab_size'], ',') if g['with_head'] else 'stack alone'}: "
                     f"T={r0['seq_len']} B={r0['batch']} {g['dtype']} on {g['device']}, {g['threads']} thread(s)")
        lines.append(f"  {'shape':>9} {'params':>7} {'median s':>9} {'min-max s':>15} {'GFLOP/s':>8} "
                     f"{'attn':>6} {'slowdown':>8}")
        for r in g["rows"]:
            lines.append(f"  {r['n_layer']:>4}x{r['d_model']:<4} {format_count(r['params']):>7} {r['seconds']:>9.4g} "
                         f"{r['seconds_min']:>7.4g}-{r['seconds_max']:<7.4g} {r['flops_per_s'] / 1e9:>8.3g} "
                         f"{100 * r['attention_share']:>5.1f}% {r['slowdown']:>8.3f}")
        m = g["model"]
        if m:
            res = ", ".join(f"{x['shape']} {100 * x['rel_residual']:+.1f}%" for x in m["residuals"])
            lines.append(f"  latency model: seconds = {fit.describe(m)}   ({m['dof']} dof; residuals {res})")
    lines += [f"model: {out['model_file']}"] + [f"figure: {p}" for p in out["figures"]]
    return "\n".join(lines)
