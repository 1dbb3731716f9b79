"""``depthwidth theory ...``: parameter/FLOP accounting, the depth threshold, bounds, MLPs, sawtooth.

Thin: parse, call one function of ``depthwidth.theory``, print text or one JSON object. Module
level imports only argparse and the unit parsers; numpy, mpmath and (for --latex) sympy load
inside the handlers.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.units import abbreviate, parse_count, parse_exact_count, parse_int, parse_int_list

# The seprank kind's results directory (pipeline.registry), typed once: its table commands
# (here, `seprank-trained`, `seprank-fig`) and the registry read it.
SEPRANK_RESULTS = "results/seprank"

# M of the adaptive separation-rank measurement's first round (theory.seprank.measure_adaptive's start)
ADAPTIVE_START = 8


def _int(name: str, minimum: int = 1):
    return lambda s: parse_int(s, name=name, minimum=minimum)


def _ints(name: str):
    return lambda s: parse_int_list(s, name=name)


def _count(name: str):
    return lambda s: parse_count(s, name=name)


def _fixed(x: float, places: int) -> str:
    """``x`` with ``places`` decimals, or in 6 significant digits when that would be a long line."""
    return f"{x:.{places}f}" if abs(x) < 1e12 else f"{x:.6g}"


def _n(x) -> str:
    return abbreviate(x) if isinstance(x, int) else f"{x:,}"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``theory`` command group to the top-level subparsers."""
    theory = sub.add_parser(
        "theory",
        help="accounting and depth-vs-width theory (no accelerator needed)",
        description="Exact parameter/FLOP accounting and the depth-efficiency theory of self-attention.",
    )
    cmds = theory.add_subparsers(dest="theory_command", metavar="THEORY_COMMAND", required=True)

    p = cmds.add_parser("threshold", help="depth threshold L_th = log3(width) and its inverse 3^L")
    p.add_argument("--width", type=_int("--width"), help="width d_x: print L_th = log3(d_x)")
    p.add_argument("--layers", type=_int("--layers"), help="depth L: print the width 3^L on the threshold")
    p.add_argument("--latex", action="store_true", help="also print the formulas as LaTeX")
    add_json_flag(p)
    p.set_defaults(func=_threshold)

    p = cmds.add_parser("params", help="exact parameter counts of a GPT-2-arrangement LM")
    p.add_argument("--layers", type=_int("--layers"), required=True, help="depth L")
    p.add_argument("--width", type=_int("--width"), required=True, help="width d")
    p.add_argument("--heads", type=_int("--heads"), required=True, help="heads H (must divide d)")
    p.add_argument("--vocab", type=_int("--vocab", 0), default=0, help="vocabulary size V (default 0)")
    p.add_argument("--context", type=_int("--context", 0), default=0, help="positions T (default 0)")
    p.add_argument("--d-ff", type=_int("--d-ff"), default=None, help="MLP hidden width (default 4d)")
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--tied", dest="tied", action="store_true", default=True, help="head tied to wte (default)"
    )
    g.add_argument("--untied", dest="tied", action="store_false", help="separate V x d head, no bias")
    add_json_flag(p)
    p.set_defaults(func=_params)

    p = cmds.add_parser("shapes", help="equal-budget shapes: the width for each depth")
    p.add_argument("--budget", type=lambda s: parse_exact_count(s, name="--budget"), required=True,
                   help="non-embedding parameters N")
    p.add_argument("--depths", type=_ints("--depths"), required=True, help="depths, e.g. 3,12,27")
    p.add_argument(
        "--count",
        choices=("kaplan", "stack"),
        default="kaplan",
        help="budget means 12*L*d^2 (kaplan, default) or the exact stack count",
    )
    p.add_argument("--multiple-of", type=_int("--multiple-of"), default=1, help="round widths to a multiple")
    p.add_argument("--heads", type=_int("--heads"), default=None, help="round widths to a multiple of H too")
    add_json_flag(p)
    p.set_defaults(func=_shapes)

    p = cmds.add_parser("flops", help="FLOPs per token (both attention conventions), memory, intensity")
    p.add_argument("--layers", type=_int("--layers"), required=True, help="depth L")
    p.add_argument("--width", type=_int("--width"), required=True, help="width d")
    p.add_argument("--context", type=_int("--context"), required=True, help="sequence length T")
    p.add_argument("--vocab", type=_int("--vocab", 0), default=0, help="vocabulary V (head matmul)")
    p.add_argument("--heads", type=_int("--heads"), default=1, help="heads H (activation memory)")
    p.add_argument(
        "--batch", type=_int("--batch"), default=None, help="sequences per step: arithmetic intensity"
    )
    p.add_argument("--bytes", type=_int("--bytes"), default=2, help="bytes per activation value (default 2)")
    p.add_argument("--d-ff", type=_int("--d-ff"), default=None, help="MLP hidden width (default 4d)")
    add_json_flag(p)
    p.set_defaults(func=_flops)

    p = cmds.add_parser("bounds", help="regime and separation-rank bounds (Levine et al. 2020)")
    p.add_argument("--layers", type=_int("--layers"), required=True, help="depth L")
    p.add_argument("--width", type=_int("--width"), required=True, help="width d_x")
    p.add_argument("--heads", type=_int("--heads"), required=True, help="heads H")
    p.add_argument(
        "--match-depths",
        type=_ints("--match-depths"),
        default=None,
        help="depths L' for which to print the width that matches (L, d_x)",
    )
    p.add_argument("--latex", action="store_true", help="also print every formula as LaTeX")
    p.add_argument("--constants", action="store_true", help="also print the provenance table of constants")
    add_json_flag(p)
    p.set_defaults(func=_bounds)

    p = cmds.add_parser("mlp", help="MLP parameters and the widest single hidden layer of that budget")
    p.add_argument("--in", dest="d_in", type=_int("--in"), required=True, help="input width A")
    p.add_argument("--hidden", type=_ints("--hidden"), required=True, help="hidden widths, e.g. 2,2,2")
    p.add_argument("--out", dest="d_out", type=_int("--out"), required=True, help="output width B")
    add_json_flag(p)
    p.set_defaults(func=_mlp)

    _register_seprank(cmds)

    p = cmds.add_parser("sawtooth", help="depth-k sawtooth: pieces, deep vs one-layer cost")
    p.add_argument("--depth", type=_int("--depth"), required=True, help="k, the number of hat maps")
    add_json_flag(p)
    p.set_defaults(func=_sawtooth)


