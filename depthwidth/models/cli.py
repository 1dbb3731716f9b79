"""CLI for the training engine: ``depthwidth bench train`` and ``depthwidth sample`` (``depthwidth train``
is in experiments.cli: it starts from a preset)."""

from __future__ import annotations

import argparse

from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.hostcpu import add_devices_flag
from depthwidth.units import parse_float, parse_int


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
    _register_sample(sub)


def _register_sample(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("sample", help="generate text from a kept run (or GPT-2 weights) with the KV cache",
                       description="Continue --prompt by --max-new-tokens tokens, one jitted step per token with "
                                   "a key/value cache per layer, and print the text and the tokens/s reached.")
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("run", nargs="?", metavar="RUN_DIR",
                     help="a finished run trained with --set train.keep_weights=true (RESULTS/runs/RUN_ID)")
    src.add_argument("--gpt2", metavar="DIR", help="a Hugging Face GPT-2 directory (save_pretrained; needs transformers)")
    s.add_argument("--prompt", default="\n", help="text to continue (default a newline, as nanoGPT's sample.py)")
    s.add_argument("--max-new-tokens", metavar="N",
                   help="tokens to generate (default 100, or what the model's context leaves after the prompt)")
    s.add_argument("--temperature", default="0.8", metavar="X",
                   help="softmax temperature; 0 = greedy, the argmax (default 0.8)")
    s.add_argument("--top-k", default="200", metavar="K", help="sample among the K likeliest tokens; 0 = all (default 200)")
    s.add_argument("--seed", default="0", metavar="S", help="sampling seed: same seed, same text (default 0)")
    s.add_argument("--data", metavar="DIR", help="where the run's corpus is (default $DEPTHWIDTH_DATA)")
    add_json_flag(s)
    s.set_defaults(func=_sample)


def _sample(args) -> int:
    max_new = None if args.max_new_tokens is None else parse_int(args.max_new_tokens, name="--max-new-tokens")
    temperature = parse_float(args.temperature, name="--temperature", above=float("-inf"))
    top_k = parse_int(args.top_k, name="--top-k", minimum=0) or None
    seed = parse_int(args.seed, name="--seed", minimum=0)
    if temperature < 0:
        raise UserError(f"--temperature must be >= 0 (0 = greedy), got {args.temperature}")
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models import sample

    source = sample.from_gpt2(args.gpt2) if args.gpt2 else sample.from_run(args.run, args.data)
    r = sample.sample(source, args.prompt, max_new_tokens=max_new, temperature=temperature, top_k=top_k, seed=seed)
    step = f", median step {r['step_ms_median']:.2f} ms" if r["step_ms_median"] is not None else ""
    text = (f"{r['text']}\n---\n{r['new_tokens']} new tokens from {r['source']}: {r['tokens_per_s']:,.1f} tokens/s "
            f"(prefill of {r['prompt_tokens']} tokens {1e3 * r['prefill_s']:.1f} ms{step}; compile "
            f"{r['compile_s']:.1f} s, not counted) on {r['device']}")
    emit(args, r, text)
    return 0


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
