"""``depthwidth figs``: bad input is one line and exit 2; a fit is computed in memory when no
file is given; sweeps without a law still get their figures; the CLI module stays light."""

import json
import subprocess
import sys

import pytest

from depthwidth.cli import main


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("depthwidth: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_missing_results_dir_is_one_line_exit_2(capsys, tmp_path):
    rc, _, err = _run(capsys, "figs", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert rc == 2
    assert "results directory not found" in _one_error_line(err)
    assert not (tmp_path / "o").exists()


def test_empty_results_dir_is_one_line_exit_2(capsys, tmp_path):
    (tmp_path / "results").mkdir()
    rc, _, err = _run(capsys, "figs", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "o"))
    assert rc == 2
    assert "no usable runs" in _one_error_line(err)


@pytest.mark.parametrize("content, message", [
    (None, "fit file not found"),
    ("{not json", "cannot read fit file"),
    ('{"format": "other"}', "not a depthwidth fit file"),
    ('{"format": "depthwidth-fit", "version": 1, "status": "ok", "points": 3, "no_crossing": []}',
     "'points' must be a list"),
])
def test_bad_fit_file_is_one_line_exit_2(capsys, tmp_path, sweep, content, message):
    results, _, _ = sweep
    fit = tmp_path / "fit.json"
    if content is not None:
        fit.write_text(content)
    rc, _, err = _run(capsys, "figs", "--results", str(results), "--fit", str(fit), "--out", str(tmp_path / "o"))
    assert rc == 2
    assert message in _one_error_line(err)


def test_builtin_law_name_as_fit_is_explained(capsys, tmp_path, sweep):
    results, _, _ = sweep
    rc, _, err = _run(capsys, "figs", "--results", str(results), "--fit", "levine2020", "--out", str(tmp_path))
    assert rc == 2
    assert "always drawn" in _one_error_line(err)


def test_json_with_fit_computed_in_memory(capsys, tmp_path, sweep):
    results, _, fit = sweep
    rc, out, _ = _run(capsys, "figs", "--results", str(results), "--out", str(tmp_path), "--json")
    assert rc == 0
    rep = json.loads(out)  # exactly one JSON object on stdout
    assert rep["fit_source"] == "computed in memory"
    assert [f["name"] for f in rep["figures"]] == ["fig1_loss_vs_params", "fig2_width_vs_depth",
                                                   "fig3_optimal_depth", "fig4_separation_rank", "fig6_pair_delta"]
    for f in rep["figures"]:
        assert (tmp_path / f"{f['name']}.png").stat().st_size > 10_000
        assert (tmp_path / f"{f['name']}.pdf").stat().st_size > 10_000
        assert f["caption"]
    # The in-memory fit uses `depthwidth fit`'s defaults (1000 replicates here vs the fixture's
    # 200), so the law agrees with the fixture's to within its bootstrap noise, not exactly.
    assert rep["law"]["b"] == pytest.approx(fit["law"]["b"], abs=4 * fit["law"]["stderr"]["b"])


def test_one_seed_sweep_still_gets_figures_and_says_why_no_law(capsys, tmp_path):
    from depthwidth.fits.synthetic import write_synthetic

    # Two pairs cross, but one seed per cell leaves the points no error to weight the law by.
    write_synthetic(tmp_path / "r", depths=(4, 8, 16), n_seeds=1, per_decade=3)
    rc, out, _ = _run(capsys, "figs", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o"), "--json")
    assert rc == 0
    rep = json.loads(out)
    assert rep["law"] is None
    assert any("bootstrap error" in n for n in rep["notes"])
    assert len(list((tmp_path / "o").glob("*.png"))) == 5
    # The transition is still found and drawn, from the transitions alone.
    assert "L4→L8 N* =" in rep["figures"][0]["caption"]
    assert "L8→L16 N* =" in rep["figures"][0]["caption"]


def test_cli_module_imports_nothing_heavy():
    code = ("import sys, depthwidth.paper_figs.cli, depthwidth.paper_figs; "
            "print(sorted(m for m in ('matplotlib', 'pandas', 'scipy', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_fit_file_beside_its_results_is_recognised_from_any_directory(capsys, tmp_path, sweep, monkeypatch):
    # `fit` stores the results directory relative to the fit file's folder ("."); the figures
    # used to compare that "." with --results as written, so from any other directory they said
    # the fit came from elsewhere and drew that note into fig2/fig3 (fresh-user finding)
    import shutil

    results, _, _ = sweep
    mine = tmp_path / "res"
    shutil.copytree(results, mine)
    assert _run(capsys, "fit", "--results", str(mine), "--bootstrap", "50")[0] == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for fit in (str(mine / "fit.json"), f"file://{mine}/fit.json"):
        rc, out, _ = _run(capsys, "figs", "--results", str(mine), "--fit", fit, "--out", str(tmp_path / "o"), "--json")
        assert rc == 0 and not [n for n in json.loads(out)["notes"] if "was made from" in n], fit
    # a fit of other records is still named, by the directory it was made from (it said "from .")
    rc, out, _ = _run(capsys, "figs", "--results", str(results), "--fit", str(mine / "fit.json"), "--out",
                      str(tmp_path / "o"), "--json")
    assert rc == 0 and f"fit {mine / 'fit.json'} was made from {mine.resolve()}, not from {results}" in json.loads(out)["notes"]
    monkeypatch.chdir(tmp_path)  # under the working directory: relative, as typed
    rc, out, _ = _run(capsys, "figs", "--results", str(results), "--fit", "res/fit.json", "--out", "o", "--json")
    assert rc == 0 and f"fit res/fit.json was made from res, not from {results}" in json.loads(out)["notes"]


def test_out_defaults_to_results_figures_and_the_first_line_counts_what_changed(capsys, tmp_path, sweep):
    # fresh-user review 29: `figs` required --out (fit defaults to RESULTS/fit.json), and said
    # "wrote 5 figures" when the store had left every file untouched (same bytes)
    import shutil

    results, fit, _ = sweep
    mine = tmp_path / "res"
    shutil.copytree(results, mine)
    rc, out, _ = _run(capsys, "figs", "--results", str(mine), "--fit", str(fit))
    assert rc == 0
    assert out.startswith(f"5 figures (PNG + PDF) in {mine / 'figures'} (5 written, 0 unchanged) in ")
    (mine / "figures" / "fig2_width_vs_depth.png").unlink()
    rc, out, _ = _run(capsys, "figs", "--results", str(mine), "--fit", str(fit), "--json")
    assert rc == 0
    assert [f["written"] for f in json.loads(out)["figures"]] == [False, True, False, False, False]
