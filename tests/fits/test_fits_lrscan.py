"""fits.lrscan on records with a known answer: test loss exactly quadratic in ln(lr), so the
vertex, its loss and the rule's regret follow by hand; several directories read as one scan."""

import json
import math

import pytest

from depthwidth.cli import main
from depthwidth.config import ModelConfig, RunConfig, TrainConfig
from depthwidth.errors import UserError
from depthwidth.fits import lrscan
from depthwidth.records import run_dir, write_json_atomic

LR_OPT, LOSS_OPT, CURV = 5e-3, 1.4, 0.05  # loss = LOSS_OPT + CURV * ln(lr / LR_OPT)^2


def loss_at(lr):
    return LOSS_OPT + CURV * math.log(lr / LR_OPT) ** 2


def write(results, L, d, seed, lr, loss, steps=1000, status="finished", kind=None):
    cfg = RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=2, vocab_size=65, seq_len=64),
                    train=TrainConfig(seed=seed, steps=steps, lr=lr))
    rec = {"schema": 1, "run_id": cfg.run_id(), "status": status, "config": cfg.to_dict(),
           "n_layer": L, "d_model": d, "n_head": 2, "seed": seed, "params": {"kaplan": 12 * L * d * d},
           "tokens": steps * 32 * 64, "steps": steps, "test_loss": loss}
    if kind:
        rec["kind"] = kind
    write_json_atomic(run_dir(results, cfg.run_id()) / "record.json", rec)


def test_three_lrs_give_the_parabolas_vertex_and_the_rules_regret(tmp_path):
    for lr in (2.5e-3, 6.5e-3, 1e-2):
        write(tmp_path, 2, 32, 0, lr, loss_at(lr))
    # rule lr = c / d: c = 0.256 puts it at 8e-3 for d = 32
    (row,) = lrscan.load_scan(tmp_path, c=0.256)
    assert row["lrs"] == [2.5e-3, 6.5e-3, 1e-2]
    assert row["lr_opt"] == pytest.approx(LR_OPT, rel=1e-9)
    assert row["loss_opt"] == pytest.approx(LOSS_OPT, abs=1e-12)
    assert row["best_scanned"] == {"lr": 6.5e-3, "loss": pytest.approx(loss_at(6.5e-3))}
    assert row["rule_lr"] == pytest.approx(8e-3)
    assert row["regret"] == pytest.approx(CURV * math.log(8e-3 / LR_OPT) ** 2, rel=1e-9)
    assert row["N"] == 12 * 2 * 32 * 32


def test_an_optimum_beyond_the_scan_is_the_best_scanned_lr(tmp_path):
    for lr in (1e-3, 2e-3, 4e-3):  # all below LR_OPT: loss still falling at the top of the scan
        write(tmp_path, 1, 46, 3, lr, loss_at(lr))
    (row,) = lrscan.load_scan(tmp_path, c=0.4)
    assert row["lr_opt"] is None and row["loss_opt"] is None
    assert row["best_scanned"]["lr"] == 4e-3
    assert row["rule_loss"] is None and row["regret"] is None  # 0.4/46 = 8.7e-3: outside the scan


def test_the_rules_own_lr_rounded_to_six_figures_is_inside_the_scan(tmp_path):
    # a preset stores 0.4/46 = 0.0086956521... as 0.00869565; the rule's exact lr is above it
    write(tmp_path, 1, 46, 0, 0.00434783, 1.5057)
    write(tmp_path, 1, 46, 0, 0.00869565, 1.5004)
    (row,) = lrscan.load_scan(tmp_path, c=0.4)
    assert row["rule_lr"] > 0.00869565
    assert row["rule_loss"] == pytest.approx(1.5004, abs=1e-6)
    assert row["regret"] == pytest.approx(0.0, abs=1e-6)


def test_several_directories_are_one_scan_of_one_protocol(tmp_path):
    rule, half, quarter = (tmp_path / n for n in ("rule", "half", "quarter"))
    for seed in (0, 1):
        write(rule, 4, 32, seed, 1.25e-2, loss_at(1.25e-2) + 0.01 * seed)
        write(half, 4, 32, seed, 6.25e-3, loss_at(6.25e-3) + 0.01 * seed)
    write(quarter, 4, 32, 0, 3.125e-3, loss_at(3.125e-3))
    write(quarter, 4, 32, 0, 1e-3, 9.9, status="diverged")  # not finished: not a point of the scan
    write(quarter, 4, 32, 0, 2e-3, 9.9, kind="seprank")  # another kind of record: set aside
    rows = lrscan.load_scan([rule, half, quarter], c=0.4)
    by_seed = {r["seed"]: r for r in rows}
    assert len(by_seed[0]["lrs"]) == 3 and by_seed[0]["lr_opt"] == pytest.approx(LR_OPT, rel=1e-9)
    assert by_seed[1]["lrs"] == [6.25e-3, 1.25e-2] and by_seed[1]["lr_opt"] is None
    (only,) = lrscan.load_scan([rule, half, quarter], c=0.4, seeds=[1])
    assert only["seed"] == 1
    with pytest.raises(UserError, match="is in both"):
        lrscan.load_scan([rule, rule], c=0.4)
    other = tmp_path / "other"
    write(other, 4, 32, 0, 2e-3, 1.5, steps=2000)  # another training length: another protocol
    with pytest.raises(UserError, match="one training protocol"):
        lrscan.load_scan([rule, other], c=0.4)
    with pytest.raises(UserError, match="no finished training runs of seed 7"):
        lrscan.load_scan([rule, half], c=0.4, seeds=[7])
    with pytest.raises(UserError, match=r"seeds 1\): no shape has finished runs at two"):
        lrscan.load_scan([rule], c=0.4, seeds=[1])  # seed 1 has one lr there


