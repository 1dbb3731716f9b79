"""``depthwidth exp sawtooth``: records, resumability, the figure, the summary, and bad input."""

import hashlib
import json

import pytest

from depthwidth import records
from depthwidth.cli import main
from depthwidth.fits.sawtooth import summarise

TINY = ["exp", "sawtooth", "--depths", "1,2", "--seeds", "2", "--steps", "40", "--grid", "16",
        "--archs", "deep,shallow_same,shallow_wide,deep_wide", "--no-progress", "--json"]


def test_run_then_rerun_does_no_work(tmp_path, capsys):
    res = tmp_path / "r"
    assert main([*TINY, "--results", str(res)]) == 0
    doc = json.loads(capsys.readouterr().out)
    # per k: 2 constructions + 4 archs x 2 seeds
    assert doc["units"] == doc["ran"] == 20 and len(records.records_of_kind(res, "sawtooth")) == 20
    assert sorted(p.name for p in (res / "figures").iterdir()) == ["exp_sawtooth.pdf", "exp_sawtooth.png"]
    stamps = {p: p.stat().st_mtime_ns for p in res.glob("runs/*/record.json")}
    assert main([*TINY, "--results", str(res), "--no-figure"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["ran"] == 0 and again["rows"] == doc["rows"]
    assert {p: p.stat().st_mtime_ns for p in res.glob("runs/*/record.json")} == stamps
    rows = {(r["k"], r["arch"]): r for r in doc["rows"]}
    assert rows[(2, "deep_construction")]["pieces"] == [4] and rows[(2, "deep_construction")]["sup_median"] == 0
    assert rows[(2, "shallow_same")]["params"] == rows[(2, "deep")]["params"] == 13
    # the controls: one layer of 8·2^2 = 32 units (3·32 + 1), two layers of 8 (72·2 − 47)
    assert rows[(2, "shallow_wide")]["hidden"] == [32] and rows[(2, "deep_wide")]["hidden"] == [8, 8]
    assert rows[(2, "shallow_wide")]["params"] == rows[(2, "deep_wide")]["params"] == 97
    assert all(r["bound_holds"] and r["n"] == (1 if "construction" in r["arch"] else 2) for r in doc["rows"])
    # a changed setting is new work, the old records stay
    assert main([*TINY[:-2], "--json", "--results", str(res), "--steps", "41", "--depths", "1", "--no-figure"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["ran"] == 8
    lines = out.err.splitlines()  # progress: done/total of this run's 10 units, 2 constructions already stored
    assert [ln.split()[1] for ln in lines] == [f"{i}/10" for i in range(3, 11)] and all("ETA" in ln for ln in lines)


def _default_units():
    import argparse

    from depthwidth.pipeline import exp_sawtooth

    p = argparse.ArgumentParser()
    exp_sawtooth.add_args(p)
    return exp_sawtooth.units(p.parse_args([]))


def test_default_run_adds_the_controls_and_keeps_the_old_run_ids():
    units = _default_units()
    archs = [spec["arch"] for _, spec, _ in units]
    # k = 3..8: 2 constructions + 5 trained archs x 4 seeds
    assert len(units) == 6 * (2 + 5 * 4) and archs.count("shallow_wide") == archs.count("deep_wide") == 24
    old = sorted(uid for uid, spec, _ in units if spec["arch"] not in ("shallow_wide", "deep_wide"))
    # the 84 committed records of results/exp-sawtooth (before the controls): same specs, same ids
    assert len(old) == 84
    assert hashlib.sha256(",".join(old).encode()).hexdigest() == (
        "9e761036ea1dc73da9af9f1db6fff8e3941f61a2477a9ec91ced4f04859b4b79")
    ids = {(spec["k"], spec["arch"], spec.get("seed")): uid for uid, spec, _ in units}
    assert ids[(4, "deep", 0)] == "sawtooth-764ea3179eb0" and ids[(4, "shallow_same", 0)] == "sawtooth-01861774a6c7"
    assert ids[(4, "shallow_exact", 0)] == "sawtooth-39d9f8d83280"
    assert ids[(4, "deep_construction", None)] == "sawtooth-f2edce0c56f3"
    assert ids[(4, "shallow_wide", 0)] == "sawtooth-61f4c83d525f" and ids[(4, "deep_wide", 0)] == "sawtooth-ef9b8bd8fd0a"


def test_summary_of_stored_records_counts_what_they_say(tmp_path):
    recs = [{"kind": "sawtooth", "run_id": f"s{i}", "status": "finished", "k": 3, "arch": "deep", "seed": i,
             "pieces": p, "sup_error": s, "rms_error": 0.1 * i, "sup_error_bound": 0.5 if p < 8 else 0.0,
             "config": {"hidden": [2, 2, 2]}, "params": {"total": 19}, "init": {"rms_error": 1.0}}
            for i, (p, s) in enumerate([(1, 0.5), (8, 0.01), (3, 0.6)])]
    (row,) = summarise(recs)
    assert row["pieces"] == [1, 8, 3] and row["n_reached"] == 1 and row["n_constant"] == 1
    assert row["pieces_median"] == 3 and row["sup_best"] == 0.01 and row["rms_median"] == pytest.approx(0.1)
    assert row["bound_holds"] and row["params"] == 19
    recs[2]["sup_error"] = 0.4  # 3 pieces cannot be within 1/2 of g^3
    assert not summarise(recs)[0]["bound_holds"]


@pytest.mark.parametrize("argv, message", [
    (["--depths", "0"], "--depths must be >= 1"),
    (["--depths", "40"], "1..10"),
    (["--depths", "x"], "--depths"),
    (["--depths", ","], "--depths is empty"),
    (["--seeds", "0"], "--seeds must be >= 1"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--lr", "abc"], "--lr must be a number"),
    (["--lr", "-1"], "lr must be a positive number"),
    (["--grid", "100", "--depths", "3"], "multiple of 2^k"),
    (["--archs", "wide"], "--archs must be"),
    (["--results", "afile"], "not a directory"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    assert main(["exp", "sawtooth", "--steps", "5", "--grid", "64", "--depths", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("depthwidth: error:") and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
