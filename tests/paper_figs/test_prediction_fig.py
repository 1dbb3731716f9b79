"""fig7 (paper_figs.prediction_fig): the committed prediction vs the committed measured fits,
drawn from stored files only; the committed figure is what the command draws; bad inputs are
one line."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.paper_figs import prediction_fig

ROOT = Path(__file__).resolve().parents[2]
PRED = "results/predictions/law-long.json"
MEASURED = ["results/predict-36/fit.json", "results/predict-23/fit.json"]


def test_the_committed_figure_is_what_the_command_draws(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the prediction names its fit relative to the repository
    assert main(["prediction-fig", "--prediction", PRED, "--measured", *MEASURED, "--out", str(tmp_path)]) == 0
    for ext in ("png", "pdf"):
        drawn = (tmp_path / f"fig7_prediction.{ext}").read_bytes()
        committed = (ROOT / "results" / "predictions" / "figures" / f"fig7_prediction.{ext}").read_bytes()
        assert hashlib.sha256(drawn).hexdigest() == hashlib.sha256(committed).hexdigest()


def test_the_figure_shows_each_pair_as_its_verdict_says(monkeypatch):
    monkeypatch.chdir(ROOT)
    inputs = prediction_fig.load(PRED, MEASURED)
    fig, caption = prediction_fig.prediction_vs_measurement(inputs)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "(3,6) predicted 118K, measured 182K (x1.54)" in texts
    assert "(2,3) predicted 35.1K, measured 159K (x4.53)" in texts
    assert {"(1,2)", "(2,4)", "(4,8)"} <= set(texts)  # the points the law was fitted on
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
    (tmp_path / "bad.json").write_text(json.dumps({"format": "depthwidth-fit", "options": {"assign": "arith"}}))
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
