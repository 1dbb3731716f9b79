"""Side-by-side decode throughput: depthwidth's KV-cache generation vs Hugging Face ``generate``.

One random GPT-2 of each shape (``transformers.GPT2LMHeadModel``, PyTorch on the CPU) is loaded
into our LM (depthwidth.models.gpt2: the same weights), and both generate greedily (no sampling)
``--new-tokens`` tokens after the same ``--prompt-len``-token prompt of ``--batch`` sequences, in
this one process, alternating, so background load hits both alike; each side's best of
``--rounds`` is kept. Tokens/s counts the generated tokens (B·n) over the whole call (prefill
included; our compile is not: it happens once, before the rounds). Both sides must produce the
same tokens (checked). Prints one line per shape and, with --json, one JSON list.

    python benchmarks/bench_decode_vs_hf.py --shapes 12x768,24x512 --prompt-len 128 --new-tokens 32

torch and transformers are peers for comparison only (pip install torch==2.13.0 '.[peers]'),
never dependencies. The default threads: every visible core for both sides.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np


def _hf_model(L, d, H, V, T):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=V, n_positions=T, n_embd=d, n_layer=L, n_head=H,
                                     activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, layer_norm_epsilon=1e-5, bos_token_id=None, eos_token_id=None)
    return transformers.GPT2LMHeadModel(config).eval()


def _sides(hf, prompt: np.ndarray, n: int):
    """{"depthwidth": fn, "hf": fn}: each () -> generated tokens (B, T0 + n) as numpy."""
    import torch

    from depthwidth.models.decode import Decoder
    from depthwidth.models.gpt2 import load_hf_gpt2_state_dict

    ours = load_hf_gpt2_state_dict(hf.state_dict(), hf_config=hf.config)
    B, T0 = prompt.shape
    dec = Decoder(ours, B, T0, T0 + n)  # compiled and warmed up here, once
    key = np.zeros(2, np.uint32)

    def run_ours():
        out = [dec.prefill(prompt, key)]
        for i in range(1, n):
            out.append(dec.step(out[-1], T0 + i - 1, key))
        return np.concatenate([prompt, np.stack([np.asarray(t) for t in out], axis=1)], axis=1)

    ids, mask = torch.from_numpy(prompt.astype(np.int64)), torch.ones(prompt.shape, dtype=torch.long)

    def run_hf():
        with torch.no_grad():
            return hf.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                               use_cache=True, pad_token_id=0).numpy()

    return {"depthwidth": run_ours, "hf": run_hf}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="12x768,24x512,4x1536", help="LxD,LxD,... (heads: d/64)")
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="alternating timed rounds per side (best is kept)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:  # peers for comparison, never dependencies: say how to get them, in one line
        sys.exit("bench_decode_vs_hf: error: needs PyTorch and transformers "
                 "(pip install torch==2.13.0 'transformers>=4.40', the CPU wheel)")

    torch.set_num_threads(os.cpu_count() or 1)
    B, T0, n, V = args.batch, args.prompt_len, args.new_tokens, args.vocab
    rows = []
    for shape in args.shapes.split(","):
        L, d = (int(v) for v in shape.lower().split("x"))
        hf = _hf_model(L, d, d // 64, V, T0 + n)
        prompt = np.random.default_rng(0).integers(0, V, (B, T0)).astype(np.int32)
        sides = _sides(hf, prompt, n)
        got = {k: run() for k, run in sides.items()}  # warm-up, and the same tokens from both
        same = bool(np.array_equal(got["depthwidth"], got["hf"]))
        best = {k: math.inf for k in sides}
        for _ in range(args.rounds):  # alternate sides so background load hits both alike
            for k, run in sides.items():
                t0 = time.perf_counter()
                run()
                best[k] = min(best[k], time.perf_counter() - t0)
        row = {"n_layer": L, "d_model": d, "n_head": d // 64, "vocab_size": V, "prompt_len": T0, "new_tokens": n,
               "batch": B, "same_tokens": same, "depthwidth_tokens_per_s": B * n / best["depthwidth"],
               "hf_tokens_per_s": B * n / best["hf"], "ratio_depthwidth_over_hf": best["hf"] / best["depthwidth"],
               "threads": os.cpu_count(), "torch": torch.__version__, "transformers": transformers.__version__}
        rows.append(row)
        if not args.json:
            print(f"L={L:3d} d={d:4d} B={B} T0={T0} n={n}: depthwidth {row['depthwidth_tokens_per_s']:8.1f} tok/s"
                  f" | HF generate {row['hf_tokens_per_s']:8.1f} tok/s | depthwidth/HF "
                  f"{row['ratio_depthwidth_over_hf']:.2f}x | same tokens: {same}", flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
