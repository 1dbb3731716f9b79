"""fits.band on synthetic records with a known answer: per-depth power laws L_L(N) = A_L·N^α_L, so
the correction, the spread and the parameter multiplier follow by hand."""

import math

import numpy as np
import pytest

from depthwidth.config import ModelConfig, RunConfig, TrainConfig
from depthwidth.errors import UserError
from depthwidth.fits import band
from depthwidth.records import run_dir, write_json_atomic

# Per depth (A, α) of the true power law, and its widths (N = 12·L·d²).
LAWS = {1: (6.0, -0.13), 2: (6.5, -0.14), 4: (9.0, -0.17)}
WIDTHS = {1: [22, 46, 92], 2: [16, 32, 64], 4: [12, 22, 46]}
SEED_FACTOR = {0: 0.99, 1: 1.0, 2: 1.01}  # multiplicative, common to every shape (paired seeds)
B = 25_000.0


def write(results, L, d, seed, loss, steps=1000, chunks=None):
    cfg = RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=2, vocab_size=65, seq_len=64),
                    train=TrainConfig(seed=seed, steps=steps))
    rec = {"schema": 1, "run_id": cfg.run_id(), "status": "finished", "config": cfg.to_dict(),
           "n_layer": L, "d_model": d, "n_head": 2, "seed": seed,
           "params": {"kaplan": 12 * L * d * d, "non_embedding": L * (12 * d * d + 13 * d) + 2 * d,
                      "embedding": 65 * d + 64 * d},
           "tokens": steps * 32 * 64, "steps": steps, "test_loss": loss}
    if chunks is not None:
        rec["test_loss_chunks"] = chunks
    write_json_atomic(run_dir(results, cfg.run_id()) / "record.json", rec)


def truth(L, N, laws=LAWS):
    A, a = laws[L]
    return A * N ** a


def synthetic(results, laws=LAWS, widths=WIDTHS):
    for L, ws in widths.items():
        for d in ws:
            for s, f in SEED_FACTOR.items():
                write(results, L, d, s, truth(L, 12 * L * d * d, laws) * f)


def test_spread_and_multiplier_match_the_known_power_laws(tmp_path):
    synthetic(tmp_path)
    res = band.analyse(band.merged_table([str(tmp_path)]), [B], n_boot=200)
    b = res["budgets"][0]
    # shapes at 25K: L1 d46 (25,392), L2 d32 (24,576), L4 d22 (23,232)
    assert [(r["n_layer"], r["d_model"]) for r in b["shapes"]] == [(1, 46), (2, 32), (4, 22)]
    exact = {L: truth(L, B) for L in LAWS}  # each depth's law evaluated at exactly B
    for r in b["shapes"]:
        assert r["alpha"] == pytest.approx(LAWS[r["n_layer"]][1], abs=1e-9)
        assert r["loss_at_budget"] == pytest.approx(exact[r["n_layer"]], rel=1e-9)
    best, worst = min(exact, key=exact.get), max(exact, key=exact.get)
    assert b["spread_pct"] == pytest.approx(100 * (exact[worst] / exact[best] - 1), rel=1e-9)
    # the worst depth's law reaches the best loss at N_match = (best / A_w)^(1/α_w)
    A_w, a_w = LAWS[worst]
    N_match = (exact[best] / A_w) ** (1 / a_w)
    assert b["multiplier"] == pytest.approx(N_match / B, rel=1e-9) and b["multiplier"] > 1
    at_b = {1: 46, 2: 32, 4: 22}
    assert b["worst"] == [worst, at_b[worst]] and b["best"] == [best, at_b[best]]
    assert b["decades"] == pytest.approx(math.log10(46 / 5.5))
    # seeds scale every shape alike, so every paired replicate gives the same numbers: a
    # zero-width interval (an unpaired draw would not)
    assert b["spread_pct_ci"] == pytest.approx([b["spread_pct"]] * 2, rel=1e-9)
    assert b["multiplier_ci"] == pytest.approx([b["multiplier"]] * 2, rel=1e-9)


def test_correction_and_multiplier_formulas():
    A, a = 5.0, -0.1
    # a point on the law moved along its slope lands on the law
    assert band.corrected_loss(A * 20_000 ** a, 20_000, 25_000, a) == pytest.approx(A * 25_000 ** a, rel=1e-12)
    # three times the parameters on the same law: multiplier 3; a loss that does not fall: NaN
    assert band.multiplier(A * 75_000 ** a, A * 25_000 ** a, a) == pytest.approx(3.0, rel=1e-12)
    assert math.isnan(band.multiplier(1.0, 1.1, 0.0))
    assert band.power_law_slope([1e3, 1e4, 1e5], [A * x ** a for x in (1e3, 1e4, 1e5)]) == pytest.approx(a)
    assert math.isnan(band.power_law_slope([1e3, 1e3], [1.0, 2.0]))


