"""The sweep runner with a stand-in training function: skipping, claims, several workers,
stealing, stale takeover, failures, interrupts, layout and the ETA. (The real engine is exercised
by test_kill.py and test_reproduce.py.)"""

import dataclasses
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from depthwidth import records, storage
from depthwidth.cli import main
from depthwidth.config import from_dict
from depthwidth.errors import UserError
from depthwidth.experiments import claims, runner
from depthwidth.experiments.presets import load_preset


def fake_record(cfg, status="finished", wall_s=1.0, compile_s=0.5, vocab_size=65):
    m, t = cfg.model, cfg.train
    return {"schema": 1, "run_id": cfg.run_id(), "status": status, "config": cfg.to_dict(),
            "n_layer": m.n_layer, "d_model": m.d_model, "n_head": m.n_head, "seed": t.seed,
            "vocab_size": vocab_size, "params": {"kaplan": 12 * m.n_layer * m.d_model ** 2},
            "tokens": t.steps * t.batch_size * m.seq_len, "steps": t.steps,
            "test_loss": None if status == "diverged" else 3.0, "wall_s": wall_s, "compile_s": compile_s}


class FakeTrain:
    """Writes a record like train_run does; counts calls per run id; optional delay or hooks."""

    def __init__(self, delay=0.0, hook=None):
        self.calls = Counter()
        self.delay, self.hook = delay, hook
        self.lock = threading.Lock()

    def __call__(self, cfg, results_dir, *, data_dir=None, resume=True, progress=True, verbose=True, **_):
        with self.lock:
            self.calls[cfg.run_id()] += 1
        if self.hook:
            out = self.hook(cfg, results_dir)
            if out is not None:
                return out
        time.sleep(self.delay)
        rec = fake_record(cfg)
        records.write_json_atomic(records.run_dir(results_dir, cfg.run_id()) / "record.json", rec)
        return rec


def no_training(*a, **k):
    raise AssertionError("a finished sweep must not train anything")


SMOKE = load_preset("smoke")
IDS = [r.run_id() for r in SMOKE.runs]


def _sweep(results, train, **kw):
    kw.setdefault("log", lambda m: None)
    kw.setdefault("settle_s", 0.01)
    return runner.run_sweep(SMOKE, results, train_fn=train, **kw)


def _no_claims_left(results):
    return not list(Path(results).glob("runs/*/claim.json"))


def test_sweep_trains_each_run_once_and_a_second_sweep_trains_nothing(tmp_path):
    train = FakeTrain()
    rep = _sweep(tmp_path, train)
    assert rep.total == 8 and rep.finished == 8 and rep.remaining == 0 and rep.done_before == 0
    assert rep.trained == IDS and set(train.calls.values()) == {1}
    assert _no_claims_left(tmp_path)
    rep2 = _sweep(tmp_path, no_training)
    assert rep2.done_before == 8 and rep2.trained == [] and rep2.complete


def test_two_workers_share_a_directory_and_train_each_run_once(tmp_path):
    train = FakeTrain(delay=0.05)
    reps = {}

    def worker(i):
        reps[i] = _sweep(tmp_path, train, worker=i, num_workers=2)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(train.calls) == sorted(IDS) and set(train.calls.values()) == {1}
    assert sorted(reps[0].trained + reps[1].trained) == sorted(IDS)
    assert reps[0].trained and reps[1].trained  # both did work
    assert _no_claims_left(tmp_path)


def test_worker_partition_without_stealing(tmp_path):
    train = FakeTrain()
    rep = _sweep(tmp_path, train, worker=1, num_workers=3, steal=False)
    # Round robin over the preset's run order: positions 1, 4, 7.
    assert rep.trained == [IDS[1], IDS[4], IDS[7]] and rep.remaining == 5


def test_a_lone_worker_does_its_own_runs_first_then_steals_the_rest(tmp_path):
    train = FakeTrain()
    rep = _sweep(tmp_path, train, worker=0, num_workers=2)
    assert rep.trained == IDS[0::2] + IDS[1::2] and rep.complete


