"""``query --params N --max-ms-per-token X`` (issue 44, item 3): the law's optimum under a
per-token decode-latency budget, from a fitted decode-latency model; refusals are one line."""

import json
import math
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.fits import latency_budget as lb
from depthwidth.fits import projections as P
from depthwidth.fits.latency_decode import FORMULA
from depthwidth.fits.law import load_law

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "exp-latency" / "decode_model.json"
# a, c, W and what the bytes count: a model where depth costs time (c > 0), as on a GPU
MODEL = {"device": "test/x", "threads": 1, "dtype": "float32", "batch": 1, "context": 128, "vocab_size": 1000,
         "cache_len": 144, "itemsize": 4, "fixed_s": 1e-3, "per_layer_s": 2e-3, "bandwidth_bytes_per_s": 1e10,
         "max_abs_rel_residual": 0.05}


def _by_hand(L, N, m=MODEL):
    d = math.sqrt(N / (12 * L))
    values = L * (12 * d * d + 13 * d + 2 * 144 * d) + 1000 * d + 2 * d
    return m["fixed_s"] + m["per_layer_s"] * L + 4 * values / m["bandwidth_bytes_per_s"]


def _result(N=125e6):
    return P.query_budget(N, load_law("levine2020", "auto"), vocab=0, round_width=128, n_head=None,
                          level=0.95, samples=100, seed=0)


def test_the_optimum_meets_a_loose_budget():
    r = _result()
    L_opt = r["optimal_depth"]
    t_opt = _by_hand(L_opt, r["non_embedding_params"])
    a = lb.answer(r, t_opt + 1e-6, MODEL, None)
    assert a["meets"] and a["depth_ratio"] == 1.0
    assert a["chosen"]["seconds_per_token"] == pytest.approx(t_opt, rel=1e-12)


def test_a_tight_budget_moves_to_the_nearest_depth_that_meets_it():
    r = _result()
    L_opt, N = r["optimal_depth"], r["non_embedding_params"]
    budget = _by_hand(20, N) + 1e-9  # c > 0: depth 20 meets it, 21..25.6 do not
    a = lb.answer(r, budget, MODEL, None)
    assert not a["meets"] and a["chosen"]["n_layer"] == 20
    assert a["chosen"]["d_model"] == pytest.approx(math.sqrt(N / 240), rel=1e-12)
    assert a["depth_ratio"] == pytest.approx(20 / L_opt) and a["law_cost"] is None
    assert all(_by_hand(L, N) > budget for L in range(21, 26))
    with pytest.raises(UserError, match=r"no depth 1\.\.205 meets 1 ms/token at N=125M on test/x"):
        lb.answer(r, 1e-3, MODEL, None)


def test_the_committed_model_answers_in_text_and_json(capsys):
    model = lb.load_models(COMMITTED)[0]
    r = _result()
    d = r["optimal_width"]
    values = r["optimal_depth"] * (12 * d * d + 13 * d + 2 * 144 * d) + 50257 * d + 2 * d
    t_opt = model["fixed_s"] + model["per_layer_s"] * r["optimal_depth"] + 4 * values / model["bandwidth_bytes_per_s"]
    budget_ms = math.ceil(1e3 * t_opt) + 1
    assert main(["query", "--params", "125M", "--max-ms-per-token", str(budget_ms), "--latency", str(COMMITTED),
                 "--json"]) == 0
    (a,) = json.loads(capsys.readouterr().out)["latency"]
    assert a["meets"] and a["optimal"]["seconds_per_token"] == pytest.approx(t_opt, rel=1e-12)
    assert a["device"] == model["device"] and a["max_abs_rel_residual"] == model["max_abs_rel_residual"]
    assert main(["query", "--params", "125M", "--max-ms-per-token", str(budget_ms), "--latency", str(COMMITTED)]) == 0
    assert f"the optimal depth 25.6 (width 638) meets it at {1e3 * t_opt:.4g} ms/token predicted" in capsys.readouterr().out