def _register_seprank(cmds) -> None:
    p = cmds.add_parser("seprank", help="measured separation rank: exact grid-tensor rank of a tiny attention net",
                        description="Grid-tensor rank (exact modulo two primes) of the analysed self-attention network (softmax, "
                                    "LayerNorm, feed-forward removed) with random integer weights, next to the "
                                    "counting bound and the published-form bounds (theory.seprank). --table "
                                    "measures the README's table into --out/table.json (its figure: "
                                    "depthwidth seprank-fig). Trained weights: depthwidth seprank-trained.")
    p.add_argument("--layers", type=_int("--layers"), help="L, attention layers")
    p.add_argument("--width", type=_int("--width"), help="d_x")
    p.add_argument("--heads", type=_int("--heads"), default=1, help="H (divides d_x; default 1)")
    p.add_argument("--positions", type=_int("--positions", 2), default=2, help="N positions, even (default 2)")
    p.add_argument("--templates", type=_int("--templates"), default=None,
                   help="M distinct template vectors (default: doubled from 8 until the rank is below M and "
                        "unchanged by 4 new templates, at most --max-templates)")
    p.add_argument("--max-templates", type=_int("--max-templates"), default=None,
                   help=f"largest M of the adaptive measurement (>= {ADAPTIVE_START}, its first round; default 1024)")
    p.add_argument("--seed", type=_int("--seed", 0), default=0, help="weights/templates seed (default 0)")
    p.add_argument("--draws", type=_int("--draws"), default=2, help="weight draws; the rank is their maximum (default 2)")
    p.add_argument("--weight-range", type=_int("--weight-range"), default=None,
                   help="weights are integers uniform in [-R, R], 1 <= R <= 16777191 (default 2^23: the generic "
                        "rank except with probability <= miss_bound, Schwartz-Zippel; small R can miss it)")
    p.add_argument("--residual", action="store_true", help="residual connections x + attn(x)")
    p.add_argument("--table", action="store_true", help="measure the whole table into --out/table.json (~40 min: needs --allow-long)")
    p.add_argument("--out", default=SEPRANK_RESULTS, help=f"table directory (default {SEPRANK_RESULTS})")
    p.add_argument("--allow-long", action="store_true",
                   help="run a measurement estimated to take more than 10 minutes (refused otherwise)")
    add_json_flag(p)
    p.set_defaults(func=_seprank)


