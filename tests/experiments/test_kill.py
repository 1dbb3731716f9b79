"""SIGKILL a real sweep while a run is training; the restarted sweep loses no finished run,
retrains none, duplicates none, resumes the killed run from its checkpoint, and finishes."""

import json
import signal
import subprocess
import time
from pathlib import Path

from depthwidth.experiments.presets import load_preset

# The smoke preset as is (100 steps, a checkpoint at step 50), so compiled programs are shared
# with test_reproduce.py through the session's compilation cache. The kill lands after a run's
# mid-run checkpoint and before its record: a window of about half a second, polled every 10 ms.


def _state(results: Path):
    runs = results / "runs"
    done = {p.parent.name for p in runs.glob("*/record.json")}
    training = {p.parent.parent.name for p in runs.glob("*/ckpt/*")
                if p.name.isdigit() and p.parent.parent.name not in done}
    return done, training


def test_sigkill_mid_run_then_restart(tmp_path, engine_env, cli_cmd):
    results = tmp_path / "results"
    smoke = load_preset("smoke")
    ids = [r.run_id() for r in smoke.runs]
    steps = smoke.base.train.steps

    cmd = cli_cmd + ["sweep", "--preset", "smoke", "--results", str(results), "--no-progress"]
    proc = subprocess.Popen(cmd, env=engine_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 150
    killed_at = None
    while time.monotonic() < deadline and proc.poll() is None:
        done, training = _state(results)
        if done and training:
            proc.send_signal(signal.SIGKILL)
            killed_at = (done, training)
            break
        time.sleep(0.01)
    out1, err1 = proc.communicate()
    assert killed_at is not None, f"never caught a run mid-training (rc {proc.returncode}):\n{err1[-3000:]}"
    assert proc.returncode == -signal.SIGKILL
    done, training = _state(results)
    (victim,) = training
    assert (results / "runs" / victim / "claim.json").exists()  # a kill cannot release its claim
    before = {i: ((results / "runs" / i / "record.json").read_bytes(),
                  (results / "runs" / i / "record.json").stat().st_mtime_ns) for i in done}

    second = subprocess.run(cmd + ["--json"], env=engine_env, capture_output=True, text=True, timeout=240)
    assert second.returncode == 0, second.stderr[-3000:]
    rep = json.loads(second.stdout)
    err = second.stderr

    # Nothing lost, nothing retrained: finished records are byte-identical and untouched.
    for i, (data, mtime) in before.items():
        p = results / "runs" / i / "record.json"
        assert p.read_bytes() == data and p.stat().st_mtime_ns == mtime
        assert f"training {i}" not in err
    assert rep["done_before"] == len(before) and sorted(rep["trained"]) == sorted(set(ids) - set(before))
    # Nothing duplicated: exactly the preset's runs, one record each, no claims left behind.
    assert sorted(p.name for p in (results / "runs").iterdir()) == sorted(ids)
    assert sorted(p.parent.name for p in results.glob("runs/*/record.json")) == sorted(ids)
    assert not list(results.glob("runs/*/claim.json"))
    # The killed run: its dead owner's claim was taken over at once, training resumed from the
    # checkpoint, and its step log has each step once.
    assert f"taking over {victim}: owner process" in err
    assert f"resumed {victim} from step" in err
    logged = [json.loads(line)["step"] for line in (results / "runs" / victim / "log.jsonl").read_text().splitlines()]
    assert logged == sorted(set(logged)) and logged[-1] == steps
    rec = json.loads((results / "runs" / victim / "record.json").read_text())
    assert rec["status"] == "finished" and rec["steps"] == steps