def test_live_claims_are_left_alone_and_stale_ones_taken_over(tmp_path):
    store = storage.open_results(tmp_path)
    live = claims.new_claim(IDS[2], 1, 2)
    live.host = "other-host"
    store.replace(claims.claim_rel(IDS[2]), live.to_dict())
    dead = claims.new_claim(IDS[5], 1, 2, now=time.time() - 3600)
    dead.host = "other-host"
    store.replace(claims.claim_rel(IDS[5]), dead.to_dict())
    train = FakeTrain()
    rep = _sweep(tmp_path, train, stale_after_s=600)
    assert IDS[5] in rep.trained and IDS[2] not in train.calls
    assert rep.busy == [{"run_id": IDS[2], "why": rep.busy[0]["why"]}] and "other-host" in rep.busy[0]["why"]
    assert rep.remaining == 1 and not rep.complete
    assert store.read_json(claims.claim_rel(IDS[2]))["token"] == live.token  # untouched


def test_heartbeat_runs_while_training(tmp_path):
    seen = []

    def hook(cfg, results_dir):
        rel = claims.claim_rel(cfg.run_id())
        store = storage.open_results(results_dir)
        t0 = store.read_json(rel)["heartbeat_at"]
        time.sleep(0.25)
        seen.append(store.read_json(rel)["heartbeat_at"] - t0)

    _sweep(tmp_path, FakeTrain(hook=hook), stale_after_s=1.0, heartbeat_s=0.05)
    assert len(seen) == 8 and min(seen) > 0


def test_a_failing_run_is_reported_and_the_sweep_goes_on(tmp_path):
    def hook(cfg, results_dir):
        if cfg.run_id() == IDS[3]:
            raise RuntimeError("out of memory (simulated)")

    rep = _sweep(tmp_path, FakeTrain(hook=hook))
    assert rep.failed == [{"run_id": IDS[3], "error": "RuntimeError: out of memory (simulated)"}]
    assert len(rep.trained) == 7 and rep.remaining == 1 and _no_claims_left(tmp_path)
    rep2 = _sweep(tmp_path, FakeTrain())  # the next sweep retries it
    assert rep2.trained == [IDS[3]] and rep2.complete


def test_user_error_stops_the_sweep_and_releases_the_claim(tmp_path):
    def hook(cfg, results_dir):
        raise UserError("corpus 'tinyshakespeare' not found")

    with pytest.raises(UserError, match="not found"):
        _sweep(tmp_path, FakeTrain(hook=hook))
    assert _no_claims_left(tmp_path)


def test_sigterm_releases_the_claim(tmp_path):
    def hook(cfg, results_dir):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this sleep

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        _sweep(tmp_path, FakeTrain(hook=hook))
    assert _no_claims_left(tmp_path)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_a_library_swallowed_stops_the_sweep_before_its_next_run(sig, tmp_path):
    # Issue 40: a Ctrl-C raised inside a gc callback (as jax's _xla_gc_callback) is only printed
    # by Python; the CLI remembers it (interrupts.honoured) and the sweep stops before the next run.
    import gc

    from depthwidth import interrupts

    def callback(phase, info):
        if phase == "start":
            os.kill(os.getpid(), sig)
            time.sleep(0.05)  # the handler runs here, inside the callback: its exception is dropped

    def hook(cfg, results_dir):
        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)

    train = FakeTrain(hook=hook)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with interrupts.honoured(), pytest.raises(KeyboardInterrupt) as got:
            _sweep(tmp_path, train)
    finally:
        signal.signal(signal.SIGINT, old)
    assert sum(train.calls.values()) == 1 and interrupts.exit_code(got.value) == 128 + sig
    assert len(list(tmp_path.glob("runs/*/record.json"))) == 1 and _no_claims_left(tmp_path)


def test_diverged_runs_are_counted(tmp_path):
    def hook(cfg, results_dir):
        if cfg.model.d_model == 32 and cfg.model.n_layer == 2:
            rec = fake_record(cfg, status="diverged")
            records.write_json_atomic(records.run_dir(results_dir, cfg.run_id()) / "record.json", rec)
            return rec

    rep = _sweep(tmp_path, FakeTrain(hook=hook))
    assert rep.diverged == 2 and rep.finished == 6 and rep.complete  # 2 seeds of L=2 d=32


