"""ARCHITECTURE.md's "Where to add" recipes, each followed once here with a toy: an experiment
kind, a law form, a figure and a storage backend. Each toy is registered the way the recipe says,
run through the real commands, and unregistered, so a recipe that stops matching the code fails."""

import json
import math
import warnings

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from depthwidth import storage
from depthwidth.cli import main
from depthwidth.fits.forms import FORMS, SCALAR, LawForm
from depthwidth.fits.synthetic import Surface, write_synthetic
from depthwidth.paper_figs import registry as figures
from depthwidth.pipeline import registry

# --- an experiment kind: measure -> records -> analyse -> figure, in one `depthwidth exp` command ---------

TOY = "toy"


def toy_measure(results, widths: list[int]) -> int:
    """One record of kind "toy" per width (its "measurement": w² with one ReLU's worth of work),
    skipping the widths already stored; returns how many were measured now."""
    from depthwidth.experiments import kinds

    have = kinds.done(results, TOY)
    todo = [w for w in widths if kinds.unit_id(TOY, {"width": w}) not in have]
    for w in todo:
        kinds.write(results, TOY, {"width": w}, d_model=w, value=float(w * w))
    return len(todo)


def toy_fit(recs: list[dict]) -> dict:
    """The slope of ln value against ln width (2 for w²)."""
    w = np.log([r["d_model"] for r in recs])
    v = np.log([r["value"] for r in recs])
    return {"n": len(recs), "slope": float(np.polyfit(w, v, 1)[0])}


def toy_figure(summary: dict):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.bar(["slope"], [summary["slope"]])
    return fig, f"slope of ln value vs ln width over {summary['n']} units"


def toy_draw(summary: dict, out_dir) -> list[str]:
    from depthwidth.paper_figs.style import figure_style, save

    with figure_style():
        fig, _ = toy_figure(summary)
        return [str(p) for p in save(fig, out_dir, figures.name_of(toy_figure))]


class ToyCommand:
    """What a kind's command module holds (depthwidth.pipeline.exp's docstring)."""

    HELP = "a toy kind: w² per width"
    DESCRIPTION = "Stores w² for each width, fits the log-log slope, draws it (tests/test_recipes.py)."

    @staticmethod
    def add_args(p):
        p.add_argument("--widths", default="2,4,8")

    @staticmethod
    def run(args) -> int:
        from depthwidth import records
        from depthwidth.console import emit

        widths = [int(w) for w in args.widths.split(",")]
        ran = toy_measure(args.results, widths)
        summary = toy_fit(records.records_of_kind(args.results, TOY))
        figs = [] if args.no_figure else toy_draw(summary, args.out or f"{args.results}/figures")
        emit(args, {"ran": ran, **summary, "figures": figs}, f"{ran} measured; slope {summary['slope']:.3f}")
        return 0


