"""`query --fit` on a one-form law carries what the form comparisons that pooled its records say
(fits.form_evidence; issue "Which law?", item 6): the committed law-long fit against the
committed law-pooled comparison, and the rules for which comparisons count, on copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.fits.form_evidence import comparisons_covering

REPO = Path(__file__).resolve().parents[2]
LAW_LONG = "results/law-long/fit.json"
POOLED = "results/law-pooled/fit.json"
COMPARISON = "results/law-pooled/fit.forms.json"
LINEAR = "ln(d_x) = a + b*L"

# docs/guide/query.md shows this line under the law-long law's validation line
LAW_LONG_FORMS_LINE = (
    "forms: results/law-pooled/fit.forms.json pools this fit's records with 3 more results directories; there this "
    "law's form, linear-depth, has Akaike weight 0.10 (others: log-depth 0.46, saturating 0.43; excluded: constant); "
    "no form is preferred; `query --fit results/law-pooled/fit.json` answers under every surviving form")


def _run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_law_long_answer_names_the_pooled_comparison(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rc, text, err = _run(capsys, "query", "--fit", LAW_LONG, "--params", "1M,1.3B")
    assert rc == 0, err
    assert text.splitlines()[2] == LAW_LONG_FORMS_LINE
    rc, out, err = _run(capsys, "query", "--fit", LAW_LONG, "--params", "1M", "--json")
    (e,) = json.loads(out)["form_evidence"]
    cmp = json.loads((REPO / COMPARISON).read_text())
    assert (e["comparison"], e["fit"], e["form"], e["form_excluded"]) == (COMPARISON, POOLED, "linear-depth", False)
    assert e["n_more_directories"] == 3  # law-long-seeds, predict-36, predict-23
    assert e["aic_weights"] == {f["key"]: f["aic_weight"] for f in cmp["forms"]}
    # the committed comparison (docs/results/which-law.md): weights 0.10 / 0.46 / 0.43, constant excluded
    assert e["aic_weights"]["linear-depth"] == pytest.approx(0.1013, abs=5e-4)
    assert e["aic_weights"]["log-depth"] == pytest.approx(0.4642, abs=5e-4)
    assert e["aic_weights"]["saturating"] == pytest.approx(0.4345, abs=5e-4)
    assert e["excluded"] == ["constant"] and e["preferred"] is None


def test_a_fit_that_read_part_of_the_pool_is_covered_too():
    (e,) = comparisons_covering(str(REPO / "results/law-long-seeds/fit-6seeds.json"), LINEAR)
    assert e["n_more_directories"] == 2 and e["form"] == "linear-depth"


def test_the_published_law_and_the_pooled_fit_get_no_forms_line(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    rc, text, _ = _run(capsys, "query", "--params", "1M")
    assert rc == 0 and "forms:" not in text
    # the pooled fit answers under its comparison's forms directly, not through this line
    rc, text, _ = _run(capsys, "query", "--fit", POOLED, "--layers", "4")
    assert rc == 0 and "\nforms:" not in text
    assert comparisons_covering(str(REPO / POOLED), LINEAR) == []


@pytest.fixture
def tree(tmp_path):
    """law-long's fit and the pooled comparison with its fit, copied."""
    for rel in [LAW_LONG, POOLED, COMPARISON]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    return tmp_path


def test_the_copy_reads_as_the_committed_files(tree):
    (e,) = comparisons_covering(str(tree / LAW_LONG), LINEAR)
    assert (e["comparison"], e["form"]) == (COMPARISON, "linear-depth")


def test_a_comparison_that_did_not_read_this_fits_records_does_not_count(tree):
    pooled = tree / POOLED
    d = json.loads(pooled.read_text())
    d["table"]["results"] = "../law-long-seeds"
    pooled.write_text(json.dumps(d))
    assert comparisons_covering(str(tree / LAW_LONG), LINEAR) == []


def test_an_excluded_form_is_said_to_be_excluded(tree, capsys):
    cmp = tree / COMPARISON
    d = json.loads(cmp.read_text())
    for f in d["forms"]:
        if f["key"] == "linear-depth":
            f["excluded"] = True
    cmp.write_text(json.dumps(d))
    rc, text, err = _run(capsys, "query", "--fit", str(tree / LAW_LONG), "--params", "1M")
    assert rc == 0, err
    line = text.splitlines()[2]
    assert "there this law's form, linear-depth, is excluded" in line
    assert "excluded: constant, linear-depth" in line


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": "something else", "forms": []}), "[]"])
def test_unreadable_comparisons_are_not_evidence(tree, capsys, content):
    (tree / COMPARISON).write_text(content)
    assert comparisons_covering(str(tree / LAW_LONG), LINEAR) == []
    rc, text, err = _run(capsys, "query", "--fit", str(tree / LAW_LONG), "--params", "1M")
    assert rc == 0, err
    assert "forms:" not in text


def test_a_comparison_without_its_fit_does_not_count(tree):
    (tree / POOLED).unlink()
    assert comparisons_covering(str(tree / LAW_LONG), LINEAR) == []
