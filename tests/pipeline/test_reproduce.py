"""`depthwidth reproduce --preset smoke` end to end (the CI test), and the summary's numbers."""

import json
import math
import os
import subprocess

import pytest

from depthwidth.cli import main
from depthwidth.experiments.executors import InProcess, SweepSettings
from depthwidth.experiments.presets import load_preset
from depthwidth.fits.options import FitOptions
from depthwidth.pipeline import summary
from depthwidth.pipeline.run import reproduce


def test_reproduce_smoke_end_to_end(tmp_path, engine_env, cli_cmd):
    results = tmp_path / "results" / "smoke"
    # Two local worker processes (--jobs 2): this process and one child share the directory.
    out = subprocess.run(cli_cmd + ["reproduce", "--preset", "smoke", "--jobs", "2", "--no-progress", "--json"],
                         cwd=tmp_path, env=engine_env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    s = json.loads(out.stdout)
    trained_by = {w: {line.split()[4] for line in out.stderr.splitlines() if line.startswith(f"[sweep smoke {w}] training")}
                  for w in ("w0/2", "w1/2")}
    assert trained_by["w0/2"] and trained_by["w1/2"] and not trained_by["w0/2"] & trained_by["w1/2"]
    if len(os.sched_getaffinity(0)) >= 2:  # one core each
        assert "2 local workers pinned to cores" in out.stderr
    # Default results directory: results/<preset> under the current directory.
    assert s["results"] == "results/smoke" and s["complete"]
    ids = sorted(r.run_id() for r in load_preset("smoke").runs)
    assert sorted(p.parent.name for p in results.glob("runs/*/record.json")) == ids
    assert sorted(s["sweep"]["trained"]) == ids == sorted(trained_by["w0/2"] | trained_by["w1/2"])

    c = s["corpora"]["tinyshakespeare"]
    fit = json.loads((results / "fit.json").read_text())
    assert fit["format"] == "depthwidth-fit" and fit["status"] == c["status"]
    assert fit["table"]["n_used"] + len(fit["table"]["excluded"]) == 8
    # One doubling pair, (1, 2). Its common N range, by hand: L=1 spans 12*1*16^2 = 3072 to
    # 12*1*32^2 = 12288 and L=2 spans 12*2*16^2 = 6144 to 24576, so they overlap on [6144, 12288].
    (pair,) = c["pairs"]
    assert pair["pair"] == [1, 2] and pair["N_range"] == pytest.approx([6144, 12288])
    if pair["crossed"]:
        assert 6144 <= pair["N_star"] <= 12288
    else:
        assert pair["where"]
    # The published law at the geometric-mean depth sqrt(2): N = 12 L exp(2 (5.039 + 0.0555 L)).
    L = math.sqrt(2)
    assert pair["L"] == pytest.approx(L)
    assert pair["N_paper"] == pytest.approx(12 * L * math.exp(2 * (5.039 + 0.0555 * L)))
    assert 472e3 < pair["N_paper"] < 474e3  # = 12 * 1.4142 * 166.9^2 = 472.7K
    assert c["law"]["paper"]["a"] == 5.039 and c["law"]["paper"]["b"] == 0.0555

    figs = sorted(p.name for p in (results / "figures").iterdir())
    assert len([f for f in figs if f.endswith(".png")]) == 5 and len([f for f in figs if f.endswith(".pdf")]) == 5
    assert sorted(c["figures"]) == sorted(str(p.relative_to(tmp_path)) for p in (results / "figures").iterdir())
    on_disk = json.loads((results / "summary.json").read_text())
    # stored with paths relative to summary.json's folder (records.relative_to), the rest as returned
    paths = ("results", "fit_path", "figures", "table")
    stored, returned = on_disk["corpora"]["tinyshakespeare"], s["corpora"]["tinyshakespeare"]
    assert {k: v for k, v in stored.items() if k not in paths} == {k: v for k, v in returned.items() if k not in paths}
    assert (stored["results"], stored["fit_path"]) == (".", "fit.json")
    assert sorted(stored["figures"]) == sorted(f"figures/{n}" for n in figs)
    assert stored["table"] == {**returned["table"], "results": "."}
    md = (results / "summary.md").read_text()
    assert "| (1, 2) |" in md and "![fig1" in md and "5.039" in md

    # Again: nothing is trained, and the same fit comes out.
    again = subprocess.run(cli_cmd + ["reproduce", "--preset", "smoke", "--no-figures"],
                           cwd=tmp_path, env=engine_env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "trained now 0" in again.stdout and "training " not in again.stderr
    assert json.loads((results / "fit.json").read_text())["points"] == fit["points"]


def test_bad_fit_options_fail_before_any_training(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--preset", "smoke", "--pairs", "every"]) == 2
    assert "--pairs must be one of" in capsys.readouterr().err
    assert main(["reproduce", "--preset", "smoke", "--assign", "middle"]) == 2
    assert "--assign must be one of" in capsys.readouterr().err
    assert main(["reproduce", "--preset", "smoke", "--bootstrap", "1"]) == 2
    assert not (tmp_path / "results").exists()


FIT = {
    "format": "depthwidth-fit", "version": 1, "status": "ok",
    "points": [
        {"L_s": 2, "L_d": 4, "L": math.sqrt(8), "status": "crossing", "meaning": "", "N_star": 2.0e5,
         "N_star_ci95": [1.5e5, 2.6e5], "d_x": math.sqrt(2.0e5 / (12 * math.sqrt(8))), "sigma_ln_d_x": 0.1,
         "N_range": [2.5e4, 1e6]},
    ],
    "no_crossing": [
        {"L_s": 4, "L_d": 8, "L": math.sqrt(32), "status": "deeper_worse_throughout", "meaning": "m",
         "N_star": None, "N_star_ci95": None, "d_x": None, "sigma_ln_d_x": None, "N_range": [2.5e4, 1e6]},
        {"L_s": 8, "L_d": 16, "L": math.sqrt(128), "status": "deeper_better_throughout", "meaning": "m",
         "N_star": None, "N_star_ci95": None, "d_x": None, "sigma_ln_d_x": None, "N_range": [5e4, 2e6]},
    ],
    "law": {"a": 4.5, "b": 0.2555, "stderr": {"a": 0.25, "b": 0.05}, "ci95": {"a": [4.01, 4.99], "b": [0.157, 0.354]},
            "n_points": 2, "dof": 0, "chi2_red": None, "r2": None, "bootstrap": None},
    "options": {"pairs": "doubling", "assign": "geom", "bootstrap": 100},
    "table": {}, "warnings": ["w1"],
}


def test_law_comparison_in_our_standard_errors():
    cmp = summary.compare_law(FIT["law"])
    # z = (ours - paper) / our stderr: a: (4.5 - 5.039)/0.25 = -2.156; b: (0.2555 - 0.0555)/0.05 = 4.0.
    assert cmp["z_a"] == pytest.approx(-2.156)
    assert cmp["z_b"] == pytest.approx(4.0)
    assert cmp["theory_slope"] == pytest.approx(1.0986, abs=1e-4)  # ln 3
    assert summary.compare_law(None)["fitted"] is None


def test_pair_rows_and_sides():
    rows = summary.pair_rows(FIT)
    assert [r["pair"] for r in rows] == [[2, 4], [4, 8], [8, 16]]
    r24 = rows[0]
    # Published law at L = sqrt(8) = 2.828: d = exp(5.039 + 0.0555*2.828) = exp(5.196) = 180.6,
    # N = 12 * 2.828 * 180.6^2 = 1.107M.
    assert r24["d_x_paper"] == pytest.approx(180.6, abs=0.1)
    assert r24["N_paper"] == pytest.approx(1.107e6, rel=1e-3)
    assert r24["crossed"] and r24["where"] is None
    assert rows[1]["where"] == "L=8 worse than L=4 over N = 25K..1M: transition above 1M"
    assert rows[2]["where"] == "L=16 better than L=8 over N = 50K..2M: transition below 50K"


def test_summary_text_and_markdown():
    # a refined sweep: the fit reads more records than the preset's grid has runs
    fit = {**FIT, "table": {"n_used": 6, "n_records": 7}}
    c = summary.corpus_summary("res", fit, None, "res/fit.json", ["res/figures/a.png", "res/figures/a.pdf"], None)
    s = {"preset": "p", "description": "d", "results": "res", "out": "res", "complete": True,
         "sweep": {"finished": 3, "diverged": 1, "total": 4, "trained": [], "failed": [], "busy": []},
         "corpora": {"c": c}, "files": ["res/summary.json", "res/summary.md"]}
    text = summary.summary_text(s)
    assert text.endswith("wrote res/summary.json, res/summary.md")
    assert summary.summary_text({**s, "written": ["res/summary.md"]}).endswith(
        "wrote res/summary.md; unchanged res/summary.json")
    assert "4/4 runs have records (3 finished, 1 diverged" in text
    assert "[c] results res: the fit uses 6 of its 7 records" in text
    assert "(2,4) crossed at N* = 200K [150K, 260K]" in text
    assert "a = 4.500 ± 0.250" in text and "b = 0.2555 ± 0.0500" in text
    assert "-2.2 sigma (a), +4.0 sigma (b)" in text
    md = summary.summary_markdown(s)
    assert "| (2, 4) | crossing | 200K | [150K, 260K] |" in md
    assert "fit: `fit.json` (from 6 of 7 records)" in md
    assert "| Levine et al. 2020 | 5.039 | 0.0555 |" in md
    assert "| 95% interval | 4.010 to 4.990 | 0.1570 to 0.3540 |" in md and "| -2.2 | +4.0 |" in md
    assert "![a](figures/a.png)" in md


KNOWN = """
name = "known"
description = "synthetic: losses built so that the transitions follow the published law exactly"
[base.model]
n_head = 2
seq_len = 16
[base.train]
steps = 10
batch_size = 4
warmup_steps = 1
[grid]
depths = [2, 4, 8]
seeds = [0, 1]
corpora = ["tinyshakespeare", "kjv"]
[grid.widths]
2 = [112, 160, 224, 320, 448, 640]
4 = [80, 112, 160, 224, 320, 448]
8 = [56, 80, 112, 160, 224, 320]
"""


def test_reproduce_recovers_a_known_law(tmp_path, monkeypatch):
    """A stand-in engine whose test loss at fixed N is lowest at the depth the published law
    calls optimal: loss = 2 - 0.1 ln N + 0.05 (ln L - ln L*(N))^2, L*(N) solving
    N = 12 L exp(2a + 2bL) (a = 5.039, b = 0.0555), +-0.0005 by seed. Then L=4 beats L=2 exactly
    where L* > sqrt(8), i.e. at N* = N(sqrt 8), whose width at the geometric-mean depth sqrt(8)
    is exp(a + b sqrt 8): the fit must give back a and b, per corpus, in the multi-corpus layout."""
    from depthwidth import records
    from depthwidth.fits.law import levine2020
    from depthwidth.fits.projections import optimal_depth

    law = levine2020()

    def engine(cfg, results_dir, **_):
        L, d, s = cfg.model.n_layer, cfg.model.d_model, cfg.train.seed
        N = 12 * L * d * d
        loss = 2 - 0.1 * math.log(N) + 0.05 * (math.log(L) - math.log(optimal_depth(N, law))) ** 2
        rec = {"schema": 1, "run_id": cfg.run_id(), "status": "finished", "config": cfg.to_dict(),
               "n_layer": L, "d_model": d, "n_head": 2, "seed": s, "params": {"kaplan": N},
               "tokens": 640, "steps": 10,
                   # seed noise that differs between depths, so paired differences are not exact
                   "test_loss": loss + (0.0005 if s == 0 else -0.0005) * L / 4,
               "wall_s": 0.1, "compile_s": 0.1}
        records.write_json_atomic(records.run_dir(results_dir, cfg.run_id()) / "record.json", rec)
        return rec

    f = tmp_path / "known.toml"
    f.write_text(KNOWN)
    s = reproduce(load_preset(f), tmp_path / "res", fit_options=FitOptions(bootstrap=200), figures=False,
                  executor=InProcess(SweepSettings(train_fn=engine, log=lambda m: None)))
    assert s["complete"] and s["sweep"]["finished"] == 2 * 3 * 6 * 2
    assert set(s["corpora"]) == {"tinyshakespeare", "kjv"}
    for corpus, c in s["corpora"].items():
        assert c["results"] == str(tmp_path / "res" / corpus)
        assert c["fit_path"] == str(tmp_path / "res" / corpus / "fit.json")
        assert [r["pair"] for r in c["pairs"]] == [[2, 4], [4, 8]] and all(r["crossed"] for r in c["pairs"])
        for r in c["pairs"]:
            # N* where the law makes the geometric-mean depth optimal (N(sqrt 8) = 1.107M by hand).
            assert r["N_star"] == pytest.approx(r["N_paper"], rel=0.02)
        fitted = c["law"]["fitted"]
        assert fitted["a"] == pytest.approx(5.039, abs=0.02) and fitted["b"] == pytest.approx(0.0555, abs=0.004)
    assert (tmp_path / "res" / "summary.json").exists() and (tmp_path / "res" / "summary.md").exists()
    assert "(2,4) crossed at N* = 1.1" in summary.summary_text(s)
    # The stored files name paths relative to their own folder (issue 10: run from outside the
    # checkout, reproduce wrote absolute paths): a rerun over the finished records from another
    # cwd, with a relative path, leaves the same bytes as one with the absolute path.
    files = [tmp_path / "res" / "summary.json"] + [tmp_path / "res" / c / "fit.json" for c in s["corpora"]]
    reproduce(load_preset(f), tmp_path / "res", fit_options=FitOptions(bootstrap=200), figures=False,
              executor=InProcess(SweepSettings(train_fn=engine, log=lambda m: None)))
    before = [f.read_bytes() for f in files]
    stored = json.loads(before[0])
    assert stored["results"] == "." and stored["files"] == ["summary.json", "summary.md"]
    assert stored["corpora"]["kjv"]["results"] == "kjv" and stored["corpora"]["kjv"]["fit_path"] == "kjv/fit.json"
    assert json.loads(before[1])["table"]["results"] == "."
    monkeypatch.chdir(tmp_path)
    again = reproduce(load_preset(f), "res", fit_options=FitOptions(bootstrap=200), figures=False,
                      executor=InProcess(SweepSettings(train_fn=engine, log=lambda m: None)))
    assert [f.read_bytes() for f in files] == before
    # ... and says so: it printed "wrote summary.json, summary.md" for files it had left untouched
    assert again["written"] == [] and summary.summary_text(again).endswith(
        "unchanged res/summary.json, res/summary.md")
