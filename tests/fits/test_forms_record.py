"""The forms prediction's verdict file and what query makes of it (fits.forms_record; issue
"Which law?", items 5 and 6): `predict --check FORMS --out` writes it byte-stably, `query --fit`
on the comparison and on a one-form law of the same records print each form's status, and bad
records are refused in one line. The measured (5,10) fit here is made up (the real sweep is still
running): a point chosen so that the rule's outcome can be computed by hand."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.fits.forms_record import forms_record

REPO = Path(__file__).resolve().parents[2]
PRED = "results/predictions/forms-510.json"
MEASURED = "results/predict-510/fit.json"
VERDICT = "results/predictions/verdicts/forms-510.predict-510.json"
FILES = ["results/law-pooled/fit.json", "results/law-pooled/fit.forms.json", "results/law-long/fit.json", PRED,
         # law-long's own record: a forms verdict beside it must not disturb it
         "results/predictions/law-long.json", "results/predict-36/fit.json", "results/predict-23/fit.json",
         "results/predictions/verdicts/law-long.predict-36.json", "results/predictions/verdicts/law-long.predict-23.json"]
N_MEAS, SIGMA_MEAS = 250e3, 0.2


def _run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def tree(tmp_path, monkeypatch):
    for rel in FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    point = {"L_s": 5, "L_d": 10, "status": "crossing", "N_star": N_MEAS, "ln_N_star": math.log(N_MEAS),
             "N_star_ci95": [180e3, 340e3], "sigma_ln_N_star": SIGMA_MEAS, "bootstrap_fraction": 0.99,
             "N_range": [156e3, 1.73e6]}
    (tmp_path / MEASURED).parent.mkdir(parents=True)
    (tmp_path / MEASURED).write_text(json.dumps({"points": [point], "not_fitted": [], "no_crossing": []}))
    monkeypatch.chdir(tmp_path)  # the committed verdicts store paths from the repository root
    return tmp_path


def _by_hand() -> dict[str, tuple[float, str]]:
    """z and status per form under the file's rule 2 (|z| <= 1.96 consistent)."""
    pred = json.loads((REPO / PRED).read_text())["predictions"][0]["forms"]
    out = {}
    for f in pred:
        z = (math.log(N_MEAS) - f["ln_n_star"]) / math.hypot(f["sigma_ln_n_star"], SIGMA_MEAS)
        out[f["form"]] = (z, "consistent" if abs(z) <= 1.96 else "fails")
    return out


def _write_verdict(capsys) -> str:
    rc, out, err = _run(capsys, "predict", "--check", PRED, "--fit", MEASURED, "--out", VERDICT)
    assert rc == 0, err
    assert out.splitlines()[-1] == f"wrote {VERDICT}"
    return out


def test_the_verdict_file_is_the_rules_outcome_and_byte_stable(tree, capsys):
    _write_verdict(capsys)
    first = (tree / VERDICT).read_bytes()
    d = json.loads(first)
    assert d["format"] == "depthwidth-forms-verdict" and d["measured_fit"]["path"] == MEASURED
    (row,) = d["verdicts"]
    assert row["outcome"] == "resolved"
    hand = _by_hand()
    # 250K: linear-depth (756K predicted) and log-depth (487K) fail, saturating (394K) holds
    assert {f["form"]: f["status"] for f in row["forms"]} == {k: s for k, (_, s) in hand.items()}
    assert [hand[k][1] for k in ("linear-depth", "log-depth", "saturating")] == ["fails", "fails", "consistent"]
    for f in row["forms"]:
        assert f["z"] == pytest.approx(hand[f["form"]][0], rel=1e-12)
    assert row["favoured"] == "saturating"
    _write_verdict(capsys)
    assert (tree / VERDICT).read_bytes() == first


def test_query_on_the_comparison_prints_each_forms_status(tree, capsys):
    rc, before, _ = _run(capsys, "query", "--fit", "results/law-pooled/fit.json", "--params", "1M")
    assert rc == 0 and "judged by `predict --check` once measured" in before and "pre-registered test" not in before
    _write_verdict(capsys)
    rc, text, err = _run(capsys, "query", "--fit", "results/law-pooled/fit.json", "--params", "1M")
    assert rc == 0, err
    hand = _by_hand()
    record = text.splitlines()[2]
    assert record.startswith("forms' out-of-sample record: pre-registered in forms-510.json: (5,10) resolved, "
                             "measured N* 250K: ")
    assert f"linear-depth fails (z {hand['linear-depth'][0]:+.2f})" in record
    assert f"saturating consistent (z {hand['saturating'][0]:+.2f})" in record
    assert record.endswith(f"; favoured saturating (highest predictive likelihood) ({VERDICT})")
    lines = text.splitlines()
    assert lines[3].split()[-2:] == ["pre-registered", "test"]
    sat = next(ln for ln in lines if ln.split()[1:2] == ["saturating"])
    assert sat.endswith("(5,10) consistent")
    fav = next(ln for ln in lines if "favours" in ln)
    weight = next(f["updated_weight"] for f in json.loads((tree / VERDICT).read_text())["verdicts"][0]["forms"]
                  if f["form"] == "saturating")
    assert fav.startswith(f"1M: the pre-registered (5,10) favours saturating (highest predictive likelihood and "
                          f"updated weight {weight:.2f}): 14.8 layers [")
    rc, out, _ = _run(capsys, "query", "--fit", "results/law-pooled/fit.json", "--params", "1M", "--json")
    (entry,) = json.loads(out)["forms_record"]
    assert entry["prediction"] == PRED and entry["verdicts"][0]["verdict_file"] == VERDICT


