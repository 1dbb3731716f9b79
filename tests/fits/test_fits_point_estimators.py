"""Transition points under several estimators (fits.point_estimators): exact seed enumeration
against brute force, the smooth curve against known parameters, per-seed N* against the crossing
of one seed's losses, and the forms figure (paper_figs.forms_fig) from the committed files."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from depthwidth.cli import main
from depthwidth.fits import point_estimators as P
from depthwidth.fits.table import load_table
from depthwidth.fits.transitions import _DepthData, find_crossing, paired_means_of_draws, union_seeds

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table36():
    return load_table(ROOT / "results" / "predict-36")


def test_compositions_are_the_multinomial():
    comps = list(P.compositions(4))
    assert len(comps) == math.comb(7, 4)
    assert sum(p for _, p in comps) == pytest.approx(1.0)
    assert all(sum(c) == 4 for c, _ in comps)
    assert dict((tuple(c), p) for c, p in comps)[(4, 0, 0, 0)] == pytest.approx(4**-4)


def test_exact_share_equals_brute_force_over_every_draw(table36):
    data = {L: _DepthData(table36, L) for L in (3, 6)}
    seeds = union_seeds(data)
    draws = np.array(list(itertools.product(seeds, repeat=len(seeds))))  # all n^n ordered draws
    means = paired_means_of_draws(data, draws)
    for name in ("registered", "linear"):
        curve, which = P._RULES[name]
        hits = [find_crossing(data[3].x, means[3][r], data[6].x, means[6][r], curve, which).x_star is not None
                for r in range(len(draws))]
        assert P.exact_share(name, data, 3, 6) == pytest.approx(np.mean(hits), abs=1e-12)


def test_smooth_curve_recovers_a_power_law():
    x = np.log([2e4, 4e4, 8e4, 1.6e5, 3.2e5])
    y = 1.3 + np.exp(3.0 - 0.35 * x)
    E, lnA, alpha = P.smooth_curve(x, y)
    assert (E, lnA, alpha) == pytest.approx((1.3, 3.0, 0.35), rel=1e-4)
    assert P.smooth_curve(x[:2], y[:2]) is None
    # two such curves cross where E_d + A_d N^-a_d = E_s + A_s N^-a_s
    ps, pd_ = np.array([1.3, 3.0, 0.35]), np.array([1.25, 3.5, 0.38])
    x_star = P.smooth_crossing(ps, x, pd_, x)
    f = lambda v: P._power_law(v, *pd_) - P._power_law(v, *ps)  # noqa: E731
    assert abs(f(x_star)) < 1e-10 and x[0] < x_star < x[-1]


def test_per_seed_and_table_values(table36):
    out = P.point_estimators(table36, bootstrap=20)
    assert out["seeds"] == [0, 1, 2] and {r["estimator"] for r in out["rows"]} == set(P.ESTIMATORS)
    reg = next(r for r in out["rows"] if r["estimator"] == "registered")
    data = {L: _DepthData(table36, L) for L in (3, 6)}
    for s in (0, 1, 2):
        ys = [np.array([row[dd.seeds[i].index(s)] for i, row in enumerate(dd.losses)]) for dd in (data[3], data[6])]
        c = find_crossing(data[3].x, ys[0], data[6].x, ys[1])
        assert reg["per_seed"][str(s)] == pytest.approx(math.exp(c.x_star))
    fit = json.loads((ROOT / "results" / "predict-36" / "fit.json").read_text())
    assert reg["N_star"] == pytest.approx(fit["points"][0]["N_star"], rel=1e-9)
    assert reg["share_mc_error"] == pytest.approx(math.sqrt(reg["share"] * (1 - reg["share"]) / 20))


def test_forms_figure_from_the_committed_files(tmp_path, capsys):
    cmp = ROOT / "results" / "law-pooled" / "fit.forms.json"
    pred = ROOT / "results" / "predictions" / "forms-510.json"
    assert main(["forms-fig", "--comparison", str(cmp), "--prediction", str(pred), "--out", str(tmp_path)]) == 0
    committed = ROOT / "results" / "law-pooled" / "figures" / "fig8_law_forms.png"
    assert (tmp_path / "fig8_law_forms.png").read_bytes() == committed.read_bytes()
    capsys.readouterr()
    assert main(["forms-fig", "--comparison", str(pred), "--out", str(tmp_path)]) == 2
    assert "not a form comparison" in capsys.readouterr().err


def test_the_forms_figure_band_uses_each_forms_exact_derivatives():
    # The band's g = ∂f/∂θ by the complex step equals each form's derivative written out by hand:
    # constant (1), linear (1, L), log (1, ln L), saturating ln d_x = ln c + ln(1 - e^{-L/τ}):
    # (1, -(L/τ) e^{-L/τ} / (1 - e^{-L/τ})) with θ = (ln c, ln τ).
    from depthwidth.fits.compare import form_by_key
    from depthwidth.paper_figs.forms_fig import _jacobian_exact

    L = np.array([1.0, 2.5, 5.0, 10.0, 30.0])
    one = np.ones_like(L)
    tau = math.exp(1.2)
    e = np.exp(-L / tau)
    hand = {"constant": ([0.4], [one]), "linear-depth": ([3.1, 0.18], [one, L]),
            "log-depth": ([3.0, 0.9], [one, np.log(L)]),
            "saturating": ([5.0, 1.2], [one, -(L / tau) * e / (1 - e)])}
    for key, (theta, cols) in hand.items():
        J = _jacobian_exact(form_by_key(key), L, np.array(theta))
        np.testing.assert_allclose(J, np.stack(cols, axis=1), rtol=1e-14, atol=1e-15, err_msg=key)
