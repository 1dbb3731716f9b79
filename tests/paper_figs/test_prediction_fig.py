"""fig7 (paper_figs.prediction_fig): the committed prediction vs the committed measured fits,
drawn from stored files only; the committed figure is what the command draws; bad inputs are
one line."""

import json
import shutil
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.paper_figs import prediction_fig

ROOT = Path(__file__).resolve().parents[2]
PRED = "results/predictions/law-long.json"
MEASURED = ["results/predict-36/fit.json", "results/predict-23/fit.json"]


def test_the_committed_figure_is_what_the_command_draws(tmp_path, monkeypatch, capsys, assert_same_figure):
    # Issue 39: the PDF's embedded font subset is fontTools' and changes with its version, so
    # the bytes are compared where the plotting stack is the committed one (the lock's), and
    # everything else in the PDF everywhere; the PNG is compared byte for byte everywhere.
    monkeypatch.chdir(ROOT)  # the prediction names its fit relative to the repository
    assert main(["prediction-fig", "--prediction", PRED, "--measured", *MEASURED, "--out", str(tmp_path)]) == 0
    for ext in ("png", "pdf"):
        assert_same_figure(tmp_path / f"fig7_prediction.{ext}",
                           ROOT / "results" / "predictions" / "figures" / f"fig7_prediction.{ext}")


def test_the_figure_shows_each_pair_as_its_verdict_says(monkeypatch):
    monkeypatch.chdir(ROOT)
    inputs = prediction_fig.load(PRED, MEASURED)
    fig, caption = prediction_fig.prediction_vs_measurement(inputs)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert ("(3,6): predicted 118K, measured 182K (×1.54)\n"
            "(2,3): predicted 35.1K, measured 159K (×4.53)") in texts
    assert {"(1,2)", "(2,4)", "(4,8)", "(3,6)", "(2,3)"} <= set(texts)  # fitted and predicted pairs named
    assert PRED in caption and all(m in caption for m in MEASURED)


def test_a_changed_predicting_fit_or_a_missing_file_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "results" / "law-long").mkdir(parents=True)
    (tmp_path / "results" / "predictions").mkdir()
    raw = (ROOT / "results" / "law-long" / "fit.json").read_bytes()
    shutil.copy(ROOT / PRED, tmp_path / PRED)
    monkeypatch.chdir(tmp_path)
    assert main(["prediction-fig", "--prediction", PRED]) == 2
    assert capsys.readouterr().err == (f"depthwidth: error: {PRED}: the fit it was made from, results/law-long/fit.json, "
                                       "cannot be read (run from the directory the prediction was made in)\n")
    (tmp_path / "results" / "law-long" / "fit.json").write_bytes(raw.replace(b'"bootstrap": 1000', b'"bootstrap": 999'))
    assert main(["prediction-fig", "--prediction", PRED]) == 2
    assert "has changed since" in capsys.readouterr().err
    (tmp_path / "results" / "law-long" / "fit.json").write_bytes(raw)
    assert main(["prediction-fig", "--prediction", PRED, "--measured", "nope.json"]) == 2
    assert capsys.readouterr().err == "depthwidth: error: fit file not found: nope.json (built-in laws: levine2020)\n"
    (tmp_path / "bad.json").write_text(json.dumps({"format": "depthwidth-fit", "version": 1, "options": {"assign": "arith"}}))
    assert main(["prediction-fig", "--prediction", PRED, "--measured", "bad.json"]) == 2
    assert "assigns depth 'arith'" in capsys.readouterr().err
    # without measured fits: the prediction alone, beside the prediction file by default
    assert main(["prediction-fig", "--prediction", PRED]) == 0
    assert (tmp_path / "results" / "predictions" / "figures" / "fig7_prediction.png").is_file()


@pytest.mark.parametrize("out", ["afile", "afile/sub"])
def test_an_output_under_a_file_is_refused(tmp_path, monkeypatch, capsys, out):
    (tmp_path / "afile").write_text("x")
    monkeypatch.chdir(ROOT)
    assert main(["prediction-fig", "--prediction", PRED, "--out", str(tmp_path / out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("measured, message", [
    (["results/predict-36/fit.json", "results/predict-36/fit.json"], "--measured names a file twice"),
    (["results/law/fit.json"], "--measured results/law/fit.json holds none of the predicted pairs ((3,6), (2,3))"),
    (["results/predictions/law-long.json"], "--measured results/predictions/law-long.json is a prediction file"),
])
def test_measured_fits_that_cannot_be_drawn_are_one_line(tmp_path, monkeypatch, capsys, measured, message):
    monkeypatch.chdir(ROOT)
    assert main(["prediction-fig", "--prediction", PRED, "--measured", *measured, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"depthwidth: error: {message}") and err.count("\n") == 1, err


def test_two_measured_fits_of_one_pair_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    shutil.copy(ROOT / "results" / "predict-36" / "fit.json", tmp_path / "again.json")
    assert main(["prediction-fig", "--prediction", PRED, "--measured", MEASURED[0], str(tmp_path / "again.json"),
                 "--out", str(tmp_path)]) == 2
    assert "both hold the pair (3,6): give one" in capsys.readouterr().err


@pytest.mark.parametrize("edit", [{"fit": "x"}, {"fit": None}, "no fit", {"L": None}, {"L": 0}, {"n_star": 1.0},
                                  {"ci95": [1e-300, 1e-299]}])
def test_a_hand_edited_prediction_is_one_line(tmp_path, monkeypatch, capsys, edit):
    # fresh-user review (session 8): each was a traceback in prediction-fig (and "fit" in predict --check)
    d = json.loads((ROOT / PRED).read_text())
    if edit == "no fit":
        del d["fit"]
    elif "fit" in edit:
        d.update(edit)
    else:
        d["predictions"][0].update(edit)
        if "n_star" in edit:
            d["predictions"][0]["ln_n_star"] = 0.0
    (tmp_path / "p.json").write_text(json.dumps(d))
    monkeypatch.chdir(ROOT)
    for argv in (["prediction-fig", "--prediction", str(tmp_path / "p.json"), "--out", str(tmp_path / "o")],
                 ["predict", "--fit", MEASURED[0], "--check", str(tmp_path / "p.json")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("depthwidth: error:") and err.count("\n") == 1, err
