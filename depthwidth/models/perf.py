"""Machine peak and model FLOPs utilisation (MFU).

MFU = tokens_per_s * flops_per_token / peak_flops_per_s (Chowdhery et al. 2022, PaLM, App. B).
``flops_per_token`` comes from ``depthwidth.theory`` (the convention is named in every record);
the peak is *measured* on the machine in the same process: the best of a few timed square
matmuls in the compute dtype. On CPU there is no datasheet number worth trusting, and a
measured peak makes the ratio honest about what this machine can do.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp


@functools.cache
def measured_peak_flops(dtype: str = "float32", n: int | None = None, reps: int = 5) -> float:
    """Best observed FLOP/s of an (n x n) @ (n x n) matmul on the default device (2*n^3 FLOPs).

    n defaults to 1024 on CPU and 8192 on accelerators. Cached per process.
    """
    platform = jax.devices()[0].platform
    n = n or (1024 if platform == "cpu" else 8192)
    dt = jnp.dtype(dtype)
    a = jax.random.normal(jax.random.key(0), (n, n), dt)
    b = jax.random.normal(jax.random.key(1), (n, n), dt)
    f = jax.jit(lambda x, y: x @ y)
    f(a, b).block_until_ready()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2.0 * n**3 / best


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops_per_s: float) -> float:
    """Model FLOPs utilisation, a fraction in [0, 1] (can exceed 1 only if the peak is underestimated)."""
    return tokens_per_s * flops_per_token / peak_flops_per_s
