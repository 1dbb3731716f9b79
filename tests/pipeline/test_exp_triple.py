"""`depthwidth exp triple`: the presets' shapes hold equal weights, the command trains a tiny
triple, a rerun does no work, and bad input is one line, exit 2."""

import json
import subprocess

import pytest

from depthwidth.cli import main
from depthwidth.experiments.presets import load_preset
from depthwidth.fits.table import load_table
from depthwidth.fits.triple import find_shapes
from depthwidth.theory.accounting import kaplan_n, stack_n

TINY = """
name = "tiny-triple"
description = "a tiny triple for the tests"
[base.model]
n_layer = 4
d_model = 4
n_head = 1
seq_len = 16
[base.data]
corpus = "tinyshakespeare"
tokenizer = "char"
heldout = "spread"
[base.train]
steps = 3
batch_size = 4
warmup_steps = 1
eval_batches = 1
test_sequences = 32
[grid]
depths = [1, 4]
seeds = [0]
[grid.widths]
1 = [8]
4 = [3, 4]
"""


@pytest.mark.parametrize("name, shapes, N, exact", [
    ("triple", [(2, 96), (8, 48), (32, 24)], 221_184, [223_872, 226_272, 231_216]),
    ("triple-full", [(2, 768), (8, 384), (32, 192)], 14_155_776, [14_177_280, 14_196_480, 14_236_032]),
])
def test_presets_hold_equal_weights_and_a_half_budget_control(name, shapes, N, exact):
    p = load_preset(name)
    cells = sorted({(r.model.n_layer, r.model.d_model) for r in p.runs})
    triple = [c for c in cells if kaplan_n(*c) == N]
    assert triple == shapes
    # 12·L·d² by hand: 12·2·96² = 12·8·48² = 12·32·24² = 221,184 (x 8² = 64 for the full size)
    assert [12 * L * d * d for L, d in shapes] == [N] * 3
    assert [stack_n(L, d) for L, d in shapes] == exact  # L(12d² + 13d) + 2d
    assert [d / L for L, d in shapes] == ([48, 6, 0.75] if name == "triple" else [384, 48, 6])
    (ctl,) = [c for c in cells if c not in shapes]
    assert ctl[0] == 8
    ratio = kaplan_n(*ctl) / N
    assert ratio == pytest.approx(110_976 / 221_184 if name == "triple" else 6_998_400 / 14_155_776)
    assert 0.49 < ratio < 0.51
    assert sorted({r.train.seed for r in p.runs}) == [0, 1, 2]
    assert all(r.data.corpus == "tinyshakespeare" and r.data.heldout == "spread" for r in p.runs)


def test_command_trains_analyses_draws_and_a_rerun_does_no_work(tmp_path, cli_cmd, engine_env):
    preset = tmp_path / "tiny.toml"
    preset.write_text(TINY)
    res = tmp_path / "r"
    cmd = cli_cmd + ["exp", "triple", "--preset", str(preset), "--results", str(res), "--json", "--bootstrap", "50"]
    first = subprocess.run(cmd, env=engine_env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert len(out["sweep"]["trained"]) == 3 and "runs done" in first.stderr  # progress: done/total, ETA
    # the tiny triple: 12·1·8² = 12·4·4² = 768; the control 12·4·3² = 432 = 0.5625 x
    assert [(r["n_layer"], r["d_model"], r["N"]) for r in out["shapes"]] == [(1, 8, 768.0), (4, 4, 768.0)]
    assert out["control_N_ratio"] == pytest.approx(432 / 768)
    t = load_table(res)
    losses = {(int(L), int(d)): float(y) for L, d, y in zip(t.runs["n_layer"], t.runs["d_model"], t.runs["test_loss"])}
    assert out["spread"] == pytest.approx(abs(losses[(1, 8)] - losses[(4, 4)]))
    assert out["half_gap"]["mean"] == pytest.approx(losses[(4, 3)] - losses[(4, 4)])
    assert find_shapes(t) == ([(1, 8), (4, 4)], (4, 3))
    assert sorted(p.name for p in (res / "figures").iterdir()) == ["exp_triple.pdf", "exp_triple.png"]
    stored = json.loads((res / "triple.json").read_text())
    assert stored["spread"] == out["spread"]
    mtimes = {p: p.stat().st_mtime_ns for p in res.glob("runs/*/record.json")}
    again = subprocess.run(cmd + ["--no-progress"], env=engine_env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["sweep"]["trained"] == [] and again.stderr == ""
    assert {p: p.stat().st_mtime_ns for p in res.glob("runs/*/record.json")} == mtimes
    png = (res / "figures" / "exp_triple.png").read_bytes()
    assert main(["exp", "triple", "--preset", str(preset), "--results", str(res), "--no-train", "--bootstrap", "50"]) == 0
    assert (res / "figures" / "exp_triple.png").read_bytes() == png  # deterministic figure


@pytest.mark.parametrize("argv, message", [
    (["--bootstrap", "0"], "--bootstrap must be >= 1"),
    (["--jobs", "0", "--results", "r"], "--jobs must be >= 1"),
    (["--jobs", "0", "--results", "empty", "--no-train"], "--jobs must be >= 1"),  # not silently ignored
    (["--results", "afile"], "not a directory"),
    (["--results", "missing", "--no-train"], "no records yet"),
    (["--preset", "nosuch"], "unknown preset 'nosuch'"),
    (["--set", "model.n_layer=3"], "grid"),
    (["--results", "empty", "--no-train"], "no usable runs"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["exp", "triple", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("depthwidth: error:") and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "empty"]
