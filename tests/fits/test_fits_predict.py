"""Pre-registered predictions (fits.predict, `depthwidth predict`): values against hand
computation, the committed law-long prediction against its fit, refusals, and the verdict."""

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.fits import predict as P
from depthwidth.fits.cli import format_verdicts

ROOT = Path(__file__).resolve().parents[2]


def _fit(a=3.0, b=0.2, cov=((0.01, -0.002), (-0.002, 0.001)), assign="geom", pairs=((1, 2), (2, 4))):
    return {"format": "depthwidth-fit", "version": 1, "status": "ok",
            "law": {"a": a, "b": b, "cov": [list(r) for r in cov], "dof": 0, "chi2_red": None,
                    "depth_range": [1.0, 3.0], "form": "ln(d_x) = a + b*L"},
            "options": {"assign": assign},
            "points": [{"L_s": s, "L_d": d, "fitted": True} for s, d in pairs],
            "by_assign": {assign: {"a": a, "b": b}}}


def test_prediction_values_by_hand():
    fit = _fit()
    out = P.predict(fit, "f.json", b"raw", [(3, 6)])
    p = out["predictions"][0]
    L = math.sqrt(18)
    n = 12 * L * math.exp(2 * (3.0 + 0.2 * L))
    assert p["n_star"] == pytest.approx(n, rel=1e-12)
    assert p["d_x"] == pytest.approx(math.exp(3.0 + 0.2 * L))
    var = 0.01 - 2 * 0.002 * L + 0.001 * L * L
    sig = 2 * math.sqrt(var)
    assert p["sigma_ln_n_star"] == pytest.approx(sig)
    assert p["ci95"] == pytest.approx([n * math.exp(-1.959964 * sig), n * math.exp(1.959964 * sig)], rel=1e-6)
    assert p["extrapolated"] is True  # L = 4.24 beyond the data's 1..3
    assert out["fit"]["sha256"] == hashlib.sha256(b"raw").hexdigest()
    assert p["ci95_bootstrap"] is None  # the fit has no bootstrap covariance


def test_doubling_pair_same_under_every_convention_but_not_others():
    # Fits of doubling pairs under two conventions are the same line reparametrised: for the
    # points (1,2) and (2,4) at N*1, N*2 solve the line under geom and under shallow by hand.
    N1, N2 = 2.0e4, 9.0e4

    def line(Ls1, Ls2, conv):
        from depthwidth.fits.transitions import assigned_depth
        L1, L2 = assigned_depth(Ls1, 2 * Ls1, conv), assigned_depth(Ls2, 2 * Ls2, conv)
        y1, y2 = 0.5 * math.log(N1 / (12 * L1)), 0.5 * math.log(N2 / (12 * L2))
        b = (y2 - y1) / (L2 - L1)
        return y1 - b * L1, b

    fit = _fit()
    fit["by_assign"] = {c: dict(zip("ab", line(1, 2, c))) for c in ("geom", "shallow", "deep", "arith")}
    fit["law"]["a"], fit["law"]["b"] = fit["by_assign"]["geom"]["a"], fit["by_assign"]["geom"]["b"]
    p36, p23 = P.predict(fit, "f", b"", [(3, 6), (2, 3)])["predictions"]
    assert len({round(v, 6) for v in p36["n_star_by_convention"].values()}) == 1
    assert p36["n_star"] == pytest.approx(p36["n_star_by_convention"]["shallow"])
    assert len({round(v) for v in p23["n_star_by_convention"].values()}) == 4


def test_refusals():
    with pytest.raises(UserError, match="fitted on"):
        P.predict(_fit(), "f", b"", [(1, 2)])
    for bad in (["3"], ["6,3"], ["a,b"], ["0,1"], ["3,6", "3,6"]):
        with pytest.raises(UserError):
            P.parse_pairs(bad)
    fit = _fit()
    fit["status"] = "insufficient"
    with pytest.raises(UserError, match="no law"):
        P.predict(fit, "f", b"", [(3, 6)])


def _measured(N, sigma, frac=1.0, status="crossing", assign="geom"):
    return {"format": "depthwidth-fit", "version": 1, "options": {"assign": assign},
            "points": [{"L_s": 3, "L_d": 6, "status": status, "N_star": N, "sigma_ln_N_star": sigma,
                        "N_star_ci95": [N * 0.8, N * 1.2], "bootstrap_fraction": frac}]}


