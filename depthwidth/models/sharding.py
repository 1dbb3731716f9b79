"""Mesh and logical-axis sharding (MaxText style): the model names axes, the config maps them.

``MeshConfig.rules`` is the one table from logical names (``batch``, ``embed``, ``mlp``,
``heads``, ``vocab``, ``layers``) to mesh axes (``data``, ``model``) or None (replicated):
- data parallel:       every parameter rule None, ``batch -> data``;
- tensor parallel:     ``mlp``/``heads``/``vocab -> model`` (the default rules);
- FSDP (ZeRO-3 style): additionally ``embed -> data``.

Multi-process runs (:func:`initialize_distributed`) see one global mesh over every process's
devices; each process feeds its rows of the global batch (:func:`global_batch`).
"""

from __future__ import annotations

import os

import jax
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from depthwidth import hostcpu
from depthwidth.config import MeshConfig
from depthwidth.errors import UserError

CPU_COLLECTIVES = "gloo"  # jax's own cross-process CPU collectives; "mpi" needs an MPI install


def initialize_distributed(coordinator: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, *, shutdown_timeout_s: int | None = None) -> None:
    """Join a multi-process jax run (``jax.distributed.initialize``) before jax starts its backend.

    With no arguments jax detects the cluster (Cloud TPU VMs, SLURM, Open MPI); elsewhere give
    all three: ``coordinator`` "HOST:PORT" of process 0 (which listens there), the number of
    processes and this one's index (0..num_processes-1). On the CPU platform the cross-process
    collectives are set to :data:`CPU_COLLECTIVES` unless ``JAX_CPU_COLLECTIVES_IMPLEMENTATION``
    chooses one. Raises UserError (one line) for the errors jax raises in Python (e.g. no
    cluster detected). Known, not fixed: a coordinator that never answers makes jax's C++ client
    abort the process after its 300 s initialization timeout (SIGABRT, a C++ stack trace), and
    Ctrl-C does not interrupt that wait. ``shutdown_timeout_s``: how long this process waits at
    exit for the others to reach jax's shutdown barrier (jax's default, 300 s, when None); a
    process whose peer died waits that long before it can exit.
    """
    if not hostcpu.accelerator_expected() and not os.environ.get("JAX_CPU_COLLECTIVES_IMPLEMENTATION"):
        # The jax we require (>= 0.7) already defaults to gloo; set anyway because the default
        # has changed before (until jax 0.5.1 it was none, and a collective that spans processes
        # failed at run time) and a multi-process CPU run cannot work without one.
        jax.config.update("jax_cpu_collectives_implementation", CPU_COLLECTIVES)
    try:
        extra = {} if shutdown_timeout_s is None else {"shutdown_timeout_seconds": int(shutdown_timeout_s)}
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id, **extra)
    except (RuntimeError, ValueError) as e:  # JaxRuntimeError is a RuntimeError
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        where = f" (coordinator {coordinator}, process {process_id} of {num_processes})" if coordinator else ""
        raise UserError(f"jax.distributed.initialize failed{where}: {first}") from None


def make_mesh(cfg: MeshConfig, devices: list | None = None) -> jax.sharding.Mesh:
    """A ('data', 'model') mesh over ``devices`` (default: all). ``cfg.data == 0`` fills the rest.

    An explicit ``data * model`` smaller than the device count uses the first that many
    devices (``mesh.data=1`` trains on one device). Raises UserError if it needs more devices
    than there are, or ``model`` does not divide the device count when ``data`` is 0.
    """
    devices = list(devices if devices is not None else jax.devices())
    n = len(devices)
    model = cfg.model
    if cfg.data == 0 and n % model:
        raise UserError(f"mesh.model={model} does not divide the {n} available devices")
    data = cfg.data or n // model
    if data * model > n:
        raise UserError(f"mesh {data}x{model} needs {data * model} devices, {n} available")
    devices = devices[: data * model]
    auto = (jax.sharding.AxisType.Auto,) * 2
    return jax.make_mesh((data, model), ("data", "model"), axis_types=auto, devices=devices)


def logical_to_spec(axes: tuple | PartitionSpec, rules: dict[str, str | None]) -> PartitionSpec:
    """Map a tuple of logical axis names to a mesh PartitionSpec through ``rules``.

    A mesh axis is used at most once per array (a second use is replicated instead).
    """
    used: set[str] = set()
    out = []
    for name in tuple(axes):
        mesh_axis = rules.get(name) if name is not None else None
        if mesh_axis in used:
            mesh_axis = None
        if mesh_axis is not None:
            used.add(mesh_axis)
        out.append(mesh_axis)
    return PartitionSpec(*out)


def _fits(spec: PartitionSpec, shape: tuple[int, ...], mesh: jax.sharding.Mesh) -> PartitionSpec:
    # An axis that does not divide evenly (e.g. a 65-symbol vocab over 4 devices) is replicated:
    # correct everywhere, and the rule table stays one line per logical name.
    fixed = [ax if ax is None or dim % mesh.shape[ax] == 0 else None for ax, dim in zip(spec, shape)]
    return PartitionSpec(*fixed)


def param_shardings(abstract_params: nnx.State, mesh: jax.sharding.Mesh, cfg: MeshConfig):
    """NamedShardings for every parameter, from its logical names and the rule table."""
    rules = dict(cfg.rules)
    logical = nnx.get_partition_spec(abstract_params)

    def to_sharding(spec, leaf):
        shape = leaf.shape
        spec = spec if spec is not None else PartitionSpec()
        mesh_spec = _fits(logical_to_spec(tuple(spec) + (None,) * (len(shape) - len(spec)), rules), shape, mesh)
        return NamedSharding(mesh, mesh_spec)

    return jax.tree.map(to_sharding, nnx.to_pure_dict(logical), nnx.to_pure_dict(abstract_params),
                        is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)


def batch_sharding(mesh: jax.sharding.Mesh, cfg: MeshConfig) -> NamedSharding:
    """Sharding of a (B, T) token batch: B over the mesh axis that ``batch`` maps to."""
    return NamedSharding(mesh, PartitionSpec(dict(cfg.rules).get("batch", "data"), None))


def global_batch(local: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """Build the global (B, T) array from this process's rows of it.

    Every process computes the same global batch (a pure function of (seed, step)) and
    contributes its contiguous slice, so multi-host runs need no data exchange.
    """
    n_proc, i = jax.process_count(), jax.process_index()
    rows = local.shape[0] // n_proc
    return jax.make_array_from_process_local_data(sharding, local[i * rows:(i + 1) * rows], local.shape)