def test_a_favoured_form_of_low_prior_weight_is_named_beside_the_top_updated_weight(tree, capsys):
    """Measured exactly at the linear form's prediction: linear-depth predicts it best (z = 0), yet
    its Akaike weight (0.10) keeps its updated weight below log-depth's; query says both."""
    pred = json.loads((REPO / PRED).read_text())["predictions"][0]["forms"]
    lin = next(f for f in pred if f["form"] == "linear-depth")
    fit = json.loads((tree / MEASURED).read_text())
    fit["points"][0].update(N_star=math.exp(lin["ln_n_star"]), ln_N_star=lin["ln_n_star"])
    (tree / MEASURED).write_text(json.dumps(fit))
    _write_verdict(capsys)
    # by hand: weight ∝ Akaike weight × N(ln N*_m; ln N*_f, σ_f² + σ_m²) over the surviving forms
    w = {f["form"]: f["aic_weight"] * math.exp(-0.5 * (lin["ln_n_star"] - f["ln_n_star"]) ** 2 / s2) / math.sqrt(s2)
         for f in pred if f["survives"] for s2 in [f["sigma_ln_n_star"] ** 2 + SIGMA_MEAS ** 2]}
    w = {k: v / sum(w.values()) for k, v in w.items()}
    top = max(w, key=w.get)
    assert top == "log-depth"  # the case this test is for
    rc, text, err = _run(capsys, "query", "--fit", "results/law-pooled/fit.json", "--params", "1M")
    assert rc == 0, err
    fav = next(ln for ln in text.splitlines() if "favours" in ln)
    assert fav.startswith(f"1M: the pre-registered (5,10) favours linear-depth (highest predictive likelihood; "
                          f"updated weight {w['linear-depth']:.2f}, below log-depth's {w['log-depth']:.2f}): ")


def test_the_one_form_law_says_how_its_form_fared(tree, capsys):
    _write_verdict(capsys)
    rc, text, err = _run(capsys, "query", "--fit", "results/law-long/fit.json", "--params", "1M")
    assert rc == 0, err
    lines = text.splitlines()
    assert lines[1].startswith("validation: pre-registered (3,6) failed")  # the forms verdict is not its record
    assert "; pre-registered test of linear-depth: (5,10) fails; " in lines[2]


def test_a_measured_fit_changed_after_its_verdict(tree, capsys):
    _write_verdict(capsys)
    (tree / MEASURED).write_text((tree / MEASURED).read_text() + " ")
    rc, out, err = _run(capsys, "query", "--fit", "results/law-pooled/fit.json", "--params", "1M")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "has changed since the verdict was written" in err and "rerun depthwidth predict --check" in err
    # the one-form law still answers, and says its comparison's record is unreadable
    rc, text, err = _run(capsys, "query", "--fit", "results/law-long/fit.json", "--params", "1M")
    assert rc == 0, err
    assert "its record cannot be read" in text.splitlines()[2]


def test_a_prediction_changed_after_its_verdict(tree, capsys):
    _write_verdict(capsys)
    pred = tree / PRED
    pred.write_text(pred.read_text().replace('"rule"', '"rule" ', 1))
    with pytest.raises(Exception) as e:
        forms_record("results/law-pooled/fit.forms.json")
    assert "is missing or has changed since the verdict was written" in str(e.value)


def test_a_malformed_forms_verdict(tree, capsys):
    (tree / VERDICT).parent.mkdir(parents=True, exist_ok=True)
    (tree / VERDICT).write_text(json.dumps({"format": "depthwidth-forms-verdict", "version": 1}))
    rc, out, err = _run(capsys, "query", "--fit", "results/law-pooled/fit.json", "--params", "1M")
    assert rc == 2 and err.startswith("depthwidth: error: ") and "not a depthwidth forms verdict file" in err


def test_check_refuses_pairs(tree, capsys):
    rc, _, err = _run(capsys, "predict", "--check", PRED, "--fit", MEASURED, "--pairs", "5,10")
    assert rc == 2 and "no --pairs" in err
