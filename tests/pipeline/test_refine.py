"""Adaptive refinement: which sizes a round adds, from the records alone (pipeline.refine), and
`depthwidth sweep --refine`."""

import dataclasses
import math

import pytest

from depthwidth.errors import UserError
from depthwidth.experiments.presets import load_preset, merge_config
from depthwidth.fits.synthetic import Surface, write_synthetic
from depthwidth.fits.table import load_table
from depthwidth.pipeline.refine import RefineSpec, cell_configs, parse_refine, proposals


def _table(tmp_path, N_range, per_decade=2, seed=0):
    write_synthetic(tmp_path / "r", Surface(), depths=(2, 4), n_seeds=3, N_range=N_range, per_decade=per_decade,
                    seed=seed)
    return load_table(tmp_path / "r")


def test_a_wide_crossing_gets_the_midpoint_of_its_bracket_at_both_depths(tmp_path):
    s = Surface()
    true = s.true_transition(2, 4)
    t = _table(tmp_path, (true / 10, true * 10))  # 2 points per decade: a coarse bracket
    (p,) = proposals(t, RefineSpec(pairs="adjacent", target_ln_width=0.05, bootstrap=100), n_head=2)
    assert (p["L_s"], p["L_d"], p["status"]) == (2, 4, "crossing")
    sizes = sorted(set(t.cells["N"]))
    below = max(N for N in sizes if N <= true * 1.5 and N < p["N"])
    above = min(N for N in sizes if N > p["N"])
    assert p["N"] == pytest.approx(math.sqrt(below * above))
    # the widths at equal N, even (n_head = 2): d = 2 round(sqrt(N / 12L) / 2)
    assert p["cells"] == [(L, 2 * round(math.sqrt(p["N"] / (12 * L)) / 2)) for L in (2, 4)]


def test_a_resolved_crossing_needs_nothing(tmp_path):
    true = Surface().true_transition(2, 4)
    t = _table(tmp_path, (true / 10, true * 10))
    assert proposals(t, RefineSpec(target_ln_width=50.0, bootstrap=100), n_head=2) == []


def test_no_crossing_extends_the_range_up_to_max_N(tmp_path):
    true = Surface().true_transition(2, 4)
    t = _table(tmp_path, (true / 30, true / 3))  # every size below the transition
    (p,) = proposals(t, RefineSpec(bootstrap=100, max_N=1e12), n_head=2)
    assert p["status"] == "deeper_worse_throughout"
    common_top = min(t.cells[t.cells.n_layer == L]["N"].max() for L in (2, 4))
    assert p["N"] == pytest.approx(2 * common_top)
    assert proposals(t, RefineSpec(bootstrap=100, max_N=common_top), n_head=2) == []
    assert proposals(t, RefineSpec(bootstrap=100, extend=False, max_N=1e12), n_head=2) == []


def test_a_crossing_whose_missing_replicates_fall_off_an_end_extends_past_that_end():
    # law-long's (4, 8) pair at 8,000 steps: a crossing at 288K in 63% of replicates, the other
    # 37% deeper-better over the whole common range [203K, 393K]. A midpoint (282K) cannot give
    # those replicates a bracket; a size below the range can.
    from depthwidth.fits.transitions import TransitionPoint
    from depthwidth.pipeline.refine import _proposal

    cells = {4: [(101568.0, 46), (196608.0, 64), (406272.0, 92)], 8: [(203136.0, 46), (393216.0, 64)]}
    p = TransitionPoint(L_s=4, L_d=8, assign="geom", L=math.sqrt(32), status="crossing",
                        N_range=[203136.0, 393216.0], N_star=288497.0, N_star_ci95=[None, 368039.0],
                        bootstrap_replicates=1000, bootstrap_with_crossing=626, bootstrap_fraction=0.626,
                        bootstrap_below=374)
    spec = RefineSpec(min_N=3e3, max_N=8e5)
    assert _proposal(p, cells, spec) == pytest.approx(0.5 * 203136.0)
    assert _proposal(p, cells, RefineSpec(min_N=1.5e5, max_N=8e5)) == pytest.approx(math.sqrt(203136.0 * 393216.0))
    flip = dataclasses.replace(p, bootstrap_below=0, bootstrap_above=374)
    assert _proposal(flip, cells, spec) == pytest.approx(2 * 393216.0)
    # few replicates off the edge (<= 5%): the shortfall is inside the range, so bisect
    inside = dataclasses.replace(p, bootstrap_with_crossing=940, bootstrap_fraction=0.94, bootstrap_below=50)
    assert _proposal(inside, cells, spec) == pytest.approx(math.sqrt(203136.0 * 393216.0))
    assert _proposal(p, cells, RefineSpec(extend=False)) == pytest.approx(math.sqrt(203136.0 * 393216.0))


