"""The one rule of paths stored in result files (docs/guide/sweeps.md, "Paths in result files";
records.stored_path): relative to the file's folder when in its tree or git checkout, else
absolute; readers (records.resolve_stored) join a relative path to the file's folder, so files
written before the rule (every path relative, even ../../..) read as they did (issue 40)."""

import json
import os
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.fits.synthetic import write_synthetic
from depthwidth.records import resolve_stored, stored_path

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path):
    """A git checkout (a `.git` folder) with results/a holding a small synthetic sweep."""
    top = tmp_path / "clone"
    (top / ".git").mkdir(parents=True)
    write_synthetic(top / "results" / "a", depths=(2, 4), n_seeds=2, per_decade=3)
    return top


def test_the_rule(checkout, tmp_path):
    a, elsewhere = checkout / "results" / "a", tmp_path / "elsewhere"
    assert stored_path(a, a) == "."
    assert stored_path(a / "figures" / "fig1.png", a) == "figures/fig1.png"
    # a neighbour in the same checkout: relative, so a committed file reads alike on every clone
    assert stored_path(a, checkout / "results" / "pooled") == "../a"
    # outside the file's tree and checkout: absolute, not a path from an unrelated folder
    assert stored_path(a, elsewhere) == os.path.abspath(a)
    assert stored_path(elsewhere / "x", checkout / "results") == os.path.abspath(elsewhere / "x")
    # another checkout is another tree
    (tmp_path / "other" / ".git").mkdir(parents=True)
    assert stored_path(a, tmp_path / "other" / "results") == os.path.abspath(a)
    # with no checkout at all, only the file's own tree is relative
    assert stored_path(elsewhere / "r" / "x", elsewhere / "r") == "x"
    assert stored_path(elsewhere / "s", elsewhere / "r") == os.path.abspath(elsewhere / "s")
    assert stored_path("gs://b/r", elsewhere) == "gs://b/r" and stored_path(a, "gs://b/r") == str(a)


def test_resolve_stored_reads_both_forms_and_old_files(checkout, tmp_path):
    a = checkout / "results" / "a"
    fit = tmp_path / "elsewhere" / "fits" / "fit.json"
    assert resolve_stored(os.path.abspath(a), fit) == os.path.abspath(a)
    assert Path(resolve_stored("../a", checkout / "results" / "pooled" / "fit.json")).resolve() == a.resolve()
    # a file written before the rule: the path from its folder, however many ..
    old = os.path.relpath(a, fit.parent)
    assert old.startswith("../..") and Path(resolve_stored(old, fit)).resolve() == a.resolve()
    assert resolve_stored("gs://b/r", fit) == "gs://b/r"


def test_fit_out_elsewhere_stores_the_results_absolute_and_the_figures_find_them(checkout, tmp_path, capsys):
    a = checkout / "results" / "a"
    out = tmp_path / "x" / "fit.json"
    out.parent.mkdir()
    assert main(["fit", "--results", str(a), "--out", str(out), "--bootstrap", "40"]) == 0
    assert json.loads(out.read_text())["table"]["results"] == os.path.abspath(a)
    assert main(["fit", "--results", str(a), "--out", str(a / "fit.json"), "--bootstrap", "40"]) == 0
    assert json.loads((a / "fit.json").read_text())["table"]["results"] == "."
    capsys.readouterr()
    from depthwidth.paper_figs.inputs import load_inputs

    for fit in (out, a / "fit.json"):  # the fit names the directory it was made from: no note
        assert not [n for n in load_inputs(a, fit).notes if "was made from" in n]


def test_committed_fit_files_name_existing_directories_by_the_rule():
    fits = sorted(REPO.glob("results/*/fit*.json"))
    assert fits
    for f in fits:
        table = json.loads(f.read_text()).get("table") or {}
        for d in [table.get("results"), *(table.get("also") or [])]:
            if d:
                assert not Path(d).is_absolute(), (f, d)  # a committed file names no machine's path
                assert Path(resolve_stored(d, f)).is_dir(), (f, d)
                assert stored_path(resolve_stored(d, f), f.parent) == d, (f, d)  # a refit stores the same