def _two_corpora(tmp_path):
    """The smoke preset with one seed over two corpora (4 runs each)."""
    text = (Path(SMOKE.path).read_text()
            .replace("seeds = [0, 1]", 'seeds = [0]\ncorpora = ["tinyshakespeare", "kjv"]'))
    f = tmp_path / "two.toml"
    f.write_text(text.replace('name = "smoke"', 'name = "two"'))
    return load_preset(f)


def test_several_corpora_get_one_directory_each(tmp_path):
    p = _two_corpora(tmp_path)
    rep = runner.run_sweep(p, tmp_path / "res", train_fn=FakeTrain(), log=lambda m: None)
    assert rep.groups == {"tinyshakespeare": str(tmp_path / "res" / "tinyshakespeare"),
                          "kjv": str(tmp_path / "res" / "kjv")}
    for corpus in ("tinyshakespeare", "kjv"):
        recs = records.iter_records(tmp_path / "res" / corpus)
        assert len(recs) == 4 and {r["config"]["data"]["corpus"] for r in recs} == {corpus}


def test_a_url_results_location_without_its_backend_is_one_line(tmp_path):
    # gs:// needs gcsfs (the [gcs] extra): without it, one line that names the extra
    pytest.importorskip("upath")
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed: gs:// would go to the network")
    for train in (None, FakeTrain()):
        with pytest.raises(UserError, match=r"Please install gcsfs.*depthwidth\[gcs\]"):
            runner.run_sweep(SMOKE, "gs://bucket/sweep", train_fn=train, log=lambda m: None)


def test_a_sweep_over_several_corpora_on_a_url_puts_each_corpus_under_it(tmp_path):
    import fsspec

    p = _two_corpora(tmp_path)
    try:
        rep = runner.run_sweep(p, "memory://multi", train_fn=FakeTrain(), log=lambda m: None)
        assert rep.groups == {"tinyshakespeare": "memory://multi/tinyshakespeare", "kjv": "memory://multi/kjv"}
        for corpus in ("tinyshakespeare", "kjv"):
            recs = records.iter_records(f"memory://multi/{corpus}")
            assert len(recs) == 4 and {r["config"]["data"]["corpus"] for r in recs} == {corpus}
        again = runner.run_sweep(p, "memory://multi", train_fn=FakeTrain(), log=lambda m: None)
        assert again.trained == [] and again.done_before == 8
    finally:
        fsspec.filesystem("memory").rm("/multi", recursive=True)


def test_core_sets_for_local_jobs():
    assert runner.core_sets(2, [0, 1]) == [{0}, {1}]
    assert runner.core_sets(2, [0, 1, 2, 3, 4]) == [{0, 1, 2}, {3, 4}]  # 5 cores: 3 + 2
    assert runner.core_sets(3, [0, 1]) is None  # fewer cores than jobs: no pinning
    assert runner.core_sets(1, [4, 5]) == [{4, 5}]


