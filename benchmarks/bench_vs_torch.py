"""Side-by-side train-step throughput: depthwidth's JAX engine vs a nanoGPT-style PyTorch GPT.

Both models have the same shape (GPT-2 arrangement, tied head, tanh-GELU, AdamW, global-norm
clipping) and train on the same random token batches in this one process, alternating, so
background load hits both alike. The PyTorch side is a faithful nanoGPT-style reference
(karpathy/nanoGPT model.py: fused c_attn, F.scaled_dot_product_attention(is_causal=True)),
run eagerly on the CPU. Prints one line per shape and, with --json, one JSON list.

    python benchmarks/bench_vs_torch.py --shapes 2x128,6x128,12x128 --vocab 65 --seq-len 64 --batch 32

PyTorch is a peer for comparison only (pip install torch==2.13.0), never a dependency.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np


def torch_gpt(L, d, H, V, T):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T_, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(B, T_, H, d // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T_, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.h:
                x = b(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)

    def step(x, y):
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return step


def _jax_runner(L, d, H, V, T, B, data, unroll):
    """A function n -> run n train steps of depthwidth's engine (one device), blocking at the end."""
    import jax

    from depthwidth.config import MeshConfig, ModelConfig, RunConfig, TrainConfig
    from depthwidth.models import sharding as sh
    from depthwidth.models.engine import build_engine

    cfg = RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=H, vocab_size=V, seq_len=T, scan_unroll=unroll),
                    train=TrainConfig(batch_size=B, steps=10**6, warmup_steps=0), mesh=MeshConfig(data=1))
    eng = build_engine(cfg, mesh=sh.make_mesh(cfg.mesh, jax.devices()[:1]), verbose=False)
    box = {"state": eng.init_fn(0)}
    batches = [(sh.global_batch(s[:, :-1], eng.batch_sharding), sh.global_batch(s[:, 1:], eng.batch_sharding))
               for s in data]

    def run(n):
        for i in range(n):
            box["state"], m = eng.train_step(box["state"], *batches[i % len(batches)])
        jax.block_until_ready(m)

    return run


def _torch_runner(L, d, H, V, T, data):
    """A function n -> run n eager PyTorch train steps of the same shape."""
    import torch

    step = torch_gpt(L, d, H, V, T)
    batches = [(torch.from_numpy(s[:, :-1].astype(np.int64)), torch.from_numpy(s[:, 1:].astype(np.int64))) for s in data]

    def run(n):
        for i in range(n):
            step(*batches[i % len(batches)])

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="2x128,6x128,12x128,6x256", help="LxD,LxD,...")
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=65)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="alternating timed rounds per side (best is kept)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--unrolled-too", action="store_true",
                    help="also time the JAX step with the layer scan fully unrolled (model.scan_unroll = L)")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:  # a peer for comparison, never a dependency: say how to get it, in one line
        sys.exit("bench_vs_torch: error: needs PyTorch (pip install torch==2.13.0, the CPU wheel)")

    from depthwidth.theory.compute import train_flops_per_token

    torch.set_num_threads(os.cpu_count() or 1)
    H, V, T, B = args.heads, args.vocab, args.seq_len, args.batch
    rng = np.random.default_rng(0)
    rows = []
    for shape in args.shapes.split(","):
        L, d = (int(v) for v in shape.lower().split("x"))
        data = [rng.integers(0, V, (B, T + 1)).astype(np.int32) for _ in range(4)]
        sides = {"jax": _jax_runner(L, d, H, V, T, B, data, unroll=1)}
        if args.unrolled_too:
            sides["jax_unrolled"] = _jax_runner(L, d, H, V, T, B, data, unroll=L)
        sides["torch"] = _torch_runner(L, d, H, V, T, data)
        for run in sides.values():  # warm-up (and compile) every side
            run(3)
        best = {k: math.inf for k in sides}
        for _ in range(args.rounds):  # alternate sides so background load hits all alike
            for k, run in sides.items():
                t0 = time.perf_counter()
                run(args.steps)
                best[k] = min(best[k], time.perf_counter() - t0)
        best_j, best_t = best["jax"], best["torch"]
        tok = args.steps * B * T
        fpt = int(train_flops_per_token(L, d, T, vocab_size=V))
        row = {"n_layer": L, "d_model": d, "n_head": H, "vocab_size": V, "seq_len": T, "batch_size": B,
               "jax_tokens_per_s": tok / best_j, "torch_tokens_per_s": tok / best_t,
               "ratio_jax_over_torch": best_t / best_j, "flops_per_token": fpt,
               "jax_gflops_per_s": tok / best_j * fpt / 1e9, "torch_gflops_per_s": tok / best_t * fpt / 1e9}
        if args.unrolled_too:
            row["jax_unrolled_tokens_per_s"] = tok / best["jax_unrolled"]
            row["ratio_unrolled_over_torch"] = best_t / best["jax_unrolled"]
        rows.append(row)
        if not args.json:
            print(f"L={L:3d} d={d:4d}: jax {row['jax_tokens_per_s']:10,.0f} tok/s ({row['jax_gflops_per_s']:6.1f} GFLOP/s)"
                  f" | torch {row['torch_tokens_per_s']:10,.0f} tok/s ({row['torch_gflops_per_s']:6.1f} GFLOP/s)"
                  f" | jax/torch {row['ratio_jax_over_torch']:.2f}x"
                  + (f" | unrolled {row['jax_unrolled_tokens_per_s']:10,.0f} tok/s ({row['ratio_unrolled_over_torch']:.2f}x torch)"
                     if args.unrolled_too else ""), flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
