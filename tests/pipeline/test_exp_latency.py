"""`depthwidth exp latency`: equal-weight shapes, the FLOP count by hand, the timed stack is the
LM's own (checked against a numpy forward pass), records resumable, the fit, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.experiments import latency
from depthwidth.fits import latency as fit
from depthwidth.theory.accounting import kaplan_n, stack_n


def test_default_shapes_hold_equal_weights():
    assert [kaplan_n(L, d) for L, d in latency.DEFAULT_SHAPES] == [84_934_656] * 3
    exact = [stack_n(L, d) for L, d in latency.DEFAULT_SHAPES]
    assert exact == [84_997_632, 85_056_000, 85_115_392]  # L·(12d² + 13d) + 2d, worked by hand
    assert max(exact) / min(exact) - 1 < 0.0014  # the "within 0.14 %"
    # attention grows as L·d, the normalisation 4,608 / 9,216 / 13,824
    assert [L * d for L, d in latency.DEFAULT_SHAPES] == [4608, 9216, 13824]


def test_forward_flops_by_hand():
    # L=2, d=8, T=4, B=3: matmuls 2·12·L·d²·B·T = 2·12·2·64·12; attention 4·L·T²·d·B = 4·2·16·8·3
    f = latency.forward_flops(2, 8, 4, 3)
    assert f == {"matmul": 36_864, "attention": 3_072, "attention_causal": 1_536,
                 "total": 39_936, "total_causal": 38_400}
    # + the head 2·V·d·B·T = 2·10·8·12
    g = latency.forward_flops(2, 8, 4, 3, vocab_size=10)
    assert g["matmul"] == 36_864 + 1_920 and g["attention"] == 3_072
    # the default shapes at T = 1024: attention share T/(6d + T)
    for L, d in latency.DEFAULT_SHAPES:
        f = latency.forward_flops(L, d, 1024, 1)
        assert f["attention"] / f["total"] == pytest.approx(1024 / (6 * d + 1024))


def _numpy_stack(p, x, L, H):
    """The pre-LN GPT-2 stack in numpy float64 from the LM's parameters (independent of the jax code)."""
    def ln(v, s, b):
        mu, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * s + b

    def gelu(v):
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))

    B, T, d = x.shape
    bl = p["blocks"]
    def w(*path, i):
        a = bl
        for k in path:
            a = a[k]
        return np.asarray(a[...], np.float64)[i]

    for i in range(L):
        h = ln(x, w("ln1", "scale", i=i), w("ln1", "bias", i=i))
        h = h @ w("attn", "qkv", "kernel", i=i) + w("attn", "qkv", "bias", i=i)
        q, k, v = (t.reshape(B, T, H, d // H).transpose(0, 2, 1, 3) for t in np.split(h, 3, axis=-1))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // H) + np.triu(np.full((T, T), -np.inf), 1)
        a = np.exp(s - s.max(-1, keepdims=True))
        y = ((a / a.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
        x = x + y @ w("attn", "proj", "kernel", i=i) + w("attn", "proj", "bias", i=i)
        h = ln(x, w("ln2", "scale", i=i), w("ln2", "bias", i=i))
        h = gelu(h @ w("mlp", "fc", "kernel", i=i) + w("mlp", "fc", "bias", i=i))
        x = x + h @ w("mlp", "proj", "kernel", i=i) + w("mlp", "proj", "bias", i=i)
    return ln(x, np.asarray(p["ln_f"]["scale"][...]), np.asarray(p["ln_f"]["bias"][...]))


def test_stack_is_the_lms_own_and_matches_numpy():
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from depthwidth.config import ModelConfig
    from depthwidth.models.model import LM

    L, d, H, T, V = 2, 16, 2, 6, 11
    model = LM(ModelConfig(n_layer=L, d_model=d, n_head=H, vocab_size=V, seq_len=T), rngs=nnx.Rngs(3))
    idx = jax.random.randint(jax.random.PRNGKey(0), (2, T), 0, V)
    x = model.wte(idx) + model.wpe(jnp.arange(T))[None]
    # __call__ is embeddings -> stack -> tied head, exactly
    np.testing.assert_array_equal(np.asarray(model(idx)), np.asarray(model.wte.attend(model.stack(x))))
    ref = _numpy_stack(nnx.state(model, nnx.Param), np.asarray(x, np.float64), L, H)
    np.testing.assert_allclose(np.asarray(model.stack(x)), ref, atol=2e-5)


def _run(tmp_path, capsys, *extra):
    argv = ["exp", "latency", "--shapes", "1x32,4x16", "--seq-len", "8", "--batch", "2", "--n-head", "2",
            "--repeats", "3", "--warmup", "1", "--threads", "1", "--results", str(tmp_path / "r"),
            "--no-progress", "--json", *extra]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_records_numbers_resume_and_figure(tmp_path, capsys):
    out = _run(tmp_path, capsys, "--with-head", "--vocab-size", "7")
    assert (out["measured"], out["skipped"]) == (4, 0)
    stack, whole = out["groups"]
    assert (stack["with_head"], whole["with_head"], stack["threads"]) == (False, True, 1)
    for g in out["groups"]:
        for r in g["rows"]:
            L, d, V = r["n_layer"], r["d_model"], r["vocab_size"]
            exact = stack_n(L, d) + (V * d + 8 * d if g["with_head"] else 0)  # + token and position tables
            assert r["params"] == exact  # counted in the built model
            f = latency.forward_flops(L, d, 8, 2, V)
            assert r["flops_total"] == f["total"] and r["attention_share"] == f["attention"] / f["total"]
            assert r["seconds_min"] <= r["seconds"] <= r["seconds_max"]
            assert r["flops_per_s"] == pytest.approx(f["total"] / r["seconds"])
        assert g["rows"][0]["slowdown"] == 1.0 and g["model"]["dof"] == 0
    recs = sorted((tmp_path / "r" / "runs").glob("*/record.json"))
    assert len(recs) == 4
    rec = json.loads(recs[0].read_text())
    assert rec["kind"] == "latency" and len(rec["times"]) == 3 and rec["host"]["cpu_threads"] == 1
    assert rec["config"]["device"].startswith("cpu/")
    assert sorted(p.name for p in (tmp_path / "r" / "figures").iterdir()) == ["latency_vs_depth.pdf",
                                                                              "latency_vs_depth.png"]
    before = {p: p.read_bytes() for p in recs}
    again = _run(tmp_path, capsys, "--with-head", "--vocab-size", "7", "--no-figure")
    assert (again["measured"], again["skipped"]) == (0, 4)  # nothing re-timed
    assert {p: p.read_bytes() for p in recs} == before
    assert again["groups"] == out["groups"]
    model = json.loads((tmp_path / "r" / "latency_model.json").read_text())
    assert [m["with_head"] for m in model["models"]] == [False, True]


def _rows(rate, per_layer, shapes, T=64):
    rows = []
    for L, d in shapes:
        f = latency.forward_flops(L, d, T, 1)
        rows.append({"run_id": f"{L}x{d}", "n_layer": L, "d_model": d, "seq_len": T, "batch": 1,
                     "device": "cpu/x", "threads": 2, "dtype": "float32", "with_head": False,
                     "seconds": f["total"] / rate + per_layer * L, "flops_total": f["total"]})
    return rows


def test_latency_model_recovers_known_coefficients():
    rows = _rows(3e10, 2e-3, [(3, 96), (12, 48), (27, 32), (6, 64)])
    m = fit.fit_latency_model(rows)
    assert m["rate_flops_per_s"] == pytest.approx(3e10, rel=1e-9)
    assert m["per_layer_s"] == pytest.approx(2e-3, rel=1e-9)
    assert m["dof"] == 2 and m["max_abs_rel_residual"] < 1e-9
    assert fit.predict_seconds(m, 12, 48, 64) == pytest.approx(rows[1]["seconds"], rel=1e-9)
    # doubled time at the deepest shape only: the residual shows it
    rows[2]["seconds"] *= 2
    assert fit.fit_latency_model(rows)["max_abs_rel_residual"] > 0.05
    assert fit.fit_latency_model(rows[:1]) is None  # one depth: rate and per-layer cost inseparable
    with pytest.raises(UserError):
        fit.fit_latency_model([rows[0], {**rows[1], "threads": 1}])


@pytest.mark.parametrize("argv,needle", [
    (["--shapes", "3x"], "is not LxD"),
    (["--shapes", "0x64"], "must be >= 1"),
    (["--shapes", "2x100", "--n-head", "3"], "not divisible by --n-head 3"),
    (["--shapes", "2x100"], "divisible by 64"),
    (["--shapes", "2x64", "--repeats", "0"], "--repeats must be >= 1"),
    (["--shapes", "2x64,2x64"], "repeats a shape"),
    (["--shapes", "2x64", "--dtype", "float16"], "invalid choice"),
    (["--shapes", "2x64", "--threads", "all"], "pinned to one core"),  # tests run pinned (conftest)
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, needle):
    from depthwidth import hostcpu

    if needle == "pinned to one core" and not hostcpu.host_info()["pinned"]:
        pytest.skip("hostcpu did not pin this process: it saw one core (an xdist worker conftest pinned, or a one-core machine)")
    assert main(["exp", "latency", "--results", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("depthwidth: error:") and needle in err and "\n" not in err
    assert not (tmp_path / "r").exists()


def test_the_committed_directory_is_not_rewritten_on_another_machine(tmp_path, monkeypatch, capsys):
    # Issue 24: `exp latency` in the checkout re-measured on another CPU model and rewrote the
    # committed latency_model.json and figure. Refused, before anything is measured or written.
    from depthwidth.experiments import latency
    from depthwidth.records import Record, write_record

    results = tmp_path / "results" / "exp-latency"
    write_record(results, Record(run_id="latency-theirs", status="measured", kind=latency.KIND,
                                 config={"device": "cpu/Intel(R) Xeon(R) Processor @ 2.80GHz"}))
    before = sorted(p.relative_to(results) for p in results.rglob("*"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(latency, "select_threads", lambda threads: 2)
    monkeypatch.setattr(latency, "device_name", lambda threads: "cpu/AMD EPYC 9654")
    assert main(["exp", "latency"]) == 2
    assert capsys.readouterr().err == (
        "depthwidth: error: results/exp-latency holds the committed measurements of cpu/Intel(R) Xeon(R) Processor @ "
        "2.80GHz, not of this machine (cpu/AMD EPYC 9654); they stay as they are: pass --results DIR to measure "
        "this machine\n")
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == before
