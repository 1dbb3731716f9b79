"""Results on any fsspec URL (issue 13, depthwidth.storage): train -> fit -> figs on ``memory://``
in one process, an exact resume there, a ``file://`` URL shared by worker processes, and the
one-line errors."""

import dataclasses
import json
import subprocess
from pathlib import Path

import fsspec
import pytest
from upath import UPath

from depthwidth import records, storage
from depthwidth.cli import main
from depthwidth.config import DataConfig, MeshConfig, ModelConfig, RunConfig, TrainConfig
from depthwidth.errors import UserError
from depthwidth.models.train import train_run

CFG = RunConfig(
    model=ModelConfig(n_layer=1, d_model=16, n_head=2, seq_len=32),
    data=DataConfig(corpus="tinyshakespeare", tokenizer="char"),
    train=TrainConfig(steps=20, batch_size=8, lr=3e-3, warmup_steps=4, log_every=5, ckpt_every=10, eval_every=10,
                      eval_batches=2, test_sequences=64),
    mesh=MeshConfig(data=1),
)

# 2 depths x 2 widths x 2 seeds: enough for the fit to look for transitions (it finds a result,
# "ok" or "insufficient", and writes it) and for the figures
GRID = """
name = "grid"
description = "2 x 2 x 2 tiny runs"
[base.model]
n_head = 2
seq_len = 32
[base.data]
corpus = "tinyshakespeare"
tokenizer = "char"
[base.train]
steps = 20
batch_size = 8
lr = 3e-3
warmup_steps = 4
log_every = 5
ckpt_every = 10
eval_batches = 2
test_sequences = 64
[grid]
depths = [1, 2]
seeds = [0, 1]
[grid.widths]
1 = [16, 24]
2 = [16, 24]
"""

TWO_RUNS = (GRID.replace("depths = [1, 2]", "depths = [1]").replace("seeds = [0, 1]", "seeds = [0]")
            .replace("2 = [16, 24]\n", ""))


@pytest.fixture(autouse=True)
def _env(tmp_path, tmp_path_factory, monkeypatch, corpora_dir):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("DEPTHWIDTH_DATA", str(corpora_dir))
    monkeypatch.setenv(storage.SCRATCH_ENV, str(tmp_path / "scratch"))
    yield
    fsspec.filesystem("memory").store.clear()  # memory:// is per process: tests must not see each other's
    fsspec.filesystem("memory").pseudo_dirs[:] = [""]


def _no_times(entries):
    return [{k: v for k, v in e.items() if k not in ("tokens_per_s", "mfu", "wall_s")} for e in entries]