def test_cli_reads_several_directories_and_prints_the_regret(tmp_path, capsys):
    rule, half = tmp_path / "rule", tmp_path / "half"
    write(rule, 2, 64, 0, 6.25e-3, 1.3155)
    write(half, 2, 64, 0, 3.125e-3, 1.3063)
    assert main(["lrscan", "--results", str(rule), str(half), "--seeds", "0"]) == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.split()[:2] == ["2", "64"])
    assert line.split()[-1] == "+0.0092"  # 1.3155 - 1.3063: the rule's loss minus the best scanned
    assert main(["lrscan", "--results", str(rule), str(half), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["shapes"]
    assert row["regret"] == pytest.approx(0.0092, abs=1e-12)
    for bad, msg in ((["--seeds", "0,0"], "repeats"), (["--seeds", "x"], "--seeds")):
        assert main(["lrscan", "--results", str(rule), str(half), *bad]) != 0
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1


def test_average_seeds_uses_the_lrs_that_have_every_seed(tmp_path, capsys):
    for seed, off in ((0, 0.0), (1, 0.01), (2, 0.02)):
        for lr in (2.5e-3, 5e-3, 1e-2):
            write(tmp_path, 2, 32, seed, lr, loss_at(lr) + off)
    write(tmp_path, 2, 32, 0, 2e-2, 0.5)  # one seed only: left out of the seed mean
    (row,) = lrscan.load_scan(tmp_path, c=0.32, average_seeds=True)  # rule: 0.32/32 = 1e-2
    assert row["seed"] is None and row["seeds"] == [0, 1, 2]
    assert row["lrs"] == [2.5e-3, 5e-3, 1e-2]
    assert row["losses"] == pytest.approx([loss_at(lr) + 0.01 for lr in (2.5e-3, 5e-3, 1e-2)])
    assert row["lr_opt"] == pytest.approx(LR_OPT, rel=1e-9) and row["loss_opt"] == pytest.approx(LOSS_OPT + 0.01)
    assert row["regret"] == pytest.approx(CURV * math.log(2) ** 2, rel=1e-9)
    per_seed = lrscan.load_scan(tmp_path, c=0.32)
    assert [r["seed"] for r in per_seed] == [0, 1, 2] and len(per_seed[0]["lrs"]) == 4
    assert main(["lrscan", "--results", str(tmp_path), "--average-seeds", "--rule-c", "0.32"]) == 0
    out = capsys.readouterr().out
    assert " 2   32  24.6K mean" in out and "mean: over seeds L2 d32: 0,1,2" in out


def test_a_directory_without_records_or_an_absent_seed_is_refused(tmp_path):
    rule, half, empty = tmp_path / "rule", tmp_path / "half", tmp_path / "empty"
    write(rule, 2, 64, 0, 6.25e-3, 1.3155)
    write(half, 2, 64, 0, 3.125e-3, 1.3063)
    empty.mkdir()
    with pytest.raises(UserError, match="empty holds no training records"):
        lrscan.load_scan([rule, half, empty], c=0.4)
    with pytest.raises(UserError, match="no finished training runs of seed 7 in"):
        lrscan.load_scan([rule, half], c=0.4, seeds=[0, 7])
    with pytest.raises(UserError, match="non-empty path"):
        lrscan.load_scan([rule, ""], c=0.4)


def test_an_impossible_record_is_left_out_of_the_scan_and_named(tmp_path, capsys):
    # Issue 24: the one record validator is also the lr scan's; a negative loss would be the
    # parabola's best point.
    for lr in (2.5e-3, 6.5e-3, 1e-2):
        write(tmp_path, 2, 32, 0, lr, loss_at(lr))
    write(tmp_path, 2, 32, 0, 4e-3, -1.5)
    (row,) = lrscan.load_scan(tmp_path, c=0.256)
    assert row["lrs"] == [2.5e-3, 6.5e-3, 1e-2] and row["lr_opt"] == pytest.approx(LR_OPT, rel=1e-9)
    assert main(["lrscan", "--results", str(tmp_path), "--rule-c", "0.256"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"excluded {tmp_path}/runs/L2-d32-h2-s0-") and first.endswith(
        ": test_loss -1.5 is not positive (a cross-entropy on held-out text is > 0 nats/token)")
