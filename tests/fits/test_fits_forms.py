"""The law as a type (fits.forms): the log-depth form ln d_x = a + b·ln L fitted, queried and
predicted end to end; a third form defined here is one class; an unknown form is refused."""

import json
import math

import numpy as np
import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.fits import predict as PR
from depthwidth.fits import projections as P
from depthwidth.fits.forms import FORMS, LINEAR, SCALAR, LawForm, form_named, form_of_formula
from depthwidth.fits.law import Law, law_from_fit_dict
from depthwidth.fits.synthetic import Surface, write_synthetic

LOG = FORMS["log-depth"]
LOG_FORMULA = "ln(d_x) = a + b*ln(L)"


def _fit_file(path, a, b, cov, formula=LOG_FORMULA, points=((2, 4), (4, 8))):
    path.write_text(json.dumps({
        "format": "depthwidth-fit", "version": 1, "status": "ok",
        "law": {"form": formula, "a": a, "b": b, "cov": [list(r) for r in cov], "dof": 0, "chi2_red": None,
                "depth_range": [2.83, 5.66]},
        "options": {"assign": "geom"},
        "points": [{"L_s": s, "L_d": d, "fitted": True} for s, d in points]}))
    return path


def test_the_default_form_is_todays_law_and_its_string():
    # The string every committed results/*/fit.json holds: kept so they regenerate byte-identical.
    assert LINEAR.key == "linear-depth" and LINEAR.formula == "ln(d_x) = a + b*L"
    assert LOG.formula == LOG_FORMULA
    assert form_of_formula(None, "f") is LINEAR  # a fit file without law.form is the linear law
    assert form_of_formula(LOG_FORMULA, "f") is LOG


def test_log_depth_wls_matches_the_normal_equations_in_ln_L():
    # ln d_x = 3.2 + 0.6·ln L plus scatter; the fit is the WLS line in x = ln L, so it must equal
    # (XᵀWX)⁻¹XᵀWy with X = [1, ln L], W = diag(1/σ²), and its covariance (XᵀWX)⁻¹.
    L = np.array([1.41, 2.83, 5.66, 11.3, 22.6])
    sigma = np.array([0.02, 0.05, 0.04, 0.08, 0.06])
    y = 3.2 + 0.6 * np.log(L) + np.array([0.01, -0.03, 0.02, 0.05, -0.04])
    f = LOG.fit(L, y, sigma)
    X = np.stack([np.ones_like(L), np.log(L)], axis=1)
    M = X.T @ np.diag(1 / sigma**2) @ X
    p = np.linalg.solve(M, X.T @ np.diag(1 / sigma**2) @ y)
    assert (f.a, f.b) == pytest.approx(tuple(p), rel=1e-9)
    assert f.cov == pytest.approx(np.linalg.inv(M), rel=1e-6)
    assert f.stats["chi2"] == pytest.approx(float(np.sum(((y - X @ p) / sigma) ** 2)), rel=1e-8)
    assert f.stats["depth_range"] == [1.41, 22.6]  # in layers, not ln L
    assert f.to_dict()["form"] == LOG_FORMULA
    # Exact points: (a, b) recovered (to curve_fit's tolerance); the bootstrap's closed form gives
    # the normal equations' solution.
    exact = LOG.fit(L, 3.2 + 0.6 * np.log(L), sigma)
    assert (exact.a, exact.b) == pytest.approx((3.2, 0.6), abs=1e-8)
    a_rep, b_rep = LOG.fit_replicates(L, np.stack([y, 3.2 + 0.6 * np.log(L)]), 1 / sigma**2)
    assert a_rep == pytest.approx([p[0], 3.2], rel=1e-12) and b_rep == pytest.approx([p[1], 0.6], rel=1e-12)