def test_refined_cells_are_built_like_grid_points():
    p = load_preset("smoke")
    assert merge_config(p, 1, 16, 0, p.corpora[0]) == p.runs[0].to_dict()
    runs = cell_configs(p, [(2, 24)])
    assert [(r.model.n_layer, r.model.d_model, r.train.seed) for r in runs] == [(2, 24, 0), (2, 24, 1)]
    assert all(r.train == p.runs[0].train.__class__(**{**p.runs[0].train.__dict__, "seed": r.train.seed})
               for r in runs)


def test_bad_refine_tables_fail_with_one_line():
    assert parse_refine(None, "x") is None
    assert parse_refine({"max_runs": 10, "max_N": 2e6}, "x") == RefineSpec(max_runs=10, max_N=2e6)
    with pytest.raises(UserError, match="unknown refine key"):
        parse_refine({"budget": 3}, "x")
    with pytest.raises(UserError, match="refine.max_runs must be an integer"):
        parse_refine({"max_runs": 2.5}, "x")
    with pytest.raises(UserError, match="refine.pairs"):
        parse_refine({"pairs": "all"}, "x")


REFINE_PRESET = """
name = "refine-smoke"
description = "smoke with refinement"
[base.model]
n_layer = 1
d_model = 16
n_head = 2
seq_len = 32
[base.data]
corpus = "tinyshakespeare"
tokenizer = "char"
[base.train]
steps = 30
batch_size = 16
lr = 1e-2
warmup_steps = 5
eval_batches = 2
test_sequences = 64
log_every = 10
[grid]
depths = [1, 2]
seeds = [0, 1]
[grid.widths]
1 = [16, 32]
2 = [12, 24]
[refine]
pairs = "doubling"
target_ln_width = 0.01
max_runs = 4
max_N = 1e6
min_N = 100
bootstrap = 50
"""


