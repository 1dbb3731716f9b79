"""`depthwidth theory ...`: --json keys and values, count syntax, one-line errors with exit 2."""

import json
import math
import subprocess
import sys

import pytest

from depthwidth.cli import main


def run_json(capsys, *argv):
    rc = main(["theory", *argv, "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1  # one JSON object per call
    return json.loads(lines[0])


def test_threshold(capsys):
    assert run_json(capsys, "threshold", "--width", "729")["threshold_depth"] == 6.0  # 3^6
    r = run_json(capsys, "threshold", "--width", "768", "--layers", "12")
    assert r["threshold_depth"] == pytest.approx(math.log(768) / math.log(3))
    assert r["width_at_threshold"] == 531_441  # 3^12
    assert r["regime"] == "depth-inefficient"
    r = run_json(capsys, "threshold", "--layers", "6", "--latex")
    assert r["width_at_threshold"] == 729
    assert r["latex"]["threshold_inverse"] == "d_{x} = 3^{L}"


def test_params_gpt2_small(capsys):
    r = run_json(capsys, "params", "--layers", "12", "--width", "768", "--heads", "12",
                 "--vocab", "50_257", "--context", "1024")  # fmt: skip
    # 12·(12·768² + 13·768) + 2·768; 12·12·768²; 50,257·768 + 1,024·768; sum
    assert r["stack_params"] == 85_056_000
    assert r["kaplan_params"] == 84_934_656
    assert r["embedding_params"] == 39_383_808
    assert r["total_params"] == 124_439_808
    r = run_json(capsys, "params", "--layers", "12", "--width", "768", "--heads", "12",
                 "--vocab", "50257", "--context", "1024", "--untied")  # fmt: skip
    assert r["head_params"] == 38_597_376 and r["total_params"] == 163_037_184


def test_params_text(capsys):
    assert main(["theory", "params", "--layers", "12", "--width", "768", "--heads", "12"]) == 0
    assert "85,056,000" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text,value",
    [("175e9", 175e9), ("175B", 175e9), ("1.3M", 1.3e6), ("1T", 1e12), ("85_056_000", 85_056_000)],
)
def test_budget_syntax(capsys, text, value):
    r = run_json(capsys, "shapes", "--budget", text, "--depths", "12")
    assert r["budget"] == pytest.approx(value)
    # width for 12 layers: sqrt(N / 144), then the nearer whole width by parameter count
    exact = math.sqrt(value / 144)
    assert r["shapes"][0]["d_model_exact"] == pytest.approx(exact)
    assert abs(r["shapes"][0]["d_model"] - exact) <= 1


def test_shapes_family(capsys):
    r = run_json(capsys, "shapes", "--budget", "84_934_656", "--depths", "3,12,27")
    assert [(s["n_layer"], s["d_model"]) for s in r["shapes"]] == [(3, 1536), (12, 768), (27, 512)]
    assert [s["rel_deviation"] for s in r["shapes"]] == [0.0, 0.0, 0.0]
    # rounding to multiples of lcm(64, 12) = 192: 12 layers at 1e8 → 833.3 → 768 (−15%) or 960 (+33%)
    r = run_json(
        capsys, "shapes", "--budget", "1e8", "--depths", "12", "--multiple-of", "64", "--heads", "12"
    )
    assert r["multiple_of"] == 192 and r["shapes"][0]["d_model"] == 768


def test_flops(capsys):
    r = run_json(capsys, "flops", "--layers", "12", "--width", "768", "--context", "1024",
                 "--vocab", "50257", "--heads", "12", "--batch", "8")  # fmt: skip
    # 6N + 6Vd + 6LTd = 509,607,936 + 231,584,256 + 56,623,104; full adds another 6LTd
    assert r["train_flops_per_token"] == {"causal": 797_815_296, "full": 854_438_400}
    assert r["forward_flops_per_token"] == {"causal": 265_938_432, "full": 284_812_800}
    assert r["mfu_convention"] == "causal"
    # 34·768 + 5·12·1024 per layer; 12 layers plus 2·50,257 bytes of logits
    assert r["activation_bytes_per_token"]["per_layer"] == 87_552
    assert r["activation_bytes_per_token"]["total"] == 12 * 87_552 + 100_514
    # B = 8·1024 tokens: 6·B·d / (2·(4B + 3d))
    assert r["arithmetic_intensity"]["intensity"] == pytest.approx(
        6 * 8192 * 768 / (2 * (4 * 8192 + 3 * 768))
    )


def test_bounds(capsys):
    r = run_json(capsys, "bounds", "--layers", "12", "--width", "768", "--heads", "12",
                 "--match-depths", "6,12", "--constants", "--latex")  # fmt: skip
    assert r["regime"] == "depth-inefficient"
    log3 = lambda x: math.log(x) / math.log(3)  # noqa: E731
    assert r["log3_sep_lower"] == pytest.approx(756 * (12 - log3(756)))
    assert r["log3_sep_upper"] == pytest.approx(768 * (12 + 2 * log3(780)))
    assert r["constants_reconstructed"] is True
    same = [e for e in r["equivalent_widths"] if e["n_layer"] == 12][0]
    assert same["width_count"] == pytest.approx(768, rel=1e-9)
    assert any(row["reconstructed"] for row in r["constants"])
    assert "crossing" in r["latex"]


def test_mlp(capsys):
    r = run_json(capsys, "mlp", "--in", "1", "--hidden", "2,2,2", "--out", "1")
    assert r["params"] == 19  # 4 + 6 + 6 + 3
    assert r["equal_budget_single_layer_width"] == 6  # (19 − 1) // (1 + 1 + 1)


def test_sawtooth(capsys):
    r = run_json(capsys, "sawtooth", "--depth", "3")
    assert (r["pieces"], r["deep_params"], r["shallow_units_needed"]) == (8, 19, 7)  # 2^3, 6·3+1, 2^3−1
    r = run_json(capsys, "sawtooth", "--depth", "10")
    assert (r["pieces"], r["deep_params"], r["shallow_units_needed"]) == (1024, 61, 1023)


@pytest.mark.parametrize(
    "argv",
    [
        ["params", "--layers", "0", "--width", "768", "--heads", "12"],
        ["params", "--layers", "12", "--width", "-768", "--heads", "12"],
        ["params", "--layers", "12", "--width", "770", "--heads", "12"],
        ["params", "--layers", "12x", "--width", "768", "--heads", "12"],
        ["params", "--layers", "12", "--width", "768"],
        ["shapes", "--budget", "abc", "--depths", "3"],
        ["shapes", "--budget", "0", "--depths", "3"],
        ["shapes", "--budget", "1e8", "--depths", "3,-1"],
        ["threshold"],
        ["threshold", "--width", "1.5"],
        ["bounds", "--layers", "3", "--width", "12", "--heads", "12"],
        ["flops", "--layers", "2", "--width", "64", "--context", "0"],
        ["mlp", "--in", "1", "--hidden", "2,0", "--out", "1"],
        ["sawtooth", "--depth", "0"],
        [],
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv):
    assert main(["theory", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith("depthwidth: error:")


def test_cli_imports_no_jax_and_stays_light():
    # Only the theory commands are registered, so other packages' imports cannot mask ours.
    code = (
        "import argparse, sys; from depthwidth.theory import cli;"
        "p = argparse.ArgumentParser(); cli.register(p.add_subparsers());"
        "runs = [['params', '--layers', '2', '--width', '64', '--heads', '2'],"
        " ['flops', '--layers', '2', '--width', '64', '--context', '8', '--batch', '2'],"
        " ['threshold', '--width', '729'], ['shapes', '--budget', '1M', '--depths', '2,4'],"
        " ['bounds', '--layers', '2', '--width', '64', '--heads', '2', '--match-depths', '1'],"
        " ['mlp', '--in', '1', '--hidden', '2', '--out', '1'], ['sawtooth', '--depth', '4']];"
        "[a.func(a) for a in (p.parse_args(['theory', *r, '--json']) for r in runs)];"
        "heavy = [m for m in ('jax', 'sympy', 'scipy', 'pandas', 'matplotlib', 'torch') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)


def test_integers_above_2_to_the_53_are_parsed_exactly(capsys):
    # Issue 24: --width 100000000000000001 went through a float and printed 1e17's "exact"
    # count; --budget 123456789012345678901 was echoed as 123,456,789,012,345,683,968.
    d = 10**17 + 1
    r = run_json(capsys, "params", "--layers", "1", "--width", str(d), "--heads", "1")
    assert r["kaplan_params"] == 12 * d * d and r["stack_params"] == 12 * d * d + 13 * d + 2 * d
    assert main(["theory", "params", "--layers", "1", "--width", str(d), "--heads", "1"]) == 0
    assert "120,000,000,000,000,002,400,000,000,000,000,012" in capsys.readouterr().out  # 12 d^2, 36 digits
    r = run_json(capsys, "shapes", "--budget", "123456789012345678901", "--depths", "2")
    assert r["budget"] == 123456789012345678901
    assert main(["theory", "shapes", "--budget", "123456789012345678901", "--depths", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "budget 123,456,789,012,345,678,901 (kaplan count)"


def test_a_shape_far_from_the_budget_is_flagged(capsys):
    # Issue 24: depth 100 at a budget of 10 answered d = 1 (1,200 parameters) without a word.
    r = run_json(capsys, "shapes", "--budget", "10", "--depths", "100,1")
    assert [s["d_model"] for s in r["shapes"]] == [1, 1]
    assert r["warnings"] == ["depth 100: the nearest width, d = 1, has 1,200 parameters, 120x the budget: "
                             "no width of this depth comes within 50% of it"]
    assert main(["theory", "shapes", "--budget", "10", "--depths", "100"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"warning: {r['warnings'][0]}"


def test_huge_counts_are_abbreviated_in_outputs(capsys):
    # Issue 24: 300-digit counts filled the terminal; --json keeps them exact.
    assert main(["theory", "flops", "--layers", "1e300", "--width", "2", "--context", "1"]) == 0
    out = capsys.readouterr().out
    assert "3.0000e+302 (303 digits)" in out and max(map(len, out.splitlines())) < 200
