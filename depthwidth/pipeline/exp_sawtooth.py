"""``depthwidth exp sawtooth``: train deep and shallow ReLU nets on g^k, count their pieces exactly.

Measure (:mod:`depthwidth.experiments.sawtooth_train`: one record of kind ``sawtooth`` per
(k, architecture, seed, training settings), plus the two exact constructions per k; the units'
spec from the numpy-free :mod:`depthwidth.experiments.sawtooth_spec`) → analyse
the stored records (:mod:`depthwidth.fits.sawtooth`) → draw (:mod:`depthwidth.paper_figs.
sawtooth_fig`) → print. A rerun skips every unit whose record exists.
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
from depthwidth.experiments.sawtooth_spec import (
    ARCHS,
    CONSTRUCTIONS,
    EVAL_GRID,
    MAX_K,
    SawtoothSpec,
    check_depth,
    hidden_widths,
)
from depthwidth.units import parse_int, parse_int_list

KIND = "sawtooth"
HELP = "train deep vs shallow ReLU nets on the k-fold hat map and count their linear pieces exactly"
DESCRIPTION = (
    "Representation vs trainability (Telgarsky 2016 §3). A depth-k ReLU net of width 2 "
    "(6k+1 parameters) computes the k-fold hat map g^k (2^k pieces) exactly; one hidden layer needs "
    ">= 2^k - 1 units, and with the same 6k+1 parameters (2k units) has at most 2k+1 pieces, so its sup "
    "error is >= 1/2. This trains both (and a one-layer net of 2^k units) with Adam on a dense grid and "
    "counts each trained net's linear pieces exactly: does gradient descent find the deep solution? Two "
    "over-parameterised controls (one layer of 8*2^k units, capped at 512 but >= 2*2^k; k layers of width 8) tell whether it "
    "can fit g^k at all with these settings.")


def add_args(p: argparse.ArgumentParser) -> None:
    """The experiment's flags (strings, validated by :func:`units` before any work)."""
    d = SawtoothSpec(3, "deep")
    p.add_argument("--depths", default="3,4,5,6,7,8", help=f"target depths k, comma-separated (1..{MAX_K}; default 3..8)")
    p.add_argument("--archs", default=",".join(ARCHS), help=f"architectures to train (default {','.join(ARCHS)})")
    p.add_argument("--seeds", default="4", help="number of seeds (restarts) per (k, arch); seeds 0..N-1 (default 4)")
    p.add_argument("--steps", default=str(d.steps), help=f"full-batch Adam steps (default {d.steps})")
    p.add_argument("--lr", default=str(d.lr), help=f"peak learning rate, cosine-decayed to 0 (default {d.lr})")
    p.add_argument("--grid", default=str(d.grid),
                   help=f"training points: i/n for i = 0..n, n a multiple of 2^k and >= 4*2^k (default {d.grid})")


