"""The sweep runner on a local Ray cluster (experiments.ray_runner) with the real engine: the same
records as the local runner, a SIGKILLed worker retried and resumed, a second pass that trains
nothing; and the CLI: no Ray import without --ray, one-line errors for bad Ray options."""

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from depthwidth.experiments import ray_runner
from depthwidth.experiments.presets import load_preset, with_overrides

# The smoke preset, shorter: compilation, not steps, is most of a run's time here. A checkpoint
# every 10 of 40 steps leaves the kill test a window of ~30 steps between checkpoint and record.
OVERRIDES = ["train.steps=40", "train.ckpt_every=10"]
PRESET = with_overrides(load_preset("smoke"), OVERRIDES)
LOSSES = ("test_loss", "val_loss", "train_loss")


def _quiet(msg):
    pass


@pytest.fixture(scope="module")
def ray_cluster(engine_env):
    """A 2-CPU local Ray cluster for the module. Its workers see what a `depthwidth` subprocess
    sees (engine_env: one CPU device, the real corpora, the session's prepared-data and
    compilation cache) and import this checkout."""
    ray = pytest.importorskip("ray")
    checkout = str(Path(__file__).resolve().parents[2])
    env = {k: engine_env[k] for k in ("DEPTHWIDTH_DATA", "DEPTHWIDTH_CACHE", "JAX_PLATFORMS")}
    env["XLA_FLAGS"] = ""  # not this process's 8 fake devices
    env["PYTHONPATH"] = os.pathsep.join([checkout] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    # The kill test's train_fn lives in this module, which the workers cannot import by name.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # ray.init installs a SIGTERM handler (sys.exit(15)) that outlives ray.shutdown: it broke a
    # later signal test in the same pytest-xdist worker, so this process's handlers come back
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    yield ray
    ray.shutdown()
    for s, h in handlers.items():
        signal.signal(s, h)


@pytest.fixture(scope="module")
def local_records(tmp_path_factory, engine_env, cli_cmd):
    """The preset trained by the plain runner (`depthwidth sweep` without --ray): {run_id: record}."""
    results = tmp_path_factory.mktemp("local")
    sets = [x for o in OVERRIDES for x in ("--set", o)]
    p = subprocess.run(cli_cmd + ["sweep", "--preset", "smoke", "--results", str(results), "--no-progress", *sets],
                       env=engine_env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return {q.parent.name: json.loads(q.read_text()) for q in results.glob("runs/*/record.json")}


@pytest.fixture(scope="module")
def ray_results(tmp_path_factory, ray_cluster, local_records):
    results = tmp_path_factory.mktemp("ray") / "results"
    rep = ray_runner.run_ray_sweep(PRESET, results, ray_runner.RayOptions(), verbose=False, log=_quiet)
    return results, rep


def test_a_ray_sweep_writes_the_same_records_as_the_local_runner(ray_results, local_records):
    results, rep = ray_results
    ids = [r.run_id() for r in PRESET.runs]
    assert rep.total == rep.finished == len(ids) and rep.remaining == 0 and not rep.failed and not rep.busy
    assert sorted(rep.trained) == sorted(ids) and rep.worker == 0 and rep.num_workers == 1
    assert not list(results.glob("runs/*/claim.json"))
    got = {p.parent.name: json.loads(p.read_text()) for p in results.glob("runs/*/record.json")}
    assert sorted(got) == sorted(local_records) == sorted(ids)
    for i in ids:  # a run's result depends only on its config: bit-identical losses
        assert {k: got[i][k] for k in LOSSES} == {k: local_records[i][k] for k in LOSSES}, i
        assert got[i]["status"] == "finished"


def test_a_second_pass_trains_nothing(ray_results, ray_cluster):
    results, _ = ray_results
    before = {p: p.stat().st_mtime_ns for p in results.glob("runs/*/record.json")}
    lines = []
    rep = ray_runner.run_ray_sweep(PRESET, results, ray_runner.RayOptions(), train_fn=_no_training, log=lines.append)
    assert rep.trained == [] and rep.done_before == rep.finished == len(PRESET.runs) and rep.complete
    assert any("0 task(s) submitted" in line for line in lines)
    assert {p: p.stat().st_mtime_ns for p in results.glob("runs/*/record.json")} == before


def _no_training(*a, **k):
    raise AssertionError("a finished sweep must not train anything")


class KillOnce:
    """train_run, except that the first call anywhere (marker file) SIGKILLs its own worker process
    once the run's first checkpoint exists; every call appends {pid, process, checkpoints found}
    to ``log``. With ``process`` only that jax process (of a multi-process run) kills itself."""

    def __init__(self, marker: str, log: str, process: int | None = None):
        self.marker, self.log, self.process = marker, log, process

    def __call__(self, cfg, results_dir, **kw):
        import jax

        from depthwidth.models.train import train_run

        ckpt = Path(results_dir, "runs", cfg.run_id(), "ckpt")
        steps = sorted(int(p.name) for p in ckpt.glob("*") if p.name.isdigit())
        with open(self.log, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "process": jax.process_index(), "ckpt": steps}) + "\n")
        if self.process is not None and jax.process_index() != self.process:
            return train_run(cfg, results_dir, **kw)
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return train_run(cfg, results_dir, **kw)

        def kill_after_checkpoint():
            while not any(p.name.isdigit() for p in ckpt.glob("*")):
                time.sleep(0.002)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill_after_checkpoint, daemon=True).start()
        return train_run(cfg, results_dir, **kw)


