"""CLI for the training engine: ``depthwidth bench train`` (``depthwidth train`` is in experiments.cli: it starts from a preset)."""

from __future__ import annotations

import argparse

from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.hostcpu import add_devices_flag
from depthwidth.units import parse_int


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="benchmarks")
    bsub = b.add_subparsers(dest="bench_what", metavar="WHAT", required=True)
    bt = bsub.add_parser("train", help="time the real train step (tokens/s, FLOP/s, MFU)")
    bt.add_argument("--layers", default="6", help="n_layer (L)")
    bt.add_argument("--width", default="128", help="d_model (d_x)")
    bt.add_argument("--heads", default="2", help="n_head (H)")
    bt.add_argument("--vocab", default="2000", help="vocab_size (V)")
    bt.add_argument("--seq-len", default="128", help="seq_len (T)")
    bt.add_argument("--batch", default="32", help="batch size (sequences)")
    bt.add_argument("--steps", default="20", help="timed steps")
    bt.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="compute dtype")
    bt.add_argument("--unroll", default="1", help="layers per scan iteration (model.scan_unroll; >= layers = unrolled)")
    bt.add_argument("--mesh", default="0x1", help="DATAxMODEL mesh, 0 = all remaining devices (default 0x1)")
    add_devices_flag(bt)
    add_json_flag(bt)
    bt.set_defaults(func=_bench)


def _bench(args) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth import config as C

    try:
        data, model = (parse_int(x, name="--mesh", minimum=0) for x in args.mesh.lower().split("x"))
    except ValueError:
        raise UserError(f"--mesh must look like 8x1 or 2x4, got {args.mesh!r}") from None
    cfg = C.RunConfig(
        model=C.ModelConfig(n_layer=parse_int(args.layers, name="--layers"), d_model=parse_int(args.width, name="--width"),
                            n_head=parse_int(args.heads, name="--heads"), vocab_size=parse_int(args.vocab, name="--vocab"),
                            seq_len=parse_int(args.seq_len, name="--seq-len"),
                            scan_unroll=parse_int(args.unroll, name="--unroll")),
        train=C.TrainConfig(batch_size=parse_int(args.batch, name="--batch"), compute_dtype=args.dtype),
        mesh=C.MeshConfig(data=data, model=max(model, 1)),
    )
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.bench import bench_train

    r = bench_train(cfg, steps=parse_int(args.steps, name="--steps"))
    text = (f"L={r['n_layer']} d={r['d_model']} H={r['n_head']} V={r['vocab_size']} T={r['seq_len']} "
            f"B={r['batch_size']} {r['compute_dtype']} on {r['device']}: {r['tokens_per_s']:,.0f} tokens/s, "
            f"{r['flops_per_s'] / 1e9:.1f} GFLOP/s, MFU {r['mfu']:.3f} of {r['mfu_devices']} x the measured "
            f"peak {r['peak_flops_per_s'] / 1e9:.1f} GFLOP/s per device, compile {r['compile_s']:.1f}s")
    emit(args, r, text)
    return 0