def _log(run_dir):
    return [json.loads(x) for x in (run_dir / "log.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------------ the rules


def test_local_paths_stay_paths_and_urls_become_upaths(tmp_path):
    assert storage.path(str(tmp_path)) == tmp_path and type(storage.path(str(tmp_path))) is type(tmp_path)
    assert storage.scheme("gs://b/x") == "gs" and storage.scheme("/a/b") is None and storage.scheme("a:b") is None
    p = storage.path("memory://r/runs")
    assert isinstance(p, UPath) and str(p / "x") == "memory://r/runs/x"
    assert records.run_dir("memory://r", "abc") == UPath("memory://r/runs/abc")


def test_checkpoints_go_where_orbax_can_write_them(tmp_path):
    # local: beside the record; gs://: orbax writes the bucket itself (resume on any node); other
    # schemes, s3:// among them (orbax 0.12 cannot write it, issue 25): the local mirror under
    # $DEPTHWIDTH_SCRATCH, which a run names in one line
    assert storage.checkpoint_dir(tmp_path / "runs" / "a") == tmp_path / "runs" / "a" / "ckpt"
    assert storage.checkpoint_dir("gs://bucket/r/runs/a") == "gs://bucket/r/runs/a/ckpt"
    assert storage.checkpoint_dir("s3://bucket/r/runs/a/") == tmp_path / "scratch" / "s3" / "bucket" / "r" / "runs" / "a" / "ckpt"
    assert "checkpoints of s3:// runs stay on this machine" in storage.local_checkpoint_note("s3://b/r/runs/a")
    assert storage.local_checkpoint_note("gs://b/r/runs/a") is None and storage.local_checkpoint_note(tmp_path) is None
    assert storage.checkpoint_dir(f"file://{tmp_path}/runs/a") == tmp_path / "runs" / "a" / "ckpt"
    assert storage.checkpoint_dir("memory://r/runs/a") == tmp_path / "scratch" / "memory" / "r" / "runs" / "a" / "ckpt"
    # a URL cannot climb out of the mirror
    assert storage.scratch_dir("memory://../../etc/x") == tmp_path / "scratch" / "memory" / "etc" / "x"


def test_the_clients_environment_comes_from_one_variable_per_store():
    assert storage.client_env({}) == {}
    assert storage.client_env({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}) == {"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}
    assert storage.client_env({"STORAGE_EMULATOR_HOST": "127.0.0.1:4443"}) == {
        "STORAGE_EMULATOR_HOST": "127.0.0.1:4443", "TENSORSTORE_GCS_HTTP_URL": "http://127.0.0.1:4443",
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    # what a user set for a client wins
    assert storage.client_env({"STORAGE_EMULATOR_HOST": "http://h:1", "TENSORSTORE_GCS_HTTP_URL": "http://h:2"})[
        "TENSORSTORE_GCS_HTTP_URL"] == "http://h:2"


def test_exclusive_create_and_claims_work_on_a_url():
    assert records.write_atomic("memory://c/a.json", "1", exclusive=True) is True
    assert records.write_atomic("memory://c/a.json", "2", exclusive=True) is False
    assert UPath("memory://c/a.json").read_text() == "1"
    store = storage.open_results("memory://c")
    assert store.create_exclusive("runs/x/claim.json", {"token": "t1"}) is True
    assert store.create_exclusive("runs/x/claim.json", {"token": "t2"}) is False
    assert store.read_json("runs/x/claim.json") == {"token": "t1"} and store.enforces_exclusive
    store.replace("runs/x/claim.json", {"token": "t3"})
    assert store.read_json("runs/x/claim.json") == {"token": "t3"}
    store.remove("runs/x/claim.json")
    store.remove("runs/x/claim.json")  # already gone: nothing
    assert store.read_json("runs/x/claim.json") is None and not store.exists("runs/x/claim.json")


@pytest.mark.parametrize("where", ["local", "memory://store-layout"])
def test_the_results_store_has_one_layout_and_the_same_behaviour_on_both_backends(tmp_path, where):
    """open_results: the layout (runs/<id>/record.json, ...), the run listing, and a log that is
    appended to locally and rewritten whole on a URL read back the same bytes."""
    root = tmp_path / "r" if where == "local" else where
    store = storage.open_results(root)
    assert isinstance(store, storage.UrlResultsStore if where != "local" else storage.ResultsStore)
    assert storage.open_results(store) is store
    assert str(store.record_path("a")) == str(records.run_dir(root, "a") / storage.RECORD)
    rec = records.Record(run_id="a", status="done", config={}, kind="toy", finished_at="t")
    assert str(records.write_record(root, rec)) == str(store.record_path("a"))
    assert store.path(f"{storage.RUNS}/a/{storage.RECORD}").read_text() == storage.json_text(rec.to_dict())
    store.run_dir("b").mkdir(parents=True, exist_ok=True)
    store.replace(f"{storage.RUNS}/b/{storage.CONFIG}", {"run_id": "b"})
    assert store.run_ids() == ["a", "b"] and [str(p) for p in store.record_paths()] == [str(store.record_path("a"))]
    log = store.open_log(f"{storage.RUNS}/b/{storage.LOG}", '{"step": 1}\n')
    log.write('{"step": 2}\n')
    log.flush()
    log.close()
    assert store.path(f"{storage.RUNS}/b/{storage.LOG}").read_text() == '{"step": 1}\n{"step": 2}\n'


@pytest.mark.parametrize("where", ["local", "memory://derived"])
def test_derived_files_go_through_a_store_and_an_unchanged_result_is_not_rewritten(tmp_path, where):
    """A fit, a summary or a figure (any file derived from the records) is written with the
    store's write_if_changed / write_json_if_changed; a file named on its own (fit --out) gets
    the store of its directory. Same bytes, or the same JSON up to SAME_RTOL: not rewritten."""
    root = str(tmp_path / "out") if where == "local" else where
    store, name = storage.store_of_file(f"{root}/fit.json")
    assert (store.location.rstrip("/"), name) == (root, "fit.json")
    assert storage.store_of_file("fit.json")[0].root == storage.path(".")
    fit = {"law": {"a": 3.09, "b": 0.184}, "n": 3}
    assert storage.write_json_if_changed(f"{root}/fit.json", fit) is True
    assert storage.read_text(f"{root}/fit.json") == storage.json_text(fit)
    # another CPU's last bits: the same result, bytes kept; a changed result: written
    assert store.write_json_if_changed("fit.json", {**fit, "law": {"a": 3.09 * (1 + 1e-15), "b": 0.184}}) is False
    assert storage.read_bytes(f"{root}/fit.json") == storage.json_text(fit).encode()
    assert store.write_json_if_changed("fit.json", {**fit, "n": 4}) is True
    assert json.loads(store.read_text("fit.json"))["n"] == 4
    assert store.write_if_changed("figures/f.png", b"\x89PNG") is True
    assert store.write_if_changed("figures/f.png", b"\x89PNG") is False
    assert store.read_bytes("figures/f.png") == b"\x89PNG"
    with pytest.raises(FileNotFoundError):
        store.read_bytes("nothing.json")


def test_urls_are_normalised_or_refused_when_they_are_ambiguous(tmp_path):
    assert storage.path("FILE:///tmp/x").protocol == "file"  # fsspec's protocols are lower case
    with pytest.raises(UserError, match="needs an absolute path .* names host 'rel'"):
        storage.path("file://rel/x")  # fresh-user finding: trained into ./rel
    with pytest.raises(UserError, match="'..' in a URL"):
        storage.path("memory://a/../b")  # fresh-user finding: stored under the literal key /a/../b
    # the same folder as a path and as a file:// URL (fresh-user finding: a spurious note)
    assert storage.same_location(str(tmp_path), f"file://{tmp_path}/")
    assert not storage.same_location(str(tmp_path), f"file://{tmp_path}/x")
    assert not storage.same_location("memory://a", "memory://b") and storage.same_location("gs://b/x/", "gs://b/x")


def test_memory_urls_are_refused_where_other_processes_would_use_them():
    with pytest.raises(UserError, match="lives inside one process"):
        storage.require_shared("memory://r", "--jobs 2")
    storage.require_shared("gs://b/r", "--jobs 2")  # shared: fine
    storage.require_shared("/tmp/r", "--jobs 2")


@pytest.mark.parametrize("argv, msg", [
    (["fit", "--results", "nope://b/r"], "cannot open nope://b/r: Unsupported filesystem: 'nope'"),
    (["fit", "--results", "memory://absent"], "results directory not found: memory://absent"),
    (["sweep", "--preset", "smoke", "--results", "memory://r", "--jobs", "2"], "lives inside one process"),
    (["sweep", "--preset", "smoke", "--results", "memory://r", "--num-workers", "2"], "lives inside one process"),
    (["exp", "triple", "--results", "memory://t"], "the seed experiments read and write local paths"),
    (["exp", "latency", "--out", "gs://b/l"], "the seed experiments read and write local paths"),
])
def test_bad_urls_are_one_line_errors(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err


def test_a_url_results_that_is_a_file_is_refused_before_any_work(capsys):
    UPath("memory://f").write_text("not a directory")
    assert main(["train", "--out", "memory://f"]) == 2
    assert "--out memory://f exists and is not a directory" in capsys.readouterr().err
    # fresh-user findings: reproduce checked --out only after its sweep; fit/figs said "not found"
    for out in ("memory://f", "memory://f/sub"):  # --out the file, or under it (fresh-user findings)
        assert main(["reproduce", "--preset", "smoke", "--results", "memory://nothing", "--out", out]) == 2
        assert f"--out {out}: memory://f exists and is not a directory" in capsys.readouterr().err
    assert not UPath("memory://nothing").exists()  # nothing trained
    for argv in (["fit", "--results", "memory://f"], ["figs", "--results", "memory://f", "--out", "memory://o"]):
        assert main(argv) == 2
        assert "results directory is a file: memory://f" in capsys.readouterr().err


# ------------------------------------------------------------------------------ end to end


def test_memory_url_train_fit_figs_end_to_end(tmp_path, capsys):
    preset = tmp_path / "grid.toml"
    preset.write_text(GRID)
    assert main(["sweep", "--preset", str(preset), "--results", "memory://r", "--no-progress", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (len(rep["trained"]), rep["failed"]) == (8, [])
    recs = records.iter_records("memory://r")
    assert len(recs) == 8 and all(r["status"] == "finished" for r in recs)
    run = records.run_dir("memory://r", recs[0]["run_id"])
    assert [e["step"] for e in _log(run)] == [5, 10, 15, 20]
    assert not (tmp_path / "scratch").exists()  # the checkpoints in the local mirror were deleted
    # a second pass trains nothing
    assert main(["sweep", "--preset", str(preset), "--results", "memory://r", "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trained"] == []

    assert main(["fit", "--results", "memory://r", "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    stored = json.loads(UPath("memory://r/fit.json").read_text())
    assert fit["out"] == "memory://r/fit.json" and stored["table"]["results"] == "memory://r"
    assert stored["table"]["n_used"] == 8 and stored["status"] == fit["status"]
    # an fsspec error has no errno text: it is named (fresh-user finding: the bare path was the message)
    assert main(["fit", "--results", "memory://r", "--out", "memory://r/fit.json/x.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("depthwidth: error: FileExistsError: "), err

    assert main(["figs", "--results", "memory://r", "--fit", "memory://r/fit.json", "--out", "memory://r/figures",
                 "--json"]) == 0
    figs = json.loads(capsys.readouterr().out)
    files = [f[k] for f in figs["figures"] for k in ("png", "pdf")]
    assert len(files) == 10 and all(f.startswith("memory://r/figures/") for f in files)
    for f in files:
        head = UPath(f).read_bytes()[:5]
        assert head == (b"\x89PNG\r" if f.endswith(".png") else b"%PDF-")
    # the same figures as from a local copy of the same records
    local = tmp_path / "local"
    fsspec.filesystem("memory").get("/r/runs", str(local / "runs"), recursive=True)
    assert main(["figs", "--results", str(local), "--out", str(tmp_path / "figs"), "--json"]) == 0
    capsys.readouterr()
    assert main(["figs", "--results", "memory://r", "--out", "memory://r/figs2", "--json"]) == 0
    capsys.readouterr()
    for name in ("png", "pdf"):
        for f in sorted((tmp_path / "figs").glob(f"*.{name}")):
            assert UPath(f"memory://r/figs2/{f.name}").read_bytes() == f.read_bytes(), f.name

    # reproduce = sweep + fit + figures + summary, all on the URL (nothing left to train)
    assert main(["reproduce", "--preset", str(preset), "--results", "memory://r", "--out", "memory://r/rep",
                 "--no-progress", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["sweep"]["trained"] == [] and rep["files"] == ["memory://r/rep/summary.json", "memory://r/rep/summary.md"]
    summary = json.loads(UPath("memory://r/rep/summary.json").read_text())
    assert summary["results"] == "memory://r" and summary["corpora"]["tinyshakespeare"]["figures"]
    assert "](figures/fig1_loss_vs_params.png)" in UPath("memory://r/rep/summary.md").read_text()


def test_a_run_killed_on_a_url_resumes_exactly_as_an_uninterrupted_local_run(tmp_path):
    local = train_run(CFG, tmp_path / "local", progress=False, verbose=False)
    assert train_run(CFG, "memory://k", progress=False, verbose=False, stop_after=10) is None
    run = records.run_dir("memory://k", local["run_id"])
    ckpt = storage.checkpoint_dir(run)
    assert sorted(p.name for p in ckpt.iterdir() if p.name.isdigit()) == ["10"]  # in the local mirror
    assert [e["step"] for e in _log(run)] == [5, 10] and not (run / "record.json").exists()
    rec = train_run(CFG, "memory://k", progress=False, verbose=False)
    assert json.loads(json.dumps(rec)) == records.read_record(run / "record.json")
    for k in ("test_loss", "val_loss", "train_loss", "test_loss_chunks", "steps", "tokens", "config", "run_id"):
        assert json.dumps(rec[k]) == json.dumps(local[k]), k
    assert _no_times(_log(run)) == _no_times(_log(tmp_path / "local" / "runs" / local["run_id"]))
    assert not ckpt.exists()


def test_a_file_url_is_shared_by_two_worker_processes(tmp_path, cli_cmd, engine_env):
    # file:// goes through fsspec (records, logs, claims with mode "xb") like a bucket would,
    # but other processes see it: two workers, each run trained once
    preset = tmp_path / "two.toml"
    preset.write_text(TWO_RUNS)
    url = f"file://{tmp_path}/res"
    env = {**engine_env, storage.SCRATCH_ENV: str(tmp_path / "scratch")}
    argv = cli_cmd + ["sweep", "--preset", str(preset), "--results", url, "--jobs", "2", "--no-progress", "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rep = json.loads(done.stdout)
    assert (len(rep["trained"]), rep["failed"]) == (2, [])
    recs = records.iter_records(tmp_path / "res")  # the same files, read as a local path
    assert len(recs) == 2 and len({r["run_id"] for r in recs}) == 2
    for r in recs:
        d = tmp_path / "res" / "runs" / r["run_id"]
        assert not (d / "claim.json").exists() and not (d / "ckpt").exists()
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and json.loads(again.stdout)["trained"] == [], again.stderr[-2000:]


def test_load_run_reloads_kept_weights_from_a_url(tmp_path):
    from depthwidth.models.train import load_run

    cfg = dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, keep_weights=True))
    rec = train_run(cfg, "memory://w", progress=False, verbose=False)
    rcfg, model = load_run(f"memory://w/runs/{rec['run_id']}")
    assert rcfg.model.d_model == 16 and model is not None


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux's /proc (a directory no file can be created in)")
def test_a_write_that_cannot_create_its_temp_file_names_the_asked_path(capsys):
    """`fit --out /proc/version` named the hidden temp file (/proc/.version.PID.HEX) in its error."""
    with pytest.raises(OSError) as ei:
        storage.write_atomic("/proc/version", "x")
    assert ei.value.filename == "/proc/version" and "temporary file in /proc" in str(ei.value)
    assert main(["fit", "--results", str(Path(__file__).resolve().parents[1] / "results" / "law-long"),
                 "--out", "/proc/version"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'/proc/version'" in err and "/proc/.version" not in err
