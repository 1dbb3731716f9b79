"""A law's out-of-sample record in `depthwidth query` (fits.validation; issue 43): the committed
prediction from results/law-long/fit.json and its committed verdicts, the published law's line,
a fit with no prediction, the verdict files' regeneration, and bad records (one line, exit 2)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.fits import predict as P
from depthwidth.fits.validation import law_validation, predictions_dir

REPO = Path(__file__).resolve().parents[2]
LAW_LONG = REPO / "results/law-long/fit.json"
PRED = "results/predictions/law-long.json"
VERDICTS = {"predict-36": "results/predictions/verdicts/law-long.predict-36.json",
            "predict-23": "results/predictions/verdicts/law-long.predict-23.json"}

# The line query prints under the law line for the law-long fit (docs/guide/query.md shows it).
LAW_LONG_LINE = (
    "validation: pre-registered (3,6) failed, measured 182K vs predicted 118K [79.3K, 175K], z = +2.11; "
    "(2,3) failed, measured 159K vs predicted 35.1K [30.2K, 40.6K], z = +6.09 (conservative z +1.80: the measured "
    "bootstrap is far from normal) (results/predictions/law-long.json)")


def _run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_law_long_names_its_failed_predictions_in_text_and_json(capsys):
    rc, text, err = _run(capsys, "query", "--fit", str(LAW_LONG), "--params", "1.3B")
    assert rc == 0, err
    lines = text.splitlines()
    assert lines[0].startswith(f"law {LAW_LONG}: ln d_x = 3.09 + 0.1844*L")
    assert lines[1] == LAW_LONG_LINE
    rc, out, err = _run(capsys, "query", "--fit", str(LAW_LONG), "--params", "1.3B", "--json")
    v = json.loads(out)["validation"]
    assert v["status"] == "failed"
    assert v["fit_sha256"] == json.loads((REPO / PRED).read_text())["fit"]["sha256"]
    assert v["text"] == LAW_LONG_LINE
    by_pair = {tuple(e["pair"]): e for e in v["predictions"]}
    assert set(by_pair) == {(3, 6), (2, 3)}
    e36, e23 = by_pair[(3, 6)], by_pair[(2, 3)]
    # the committed numbers (docs/results/law-predicts.md): (3,6) 182K [170K, 190K] vs 118K [79.3K, 175K]
    assert (e36["status"], e36["prediction"], e36["measured_fit"], e36["verdict_file"]) == (
        "failed", PRED, "results/predict-36/fit.json", VERDICTS["predict-36"])
    assert e36["predicted_n_star"] == pytest.approx(117626.48, rel=1e-7)
    assert e36["predicted_ci95"] == pytest.approx([79279.87, 174520.84], rel=1e-7)
    assert e36["measured_n_star"] == pytest.approx(181641.72, rel=1e-7)
    assert e36["measured_ci95"][0] == pytest.approx(169843.94, rel=1e-7)
    assert e36["z"] == pytest.approx(2.11, abs=0.005) and e36["conservative_z"] is False
    assert (e23["status"], e23["measured_fit"]) == ("failed", "results/predict-23/fit.json")
    assert e23["predicted_n_star"] == pytest.approx(35054.56, rel=1e-7)
    assert e23["measured_n_star"] == pytest.approx(159e3, rel=0.005)
    assert e23["z"] == pytest.approx(6.09, abs=0.005)
    assert e23["z_ci95"] == pytest.approx(1.80, abs=0.005) and e23["conservative_z"] is True


@pytest.mark.parametrize("measured", ["predict-36", "predict-23"])
def test_the_verdicts_query_reads_are_the_commands_verdicts(measured):
    # Each committed verdict file holds what fits.predict.verdict computes now from the committed
    # prediction and measured fit: query's numbers are the registered rule's, not copies.
    pred = P.read_prediction(str(REPO / PRED))
    fit = json.loads((REPO / f"results/{measured}/fit.json").read_text())
    stored = json.loads((REPO / VERDICTS[measured]).read_text())
    assert stored["verdicts"] == json.loads(json.dumps(P.verdict(pred, fit)))
    assert stored["prediction"] == {"path": PRED, "sha256": hashlib.sha256((REPO / PRED).read_bytes()).hexdigest(),
                                    "fit_sha256": pred["fit"]["sha256"]}


@pytest.mark.parametrize("measured", ["predict-36", "predict-23"])
def test_a_verdict_file_is_regenerated_byte_for_byte(measured, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)  # the paths inside are relative to the repository root
    out = tmp_path / "v.json"
    rc, text, err = _run(capsys, "predict", "--fit", f"results/{measured}/fit.json", "--check", PRED, "--out", str(out))
    assert rc == 0, err
    assert text.splitlines()[-1] == f"wrote {out}"
    assert out.read_bytes() == (REPO / VERDICTS[measured]).read_bytes()


def test_the_published_law_says_it_is_untested_here(capsys):
    rc, text, err = _run(capsys, "query", "--params", "1.3B")
    assert rc == 0, err
    line = ("validation: the paper's own fit at depths 6-48 (Levine et al. 2020); "
            "not tested by this project at that scale")
    assert text.splitlines()[1] == line
    rc, out, err = _run(capsys, "query", "--params", "1.3B", "--json")
    v = json.loads(out)["validation"]
    assert (v["status"], v["text"], v["predictions"], v["fit_sha256"]) == ("published", line, [], None)


def test_a_fit_without_predictions_is_not_tested_out_of_sample(capsys):
    rc, text, err = _run(capsys, "query", "--fit", str(REPO / "results/law/fit.json"), "--layers", "4")
    assert rc == 0, err
    assert text.splitlines()[1] == ("validation: not tested out of sample (no pre-registered prediction from this "
                                    "fit in results/predictions)")
    rc, out, _ = _run(capsys, "query", "--fit", str(REPO / "results/law/fit.json"), "--layers", "4", "--json")
    assert json.loads(out)["validation"]["status"] == "not tested out of sample"


def test_the_predictions_are_found_beside_the_fits_results_directory():
    assert predictions_dir(LAW_LONG) == REPO / "results/predictions"


# ---------------------------------------------------------------- bad records


@pytest.fixture
def tree(tmp_path):
    """A copy of the committed law-long fit, its prediction, the measured fits and the verdicts."""
    for rel in ["results/law-long/fit.json", PRED, "results/predict-36/fit.json", "results/predict-23/fit.json",
                *VERDICTS.values()]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    return tmp_path


def _edit(path: Path, **changes) -> None:
    d = json.loads(path.read_text())
    for dotted, value in changes.items():
        *head, last = dotted.split("__")
        node = d
        for k in head:
            node = node[k]
        node[last] = value
    path.write_text(json.dumps(d, indent=1))


def _one_line_exit_2(capsys, tree, *extra) -> str:
    rc, out, err = _run(capsys, "query", "--fit", str(tree / "results/law-long/fit.json"), "--params", "1.3B", *extra)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("depthwidth: error: ")
    return err


def test_the_copy_reads_as_the_committed_files(tree, capsys):
    rc, text, err = _run(capsys, "query", "--fit", str(tree / "results/law-long/fit.json"), "--params", "1.3B")
    assert rc == 0, err
    assert text.splitlines()[1] == LAW_LONG_LINE


def test_a_fit_changed_after_its_prediction(tree, capsys):
    fit = tree / "results/law-long/fit.json"
    fit.write_text(fit.read_text() + "\n")  # the same law, other bytes: no longer the registered file
    err = _one_line_exit_2(capsys, tree)
    assert err.startswith("depthwidth: error: results/predictions/law-long.json was pre-registered from "
                          "results/law-long/fit.json with sha256 b8a5ebc6216b, but that file now has sha256 ")
    assert "the fit changed after its prediction was made" in err


def test_a_verdict_whose_prediction_names_another_fit(tree, capsys):
    # The verdict claims its prediction came from this fit, but the prediction names another.
    sha = json.loads((tree / PRED).read_text())["fit"]["sha256"]
    pred = tree / "results/predictions/other.json"
    shutil.copy(tree / PRED, pred)
    _edit(pred, fit__sha256="0" * 64, fit__path="results/other/fit.json")
    v = tree / VERDICTS["predict-36"]
    _edit(v, prediction__path="results/predictions/other.json",
          prediction__sha256=hashlib.sha256(pred.read_bytes()).hexdigest(), prediction__fit_sha256=sha)
    err = _one_line_exit_2(capsys, tree)
    assert f"says its prediction was made from the fit with sha256 {sha[:12]}" in err
    assert "names the fit results/other/fit.json with sha256 000000000000" in err


def test_a_prediction_changed_after_its_verdict(tree, capsys):
    _edit(tree / PRED, created_at="2026-12-04T00:00:00+00:00")
    err = _one_line_exit_2(capsys, tree)
    assert "law-long.predict-23.json: its prediction results/predictions/law-long.json is missing or has changed" in err
    assert ("rerun depthwidth predict --fit results/predict-23/fit.json --check results/predictions/law-long.json "
            "--out results/predictions/verdicts/law-long.predict-23.json") in err


def test_a_measured_fit_changed_after_its_verdict(tree, capsys):
    m = tree / "results/predict-36/fit.json"
    m.write_text(m.read_text() + "\n")
    err = _one_line_exit_2(capsys, tree)
    assert "law-long.predict-36.json: its measured fit results/predict-36/fit.json has changed since the verdict" in err


def test_a_missing_measured_fit(tree, capsys):
    (tree / "results/predict-23/fit.json").unlink()
    err = _one_line_exit_2(capsys, tree)
    assert "its measured fit results/predict-23/fit.json cannot be read under" in err


@pytest.mark.parametrize("content, message", [
    ("{", "cannot read verdict file"),
    ('{"format": "depthwidth-verdict", "version": 1}', "not a depthwidth verdict file"),
])
def test_a_malformed_verdict_file(tree, capsys, content, message):
    (tree / "results/predictions/verdicts/bad.json").write_text(content)
    assert message in _one_line_exit_2(capsys, tree)


def test_a_malformed_prediction_file(tree, capsys):
    _edit(tree / PRED, predictions=[])
    assert "'predictions' must be a non-empty list" in _one_line_exit_2(capsys, tree)


def test_other_json_beside_the_predictions_is_not_a_prediction(tree, capsys):
    (tree / "results/predictions/notes.json").write_text('{"what": "not a prediction"}')
    rc, text, err = _run(capsys, "query", "--fit", str(tree / "results/law-long/fit.json"), "--params", "1.3B")
    assert rc == 0, err
    assert text.splitlines()[1] == LAW_LONG_LINE


def test_a_prediction_not_yet_measured(tree, capsys):
    for v in VERDICTS.values():
        (tree / v).unlink()
    v = law_validation(str(tree / "results/law-long/fit.json"), None)
    assert v["status"] == "not measured"
    assert v["text"] == ("validation: pre-registered (3,6) not yet measured, predicted 118K [79.3K, 175K]; (2,3) not "
                         "yet measured, predicted 35.1K [30.2K, 40.6K] (results/predictions/law-long.json)")
