"""``exp latency --decode``: per-token decode latency records, the bytes a step reads, the
decode-latency model (known coefficients recovered), bad input."""

import json

import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.fits import latency_decode as fit
from depthwidth.theory.decode_bytes import step_bytes


def _run(tmp_path, capsys, *extra):
    argv = ["exp", "latency", "--decode", "--shapes", "2x64,4x64,1x128,3x128", "--seq-len", "8", "--new-tokens", "4",
            "--repeats", "2", "--vocab-size", "50", "--threads", "1", "--results", str(tmp_path / "r"), "--json",
            *extra]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_records_numbers_resume_and_model(tmp_path, capsys):
    out = _run(tmp_path, capsys)
    assert (out["measured"], out["skipped"]) == (4, 0)
    (g,) = out["groups"]
    assert (g["threads"], g["context"], g["batch"], g["dtype"]) == (1, 8, 1, "float32")
    for r in g["rows"]:
        L, d = r["n_layer"], r["d_model"]
        # the whole LM: blocks + final LN + token (V·d) and position (S·d, S = 8 + 4) tables
        assert r["params"] == L * (12 * d * d + 13 * d) + 2 * d + 50 * d + 12 * d
        assert r["bytes_total"] == 4 * (L * (12 * d * d + 13 * d + 2 * 12 * d) + 50 * d + 2 * d)
        assert r["seconds_per_token_min"] <= r["seconds_per_token"] <= r["seconds_per_token_max"]
        assert r["bytes_per_s"] == pytest.approx(r["bytes_total"] / r["seconds_per_token"])
    assert [r["slowdown"] for r in g["rows"] if r["n_layer"] in (2, 1)] == [1.0, 1.0]  # shallowest of each budget
    assert g["model"]["dof"] == 1 and len(g["model"]["residuals"]) == 4
    recs = sorted((tmp_path / "r" / "runs").glob("*/record.json"))
    rec = json.loads(recs[0].read_text())
    assert rec["kind"] == "latency_decode" and len(rec["step_medians"]) == 2 and len(rec["prefill_times"]) == 2
    before = {p: p.read_bytes() for p in recs}
    again = _run(tmp_path, capsys)
    assert (again["measured"], again["skipped"]) == (0, 4) and {p: p.read_bytes() for p in recs} == before
    assert sorted(p.name for p in (tmp_path / "r" / "figures").iterdir()) == ["decode_latency_vs_depth.pdf",
                                                                              "decode_latency_vs_depth.png"]
    model = json.loads((tmp_path / "r" / "decode_model.json").read_text())
    assert model["formula"] == fit.FORMULA and len(model["models"]) == 1


def test_step_bytes_by_hand():
    # L=2, d=4, V=10, S=6, B=1, float32: a layer 12·16 + 13·4 = 244 weights + 2·6·4 = 48 cache values
    b = step_bytes(2, 4, 10, 6, 1, 4)
    assert b == {"layer": 4 * 292, "head": 4 * 48, "total": 4 * (2 * 292 + 48)}


def _rows(a, c, bw, shapes):
    return [{"run_id": f"{L}x{d}", "n_layer": L, "d_model": d, "params": 0, "device": "cpu/x", "threads": 1,
             "dtype": "float32", "batch": 1, "context": 128, "vocab_size": 50257, "new_tokens": 16,
             "bytes_total": (b := step_bytes(L, d, 50257, 144, 1, 4)["total"]), "seconds_per_token": a + c * L + b / bw}
            for L, d in shapes]


def test_decode_model_recovers_known_coefficients():
    rows = _rows(2e-4, 1.5e-3, 8e9, [(3, 768), (12, 384), (27, 256), (2, 2304), (8, 1152)])
    m = fit.fit_decode_model(rows)
    assert m["fixed_s"] == pytest.approx(2e-4, rel=1e-6)
    assert m["per_layer_s"] == pytest.approx(1.5e-3, rel=1e-9)
    assert m["bandwidth_bytes_per_s"] == pytest.approx(8e9, rel=1e-9)
    assert m["dof"] == 2 and m["max_abs_rel_residual"] < 1e-9
    assert fit.describe(m) == "0.2 ms + 1.5 ms x L + bytes / 8 GB/s"
    assert (m["vocab_size"], m["cache_len"], m["itemsize"]) == (50257, 144, 4)
    assert fit.predict_seconds(m, 8, 1152) == pytest.approx(rows[4]["seconds_per_token"], rel=1e-9)
    rows[2]["seconds_per_token"] *= 1.5  # one shape off the model: its residual shows it
    assert fit.fit_decode_model(rows)["max_abs_rel_residual"] > 0.05
    assert fit.fit_decode_model(rows[:3]) is None  # 3 coefficients need 4 shapes
    with pytest.raises(UserError, match="mix"):
        fit.fit_decode_model([rows[0], {**rows[1], "context": 64}, rows[2], rows[3]])


@pytest.mark.parametrize("argv,needle", [
    (["--new-tokens", "1"], "--new-tokens must be >= 2"),
    (["--shapes", "2x100"], "divisible by 64"),
    (["--repeats", "0"], "--repeats must be >= 1"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, needle):
    assert main(["exp", "latency", "--decode", "--shapes", "2x64", "--results", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("depthwidth: error:") and needle in err and "\n" not in err
    assert not (tmp_path / "r").exists()