def test_verdict_z_and_inside():
    pred = P.predict(_fit(), "f", b"", [(3, 6)])
    p = pred["predictions"][0]
    N = p["n_star"] * math.exp(0.3)
    v, = P.verdict(pred, _measured(N, 0.4))
    assert v["status"] == "resolved"
    assert v["ratio"] == pytest.approx(math.exp(0.3))
    assert v["z"] == pytest.approx(0.3 / math.hypot(p["sigma_ln_n_star"], 0.4))
    assert v["z_pred"] == pytest.approx(0.3 / p["sigma_ln_n_star"])
    assert v["inside_predicted_ci95"] is (0.3 < 1.959964 * p["sigma_ln_n_star"])
    far, = P.verdict(pred, _measured(p["n_star"] * 10, 0.1))
    assert far["inside_predicted_ci95"] is False and far["z"] > 1.96
    # interval [0.8N, 1.2N]; the prediction lies below, so its arm is ln(N/0.8N)
    arm = math.log(1.25) / 1.959963984540054
    assert v["sigma_ln_measured_ci95"] == pytest.approx(arm)
    assert v["non_normal"] is True  # 0.114 against 0.4: more than 1.5x apart (here: narrower)
    assert v["z_ci95"] == pytest.approx(v["z"])  # the larger sigma, 0.4: z_ci95 never exceeds z
    normal, = P.verdict(pred, _measured(N, 0.1))
    assert normal["non_normal"] is False
    narrow, = P.verdict(pred, _measured(N, 0.01))  # a 16-84% range far narrower than the 95% interval
    assert narrow["non_normal"] is True
    assert narrow["z_ci95"] == pytest.approx(0.3 / math.hypot(p["sigma_ln_n_star"], arm)) and narrow["z_ci95"] < narrow["z"]
    above, = P.verdict(pred, _measured(p["n_star"] * math.exp(-0.3), 0.1))  # prediction above: the upper arm
    assert above["sigma_ln_measured_ci95"] == pytest.approx(math.log(1.2) / 1.959963984540054)
    weak, = P.verdict(pred, _measured(N, 0.4, frac=0.8))
    assert weak["status"] == "not resolved" and "80.0%" in weak["reason"]
    none, = P.verdict(pred, {"format": "depthwidth-fit", "version": 1, "options": {"assign": "geom"}, "points": []})
    assert none["status"] == "not resolved"
    with pytest.raises(UserError, match="assigns depth"):
        P.verdict(pred, _measured(N, 0.4, assign="arith"))


