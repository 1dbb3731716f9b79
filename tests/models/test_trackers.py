"""Trackers (issue 13): each run's log goes also to TensorBoard / W&B, for train, sweep and
reproduce; log.jsonl stays the source of truth, and the tracker copies hold its numbers."""

import importlib.machinery
import json
import signal
import struct
import subprocess
import sys
import time
import types

import pytest

from depthwidth.cli import main
from depthwidth.config import DataConfig, MeshConfig, ModelConfig, RunConfig, TrainConfig
from depthwidth.models.train import train_run

CFG = RunConfig(
    model=ModelConfig(n_layer=1, d_model=16, n_head=2, seq_len=32),
    data=DataConfig(corpus="tinyshakespeare", tokenizer="char"),
    train=TrainConfig(steps=20, batch_size=8, lr=3e-3, warmup_steps=4, log_every=5, ckpt_every=10, eval_every=10,
                      eval_batches=2, test_sequences=64),
    mesh=MeshConfig(data=1),
)

# a one-run preset: the smallest sweep whose runs the trackers can follow
ONE_RUN = """
name = "one"
description = "one tiny run"
[base.model]
n_layer = 1
d_model = 16
n_head = 2
seq_len = 32
[base.data]
corpus = "tinyshakespeare"
tokenizer = "char"
[base.train]
steps = 20
batch_size = 8
lr = 3e-3
warmup_steps = 4
log_every = 5
ckpt_every = 10
eval_batches = 2
test_sequences = 64
[grid]
depths = [1]
seeds = [0]
[grid.widths]
1 = [16]
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch, corpora_dir):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("DEPTHWIDTH_DATA", str(corpora_dir))


class _FakeRun:
    """``step`` as W&B's: the step of the next log call, past every step this run id holds
    (``held``, shared by the runs of one fake module; W&B online resumes it, offline it is 0)."""

    def __init__(self, calls, kw, held):
        self.calls, self.kw, self.summary, self.held = calls, kw, {}, held
        self.step = max(held, default=-1) + 1
        calls.append(("init", kw))

    def log(self, data, step):
        self.calls.append(("log", step, dict(data)))
        self.held.add(step)

    def finish(self):
        self.calls.append(("finish", dict(self.summary)))


def _fake_wandb(monkeypatch, remembers=True):
    """A recording stand-in for the wandb module: what our code asks of W&B, call by call. With
    ``remembers=False`` every init starts at step 0, as W&B offline or after a lost process."""
    calls, held = [], set()
    mod = types.ModuleType("wandb")
    mod.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
    mod.init = lambda **kw: _FakeRun(calls, kw, held if remembers else set())
    mod.Settings = lambda **kw: ("Settings", kw)
    monkeypatch.setitem(sys.modules, "wandb", mod)
    return calls


def _log(results, run_id):
    return [json.loads(x) for x in (results / "runs" / run_id / "log.jsonl").read_text().splitlines()]


def test_wandb_gets_every_log_entry_under_the_run_id_and_a_resumed_run_continues_it(tmp_path, monkeypatch):
    calls = _fake_wandb(monkeypatch)
    assert train_run(CFG, tmp_path, progress=False, verbose=False, stop_after=10, trackers=("wandb",)) is None
    rec = train_run(CFG, tmp_path, progress=False, verbose=False, trackers=("wandb",))
    inits = [c[1] for c in calls if c[0] == "init"]
    assert len(inits) == 2  # killed at 10, resumed: the same W&B run both times
    for kw in inits:
        assert (kw["id"], kw["name"], kw["resume"], kw["project"]) == (rec["run_id"], rec["run_id"], "allow", "depthwidth")
        assert kw["config"] == CFG.to_dict() and kw["dir"] == str(tmp_path / "runs" / rec["run_id"])
        assert kw["settings"] == ("Settings", {"console": "off"})  # --json keeps stdout to itself
    logged = [(c[1], c[2]) for c in calls if c[0] == "log"]
    entries = _log(tmp_path, rec["run_id"])
    assert [s for s, _ in logged] == [e["step"] for e in entries] == [5, 10, 15, 20]
    for (_, data), e in zip(logged, entries):
        assert data == {k: v for k, v in e.items() if k != "step"}
    assert "val_loss" in logged[1][1]  # the eval at step 10 is logged with its window
    finishes = [c[1] for c in calls if c[0] == "finish"]
    assert finishes[0] == {}  # the stopped call ends its W&B run without a final summary
    assert finishes[1] == {"status": "finished", "test_loss": rec["test_loss"], "val_loss": rec["val_loss"]}


def test_a_resumed_wandb_run_that_lost_its_steps_gets_them_again_from_the_log(tmp_path, monkeypatch):
    # issue 25: after a SIGKILL and resume, W&B lacked every step before the kill
    calls = _fake_wandb(monkeypatch, remembers=False)
    assert train_run(CFG, tmp_path, progress=False, verbose=False, stop_after=10, trackers=("wandb",)) is None
    del calls[:]
    rec = train_run(CFG, tmp_path, progress=False, verbose=False, trackers=("wandb",))
    entries = _log(tmp_path, rec["run_id"])
    logged = [(c[1], c[2]) for c in calls if c[0] == "log"]
    assert [s for s, _ in logged] == [e["step"] for e in entries] == [5, 10, 15, 20]
    assert [d for _, d in logged] == [{k: v for k, v in e.items() if k != "step"} for e in entries]


def test_wandb_project_comes_from_the_environment(tmp_path, monkeypatch):
    from depthwidth.models.trackers import Trackers

    calls = _fake_wandb(monkeypatch)
    monkeypatch.setenv("WANDB_PROJECT", "my-sweeps")
    Trackers(["wandb"], tmp_path, "L1-d16-h2-s0-abc", {"a": 1}).close()
    assert [c[1]["project"] for c in calls if c[0] == "init"] == ["my-sweeps"]
    assert calls[-1] == ("finish", {})


def _tb_scalars(tb_dir):
    """(tag, step, value) of every scalar in the TensorBoard event files (TFRecord framing:
    u64 length, u32 crc, payload, u32 crc; payload = an Event protobuf), as TensorBoard shows
    them: a SessionLog START at step S (a writer's purge_step) hides the earlier events at
    steps >= S."""
    from tensorboardX.proto import event_pb2

    out = []
    for f in sorted(tb_dir.glob("events.out.tfevents.*")):
        buf = f.read_bytes()
        i = 0
        while i < len(buf):
            (n,) = struct.unpack("<Q", buf[i:i + 8])
            ev = event_pb2.Event()
            ev.ParseFromString(buf[i + 12:i + 12 + n])
            i += 12 + n + 4
            if ev.HasField("session_log") and ev.session_log.status == event_pb2.SessionLog.START and ev.step > 0:
                out = [x for x in out if x[1] < ev.step]
            for v in ev.summary.value:
                if v.HasField("simple_value"):
                    out.append((v.tag, ev.step, v.simple_value))
    return out


def test_sweep_tensorboard_writes_each_runs_log_as_events(tmp_path, engine_env, cli_cmd):
    pytest.importorskip("tensorboardX")
    preset = tmp_path / "one.toml"
    preset.write_text(ONE_RUN)
    res = tmp_path / "res"
    done = subprocess.run(cli_cmd + ["sweep", "--preset", str(preset), "--results", str(res), "--tensorboard",
                                     "--no-progress", "--json"], env=engine_env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_id,) = json.loads(done.stdout)["trained"]
    scalars = _tb_scalars(res / "runs" / run_id / "tb")
    entries = _log(res, run_id)
    loss = [(s, v) for t, s, v in scalars if t == "loss"]
    assert loss == [(e["step"], pytest.approx(e["loss"], rel=1e-6)) for e in entries]  # float32 in the events
    assert {t for t, _, _ in scalars} >= {"loss", "lr", "grad_norm", "tokens_per_s", "wall_s"}


def test_tensorboard_keeps_the_steps_before_a_sigkill_after_resume(tmp_path, engine_env, cli_cmd):
    # issue 25: the killed process's event file was empty (tensorboardX flushed every 120 s), so
    # TensorBoard lacked every step before the kill; now each step is there once, as in log.jsonl
    pytest.importorskip("tensorboardX")
    preset = tmp_path / "one.toml"
    preset.write_text(ONE_RUN.replace("steps = 20", "steps = 200"))  # a wide window for the kill
    res = tmp_path / "res"
    cmd = cli_cmd + ["sweep", "--preset", str(preset), "--results", str(res), "--tensorboard", "--no-progress"]
    p = subprocess.Popen(cmd, env=engine_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list(res.glob("runs/*/ckpt/10")) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL, f"the run ended before the kill: {err[-2000:]}"
    again = subprocess.run(cmd + ["--json"], env=engine_env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    (run_id,) = json.loads(again.stdout)["trained"]
    assert f"resumed {run_id} from step" in again.stderr
    tb = res / "runs" / run_id / "tb"
    assert len(list(tb.glob("events.out.tfevents.*"))) == 2  # the killed process's file and the resumed one's
    entries = _log(res, run_id)
    loss = [(s, v) for t, s, v in _tb_scalars(tb) if t == "loss"]
    assert [e["step"] for e in entries] == list(range(5, 201, 5))
    assert loss == [(e["step"], pytest.approx(e["loss"], rel=1e-6)) for e in entries]


def test_sweep_wandb_offline_makes_one_wandb_run_per_run_and_keeps_json_stdout(tmp_path, engine_env, cli_cmd):
    pytest.importorskip("wandb")
    preset = tmp_path / "one.toml"
    preset.write_text(ONE_RUN)
    res = tmp_path / "res"
    env = dict(engine_env, WANDB_MODE="offline", WANDB_SILENT="true")
    argv = cli_cmd + ["sweep", "--preset", str(preset), "--results", str(res), "--wandb", "--no-progress", "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_id,) = json.loads(done.stdout)["trained"]  # stdout is the one JSON object, nothing from W&B
    (offline,) = (res / "runs" / run_id / "wandb").glob(f"offline-run-*-{run_id}")
    (data,) = offline.glob(f"run-{run_id}.wandb")
    blob = data.read_bytes()
    assert all(k.encode() in blob for k in ("loss", "tokens_per_s", "test_loss"))  # history and summary
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and json.loads(again.stdout)["trained"] == []  # a finished run opens nothing
    assert len(list((res / "runs" / run_id / "wandb").glob("offline-run-*"))) == 1


@pytest.mark.parametrize("cmd", [["sweep", "--results", "R"], ["reproduce", "--results", "R"], ["train", "--out", "R"]])
@pytest.mark.parametrize("flag,module", [("--wandb", "wandb"), ("--tensorboard", "tensorboardX")])
def test_a_tracker_without_its_package_is_one_line_before_any_work(cmd, flag, module, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr("depthwidth.models.train.build_engine",
                        lambda *a, **k: pytest.fail("compiled before checking the tracker"))
    argv = [a.replace("R", str(tmp_path / "r")) for a in cmd] + ["--preset", "smoke", flag]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and module in err[0] and f"depthwidth[{flag[2:]}]" in err[0], err
    assert not (tmp_path / "r").exists()


def test_no_tracker_flag_imports_no_tracker(engine_env):
    code = ("import sys; from depthwidth.cli import build_parser; "
            "a = build_parser().parse_args(['sweep', '--preset', 'smoke', '--results', 'x']); "
            "from depthwidth.experiments.cli import sweep_executor; ex = sweep_executor(a); "
            "print(ex.settings.trackers, [m for m in ('wandb', 'tensorboardX') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], env=engine_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["()", "[]"]


def test_an_unknown_tracker_is_a_user_error():
    from depthwidth.errors import UserError
    from depthwidth.models.trackers import require

    with pytest.raises(UserError, match="unknown tracker 'mlflow'; known: tensorboard, wandb"):
        require(["mlflow"])
    assert require([]) == ()


def test_the_run_record_does_not_depend_on_the_trackers(tmp_path, monkeypatch):
    _fake_wandb(monkeypatch)
    a = train_run(CFG, tmp_path / "a", progress=False, verbose=False)
    b = train_run(CFG, tmp_path / "b", progress=False, verbose=False, trackers=("wandb",))
    assert (a["run_id"], a["test_loss"], a["val_loss"], a["train_loss"]) == \
        (b["run_id"], b["test_loss"], b["val_loss"], b["train_loss"])


def test_a_wandb_run_that_cannot_start_is_one_line(tmp_path, monkeypatch, capsys):
    # e.g. online mode without a login or network: W&B raises; the sweep would fail every run alike
    _fake_wandb(monkeypatch)

    def refuse(**kw):
        raise RuntimeError("api_key not configured (no-tty)\ncall wandb.login()")

    monkeypatch.setattr(sys.modules["wandb"], "init", refuse)
    assert main(["train", "--out", str(tmp_path), "--wandb", "--set", "train.steps=2", "--set", "train.warmup_steps=0",
                 "--set", "mesh.data=1", "--set", "model.d_model=16", "--set", "model.n_layer=1"]) == 2
    err = [x for x in capsys.readouterr().err.strip().splitlines() if not x.startswith("compiled train step")]
    assert len(err) == 1 and "could not start a W&B run (RuntimeError: api_key not configured" in err[0], err
    assert "WANDB_MODE=offline" in err[0]
