"""`depthwidth query` (and `fit` argument errors): JSON keys, values, one-line errors, light imports."""

import json
import math
import subprocess
import sys
import time

import pytest
from scipy.special import lambertw

from depthwidth.cli import main

A, B = 5.039, 0.0555


def lambert_depth(N):
    # N = 12 L e^(2a+2bL)  <=>  L = W(2b N e^(-2a)/12)/(2b)  (independent of the brentq solver)
    return float(lambertw(2 * B * N * math.exp(-2 * A) / 12).real) / (2 * B)


def query_json(capsys, *args):
    rc = main(["query", *args, "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert out.err == ""
    return json.loads(out.out)


def test_query_params_single(capsys):
    q = query_json(capsys, "--params", "175B")
    L = lambert_depth(175e9)
    assert q["optimal_depth"] == pytest.approx(L, rel=1e-10)
    assert q["optimal_width"] == pytest.approx(math.exp(A + B * L), rel=1e-10)
    assert isinstance(q["optimal_depth"], float) and isinstance(q["optimal_width"], float)
    assert q["ci"] is None and q["ci_note"]
    assert (q["rounded"]["n_layer"], q["rounded"]["d_model"]) == (81, 13440)  # see test_fits_projections
    assert q["extrapolated"] is True  # 80.5 layers is beyond the paper's 6..48


def test_query_params_list_is_a_json_list_and_a_table(capsys):
    qs = query_json(capsys, "--params", "125M,1.3B,175B,1T")
    assert isinstance(qs, list) and [q["budget"] for q in qs] == [125e6, 1.3e9, 175e9, 1e12]
    for q in qs:
        assert q["optimal_depth"] == pytest.approx(lambert_depth(q["budget"]), rel=1e-10)
    assert main(["query", "--params", "125M,1.3B,175B,1T"]) == 0
    text = capsys.readouterr().out
    # 1T: 95x29696 (+0.53%, d/L 312.6: 0.0053 + 0.0015 in log) beats 95x29568 (-0.33%, d/L 311.2:
    # 0.0033 + 0.0059); 1.3B: 40x1664 (+2.2%), not 42x1664 (+7.3%), the width rounded at round(42.2)
    assert "opt. depth" in text and "1T" in text and "95x29696" in text and "40x1664" in text
    assert "rounded: the shape within 2.5% of the budget nearest it and the optimal d/L (least sum of log distances)" in text


def test_query_layers_and_verdict(capsys):
    q = query_json(capsys, "--layers", "96")
    assert q["transition_params"] == pytest.approx(12 * 96 * math.exp(2 * A + 2 * B * 96), rel=1e-14)
    v = query_json(capsys, "--layers", "96", "--width", "12288")
    assert v["verdict"] == "too deep"
    assert v["optimal_depth"] == pytest.approx(lambert_depth(12 * 96 * 12288**2), rel=1e-10)
    shapes = query_json(capsys, "--shape", "12x768,96x12288")
    assert [s["verdict"] for s in shapes] == ["too wide", "too deep"]  # 12/23.0 = 0.52; 96/80.5 = 1.19


def test_query_vocab_subtracts_embedding(capsys):
    q = query_json(capsys, "--params", "175B", "--vocab", "50257")
    d, L = q["optimal_width"], q["optimal_depth"]
    assert 12 * L * d * d + 50257 * d == pytest.approx(175e9, rel=1e-12)
    assert q["embedding_params"] == pytest.approx(50257 * d, rel=1e-12)
    t = query_json(capsys, "--layers", "96", "--vocab", "50257")
    assert t["transition_params_total"] == pytest.approx(t["transition_params"] + 50257 * t["transition_width"])


@pytest.mark.parametrize("argv, message", [
    (["query", "--params", "0"], "must be positive"),
    (["query", "--params=-5B"], "must be positive"),
    (["query", "--params", "-5B"], "--params must be positive, got '-5B'"),
    (["query", "--params", "lots"], "cannot parse"),
    (["query", "--params", ","], "is empty"),
    (["query", "--params", "1B", "--fit", "kaplan2020"], "unknown law 'kaplan2020'"),
    (["query", "--width", "128"], "one of the arguments"),
    (["query", "--params", "1B", "--width", "128"], "--width needs --layers"),
    (["query", "--layers", "6,12", "--width", "128"], "one --layers value"),
    (["query", "--shape", "96by12288"], "must look like LxD"),
    (["query", "--params", "1B", "--round-width", "0"], "--round-width"),
    (["query", "--params", "1B", "--ci-level", "95"], "between 0 and 1"),
    (["query", "--params", "1B", "--tolerance", "-1"], "--tolerance"),
    (["query", "--params", "1B", "--vocab", "x"], "cannot parse"),
    (["query", "--params", "1000", "--vocab", "50257"], "below the smallest budget law levine2020 answers, 8,517,343"),
    # Issue 10: OverflowError tracebacks, and a 0.0-layer answer for a 10-parameter budget; since
    # then refused by the answerable range (projections.answerable), before anything overflows.
    (["query", "--layers", "20000"], "above the largest budget law levine2020 answers"),
    (["query", "--layers", "1e6"], "above the largest budget law levine2020 answers"),
    (["query", "--shape", "100000x128"], "shape 100000x128: depth 100000 (optimal at e^1.112e+04 parameters) is above"),
    (["query", "--params", "10"], "budget 10 is below the smallest budget"),
    (["query", "--params", "1e300"], "above the largest budget law levine2020 answers, 1e+15 parameters"),  # was 6,032 layers
    (["query", "--params", "1e30"], "above the largest budget law levine2020 answers, 1e+15 parameters"),  # 454 x 1.4e13
    (["fit", "--results", "/nonexistent/results"], "results directory not found"),
    (["fit", "--results", ".", "--bootstrap", "1"], "--bootstrap"),
    # would overwrite RESULTS/fit.json (the fit of all records) with a matched-cell fit
    (["fit", "--results", ".", "--cells-of", "."], "--cells-of needs --out"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_malformed_fit_files_exit_2(tmp_path, capsys):
    cases = {"notjson.json": "{", "array.json": "[1, 2]",
             "nolaw.json": json.dumps({"format": "depthwidth-fit", "version": 1, "status": "ok"}),
             "badcov.json": json.dumps({"format": "depthwidth-fit", "version": 1, "status": "ok",
                                        "law": {"a": 1.0, "b": 0.1, "cov": [[1.0, 5.0], [5.0, 1.0]]}})}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert main(["query", "--params", "1B", "--fit", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("depthwidth: error:") and err.count("\n") == 1


def test_query_path_imports_nothing_heavy():
    # Run the query in a fresh interpreter and list the heavy modules it loaded.
    code = ("import sys; from depthwidth.cli import main; rc = main(['query', '--params', '175B', '--json']); "
            "print(sorted(m for m in ('pandas', 'matplotlib', 'jax', 'flax', 'torch', 'scipy', 'numpy') "
            "if m in sys.modules))")  # numpy: only for intervals, which the built-in law has none of
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_query_answers_fast_after_import():
    # "Instantly after import": once scipy.optimize is loaded, a budget query costs milliseconds.
    from depthwidth.fits.law import levine2020
    from depthwidth.fits.projections import query_budget

    query_budget(1e9, levine2020())  # first call loads scipy.optimize
    t0 = time.process_time()
    for N in (125e6, 1.3e9, 175e9, 1e12):
        query_budget(N, levine2020())
    assert time.process_time() - t0 < 0.1


def test_a_poor_fit_also_prints_b_under_the_scaled_and_bootstrap_conventions():
    from depthwidth.fits.cli import _other_b_intervals

    # cov_scaled[1][1] = 0.01 -> half width 1.96 * 0.1; chi2_red > 1 so the scaled line is printed.
    law = {"b": 0.2, "dof": 1, "chi2_red": 3.0, "cov_scaled": [[1.0, 0.0], [0.0, 0.01]],
           "bootstrap": {"ci95": {"b": [0.03, 0.25]}, "replicates": 900},
           "b_vs": {"paper": 0.0555, "theory_ln3": 1.0986}}
    lines = _other_b_intervals(law)
    assert len(lines) == 2
    assert "b in [0.0040, 0.3960], contains 0.0555, excludes ln 3" in lines[0]
    assert "900 replicates" in lines[1] and "b in [0.0300, 0.2500], contains 0.0555, excludes ln 3" in lines[1]
    # A good fit (chi2_red <= 1) keeps only the bootstrap line; no bootstrap, no line.
    assert len(_other_b_intervals({**law, "chi2_red": 0.8})) == 1
    assert _other_b_intervals({**law, "chi2_red": 0.8, "bootstrap": None}) == []


def test_the_deepest_depth_the_overflow_message_names_is_accepted(capsys):
    from depthwidth.errors import UserError
    from depthwidth.fits.law import levine2020
    from depthwidth.fits.projections import check_depth

    law = levine2020()
    deepest = (300.0 - law.a) / law.b
    with pytest.raises(UserError) as e:
        check_depth(math.floor(deepest) + 1, law)
    named = int(str(e.value).rsplit("up to ", 1)[1].split()[0].replace(",", ""))
    assert named == math.floor(deepest)
    check_depth(named, law)  # the depth it names is accepted


def test_budgets_above_1e15_are_refused_with_the_limit_and_why(capsys):
    # fresh-user check: --params 1e30 printed a 454-layer, 1.4e13-wide "optimal" model
    assert main(["query", "--params", "1e30"]) == 2
    assert capsys.readouterr().err == (
        "depthwidth: error: budget 1e+30 is above the largest budget law levine2020 answers, 1e+15 parameters: "
        "1,000x the 1T to which Levine et al. 2020 extrapolate it from depths 6-48; further out the depth and "
        "width would be the line stretched past any evidence\n")
    assert main(["query", "--params", "1.0001e15"]) == 2 and "budget 1.0001e+15 is above" in capsys.readouterr().err
    q = query_json(capsys, "--params", "1e15")  # the limit itself is answered
    assert q["optimal_depth"] == pytest.approx(lambert_depth(1e15), rel=1e-10)
    assert q["optimal_depth"] == pytest.approx(152.7, abs=0.05)  # the "153 layers" docs/guide/query.md names


def test_the_params_help_states_the_budget_range(capsys):
    from depthwidth.fits.law import levine2020
    from depthwidth.fits.projections import MAX_BUDGET, transition_params

    with pytest.raises(SystemExit):
        main(["query", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ("from the size at which one layer is optimal (319,307 for levine2020) up to 1e15 (1,000x the 1T the "
            "paper extrapolates to) and, for a law fitted on depths up to D, up to the size at which 100*D layers "
            "are optimal; others are refused (docs/guide/query.md)") in help_text
    assert "refused where that size is past the largest budget --params answers" in help_text
    assert "refused where the size 12*L*D^2 or the depth L is outside what --params and --layers answer" in help_text
    assert math.ceil(transition_params(1.0, levine2020())) == 319307 and MAX_BUDGET == 1e15
    assert main(["query", "--params", "320K"]) == 0
    assert main(["query", "--params", "318K"]) == 2 and "budget 318,000 is below" in capsys.readouterr().err


def _fit_file(tmp_path, chi2_red, dof=1):
    # cov_scaled = cov * chi2_red (lawfit's Birge ratio), written as a fit file would hold it
    cov = [[0.04, -0.01], [-0.01, 0.0025]]
    law = {"a": 3.0, "b": 0.2, "cov": cov, "cov_scaled": [[v * max(1.0, chi2_red) for v in r] for r in cov],
           "chi2_red": chi2_red, "dof": dof, "depth_range": [1.0, 6.0]}
    f = tmp_path / f"fit-{chi2_red}.json"
    f.write_text(json.dumps({"format": "depthwidth-fit", "version": 1, "status": "ok", "law": law}))
    return str(f)


def test_query_intervals_widen_with_a_poor_fit_by_default(tmp_path, capsys):
    # A fit whose points scatter 4x more than their errors (chi2_red 4): the default (--cov auto)
    # uses cov_scaled, so the depth interval is wider than with --cov absolute, and equals --cov scaled.
    poor = _fit_file(tmp_path, 4.0)
    auto = query_json(capsys, "--params", "1M", "--fit", poor)
    absolute = query_json(capsys, "--params", "1M", "--fit", poor, "--cov", "absolute")
    scaled = query_json(capsys, "--params", "1M", "--fit", poor, "--cov", "scaled")
    assert auto["ci"]["optimal_depth"] == scaled["ci"]["optimal_depth"]
    lo, hi = auto["ci"]["optimal_depth"]
    alo, ahi = absolute["ci"]["optimal_depth"]
    assert lo < alo and hi > ahi
    # fresh-user check: the line read "intervals: covariance scaled, auto: chi2_red 4 > 1"
    main(["query", "--params", "1M", "--fit", poor])
    assert capsys.readouterr().out.splitlines()[-2] == (
        "intervals: 95% Monte Carlo, (a, b) drawn from a normal with the fit's covariance x max(1, chi2_red); "
        "--cov auto takes that one when chi2_red > 1 (here 4: the points scatter more than their error bars)")
    # A good fit (chi2_red <= 1) keeps the absolute covariance.
    good = _fit_file(tmp_path, 0.5)
    assert query_json(capsys, "--params", "1M", "--fit", good)["ci"] == \
        query_json(capsys, "--params", "1M", "--fit", good, "--cov", "absolute")["ci"]
    main(["query", "--params", "1M", "--fit", good, "--ci-level", "0.9"])
    assert capsys.readouterr().out.splitlines()[-2] == (
        "intervals: 90% Monte Carlo, (a, b) drawn from a normal with the fit's absolute covariance (the points' "
        "error bars alone); --cov auto takes that one unless chi2_red > 1")
    main(["query", "--layers", "4", "--fit", poor, "--cov", "absolute"])
    assert capsys.readouterr().out.splitlines()[-1] == (
        "intervals: 95% Monte Carlo, (a, b) drawn from a normal with the fit's absolute covariance (the points' "
        "error bars alone), as --cov absolute asks")


def test_the_rounding_multiple_shrinks_to_a_quarter_of_a_small_width():
    from depthwidth.fits.law import Law
    from depthwidth.fits.projections import query_budget

    law = Law(a=3.0, b=0.2, cov=None, depth_range=None, name="t", source="t")
    q = query_budget(1e5, law)  # optimal width about 50: x128 would make it 128 wide (+550% size)
    w = q["optimal_width"]
    m = q["rounded"]["multiple"]
    assert m <= w / 4 < 2 * m and 128 % m == 0  # the largest halving of 128 within a quarter
    assert abs(q["rounded"]["budget_rel_error"]) < 0.3
    assert query_budget(1e5, law, n_head=3)["rounded"]["multiple"] % 3 == 0


def test_fit_on_the_cells_of_another_sweep(tmp_path, capsys):
    # Two synthetic sweeps: B has only the depth-2 and depth-4 cells of A's three depths;
    # `fit --cells-of B` on A keeps exactly A's records in those cells.
    from depthwidth.fits.synthetic import write_synthetic
    from depthwidth.fits.table import load_table

    write_synthetic(tmp_path / "A", depths=(2, 4, 8), n_seeds=2, per_decade=3)
    write_synthetic(tmp_path / "B", depths=(2, 4), n_seeds=1, per_decade=3, seed=1)
    a, b = load_table(tmp_path / "A"), load_table(tmp_path / "B")
    cells = lambda t: {(int(L), int(d)) for L, d in zip(t.cells["n_layer"], t.cells["d_model"])}  # noqa: E731
    both = load_table(tmp_path / "A", cells_of=tmp_path / "B")
    assert cells(both) == cells(a) & cells(b) and cells(both) < cells(a)
    assert len(both.runs) == 2 * len(cells(both)) and both.unfinished == []
    assert main(["fit", "--results", str(tmp_path / "A"), "--cells-of", str(tmp_path / "B"),
                 "--bootstrap", "50", "--out", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert f"only the cells that {tmp_path / 'B'} also has" in out
    stored = json.loads((tmp_path / "f.json").read_text())["table"]
    assert stored["n_cells"] == len(cells(both))
    assert (stored["results"], stored["cells_of"]) == ("A", "B")  # relative to the fit file's folder, as --also


def test_a_missing_interval_says_why_in_the_text(tmp_path, capsys):
    # b = 0.02 ± 0.05: many samples have b <= 0 (no optimum), fewer usable than 95%: the columns
    # show "-" and the text now says why (it was only in --json).
    law = {"a": 4.0, "b": 0.02, "cov": [[0.01, 0.0], [0.0, 0.0025]], "cov_scaled": None, "chi2_red": None,
           "dof": 0, "depth_range": [1.0, 6.0]}
    f = tmp_path / "flat.json"
    f.write_text(json.dumps({"format": "depthwidth-fit", "version": 1, "status": "ok", "law": law}))
    q = query_json(capsys, "--params", "100K", "--fit", str(f))
    frac = q["ci"]["valid_fraction"]
    assert q["ci"]["optimal_depth"] is None and 0 < frac < 0.95
    assert main(["query", "--params", "100K", "--fit", str(f)]) == 0
    out = capsys.readouterr().out
    assert f"note: no 95% interval: only {frac:.1%} of the (a, b) samples have a solution" in out


def test_fit_on_some_seeds_only(tmp_path, capsys):
    # `fit --seeds 0` on a 2-seed sweep: the table holds only seed 0's records (one per cell)
    from depthwidth.fits.synthetic import write_synthetic
    from depthwidth.fits.table import load_table

    write_synthetic(tmp_path / "A", depths=(2, 4), n_seeds=2, per_decade=3)
    full, one = load_table(tmp_path / "A"), load_table(tmp_path / "A", seeds=[0])
    assert set(full.runs["seed"]) == {0, 1} and set(one.runs["seed"]) == {0}
    assert len(one.runs) == len(full.cells) == len(one.cells) and (one.cells["n_seeds"] == 1).all()
    for key, losses in one.losses.items():
        seeds = full.cells.set_index(["n_layer", "d_model"]).loc[key, "seeds"]
        assert losses == [full.losses[key][seeds.index(0)]]
    assert main(["fit", "--results", str(tmp_path / "A"), "--seeds", "0"]) == 2  # would overwrite A's fit.json
    assert "--seeds needs --out" in capsys.readouterr().err
    assert main(["fit", "--results", str(tmp_path / "A"), "--seeds", "x", "--out", str(tmp_path / "f.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    for bad, needle in (("0,7", "no training records of seed 7 in"), ("", "--seeds is empty")):
        assert main(["fit", "--results", str(tmp_path / "A"), "--seeds", bad, "--out", str(tmp_path / "g.json")]) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err
    assert main(["fit", "--results", str(tmp_path / "A"), "--seeds", "0", "--bootstrap", "50",
                 "--out", str(tmp_path / "f.json")]) == 0
    assert "(only seeds 0)" in capsys.readouterr().out
    assert json.loads((tmp_path / "f.json").read_text())["table"]["seeds"] == [0]


def test_fit_prints_the_crossing_fraction_without_rounding_up_to_100_percent():
    from depthwidth.fits.transitions import format_fraction

    assert [format_fraction(f) for f in (1.0, 0.998, 0.9996, 0.95, 0.9499, None)] == \
        ["100%", "99.8%", "99.9%", "95.0%", "94.9%", "-"]
