"""Results table from hand-written records: means/std by hand, exclusions, unfinished runs."""

import math

import pytest

from depthwidth.config import ModelConfig, RunConfig, TrainConfig
from depthwidth.errors import UserError
from depthwidth.fits.table import load_table
from depthwidth.records import run_dir, write_json_atomic


def write(results, L, d, seed, loss, status="finished", steps=1000, scan_unroll=1):
    cfg = RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=2, vocab_size=65, seq_len=64,
                                      scan_unroll=scan_unroll),
                    train=TrainConfig(seed=seed, steps=steps))
    rec = {"schema": 1, "run_id": cfg.run_id(), "status": status, "config": cfg.to_dict(),
           "n_layer": L, "d_model": d, "n_head": 2, "seed": seed,
           "params": {"kaplan": 12 * L * d * d, "non_embedding": L * (12 * d * d + 13 * d) + 2 * d,
                      "embedding": 65 * d + 64 * d},
           "tokens": 1000 * 32 * 64, "steps": steps, "test_loss": loss}
    write_json_atomic(run_dir(results, cfg.run_id()) / "record.json", rec)
    return cfg.run_id()


def test_cells_by_hand_and_exclusions(tmp_path):
    for s, y in enumerate([2.0, 2.2, 2.4]):
        write(tmp_path, 2, 64, s, y)
    write(tmp_path, 2, 128, 0, 1.5)
    div = write(tmp_path, 2, 64, 7, None, status="diverged")
    nul = write(tmp_path, 4, 64, 1, None)  # finished but no test loss
    (run_dir(tmp_path, "L9-d9-h2-s0-crashed")).mkdir(parents=True)  # claimed, never finished

    t = load_table(tmp_path)
    c = t.cells.set_index(["n_layer", "d_model"])
    # (2.0 + 2.2 + 2.4)/3 = 2.2; deviations -0.2, 0, 0.2 -> sample var 0.08/2 = 0.04 -> std 0.2;
    # sem = 0.2/sqrt(3).
    assert c.loc[(2, 64), "mean"] == pytest.approx(2.2)
    assert c.loc[(2, 64), "std"] == pytest.approx(0.2)
    assert c.loc[(2, 64), "sem"] == pytest.approx(0.2 / math.sqrt(3))
    assert c.loc[(2, 64), "n_seeds"] == 3
    assert c.loc[(2, 64), "N"] == 12 * 2 * 64**2
    assert c.loc[(2, 64), "N_exact"] == 2 * (12 * 64**2 + 13 * 64) + 2 * 64
    assert c.loc[(2, 64), "ln_N"] == pytest.approx(math.log(12 * 2 * 64**2))
    assert math.isnan(c.loc[(2, 128), "std"])  # one seed: no spread, not zero
    assert (4, 64) not in c.index  # its only run has no test loss
    reasons = dict(zip(t.excluded["run_id"], t.excluded["reason"]))
    assert reasons == {div: "diverged", nul: "no test_loss"}
    assert t.unfinished == ["L9-d9-h2-s0-crashed"]
    assert sorted(t.losses[(2, 64)]) == [2.0, 2.2, 2.4]
    s = t.summary()
    assert (s["n_records"], s["n_used"], s["n_cells"]) == (6, 4, 2)
    assert {e["reason"] for e in s["excluded"]} == {"diverged", "no test_loss"}


def test_mixed_configurations_in_one_cell_raise(tmp_path):
    write(tmp_path, 2, 64, 0, 2.0, steps=1000)
    write(tmp_path, 2, 64, 1, 2.1, steps=3000)
    with pytest.raises(UserError, match="mixes runs with different configurations"):
        load_table(tmp_path)


def test_a_run_folder_copied_under_another_name_is_named_once(tmp_path):
    """It was "several records with the same seed (X, X)": the one id, twice."""
    import shutil

    rid = write(tmp_path, 2, 64, 0, 2.0)
    write(tmp_path, 2, 64, 1, 2.1)
    shutil.copytree(run_dir(tmp_path, rid), run_dir(tmp_path, "copy"))
    with pytest.raises(UserError, match=f"^run {rid} is recorded more than once"):
        load_table(tmp_path)


