"""`depthwidth reproduce`'s command line (depthwidth.pipeline.cli): where the results go."""

from pathlib import Path

import pytest

from depthwidth.cli import main

REPO = Path(__file__).resolve().parents[2]


class _Called(Exception):
    pass


@pytest.fixture
def captured(monkeypatch):
    """Replace the pipeline by a stub that records the results directory it was given."""
    seen = {}

    def fake(preset, results, **kw):
        seen["results"] = results
        raise _Called

    monkeypatch.setattr("depthwidth.pipeline.run.reproduce", fake)
    return seen


def test_default_results_is_the_checkouts_committed_directory_from_any_cwd(tmp_path, monkeypatch, captured):
    # Issue 10 item 2: from another directory, `reproduce --preset cpu` used ./results/cpu
    # (empty) and retrained 40 minutes instead of reusing the committed results/cpu.
    assert (REPO / "results" / "cpu").is_dir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Called):
        main(["reproduce", "--preset", "cpu", "--no-figures"])
    assert Path(captured["results"]).resolve() == REPO / "results" / "cpu"


def test_default_results_without_a_committed_directory_is_under_the_cwd(tmp_path, monkeypatch, captured):
    assert not (REPO / "results" / "smoke").exists()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Called):
        main(["reproduce", "--preset", "smoke", "--no-figures"])
    assert str(captured["results"]) == "results/smoke"
    with pytest.raises(_Called):  # an explicit --results is taken as given
        main(["reproduce", "--preset", "cpu", "--results", "results/cpu", "--no-figures"])
    assert str(captured["results"]) == "results/cpu"