def _seprank_table(args) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory import seprank

    if Path(args.out).exists() and not Path(args.out).is_dir():  # before the estimate, not after it
        raise UserError(f"--out {args.out} exists and is not a directory")
    M = args.max_templates or seprank.MAX_TEMPLATES
    if M < ADAPTIVE_START:
        raise UserError(f"--max-templates {M} is below the adaptive measurement's first round of "
                        f"{ADAPTIVE_START} templates; give --max-templates >= {ADAPTIVE_START}")
    est = seprank.table_seconds(max_templates=M)
    seprank.check_time(est, allow_long=args.allow_long)
    print(f"[seprank] table: {2 * len(seprank.TABLE_SHAPES)} rows, at most ~{est / 60:.0f} min (worst case); "
          f"each row is written to {args.out}/table.json as it comes", file=sys.stderr, flush=True)

    def progress(i, n, r):
        print(f"[seprank] {i}/{n} L={r['n_layer']} d={r['d_model']} H={r['n_head']} residual={r['residual']}: "
              f"rank {r['rank']}{' (lower bound)' if r['lower_bound'] else ''} (M={r['n_templates']})",
              file=sys.stderr, flush=True)

    doc = seprank.write_table(args.out, seed=args.seed, max_templates=M, progress=progress)
    path = str(Path(args.out) / "table.json")
    emit(args, {"table": path, "rows": len(doc["rows"])}, f"wrote {path} ({len(doc['rows'])} rows)")
    return 0


