"""Presets: the built-in files load and say what they claim; bad files fail with one line naming the file."""

import json
import math
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.experiments.presets import available, load_preset, scaled_steps, with_overrides


def test_builtin_presets_load():
    assert {"smoke", "cpu", "levine2020"} <= set(available())
    for name in available():
        p = load_preset(name)
        assert p.name == name and p.description and p.runs
        ids = [r.run_id() for r in p.runs]
        assert len(set(ids)) == len(ids)


def test_smoke_grid_and_order():
    p = load_preset("smoke")
    # 2 depths x 2 widths x 2 seeds, one corpus.
    assert len(p.runs) == 8
    assert p.base.data.tokenizer == "char" and p.base.data.corpus == "tinyshakespeare"
    # Run order is corpus, seed, depth, width: the first half is all of seed 0.
    assert [r.train.seed for r in p.runs] == [0] * 4 + [1] * 4
    assert [(r.model.n_layer, r.model.d_model) for r in p.runs[:4]] == [(1, 16), (1, 32), (2, 16), (2, 32)]
    # Grid points keep the base everywhere else.
    assert all(r.train.steps == p.base.train.steps and r.model.seq_len == 32 for r in p.runs)
    # An 8-device test mesh splits the batch evenly.
    assert p.base.train.batch_size % 8 == 0


def test_cpu_widths_follow_their_param_targets():
    p = load_preset("cpu")
    assert p.depths == (1, 2, 4) and len(p.seeds) == 2
    assert p.base.model.seq_len == 64 and p.base.train.batch_size == 32 and p.base.data.tokenizer == "char"
    # The file's comment: d = sqrt(N / (12 L)) for the Kaplan targets, rounded to even.
    targets = {1: [25e3, 100e3, 200e3, 400e3], 2: [25e3, 100e3, 200e3, 400e3], 4: [100e3, 400e3]}
    for L in p.depths:
        ws = p.widths[L]
        assert len(ws) == len(targets[L])
        for d, n in zip(ws, targets[L]):
            exact = math.sqrt(n / (12 * L))
            assert d % 2 == 0 and abs(d - exact) <= 1.0 + 1e-9, (L, d, exact)
    assert len(p.runs) == 2 * (4 + 4 + 2)


def test_levine2020_matches_the_paper_and_the_law():
    p = load_preset("levine2020")
    b = p.base
    # The paper's experiments (v3): depths 6..48, H=2, V=2000 BPE, T=128, B=512, 1M steps, 12K warm-up, 3 seeds, 3 corpora.
    assert p.depths == (6, 12, 18, 24, 30, 36, 48)
    assert b.model.n_head == 2 and b.model.seq_len == 128
    assert b.data.tokenizer == "bpe" and b.data.bpe_vocab_size == 2000
    assert b.train.batch_size == 512 and b.train.steps == 1_000_000 and b.train.warmup_steps == 12_000
    assert b.train.weight_decay == 0.0
    assert p.seeds == (0, 1, 2) and len(p.corpora) == 3
    assert "tinyshakespeare" not in p.corpora  # too small for 1M x 512 x 128 tokens (description says so)
    assert len(p.runs) == 7 * 5 * 3 * 3
    # Widths: d*(L) = exp(5.039 + 0.0555 L) times 2^(k/2), k = -2..2, each the nearest multiple of 32.
    for L in p.depths:
        d_star = math.exp(5.039 + 0.0555 * L)
        expected = [32 * round(d_star * 2 ** (k / 2) / 32) for k in range(-2, 3)]
        assert list(p.widths[L]) == expected, L
        # Hence they span about x0.5 to x2 of the law's transition width (rounding moves them <= 16).
        assert abs(p.widths[L][0] - d_star / 2) <= 16 and abs(p.widths[L][-1] - 2 * d_star) <= 16
    # Spot check by hand: L=6, d* = e^5.372 = 215.3; x0.5 = 107.6 -> 96 (107.6/32 = 3.36 -> 3).
    assert p.widths[6][0] == 96 and p.widths[6][2] == 224
    # FSDP (embed -> data) for depths 36 and 48 only: 12*48*4416^2 = 11.2B parameters x 16 bytes.
    for r in p.runs:
        fsdp = dict(r.mesh.rules).get("embed") == "data"
        assert fsdp == (r.model.n_layer in (36, 48))
    assert 12 * 48 * 4416 ** 2 * 16 / 1e9 == pytest.approx(179.7, abs=0.1)


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "mine.toml"
    f.write_text(text)
    return f


