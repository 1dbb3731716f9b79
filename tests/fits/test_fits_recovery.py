"""End to end on synthetic record.json files: `depthwidth fit` recovers the known law."""

import json
import math

import numpy as np
import pytest

from depthwidth.cli import main
from depthwidth.fits.synthetic import Surface, write_synthetic
from depthwidth.fits.table import load_table


def run_fit(capsys, results, out, *extra):
    rc = main(["fit", "--results", str(results), "--out", str(out), "--bootstrap", "400", "--json", *extra])
    captured = capsys.readouterr()
    return rc, json.loads(captured.out), captured.err


# The linear surface is scaled (c and noise by the same factor) so that its losses stay below
# 2 ln V: above that a record is diverged (records.diverged_reason) and the table drops it.
@pytest.mark.parametrize("surface, assign", [(Surface(), "geom"), (Surface(a=4.5, b=0.05, c=0.004, noise=0.00015, symmetry="linear"), "arith")])
def test_fit_recovers_the_true_law_inside_its_intervals(tmp_path, capsys, surface, assign):
    info = write_synthetic(tmp_path / "res", surface, depths=(2, 4, 8, 16, 32), n_seeds=3, seed=3,
                           diverged=1, unfinished=1)
    rc, fit, err = run_fit(capsys, tmp_path / "res", tmp_path / "fit.json", "--assign", assign)
    assert rc == 0 and err == ""
    assert json.loads((tmp_path / "fit.json").read_text())["law"] == fit["law"]
    law = fit["law"]
    assert law["n_points"] == 4 and law["dof"] == 2
    assert law["ci95"]["a"][0] < info["a"] < law["ci95"]["a"][1]
    assert law["ci95"]["b"][0] < info["b"] < law["ci95"]["b"][1]
    # The intervals are informative, not vacuous: a few percent of b.
    assert law["stderr"]["b"] < 0.1 * info["b"]
    for p, t in zip(fit["points"], info["true_transitions"]):
        assert (p["L_s"], p["L_d"]) == (t["L_s"], t["L_d"])
        assert abs(p["ln_N_star"] - math.log(t["N_star"])) < 4 * p["sigma_ln_N_star"]
    # Diverged and unfinished runs are listed, never averaged in.
    assert len(fit["table"]["excluded"]) == 5 and len(fit["table"]["unfinished"]) == 1
    assert fit["table"]["n_used"] == info["n_records"]

    # The fit file is a law for query: depth 10 is optimal at 12*10*exp(2a+2b*10).
    rc = main(["query", "--fit", str(tmp_path / "fit.json"), "--layers", "10", "--json"])
    q = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert q["transition_params"] == pytest.approx(120 * math.exp(2 * law["a"] + 20 * law["b"]), rel=1e-12)
    lo, hi = q["ci"]["transition_params"]
    assert lo < q["transition_params"] < hi


def test_one_pair_is_insufficient_a_result_with_exit_0(tmp_path, capsys):
    # Too few crossings is a result, not bad input (issue 9): exit 0, the status says it.
    write_synthetic(tmp_path / "res", Surface(), depths=(4, 8), n_seeds=2, seed=0)
    rc = main(["fit", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "f.json"), "--bootstrap", "50"])
    out = capsys.readouterr().out
    assert rc == 0 and "law: none (status insufficient" in out
    fit = json.loads((tmp_path / "f.json").read_text())
    assert fit["status"] == "insufficient" and fit["law"] is None and len(fit["points"]) == 1
    rc = main(["query", "--fit", str(tmp_path / "f.json"), "--params", "1B"])
    assert rc == 2 and "insufficient" in capsys.readouterr().err


def test_single_seed_cells_cannot_be_weighted_unless_widths_are_resampled(tmp_path, capsys):
    write_synthetic(tmp_path / "res", Surface(), depths=(2, 4, 8), n_seeds=1, seed=0)
    rc, fit, _ = run_fit(capsys, tmp_path / "res", tmp_path / "f.json")
    assert rc == 0 and fit["status"] == "insufficient" and fit["points"] == []
    assert sum("zero or undefined bootstrap error" in w for w in fit["warnings"]) == 2
    rc, fit, _ = run_fit(capsys, tmp_path / "res", tmp_path / "f.json", "--resample", "pooled+widths")
    assert rc == 0 and fit["law"]["n_points"] == 2 and fit["law"]["dof"] == 0
    assert any("have one seed" in w for w in fit["warnings"])


def test_pairs_outside_the_range_are_listed_with_their_side(tmp_path, capsys):
    s = Surface()
    t = s.true_transition(16, 32)
    # Sizes only below the (16, 32) transition: that pair must be reported, not extrapolated.
    write_synthetic(tmp_path / "res", s, depths=(2, 4, 8, 16, 32), n_seeds=2, seed=1,
                    N_range=(s.true_transition(2, 4) / 3, t / 3))
    rc, fit, _ = run_fit(capsys, tmp_path / "res", tmp_path / "f.json")
    assert rc == 0
    (nc,) = fit["no_crossing"]
    assert (nc["L_s"], nc["L_d"], nc["status"]) == (16, 32, "deeper_worse_throughout")
    assert nc["N_star"] is None and nc["N_range"][1] < t
    assert any("(16, 32): deeper_worse_throughout" in w for w in fit["warnings"])
    assert fit["law"]["n_points"] == 3


def test_bootstrap_errors_are_calibrated_on_average(tmp_path):
    # Over independent synthetic realizations, the spread of the estimated ln N* around the truth
    # should match the mean bootstrap sigma (ratio near 1; 3 seeds per cell).
    from depthwidth.fits.transitions import compute_transitions

    s = Surface()
    write_synthetic(tmp_path / "r", s, depths=(4, 8, 16), n_seeds=3, seed=0)
    base = load_table(tmp_path / "r")
    true = [s.true_transition(4, 8), s.true_transition(8, 16)]
    rng = np.random.default_rng(11)
    errs, sig = [], []
    for r in range(16):
        # New seed noise on the same cells: losses = noise-free surface + fresh Normal noise.
        for key in base.losses:
            L, d = key
            base.losses[key] = list(s.loss(12.0 * L * d * d, L) + s.noise * rng.standard_normal(3))
        base.cells["mean"] = [float(np.mean(base.losses[(L, d)])) for L, d in zip(base.cells.n_layer, base.cells.d_model)]
        pts, _ = compute_transitions(base, bootstrap=200, seed=r)
        errs.append([p.ln_N_star - math.log(t) for p, t in zip(pts, true)])
        sig.append([p.sigma_ln_N_star for p in pts])
    ratio = np.std(errs, axis=0, ddof=1) / np.mean(sig, axis=0)
    assert np.all((ratio > 0.6) & (ratio < 1.6)), ratio
    # No bias: the mean error is within 2 standard errors (sd/sqrt(16)) plus 0.02 for the PCHIP
    # interpolation error (< 3e-3 noise-free, see test_fits_transitions).
    assert np.all(np.abs(np.mean(errs, axis=0)) < 2 * np.mean(sig, axis=0) / 4 + 0.02)
