"""load_table(tune_lr=...): per cell, the lr with the lowest mean validation loss, from records
written by hand, so every choice and mean follows by inspection."""

import json

import pytest

from depthwidth.cli import main
from depthwidth.config import ModelConfig, RunConfig, TrainConfig
from depthwidth.errors import UserError
from depthwidth.fits.table import load_table
from depthwidth.records import run_dir, write_json_atomic


def write(results, L, d, seed, lr, val, test, status="finished", steps=1000):
    cfg = RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=2, vocab_size=65, seq_len=64),
                    train=TrainConfig(seed=seed, steps=steps, lr=lr))
    rec = {"schema": 1, "run_id": cfg.run_id(), "status": status, "config": cfg.to_dict(),
           "n_layer": L, "d_model": d, "n_head": 2, "seed": seed, "params": {"kaplan": 12 * L * d * d},
           "tokens": steps * 32 * 64, "steps": steps, "test_loss": test, "val_loss": val}
    write_json_atomic(run_dir(results, cfg.run_id()) / "record.json", rec)


@pytest.fixture
def dirs(tmp_path):
    rule, half = tmp_path / "rule", tmp_path / "half"
    for s in (0, 1):
        # L2 d32: half wins on validation (1.40 < 1.45) although the rule wins on test
        write(rule, 2, 32, s, 1e-2, 1.45 + 0.01 * s, 1.30 + 0.01 * s)
        write(half, 2, 32, s, 5e-3, 1.40 + 0.01 * s, 1.35 + 0.01 * s)
        # L1 d46: the rule wins (1.50 < 1.52)
        write(rule, 1, 46, s, 8e-3, 1.50 + 0.01 * s, 1.49 + 0.01 * s)
        write(half, 1, 46, s, 4e-3, 1.52 + 0.01 * s, 1.51 + 0.01 * s)
        write(rule, 2, 64, s, 6e-3, 1.30, 1.30)
    write(half, 2, 64, 0, 3e-3, 1.10, 1.10)  # best on validation, but one seed of two: left out
    write(rule, 4, 16, 0, 2e-2, 1.7, 1.7)  # a cell with one lr keeps it
    return rule, half


def test_each_cell_takes_the_lr_with_the_lowest_mean_validation_loss(dirs):
    rule, half = dirs
    t = load_table(rule, tune_lr=[half])
    cells = {(r["n_layer"], r["d_model"]): r for r in t.cells.to_dict("records")}
    # L2 d32 at half the lr: its two seeds' test losses, not the rule's three
    assert cells[(2, 32)]["mean"] == pytest.approx(1.355) and cells[(2, 32)]["seeds"] == [0, 1]
    assert cells[(1, 46)]["mean"] == pytest.approx(1.495) and cells[(1, 46)]["seeds"] == [0, 1]
    assert cells[(4, 16)]["mean"] == pytest.approx(1.7)
    assert cells[(2, 64)]["mean"] == pytest.approx(1.30) and cells[(2, 64)]["seeds"] == [0, 1]
    choice = {(c["n_layer"], c["d_model"]): c for c in t.lr_tuned["cells"]}
    assert choice[(2, 32)] == {"n_layer": 2, "d_model": 32, "lr": 5e-3, "seeds_compared": [0, 1], "lrs_left_out": [],
                               "val_loss_by_lr": {"0.005": pytest.approx(1.405), "0.01": pytest.approx(1.455)}}
    assert choice[(2, 64)]["lr"] == 6e-3 and choice[(2, 64)]["lrs_left_out"] == [3e-3]
    assert choice[(2, 64)]["val_loss_by_lr"] == {"0.006": pytest.approx(1.30)}
    assert choice[(1, 46)]["lr"] == 8e-3 and choice[(4, 16)]["lr"] == 2e-2
    assert t.summary()["lr_tuned"]["dirs"] == [str(half)] and t.summary()["lr_tuned"]["selected_by"] == "val_loss"