def _seprank_measure(args):
    """One measurement (fixed or adaptive M), after its time estimate; progress lines on stderr
    when it may take more than a few seconds."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory import seprank

    seprank.random_network(args.layers, args.width, args.heads, weight_range=args.weight_range)  # sizes, range
    seprank.balanced_partition(args.positions)
    M = args.max_templates or seprank.MAX_TEMPLATES
    if args.templates is None and M < ADAPTIVE_START:
        raise UserError(f"--max-templates {M} is below the adaptive measurement's first round of "
                        f"{ADAPTIVE_START} templates; give --max-templates >= {ADAPTIVE_START}, or --templates {M} "
                        "for one measurement at that count")
    start, top = (args.templates, args.templates) if args.templates is not None else (ADAPTIVE_START, M)
    seprank.check_grid(start + 4, args.positions)
    est = seprank.estimate_seconds(args.layers, args.width, n_positions=args.positions, start=start,
                                   max_templates=top, draws=args.draws)
    seprank.check_time(est, allow_long=args.allow_long)
    loud = est > 30
    if loud:
        print(f"[seprank] up to ~{est:.0f} s if the rank keeps growing to M = {top} (cost model: "
              "theory.seprank.estimate_seconds)", file=sys.stderr, flush=True)

    def progress(m, r):
        if loud:
            print(f"[seprank] M={m}: rank {r['rank']}{' (lower bound)' if r['lower_bound'] else ''}",
                  file=sys.stderr, flush=True)

    return seprank.measure_adaptive(args.layers, args.width, args.heads, residual=args.residual, seed=args.seed,
                                    n_positions=args.positions, start=start, max_templates=top, draws=args.draws,
                                    weight_range=args.weight_range, progress=progress)


def _seprank(args) -> int:
    if args.table:
        return _seprank_table(args)
    if args.layers is None or args.width is None:
        raise UserError("theory seprank needs --layers and --width (or --table)")
    r = _seprank_measure(args)
    low = r["lower_bound"]
    bounds = (f"published-form bounds [{r['log3_sep_lower']:.2f}, {r['log3_sep_upper']:.2f}]"
              if r["log3_sep_upper"] is not None else "published-form bounds undefined (d_x <= H)")
    count = r["counting_bound"] if r["counting_bound"] is not None else f"3^{r['log3_counting_bound']:.1f}"
    fl = "not computed (grid too large)" if r["rank_float"] is None else r["rank_float"]
    text = (f"L={r['n_layer']} d_x={r['d_model']} H={r['n_head']}{' residual' if r['residual'] else ''}, "
            f"{r['n_positions']} positions, {r['n_templates']} distinct templates ({r['shape'][0]}x{r['shape'][1]} grid): "
            f"rank {r['rank']} (over F_p for p = {', '.join(map(str, r['moduli']))}: {r['ranks_mod']}; float64 SVD {fl})"
            f"{' - a lower bound: the templates could not exceed it' if low else ''}\n"
            f"counting bound C(3^L + d_x, d_x) = {count} (log3 {r['log3_counting_bound']:.3f}; log3 rank "
            f"{r['log3_rank']:.3f}); {bounds} (log3); {r['regime']} (L_th = {r['threshold_depth']:.3f})\n"
            f"weights in [-{r['weight_range']}, {r['weight_range']}], best of {r['draws']} draws: below the generic "
            f"rank with probability <= {r['miss_bound']:.2g} (Schwartz-Zippel)" if r["rank"] else
            "rank 0: f vanishes on the grid for every weight draw (try --draws or --seed)")
    emit(args, r, text)
    return 0


def _cap_depths(most: int, *flags: tuple[str, int | list[int] | None]) -> None:
    """UserError naming the flag for a depth above ``most`` (separation.MAX_DEPTH: 3^L overflows
    a float past L ~ 646), before the library refuses it under its own parameter name (n_layer)."""
    for flag, value in flags:
        for L in value if isinstance(value, list) else [value]:
            if L is not None and L > most:
                raise UserError(f"{flag} must be a whole number in 1..{most} (3^L overflows a float past "
                                f"L ~ 646), got {_n(L)}")


def _threshold(args) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory import separation

    if args.width is None and args.layers is None:
        raise UserError("theory threshold needs --width, --layers or both")
    _cap_depths(separation.MAX_DEPTH, ("--layers", args.layers))
    out: dict = {}
    lines = []
    if args.width is not None:
        out.update(d_model=args.width, threshold_depth=separation.threshold_depth(args.width))
        lines.append(f"L_th = log3({args.width}) = {out['threshold_depth']:.6g} layers")
    if args.layers is not None:
        out.update(n_layer=args.layers, width_at_threshold=separation.width_at_threshold(args.layers))
        lines.append(
            f"width on the threshold at depth {args.layers}: 3^{args.layers} = {_n(out['width_at_threshold'])}"
        )
    if args.width is not None and args.layers is not None:
        c = separation.classify(args.layers, args.width)
        out.update(regime=c["regime"], margin=c["margin"])
        lines.append(
            f"{args.layers} x {args.width}: {c['regime']} ({c['margin']:+.3g} layers from the threshold)"
        )
    if args.latex:
        # sympy: ~0.5 s at import; only the symbolic checks pay it
        from depthwidth.theory import symbolic

        out["latex"] = symbolic.latex(["threshold", "threshold_inverse", "crossing"])
        lines += [f"{k}: {v}" for k, v in out["latex"].items()]
    emit(args, out, "\n".join(lines))
    return 0


def _params(args) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory.accounting import param_counts

    r = param_counts(args.layers, args.width, args.heads, args.vocab, args.context, args.tied, args.d_ff)
    rows = [
        ("stack (exact non-embedding)", r["stack_params"]),
        ("Kaplan N = 12 L d^2", r["kaplan_params"]),
        ("embedding (V d + T d)", r["embedding_params"]),
        ("head" + (" (tied)" if r["tied_head"] else " (untied)"), r["head_params"]),
        ("total", r["total_params"]),
    ]
    text = "\n".join(f"{k:<30}{_n(v):>20}" for k, v in rows)
    emit(args, r, text)
    return 0


# A shape whose count is further than this from the budget (relative) answers another question:
# flagged, e.g. depth 100 for a budget of 10, where even width 1 is 119x the budget.
SHAPE_FAR = 0.5


def _shapes(args) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory.accounting import shape_family

    multiple = args.multiple_of if args.heads is None else math.lcm(args.multiple_of, args.heads)
    shapes = shape_family(args.budget, args.depths, args.count, multiple)
    warnings = [f"depth {s['n_layer']}: the nearest width, d = {_n(s['d_model'])}, has {_n(s['params'])} parameters, "
                f"{s['params'] / args.budget:.3g}x the budget: no width of this depth comes within "
                f"{SHAPE_FAR:.0%} of it" for s in shapes if abs(s["rel_deviation"]) > SHAPE_FAR]
    out = {"budget": args.budget, "count": args.count, "multiple_of": multiple, "shapes": shapes,
           "warnings": warnings}
    head = f"{'L':>5} {'d':>8} {'d exact':>12} {'params':>18} {'rel dev':>10} {'d/L':>8}"
    body = [
        f"{s['n_layer']:>5} {_n(s['d_model']):>8} {_fixed(s['d_model_exact'], 2):>12} {_n(s['params']):>18} "
        f"{s['rel_deviation']:>+10.2e} {_fixed(s['aspect_ratio'], 1):>8}"
        for s in shapes
    ]
    budget = _n(args.budget) if isinstance(args.budget, int) else f"{args.budget:,.6g}"
    emit(args, out, "\n".join([f"budget {budget} ({args.count} count)", head, *body,
                               *(f"warning: {w}" for w in warnings)]))
    return 0


def _flops(args) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory import compute

    shape = (args.layers, args.width, args.context, args.vocab)
    train = {
        c: compute.train_flops_per_token(*shape, convention=c, d_ff=args.d_ff) for c in compute.CONVENTIONS
    }
    fwd = {
        c: compute.forward_flops_per_token(*shape, convention=c, d_ff=args.d_ff) for c in compute.CONVENTIONS
    }
    mem = compute.activation_bytes_per_token(
        args.layers,
        args.width,
        args.heads,
        args.context,
        d_ff=args.d_ff,
        bytes_per_value=args.bytes,
        vocab_size=args.vocab,
    )
    out = {
        "n_layer": args.layers,
        "d_model": args.width,
        "seq_len": args.context,
        "vocab_size": args.vocab,
        "n_head": args.heads,
        "mfu_convention": compute.MFU_CONVENTION,
        "train_flops_per_token": train,
        "forward_flops_per_token": fwd,
        "activation_bytes_per_token": mem,
        "conventions": compute.CONVENTIONS,
    }
    lines = [
        f"training FLOPs/token: causal {_n(train['causal'])} (MFU convention), full {_n(train['full'])}",
        f"forward FLOPs/token:  causal {_n(fwd['causal'])}, full {_n(fwd['full'])}",
        f"activation memory/token: {_n(mem['total'])} bytes ({_n(mem['per_layer'])} per layer)",
    ]
    if args.batch is not None:
        ai = compute.block_arithmetic_intensity(args.width, args.batch * args.context, args.d_ff, args.bytes)
        out["batch_tokens"] = args.batch * args.context
        out["arithmetic_intensity"] = ai
        lines.append(
            f"block matmul intensity at {_n(args.batch * args.context)} tokens: {ai['intensity']:.1f} FLOP/byte"
        )
    emit(args, out, "\n".join(lines))
    return 0


def _bounds(args) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory import separation

    _cap_depths(separation.MAX_DEPTH, ("--layers", args.layers), ("--match-depths", args.match_depths))
    out = separation.bounds(args.layers, args.width, args.heads)
    lines = [
        f"{_n(args.layers)} x {_n(args.width)}, {_n(args.heads)} heads: {out['regime']} (L_th = {out['threshold_depth']:.4g})",
        f"log3 sep in [{out['log3_sep_lower']:.6g}, {out['log3_sep_upper']:.6g}] (published forms, "
        "constants reconstructed)",
        f"log3 C(3^L + d_x, d_x) = {out['log3_monomial_count']:.6g}",
    ]
    if args.match_depths:
        rows = []
        for Lp in args.match_depths:
            c = separation.equivalent_width(args.layers, args.width, Lp, "count")
            b = separation.equivalent_width(args.layers, args.width, Lp, "bounds", args.heads)
            rows.append(
                {
                    "n_layer": Lp,
                    "log10_width_count": c["log10_width"],
                    "width_count": c["width"],
                    "log10_width_bounds": b["log10_width"],
                    "width_bounds": b["width"],
                    "log10_width_double_exponential": c["log10_width_double_exponential"],
                    "width_linear": c["width_linear"],
                }
            )
            lines.append(
                f"depth {Lp}: width 10^{c['log10_width']:.4g} by the count; "
                f"at least 10^{b['log10_width']:.4g} by the bounds"
            )
        out["equivalent_widths"] = rows
    if args.constants:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.theory.constants import table

        out["constants"] = table()
        lines += [
            f"{r['name']} = {r['value']}{' (reconstructed)' if r['reconstructed'] else ''}"
            for r in out["constants"]
        ]
    if args.latex:
        # sympy: ~0.5 s at import; only the symbolic checks pay it
        from depthwidth.theory import symbolic

        out["latex"] = symbolic.latex()
        lines += [f"{k}: {v}" for k, v in out["latex"].items()]
    emit(args, out, "\n".join(lines))
    return 0


def _mlp(args) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory.mlp import mlp_summary

    r = mlp_summary(args.d_in, args.hidden, args.d_out)
    widths = " -> ".join(_n(w) for w in [args.d_in, *args.hidden, args.d_out])
    text = (
        f"{widths}: {_n(r['params'])} parameters\n"
        f"one hidden layer of the same budget: {_n(r['equal_budget_single_layer_width'])} units "
        f"({_n(r['single_layer_params'])} parameters, {_n(r['unit_cost'])} per unit)"
    )
    emit(args, r, text)
    return 0


def _sawtooth(args) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory.sawtooth import sawtooth_summary

    r = sawtooth_summary(args.depth)
    how = "counted exactly" if r["counted"] else "2^k (too many to count quickly)"
    text = (
        f"depth-{r['depth']} sawtooth: {_n(r['pieces'])} linear pieces ({how})\n"
        f"deep ReLU net: {r['deep_units']} units, {_n(r['deep_params'])} parameters\n"
        f"one hidden layer needs >= {_n(r['shallow_units_needed'])} units "
        f"({_n(r['shallow_params_needed'])} parameters)"
    )
    emit(args, r, text)
    return 0
