"""The answerable range of a law (projections.answerable): one policy for --params, --layers,
--shape and predict, with the exact lines a user sees (docs/guide/query.md, "What query answers").
Each case is from a fresh-user review of the limits."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.fits import projections as P
from depthwidth.fits.law import Law, levine2020, load_law

LAW_LONG = "results/law-long/fit.json"  # committed; linear form, fitted on depths 1.41-5.66
ERR = "depthwidth: error: "
WHY_LEVINE = ("1,000x the 1T to which Levine et al. 2020 extrapolate it from depths 6-48; further out the depth and "
              "width would be the line stretched past any evidence")
SMALLEST = ("is below the smallest budget law levine2020 answers, 319,307 parameters: the size at which one layer "
            "is optimal (no network has fewer layers)\n")


def _err(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    return out.err


def _ok(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture
def log_fit(tmp_path):
    """results/law-long fitted with --law-form log-depth (its a, b, cov and depth range)."""
    law = {"form": "ln(d_x) = a + b*ln(L)", "a": 3.156128430251062, "b": 0.5620009627173211,
           "cov": [[0.0015793714502261244, -0.004105495856799518], [-0.004105495856799518, 0.011574579785286634]],
           "chi2_red": 0.27332123628288285, "dof": 1, "depth_range": [1.4142135623730951, 5.656854249492381]}
    f = tmp_path / "fit-log.json"
    f.write_text(json.dumps({"format": "depthwidth-fit", "version": 1, "status": "ok", "law": law}))
    return str(f)


def test_a_budget_below_one_layer_names_the_exact_smallest(capsys):
    # 318K, 319K and 319.3K said "its optimal depth there is 1.00 layers, under one layer"; 1e-3,
    # 1e-300 and 5e-324 said "too small" without the minimum. One message now, with the exact one.
    for text, shown in (("318K", "318,000"), ("319.3K", "319,300"), ("319306", "319,306"), ("1e-3", "0.001"),
                         ("1e-300", "1e-300"), ("5e-324", "5e-324"), ("12", "12")):
        assert _err(capsys, "query", "--params", text) == f"{ERR}budget {shown} {SMALLEST}"
    assert "1.0*" in _ok(capsys, "query", "--params", "319307")  # the minimum it names is answered
    # session 9 fresh-user pass: a decimal comma ('1,3B') is two budgets; the error now says so
    assert _err(capsys, "query", "--params", "1,3B") == (
        f"{ERR}budget 1 {SMALLEST[:-1]}; in --params a comma separates budgets: 1.3 billion is 1.3B\n")
    assert _err(capsys, "query", "--params", "1000", "--vocab", "50257") == (
        f"{ERR}budget 1,000 is below the smallest budget law levine2020 answers, 8,517,343 parameters with vocab "
        "50257: the size at which one layer is optimal (no network has fewer layers)\n")


def test_layers_past_the_largest_budget_are_refused_with_the_deepest_answered(capsys):
    # --layers 1000 printed 4.6e+56 parameters, 5314 printed 2.25e+265, 154 gave 1.17e15
    for L, size in (("1000", "4.599e+56"), ("5314", "2.248e+265"), ("154", "1.168e+15")):
        assert _err(capsys, "query", "--layers", L) == (
            f"{ERR}depth {L} (optimal at {size} parameters) is above the largest budget law levine2020 answers, "
            f"1e+15 parameters: {WHY_LEVINE}; the deepest depth it answers is 152.68 layers\n")
    assert "1e+15" in _ok(capsys, "query", "--layers", "152.68")  # the depth it names is answered
    assert P.optimal_depth(1e15, levine2020()) == pytest.approx(152.68, abs=0.005)


def test_a_shape_outside_the_range_is_refused_as_its_budget_is(capsys):
    # --shape 1x1 and 1000x1 answered "opt. depth 0.0*, L/L_opt 23813.42" for 12 parameters
    assert _err(capsys, "query", "--shape", "1x1") == f"{ERR}shape 1x1 (12 parameters) {SMALLEST}"
    assert _err(capsys, "query", "--shape", "1000x1") == f"{ERR}shape 1000x1 (12,000 parameters) {SMALLEST}"
    assert _err(capsys, "query", "--layers", "1", "--width", "1") == f"{ERR}shape 1x1 (12 parameters) {SMALLEST}"
    assert _err(capsys, "query", "--shape", "100x1e7").startswith(
        f"{ERR}shape 100x1e+07 (1.2e+17 parameters) is above the largest budget law levine2020 answers, 1e+15")
    # in size but deeper than any depth answered: the law's width at that depth is past the limit
    assert _err(capsys, "query", "--shape", "160x1000").startswith(
        f"{ERR}shape 160x1000: depth 160 (optimal at 2.362e+15 parameters) is above the largest budget")


def test_the_reason_is_worded_for_the_law_in_use(capsys):
    # a fit file was told "(fitted on depths 6-48)", the published law's depths
    assert _err(capsys, "query", "--fit", LAW_LONG, "--params", "1e30") == (
        f"{ERR}budget 1e+30 is above the largest budget law {LAW_LONG} answers, 1e+15 parameters: the limit of every "
        "law, 1,000x the 1T to which Levine et al. 2020 extrapolate theirs; this one was fitted on depths 1.41-5.66; "
        "further out the depth and width would be the line stretched past any evidence\n")
    assert _err(capsys, "query", "--params", "1e16") == (
        f"{ERR}budget 1e+16 is above the largest budget law levine2020 answers, 1e+15 parameters: {WHY_LEVINE}\n")


def test_a_fitted_law_answers_up_to_100x_its_deepest_depth(capsys, log_fit):
    # the log-depth fit answered 183,394 layers at 1e15, the budget limit alone
    why = ("4,645,517,985 parameters: there its optimal depth is 565.7 layers, 100x the deepest it was fitted on "
           "(depths 1.41-5.66); further out the depth and width would be the line stretched past any evidence")
    assert _err(capsys, "query", "--fit", log_fit, "--params", "1e15") == (
        f"{ERR}budget 1e+15 is above the largest budget law {log_fit} answers, {why}\n")
    assert _err(capsys, "query", "--fit", log_fit, "--layers", "600") == (
        f"{ERR}depth 600 (optimal at 5.265e+09 parameters) is above the largest budget law {log_fit} answers, {why}; "
        "the deepest depth it answers is 565.68 layers\n")
    assert "565.68*" in _ok(capsys, "query", "--fit", log_fit, "--layers", "565.68")
    assert "565.7*" in _ok(capsys, "query", "--fit", log_fit, "--params", "4645517985")
    row = _ok(capsys, "query", "--fit", log_fit, "--params", "1.3B").splitlines()[4]  # after the validation line
    assert row.split()[:2] == ["1.3B", "310.6*"]  # docs/guide/query.md: 310 layers, marked extrapolated


def test_queries_refuse_exactly_where_the_budget_query_does():
    # --layers L is refused iff --params N_tot(L) is: the same range read through the law
    @settings(max_examples=60, deadline=None)
    @given(a=st.floats(3.0, 6.0), b=st.floats(0.02, 0.3), deepest=st.floats(2.0, 50.0), L=st.floats(1.0, 3000.0),
           vocab=st.sampled_from([0, 50257]))
    def check(a, b, deepest, L, vocab):
        law = Law(a, b, None, (1.0, deepest), "h", "h")
        ln_n = law.form.ln_size(L, a, b, vocab)
        lim = P.answerable(law, vocab)
        if abs(ln_n - math.log(lim["max_budget"])) < 1e-9:
            return  # on the limit itself: both accept within the slack
        try:
            P.query_depth(L, law, vocab=vocab)
            depth_ok = True
        except UserError:
            depth_ok = False
        try:
            P.check_budget(math.exp(min(ln_n, 700.0)), law, vocab)  # e^700: past every limit, as N is
            budget_ok = True
        except UserError:
            budget_ok = False
        assert depth_ok == budget_ok, (ln_n, lim)

    check()


def test_predict_refuses_a_transition_no_experiment_could_test(capsys, tmp_path):
    # predict --pairs 100,200 wrote a pre-registered N* of 3.67e+28
    out = tmp_path / "p.json"
    assert _err(capsys, "predict", "--fit", LAW_LONG, "--pairs", "3,6", "100,200", "--out", str(out)) == (
        f"{ERR}pair (100,200): predicted N* = 3.67e+28 parameters, above 1e+15 (the largest budget query answers, "
        "1,000x the 1T to which Levine et al. 2020 extrapolate their law): no experiment could test it; predict "
        "shallower pairs\n")
    assert not out.exists()
    # further out the interval itself passes the largest float: that check comes first, in one line too
    for pair, power in (("1000,2000", "~10^233"), ("5000,10000", "~10^1140")):
        err = _err(capsys, "predict", "--fit", LAW_LONG, "--pairs", pair, "--out", str(out))
        assert err.startswith(f"{ERR}--pairs {pair}: the law {LAW_LONG} puts N* at {power} parameters") and not out.exists()
    assert main(["predict", "--fit", LAW_LONG, "--pairs", "30,60", "--out", str(out)]) == 0  # 1.54T: testable


def test_a_level_is_printed_with_every_digit(capsys, log_fit):
    # --ci-level 0.9999999 printed "intervals: 100% Monte Carlo"
    lines = _ok(capsys, "query", "--fit", log_fit, "--params", "1B", "--ci-level", "0.9999999").splitlines()
    assert "99.99999% CI depth" in lines[2] and "99.99999% CI width" in lines[2]  # lines[1]: validation
    assert lines[-2].startswith("intervals: 99.99999% Monte Carlo,")


def test_ratios_below_one_keep_two_significant_digits(capsys, tmp_path):
    # d/L printed 0 for a ratio of 0.12 (a log-depth law's optimum deeper than wide)
    from depthwidth.fits.cli import _ratio

    assert (_ratio(0.1234), _ratio(0.99), _ratio(1.0), _ratio(4839.2)) == ("0.12", "0.99", "1", "4839")
    law = {"form": "ln(d_x) = a + b*ln(L)", "a": 1.0, "b": 0.5, "cov": None, "depth_range": [1.0, 10.0]}
    f = tmp_path / "deep.json"
    f.write_text(json.dumps({"format": "depthwidth-fit", "version": 1, "status": "ok", "law": law}))
    q = P.query_budget(1e6, load_law(str(f)))
    row = _ok(capsys, "query", "--fit", str(f), "--params", "1M").splitlines()[4].split()  # after the validation line
    assert row[3] == f"{q['aspect_ratio']:.2g}" and q["aspect_ratio"] < 1


def test_the_figure_draws_only_what_query_answers():
    from depthwidth.paper_figs.figures import _law_curve

    law = Law(3.0, 0.5, None, (1.0, 2.0), "t", "t")  # answers depths up to 200 layers
    top = P.answerable(law)["max_budget"]
    L, _, _ = _law_curve(law, [1e5, top * 0.99, top * 1.01])
    assert math.isfinite(L[0]) and math.isfinite(L[1]) and math.isnan(L[2])