def test_eta_model():
    # Two finished runs of one shape; B trained 3x the steps of A, so it did 3x A's FLOPs.
    # Rate = median(10 s / cost_A, 30 s / 3 cost_A) = 10 s / cost_A; a remaining run with 2x A's
    # steps needs 2 cost_A -> 20 s, plus the overhead (median compile_s (2 + 4)/2 = 3 s, or the
    # measured one passed in).
    base = SMOKE.runs[0]
    a = dataclasses.replace(base, train=dataclasses.replace(base.train, steps=40))
    b = dataclasses.replace(base, train=dataclasses.replace(base.train, steps=120, seed=5))
    c = dataclasses.replace(base, train=dataclasses.replace(base.train, steps=80, seed=7))
    done = [fake_record(a, wall_s=10.0, compile_s=2.0), fake_record(b, wall_s=30.0, compile_s=4.0)]
    assert runner.eta_seconds(done, [c]) == pytest.approx(23.0)
    assert runner.eta_seconds(done, [c], num_workers=2) == pytest.approx(11.5)
    assert runner.eta_seconds(done, [c], overhead_s=5.0) == pytest.approx(25.0)
    assert runner.eta_seconds(done, []) == 0.0
    assert runner.eta_seconds([], [c]) is None
    # A run starved of CPU (100x its wall time, 50x the compile) moves neither estimate much: the
    # rate stays 10 s / cost_A, the overhead becomes the median compile_s of (2, 4, 150) = 4 s -> 24 s.
    # (Means would give (10 + 30 + 1000) s / 5 cost_A x 2 cost_A + 52 s = 468 s.)
    starved = dataclasses.replace(base, train=dataclasses.replace(base.train, steps=40, seed=9))
    done3 = done + [fake_record(starved, wall_s=1000.0, compile_s=3.0 * 50)]
    assert runner.eta_seconds(done3, [c]) == pytest.approx(24.0)
    # Cost: steps * B * T * (6N + 6Vd + 6LTd); smoke L=1 d=16 T=32 B=16 steps=40 V=65:
    # 6*3072 + 6*65*16 + 6*1*32*16 = 18432 + 6240 + 3072 = 27744 FLOPs/token, x 40*16*32 tokens.
    assert runner.run_cost(a, 65) == 40 * 16 * 32 * 27744
    assert [runner.fmt_duration(s) for s in (12, 185, 3725, None)] == ["12s", "3m05s", "1h02m", "?"]