GOOD = """
name = "mine"
description = "test preset"
[base.model]
n_head = 2
seq_len = 16
[base.train]
steps = 100
batch_size = 4
warmup_steps = 50
[grid]
depths = [2, 4]
seeds = [0]
[grid.widths]
2 = [8, 16]
4 = [8]
"""


def test_user_preset_file_and_overrides(tmp_path):
    text = GOOD + "[grid.overrides.4.train]\nlr = 1e-3\n"
    p = load_preset(_write(tmp_path, text))
    assert [(r.model.n_layer, r.model.d_model) for r in p.runs] == [(2, 8), (2, 16), (4, 8)]
    assert [r.train.lr for r in p.runs] == [p.base.train.lr, p.base.train.lr, 1e-3]


def test_scale_steps_by_tokens_per_param(tmp_path):
    text = GOOD + "[grid.scale_steps]\ntokens_per_param = 10\nmin_steps = 30\nmax_steps = 1000\n"
    p = load_preset(_write(tmp_path, text))
    # tokens per step = B*T = 4*16 = 64; N = 12 L d^2.
    # L=2 d=8:  N = 1536, 10*1536/64 = 240 steps;  L=2 d=16: N = 6144 -> 960;  L=4 d=8: N = 3072 -> 480.
    assert [r.train.steps for r in p.runs] == [240, 960, 480]
    assert all(r.train.warmup_steps == 50 for r in p.runs)
    # Clamping: 10*1536/64 = 240 -> max 100; a tiny budget -> min.
    assert scaled_steps(10, 2, 8, 4, 16, 1, 100) == 100
    assert scaled_steps(0.1, 2, 8, 4, 16, 30, 100) == 30


@pytest.mark.parametrize("mutate, needle", [
    (lambda t: "colour = 1\n" + t, "unknown key(s) 'colour' in the preset"),
    (lambda t: t + "colour = 1\n", "grid.widths key 'colour' is not a depth"),
    (lambda t: t.replace("2 = [8, 16]", "2 = [8, 15]"), "divisible by model.n_head"),
    (lambda t: t.replace("depths = [2, 4]", "depths = []"), "grid.depths must be a non-empty list"),
    (lambda t: t.replace("4 = [8]", "4 = []"), "grid.widths.4 must be a non-empty list"),
    (lambda t: t.replace("4 = [8]\n", ""), "no widths for depth 4"),
    (lambda t: t.replace("4 = [8]", "4 = [8]\n6 = [8]"), "depth 6, which is not in grid.depths"),
    (lambda t: t.replace("seeds = [0]", "seeds = [0, 0]"), "grid.seeds has duplicates"),
    (lambda t: t.replace("steps = 100", "stepz = 100"), "unknown config field TrainConfig.stepz"),
    (lambda t: t + "[grid.overrides.4.model]\nn_head = 3\n", "L=4 d=8"),
    (lambda t: t.replace('description = "test preset"', ""), "missing 'description'"),
    (lambda t: t + "[grid.scale_steps]\ntokens_per_param = 10\n", "grid.scale_steps needs"),
    (lambda t: t + "[grid.bogus]\n", "unknown key(s) 'bogus' in grid"),
    (lambda t: t.replace("[grid]", "[grid\n"), "malformed TOML"),
])
def test_bad_preset_is_one_line_naming_the_file(tmp_path, mutate, needle):
    f = _write(tmp_path, mutate(GOOD))
    with pytest.raises(UserError) as e:
        load_preset(f)
    msg = str(e.value)
    assert needle in msg and str(f) in msg and "\n" not in msg


def test_unknown_preset_name():
    with pytest.raises(UserError, match="unknown preset 'nope'.*smoke"):
        load_preset("nope")
    with pytest.raises(UserError, match="preset file not found"):
        load_preset("/no/such/file.toml")


def test_with_overrides():
    p = load_preset("smoke")
    q = with_overrides(p, ["train.steps=10", "train.warmup_steps=2"])
    assert all(r.train.steps == 10 for r in q.runs) and q.base.train.steps == 10
    assert [r.run_id() for r in q.runs] != [r.run_id() for r in p.runs]  # steps change the result
    with pytest.raises(UserError, match="grid axis"):
        with_overrides(p, ["model.d_model=64"])


