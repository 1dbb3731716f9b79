"""The experiment kinds and the figures, each registered once (depthwidth.pipeline.registry,
depthwidth.paper_figs.registry): every kind has all its parts, every figure has one producer and
one name, and the CLI is built from the tables."""

import argparse
from pathlib import Path

import pytest

from depthwidth.cli import build_parser, main
from depthwidth.paper_figs import registry as figures
from depthwidth.pipeline import registry

REPO = Path(__file__).resolve().parents[1]
KINDS = list(registry.KINDS.values())


def _sub(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices.get(name)
    return None


def _command(words: list[str]) -> argparse.ArgumentParser | None:
    """The parser of ``depthwidth WORDS...`` (flags ignored), or None when there is no such command."""
    p = build_parser()
    for w in words:
        if w.startswith("-"):
            break
        p = _sub(p, w)
        if p is None:
            return None
    return p


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_kind_has_all_its_parts(kind):
    assert registry.missing_parts(kind) == []
    assert "\n" not in kind.command().HELP
    # its results directory is the checkout's committed result, with its registered figures in it
    assert kind.results.startswith("results/") and (REPO / kind.results).is_dir()
    for name in kind.figures():
        assert (REPO / kind.results / "figures" / f"{name}.png").is_file(), name
    # the records it writes: its own kind, or ordinary training records, or none (a table)
    assert kind.records in (kind.name, "train", None)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_kind_is_an_exp_command_with_its_results_default(kind):
    p = _command(["exp", kind.name])
    assert p is not None
    (results,) = [a for a in p._actions if "--results" in a.option_strings]
    assert results.default == kind.results
    for alias in kind.aliases:  # the documented commands that run one part each
        cmd = alias.split()
        parser = _command(cmd)
        assert parser is not None, alias
        flags = {s for a in parser._actions for s in a.option_strings}
        assert {w for w in cmd if w.startswith("-")} <= flags, alias


def test_figures_are_named_once_and_drawn_by_the_law_or_a_kind():
    names = figures.names()
    assert len(names) == len(set(names))
    assert len({f.ref for f in figures.FIGURES}) == len(figures.FIGURES)
    for f in figures.FIGURES:
        assert f.producer in (figures.LAW, figures.PREDICTION, figures.FORMS) or f.producer in registry.KINDS, f
        fn = f.load()
        assert callable(fn) and figures.name_of(fn) == f.name
        assert set(f.takes) <= {"inputs", "options"}
        assert not f.takes or f.producer == figures.LAW  # a kind's figure is called by the kind itself
    assert figures.names(figures.LAW) == ("fig1_loss_vs_params", "fig2_width_vs_depth", "fig3_optimal_depth",
                                          "fig4_separation_rank", "fig6_pair_delta")  # `figs`' order
    for name in figures.names(figures.LAW):  # committed by every law directory's reproduce
        assert (REPO / "results" / "cpu" / "figures" / f"{name}.png").is_file()


def test_registering_twice_is_refused():
    with pytest.raises(ValueError, match="registered already"):
        registry.register(KINDS[0])
    with pytest.raises(ValueError, match="registered already"):
        figures.register(figures.FIGURES[0])
    with pytest.raises(KeyError):
        figures.get("no-such-figure")


def test_exp_without_a_name_lists_every_kind(capsys):
    assert main(["exp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(k.name in err for k in KINDS)
