"""``depthwidth exp latency --decode``: per-token decode latency of equal-weight shapes → records → model.

Steps (after :mod:`depthwidth.pipeline.exp_latency` checked the flags): fix the XLA:CPU thread
count; time every unit without a record (:func:`depthwidth.experiments.latency_decode.measure`:
the whole LM, V = --vocab-size, a --seq-len-token prompt, --new-tokens per repeat); read the
stored records of the requested units back, fit the decode-latency model
(:mod:`depthwidth.fits.latency_decode`; ``RESULTS/decode_model.json`` holds the model of every
group of stored records), draw the figure (:mod:`depthwidth.paper_figs.decode_latency_fig`)
and print the table. The records sit beside the forward ones (default ``results/exp-latency``;
another kind, so neither command reads the other's); the committed directory is refused on
another machine, as for the forward records.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from depthwidth import records, storage
from depthwidth.console import emit
from depthwidth.units import format_count

MODEL_FILE = "decode_model.json"


def run(args: argparse.Namespace, c: dict[str, Any]) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import kinds, latency
    from depthwidth.experiments import latency_decode as dl

    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits import latency_decode as fit
    from depthwidth.pipeline.exp_latency import refuse_another_machine

    results = args.results
    threads = latency.select_threads(args.threads)  # before jax starts its backend
    device = latency.device_name(threads)
    refuse_another_machine(results, device, dl.KIND)
    specs = [dl.DecodeSpec(n_layer=L, d_model=d, n_head=c["heads"][d], context=c["seq_len"], new_tokens=c["new_tokens"],
                           batch=c["batch"], dtype=args.dtype, vocab_size=c["vocab_size"], threads=threads,
                           device=device, repeats=c["repeats"]) for L, d in c["shapes"]]
    done = dl.measure(results, specs, log=None if args.no_progress else latency.stderr_log)
    ids = {kinds.unit_id(dl.KIND, s.to_dict()) for s in specs}
    stored = records.records_of_kind(results, dl.KIND)
    groups = fit.summarize(fit.decode_rows([r for r in stored if r["run_id"] in ids]))
    models = [g["model"] for g in fit.summarize(fit.decode_rows(stored)) if g["model"]]
    store = storage.open_results(results)
    store.write_if_changed(MODEL_FILE, storage.json_text(
        {"formula": fit.FORMULA, "group_keys": list(fit.GROUP_KEYS), "models": models}))
    if args.no_figure or not groups:
        figures = []
    else:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.paper_figs.decode_latency_fig import draw

        figures = draw(groups, args.out or str(Path(results) / "figures"))
    out = {"results": str(results), "measured": len(done["measured"]), "skipped": len(done["skipped"]),
           "groups": groups, "model_file": str(store.path(MODEL_FILE)), "figures": figures}
    emit(args, out, _text(out))
    return 0


def _text(out: dict[str, Any]) -> str:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits import latency_decode as fit

    lines = [f"exp latency --decode: {out['measured']} unit(s) measured, {out['skipped']} already stored in "
             f"{out['results']}"]
    for g in out["groups"]:
        r0 = g["rows"][0]
        lines.append(f"\ndecode, whole model V={r0['vocab_size']:,}: context T={g['context']} B={g['batch']} "
                     f"{g['dtype']} on {g['device']}, {g['threads']} thread(s)")
        lines.append(f"  {'shape':>9} {'params':>7} {'ms/token':>9} {'min-max ms':>15} {'prefill ms':>10} "
                     f"{'GB/s':>6} {'slowdown':>8}")
        for r in g["rows"]:
            lines.append(f"  {r['n_layer']:>4}x{r['d_model']:<4} {format_count(r['params']):>7} "
                         f"{1e3 * r['seconds_per_token']:>9.4g} {1e3 * r['seconds_per_token_min']:>7.4g}-"
                         f"{1e3 * r['seconds_per_token_max']:<7.4g} {1e3 * r['prefill_s']:>10.4g} "
                         f"{r['bytes_per_s'] / 1e9:>6.3g} {r['slowdown']:>8.3f}")
        m = g["model"]
        if m:
            res = ", ".join(f"{x['shape']} {100 * x['rel_residual']:+.1f}%" for x in m["residuals"])
            lines.append(f"  decode model: s/token = {fit.describe(m)}   ({m['dof']} dof; residuals {res})")
    lines += [f"model: {out['model_file']}"] + [f"figure: {p}" for p in out["figures"]]
    return "\n".join(lines)