def test_cli_presets_list_and_show(capsys):
    assert main(["presets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["presets"]
    assert {r["name"]: r["n_runs"] for r in rows}["levine2020"] == 315
    # law-long: 33 grid runs, and its [refine] table's max_runs (the 45 records = 33 + 12 refined)
    by_name = {r["name"]: r for r in rows}
    assert (by_name["law-long"]["n_runs"], by_name["law-long"]["refine_max_runs"]) == (33, 30)
    assert by_name["smoke"]["refine_max_runs"] is None
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()[:-1]
    assert [ln for ln in lines if ln.startswith("law-long ")][0].endswith("austen  (--refine: up to 30 more)")
    assert len(lines) == len(rows) and len({line.index(" runs  depths") for line in lines}) == 1  # one column
    assert main(["presets", "smoke", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["n_runs"] == 8 and s["widths"] == {"1": [16, 32], "2": [16, 32]}
    # Kaplan N of L=2 d=32: 12*2*32^2 = 24576.
    assert max(r["kaplan_params"] for r in s["runs"]) == 24576
    assert main(["presets", "cpu"]) == 0
    out = capsys.readouterr().out
    # The largest L=2 model: 12*2*130^2 = 405,600 parameters, printed with 3 significant digits.
    assert "L=2" in out and "406K" in out
    assert main(["presets", "nope"]) == 2
    assert "unknown preset" in capsys.readouterr().err


def test_law_preset_lr_rule_and_lrscan_axis():
    law = load_preset("law")
    # lr = 6.25e-3 * 64 / d_model (grid.lr_rule), rounded to 6 significant figures
    for r in law.runs:
        assert r.train.lr == float(f"{0.4 / r.model.d_model:.6g}")
    assert {r.data.heldout for r in law.runs} == {"spread"} and law.refine.pairs == "doubling"
    scan = load_preset("lrscan")
    assert scan.lrs == (3e-3, 6e-3, 1.2e-2)
    # every shape at every lr, the lr innermost in the run order
    assert [(r.model.n_layer, r.model.d_model, r.train.lr) for r in scan.runs[:3]] == \
        [(1, 64, 3e-3), (1, 64, 6e-3), (1, 64, 1.2e-2)]
    assert len(scan.runs) == 5 * 3
    with pytest.raises(UserError, match="changes a grid axis"):
        with_overrides(scan, ["train.lr=1e-3"])


@pytest.mark.parametrize("grid, message", [
    ('lrs = [1e-3, 1e-3]', "grid.lrs has duplicates"),
    ('lrs = [0.0]', "positive learning rates"),
    ('lrs = [1e-3]\n[grid.lr_rule]\nref_width = 64', "exclude each other"),
    ('[grid.lr_rule]\nref_width = -1', "lr_rule.ref_width must be a positive number"),
    ('[grid.lr_rule]\nref_width = 64\nslope = 1', "unknown key"),
])
def test_bad_lr_axes_fail_with_one_line(tmp_path, grid, message):
    f = tmp_path / "p.toml"
    f.write_text('name = "p"\ndescription = "d"\n[base.model]\nn_head = 2\n[grid]\ndepths = [1]\nseeds = [0]\n'
                 + grid + '\n[grid.widths]\n1 = [16]\n')
    with pytest.raises(UserError, match=message):
        load_preset(f)


@pytest.mark.parametrize("table, message", [
    ('budget = 3', "unknown refine key"),
    ('max_runs = 2.5', "refine.max_runs must be an integer"),
    ('pairs = "all"', "refine.pairs"),
    ('min_N = 1e7', "0 < min_N < max_N"),
])
def test_bad_refine_table_fails_when_the_preset_loads(tmp_path, table, message):
    # The [refine] table is preset data: checked by load_preset (RefineSpec), before any sweep.
    f = tmp_path / "p.toml"
    f.write_text('name = "p"\ndescription = "d"\n[base.model]\nn_head = 2\n[grid]\ndepths = [1]\nseeds = [0]\n'
                 '[grid.widths]\n1 = [16]\n[refine]\n' + table + '\n')
    with pytest.raises(UserError, match=message) as e:
        load_preset(f)
    assert "\n" not in str(e.value)
    f.write_text('name = "p"\ndescription = "d"\nrefine = 3\n[base.model]\nn_head = 2\n[grid]\ndepths = [1]\n'
                 'seeds = [0]\n[grid.widths]\n1 = [16]\n')
    with pytest.raises(UserError, match="refine must be a table"):
        load_preset(f)
