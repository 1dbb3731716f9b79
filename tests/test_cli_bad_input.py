"""Bad input to any subcommand is one line on stderr, ``depthwidth: error: ...``, exit 2, and
leaves no file behind (README "Commands"; issue 10's audit of every subcommand)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from depthwidth.cli import main

# Each case runs in an empty directory holding these fixtures.
_FILES = {"afile": b"hello\n", "bad.toml": b"[model\nn_layer = 2\n", "bin.toml": b"\xff\xfe\x00garbage",
          "bad.json": b"{", "arr.json": b"[1, 2]"}

# Cases that failed the contract before issue 10's audit (traceback, help instead of an error,
# silent acceptance, minutes of work before the error, or two lines).
FIXED = [
    (["data"], "required: ACTION"),
    (["train", "--out", "x", "--config", "bin.toml"], "not UTF-8"),
    (["presets", "bin.toml"], "not UTF-8"),
    (["query", "--params", "1B", "--cov", "foo"], "--cov must be one of"),
    (["theory", "seprank", "--table", "--out", "afile"], "not a directory"),
    (["seprank-trained", "--table", "--out", "afile", "--steps", "1"], "not a directory"),
    (["theory", "seprank", "--layers", "1", "--width", "100000"], "weights"),
    (["theory", "seprank", "--layers", "1", "--width", "4", "--positions", "100000"], "fewer positions"),
    # issue 23: an uncaught numpy ValueError (exit 1) for weights past int64
    (["theory", "seprank", "--layers", "1", "--width", "2", "--weight-range", "1e100"], "--weight-range must be in"),
    (["theory", "seprank", "--layers", "1", "--width", "2", "--weight-range", "9223372036854775806"],
     "--weight-range must be in"),
    # a maximum below the adaptive first round (8) was silently raised to 8; a 300-digit width echoed whole
    (["theory", "seprank", "--layers", "1", "--width", "2", "--max-templates", "3"], "--max-templates 3 is below"),
    (["theory", "seprank", "--table", "--max-templates", "2", "--out", "t"], "--max-templates 2 is below"),
    (["theory", "seprank", "--layers", "1", "--width", "1e300"], "width 1.0000e+300 (301 digits)"),
    (["sweep", "--preset", "smoke", "--results", "afile"], "not a directory"),
    (["train", "--preset", "smoke", "--out", "afile"], "--out afile exists and is not a directory"),
    # fresh-user review (session 7): a path under a file was the raw "[Errno 20] Not a directory: .../runs/L1-..."
    (["train", "--preset", "smoke", "--out", "afile/sub"], "--out afile/sub: afile exists and is not a directory"),
    (["train", "--out", "afile"], "--out afile exists and is not a directory"),
    (["reproduce", "--preset", "smoke", "--results", "afile"], "not a directory"),
    # found after the seed experiments (issue 11): an OSError after the work, an empty or repeated
    # element silently dropped or measured twice, argparse's message prefixed twice
    (["exp", "latency", "--results", "afile"], "--results afile exists and is not a directory"),
    (["exp", "triple", "--no-train", "--out", "afile"], "--out afile exists and is not a directory"),
    (["exp", "layerdrop", "--k", "1,1"], "--k repeats an element"),
    (["exp", "sawtooth", "--depths", "3,,4"], "--depths has an empty element"),
    (["exp", "seprank", "--results", "afile"], "--results afile exists and is not a directory"),
    (["theory", "shapes", "--budget", "1M", "--depths", "2,4,"], "--depths has an empty element"),
    (["fit", "--results", ".", "--seeds", "0,,1", "--out", "f.json"], "--seeds has an empty element"),
    (["exp", "latency", "--shapes"], "error: exp latency: argument --shapes: expected one argument"),
    # issue 24: a sweep announced its runs, then failed on the first claim file (two lines)
    (["sweep", "--preset", "smoke", "--results", "afile/sub"], "error: --results afile/sub is under "),
    (["reproduce", "--preset", "smoke", "--results", "afile/sub"], "error: --results afile/sub is under "),
    # issue 24: an answer for a network of 0.001 layers, a 201-digit number in one "line"
    (["query", "--layers", "0.001"], "error: --layers must be >= 1 (a depth in layers), got 0.001"),
    (["query", "--layers", "0.5", "--width", "64"], "error: --layers must be >= 1 (a depth in layers), got 0.5"),
    (["query", "--shape", "0.5x64"], "error: shape '0.5x64': the depth must be >= 1 layer, got 0.5"),
    (["theory", "params", "--layers", "1", "--width", "1e200", "--heads", "3"],
     "error: width 1.0000e+200 (201 digits) is not divisible by the number of heads 3\n"),
]

# Cases that already held: the contract for every subcommand.
HELD = [
    (["nope"], "invalid choice"),
    (["theory"], "required: THEORY_COMMAND"),
    (["theory", "threshold", "--width", "abc"], "cannot parse --width"),
    (["theory", "threshold", "--layers", "1e6"], "1..500"),
    (["theory", "params", "--layers", "2", "--width", "64", "--heads", "3"], "not divisible"),
    (["theory", "shapes", "--budget", "1M", "--depths", ","], "--depths is empty"),
    (["theory", "shapes", "--budget", "1M", "--depths", "2", "--count", "foo"], "invalid choice"),
    (["theory", "flops", "--layers", "2", "--width", "64", "--context", "0"], "--context must be >= 1"),
    (["theory", "bounds", "--layers", "2", "--width", "64", "--heads", "2", "--match-depths", "100000"], "1..500"),
    (["theory", "mlp", "--in", "0", "--hidden", "2", "--out", "1"], "--in must be >= 1"),
    (["theory", "sawtooth", "--depth", "100000"], "<= 10000"),
    (["theory", "seprank", "--layers", "1", "--width", "4", "--positions", "3"], "even"),
    (["theory", "seprank", "--layers", "400", "--width", "8"], "pass --allow-long"),
    (["data", "prepare", "--corpus", "nosuch", "--out", "x"], "unknown corpus 'nosuch'"),
    (["data", "prepare", "--text", "missing.txt", "--out", "x"], "not found"),
    (["data", "prepare", "--text", "afile", "--out", "afile"], "not a directory"),
    (["data", "prepare", "--text", "afile", "--out", "x", "--split", "0.5,0.5"], "three positive fractions"),
    (["data", "info", "nosuch"], "neither a known corpus (tinyshakespeare, kjv, austen, us_speeches, python_docs) "
                                 "nor an existing prepared directory"),
    (["data", "info", "afile"], "data info afile: a file; give a prepared directory"),
    # an unknown user's home: pathlib's expanduser raised RuntimeError (a traceback)
    (["data", "info", "~nosuchuser/x"], "neither a known corpus"),
    (["data", "prepare", "--text", "~nosuchuser/x.txt", "--out", "o"], "text file not found: ~nosuchuser/x.txt"),
    (["train", "--preset", "~nosuchuser/p.toml", "--out", "o"], "preset file not found: ~nosuchuser/p.toml"),
    (["train", "--out", "x", "--set", "nope.x=1"], "unknown config section 'nope'"),
    (["train", "--out", "x", "--set", "model.nope=1"], "unknown config field ModelConfig.nope"),
    (["train", "--out", "x", "--set", "model.n_layer=abc"], "must be an integer"),
    (["train", "--out", "x", "--set", "model.n_layer"], "section.field=value"),
    (["train", "--out", "x", "--config", "bad.toml"], "malformed TOML"),
    (["train", "--out", "x", "--config", "missing.toml"], "config file not found"),
    (["train", "--out", "x", "--preset", "nosuch"], "unknown preset 'nosuch'"),
    (["train", "--out", "x", "--devices", "0"], "--devices must be >= 1"),
    (["bench"], "required: WHAT"),
    (["bench", "train", "--mesh", "axb"], "--mesh"),
    (["bench", "train", "--heads", "3"], "divisible by model.n_head"),
    (["fit", "--results", "missing"], "results directory not found"),
    (["fit", "--results", ".", "--pairs", "foo"], "--pairs must be one of"),
    (["fit", "--results", ".", "--resample", "foo"], "--resample must be one of"),
    (["lrscan", "--results", "missing"], "results directory not found"),
    (["lrscan", "--results", ".", "--rule-power", "nan"], "positive number"),
    (["query", "--params", "1B", "--fit", "bad.json"], "cannot read fit file"),
    (["query", "--params", "1B", "--fit", "arr.json"], "not a depthwidth fit file"),
    (["presets", "nosuch"], "unknown preset 'nosuch'"),
    (["presets", "bad.toml"], "malformed TOML"),
    (["sweep", "--preset", "smoke", "--results", "r", "--worker", "3", "--num-workers", "2"], "--worker"),
    (["sweep", "--preset", "smoke", "--results", "r", "--set", "train.steps=0"], "train.steps must be >= 1"),
    (["sweep", "--preset", "smoke", "--results", "r", "--stale-after", "-1"], "--stale-after"),
    (["seprank-trained"], "needs --layers and --width"),
    (["seprank-trained", "--layers", "1", "--width", "4", "--corpus", "nosuch"], "unknown corpus"),
    (["reproduce", "--preset", "nosuch"], "unknown preset"),
    (["reproduce", "--preset", "smoke", "--results", "r", "--bootstrap", "1"], "--bootstrap must be >= 2"),
    (["figs", "--results", "missing", "--out", "o"], "results directory not found"),
    (["figs", "--results", ".", "--out", "o"], "no usable runs"),
    (["seprank-fig", "--table", "missing.json"], "cannot read the separation-rank table"),
    (["seprank-fig", "--table", "arr.json"], "not a separation-rank table"),
]


@pytest.mark.parametrize("argv, message", FIXED + HELD, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, argv, message):
    for name, data in _FILES.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("depthwidth: error:") and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(_FILES)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("depthwidth: error:") and err.count("\n") == 1, err
    return err.strip()


def test_a_held_out_split_shorter_than_one_sequence_is_refused_before_training(tmp_path, monkeypatch, capsys,
                                                                                corpora_dir):
    # Issue 24: a short corpus trained 100 steps and wrote two checkpoints, then failed
    # ("held-out split has 15 tokens"). 400 characters: 5% of them, 15 tokens, is the val split.
    text = (corpora_dir / "tinyshakespeare.txt").read_text()[:400]
    (tmp_path / "small.txt").write_text(text)
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--preset", "smoke", "--set", f"data.corpus={tmp_path / 'small.txt'}", "--out", "o"]) == 2
    assert _one_error_line(capsys) == (
        f"depthwidth: error: the val split of {tmp_path / 'small.txt'} has 15 tokens, fewer than one sequence of 33 "
        "(model.seq_len + 1): use a longer corpus or a shorter model.seq_len")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_a_sweep_without_its_corpus_fails_before_making_run_directories(jobs, tmp_path, monkeypatch, capsys):
    # session 7, left over: the results and first run directory were made, then the corpus was missing;
    # session 8, left over: with --jobs 2 the "workers pinned to cores" line came before the error
    # (pinned to this process's own cores, which a test harness may have narrowed to one)
    from depthwidth.data import corpora
    from depthwidth.experiments import runner

    monkeypatch.setattr(corpora, "BUNDLED", frozenset())  # as for a corpus that does not ship
    own = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if jobs and own is not None:
        monkeypatch.setattr(runner, "core_sets", lambda n: [set(own)] * n)
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "--preset", "smoke", "--results", "r", "--data-dir", str(tmp_path / "none"), *jobs]) == 2
    assert _one_error_line(capsys).startswith(
        f"depthwidth: error: corpus 'tinyshakespeare' not found: put tinyshakespeare.txt (1,115,394 bytes, "
        f"sha256 86c4e6aa9db7c042...) in {tmp_path / 'none'}")
    assert not (tmp_path / "r").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_a_sweep_into_proc_says_it_cannot_write(tmp_path, monkeypatch, capsys, corpora_dir):
    # session 7, left over: as root os.access(/proc) says yes; the claim file then failed with a raw errno
    assert main(["sweep", "--preset", "smoke", "--results", "/proc/nope", "--data-dir", str(corpora_dir)]) == 2
    assert _one_error_line(capsys).startswith("depthwidth: error: --results /proc/nope: cannot write in /proc: ")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("argv", [
    ["figs", "--results", "results/law-long", "--fit", "results/law-long/fit.json"],
    ["prediction-fig", "--prediction", "results/predictions/law-long.json"],
])
def test_figures_into_proc_say_which_flag_cannot_be_made(argv, capsys, monkeypatch):
    # session 8, left over: the drawing's mkdir raised a raw errno naming /proc/x, not the flag
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert main([*argv, "--out", "/proc/x/figs"]) == 2
    assert _one_error_line(capsys).startswith("depthwidth: error: --out /proc/x/figs: cannot write in /proc (")


@pytest.mark.parametrize("argv, message", [
    # session 9 fresh-user pass: a mistyped --results made results/typo/figures before its error
    (["figs", "--results", "typo"], "results directory not found: typo"),
    # ... and a file as --results was reported as a bad --out the user never gave
    (["figs", "--results", "f.json"], "results directory is a file: f.json"),
    # a directory or a binary file as a fit file was a raw errno / codec message
    (["predict", "--check", "p.json", "--fit", "r"], "--fit r is a results directory: give its fit file, r/fit.json"),
    (["predict", "--fit", "r"], "--fit r is a results directory: give its fit file, r/fit.json"),
    (["query", "--params", "1M", "--fit", "bin.json"],
     "cannot read fit file bin.json: not text (a fit file is JSON written by depthwidth fit)"),
])
def test_figs_and_fit_readers_name_what_is_wrong_and_leave_nothing(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.json").write_text("{}")
    (tmp_path / "bin.json").write_bytes(b"\x80\x81 not utf-8")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "fit.json").write_text("{}")
    before = sorted(tmp_path.rglob("*"))
    assert main(argv) == 2
    assert _one_error_line(capsys) == f"depthwidth: error: {message}"
    assert sorted(tmp_path.rglob("*")) == before


def _can_bind_read_only() -> bool:
    import shutil
    import subprocess

    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rm", "sh", "-c", "mount --bind -o ro /tmp /tmp"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_bind_read_only(), reason="needs `unshare -rm` to bind-mount a directory read-only")
def test_a_sweep_on_a_read_only_mount_names_the_file_system(tmp_path, cli_cmd):
    # Issue 24: "[Errno 2] No such file or directory: 'rw/r/runs/<id>/claim.json'", after a
    # line announcing the runs. (As root a chmod does not stop writes: a read-only mount does.)
    import shlex
    import subprocess

    (tmp_path / "ro").mkdir()
    cmd = " ".join(map(shlex.quote, cli_cmd + ["sweep", "--preset", "smoke", "--results", "ro/r"]))
    done = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount --bind -o ro ro ro && {cmd}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"depthwidth: error: --results ro/r: cannot write in {tmp_path / 'ro'}: Read-only file system\n"


def test_a_claim_that_cannot_be_written_says_why(tmp_path, monkeypatch):
    # Issue 24: the no-hard-links fallback hid EROFS behind ENOENT for the claim file.
    import errno

    from depthwidth import storage

    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "runs"))

    monkeypatch.setattr(storage, "write_atomic", read_only)
    with pytest.raises(OSError) as e:
        storage.open_results(tmp_path).create_exclusive("runs/x/claim.json", {})
    assert e.value.errno == errno.EROFS


@pytest.mark.parametrize("argv, line", [
    # fresh-user check: a results directory given as --fit, an unknown --curve named with --crossing
    (["query", "--params", "1.3B", "--fit", "results/law-long"],
     "depthwidth: error: --fit results/law-long is a results directory: give its fit file, results/law-long/fit.json"),
    (["fit", "--results", "results/law-long", "--out", "OUT", "--curve", "nosuch"],
     "depthwidth: error: --curve must be one of pchip, linear, got 'nosuch'"),
    (["fit", "--results", "results/law-long", "--out", "OUT", "--crossing", "middle"],
     "depthwidth: error: --crossing must be one of last, first, got 'middle'"),
    # fresh-user review 29: a numpy MemoryError traceback, a head count wider than the model, a
    # directory read as an unknown law, --cov silently ignored, the library's parameter name, an underflow
    (["query", "--params", "1B", "--fit", "results/law-long/fit.json", "--samples", "1e12"],
     "depthwidth: error: --samples must be <= 1,000,000 (~0.4 GB of memory and ~3 s per budget; more does not "
     "narrow the interval's Monte Carlo error usefully), got '1e12'"),
    (["query", "--params", "1B", "--n-head", "1000000"],
     "depthwidth: error: --n-head 1,000,000 is more than the optimal width 1,439 at budget 1B: each head needs at "
     "least one of the width's dimensions (d_model = n_head x head_dim)"),
    (["query", "--params", "1B", "--fit", "docs"],
     "depthwidth: error: --fit docs is a directory, not a fit file (a JSON written by depthwidth fit)"),
    (["query", "--params", "1B", "--cov", "scaled"],
     "depthwidth: error: --cov scaled needs a fit file as --fit: the built-in law levine2020 has no covariance "
     "of (a, b) (its paper gives none)"),
    (["theory", "threshold", "--layers", "1e6"],
     "depthwidth: error: --layers must be a whole number in 1..500 (3^L overflows a float past L ~ 646), "
     "got 1,000,000"),
    (["theory", "bounds", "--layers", "2", "--width", "64", "--heads", "2", "--match-depths", "2,600"],
     "depthwidth: error: --match-depths must be a whole number in 1..500 (3^L overflows a float past L ~ 646), "
     "got 600"),
    (["query", "--params", "1e-400"],
     "depthwidth: error: --params '1e-400' is too small: it underflows to 0 as a float (the smallest positive one "
     "is ~5e-324)"),
    (["query", "--params=-inf"], "depthwidth: error: --params must be finite, got '-inf'"),
    # a value that starts like a negative number reaches the option's own check (it was argparse's
    # "expected one argument")
    # fresh-user review (session 7): 1e9 replicates ran the machine out of memory
    (["fit", "--results", "results/law-long", "--out", "OUT", "--bootstrap", "1e9"],
     "depthwidth: error: --bootstrap must be <= 100,000 replicates (the crossing share's Monte Carlo error is then "
     "0.07 points; time grows linearly), got 1,000,000,000"),
    (["predict", "--fit", "results/predictions/law-long.json", "--check", "results/predictions/law-long.json"],
     "depthwidth: error: --fit results/predictions/law-long.json is a prediction file, not a measured fit (a "
     "`depthwidth fit` file of the predicted pairs' records)"),
    (["predict", "--fit", "results/law-long/estimators.json", "--check", "results/predictions/law-long.json"],
     "depthwidth: error: --fit results/law-long/estimators.json: not a depthwidth fit file"),
    (["query", "--params", "-1.3B"], "depthwidth: error: --params must be positive, got '-1.3B'"),
    (["predict", "--fit", "results/law-long/fit.json", "--pairs", "-1,2", "--out", "OUT"],
     "depthwidth: error: --pairs: '-1,2' needs 1 <= shallower < deeper"),
    # fresh-user review (session 8): a contradictory "not found ... (built-in laws: levine2020)"; "Is a directory: '.'"
    (["predict", "--fit", "levine2020", "--check", "results/predictions/law-long.json"],
     "depthwidth: error: levine2020 is a built-in law, not a fit file; this command needs a fit file (fit.json)"),
    (["predict", "--fit", "results/predict-23/fit.json", "--check", ""], "depthwidth: error: --check is empty: give a value"),
    (["predict", "--fit", "", "--check", "results/predictions/law-long.json"],
     "depthwidth: error: --fit is empty: give a value"),
    # fresh-user review (session 8): "" meant "." or the default (sweep trained into the working directory)
    (["sweep", "--preset", "smoke", "--results", ""], "depthwidth: error: --results is empty: give a value"),
    (["prediction-fig", "--prediction", "results/predictions/law-long.json", "--out", " "],
     "depthwidth: error: --out is empty: give a value"),
    (["data", "info", ""], "depthwidth: error: TARGET is empty: give a value"),
    (["query", "--params", "-.5"], "depthwidth: error: --params must be positive, got '-.5'"),
    # session 7, left over: the second value of a list flag was "unrecognized arguments: -1,2"
    (["predict", "--fit", "results/law-long/fit.json", "--pairs", "3,6", "-1,2", "--out", "OUT"],
     "depthwidth: error: --pairs: '-1,2' needs 1 <= shallower < deeper"),
    (["query", "--shape", "-3x768"], "depthwidth: error: shape depth must be positive, got '-3'"),
    # fresh-user review 29, left over: rounding flags were silently ignored without --params
    (["query", "--layers", "12", "--n-head", "16"],
     "depthwidth: error: --n-head shapes the rounded answer of --params; --layers and --shape answer no rounded shape"),
    (["query", "--shape", "12x768", "--round-width", "64"],
     "depthwidth: error: --round-width shapes the rounded answer of --params; --layers and --shape answer no rounded "
     "shape"),
    (["predict", "--fit", "results/law-long/fit.json", "--pairs", "3,6", "1000,2000", "--out", "OUT"],
     "depthwidth: error: --pairs 1000,2000: the law results/law-long/fit.json puts N* at ~10^233 parameters and "
     "its 95% interval up to ~10^333, past the largest float (~10^308): depth 1414 is far outside any range the "
     "fit (on depths 1.41-5.66) can speak for"),
    (["predict", "--fit", "results/law-long/fit.json", "--pairs", "1," + "1" * 400, "--out", "OUT"],
     "depthwidth: error: --pairs 1,1.1111e+399 (400 digits): the law results/law-long/fit.json cannot be evaluated "
     "in floats: that depth is far outside any range the fit (on depths 1.41-5.66) can speak for"),
])
def test_flags_are_named_in_their_errors(argv, line, tmp_path, monkeypatch, capsys):
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    argv = [str(tmp_path / "f.json") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    assert capsys.readouterr().err == line + "\n"
    assert not (tmp_path / "f.json").exists()


@pytest.mark.parametrize("argv", [
    ["fit", "--results", "results/law-long", "--out", "OUT"],
    ["fit", "--results", "results/law-long", "--out", "OUT", "--estimators"],  # its table goes beside OUT
    ["predict", "--fit", "results/law-long/fit.json", "--pairs", "3,6", "--out", "OUT"],
])
def test_an_output_file_in_a_missing_directory_is_refused_before_the_work(argv, tmp_path, monkeypatch, capsys):
    # fresh-user check: fit --out DIR/fit.json silently created DIR (and a typo a whole tree)
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    out = tmp_path / "nodir" / "f.json"
    assert main([str(out) if a == "OUT" else a for a in argv]) == 2
    assert capsys.readouterr().err == \
        f"depthwidth: error: --out {out}: directory {out.parent} does not exist (create it first)\n"
    (tmp_path / "afile").write_text("x")
    assert main([str(tmp_path / "afile" / "f.json") if a == "OUT" else a for a in argv]) == 2
    assert capsys.readouterr().err == \
        f"depthwidth: error: --out {tmp_path / 'afile' / 'f.json'}: {tmp_path / 'afile'} is not a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_an_output_url_needs_no_directory(monkeypatch, capsys):
    # an object store has no directories: memory://nodir/... is written as it is
    from depthwidth import storage

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    url = "memory://out-dir-check/nodir/p.json"
    assert main(["predict", "--fit", "results/law-long/fit.json", "--pairs", "3,6", "--out", url]) == 0, \
        capsys.readouterr().err
    assert storage.path(url).exists()
    storage.path(url).unlink()


@pytest.mark.parametrize("argv, line", [
    # fresh-user review 29: an existing directory as --out failed after the whole fit (36 s with
    # --estimators, its table already written) naming an internal temporary file; a file as figs
    # --out failed after drawing with "[Errno 17] File exists"
    (["fit", "--results", "results/law-long", "--out", "ADIR", "--estimators"],
     "depthwidth: error: --out ADIR is a directory: give a file name, e.g. ADIR/fit.json"),
    (["predict", "--fit", "results/law-long/fit.json", "--pairs", "3,6", "--out", "ADIR"],
     "depthwidth: error: --out ADIR is a directory: give a file name, e.g. ADIR/prediction.json"),
    (["figs", "--results", "results/law-long", "--out", "AFILE"],
     "depthwidth: error: --out AFILE is a file: figures go in a directory"),
    (["figs", "--results", "results/law-long", "--out", "AFILE/sub"],
     "depthwidth: error: --out AFILE/sub: AFILE is a file, not a directory"),
])
def test_an_output_of_the_wrong_kind_is_refused_before_the_work(argv, line, tmp_path, monkeypatch, capsys):
    import time

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    names = {"ADIR": str(tmp_path / "adir"), "AFILE": str(tmp_path / "afile")}
    sub = lambda a: a.replace("ADIR", names["ADIR"]).replace("AFILE", names["AFILE"])  # noqa: E731
    t0 = time.perf_counter()
    assert main([sub(a) for a in argv]) == 2
    assert capsys.readouterr().err == sub(line) + "\n"
    assert time.perf_counter() - t0 < 5  # before the fit or the drawing (seconds to minutes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]
    assert not any((tmp_path / "adir").iterdir())

