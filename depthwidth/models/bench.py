"""Throughput of the real train step: tokens/s, FLOP/s and MFU against the measured peak.

The step timed is exactly the one ``train_run`` uses (AOT-compiled, sharded, state donated),
fed random token batches, so the figure is the engine's and not the data pipeline's. The
machine's matmul peak is measured in the same process (``perf.measured_peak_flops``).
FLOPs per token follow the causal (MaxText) convention, 6N + 6Vd + 6LTd (theory.compute).
"""

from __future__ import annotations

import time

import jax
import numpy as np

from depthwidth.config import RunConfig
from depthwidth.models import perf
from depthwidth.models import sharding as sh
from depthwidth.models.engine import MFU_CONVENTION, build_engine
from depthwidth.theory import compute


def bench_train(cfg: RunConfig, steps: int = 20, warmup: int = 3, verbose: bool = False) -> dict:
    """Time ``steps`` train steps after ``warmup`` untimed ones. cfg.model.vocab_size must be > 0.

    Returns tokens_per_s, flops_per_s, mfu, compile_s, peak_flops_per_s, step_s (median, s),
    flops_per_token and the shape. Raises UserError for an invalid mesh.
    """
    m, t = cfg.model, cfg.train
    engine = build_engine(cfg, verbose=verbose)
    state = engine.init_fn(t.seed)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, m.vocab_size, (t.batch_size, m.seq_len), dtype=np.int32) for _ in range(4)]
    arrays = [sh.global_batch(b, engine.batch_sharding) for b in batches]
    for i in range(warmup):
        state, metrics = engine.train_step(state, arrays[i % 4], arrays[(i + 1) % 4])
    jax.block_until_ready(state)
    times = []
    t0 = time.perf_counter()
    for i in range(steps):
        ts = time.perf_counter()
        state, metrics = engine.train_step(state, arrays[i % 4], arrays[(i + 1) % 4])
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - ts)
    total = time.perf_counter() - t0
    tokens_per_s = steps * t.batch_size * m.seq_len / total
    fpt = int(compute.train_flops_per_token(m.n_layer, m.d_model, m.seq_len, vocab_size=m.vocab_size, d_ff=m.ff_width))
    peak = perf.measured_peak_flops(t.compute_dtype)
    return {
        "n_layer": m.n_layer, "d_model": m.d_model, "n_head": m.n_head, "vocab_size": m.vocab_size,
        "seq_len": m.seq_len, "batch_size": t.batch_size, "compute_dtype": t.compute_dtype, "steps": steps,
        "tokens_per_s": tokens_per_s, "flops_per_token": fpt, "flops_per_s": tokens_per_s * fpt,
        "peak_flops_per_s": peak, "mfu": perf.mfu(tokens_per_s, fpt, peak, engine.mesh.size),
        "mfu_devices": engine.mesh.size, "mfu_convention": MFU_CONVENTION,
        "compile_s": engine.compile_s, "step_s": float(np.median(times)),
        "device": f"{jax.devices()[0].platform} x{jax.device_count()}",
    }