def test_log_depth_projections_against_the_closed_form():
    # N(L) = 12·L·e^(2a)·L^(2b), so without embeddings L*(B) = (B / (12·e^(2a)))^(1/(1+2b)).
    law = Law(3.0, 0.5, None, None, "log", "test", form=LOG)
    assert P.transition_params(10.0, law) == pytest.approx(12 * 10 * math.exp(6.0) * 10.0, rel=1e-13)
    assert P.law_width(16.0, law) == pytest.approx(math.exp(3.0) * 4.0, rel=1e-13)
    B = 1e9
    assert P.optimal_depth(B, law) == pytest.approx((B / (12 * math.exp(6.0))) ** 0.5, rel=1e-12)
    # With embeddings the root still reproduces the budget.
    L = P.optimal_depth(B, law, vocab=50257)
    assert 12 * L * P.law_width(L, law) ** 2 + 50257 * P.law_width(L, law) == pytest.approx(B, rel=1e-10)
    # The slope rule: -1/2 < b <= 0 is unique without embeddings, not with them.
    shallow = Law(3.0, -0.25, None, None, "neg", "test", form=LOG)
    assert P.optimal_depth(B, shallow) == pytest.approx((B / (12 * math.exp(6.0))) ** 2, rel=1e-10)
    with pytest.raises(UserError, match="outside b > -1/2"):
        P.optimal_depth(B, shallow, vocab=100)
    a, b = np.array([3.0, 3.0, 3.0]), np.array([0.5, 0.1, -0.6])
    got = P.optimal_depth_samples(B, a, b, form=LOG)
    assert got[:2] == pytest.approx([(B / (12 * math.exp(6.0))) ** (1 / (1 + 2 * bi)) for bi in b[:2]], rel=1e-9)
    assert math.isnan(got[2])  # b < -1/2: N falls with depth, no optimum


@pytest.fixture(scope="module")
def log_sweep(tmp_path_factory):
    """A synthetic sweep whose true law is ln d_x = 3.5 + 0.5·ln L, fitted with --law-form log-depth."""
    root = tmp_path_factory.mktemp("logsweep")
    surface = Surface(a=3.5, b=0.5, form="log-depth")
    info = write_synthetic(root / "res", surface, depths=(2, 4, 8, 16, 32), n_seeds=3, seed=5)
    return root, info


def test_fit_recovers_a_log_depth_law_end_to_end(log_sweep, capsys):
    root, info = log_sweep
    rc = main(["fit", "--results", str(root / "res"), "--out", str(root / "fit.json"), "--bootstrap", "300",
               "--law-form", "log-depth", "--json"])
    out = capsys.readouterr()
    assert rc == 0 and out.err == ""
    law = json.loads((root / "fit.json").read_text())["law"]
    assert law["form"] == LOG_FORMULA and law["n_points"] == 4
    assert law["ci95"]["a"][0] < 3.5 < law["ci95"]["a"][1]
    assert law["ci95"]["b"][0] < 0.5 < law["ci95"]["b"][1]
    assert law["stderr"]["b"] < 0.1  # informative: a fifth of b
    assert law["b_vs"] is None  # 0.0555 and ln 3 are slopes of the linear form, not comparable
    # The same records under the linear form give another law, and say which form they are.
    rc = main(["fit", "--results", str(root / "res"), "--out", str(root / "lin.json"), "--bootstrap", "300"])
    assert rc == 0 and "law: ln d_x = a + b*L with" in capsys.readouterr().out
    lin = json.loads((root / "lin.json").read_text())["law"]
    assert lin["form"] == "ln(d_x) = a + b*L" and lin["b"] != pytest.approx(law["b"], rel=0.1)


def _log_fit(root, capsys):
    """The log-depth fit of ``log_sweep`` (root/fit.json), fitted here when an earlier test has
    not written it (a test run alone); its output is swallowed."""
    path = root / "fit.json"
    if not path.exists():
        assert main(["fit", "--results", str(root / "res"), "--out", str(path), "--bootstrap", "300",
                     "--law-form", "log-depth"]) == 0
    capsys.readouterr()
    return path