def test_a_killed_worker_is_retried_and_resumes_from_its_checkpoint(tmp_path, ray_cluster, local_records):
    one = dataclasses.replace(PRESET, runs=PRESET.runs[:1])
    (run_id,) = [r.run_id() for r in one.runs]
    results, attempts = tmp_path / "results", tmp_path / "attempts.jsonl"
    kill = KillOnce(str(tmp_path / "killed"), str(attempts))
    rep = ray_runner.run_ray_sweep(one, results, ray_runner.RayOptions(max_retries=2), train_fn=kill,
                                   verbose=False, log=_quiet)
    calls = [json.loads(line) for line in attempts.read_text().splitlines()]
    # Two attempts in two processes; the second found the first one's checkpoint.
    assert len(calls) == 2 and calls[0]["pid"] != calls[1]["pid"]
    assert calls[0]["ckpt"] == [] and calls[1]["ckpt"] and max(calls[1]["ckpt"]) < PRESET.base.train.steps
    assert rep.trained == [run_id] and rep.finished == 1 and not rep.failed
    assert not (results / "runs" / run_id / "claim.json").exists()  # the dead attempt's claim was taken over
    rec = json.loads((results / "runs" / run_id / "record.json").read_text())
    assert {k: rec[k] for k in LOSSES} == {k: local_records[run_id][k] for k in LOSSES}
    logged = [json.loads(line)["step"] for line in (results / "runs" / run_id / "log.jsonl").read_text().splitlines()]
    assert logged == sorted(set(logged)) and logged[-1] == PRESET.base.train.steps


def test_a_run_whose_task_keeps_dying_is_failed_and_the_others_go_on(tmp_path, ray_cluster):
    two = dataclasses.replace(PRESET, runs=PRESET.runs[:2])
    doomed = two.runs[0].run_id()
    rep = ray_runner.run_ray_sweep(two, tmp_path, ray_runner.RayOptions(max_retries=0),
                                   train_fn=_DieOn(doomed), log=_quiet)
    assert [f["run_id"] for f in rep.failed] == [doomed] and "Worker" in rep.failed[0]["error"]
    assert rep.trained == [two.runs[1].run_id()] and rep.remaining == 1