def test_seeds_differing_only_in_performance_fields_share_a_cell(tmp_path):
    # model.scan_unroll changes speed, not the trained model (it is not in the run id either).
    write(tmp_path, 2, 64, 0, 2.0, scan_unroll=1)
    write(tmp_path, 2, 64, 1, 2.2, scan_unroll=8)
    c = load_table(tmp_path).cells.set_index(["n_layer", "d_model"])
    assert c.loc[(2, 64), "n_seeds"] == 2 and c.loc[(2, 64), "mean"] == pytest.approx(2.1)


def test_empty_and_missing_results(tmp_path):
    with pytest.raises(UserError, match="results directory not found"):
        load_table(tmp_path / "nope")
    write(tmp_path, 2, 64, 0, None, status="diverged")
    with pytest.raises(UserError, match="no usable runs"):
        load_table(tmp_path)


def test_records_of_other_kinds_are_set_aside(tmp_path):
    # A non-training experiment stored in the same directory: read and validated like any record,
    # listed by kind, never a row of the table (so never in the law).
    from depthwidth.records import Record, write_record

    ids = {write(tmp_path, 2, 64, s, y) for s, y in enumerate([2.0, 2.2])}
    lat = Record(run_id="latency-L2-d64", status="measured", config={"model": {"n_layer": 2, "d_model": 64}},
                 kind="latency", n_layer=2, d_model=64, extra={"latency_s": 0.01})
    write_record(tmp_path, lat)
    t = load_table(tmp_path)
    assert t.other_kinds == {"latency-L2-d64": "latency"}
    assert set(t.runs["run_id"]) == ids and t.cells["n_seeds"].tolist() == [2]
    assert t.unfinished == [] and t.summary()["n_records"] == 2


def test_a_finished_record_with_an_exploded_loss_is_excluded_as_diverged(tmp_path):
    # Issue 10 item 5: a record written "finished" with test loss 2,392,707 nats/token entered
    # the fit. Above 2 ln V (2 ln 65 = 8.349) it is excluded, with the reason.
    import json

    for s in range(2):
        write(tmp_path, 2, 64, s, 2.0)
    bad = write(tmp_path, 2, 64, 5, 2392707.0)
    p = run_dir(tmp_path, bad) / "record.json"
    rec = json.loads(p.read_text())
    write_json_atomic(p, {**rec, "vocab_size": 65})
    t = load_table(tmp_path)
    reasons = dict(zip(t.excluded["run_id"], t.excluded["reason"]))
    assert reasons[bad].startswith("diverged: test_loss 2.393e+06") and "8.349" in reasons[bad]
    assert sorted(t.losses[(2, 64)]) == [2.0, 2.0]


def test_a_record_with_zero_params_is_excluded_with_its_reason(tmp_path):
    # Issue 10: `fit` / `figs` on a record whose N is 0 died with "math domain error"; issue 24:
    # one validator for every record, so it is excluded with the reason, like any impossible one.
    import json

    for s in range(2):
        write(tmp_path, 2, 64, s, 2.0)
    bad = write(tmp_path, 2, 128, 0, 2.0)
    p = run_dir(tmp_path, bad) / "record.json"
    rec = json.loads(p.read_text())
    write_json_atomic(p, {**rec, "params": {**rec["params"], "kaplan": 0}})
    t = load_table(tmp_path)
    (reason,) = t.excluded.loc[t.excluded["run_id"] == bad, "reason"]
    assert reason == "params.kaplan is not a positive integer (0)"
    assert t.cells[["n_layer", "d_model"]].values.tolist() == [[2, 64]]


def _edit(results, run_id, **fields):
    import json

    p = run_dir(results, run_id) / "record.json"
    write_json_atomic(p, {**json.loads(p.read_text()), **fields})