def test_cli_writes_once_and_checks(tmp_path, capsys):
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps(_fit()))
    out = tmp_path / "pred.json"
    assert main(["predict", "--fit", str(fit), "--pairs", "3,6", "2,3", "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert [p["pair"] for p in d["predictions"]] == [[3, 6], [2, 3]]
    assert main(["predict", "--fit", str(fit), "--pairs", "3,6", "--out", str(out)]) == 2
    assert "written once" in capsys.readouterr().err
    meas = tmp_path / "m.json"
    meas.write_text(json.dumps(_measured(d["predictions"][0]["n_star"], 0.2)))
    capsys.readouterr()
    assert main(["predict", "--fit", str(meas), "--check", str(out)]) == 0
    text = capsys.readouterr().out
    assert "(3,6): measured" in text and "inside the predicted 95% interval" in text
    assert "(2,3): not resolved: the measured fit has no such pair: its records lack one of the depths" in text
    # session 9 fresh-user pass: the predicting fit given as the measured one judged nothing and exited 0
    assert main(["predict", "--fit", str(fit), "--check", str(out)]) == 2
    assert capsys.readouterr().err == (f"depthwidth: error: --fit {fit} holds none of the predicted pairs (3,6), (2,3): "
                                       "give the fit of their records (e.g. results/predict-36/fit.json)\n")


def test_committed_law_long_prediction_matches_its_fit():
    """The pre-registered file: its sha256 is the committed fit's, and its N* is what the fit gives."""
    path = ROOT / "results" / "predictions" / "law-long.json"
    if not path.exists():
        pytest.skip("no committed prediction yet")
    pred = json.loads(path.read_text())
    raw = (ROOT / "results" / "law-long" / "fit.json").read_bytes()
    assert pred["fit"]["sha256"] == hashlib.sha256(raw).hexdigest()
    again = P.predict(json.loads(raw), pred["fit"]["path"], raw, [tuple(p["pair"]) for p in pred["predictions"]])
    for p, q in zip(pred["predictions"], again["predictions"]):
        assert p["n_star"] == pytest.approx(q["n_star"], rel=1e-12)
        assert p["ci95"] == pytest.approx(q["ci95"], rel=1e-12)


def test_committed_predict_36_fit_and_its_verdict(tmp_path, capsys):
    """The (3,6) verdict the README and docs state: the committed fit is what `fit` gives from the
    committed records, and the verdict follows from it and the pre-registered file by hand."""
    committed = json.loads((ROOT / "results" / "predict-36" / "fit.json").read_text())
    assert main(["fit", "--results", str(ROOT / "results" / "predict-36"), "--out", str(tmp_path / "f.json"),
                 "--prediction", str(ROOT / "results" / "predictions" / "law-long.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (p,) = committed["points"] + committed["no_crossing"]
    (q,) = out["points"] + out["no_crossing"]
    assert (p["L_s"], p["L_d"], p["status"]) == (3, 6, "crossing") and p["bootstrap_fraction"] == 1.0
    assert q["N_star"] == pytest.approx(p["N_star"], rel=1e-12) and q["N_star_ci95"] == pytest.approx(p["N_star_ci95"])
    assert committed["table"]["n_used"] == 36 and round(p["N_star"], -3) == 182e3
    pred = next(x for x in json.loads((ROOT / "results/predictions/law-long.json").read_text())["predictions"]
                if x["pair"] == [3, 6])
    v = next(x for x in out["verdicts"] if x["pair"] == [3, 6])
    lo, hi = pred["ci95"]
    assert v["ratio"] == pytest.approx(p["N_star"] / pred["n_star"]) and round(v["ratio"], 2) == 1.54
    assert v["inside_predicted_ci95"] is False and not lo <= p["N_star"] <= hi
    z = (math.log(p["N_star"]) - math.log(pred["n_star"])) / math.hypot(pred["sigma_ln_n_star"], p["sigma_ln_N_star"])
    assert v["z"] == pytest.approx(z) and round(z, 2) == 2.11
    # session 9 fresh-user pass: one pair and four "no law" lines read like a failure
    from depthwidth.fits.cli import _fit_text

    text = _fit_text(committed, "f.json")
    assert "(one depth pair: this fit measures one transition point" in text and "no law" not in text


@pytest.mark.parametrize("change", [{"n_star": "x"}, {"pair": [3]}, {"ci95": None, "pair": [3, True]}, "drop_ci95",
                                    # hand edits the command line would refuse; a negative sigma flips z
                                    {"sigma_ln_n_star": -0.1}, {"pair": [6, 3]}, {"pair": [0, 2]}, {"n_star": -1.0},
                                    {"n_star": float("nan")}, {"ci95": [2e5, 1e5]}, "empty"])
def test_malformed_prediction_entries_are_one_line(tmp_path, change):
    d = P.predict(_fit(), "f", b"", [(3, 6)])
    if change == "drop_ci95":
        del d["predictions"][0]["ci95"]
    elif change == "empty":
        d["predictions"] = []
    else:
        d["predictions"][0].update(change)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match="predictions"):
        P.read_prediction(str(path))
    with pytest.raises(UserError, match="measured fit"):
        P.verdict(P.predict(_fit(), "f", b"", [(3, 6)]), {"format": "depthwidth-fit", "version": 1, "points": "x"})


def test_prediction_says_whether_the_checkout_was_dirty(tmp_path, monkeypatch):
    """git_dirty: a tracked file changed after HEAD makes it true; a clean tree false; no git None."""
    import subprocess

    from depthwidth import records

    calls = []

    def fake_run(args, **kw):
        calls.append(args)
        out = " M depthwidth/fits/predict.py\n" if dirty else ""
        return subprocess.CompletedProcess(args, 0, stdout=out, stderr="")

    monkeypatch.setattr(records.subprocess, "run", fake_run)
    dirty = True
    assert P.predict(_fit(), "f.json", b"raw", [(3, 6)])["git_dirty"] is True
    dirty = False
    assert P.predict(_fit(), "f.json", b"raw", [(3, 6)])["git_dirty"] is False
    assert ["git", "status", "--porcelain", "--untracked-files=no"] in calls

    def no_git(args, **kw):
        raise FileNotFoundError("git")

    monkeypatch.setattr(records.subprocess, "run", no_git)
    assert records.code_is_dirty() is None


def _fit_23(tmp_path, capsys, *options: str) -> tuple[dict, dict]:
    """`fit --json` of the committed (2,3) records against the committed prediction, with
    ``options``: (the (2,3) point, its verdict, the whole output)."""
    assert main(["fit", "--results", str(ROOT / "results" / "predict-23"), "--pairs", "adjacent", *options,
                 "--out", str(tmp_path / f"f{len(options)}.json"),
                 "--prediction", str(ROOT / "results" / "predictions" / "law-long.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (point,) = out["points"] + out["no_crossing"]
    return point, next(x for x in out["verdicts"] if x["pair"] == [2, 3]), out


def test_committed_predict_23_fit_and_its_verdict(tmp_path, capsys):
    """The (2,3) verdict the README and docs state, from the committed records and the
    pre-registered file: outside the predicted interval, with the measured means crossing three
    times and a bootstrap far from normal (so z with the sigma of the interval's arm is given too)."""
    committed = json.loads((ROOT / "results" / "predict-23" / "fit.json").read_text())
    (p,) = committed["points"] + committed["no_crossing"]
    q, v, out = _fit_23(tmp_path, capsys)
    assert (p["L_s"], p["L_d"], p["status"]) == (2, 3, "multiple") and p["bootstrap_fraction"] == 1.0
    assert q["N_star"] == pytest.approx(p["N_star"], rel=1e-12) and q["N_star_ci95"] == pytest.approx(p["N_star_ci95"])
    assert committed["table"]["n_used"] == 51 and round(p["N_star"], -3) == 159e3
    assert [round(x, -2) for x in p["crossings_N_down"]] == [45.6e3, 158.8e3]
    assert [round(x, -2) for x in p["crossings_N_up"]] == [80.9e3]
    pred = next(x for x in json.loads((ROOT / "results/predictions/law-long.json").read_text())["predictions"]
                if x["pair"] == [2, 3])
    assert v["inside_predicted_ci95"] is False and round(v["ratio"], 2) == 4.53
    d = math.log(p["N_star"]) - math.log(pred["n_star"])
    assert round(v["z"], 2) == round(d / math.hypot(pred["sigma_ln_n_star"], p["sigma_ln_N_star"]), 2) == 6.09
    lo, hi = p["N_star_ci95"]
    s_arm = math.log(p["N_star"] / lo) / 1.959963984540054  # the prediction lies below: the lower arm
    assert round(s_arm, 3) == 0.837 and round(p["sigma_ln_N_star"], 3) == 0.236 and v["non_normal"] is True
    assert round(v["z_ci95"], 2) == round(d / math.hypot(pred["sigma_ln_n_star"], s_arm), 2) == 1.80
    assert out["protocol_differences"] == []
    # the docs' reading with the first down-crossing, beside the registered last one
    f, vf, first = _fit_23(tmp_path, capsys, "--crossing", "first")
    assert round(f["N_star"], -2) == 45.6e3 and [round(x, -2) for x in f["N_star_ci95"]] == [24.8e3, 166.7e3]
    assert vf["inside_predicted_ci95"] is False and round(vf["ratio"], 2) == 1.30 and round(vf["z"], 2) == 0.29
    assert first["protocol_differences"] == ["crossing first (the predicting fit: last)"]
    assert vf["z_ci95"] == vf["z"]  # its 16-84% sigma (0.91) is the larger
    # and with pooled residuals (docs: 159K [32.7K, 288K], z +5.58, +1.87 with the lower arm's sigma)
    g, vp, _ = _fit_23(tmp_path, capsys, "--resample", "pooled")
    assert round(g["N_star"], -3) == 159e3 and [round(x, -2) for x in g["N_star_ci95"]] == [32.7e3, 288.4e3]
    assert (round(vp["z"], 2), round(vp["z_ci95"], 2)) == (5.58, 1.87)


@pytest.mark.parametrize("change, message", [
    ({"N_star": 0}, "N_star must be a positive number, got 0"),
    ({"N_star": "159K"}, "N_star must be a positive number, got '159K'"),
    ({"N_star": float("inf")}, "N_star must be a positive number, got inf"),
    ({"sigma_ln_N_star": "x"}, "sigma_ln_N_star must be a number >= 0 or null, got 'x'"),
    ({"sigma_ln_N_star": -0.2}, "sigma_ln_N_star must be a number >= 0 or null"),
    ({"sigma_ln_N_star": True}, "sigma_ln_N_star must be a number >= 0 or null, got True"),
    ({"bootstrap_fraction": "1.0"}, "bootstrap_fraction must be a number in [0, 1]"),
    ({"N_star_ci95": [3e4]}, "N_star_ci95 must be [lo, hi]"),
    ({"N_star_ci95": [1, 2, 3]}, "N_star_ci95 must be [lo, hi]"),
    ({"N_star_ci95": ["a", "b"]}, "N_star_ci95 must be [lo, hi]"),
    ({"N_star_ci95": [0, 5e4]}, "N_star_ci95 must be [lo, hi]"),
    ({"N_star_ci95": [5e4, 3e4]}, "N_star_ci95 must be [lo, hi]"),
    ({"L_s": True}, "integer 1 <= L_s < L_d"),
    ({"L_s": -2}, "integer 1 <= L_s < L_d"),
])
def test_a_malformed_measured_point_is_one_line(change, message):
    # fresh-user review (session 8): each of these was a traceback or a silent z of inf/nan
    pred = P.predict(_fit(), "f", b"", [(3, 6)])
    m = _measured(pred["predictions"][0]["n_star"], 0.2)
    m["points"][0].update(change)
    with pytest.raises(UserError, match=re.escape(message)):
        P.verdict(pred, m)


def test_a_measured_fit_of_another_version_is_refused():
    # session 8, left over: a fit file of version 99 gave a verdict as if it were this format
    pred = P.predict(_fit(), "f", b"", [(3, 6)])
    m = _measured(pred["predictions"][0]["n_star"], 0.2)
    m["version"] = 99
    with pytest.raises(UserError, match=re.escape("m.json: unsupported fit file version 99 (expected 1)")):
        P.verdict(pred, m, "m.json")


def test_verdict_text_without_sigma_or_interval_and_duplicates():
    pred = P.predict(_fit(), "f", b"", [(3, 6)])
    m = _measured(pred["predictions"][0]["n_star"], 0.2)
    bare = json.loads(json.dumps(pred))
    bare["predictions"][0].update(sigma_ln_n_star=None, ci95=None)
    v, = P.verdict(bare, m)
    assert v["z"] is None and v["z_pred"] is None and v["inside_predicted_ci95"] is None
    text = "\n".join(format_verdicts([v], "p.json", "f.json", []))
    assert "the prediction has no interval; no z (the prediction has no sigma)" in text
    m["points"][0]["sigma_ln_N_star"] = 0.0
    v0, = P.verdict(pred, m)
    assert v0["status"] == "not resolved" and "no bootstrap sigma" in v0["reason"]
    m["points"].append(dict(m["points"][0]))
    with pytest.raises(UserError, match=re.escape("pair (3,6) is there more than once")):
        P.verdict(pred, m)


@pytest.mark.parametrize("change, message", [
    ({"depth_convention": "bogus"}, "depth_convention one of geom, arith, shallow, deep"),
    ({"ln_n_star": 1.0}, "ln_n_star = ln(n_star)"),
    ("twice", "pair (3,6) is predicted more than once"),
])
def test_a_malformed_prediction_file_is_one_line(tmp_path, change, message):
    d = P.predict(_fit(), "f", b"", [(3, 6)])
    if change == "twice":
        d["predictions"].append(dict(d["predictions"][0]))
    else:
        d["predictions"][0].update(change)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match=re.escape(message)):
        P.read_prediction(str(path))


def test_protocol_differences_need_the_predicting_fit_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = json.dumps({**_fit(), "options": {"assign": "geom", "bootstrap": 1000, "resample": "paired"}}).encode()
    (tmp_path / "law.json").write_bytes(raw)
    pred = P.predict(json.loads(raw), "law.json", raw, [(3, 6)])
    m = _measured(pred["predictions"][0]["n_star"], 0.2)
    m["options"].update(bootstrap=1000, resample="pooled", crossing="first")
    assert P.protocol_differences(pred, m) == ["crossing first (the predicting fit: last)",
                                               "resample pooled (the predicting fit: paired)"]
    m["table"] = {"seeds": [0, 1]}  # fit --seeds: a subset of the records is not the registered protocol
    assert P.protocol_differences(pred, m)[-1] == "seeds 0,1 only (the predicting fit: all its records' seeds)"
    (tmp_path / "law.json").write_bytes(raw + b" ")
    assert P.protocol_differences(pred, m) is None
    m["options"] = "x"
    with pytest.raises(UserError, match="'options' must be the fit's options"):
        P.verdict(pred, m)


def test_a_fit_with_other_options_says_it_replaces_the_file(tmp_path, capsys):
    # fresh-user review (session 8): `fit --crossing first` without --out silently rewrote the
    # committed results/predict-23/fit.json that the verdict was made from
    import shutil

    shutil.copytree(ROOT / "results" / "predict-36" / "runs", tmp_path / "r" / "runs")
    shutil.copy(ROOT / "results" / "predict-36" / "fit.json", tmp_path / "r" / "fit.json")
    assert main(["fit", "--results", str(tmp_path / "r"), "--crossing", "first", "--bootstrap", "20"]) == 0
    assert (f"note: {tmp_path / 'r' / 'fit.json'} held a fit with other options (bootstrap 1000 -> 20, "
            "crossing last -> first); it is replaced") in capsys.readouterr().out
    assert main(["fit", "--results", str(tmp_path / "r"), "--crossing", "first", "--bootstrap", "20"]) == 0
    assert "other options" not in capsys.readouterr().out
