"""One XLA:CPU thread per run, so that a run's result depends only on its config.

Why: XLA:CPU sizes its intra-op thread pool from the process's CPU affinity when the backend
starts, and the same compiled step gives different floating-point results with 1 and 2
threads (measured: the smoke preset at d_model=32 gives test loss 3.1104 pinned to one core
and 3.0681 on two, each bit-stable across repeats; jax-ml/jax#39741 reports the same). A
sweep's depth gaps are a few 0.01 nats, so the thread count would be a confounder.

The rule: on the CPU platform every run uses exactly :data:`CPU_THREADS` = 1 intra-op thread,
by pinning the process to one core of its affinity set *before* the backend starts. Parallelism
on a many-core CPU comes from running several runs at once (``sweep --jobs J``), which is also
the faster way to use cores for models of this size. Accelerator platforms are left alone.

Import this module before jax starts its backend (the CLI does, ``tests/conftest.py`` does);
:func:`require_fixed_threads` refuses to train on a CPU backend that was started unpinned.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from typing import Any

from depthwidth.errors import UserError

CPU_THREADS = 1

# Affinity seen by the first call of pin_one_core (before jax started), and whether it pinned.
_state: dict[str, Any] = {}


def accelerator_expected() -> bool:
    """True when jax will probably start a GPU/TPU backend (then the CPU is not pinned, and
    multi-process runs leave the CPU collectives alone): ``JAX_PLATFORMS`` names a platform
    other than cpu, or, with it unset, an accelerator plugin is installed."""
    plats = os.environ.get("JAX_PLATFORMS", "").strip().lower()
    if plats:
        return any(p not in ("", "cpu") for p in plats.split(","))

    plugins = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin", "libtpu")
    return any(importlib.util.find_spec(m) is not None for m in plugins)


def _backend_started() -> bool:
    if "jax" not in sys.modules:
        return False
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def _single_core_pins(proc: str = "/proc") -> dict[int, int]:
    """{core: processes pinned to that core alone}, from every readable ``/proc/<pid>/status``
    (``Cpus_allowed_list``); {} where there is no procfs."""
    counts: dict[int, int] = {}
    try:
        pids = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return counts
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, "status")) as fh:
                allowed = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("Cpus_allowed_list")), "")
        except OSError:
            continue
        if allowed.isdigit():
            counts[int(allowed)] = counts.get(int(allowed), 0) + 1
    return counts


def least_pinned_core(cores: list[int], proc: str = "/proc") -> int:
    """The core of ``cores`` with the fewest processes already pinned to it alone (the lowest
    such core on a tie): independent runs started side by side (two ``train`` commands, a sweep
    and a test session) then land on different cores instead of all on the first one. Which
    core a run has does not change its result, only its speed."""
    pins = _single_core_pins(proc)
    return min(cores, key=lambda c: (pins.get(c, 0), c))


def pin_one_core() -> dict[str, Any]:
    """Pin this process to one core of its affinity set (:func:`least_pinned_core`) unless an
    accelerator is expected.

    Does nothing (but still reports) when jax's backend has already started or the OS has no
    affinity API. Idempotent. Returns :func:`host_info`'s dict.
    """
    if not _state and hasattr(os, "sched_getaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        _state["cores_visible"] = len(cores)
        _state["pinned"] = False
        if len(cores) > CPU_THREADS and not _backend_started() and not accelerator_expected():
            os.sched_setaffinity(0, {least_pinned_core(cores)})
            _state["pinned"] = True
    return host_info()


def require_fixed_threads() -> None:
    """Raise UserError if jax runs on the CPU with a thread pool of other than CPU_THREADS threads.

    Call after the backend has started (the train step is about to be built).
    """
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    if jax.devices()[0].platform != "cpu" or not hasattr(os, "sched_getaffinity") or _state.get("pinned"):
        return
    seen = max(len(os.sched_getaffinity(0)), _state.get("cores_visible") or 1)
    if seen != CPU_THREADS:
        raise UserError(f"jax's CPU backend started with {seen} cores visible; results would depend on the core count. "
                        "Call depthwidth.hostcpu.pin_one_core() before using jax (the CLI does), "
                        "or run under `taskset -c 0`")


def host_info() -> dict[str, Any]:
    """What a record says about the host: cpu_threads (intra-op threads of a CPU run), cores_visible
    (affinity before pinning), pinned (bool), cpu_model, machine."""
    model = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_threads": CPU_THREADS, "cores_visible": _state.get("cores_visible"),
            "pinned": _state.get("pinned", False), "cpu_model": model or platform.processor() or None,
            "machine": platform.machine()}


def available_memory_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """Host memory a new allocation can get now (bytes): Linux's ``MemAvailable`` (free memory
    plus reclaimable caches), else the free pages (``SC_AVPHYS_PAGES``), else None.

    Why not the total: a machine whose RAM is mostly taken by other processes passed a check
    against the total and was OOM-killed with no message.
    """
    try:
        with open(meminfo) as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the kernel reports kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def add_devices_flag(p) -> None:
    """``--devices N`` on an argparse parser (train, sweep, reproduce, bench); the CLI applies
    it with :func:`request_cpu_devices` before the command starts jax."""
    p.add_argument("--devices", metavar="N",
                   help="run on N fake CPU devices (sets XLA_FLAGS=--xla_force_host_platform_device_count=N "
                        "and JAX_PLATFORMS=cpu before jax starts), e.g. to try a mesh without accelerators")


def request_cpu_devices(n: int) -> None:
    """Make jax's CPU backend show ``n`` devices, replacing any device count in ``XLA_FLAGS``
    and selecting the CPU platform (fake devices exist on it only).

    Why here: XLA reads the flag once, when jax starts its backend, so it must be set before
    any command touches a device. Raises UserError if ``n`` < 1 or the backend has started.
    """
    if n < 1:
        raise UserError(f"--devices must be >= 1, got {n}")
    if _backend_started():
        raise UserError("--devices must be given before jax starts its backend (set XLA_FLAGS instead)")
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_COUNT_FLAG)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{DEVICE_COUNT_FLAG}={n}"])
    os.environ["JAX_PLATFORMS"] = "cpu"