def test_a_depth_with_one_size_takes_the_other_depths_mean_slope(tmp_path):
    synthetic(tmp_path, laws={**LAWS, 16: (9.5, -0.2)}, widths={1: [22, 46, 92], 2: [16, 32, 64], 16: [12]})
    b = band.analyse(band.merged_table([str(tmp_path)]), [B], n_boot=0)["budgets"][0]
    row = {r["n_layer"]: r for r in b["shapes"]}[16]
    assert row["slope_from"] == "other depths"
    assert row["alpha"] == pytest.approx((LAWS[1][1] + LAWS[2][1]) / 2)
    assert row["loss_at_budget"] == pytest.approx(row["loss"] * (B / 27_648) ** row["alpha"])
    assert b["spread_pct_ci"] is None and b["multiplier_ci"] is None
    assert b["common_seeds"] is None  # every shape has seeds 0, 1, 2


def test_common_seeds_of_a_partial_sweep(tmp_path):
    synthetic(tmp_path)
    write(tmp_path, 8, 16, 0, 1.8)  # one seed of a fourth depth at 25K (24,576): seed 0 only
    write(tmp_path, 8, 32, 0, 1.6)
    b = band.analyse(band.merged_table([str(tmp_path)]), [B], n_boot=0)["budgets"][0]
    cs = b["common_seeds"]
    assert cs["seeds"] == [0]
    # on seed 0 every old shape is its law times 0.99; L8 is measured on seed 0 itself
    a8 = math.log(1.6 / 1.8) / math.log(4)
    at_b = {L: truth(L, B) * 0.99 for L in LAWS} | {8: 1.8 * (B / 24_576) ** a8}
    assert cs["spread_pct"] == pytest.approx(100 * (max(at_b.values()) / min(at_b.values()) - 1), rel=1e-9)
    assert cs["worst"] == [8, 16] and cs["excess_pct"]["L8-d16"] == pytest.approx(
        100 * (at_b[8] / min(at_b.values()) - 1), rel=1e-9)


def test_paired_bootstrap_with_test_chunks_brackets_the_point(tmp_path):
    rng = np.random.default_rng(0)
    for L, ws in WIDTHS.items():
        for d in ws:
            for s in SEED_FACTOR:
                ch = list(truth(L, 12 * L * d * d) * (1 + 0.01 * rng.standard_normal(8)))
                write(tmp_path, L, d, s, float(np.mean(ch)), chunks=ch)
    b = band.analyse(band.merged_table([str(tmp_path)]), [B], n_boot=300)["budgets"][0]
    lo, hi = b["spread_pct_ci"]
    assert lo < b["spread_pct"] < hi or lo <= b["spread_pct"] <= hi
    assert b["multiplier_ci"][0] <= b["multiplier"] <= b["multiplier_ci"][1]
    assert sum(b["best_share"].values()) == pytest.approx(1.0)


def test_bad_input_is_one_line_user_error(tmp_path):
    for text in ["", "25K,abc", "25K,25K", "-5K", "0"]:
        with pytest.raises(UserError):
            band.parse_budgets(text)
    assert band.parse_budgets("100K,6K,25K") == [6000.0, 25000.0, 100000.0]
    synthetic(tmp_path)
    table = band.merged_table([str(tmp_path)])
    with pytest.raises(UserError, match="only 0 depth"):
        band.analyse(table, [1e9], n_boot=0)
    with pytest.raises(UserError, match="only 1 depth"):
        band.analyse(table, [5_808], n_boot=0, tolerance=1.05)  # L1 d22 only; L2 d16 is 6,144
    with pytest.raises(UserError, match="factor > 1"):
        band.select_shapes(table.cells, B, tolerance=1.0)
    with pytest.raises(UserError, match="--bootstrap"):
        band.analyse(table, [B], n_boot=-1)


def test_merging_directories_checks_duplicates_and_protocol(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    synthetic(a)
    write(b, 16, 12, 0, 1.9)
    merged = band.merged_table([str(a), str(b)])
    assert (16, 12) in merged.losses and len(merged.cells) == 10
    with pytest.raises(UserError, match="in both"):
        band.merged_table([str(a), str(a)])
    write(c, 16, 12, 0, 1.9, steps=2000)  # another training length: not the same protocol
    with pytest.raises(UserError, match="one training protocol"):
        band.merged_table([str(a), str(c)])
    with pytest.raises(UserError, match="not found"):
        band.merged_table([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()  # a band directory before its first record: skipped
    assert len(band.merged_table([str(tmp_path / "empty"), str(a)]).cells) == 9
    with pytest.raises(UserError, match="no records"):
        band.merged_table([str(tmp_path / "empty")])
