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


def test_default_results_is_the_checkout_of_the_working_directory_said_before_writing(tmp_path, monkeypatch,
                                                                                       captured, capsys):
    # Issue 40: `reproduce --preset law-long` run from one clone, with the package installed
    # editable from another, rewrote the other clone's fit and figures, and said so only after.
    other = tmp_path / "other-clone"
    (other / "docs").mkdir(parents=True)
    (other / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's .git is a file
    (other / "pyproject.toml").write_text('[project]\nname = "depthwidth"\n')
    monkeypatch.chdir(other / "docs")
    with pytest.raises(_Called):
        main(["reproduce", "--preset", "cpu", "--no-figures"])
    assert Path(captured["results"]).resolve() == (other / "results" / "cpu").resolve()
    assert capsys.readouterr().err == (f"depthwidth: results of preset cpu: {(other / 'results' / 'cpu').resolve()} "
                                       "(the default; --results DIR to choose)\n")
    # a git root that is not a depthwidth checkout is no checkout of ours: the cwd's results/
    (other / "pyproject.toml").write_text('[project]\nname = "someone-else"\n')
    monkeypatch.chdir(other)
    with pytest.raises(_Called):
        main(["reproduce", "--preset", "smoke", "--no-figures"])
    assert captured["results"] == "results/smoke"
    capsys.readouterr()
    with pytest.raises(_Called):  # a relative --results is the working directory's, said nothing
        main(["reproduce", "--preset", "cpu", "--results", "mine", "--no-figures"])
    assert captured["results"] == "mine" and "results of preset" not in capsys.readouterr().err
