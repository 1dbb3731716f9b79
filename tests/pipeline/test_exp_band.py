"""`depthwidth exp band` end to end on a tiny preset: trains, analyses, draws; a rerun trains nothing
and rewrites nothing; the numbers agree with the stored records; bad input is one line, exit 2."""

import json
import math
import subprocess

import pytest

from depthwidth.cli import main
from depthwidth.fits.table import load_table

TINY = """
name = "band-tiny"
description = "exp band plumbing: two depths at ~3.2K, two sizes of L1"
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
batch_size = 16
lr = 1e-2
warmup_steps = 5
eval_batches = 2
test_sequences = 64
log_every = 10
[grid]
depths = [1, 2]
seeds = [0]
[grid.widths]
1 = [16, 22]
2 = [12]
"""
BUDGET = 3200.0  # L1 d16: 3,072 and L2 d12: 3,456 are within x1.25; L2's one size takes L1's slope


def test_exp_band_end_to_end_and_resumable(tmp_path, engine_env, cli_cmd):
    preset = tmp_path / "band-tiny.toml"
    preset.write_text(TINY)
    res = tmp_path / "r"
    cmd = cli_cmd + ["exp", "band", "--preset", str(preset), "--results", str(res), "--with", "none",
                     "--budgets", "3.2K", "--bootstrap", "50", "--no-progress", "--json"]
    first = subprocess.run(cmd, env=engine_env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    out = json.loads(first.stdout)
    assert len(out["sweep"]["trained"]) == 3 and all(p.endswith((".png", ".pdf")) for p in out["figures"])
    b = out["budgets"][0]
    assert [(r["n_layer"], r["d_model"]) for r in b["shapes"]] == [(1, 16), (2, 12)]
    # the numbers again, from the stored records, by the module docstring's formulas
    cells = load_table(res).cells.set_index(["n_layer", "d_model"])
    y = {k: float(cells.loc[k, "mean"]) for k in cells.index}
    N = {k: float(cells.loc[k, "N"]) for k in cells.index}
    a1 = math.log(y[(1, 22)] / y[(1, 16)]) / math.log(N[(1, 22)] / N[(1, 16)])
    alpha = {1: a1, 2: a1}
    assert [r["slope_from"] for r in b["shapes"]] == ["2 cells", "other depths"]
    at_b = {L: y[(L, d)] * (BUDGET / N[(L, d)]) ** alpha[L] for L, d in ((1, 16), (2, 12))}
    best, worst = min(at_b, key=at_b.get), max(at_b, key=at_b.get)
    assert b["spread_pct"] == pytest.approx(100 * (at_b[worst] / at_b[best] - 1), rel=1e-9)
    if alpha[worst] < 0:
        assert b["multiplier"] == pytest.approx((at_b[best] / at_b[worst]) ** (1 / alpha[worst]), rel=1e-9)
    else:
        assert b["multiplier"] is None
    stored = (res / "band.json").read_bytes()
    mtime = (res / "band.json").stat().st_mtime_ns
    again = subprocess.run(cmd, env=engine_env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    rerun = json.loads(again.stdout)
    assert rerun["sweep"]["trained"] == [] and rerun["sweep"]["done_before"] == 3
    assert (res / "band.json").read_bytes() == stored and (res / "band.json").stat().st_mtime_ns == mtime
    assert math.isclose(rerun["budgets"][0]["spread_pct"], b["spread_pct"])


def _records(results):
    """Kind-"train" records of three depths near 25K (L1 and L2 two sizes each, L4 one)."""
    from depthwidth.config import ModelConfig, RunConfig
    from depthwidth.records import run_dir, write_json_atomic

    for L, d, loss in [(1, 46, 1.54), (1, 92, 1.42), (2, 32, 1.52), (2, 64, 1.38), (4, 22, 1.56)]:
        cfg = RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=2, vocab_size=65, seq_len=64))
        write_json_atomic(run_dir(results, cfg.run_id()) / "record.json", {
            "schema": 1, "run_id": cfg.run_id(), "status": "finished", "config": cfg.to_dict(),
            "n_layer": L, "d_model": d, "n_head": 2, "seed": 0, "params": {"kaplan": 12 * L * d * d},
            "tokens": 1000, "steps": 10, "test_loss": loss})


@pytest.mark.parametrize("argv, message", [
    (["--budgets", "25K,abc"], "cannot parse --budgets"),
    (["--budgets", "25K,25K"], "repeated budget"),
    (["--budgets", ""], "--budgets is empty"),
    (["--budgets", "1T"], "only 0 depth(s)"),
    (["--tolerance", "0.5"], "--tolerance must be a factor > 1"),
    (["--window", "abc"], "--window must be a number"),
    (["--bootstrap", "x"], "--bootstrap"),
    (["--with", "missing-dir"], "no such results directory"),
    (["--with", "r"], "the --results directory itself"),
    (["--preset", "nonexist"], "unknown preset"),  # checked with --no-sweep too
    (["--set", "train.bogus=1"], "unknown config field"),
])
def test_bad_input_is_one_line_exit_2(argv, message, tmp_path, monkeypatch, capsys):
    _records(tmp_path / "r")
    monkeypatch.chdir(tmp_path)
    base = ["exp", "band", "--results", "r", "--no-sweep", "--no-figure"]
    rc = main(base + (argv if "--with" in argv else ["--with", "none", *argv]))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "r" / "band.json").exists()


def test_analysis_only_on_stored_records(tmp_path, monkeypatch, capsys):
    _records(tmp_path / "r")
    monkeypatch.chdir(tmp_path)
    assert main(["exp", "band", "--results", "r", "--with", "none", "--no-sweep", "--budgets", "25K",
                 "--bootstrap", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    b = out["budgets"][0]
    # L1 slope from (46, 92), L2 from (32, 64); L4 has one size: the mean of the two
    a1 = math.log(1.42 / 1.54) / math.log(4)
    a2 = math.log(1.38 / 1.52) / math.log(4)
    at_b = {1: 1.54 * (25_000 / 25_392) ** a1, 2: 1.52 * (25_000 / 24_576) ** a2,
            4: 1.56 * (25_000 / 23_232) ** ((a1 + a2) / 2)}
    assert b["spread_pct"] == pytest.approx(100 * (max(at_b.values()) / min(at_b.values()) - 1), rel=1e-9)
    assert out["sweep"] is None and len(out["figures"]) == 2 and (tmp_path / "r" / "band.json").exists()
