"""Records of several results directories in one table (load_table(also=...), fit --also): how
extra seeds, trained into a directory of their own, are fitted with the sweep they extend."""

import json
import shutil
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.fits.synthetic import write_synthetic
from depthwidth.fits.table import load_table

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def split(tmp_path):
    """One synthetic 4-seed sweep (``whole``) and the same records split by seed: 0,1 in ``a``,
    2,3 in ``b``."""
    whole, a, b = tmp_path / "whole", tmp_path / "a", tmp_path / "b"
    write_synthetic(whole, depths=(2, 4, 8), n_seeds=4, per_decade=3)
    for rec in sorted((whole / "runs").glob("*/record.json")):
        seed = json.loads(rec.read_text())["seed"]
        dest = (a if seed < 2 else b) / "runs" / rec.parent.name
        shutil.copytree(rec.parent, dest)
    return whole, a, b


def test_two_directories_give_the_table_of_one_that_holds_both(split):
    whole, a, b = split
    t, w = load_table(a, also=[b]), load_table(whole)
    assert t.losses == w.losses and list(t.cells["seeds"]) == list(w.cells["seeds"])
    assert (t.cells["n_seeds"] == 4).all() and t.unfinished == [] and t.warnings == []
    assert t.summary()["also"] == [str(b)] and "also" not in load_table(a).summary()
    # and --seeds reads across the directories
    assert load_table(a, also=[b], seeds=[1, 2]).losses == load_table(whole, seeds=[1, 2]).losses


def test_fit_also_is_the_fit_of_the_whole_and_figs_draw_it(split, tmp_path, capsys):
    whole, a, b = split
    common = ["--bootstrap", "60", "--json"]
    assert main(["fit", "--results", str(whole), "--out", str(tmp_path / "w.json"), *common]) == 0
    w = json.loads(capsys.readouterr().out)
    assert main(["fit", "--results", str(a), "--also", str(b), "--out", str(tmp_path / "ab.json"), *common]) == 0
    ab = json.loads(capsys.readouterr().out)
    assert ab["status"] == "ok" and ab["law"]["b"] == w["law"]["b"] and ab["law"]["a"] == w["law"]["a"]
    assert [p["N_star"] for p in ab["points"]] == [p["N_star"] for p in w["points"]]
    stored = json.loads((tmp_path / "ab.json").read_text())["table"]
    assert stored["results"] == "a" and stored["also"] == ["b"]  # relative to the fit file's folder
    # the text names both directories
    assert main(["fit", "--results", str(a), "--also", str(b), "--out", str(tmp_path / "ab.json"),
                 "--bootstrap", "60"]) == 0
    assert f"results {a} with {b}: {4 * len(load_table(whole).cells)} records" in capsys.readouterr().out
    # figs with that fit read b's records too: fig6 has a curve for each of the four seeds
    from depthwidth.paper_figs.inputs import load_inputs

    assert load_inputs(a, tmp_path / "ab.json").table.losses == load_table(whole).losses
    assert main(["figs", "--results", str(a), "--fit", str(tmp_path / "ab.json"), "--out", str(tmp_path / "f")]) == 0


@pytest.mark.parametrize("case, message", [
    ("same", "is in both"),
    ("empty", "holds no training records"),
    ("missing", "not found"),
    ("tune", "--also and --tune-lr cannot be combined"),
    ("protocol", "mix 2 training protocols"),
])
def test_bad_also_directories_are_refused_in_one_line(split, tmp_path, case, message):
    _, a, b = split
    kwargs = {"also": [b]}
    if case == "same":
        kwargs = {"also": [a]}
    elif case == "empty":
        (tmp_path / "e" / "runs").mkdir(parents=True)
        kwargs = {"also": [tmp_path / "e"]}
    elif case == "missing":
        kwargs = {"also": [tmp_path / "nowhere"]}
    elif case == "tune":
        kwargs = {"also": [b], "tune_lr": [b]}
    elif case == "protocol":  # other seeds, but trained with another vocabulary: not more of the same sweep
        write_synthetic(tmp_path / "v", depths=(2, 4, 8), n_seeds=1, per_decade=3, vocab_size=65)
        kwargs = {"also": [tmp_path / "v"]}
    with pytest.raises(UserError, match=message) as e:
        load_table(a, **kwargs)
    assert "\n" not in str(e.value)