def units(args: argparse.Namespace) -> list[tuple[str, dict[str, Any], Any]]:
    """The experiment's units in order, as (kind-id, spec dict, SawtoothSpec or (k, construction)).
    Validates every flag first (UserError, one line), before any work."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import kinds

    depths = parse_int_list(args.depths, name="--depths")
    for k in depths:
        check_depth(k)
    archs = [a.strip() for a in str(args.archs).split(",") if a.strip()]
    if not archs or any(a not in ARCHS for a in archs):
        raise UserError(f"--archs must be a comma-separated subset of {','.join(ARCHS)}, got {args.archs!r}")
    seeds = parse_int(args.seeds, name="--seeds")
    steps = parse_int(args.steps, name="--steps")
    grid = parse_int(args.grid, name="--grid")
    try:
        lr = float(args.lr)
    except ValueError:
        raise UserError(f"--lr must be a number, got {args.lr!r}") from None
    out = []
    for k in sorted(set(depths)):
        for c in CONSTRUCTIONS:
            spec = {"k": k, "arch": c, "hidden": hidden_widths(k, c), "eval_grid": EVAL_GRID}
            out.append((kinds.unit_id(KIND, spec), spec, (k, c)))
        for arch in archs:
            for seed in range(seeds):
                s = SawtoothSpec(k, arch, seed=seed, steps=steps, lr=lr, grid=grid)
                out.append((kinds.unit_id(KIND, s.to_dict()), s.to_dict(), s))
    return out


def _do_unit(results: Path, spec: dict[str, Any], what: Any, prov: dict[str, Any]) -> dict[str, Any]:
    """Train/measure one unit and store its record; returns the record."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import kinds

    # numpy: at the top it loaded for every command, `depthwidth query` 0.51 -> 0.31 s without (measured)
    from depthwidth.experiments.sawtooth_train import construction, train

    if isinstance(what, tuple):
        k, arch = what
        t0 = time.perf_counter()
        m = construction(k, arch)
        seed, steps = None, 0
        m["wall_s"] = time.perf_counter() - t0
    else:
        k, arch, seed, steps = what.k, what.arch, what.seed, what.steps
        m = train(what)
    hidden = spec["hidden"]
    fields = {k_: v for k_, v in m.items() if k_ not in ("params", "wall_s")}
    return kinds.write(results, KIND, spec, status="finished" if m["finite"] else "diverged", provenance=prov,
                       n_layer=len(hidden), d_model=max(hidden), seed=seed, steps=steps,
                       params={"total": m["params"]}, wall_s=m["wall_s"], k=k, arch=arch,
                       target_pieces=2**k, **fields)


def _progress(i: int, n: int, rec: dict[str, Any], spent: float, done_here: int) -> None:
    eta = spent / done_here * (n - i) if done_here else None
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.runner import fmt_duration

    print(f"[sawtooth] {i}/{n} k={rec['k']} {rec['arch']} seed={rec['seed']}: pieces {rec['pieces']}/{2 ** rec['k']}, "
          f"sup error {rec['sup_error']:.4f}, rms {rec['rms_error']:.4f}; ETA {fmt_duration(eta)}",
          file=sys.stderr, flush=True)


def measure(args: argparse.Namespace, todo: list) -> int:
    """Run the units of ``todo`` without a record under ``--results``; returns how many ran."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import kinds

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.train import provenance

    results = Path(args.results)
    if results.exists() and not results.is_dir():
        raise UserError(f"--results {results} exists and is not a directory")
    have = kinds.done(results, KIND)
    missing = [(spec, what) for uid, spec, what in todo if uid not in have]

    hostcpu.pin_one_core()  # before provenance(), so the records' host says how the units ran
    prov = provenance() if missing else {}
    t0 = time.perf_counter()
    for j, (spec, what) in enumerate(missing):
        rec = _do_unit(results, spec, what, prov)
        if not args.no_progress:
            _progress(len(todo) - len(missing) + j + 1, len(todo), rec, time.perf_counter() - t0, j + 1)
    return len(missing)


def run(args: argparse.Namespace) -> int:
    """Measure the missing units, summarise the stored records of this run's units, draw the
    figure, print the table (or ``--json``: results, units, ran, wall_s, figures, rows). Exit 0;
    UserError on bad flags (before any work)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits.sawtooth import summarise, table_text

    todo = units(args)
    t0 = time.perf_counter()
    ran = measure(args, todo)
    wanted = {uid for uid, _, _ in todo}
    recs = [r for r in records.records_of_kind(args.results, KIND) if r["run_id"] in wanted]
    rows = summarise(recs)
    figs = []
    if not args.no_figure:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.paper_figs.sawtooth_fig import draw

        figs = draw(recs, args.out or str(Path(args.results) / "figures"))
    doc = {"results": str(args.results), "units": len(todo), "ran": ran, "wall_s": time.perf_counter() - t0,
           "figures": figs, "rows": rows}
    text = table_text(rows) + f"\n{ran} of {len(todo)} units run now; records in {args.results}" \
        + (f"; figure {figs[0]}" if figs else "")
    emit(args, doc, text)
    return 0