def test_cli_sweep_bad_arguments(tmp_path, capsys):
    assert main(["sweep", "--preset", "smoke", "--results", str(tmp_path), "--worker", "2", "--num-workers", "2"]) == 2
    assert "--worker must be in 0..1" in capsys.readouterr().err
    assert main(["sweep", "--preset", "smoke", "--results", str(tmp_path), "--stale-after", "0"]) == 2
    assert "--stale-after must be > 0" in capsys.readouterr().err
    assert main(["sweep", "--preset", "smoke", "--results", str(tmp_path), "--set", "model.d_model=64"]) == 2
    assert "grid axis" in capsys.readouterr().err
    assert main(["sweep", "--results", str(tmp_path)]) == 2
    assert main(["sweep", "--preset", "smoke", "--results", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err


def test_cli_sweep_over_finished_results_trains_nothing(tmp_path):
    _sweep(tmp_path, FakeTrain())
    # A fresh interpreter: the finished sweep must not even import the engine (jax).
    code = ("import json, sys; from depthwidth.cli import main; "
            f"rc = main(['sweep', '--preset', 'smoke', '--results', {str(tmp_path)!r}, '--json']); "
            "print(json.dumps({'rc': rc, 'jax': 'jax' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    rep, status = (json.loads(line) for line in out.stdout.strip().splitlines())
    assert status == {"rc": 0, "jax": False}
    assert rep["trained"] == [] and rep["done_before"] == 8 and rep["remaining"] == 0


def test_from_dict_round_trip_of_preset_runs():
    # The records carry config dicts; the ETA rebuilds configs from them.
    assert from_dict(SMOKE.runs[3].to_dict()).run_id() == IDS[3]


def test_a_path_corpus_run_id_follows_the_files_content(tmp_path):
    # Issue 10 item 3: the sweep's plan (claims, skipping finished runs) uses the content.
    import dataclasses as dc

    f = tmp_path / "web.txt"
    f.write_text("one two three\n" * 200)
    preset = load_preset("smoke")
    runs = tuple(dc.replace(r, data=dc.replace(r.data, corpus=str(f))) for r in preset.runs[:2])
    preset = dc.replace(preset, runs=runs, corpora=(str(f),))
    before = [j.run_id for j in runner.plan(preset, tmp_path / "res")]
    f.write_text("four five six\n" * 200)
    after = [j.run_id for j in runner.plan(preset, tmp_path / "res")]
    assert len(set(before)) == 2 and not set(before) & set(after)


def test_a_jobs_child_dies_with_its_sigkilled_parent(tmp_path):
    # Issue 10: SIGKILL the parent of `sweep --jobs 2` and the child worker kept training.
    child = ("import os, sys, time; from depthwidth.experiments.runner import die_with_parent; "
             "die_with_parent(int(sys.argv[1])); print('armed', flush=True); time.sleep(120)")
    parent = ("import os, subprocess, sys, time; "
              f"p = subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())], stdout=subprocess.PIPE, text=True); "
              "assert p.stdout.readline().strip() == 'armed'; print(p.pid, flush=True); time.sleep(120)")
    par = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    child_pid = int(par.stdout.readline())
    par.kill()
    par.wait()
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        # Reaped by init once it exits; a zombie still answers kill(0), so read its state.
        try:
            if Path(f"/proc/{child_pid}/stat").read_text().split()[2] == "Z":
                break
        except OSError:
            break
        time.sleep(0.2)
    else:
        os.kill(child_pid, signal.SIGKILL)
        pytest.fail("the child outlived its SIGKILLed parent by 30 s")


@pytest.fixture
def child_commands(monkeypatch):
    """The command lines of the --jobs children run_local_jobs starts, on 2 cores; each child
    reports an empty sweep at once and this process trains nothing."""
    seen = []

    class P:
        returncode = 0

        def __init__(self, cmd, **kw):
            seen.append(cmd)

        def communicate(self):
            return (json.dumps({"trained": [], "failed": [], "busy": []}), "")

    monkeypatch.setattr("subprocess.Popen", P)
    monkeypatch.setattr(runner, "core_sets", lambda jobs: None)
    monkeypatch.setattr(runner, "_cores", lambda: 2)  # the test process itself is pinned to one core
    monkeypatch.setattr(runner, "run_sweep", lambda preset, results, **kw: runner.SweepReport(
        preset="smoke", results=str(results), groups={}, worker=0, num_workers=2, total=0))
    monkeypatch.setattr(runner, "_recount", lambda *a: None)
    return seen


def test_jobs_children_are_told_their_parent(tmp_path, child_commands):
    runner.run_local_jobs(SMOKE, tmp_path, ["--preset", "smoke"], jobs=2, log=lambda m: None)
    (cmd,) = child_commands
    assert cmd[cmd.index("--parent-pid") + 1] == str(os.getpid())


def test_jobs_beyond_the_runs_or_the_cores_are_capped_with_one_line(tmp_path, child_commands):
    # Issue 24: `sweep --jobs 999` started 998 worker processes for 8 runs on 2 cores.
    seen, said = child_commands, []
    runner.run_local_jobs(SMOKE, tmp_path, ["--preset", "smoke"], jobs=999, log=said.append)
    assert len(seen) == 1  # this process and one child: 2 workers on 2 cores
    assert said == ["[sweep smoke] --jobs 999 is more than the preset's 8 runs and this machine's 2 cores: "
                    "running 2 local workers"]
    assert runner.cap_jobs(5, 8, 2, log=said.append, name="x") == 2
    assert said[-1] == "[sweep x] --jobs 5 is more than this machine's 2 cores: running 2 local workers"
    assert runner.cap_jobs(2, 8, 2, log=said.append) == 2 and len(said) == 2  # within both: nothing said
    with pytest.raises(UserError, match=r"^--jobs 5 is more than this machine's 2 cores: give every one of the 3 "
                                        r"hosts --jobs 2 or fewer$"):
        runner.cap_jobs(5, 8, 2, num_workers=3)


def test_the_summary_counts_what_this_command_trained_over_its_jobs():
    """With --jobs 2 the count is both local workers' runs; it said "this worker trained"."""
    from depthwidth.experiments.runner import SweepReport, report_text

    rep = SweepReport(preset="p", results="r", groups={}, worker=0, num_workers=1, total=8, done_before=3,
                      finished=8, trained=["a", "b", "c", "d", "e"], wall_s=61.0)
    first = report_text(rep).splitlines()[0]
    assert first.startswith("sweep p: 8/8 runs have records (8 finished, 0 diverged); this command trained 5 in ")
    assert first.endswith("; 3 were done before")
