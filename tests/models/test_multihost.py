"""Multi-process training on one machine (issue 13): `depthwidth train --coordinator ...` in 2
processes x 4 fake CPU devices (gloo collectives) trains the same run as 1 process x 8 devices,
writes one record, and saves and restores its checkpoint across both processes."""

import json
import re
import signal
import socket
import subprocess
import time

import numpy as np
import pytest

from depthwidth.cli import main
from depthwidth.experiments.presets import load_preset

STEPS, CKPT_EVERY, LOG_EVERY = 20, 5, 10
ARGS = ["train", "--set", f"train.steps={STEPS}", "--set", "train.warmup_steps=2", "--set",
        f"train.ckpt_every={CKPT_EVERY}", "--set", f"train.log_every={LOG_EVERY}", "--quiet"]
# The smoke preset on a 4x2 data x model mesh with FSDP (embed -> data): the batch and a share of
# every parameter and Adam moment live on each process, so gradients cross processes and each
# process writes and reads its own part of a checkpoint. TOML has no null, so the table lists
# only the names that are sharded (a name left out is replicated).
MESH = """
[base.mesh]
data = 4
model = 2
rules = [["batch", "data"], ["embed", "data"], ["vocab", "model"], ["mlp", "model"], ["heads", "model"]]
"""
# Same program, same shardings; what differs is who sums across the data axis: XLA's in-process
# collectives or gloo across processes, in another order. Measured: the losses differ by up to
# 4e-7 (a float32 ulp at 3.3 is 2.4e-7, relative 1e-7); rtol 1e-5 is ~100 ulps, room for that
# rounding to grow. A real fault is far outside it: both processes feeding the first half of the
# batch (a wrong slice in global_batch) moved the train loss by 0.03 and the test loss by 0.14
# (measured over 40 steps).
RTOL = 1e-5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def preset(tmp_path):
    path = tmp_path / "smoke-fsdp.toml"
    path.write_text(load_preset("smoke").path.read_text() + MESH)
    return ["--preset", str(path)]


def _start_pair(cli_cmd, env, preset, out, port):
    """The two processes of one multi-process run, 4 fake CPU devices each."""
    return [subprocess.Popen(cli_cmd + ARGS + preset + ["--out", str(out), "--devices", "4", "--coordinator",
                                               f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]


def _finish(procs, timeout=600):
    outs = [p.communicate(timeout=timeout) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    return outs


def _records(out):
    return sorted((out / "runs").glob("*/record.json"))


def test_two_processes_train_the_one_process_run_and_resume_across_both(tmp_path, engine_env, cli_cmd, preset):
    # The reference, 1 process x 8 devices, trains meanwhile (one core: it only interleaves).
    one = subprocess.Popen(cli_cmd + ARGS + preset + ["--out", str(tmp_path / "one"), "--devices", "8"], env=engine_env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = tmp_path / "two"
    pair = _start_pair(cli_cmd, engine_env, preset, out, _free_port())
    # Kill both processes (SIGKILL: no clean-up) once the first checkpoint is complete; orbax
    # renames a step's directory to its number only after every process has written its part.
    t0 = time.time()
    while not (saved := [p for p in out.glob("runs/*/ckpt/*") if p.name.isdigit()]):
        assert all(p.poll() is None for p in pair), [p.communicate()[1][-3000:] for p in pair]
        assert time.time() - t0 < 300, "no checkpoint after 300 s"
        time.sleep(0.05)
    for p in pair:
        p.send_signal(signal.SIGKILL)
    for p in pair:
        p.communicate(timeout=60)
    assert not _records(out), f"the run finished before it was killed; raise STEPS above {STEPS}"
    # orbax's OCDBT layout: one sub-store per process that wrote shards (process 1 holds some).
    assert list(saved[0].glob("default/ocdbt.process_1/d/*")), sorted(map(str, saved[0].rglob("*")))

    pair = _start_pair(cli_cmd, engine_env, preset, out, _free_port())
    (_, err0), _ = _finish(pair)
    resumed = re.search(r"resumed \S+ from step (\d+)", err0)
    assert resumed and 0 < int(resumed.group(1)) < STEPS, err0[-3000:]
    _finish([one])

    (path,) = _records(out)  # process 1 writes none (one path for both; see the log check below)
    rec, ref = json.loads(path.read_text()), json.loads(_records(tmp_path / "one")[0].read_text())
    assert rec["run_id"] == ref["run_id"] and rec["status"] == ref["status"] == "finished"
    assert rec["device"] == ref["device"] == "cpu x8" and rec["steps"] == STEPS
    assert rec["processes"] == 2 and "processes" not in ref
    got = [rec[k] for k in ("train_loss", "val_loss", "test_loss")]
    want = [ref[k] for k in ("train_loss", "val_loss", "test_loss")]
    np.testing.assert_allclose(got, want, rtol=RTOL)
    np.testing.assert_allclose(rec["test_loss_chunks"], ref["test_loss_chunks"], rtol=RTOL)
    # Both processes writing the log would double its lines; the resume keeps those up to the
    # restored step and appends the rest, once.
    logged = [json.loads(ln)["step"] for ln in (path.parent / "log.jsonl").read_text().splitlines()]
    assert logged == [k for k in range(1, STEPS + 1) if k % LOG_EVERY == 0 or k % CKPT_EVERY == 0]
    assert not list(out.rglob("*.tmp*"))


@pytest.mark.parametrize("argv, msg", [
    (["--coordinator", "127.0.0.1:1234"], "missing --num-processes, --process-id"),
    (["--num-processes", "2", "--process-id", "0"], "missing --coordinator"),
    (["--coordinator", "127.0.0.1", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
    (["--coordinator", ":1234", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
    (["--coordinator", "h:70000", "--num-processes", "2", "--process-id", "0"], "port in 1..65535"),
    (["--coordinator", "localhost:29512:3", "--num-processes", "1", "--process-id", "0"], "an IPv6 host in brackets"),
    (["--coordinator", "h:1234", "--num-processes", "0", "--process-id", "0"], "--num-processes must be >= 1"),
    (["--coordinator", "h:1234", "--num-processes", "2", "--process-id", "2"], "--process-id must be in 0..1"),
    (["--coordinator", "h:1234", "--num-processes", "2", "--process-id", "-1"], "--process-id must be >= 0"),
])
def test_bad_cluster_flags_are_one_line_exit_2(argv, msg, tmp_path, capsys):
    assert main(["train", "--preset", "smoke", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("depthwidth: error:") and msg in err[0], err
    assert not list(tmp_path.iterdir())  # refused before any work


def test_distributed_without_a_cluster_says_which_flags_to_give(tmp_path, engine_env, cli_cmd):
    # A subprocess: jax.distributed.initialize refuses to run after this process's backend started.
    env = {k: v for k, v in engine_env.items() if not k.startswith(("SLURM_", "OMPI_", "JAX_COORDINATOR"))}
    done = subprocess.run(cli_cmd + ["train", "--preset", "smoke", "--out", str(tmp_path / "o"), "--distributed"],
                          env=env, capture_output=True, text=True, timeout=120)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, done.stderr[-2000:]
    assert "jax.distributed.initialize failed" in err[0] and "--coordinator, --num-processes, --process-id" in err[0]
    assert not (tmp_path / "o").exists()