@pytest.mark.parametrize("argv,needle", [
    (["--params", "125M", "--max-ms-per-token", "-5"], "--max-ms-per-token must be a latency in ms > 0, got '-5'"),
    (["--params", "125M", "--max-ms-per-token", "50", "--latency", str(REPO / "results/exp-latency/latency_model.json")],
     "is not a decode-latency model"),
    (["--params", "125M", "--max-ms-per-token", "1", "--latency", str(COMMITTED)], "no depth 1..205 meets 1 ms/token"),
    (["--params", "125M", "--latency", str(COMMITTED)], "--latency needs --max-ms-per-token"),
    (["--layers", "12", "--max-ms-per-token", "50"], "--max-ms-per-token answers --params budgets only"),
    (["--params", "125M", "--max-ms-per-token", "50", "--latency", "no/such.json"], "no such file"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys):
    assert main(["query", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("depthwidth: error:") and needle in err and "\n" not in err


def test_a_file_without_a_fitted_model(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"formula": FORMULA, "models": []}))
    with pytest.raises(UserError, match="holds no fitted model"):
        lb.load_models(p)


def _by_hand_committed(L, d, model):
    """The committed decode model's a + c·L + bytes/W (float32) with its own vocabulary (50,257)."""
    values = L * (12 * d * d + 13 * d + 2 * 144 * d) + 50257 * d + 2 * d
    return model["fixed_s"] + model["per_layer_s"] * L + 4 * values / model["bandwidth_bytes_per_s"]


def test_every_surviving_form_answers_under_the_budget(capsys):
    """query on a fit with a form comparison beside it: each form's own optimum is judged under the
    budget; a budget between the forms' predicted latencies keeps the fastest form's optimum and
    moves the others to the nearest depth that meets it."""
    from depthwidth.fits.forms_query import answer_forms

    model = lb.load_models(COMMITTED)[0]
    cmp_path = REPO / "results/law-pooled/fit.forms.json"
    forms = answer_forms(json.loads(cmp_path.read_text()), str(cmp_path), 1e6, draws=200)["forms"]
    t = {f["form"]: _by_hand_committed(f["depth"], f["width"], model) for f in forms}
    fastest, second = sorted(t.values())[:2]
    budget_ms = 1e3 * (fastest + second) / 2
    argv = ["query", "--fit", str(REPO / "results/law-pooled/fit.json"), "--params", "1M",
            "--max-ms-per-token", repr(budget_ms), "--latency", str(COMMITTED)]
    assert main([*argv, "--json"]) == 0
    got = {f["form"]: f["latency"][0] for f in json.loads(capsys.readouterr().out)["forms"]}
    assert set(got) == set(t) and len(t) == 3
    for form, a in got.items():
        assert a["optimal"]["seconds_per_token"] == pytest.approx(t[form], rel=1e-12)
        assert a["meets"] == (t[form] == fastest)
        if not a["meets"]:
            L = a["chosen"]["n_layer"]
            assert a["chosen"]["seconds_per_token"] <= budget_ms / 1e3
            assert a["chosen"]["d_model"] == pytest.approx(math.sqrt(1e6 / (12 * L)), rel=1e-12)
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    for form in t:
        (line,) = [ln for ln in lines if ln.startswith(f"{form}: N=1M, {budget_ms:g} ms/token on {model['device']}")]
        assert ("meets it at" in line) == (t[form] == fastest)


def test_no_form_meeting_the_budget_is_one_line(capsys):
    argv = ["query", "--fit", str(REPO / "results/law-pooled/fit.json"), "--params", "125M", "--max-ms-per-token", "1",
            "--latency", str(COMMITTED)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("depthwidth: error: no depth 1..") and "meets 1 ms/token at N=125M" in err and "\n" not in err


@pytest.mark.parametrize("bad_depth", [math.inf, math.nan, 0.0])
def test_a_form_without_a_finite_optimum_says_so_and_the_others_still_answer(bad_depth):
    """No committed comparison has a form without a finite optimal depth (the constant form, which
    would, is excluded): one form's answer is made non-finite here. Its line says so and it gets
    no ``latency``; the other forms are judged as usual; with every form so, UserError."""
    import argparse

    from depthwidth.fits.forms_query import answer_forms

    model = lb.load_models(COMMITTED)[0]
    cmp_path = REPO / "results/law-pooled/fit.forms.json"
    r = answer_forms(json.loads(cmp_path.read_text()), str(cmp_path), 1e6, draws=200)
    bad, *good = r["forms"]
    bad["depth"] = bad_depth
    args = argparse.Namespace(max_ms_per_token="1000", latency=str(COMMITTED), params="1M")
    lines = lb.apply_forms(args, [r])
    assert lines[0] == f"{bad['form']}: N=1M: the form gives no finite optimal depth at this budget"
    assert "latency" not in bad and bad["latency_error"]
    assert len(lines) == 1 + len(good)
    for f, line in zip(good, lines[1:]):
        a = f["latency"][0]
        assert a["meets"] and a["optimal"]["seconds_per_token"] == pytest.approx(
            _by_hand_committed(f["depth"], f["width"], model), rel=1e-12)
        assert line.startswith(f"{f['form']}: N=1M, 1000 ms/token on {model['device']}") and "meets it at" in line
    for f in good:
        f["depth"] = bad_depth
    with pytest.raises(UserError, match="^no form gives a finite optimal depth at these budgets$"):
        lb.apply_forms(args, [r])