def test_query_and_predict_read_the_form_from_the_fit_file(log_sweep, capsys):
    root, _ = log_sweep
    path = _log_fit(root, capsys)
    law = json.loads(path.read_text())["law"]
    a, b = law["a"], law["b"]
    assert main(["query", "--fit", str(path), "--layers", "10", "--json"]) == 0
    q = json.loads(capsys.readouterr().out)
    assert q["transition_params"] == pytest.approx(120 * math.exp(2 * a + 2 * b * math.log(10)), rel=1e-12)
    lo, hi = q["ci"]["transition_params"]
    assert lo < q["transition_params"] < hi
    assert main(["query", "--fit", str(path), "--params", "1B"]) == 0
    text = capsys.readouterr().out
    assert f"ln d_x = {a:.4g} + {b:.4g}*ln(L)" in text.splitlines()[0]
    L_opt = (1e9 / (12 * math.exp(2 * a))) ** (1 / (1 + 2 * b))
    assert f"{L_opt:.1f}" in text.splitlines()[4]  # under the law, validation, header and rule lines
    assert main(["query", "--fit", str(path), "--params", "1B", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["optimal_depth"] == pytest.approx(L_opt, rel=1e-12)
    # predict: N* of the unseen pair (3, 6) at L = sqrt(18), var ln N* = 4·[1, ln L]·cov·[1, ln L]ᵀ.
    assert main(["predict", "--fit", str(path), "--pairs", "3,6", "--out", str(root / "pred.json"), "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    L = math.sqrt(18)
    c = law["cov_scaled"] if law["chi2_red"] > 1 else law["cov"]
    g = math.log(L)
    assert p["fit"]["law"]["form"] == LOG_FORMULA
    assert p["predictions"][0]["n_star"] == pytest.approx(12 * L * math.exp(2 * (a + b * g)), rel=1e-12)
    sigma = 2 * math.sqrt(c[0][0] + 2 * g * c[0][1] + g * g * c[1][1])
    assert p["predictions"][0]["sigma_ln_n_star"] == pytest.approx(sigma, rel=1e-12)


def test_figs_prints_the_law_in_its_own_form(log_sweep, capsys, tmp_path):
    """`figs --fit` with a log-depth fit names its law as ln d_x = a + b*ln(L) (it printed '*L'
    for every form: new-contributor check)."""
    root, _ = log_sweep
    path = _log_fit(root, capsys)
    law = json.loads(path.read_text())["law"]
    assert main(["figs", "--results", str(root / "res"), "--fit", str(path), "--out", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert f"law: ln d_x = {law['a']:.4g} + {law['b']:.4g}*ln(L)\n" in out


def test_prediction_of_a_hand_made_log_fit(tmp_path):
    cov = ((0.01, -0.004), (-0.004, 0.002))
    fit = json.loads(_fit_file(tmp_path / "f.json", 3.0, 0.5, cov).read_text())
    p = PR.predict(fit, "f.json", b"raw", [(8, 16)])["predictions"][0]
    L = math.sqrt(128)
    g = math.log(L)
    assert p["d_x"] == pytest.approx(math.exp(3.0) * math.sqrt(L), rel=1e-13)
    assert p["n_star"] == pytest.approx(12 * L * math.exp(6.0) * L, rel=1e-12)
    assert p["sigma_ln_n_star"] == pytest.approx(2 * math.sqrt(0.01 - 0.008 * g + 0.002 * g * g), rel=1e-12)


class SqrtDepth(LawForm):
    """A toy third form, ln d_x = a + b·√L: nothing but its name, formula and regressor."""

    key = "sqrt-depth"
    formula = "ln(d_x) = a + b*sqrt(L)"
    term = "sqrt(L)"
    term_pretty = "√L"

    def g(self, L, xp=SCALAR):
        return L**0.5


def test_a_new_form_is_one_class(tmp_path, monkeypatch, capsys):
    toy = SqrtDepth()
    monkeypatch.setitem(FORMS, toy.key, toy)
    # Fit: exact points recover (a, b).
    L = np.array([2.0, 4.0, 8.0, 16.0])
    f = toy.fit(L, 2.5 + 0.7 * np.sqrt(L), np.full(4, 0.05))
    assert (f.a, f.b) == pytest.approx((2.5, 0.7), abs=1e-8)
    # Projections through the inherited generic bracket: the optimum reproduces the budget.
    law = Law(2.5, 0.7, ((0.01, -0.002), (-0.002, 0.001)), (2.0, 16.0), "toy", "test", form=toy)
    depth = P.optimal_depth(1e8, law)
    assert 12 * depth * math.exp(2 * (2.5 + 0.7 * math.sqrt(depth))) == pytest.approx(1e8, rel=1e-10)
    got = P.optimal_depth_samples(1e8, np.array([2.5, 2.4]), np.array([0.7, 0.8]), form=toy)
    assert got[0] == pytest.approx(depth, rel=1e-9)
    assert got[1] == pytest.approx(P.optimal_depth(1e8, Law(2.4, 0.8, None, None, "t", "t", form=toy)), rel=1e-9)
    assert toy.depth_at_ln_width(2.5 + 0.7 * 3.0, 2.5, 0.7) == pytest.approx(9.0, rel=1e-10)
    # A fit file of the form is read, queried and described as that form.
    path = _fit_file(tmp_path / "toy.json", 2.5, 0.7, ((0.01, -0.002), (-0.002, 0.001)), toy.formula)
    assert law_from_fit_dict(json.loads(path.read_text()), "toy").form is toy
    assert main(["query", "--fit", str(path), "--layers", "9", "--json"]) == 0
    q = json.loads(capsys.readouterr().out)
    assert q["transition_params"] == pytest.approx(108 * math.exp(2 * (2.5 + 2.1)), rel=1e-12)
    assert q["ci"] is not None and q["ci"]["valid_fraction"] == 1.0
    assert form_named("sqrt-depth") is toy


def test_unknown_forms_are_one_line_errors(tmp_path, capsys):
    path = _fit_file(tmp_path / "odd.json", 3.0, 0.5, ((0.01, 0.0), (0.0, 0.001)), "ln(d_x) = a + b*L^2")
    for argv in (["query", "--fit", str(path), "--params", "1B"],
                 ["predict", "--fit", str(path), "--pairs", "3,6", "--out", str(tmp_path / "p.json")],
                 ["fit", "--results", str(tmp_path), "--law-form", "quadratic-depth"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("depthwidth: error:") and err.count("\n") == 1 and "Traceback" not in err
        assert "unknown law form 'ln(d_x) = a + b*L^2'" in err or "--law-form must be one of" in err
    assert not (tmp_path / "p.json").exists()


def test_estimators_refit_the_fits_form(log_sweep, capsys):
    root, _ = log_sweep
    rc = main(["fit", "--results", str(root / "res"), "--out", str(root / "e.json"), "--law-form", "log-depth",
               "--bootstrap", "200", "--estimators"])
    assert rc == 0
    assert "claims about 0.0555 and ln 3: none" in capsys.readouterr().out
    est = json.loads((root / "e.estimators.json").read_text())
    fit = json.loads((root / "e.json").read_text())
    assert est["form"] == LOG_FORMULA
    rows = {r["estimator"]: r for r in est["rows"]}
    assert rows["paired bootstrap (the fit)"]["b"] == fit["law"]["b"]
    # Leaving out (16, 32): the WLS of the form on the other three points, by the normal equations in ln L.
    rest = [p for p in fit["points"] if (p["L_s"], p["L_d"]) != (16, 32)]
    f = LOG.fit([p["L"] for p in rest], [p["ln_d_x"] for p in rest], [p["sigma_ln_d_x"] for p in rest])
    assert rows["leave out (16,32)"]["b"] == pytest.approx(f.b, rel=1e-12)
    assert all(r["contains_paper"] is None and r["contains_ln3"] is None for r in est["rows"])
    assert all(0.3 < r["b"] < 0.7 for r in est["rows"] if r["b"] is not None)  # every row sees b ≈ 0.5