def test_recipe_an_experiment_kind(tmp_path, capsys):
    figures.register(figures.Figure("exp_toy", toy_figure, TOY))
    kind = registry.register(registry.Kind(TOY, ToyCommand, (toy_measure,), toy_fit, "results/exp-toy", TOY))
    try:
        assert registry.missing_parts(kind) == []
        res = tmp_path / "res"
        assert main(["exp", TOY, "--results", str(res), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["ran"], out["n"]) == (3, 3) and out["slope"] == pytest.approx(2.0)
        assert sorted(p.name for p in (res / "figures").iterdir()) == ["exp_toy.pdf", "exp_toy.png"]
        assert main(["exp", TOY, "--results", str(res), "--widths", "2,4,8,16", "--json", "--no-figure"]) == 0
        assert json.loads(capsys.readouterr().out)["ran"] == 1  # a rerun measures the missing unit only
        # the law's table sets the toy's records aside
        from depthwidth.fits.table import load_table

        write_synthetic(res, depths=(2, 4), n_seeds=1, per_decade=2)
        assert len(load_table(res).other_kinds) == 4
    finally:
        registry.unregister(TOY)
        figures.unregister("exp_toy")
    assert main(["exp", TOY]) == 2  # gone from the CLI again
    capsys.readouterr()


# --- a law form: one class, fitted with `fit --law-form`, queried with `query --fit` ---------------------

class PowerDepth(LawForm):
    """ln d_x = a + b·L^1.5: only a key, a formula, the term's text and g."""

    key = "toy-power"
    formula = "ln(d_x) = a + b*L^1.5"
    term = "L^1.5"
    term_pretty = "L^1.5"

    def g(self, L, xp=SCALAR):
        return L**1.5


def test_recipe_a_law_form(tmp_path, monkeypatch, capsys):
    toy = PowerDepth()
    monkeypatch.setitem(FORMS, toy.key, toy)
    write_synthetic(tmp_path / "res", Surface(a=3.5, b=0.02, form=toy.key), depths=(2, 4, 8, 16), n_seeds=2, seed=3)
    fit = tmp_path / "fit.json"
    assert main(["fit", "--results", str(tmp_path / "res"), "--out", str(fit), "--law-form", toy.key,
                 "--bootstrap", "50", "--json"]) == 0
    capsys.readouterr()
    law = json.loads(fit.read_text())["law"]
    assert law["form"] == toy.formula and law["n_points"] == 3
    assert law["b"] == pytest.approx(0.02, abs=0.01)
    assert main(["query", "--fit", str(fit), "--layers", "9", "--json"]) == 0
    q = json.loads(capsys.readouterr().out)
    assert q["transition_params"] == pytest.approx(12 * 9 * math.exp(2 * (law["a"] + law["b"] * 27)), rel=1e-9)


# --- a figure: one function, registered once; `depthwidth figs` draws it after the built-in ones ---------

def toy_runs_per_depth(inputs):
    import matplotlib.pyplot as plt

    runs = inputs.table.runs
    fig, ax = plt.subplots()
    counts = runs.groupby("n_layer").size()
    ax.bar([str(L) for L in counts.index], counts.values)
    return fig, f"{len(runs)} runs by depth"


@pytest.mark.slow  # draws every law figure (~30 s on a shared 2-core machine)
def test_recipe_a_figure(tmp_path, capsys):
    write_synthetic(tmp_path / "res", depths=(2, 4, 8), n_seeds=1, per_decade=3)
    fit = str(tmp_path / "fit.json")
    assert main(["fit", "--results", str(tmp_path / "res"), "--out", fit, "--bootstrap", "20", "--json"]) == 0
    capsys.readouterr()
    figures.register(figures.Figure("fig9_runs_per_depth", toy_runs_per_depth, figures.LAW, ("inputs",)))
    try:
        assert main(["figs", "--results", str(tmp_path / "res"), "--fit", fit, "--out", str(tmp_path / "figs"),
                     "--json"]) == 0
        drawn = [f["name"] for f in json.loads(capsys.readouterr().out)["figures"]]
        assert drawn == [*figures.names(figures.LAW)] and drawn[-1] == "fig9_runs_per_depth"
        assert (tmp_path / "figs" / "fig9_runs_per_depth.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        figures.unregister("fig9_runs_per_depth")
    assert "fig9_runs_per_depth" not in figures.names()


# --- a storage backend: an fsspec protocol; every results path that is its URL then works ---------------

class ToyFS(MemoryFileSystem):
    """An in-process object store under its own protocol (its own dict, not memory://'s)."""

    protocol = ("toyfs",)
    store: dict = {}
    pseudo_dirs = [""]


def test_recipe_a_storage_backend(tmp_path, capsys):
    fsspec.register_implementation("toyfs", ToyFS, clobber=True)
    url = "toyfs://bucket/res"
    with warnings.catch_warnings():  # universal_pathlib serves a protocol it does not know generically, and says so
        warnings.filterwarnings("ignore", "UPath 'toyfs' filesystem not explicitly implemented")
        try:
            write_synthetic(url, depths=(2, 4, 8), n_seeds=1, seed=1)
            write_synthetic(tmp_path / "res", depths=(2, 4, 8), n_seeds=1, seed=1)
            assert any(k.startswith("toyfs://bucket/res/runs/") for k in ToyFS.store)
            assert main(["fit", "--results", url, "--bootstrap", "50", "--json"]) == 0
            on_toy = json.loads(storage.path(f"{url}/fit.json").read_text())
            assert main(["fit", "--results", str(tmp_path / "res"), "--bootstrap", "50", "--json"]) == 0
            capsys.readouterr()
            local = json.loads((tmp_path / "res" / "fit.json").read_text())
            assert on_toy["law"] == local["law"] and on_toy["points"] == local["points"]
        finally:
            ToyFS.store.clear()

