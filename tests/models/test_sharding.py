"""Sharded training on 8 fake CPU devices reproduces the single-device losses (issue 3 item 3)."""

import dataclasses

import jax
import numpy as np
import pytest

from depthwidth.config import MeshConfig, ModelConfig, RunConfig, TrainConfig
from depthwidth.models import sharding as sh
from depthwidth.models.engine import build_engine

FSDP_RULES = tuple((k, "data" if k == "embed" else v) for k, v in MeshConfig().rules)
DP_RULES = tuple((k, "data" if k == "batch" else None) for k, _ in MeshConfig().rules)


def _losses(cfg: RunConfig, devices, steps: int = 5) -> list[float]:
    engine = build_engine(cfg, mesh=sh.make_mesh(cfg.mesh, devices), verbose=False)
    state = engine.init_fn(cfg.train.seed)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(steps):
        seq = rng.integers(0, cfg.model.vocab_size, (cfg.train.batch_size, cfg.model.seq_len + 1)).astype(np.int32)
        x, y = (sh.global_batch(a, engine.batch_sharding) for a in (seq[:, :-1], seq[:, 1:]))
        state, metrics = engine.train_step(state, x, y)
        out.append(float(metrics["loss"]))
    return out


BASE = RunConfig(model=ModelConfig(n_layer=2, d_model=64, n_head=2, vocab_size=64, seq_len=16),
                 train=TrainConfig(steps=5, batch_size=8, lr=1e-2, warmup_steps=1))


def test_eight_fake_devices():
    assert jax.device_count() == 8, "tests/conftest.py must request 8 host devices before jax loads"


@pytest.mark.parametrize("data,model,rules", [(8, 1, DP_RULES), (2, 4, MeshConfig().rules), (4, 2, FSDP_RULES)],
                         ids=["data-parallel-8x1", "data-x-tensor-2x4", "fsdp+tp-4x2"])
def test_sharded_losses_match_single_device(data, model, rules):
    single = _losses(dataclasses.replace(BASE, mesh=MeshConfig(data=1, model=1)), jax.devices()[:1])
    sharded_cfg = dataclasses.replace(BASE, mesh=MeshConfig(data=data, model=model, rules=rules))
    sharded = _losses(sharded_cfg, jax.devices())
    assert single[-1] < single[0]  # it trains
    np.testing.assert_allclose(sharded, single, rtol=1e-4)


def test_parameters_are_actually_sharded():
    cfg = dataclasses.replace(BASE, mesh=MeshConfig(data=2, model=4))
    engine = build_engine(cfg, mesh=sh.make_mesh(cfg.mesh), verbose=False)
    state = engine.init_fn(0)
    fc = state["params"]["blocks"]["mlp"]["fc"]["kernel"]
    # (L, d, 4d) = (2, 64, 256) with 'mlp' -> 'model' (4 ways): each shard holds 64 columns.
    assert fc.sharding.spec == jax.sharding.PartitionSpec(None, None, "model")
    assert {s.data.shape for s in fc.addressable_shards} == {(2, 64, 64)}
    # Adam moments follow their parameter's sharding.
    mu = state["opt_state"][1][0].mu["blocks"]["mlp"]["fc"]["kernel"]
    assert mu.sharding.spec == fc.sharding.spec


def test_logical_rules_map_names():
    rules = dict(MeshConfig().rules)
    assert sh.logical_to_spec(("layers", "embed", "mlp"), rules) == jax.sharding.PartitionSpec(None, None, "model")
    # A mesh axis is used once per array: the second 'model' is replicated.
    assert sh.logical_to_spec(("mlp", "heads"), rules) == jax.sharding.PartitionSpec("model", None)


def test_bad_mesh_is_a_user_error():
    from depthwidth.errors import UserError

    with pytest.raises(UserError):
        sh.make_mesh(MeshConfig(data=3, model=3))


@pytest.mark.parametrize("mesh, axis, n", [(MeshConfig(data=8, model=1), "data", 8),
                                           (MeshConfig(data=2, model=4, rules=tuple((k, "model" if k == "batch" else v)
                                                                                   for k, v in MeshConfig().rules)),
                                            "model", 4)])
def test_a_batch_that_does_not_split_over_its_mesh_axis_is_one_line(mesh, axis, n):
    """A fresh user's `train --set train.batch_size=7 --devices 8` ended in jax's IndivisibleError
    traceback; it is refused before compiling, naming the axis the batch rule maps to."""
    from depthwidth.errors import UserError

    cfg = dataclasses.replace(BASE, mesh=mesh, train=dataclasses.replace(BASE.train, batch_size=6))
    with pytest.raises(UserError, match=f"train.batch_size=6 does not split over the {n} devices of mesh axis '{axis}'"):
        build_engine(cfg, mesh=sh.make_mesh(cfg.mesh), verbose=False)