@pytest.mark.parametrize("fields, reason", [
    ({"test_loss": -1.5}, "test_loss -1.5 is not positive (a cross-entropy on held-out text is > 0 nats/token)"),
    ({"test_loss": 0}, "test_loss 0 is not positive (a cross-entropy on held-out text is > 0 nats/token)"),
    ({"test_loss": "2.0"}, "test_loss is not a number ('2.0')"),
    ({"val_loss": -0.1}, "val_loss -0.1 is not positive (a cross-entropy on held-out text is > 0 nats/token)"),
    ({"params": "12288"}, "params is not an object of parameter counts ('12288')"),
    ({"params": {"kaplan": 98304.0}}, "params.kaplan is not a positive integer (98304.0)"),
    ({"n_head": True}, "n_head is not a positive integer (True)"),
    ({"tokens": -5}, "tokens is not a positive integer (-5)"),
    ({"test_loss_chunks": [-2.1, -2.3]}, "test_loss_chunks[0] -2.1 is not positive (a cross-entropy on held-out "
                                         "text is > 0 nats/token)"),
    # the chunks of another run: finite and positive, but their mean is not this record's loss
    ({"test_loss_chunks": [2.5, 2.7], "test_sequences": 64}, "test_loss_chunks average 2.6, not test_loss 2.2 "
                                                             "(they are the same evaluation, within 0.0001)"),
    ({"test_loss_chunks": [2.5, 2.7]}, "test_loss_chunks average 2.6, not test_loss 2.2 (they are the same "
                                       "evaluation, within 0.01)"),
])
def test_an_impossible_record_is_excluded_with_its_reason(tmp_path, fields, reason):
    # Issue 24: test_loss -1.5 or 0, negated chunks and params as a string were all used.
    for s in range(2):
        write(tmp_path, 2, 64, s, 2.0)
    bad = write(tmp_path, 2, 64, 2, 2.2)
    _edit(tmp_path, bad, **fields)
    t = load_table(tmp_path)
    assert dict(zip(t.excluded["run_id"], t.excluded["reason"])) == {bad: reason}
    assert t.losses[(2, 64)] == [2.0, 2.0]


def test_chunks_that_average_to_the_test_loss_are_kept(tmp_path):
    # 5 sequences in 2 chunks hold 2 and 3 of them: the weighted mean (2·2.0 + 3·2.5)/5 = 2.3 is
    # the loss (the plain mean, 2.25, is 2% off: the weights come from test_sequences).
    for s in range(2):
        write(tmp_path, 2, 64, s, 2.0)
    ok = write(tmp_path, 2, 64, 2, 2.3)
    _edit(tmp_path, ok, test_loss_chunks=[2.0, 2.5], test_sequences=5)
    t = load_table(tmp_path)
    assert t.excluded.empty and sorted(t.losses[(2, 64)]) == [2.0, 2.0, 2.3]


def _write_protocol(results, L, d, seed, loss, steps=2000, batch_size=32, lr=3e-3):
    cfg = RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=2, vocab_size=65, seq_len=64),
                    train=TrainConfig(seed=seed, steps=steps, batch_size=batch_size, lr=lr, warmup_steps=10))
    rec = {"schema": 1, "run_id": cfg.run_id(), "status": "finished", "config": cfg.to_dict(),
           "n_layer": L, "d_model": d, "n_head": 2, "seed": seed, "params": {"kaplan": 12 * L * d * d},
           "tokens": steps * batch_size * 64, "steps": steps, "test_loss": loss}
    write_json_atomic(run_dir(results, cfg.run_id()) / "record.json", rec)
    return cfg.run_id()


