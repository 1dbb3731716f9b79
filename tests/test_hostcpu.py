"""A run's result must not depend on how many cores the process could see (depthwidth.hostcpu).

Before the fix the smoke model at d_model=32 gave test loss 3.1104 under `taskset -c 0` and
3.0681 on two cores (XLA:CPU's thread pool is sized from the affinity mask)."""

import json
import os
import subprocess
import sys

import pytest

from depthwidth import hostcpu


def _train(tmp_path, name, cores, corpora_dir):
    env = dict(os.environ, DEPTHWIDTH_DATA=str(corpora_dir), DEPTHWIDTH_CACHE=str(tmp_path / "cache"))
    env.pop("XLA_FLAGS", None)  # one plain CPU device, as a user's shell has
    out = subprocess.run(
        ["taskset", "-c", cores, sys.executable, "-m", "depthwidth.cli", "train", "--preset", "smoke",
         "--set", "model.d_model=32", "--set", "train.steps=30", "--out", str(tmp_path / name), "--quiet", "--json"],
        capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or (os.cpu_count() or 1) < 2,
                    reason="needs Linux affinity and two cores")
def test_result_is_the_same_on_one_and_two_cores(tmp_path, corpora_dir):
    one = _train(tmp_path, "one", "0", corpora_dir)
    two = _train(tmp_path, "two", "0,1", corpora_dir)
    assert one["run_id"] == two["run_id"]
    assert one["test_loss"] == two["test_loss"]  # bit-identical, not approximately
    assert one["test_loss_chunks"] == two["test_loss_chunks"]
    assert one["host"]["cpu_threads"] == two["host"]["cpu_threads"] == 1
    assert one["host"]["cores_visible"] == 1 and two["host"]["cores_visible"] == 2
    assert two["host"]["pinned"] is True and one["host"]["pinned"] is False


def test_test_loss_chunks_average_to_the_test_loss(tmp_path, corpora_dir):
    rec = _train(tmp_path, "chunks", "0", corpora_dir)
    chunks = rec["test_loss_chunks"]
    # the smoke preset evaluates 64 test sequences: 32 chunks of 2 sequences each
    assert len(chunks) == 32 and rec["test_sequences"] == 64
    assert sum(chunks) / len(chunks) == pytest.approx(rec["test_loss"], rel=1e-6)


def test_training_refuses_a_cpu_backend_started_on_several_cores(monkeypatch):
    monkeypatch.setattr(hostcpu, "_state", {"cores_visible": 2, "pinned": False})
    from depthwidth.errors import UserError

    with pytest.raises(UserError, match="depend on the core count"):
        hostcpu.require_fixed_threads()


def test_available_memory_is_memavailable_not_the_total(tmp_path):
    # Issue 10: the memory check compared with total RAM, so a box whose RAM other processes
    # held passed it and was OOM-killed. /proc/meminfo's MemAvailable is in kB.
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       24683612 kB\nMemFree:         1000000 kB\nMemAvailable:    2097152 kB\n")
    assert hostcpu.available_memory_bytes(str(f)) == 2 * 2**30
    assert hostcpu.available_memory_bytes(str(tmp_path / "absent")) > 0  # sysconf's free pages


def test_devices_flag_sets_the_fake_cpu_device_count_before_jax(monkeypatch):
    # Issue 10: `--devices N` is what users of fake CPU devices reach for; only XLA_FLAGS worked.
    from depthwidth.cli import main

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # restored after the test, as XLA_FLAGS is
    monkeypatch.setattr(hostcpu, "_backend_started", lambda: False)
    seen = {}

    def fake_train(cfg, out, **kw):
        seen["flags"], seen["platforms"] = os.environ["XLA_FLAGS"], os.environ["JAX_PLATFORMS"]
        raise hostcpu.UserError("stop here")

    monkeypatch.setattr("depthwidth.models.train.train_run", fake_train)
    assert main(["train", "--out", "x", "--devices", "4"]) == 2
    assert seen == {"flags": "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=4", "platforms": "cpu"}
    assert main(["train", "--out", "x", "--devices", "0"]) == 2  # one line: must be >= 1
    monkeypatch.setattr(hostcpu, "_backend_started", lambda: True)
    with pytest.raises(hostcpu.UserError, match="before jax starts"):
        hostcpu.request_cpu_devices(2)


def _fake_proc(root, allowed_by_pid):
    for pid, allowed in allowed_by_pid.items():
        d = root / str(pid)
        d.mkdir()
        (d / "status").write_text(f"Name:\tpython\nCpus_allowed:\tff\nCpus_allowed_list:\t{allowed}\n")
    (root / "self").mkdir()  # not a pid: ignored


def test_a_run_is_pinned_to_the_core_with_fewest_single_core_pins(tmp_path):
    # two processes alone on core 0, one on core 2, one free to use 0-3 (not a single-core pin)
    _fake_proc(tmp_path, {10: "0", 11: "0", 12: "2", 13: "0-3"})
    assert hostcpu._single_core_pins(str(tmp_path)) == {0: 2, 2: 1}
    assert hostcpu.least_pinned_core([0, 1, 2, 3], str(tmp_path)) == 1
    assert hostcpu.least_pinned_core([0, 2], str(tmp_path)) == 2
    assert hostcpu.least_pinned_core([0], str(tmp_path)) == 0
    assert hostcpu.least_pinned_core([3, 1], str(tmp_path / "missing")) == 1  # no procfs: the lowest core