def test_sweep_refine_trains_new_widths_once_within_budget(tmp_path, engine_env, cli_cmd):
    import json
    import subprocess

    from depthwidth.experiments.presets import load_preset

    f = tmp_path / "refine-smoke.toml"
    f.write_text(REFINE_PRESET)
    # --jobs 2: the round's runs go to two worker processes, which get the round's cells from this one
    cmd = cli_cmd + ["sweep", "--preset", str(f), "--results", str(tmp_path / "r"), "--refine", "--no-progress", "--json",
                     "--jobs", "2"]
    first = subprocess.run(cmd, env=engine_env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    # both children of the round train the round's cells (a late child planned one cell alone)
    import re

    after = first.stderr.split("[refine] round 1:", 1)[1]
    sizes = dict(re.findall(r"\[sweep refine-smoke w(\d)/2\] (\d+) runs, ", after))
    assert sizes.keys() == {"0", "1"} and len(set(sizes.values())) == 1, sizes
    rep = json.loads(first.stdout)
    grid = {r.run_id() for r in load_preset(f).runs}
    refined = [t for t in rep["trained"] if t not in grid]
    # the round proposes new widths (at most the budget: 4 runs = 2 cells x 2 seeds) and says why
    assert "[refine] round 1: pair (1,2)" in first.stderr
    assert 0 < len(refined) <= 4 and len(rep["trained"]) == len(grid) + len(refined)
    table = load_table(tmp_path / "r")
    assert len(table.runs) == len(grid) + len(refined)
    again = subprocess.run(cmd, env=engine_env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and json.loads(again.stdout)["trained"] == []


def test_refine_flags_belong_to_sweep_only():
    # pipeline/cli.py adds them to the sweep command registered by experiments/cli.py.
    from depthwidth.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["sweep", "--preset", "smoke", "--results", "r", "--refine"])
    assert args.refine and args.refine_round is None and args.func.__module__ == "depthwidth.pipeline.cli"
    assert parser.parse_args(["sweep", "--preset", "smoke", "--results", "r"]).refine is False
    with pytest.raises(UserError, match="unrecognized arguments: --refine"):
        parser.parse_args(["reproduce", "--preset", "smoke", "--refine"])


def _record_for(results, cfg, status="finished", loss=3.0):
    from depthwidth.records import Record, params_of, write_record

    m, t = cfg.model, cfg.train
    write_record(results, Record(
        run_id=cfg.run_id(), status=status, config=cfg.to_dict(), n_layer=m.n_layer, d_model=m.d_model,
        n_head=m.n_head, vocab_size=m.vocab_size or 65, seq_len=m.seq_len, seed=t.seed,
        params=params_of(m.n_layer, m.d_model, n_head=m.n_head, vocab_size=m.vocab_size or 65, seq_len=m.seq_len),
        tokens=t.steps * t.batch_size * m.seq_len, steps=t.steps, train_loss=loss, val_loss=loss,
        test_loss=loss if status == "finished" else None, wall_s=0.0, compile_s=0.0, versions={},
        device="test", finished_at="2026-01-01T00:00:00+00:00"))


def _graded_grid(tmp_path):
    """The refine-smoke preset and a results directory with a record for each of its grid runs."""
    f = tmp_path / "refine-smoke.toml"
    f.write_text(REFINE_PRESET)
    preset = load_preset(f)
    results = tmp_path / "r"
    for i, r in enumerate(preset.runs):
        _record_for(results, r, loss=3.0 + 0.01 * i)
    return preset, results


def test_an_interrupted_round_first_finishes_its_cells_before_proposing_new_ones(tmp_path):
    from depthwidth.pipeline.refine import describe, plan_round, unfinished_cells

    preset, results = _graded_grid(tmp_path)
    # a refined cell with only seed 0 of the preset's seeds (0, 1): the round was killed after it
    half = cell_configs(preset, [(2, 18)])
    _record_for(results, half[0])
    # ... and its partner at equal N was started (a run directory, no record yet)
    partner = cell_configs(preset, [(1, 26)])
    from depthwidth.records import run_dir, write_json_atomic

    write_json_atomic(run_dir(results, partner[0].run_id()) / "config.json",
                      {"run_id": partner[0].run_id(), "config": partner[0].to_dict()})
    assert unfinished_cells(preset, load_table(results)) == [(1, 26), (2, 18)]
    props, runs = plan_round(preset, str(results), preset.refine)
    assert props == [{"status": "unfinished", "cells": [(1, 26), (2, 18)]}]
    # only the missing runs, whatever the budget
    assert sorted(r.run_id() for r in runs) == sorted([partner[0].run_id(), partner[1].run_id(), half[1].run_id()])
    assert describe(props) == ["finish the seeds of L1 d26, L2 d18 (an interrupted round)"]
    for r in partner:
        _record_for(results, r)
    # a missing seed whose run diverged has a record: the cell is done, the round proposes sizes again
    _record_for(results, half[1], status="diverged")
    assert unfinished_cells(preset, load_table(results)) == []
    props, _ = plan_round(preset, str(results), preset.refine)
    assert all(p["status"] != "unfinished" for p in props)


def test_round_children_train_the_cells_their_parent_planned_even_after_a_sibling_began(tmp_path):
    """With --jobs 2 the second child planned the round after the first had begun a run: it saw
    that run's directory without a record, planned "finish the seeds of" that one cell, and the
    round's other cell was left to one worker (predict-23, round 4). The parent now passes the
    round's cells, and each child's preset is every seed of exactly those cells."""
    from depthwidth.pipeline.refine import cells_preset, format_cells, parse_cells, plan_round, round_preset
    from depthwidth.records import run_dir, write_json_atomic

    preset, results = _graded_grid(tmp_path)
    sub, props = round_preset(preset, str(results))
    assert props and props[0]["status"] != "unfinished" and sub.runs
    cells = sorted({(r.model.n_layer, r.model.d_model) for r in sub.runs})
    assert len(cells) >= 2 and parse_cells(format_cells(cells)) == cells
    # the first child begins the round's first run ...
    first = sub.runs[0]
    write_json_atomic(run_dir(results, first.run_id()) / "config.json", {"run_id": first.run_id(), "config": first.to_dict()})
    # ... so a child that planned from the records now would train one cell only (the race) ...
    _, late = plan_round(preset, str(results), preset.refine)
    assert {(r.model.n_layer, r.model.d_model) for r in late} == {(first.model.n_layer, first.model.d_model)}
    # ... while the cells the parent passed give every run of the round (and the same list, so
    # the same split between the children, whichever of them builds it)
    child = [r.run_id() for r in cells_preset(preset, parse_cells(format_cells(cells))).runs]
    assert sorted(child) == sorted(r.run_id() for r in sub.runs) and len(child) == len(sub.runs)


@pytest.mark.parametrize("text", ["", "2x", "2x88,", "x88", "0x8", "2x88x3", "a,b", "2-88"])
def test_a_bad_refine_round_value_is_one_line(text):
    from depthwidth.pipeline.refine import parse_cells

    with pytest.raises(UserError, match="--refine-round takes the round's cells as LxD"):
        parse_cells(text)