def test_two_protocols_without_a_shared_cell_are_refused(tmp_path):
    # Issue 24: results/cpu plus the smoke preset's records of other cells (100 steps, B=16,
    # lr 1e-2) were fitted together, exit 0, no warning.
    long_ids = [_write_protocol(tmp_path, L, d, s, 2.0) for L, d in ((1, 46), (2, 32)) for s in (0, 1)]
    short = _write_protocol(tmp_path, 1, 16, 0, 2.5, steps=100, batch_size=16, lr=1e-2)
    with pytest.raises(UserError) as e:
        load_table(tmp_path)
    assert str(e.value) == (f"the records of {tmp_path} mix 2 training protocols (they differ in train.batch_size): "
                            f"4 like {sorted(long_ids)[0]} (2000 steps); 1 like {short} (100 steps); "
                            "fit one protocol at a time")


def test_steps_that_differ_between_cells_are_named_in_the_fits_warnings(tmp_path):
    # The same protocol otherwise (a preset with grid.scale_steps, or two sweeps of different
    # lengths): used, and the fit says so.
    from depthwidth.fits.lawfit import build_fit

    a = [_write_protocol(tmp_path, 1, 46, s, 2.0) for s in (0, 1)]
    b = [_write_protocol(tmp_path, 2, 32, s, 2.1, steps=100) for s in (0, 1)]
    t = load_table(tmp_path)
    assert t.excluded.empty and len(t.cells) == 2
    assert t.warnings == [f"the runs were trained for different numbers of steps: 100 (1 cells, e.g. {sorted(b)[0]}), "
                          f"2000 (1 cells, e.g. {sorted(a)[0]}); right only for a preset that scales steps with "
                          "size (grid.scale_steps)"]
    assert t.warnings[0] in build_fit(t, bootstrap=10)["warnings"]


def test_lrs_that_follow_one_width_rule_give_no_warning(tmp_path):
    # lr = 0.4/d (a rule of power 1), and depth 2's cells at half that (a per-depth override)
    for L, d, lr in ((1, 32, 0.4 / 32), (1, 64, 0.4 / 64), (2, 32, 0.2 / 32), (2, 64, 0.2 / 64)):
        _write_protocol(tmp_path, L, d, 0, 2.0, lr=float(f"{lr:.6g}"))
    assert load_table(tmp_path).warnings == []


def test_lrs_of_two_rules_mixed_at_different_cells_are_named(tmp_path):
    # Depth 1's cells follow lr = 0.4/d, depth 2's a constant lr: no cell has both, every other
    # field agrees, so the protocol check passes; the lr rule check cannot fit one power p.
    for L, d, lr in ((1, 32, 0.0125), (1, 64, 0.00625), (2, 32, 3e-3), (2, 64, 3e-3)):
        _write_protocol(tmp_path, L, d, 0, 2.0, lr=lr)
    (w,) = load_table(tmp_path).warnings
    # slopes 1 and 0 in ln d at the same two widths: least squares takes p = 0.5, and every
    # residual is ln(2)/4 in ln lr, a factor 2^(1/4) = 1.19; the first row, L1 d32, is named
    assert w == ("the learning rates follow no single width rule lr = c_L * d_model^-p (L1 d32 lr 0.0125 is 1.19x off "
                 "the best one, p = 0.5): records of sweeps with different lr rules mixed at different cells?")


def test_fit_prints_an_impossible_record_and_its_reason(tmp_path, capsys):
    # Issue 24: test_loss -1.5 gave exit 0 and "0 excluded", and the transition moved.
    from depthwidth.cli import main

    for L in (1, 2):
        for s in range(2):
            write(tmp_path, L, 64, s, 2.0 + 0.1 * L)
    bad = write(tmp_path, 1, 64, 2, 2.1)
    _edit(tmp_path, bad, test_loss=-1.5)
    assert main(["fit", "--results", str(tmp_path), "--out", str(tmp_path / "f.json"), "--bootstrap", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("5 records, 4 used in 2 (depth, width) cells, 1 excluded, 0 unfinished")
    assert lines[1] == f"  excluded {bad}: test_loss -1.5 is not positive (a cross-entropy on held-out text is > 0 nats/token)"