def test_a_mix_of_protocols_names_every_directory_and_the_steps_first(split, tmp_path):
    """law-long --also law-short: the message names both directories, and the steps (8,000 vs
    2,000 there) before any other field, although steps may differ per shape within a protocol."""
    _, a, _ = split
    write_synthetic(tmp_path / "short", depths=(2, 4, 8), n_seeds=1, per_decade=3, vocab_size=65)
    for path in (tmp_path / "short" / "runs").glob("*/record.json"):  # a shorter sweep of another vocabulary
        rec = json.loads(path.read_text())
        rec["steps"] = rec["config"]["train"]["steps"] = 500
        path.write_text(json.dumps(rec))
    with pytest.raises(UserError) as e:
        load_table(a, also=[tmp_path / "short"])
    msg = str(e.value)
    assert msg.startswith(f"the records of {a} and {tmp_path / 'short'} mix 2 training protocols")
    assert " steps)" in msg and "\n" not in msg


def test_a_repeated_also_adds_directories_not_replaces_them(split, tmp_path, capsys):
    """--also A --also B reads both, as --also A B does (a repeat once dropped A silently)."""
    whole, a, b = split
    c = tmp_path / "c"
    for rec in sorted((b / "runs").glob("*/record.json")):  # split b in two by seed
        if json.loads(rec.read_text())["seed"] == 3:
            shutil.move(str(rec.parent), str(c / "runs" / rec.parent.name))
    common = ["--bootstrap", "40", "--json", "--out", str(tmp_path / "f.json")]
    assert main(["fit", "--results", str(a), "--also", str(b), "--also", str(c), *common]) == 0
    repeated = json.loads(capsys.readouterr().out)
    assert main(["fit", "--results", str(a), "--also", str(b), str(c), *common]) == 0
    assert repeated == json.loads(capsys.readouterr().out)
    assert repeated["table"]["n_used"] == load_table(whole).summary()["n_used"]


def test_fit_also_needs_out_and_bad_input_exits_2(split, capsys):
    _, a, b = split
    assert main(["fit", "--results", str(a), "--also", str(b)]) == 2  # would overwrite a's fit.json
    assert "--also needs --out" in capsys.readouterr().err
    assert not (a / "fit.json").exists()


def test_figs_refuse_a_fit_whose_also_is_not_a_list(split, tmp_path):
    from depthwidth.paper_figs.inputs import load_inputs

    _, a, b = split
    assert main(["fit", "--results", str(a), "--also", str(b), "--out", str(tmp_path / "ab.json"),
                 "--bootstrap", "50"]) == 0
    fit = json.loads((tmp_path / "ab.json").read_text())
    fit["table"]["also"] = "b"
    (tmp_path / "bad.json").write_text(json.dumps(fit))
    with pytest.raises(UserError, match="table.also must be a list"):
        load_inputs(a, tmp_path / "bad.json")


def test_the_extra_seeds_preset_is_law_long_with_other_seeds():
    """law-long-seeds trains every cell of the committed law-long records, with the same
    configuration up to the seed, and only seeds law-long does not have: so `fit --results
    law-long-seeds --also law-long` reads one protocol and no run twice."""
    from depthwidth.config import from_dict
    from depthwidth.experiments.presets import load_preset

    preset = load_preset("law-long-seeds")

    def key(ident):
        ident = json.loads(json.dumps(ident))
        return json.dumps({**ident, "train": {k: v for k, v in ident["train"].items() if k != "seed"}}, sort_keys=True)

    mine = {}
    for run in preset.runs:
        mine.setdefault((run.model.n_layer, run.model.d_model), set()).add(key(run.identity()))
    records = [json.loads(p.read_text()) for p in sorted((REPO / "results/law-long/runs").glob("*/record.json"))]
    assert len(records) == 45
    theirs = {}
    for rec in records:
        theirs.setdefault((rec["n_layer"], rec["d_model"]), set()).add(key(from_dict(rec["config"]).identity()))
    assert mine == theirs  # the same 15 cells, one configuration each, equal up to the seed
    assert {r.train.seed for r in preset.runs} == {3, 4, 5} and {rec["seed"] for rec in records} == {0, 1, 2}
    assert len(preset.runs) == 45