class _DieOn:
    """A stand-in train_fn: SIGKILLs its worker on one run id, writes a small record otherwise."""

    def __init__(self, run_id):
        self.run_id = run_id

    def __call__(self, cfg, results_dir, **kw):
        from depthwidth import records

        if cfg.run_id() == self.run_id:
            os.kill(os.getpid(), signal.SIGKILL)
        rec = {"run_id": cfg.run_id(), "status": "finished", "config": cfg.to_dict()}
        records.write_json_atomic(records.run_dir(results_dir, cfg.run_id()) / "record.json", rec)
        return rec


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_cancels_the_tasks_releases_their_claims_and_exits_130(tmp_path, ray_cluster, engine_env,
                                                                      terminal_cli_cmd, sig, code):
    pytest.importorskip("ray")
    results = tmp_path / "r"
    # As a terminal starts it: started from a shell's background job, the driver inherits SIGINT
    # ignored and keeps it so (nohup's rule), and this test hung to its 90 s limit (2 of 2 runs)
    cmd = terminal_cli_cmd + ["sweep", "--preset", "smoke", "--results", str(results), "--ray", "local", "--ray-num-cpus", "2",
                     "--set", "train.steps=5000", "--no-progress"]  # long runs: still training when stopped
    # PYTHONFAULTHANDLER: a driver still there at the deadline prints every thread's stack on SIGABRT
    p = subprocess.Popen(cmd, env={**engine_env, "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # Stopped while training (past a checkpoint). A cancel that lands while a worker still
    # compiles is held until the compile ends (interrupts.deferred), then stops the run.
    while not list(results.glob("runs/*/ckpt/50")) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(sig)
    t0 = time.monotonic()
    try:
        out, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:  # fail, with the driver's stacks, leaving no driver behind
        p.send_signal(signal.SIGABRT)
        try:
            _, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        pytest.fail(f"the Ray driver had not exited 90 s after {sig.name}:\n{err[-6000:]}")
    print(f"the driver exited {time.monotonic() - t0:.1f} s after {sig.name}")
    assert p.returncode == code, err[-3000:]
    # The driver's own lines: no traceback (a cancelled worker's output, forwarded by Ray with a
    # "(train_task pid=...)" prefix, may have one: a KeyboardInterrupt inside a jax callback).
    driver = [line for line in err.strip().splitlines() if "(train_task" not in line]
    print("\n".join(line for line in driver if "[sweep ray]" in line))
    assert driver[-1] == "depthwidth: interrupted" and not any("Traceback" in line for line in driver)
    assert not list(results.glob("runs/*/claim.json")) and not list(results.glob("runs/*/record.json"))


class _FakeRay:
    """The ``ray`` calls of ray_runner._collect and _cancel. ``wait`` runs ``during_wait`` (once)
    and then reports nothing ready; a task stops only when cancelled with ``force`` (its
    KeyboardInterrupt swallowed), or with either when ``obeys``."""

    class exceptions:  # noqa: N801 -- stands in for ray.exceptions
        RayError = RuntimeError

    def __init__(self, during_wait=None, obeys=False):
        self.during_wait, self.obeys, self.cancels, self.stopped, self.waits = during_wait, obeys, [], set(), 0

    def cluster_resources(self):
        return {"CPU": 2.0}

    def cancel(self, ref, force=False):
        self.cancels.append((ref, force))
        if force or self.obeys:
            self.stopped.add(ref)

    def wait(self, refs, num_returns=1, timeout=None):
        self.waits += 1
        if self.waits > 40:
            raise AssertionError("the sweep went on waiting for its tasks after the signal")
        if self.during_wait is not None:
            during, self.during_wait = self.during_wait, None
            during()
        ready = [r for r in refs if r in self.stopped]
        if len(ready) < num_returns:
            time.sleep(min(timeout or 0, 0.05))
        return ready, [r for r in refs if r not in self.stopped]


def test_cancel_stops_by_force_the_tasks_that_ignore_it_within_the_grace_and_frees_their_claims(tmp_path, monkeypatch):
    from depthwidth import storage
    from depthwidth.experiments import claims, runner

    monkeypatch.setattr(ray_runner, "CANCEL_GRACE_S", 0.05)
    jobs = runner.plan(PRESET, tmp_path)[:3]
    store = storage.open_results(tmp_path)
    for job, token in zip(jobs, ("t0", "t1", "someone-else")):  # the third run is held by another worker
        assert claims.try_claim(store, job.run_id, worker=0, num_workers=1, stale_after_s=60.0, settle_s=0.0,
                                token=token)[0]
    pending = {"a": ray_runner.Submitted(jobs[0], "t0"), "b": ray_runner.Submitted(jobs[1], "t1"),
               "c": ray_runner.Submitted(jobs[2], "ours-never-claimed")}
    lines, ray = [], _FakeRay()
    t0 = time.monotonic()
    ray_runner._cancel(ray, pending, lines.append)
    assert time.monotonic() - t0 < 5
    assert ray.cancels == [(r, False) for r in "abc"] + [(r, True) for r in "abc"] and ray.stopped == {"a", "b", "c"}
    assert "3 task(s) still running after 0 s: stopped by force" in lines[1]
    # which of them had begun training: the log says, per run (a claim carrying the task's token)
    assert lines[1].endswith(f"{jobs[0].run_id} (had claimed its run), {jobs[1].run_id} (had claimed its run), "
                             f"{jobs[2].run_id} (had not claimed its run yet)")
    # the claims those tasks held are gone; another worker's stays
    assert [store.exists(claims.claim_rel(j.run_id)) for j in jobs] == [False, False, True]
    obeyed = _FakeRay(obeys=True)
    ray_runner._cancel(obeyed, {"a": pending["a"]}, lines.append)
    assert obeyed.cancels == [("a", False)]  # stopped in the grace: no force


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("ray_does", ["raises its own KeyboardInterrupt", "drops it"])
def test_a_signal_inside_a_ray_call_stops_the_sweep_as_that_signal(sig, ray_does, interactive_sigint):
    from depthwidth import interrupts

    def signal_inside_ray():
        try:  # as Ray's C++ does with what our handler raises: a status, then maybe its own exception
            os.kill(os.getpid(), sig)
            time.sleep(1)
        except KeyboardInterrupt:
            if ray_does == "raises its own KeyboardInterrupt":
                raise KeyboardInterrupt from None

    ray = _FakeRay(during_wait=signal_inside_ray, obeys=True)
    with interrupts.honoured(), pytest.raises(KeyboardInterrupt) as e:
        ray_runner._collect(ray, {"a": None, "b": None}, None, ray_runner.RayOptions(), _quiet)
    assert interrupts.exit_code(e.value) == 128 + sig  # 130 or 143, whatever Ray raised
    assert ray.cancels == [("a", False), ("b", False)]


def _cli(args, extra="", env=None):
    code = (f"import sys\n{extra}\nfrom depthwidth.cli import main\nrc = main({args!r})\n"
            "print('RAY_IMPORTED' if 'ray' in sys.modules else 'NO_RAY', file=sys.stderr)\nsys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_the_cli_without_ray_never_imports_ray(tmp_path, ray_results, engine_env):
    results, _ = ray_results
    shutil.copytree(results, tmp_path / "r")  # finished: the sweep only reads the records
    sets = [x for o in OVERRIDES for x in ("--set", o)]
    p = _cli(["sweep", "--preset", "smoke", "--results", str(tmp_path / "r"), "--no-progress", *sets], env=engine_env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr.strip().endswith("NO_RAY") and "8/8 runs have records" in p.stdout


@pytest.mark.parametrize("args, message", [
    (["--ray", "local", "--jobs", "2"], "--ray places every run itself; drop --jobs"),
    (["--ray", "local", "--worker", "1", "--num-workers", "2"], "drop --worker"),
    (["--ray", "local", "--ray-resources", "TPU"], "--ray-resources 'TPU': expected NAME=N"),
    (["--ray", "local", "--ray-resources", "TPU=-4"], "--ray-resources 'TPU=-4': expected NAME=N"),
    (["--ray-resources", "TPU=4"], "--ray-resources needs --ray"),
    (["--ray", "local", "--ray-num-gpus-per-run", "x"], "--ray-num-gpus-per-run must be a number"),
    (["--ray", "local", "--ray-group-strategy", "PACK"], "it needs --ray-hosts-per-run K > 1"),
    (["--ray", "local", "--ray-hosts-per-run", "2", "--ray-group-strategy", "ANY"], "--ray-group-strategy must be one of"),
    (["--ray", "local", "--ray-env", "NOEQUALS"], "--ray-env 'NOEQUALS': expected NAME=VALUE"),
    (["--ray-hosts-per-run", "2"], "--ray-hosts-per-run needs --ray"),
])
def test_bad_ray_options_are_one_line_and_exit_2(tmp_path, args, message):
    for cmd in ("sweep", "reproduce"):
        p = _cli([cmd, "--preset", "smoke", "--results", str(tmp_path), *args])
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 2 and lines[1] == "NO_RAY", p.stderr
        assert lines[0].startswith("depthwidth: error: ") and message in lines[0]


def test_without_ray_installed_the_flag_is_one_line(tmp_path):
    p = _cli(["sweep", "--preset", "smoke", "--results", str(tmp_path), "--ray", "local"],
             extra="sys.modules['ray'] = None  # as if it were not installed")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[0] == "depthwidth: error: --ray needs Ray: pip install 'depthwidth[ray]'"


def test_resource_requests():
    assert ray_runner.parse_resources(["TPU=4", "accel_x=0.5"]) == {"TPU": 4.0, "accel_x": 0.5}
    assert ray_runner.RayOptions().task_options() == {"num_cpus": 1.0, "num_gpus": 0.0, "resources": {},
                                                      "max_retries": 3, "retry_exceptions": False, "max_calls": 0}
    tpu = ray_runner.RayOptions(address="auto", resources={"TPU": 4.0}).task_options()
    assert tpu["resources"] == {"TPU": 4.0} and tpu["max_calls"] == 1  # an accelerator is freed after each run


def test_a_request_a_local_cluster_cannot_meet_is_one_error_not_a_wait():
    # fresh-user finding: `--ray local --ray-resources TPU=4` on a CPU machine waited forever
    from depthwidth.errors import UserError

    have = {"CPU": 2.0, "memory": 1e9}
    ray_runner._check_fits(ray_runner.RayOptions(cpus_per_run=2.0), have)  # fits exactly
    for opts, needle in ((ray_runner.RayOptions(resources={"TPU": 4.0}), "TPU=4 (the local cluster has 0)"),
                         (ray_runner.RayOptions(gpus_per_run=1.0), "GPU=1 (the local cluster has 0)"),
                         (ray_runner.RayOptions(cpus_per_run=3.0), "CPU=3 (the local cluster has 2)")):
        with pytest.raises(UserError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            ray_runner._check_fits(opts, have)


# ------------------------------------------------------------------------------ task groups

# A run over 2 processes x 4 fake CPU devices (a task group joined by jax.distributed) on the
# FSDP mesh of tests/models/test_multihost.py: gradients and every checkpoint cross processes.
GROUP_SETS = ["mesh.data=4", "mesh.model=2", "train.steps=20", "train.ckpt_every=5", "train.log_every=10",
              "train.warmup_steps=2"]
GROUP_RULES = [["batch", "data"], ["embed", "data"], ["vocab", "model"], ["mlp", "model"], ["heads", "model"]]
GROUP_RTOL = 1e-5  # as test_multihost: gloo sums in another order than in-process collectives


def test_a_run_over_a_task_group_of_two_processes_survives_a_dead_member(tmp_path, ray_cluster, engine_env,
                                                                         monkeypatch):
    from depthwidth.models.train import train_run

    for k in ("DEPTHWIDTH_DATA", "DEPTHWIDTH_CACHE"):
        monkeypatch.setenv(k, engine_env[k])

    base = with_overrides(load_preset("smoke"), GROUP_SETS)
    base = dataclasses.replace(base, runs=base.runs[:1])
    (cfg,) = base.runs
    cfg = dataclasses.replace(cfg, mesh=dataclasses.replace(cfg.mesh, rules=tuple(map(tuple, GROUP_RULES))))
    one = dataclasses.replace(base, runs=(cfg,))
    ref = train_run(cfg, tmp_path / "ref", progress=False, verbose=False)  # this process: 1 x 8 devices
    assert ref["device"] == "cpu x8"

    results, attempts = tmp_path / "results", tmp_path / "attempts.jsonl"
    opts = ray_runner.RayOptions(hosts_per_run=2, max_retries=1,
                                 env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    lines = []
    rep = ray_runner.run_ray_sweep(one, results, opts, train_fn=KillOnce(str(tmp_path / "killed"), str(attempts), process=1),
                                   verbose=False, log=lines.append)
    assert rep.trained == [cfg.run_id()] and not rep.failed, (rep, lines)
    calls = [json.loads(x) for x in attempts.read_text().splitlines()]
    # two attempts of both processes, each in a fresh process; the second found the checkpoint
    assert sorted(c["process"] for c in calls) == [0, 0, 1, 1] and len({c["pid"] for c in calls}) == 4
    first, second = calls[:2], calls[2:]
    assert all(c["ckpt"] == [] for c in first) and all(c["ckpt"] for c in second)
    assert max(second[0]["ckpt"]) < 20
    assert any("processes per run (PACK)" in x for x in lines)
    rec = json.loads((results / "runs" / cfg.run_id() / "record.json").read_text())
    assert rec["device"] == "cpu x8" and rec["processes"] == 2 and rec["steps"] == 20 and rec["status"] == "finished"
    assert "processes" not in ref
    np.testing.assert_allclose([rec[k] for k in LOSSES], [ref[k] for k in LOSSES], rtol=GROUP_RTOL)
    assert not (results / "runs" / cfg.run_id() / "claim.json").exists()
    assert ray_cluster.util.placement_group_table() and all(
        g["state"] == "REMOVED" for g in ray_cluster.util.placement_group_table().values())


def test_group_options():
    from depthwidth.errors import UserError
    from depthwidth.experiments import ray_groups

    # a group that could not form is retried; an error of training is not
    assert ray_groups._retryable(ray_groups.GroupSetupError("port taken"))
    assert ray_groups._retryable(RuntimeError("UNKNOWN: Gloo context initialization failed: DEADLINE_EXCEEDED: "
                                              "GetKeyValue() timed out with key: cpu:gloo/0,2048/1"))
    assert not ray_groups._retryable(ValueError("nan in the loss")) and not ray_groups._retryable(UserError("bad"))

    assert ray_runner.RayOptions(hosts_per_run=2).task_options() == {"num_cpus": 0, "max_retries": 3,
                                                                      "retry_exceptions": False}
    assert ray_runner.RayOptions(hosts_per_run=2).group_strategy() == "PACK"
    assert ray_runner.RayOptions(address="auto", hosts_per_run=2).group_strategy() == "STRICT_SPREAD"
    assert ray_runner.parse_env(["XLA_FLAGS=--a=1 --b", "X="]) == {"XLA_FLAGS": "--a=1 --b", "X": ""}
    for bad in (["X"], ["=1"], ["X=1", "X=2"]):
        with pytest.raises(UserError, match="expected NAME=VALUE"):
            ray_runner.parse_env(bad)
    with pytest.raises(UserError, match="--ray-group-strategy must be one of"):
        ray_runner.RayOptions(strategy="ANYWHERE")
    # a local cluster must hold the whole group: K x the per-process request
    with pytest.raises(UserError, match=r"each run \(3 processes\) asks for CPU=3 \(the local cluster has 2\)"):
        ray_runner._check_fits(ray_runner.RayOptions(hosts_per_run=3), {"CPU": 2.0})
