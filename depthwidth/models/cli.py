"""CLI for the training engine: ``depthwidth train`` and ``depthwidth bench train``."""

from __future__ import annotations

import argparse
import sys

from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train one run and write its result record")
    p.add_argument("--preset", help="sweep preset whose base config to start from (e.g. smoke, cpu)")
    p.add_argument("--config", help="a TOML file with [model] [data] [train] [mesh] tables")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a config field (repeatable), e.g. --set model.n_layer=6")
    p.add_argument("--out", required=True, help="results directory (records go to OUT/runs/<run_id>/)")
    p.add_argument("--data-dir", help="directory with the raw corpora (default: $DEPTHWIDTH_DATA)")
    p.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard events (needs tensorboardX)")
    p.add_argument("--distributed", action="store_true",
                   help="call jax.distributed.initialize() first (multi-host TPU VMs)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_flag(p)
    p.set_defaults(func=_train)

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
    add_json_flag(bt)
    bt.set_defaults(func=_bench)


def _base_config(args):
    from depthwidth import config as C

    if args.preset and args.config:
        raise UserError("give --preset or --config, not both")
    if args.preset:
        from depthwidth.experiments.presets import load_preset

        cfg = load_preset(args.preset).base
    elif args.config:
        cfg = C.from_dict(C.load_toml(args.config))
    else:
        cfg = C.RunConfig()
    return C.override(cfg, args.overrides)


def _train(args) -> int:
    cfg = _base_config(args)
    if args.distributed:
        import jax

        jax.distributed.initialize()
    from depthwidth.models.train import train_run

    rec = train_run(cfg, args.out, data_dir=args.data_dir, resume=not args.no_resume,
                    progress=not args.quiet and sys.stderr.isatty(), tensorboard=args.tensorboard)
    text = (f"{rec['run_id']}: {rec['status']}  test_loss={_f(rec['test_loss'])} val_loss={_f(rec['val_loss'])} "
            f"nats/token  tokens={rec['tokens']:,}  {_f(rec['tokens_per_s'], '.0f')} tokens/s  "
            f"mfu={_f(rec['mfu'], '.3f')}  -> {args.out}/runs/{rec['run_id']}/record.json")
    emit(args, rec, text)
    return 0 if rec["status"] == "finished" else 1


def _f(v, fmt: str = ".4f") -> str:
    return "n/a" if v is None else format(v, fmt)


def _bench(args) -> int:
    from depthwidth import config as C
    from depthwidth.units import parse_int

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
    from depthwidth.models.bench import bench_train

    r = bench_train(cfg, steps=parse_int(args.steps, name="--steps"))
    text = (f"L={r['n_layer']} d={r['d_model']} H={r['n_head']} V={r['vocab_size']} T={r['seq_len']} "
            f"B={r['batch_size']} {r['compute_dtype']} on {r['device']}: {r['tokens_per_s']:,.0f} tokens/s, "
            f"{r['flops_per_s'] / 1e9:.1f} GFLOP/s, MFU {r['mfu']:.3f} of measured peak "
            f"{r['peak_flops_per_s'] / 1e9:.1f} GFLOP/s, compile {r['compile_s']:.1f}s")
    emit(args, r, text)
    return 0
