"""Machine peak and model FLOPs utilisation (MFU).

MFU = tokens_per_s * flops_per_token / (n_devices * peak_flops_per_s) (Chowdhery et al. 2022,
PaLM, App. B): the global throughput against the peak of every device that trained, where
``peak_flops_per_s`` is one device's.
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


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops_per_s: float, n_devices: int = 1) -> float:
    """Model FLOPs utilisation, a fraction in [0, 1]: global ``tokens_per_s`` (all devices
    together) times ``flops_per_token`` over ``n_devices`` times one device's peak. Above 1
    only if the peak is underestimated (:func:`mfu_warning`). Raises ValueError for
    ``n_devices`` < 1 or a peak <= 0."""
    if n_devices < 1 or not peak_flops_per_s > 0:
        raise ValueError(f"mfu needs n_devices >= 1 and a positive peak, got {n_devices}, {peak_flops_per_s}")
    return tokens_per_s * flops_per_token / (n_devices * peak_flops_per_s)


def mfu_warning(value: float | None) -> str | None:
    """What a record and the train line say about an MFU above 1 (impossible unless the
    measured peak per device is too low), or None."""
    if value is None or value <= 1.0:
        return None
    return f"mfu {value:.3f} is above 1: the measured peak per device underestimates this machine"