def test_a_diverged_lr_loses_and_ties_go_to_the_lower_lr(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, 2, 32, 0, 4e-2, None, None, status="diverged")
    write(b, 2, 32, 0, 2e-2, 1.6, 1.6)
    write(a, 1, 16, 0, 1e-2, 1.8, 1.8)
    write(b, 1, 16, 0, 5e-3, 1.8, 1.9)
    t = load_table(a, tune_lr=[b])
    choice = {(c["n_layer"], c["d_model"]): c for c in t.lr_tuned["cells"]}
    assert choice[(2, 32)]["lr"] == 2e-2 and choice[(2, 32)]["val_loss_by_lr"]["0.04"] is None
    assert choice[(1, 16)]["lr"] == 5e-3
    assert len(t.excluded) == 0  # the diverged run's lr was not chosen: it is not in the table


def test_directories_of_other_protocols_or_the_same_run_twice_are_refused(dirs, tmp_path):
    rule, half = dirs
    with pytest.raises(UserError, match="has two records"):
        load_table(rule, tune_lr=[rule])
    other = tmp_path / "other"
    write(other, 2, 32, 0, 2.5e-3, 1.3, 1.3, steps=2000)
    with pytest.raises(UserError, match="one training protocol"):
        load_table(rule, tune_lr=[other])
    with pytest.raises(UserError, match="not found"):
        load_table(rule, tune_lr=[tmp_path / "missing"])


def test_cli_fit_tune_lr_needs_out_and_stores_its_dirs_by_the_stored_path_rule(dirs, tmp_path, capsys, monkeypatch):
    rule, half = dirs
    assert main(["fit", "--results", str(rule), "--tune-lr", str(half)]) != 0
    err = capsys.readouterr().err
    assert "--tune-lr needs --out" in err and len(err.strip().splitlines()) == 1
    out = tmp_path / "fits" / "tuned.json"  # a folder of its own, outside the records' tree and any checkout
    out.parent.mkdir()  # fit refuses an --out whose directory is missing
    assert main(["fit", "--results", str(rule), "--tune-lr", str(half), "--out", str(out), "--bootstrap", "20"]) == 0
    text = capsys.readouterr().out
    assert "  L2 d32: lr 0.005 of 0.005 (1.4050), 0.01 (1.4550), seeds 0,1\n" in text
    assert "  L2 d64: lr 0.006 of 0.006 (1.3000), seeds 0,1 (0.003: fewer seeds, left out)" in text
    stored = json.loads(out.read_text())["table"]
    # records.stored_path: a directory outside the fit file's tree (and no shared checkout) is absolute
    assert stored["results"] == rule.as_posix() and stored["lr_tuned"]["dirs"] == [half.as_posix()]


def test_bad_tune_directories_are_refused_and_counts_are_named(dirs, tmp_path):
    rule, half = dirs
    (tmp_path / "empty" / "runs" / "ghost").mkdir(parents=True)
    with pytest.raises(UserError, match="holds no training records"):
        load_table(rule, tune_lr=[tmp_path / "empty"])
    for bad in ("", " "):
        with pytest.raises(UserError, match="non-empty path"):
            load_table(rule, tune_lr=[bad])
        with pytest.raises(UserError, match="non-empty path"):
            load_table(bad, tune_lr=[half])
    with pytest.raises(UserError, match=f"seed 7 in {rule}, {half} "):
        load_table(rule, tune_lr=[half], seeds=[7])
    (half / "runs" / "crashed").mkdir()
    t = load_table(rule, tune_lr=[half])
    assert f"{half}/runs/crashed" in t.unfinished
    # read: 4 (L2 d32) + 4 (L1 d46) + 3 (L2 d64) + 1 (L4 d16); kept at the chosen lrs: 2 + 2 + 2 + 1
    assert (t.lr_tuned["n_read"], t.lr_tuned["n_other_lrs"], len(t.runs)) == (12, 5, 7)
