"""Training on a real corpus: exact resume, divergence handling, the result record, kept weights, the CLI."""

import dataclasses
import json

import numpy as np
import pytest

from depthwidth import records
from depthwidth.cli import main
from depthwidth.config import DataConfig, MeshConfig, ModelConfig, RunConfig, TrainConfig
from depthwidth.errors import UserError
from depthwidth.models.engine import learning_rate_schedule
from depthwidth.models.train import load_run, train_run

# Char-level tiny shakespeare (the real corpus), a model small enough for seconds on CPU.
CFG = RunConfig(
    model=ModelConfig(n_layer=2, d_model=32, n_head=2, seq_len=32),
    data=DataConfig(corpus="tinyshakespeare", tokenizer="char"),
    train=TrainConfig(steps=20, batch_size=8, lr=3e-3, warmup_steps=4, log_every=5, ckpt_every=10,
                      eval_batches=2, test_sequences=64),
    mesh=MeshConfig(data=1),
)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch, corpora_dir):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("DEPTHWIDTH_DATA", str(corpora_dir))


def _params(results, run_id):
    import orbax.checkpoint as ocp

    mngr = ocp.CheckpointManager((results / "runs" / run_id / "ckpt").absolute())
    step = mngr.latest_step()
    tree = mngr.restore(step, args=ocp.args.StandardRestore())
    mngr.close()
    return step, tree["params"]


def test_schedule_is_warmup_then_cosine_to_zero():
    s = learning_rate_schedule(100, 10, 1e-3)
    assert float(s(0)) == 0.0
    assert float(s(10)) == pytest.approx(1e-3)
    # Halfway through the cosine part: lr/2 (cos(pi/2) = 0 -> 0.5*(1+0)).
    assert float(s(55)) == pytest.approx(0.5e-3, rel=1e-5)
    assert float(s(100)) == pytest.approx(0.0, abs=1e-12)


KEEP = dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, keep_weights=True))


def test_kill_and_resume_is_bit_identical(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    rec_a = train_run(KEEP, a, progress=False, verbose=False)
    assert train_run(KEEP, b, progress=False, verbose=False, stop_after=10) is None  # "killed" at 10
    rec_b = train_run(KEEP, b, progress=False, verbose=False)  # resumed: 10 more
    assert rec_a["steps"] == rec_b["steps"] == 20
    sa, pa = _params(a, rec_a["run_id"])
    sb, pb = _params(b, rec_b["run_id"])
    assert sa == sb == 20
    for x, y in zip(__import__("jax").tree.leaves(pa), __import__("jax").tree.leaves(pb)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert rec_a["test_loss"] == rec_b["test_loss"] and rec_a["val_loss"] == rec_b["val_loss"]
    la = [json.loads(line) for line in (a / "runs" / rec_a["run_id"] / "log.jsonl").read_text().splitlines()]
    lb = [json.loads(line) for line in (b / "runs" / rec_b["run_id"] / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in la] == [e["step"] for e in lb] == [5, 10, 15, 20]
    assert [e["loss"] for e in la] == [e["loss"] for e in lb]


def test_a_truncated_latest_checkpoint_falls_back_to_the_older_one(tmp_path, capsys):
    # Issue 10: a truncated latest checkpoint gave a 141-line orbax traceback and exit 1 though
    # the checkpoint of step 10 was fine. Resuming from it is as exact as from the latest.
    a, b = tmp_path / "a", tmp_path / "b"
    rec_a = train_run(CFG, a, progress=False, verbose=False)
    assert train_run(CFG, b, progress=False, verbose=False, stop_after=15) is None  # saved at 10 and 15
    latest = b / "runs" / rec_a["run_id"] / "ckpt" / "15"
    files = [f for f in latest.rglob("*") if f.is_file() and f.stat().st_size > 0]
    assert files
    for f in files:  # a kill in the middle of writing them
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    capsys.readouterr()
    rec_b = train_run(CFG, b, progress=False, verbose=True)
    err = [line for line in capsys.readouterr().err.splitlines() if "checkpoint" in line or "resumed" in line]
    assert len(err) == 2 and "checkpoint at step 15 is unreadable" in err[0] and "from step 10" in err[1]
    assert rec_b["steps"] == 20 and rec_b["test_loss"] == rec_a["test_loss"]


def test_records_name_the_package_version():
    # Issue 10: records made from a pip install had git_rev null and no package version.
    import importlib.metadata

    from depthwidth import __version__
    from depthwidth.models.train import _versions

    try:
        want = importlib.metadata.version("depthwidth")
    except importlib.metadata.PackageNotFoundError:
        want = __version__
    got = _versions()
    assert got["depthwidth"] == want
    # Issue 39: the versions that decide the numbers, and the lock the environment came from.
    assert got["jaxlib"] == importlib.metadata.version("jaxlib") and got["scipy"] == importlib.metadata.version("scipy")
    import hashlib
    from pathlib import Path

    lock = Path(__file__).resolve().parents[2] / "uv.lock"
    assert got["uv.lock"] == hashlib.sha256(lock.read_bytes()).hexdigest() and len(got["uv.lock"]) == 64


def test_record_fields_and_values(tmp_path):
    rec = train_run(CFG, tmp_path, progress=False, verbose=False)
    records.validate_record(rec)
    on_disk = records.read_record(tmp_path / "runs" / rec["run_id"] / "record.json")
    assert on_disk == json.loads(json.dumps(rec))
    assert rec["status"] == "finished" and rec["vocab_size"] == 65  # tiny shakespeare has 65 characters
    L, d, V, T = 2, 32, 65, 32
    assert rec["params"]["kaplan"] == 12 * L * d * d
    assert rec["params"]["non_embedding"] == L * (12 * d * d + 13 * d) + 2 * d
    assert rec["params"]["embedding"] == V * d + T * d
    assert rec["tokens"] == 20 * 8 * 32
    # An untrained 65-way model sits near ln 65 = 4.17 nats; 20 steps must already do better.
    assert 1.0 < rec["test_loss"] < np.log(65)
    assert rec["test_sequences"] == 64
    assert not (tmp_path / "runs" / rec["run_id"] / "ckpt").exists()  # checkpoints freed once the record exists
    with pytest.raises(UserError, match="weights were not kept"):  # so there is no model to load
        load_run(tmp_path / "runs" / rec["run_id"])
    # A finished run is not retrained: same record back, file untouched.
    mtime = (tmp_path / "runs" / rec["run_id"] / "record.json").stat().st_mtime_ns
    assert train_run(CFG, tmp_path, progress=False, verbose=False) == on_disk
    assert (tmp_path / "runs" / rec["run_id"] / "record.json").stat().st_mtime_ns == mtime


def test_kept_weights_reload_and_reproduce_the_test_loss(tmp_path, corpora_dir):
    from depthwidth.data.prepare import prepared_dir_for
    from depthwidth.data.tokenfiles import open_prepared

    assert KEEP.run_id() == CFG.run_id()  # keep_weights is operational: not in the run id
    rec = train_run(KEEP, tmp_path, progress=False, verbose=False)
    cfg, model = load_run(tmp_path / "runs" / rec["run_id"])
    assert cfg.model.vocab_size == rec["vocab_size"] == 65 and cfg.train == KEEP.train
    # The recorded test loss: the mean next-token loss over the first test_sequences = 64
    # non-overlapping windows of T = 32 tokens of the test split, recomputed with the model.
    test = open_prepared(prepared_dir_for(cfg.data, corpora_dir)).test
    T, n = cfg.model.seq_len, rec["test_sequences"]
    seq = np.asarray(test[np.arange(n)[:, None] * T + np.arange(T + 1)[None]], dtype=np.int32)
    logits = np.asarray(model(seq[:, :-1]), dtype=np.float64)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, seq[:, 1:, None], axis=-1).mean()
    assert nll == pytest.approx(rec["test_loss"], rel=1e-5)


def test_divergence_is_recorded_not_raised(tmp_path):
    bad = dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, lr=1e12, grad_clip=0.0, warmup_steps=0))
    rec = train_run(bad, tmp_path, progress=False, verbose=False)
    assert rec["status"] == "diverged" and rec["test_loss"] is None
    assert records.read_record(tmp_path / "runs" / rec["run_id"] / "record.json")["status"] == "diverged"


def test_an_exploding_finite_loss_is_diverged(tmp_path):
    # Issue 10 item 5: lr=1000 without clipping gave a finite test loss of 2.4M nats/token,
    # recorded as "finished". Far above ln V (a uniform guess: ln 65 = 4.17) is diverged.
    bad = dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, lr=1000.0, grad_clip=0.0, warmup_steps=0))
    rec = train_run(bad, tmp_path, progress=False, verbose=False)
    assert rec["status"] == "diverged" and rec["test_loss"] is None
    assert "ln V" in rec["diverged_reason"]


def test_cli_train_writes_record(tmp_path, capsys):
    rc = main(["train", "--out", str(tmp_path), "--set", "model.n_layer=1", "--set", "model.d_model=16",
               "--set", "model.seq_len=16", "--set", "train.steps=5", "--set", "train.batch_size=4",
               "--set", "train.warmup_steps=1", "--set", "train.test_sequences=8", "--set", "mesh.data=1",
               "--quiet", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "finished" and (tmp_path / "runs" / out["run_id"] / "record.json").exists()


@pytest.mark.parametrize("argv", [
    ["train", "--out", "x", "--set", "model.d_model=33"],  # not divisible by n_head=2
    ["train", "--out", "x", "--set", "model.n_layer=0"],
    ["train", "--out", "x", "--set", "model.nope=1"],
    ["train", "--out", "x", "--set", "train.lr=abc"],
    ["train", "--out", "x", "--set", "data.corpus=no_such_corpus", "--set", "mesh.data=1"],
    ["bench", "train", "--width", "-5"],
])
def test_cli_bad_input_is_one_line_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("depthwidth: error:")


def test_a_step_that_cannot_fit_fails_before_step_0():
    import types

    from depthwidth.models.engine import _check_fits

    class Dev:  # an accelerator reporting a 1 GiB limit (CPUs report none)
        def memory_stats(self):
            return {"bytes_limit": 2**30}

    mesh = types.SimpleNamespace(devices=np.array([Dev()]))
    # arguments 0.5 GiB + outputs 0.5 GiB aliased onto them + 0.4 GiB temporaries = 0.9 GiB: fits.
    fits = {"argument_bytes": 2**29, "output_bytes": 2**29, "alias_bytes": 2**29, "temp_bytes": int(0.4 * 2**30)}
    _check_fits(fits, mesh)
    with pytest.raises(UserError, match=r"needs 1.1 GiB per device \(at least\) but 1.0 GiB"):
        _check_fits({**fits, "temp_bytes": int(0.6 * 2**30)}, mesh)
    _check_fits({**fits, "temp_bytes": 2**40}, types.SimpleNamespace(devices=np.array([object()])))  # no stats


def test_a_cpu_step_is_checked_against_the_available_host_memory(monkeypatch):
    # Issue 10: the check used the total RAM; a CPU device has no memory_stats, so the limit
    # is what the host has available now, shared by the mesh's devices.
    import types

    from depthwidth.models.engine import _check_fits

    cpu = types.SimpleNamespace(platform="cpu", memory_stats=lambda: None)
    monkeypatch.setattr("depthwidth.hostcpu.available_memory_bytes", lambda: 2 * 2**30)
    step = {"argument_bytes": 2**29, "output_bytes": 0, "alias_bytes": 0, "temp_bytes": 2**29}  # 1 GiB
    _check_fits(step, types.SimpleNamespace(devices=np.array([cpu])))
    with pytest.raises(UserError, match=r"needs 1.0 GiB per device \(at least\) but 0.5 GiB"):
        _check_fits(step, types.SimpleNamespace(devices=np.array([cpu] * 4)))


@pytest.mark.parametrize("argv,msg", [
    (["--set", "model.n_layer=nan"], "n_layer must be an integer"),
    (["--set", "train.lr=inf"], "lr must be a finite number"),
    (["--set", "model.d_model=1e12"], "model.d_model must be in 1..1048576"),
    # 100 layers of width 100,000: ~48 TB of fp32 weights; refused before compiling, in seconds.
    (["--set", "model.d_model=100000", "--set", "model.n_layer=100", "--set", "mesh.data=1"], "GiB per device"),
])
def test_absurd_configs_fail_fast_with_one_line(argv, msg, tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]


def test_warmup_as_long_as_training_is_refused_before_any_directory(tmp_path, capsys):
    # Issue 10: warmup_steps == steps left no steps to decay over: an optax traceback
    # (decay_steps=0) after the run directory was made.
    argv = ["train", "--out", str(tmp_path), "--set", "train.steps=10", "--set", "train.warmup_steps=10"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.warmup_steps must be in 0..9" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_tensorboard_without_tensorboardx_is_one_line_before_compiling(tmp_path, capsys, monkeypatch):
    # Issue 10: the ImportError came after compiling, as a traceback.
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    assert importlib.util.find_spec("tensorboardX") is None or sys.modules["tensorboardX"] is None
    monkeypatch.setattr("depthwidth.models.train.build_engine",
                        lambda *a, **k: pytest.fail("compiled before checking for tensorboardX"))
    assert main(["train", "--out", str(tmp_path), "--tensorboard", "--set", "train.steps=2",
                 "--set", "train.warmup_steps=0", "--set", "mesh.data=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tensorboardX" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_unwritable_out_is_one_line(capsys):
    assert main(["train", "--out", "/dev/null/x", "--set", "mesh.data=1", "--set", "train.steps=1",
                 "--set", "train.warmup_steps=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/dev/null exists and is not a directory" in err[0]


def test_a_second_signal_during_the_stop_checkpoint_waits_for_it(tmp_path, monkeypatch, interactive_sigint):
    # Issue 40: Ctrl-C lands in step 7 (no checkpoint due before 10), SIGTERM while the stop
    # saves the checkpoint of step 7. The save completes; the run stops there (SIGINT's 130)
    # and resumes from step 7 to the uninterrupted result.
    import os
    import signal
    import time

    import orbax.checkpoint as ocp

    from depthwidth import interrupts
    from depthwidth.models import train as train_mod

    ref = train_run(CFG, tmp_path / "ref", progress=False, verbose=False)
    real_batch, real_save = train_mod.get_batch, ocp.CheckpointManager.save

    def batch(data, seed, step, *a):
        if step == 6:  # the batch of the 7th step
            os.kill(os.getpid(), signal.SIGINT)
        return real_batch(data, seed, step, *a)

    def save(self, step, *a, **k):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # Python runs the handler here, inside the save
        return real_save(self, step, *a, **k)

    monkeypatch.setattr(train_mod, "get_batch", batch)
    monkeypatch.setattr(ocp.CheckpointManager, "save", save)
    with pytest.raises(interrupts.Interrupted) as got:
        train_run(CFG, tmp_path / "b", progress=False, verbose=False)
    assert got.value.signum == signal.SIGINT and interrupts.exit_code(got.value) == 130
    assert str(got.value).endswith("stopped at step 7 of 20 and saved a checkpoint there: "
                                   "the same command resumes from step 7")
    ckpt = tmp_path / "b" / "runs" / ref["run_id"] / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["7"]  # complete: no *.orbax-checkpoint-tmp*
    monkeypatch.undo()
    rec = train_run(CFG, tmp_path / "b", progress=False, verbose=False)
    assert (rec["test_loss"], rec["val_loss"], rec["train_loss"]) == (ref["test_loss"], ref["val_loss"], ref["train_loss"])
    la, lb = ([json.loads(x) for x in (d / "runs" / ref["run_id"] / "log.jsonl").read_text().splitlines()]
              for d in (tmp_path / "ref", tmp_path / "b"))
    assert [(e["step"], e["loss"], e["grad_norm"]) for e in la] == [(e["step"], e["loss"], e["grad_norm"]) for e in lb]


def test_a_signal_in_the_last_step_resumes_to_the_same_record(tmp_path, monkeypatch, interactive_sigint):
    # A Ctrl-C in step 20 of 20: the checkpoint of step 20 is saved and the run stops before
    # its evaluation; the rerun has no step left to train, yet its record is the uninterrupted
    # one, train loss (the last logged window's mean) included. CI found train_loss None here.
    import os
    import signal

    from depthwidth import interrupts
    from depthwidth.models import train as train_mod

    ref = train_run(CFG, tmp_path / "ref", progress=False, verbose=False)
    real_batch = train_mod.get_batch

    def batch(data, seed, step, *a):
        if step == 19:  # the batch of the last step
            os.kill(os.getpid(), signal.SIGINT)
        return real_batch(data, seed, step, *a)

    monkeypatch.setattr(train_mod, "get_batch", batch)
    with pytest.raises(interrupts.Interrupted) as got:
        train_run(CFG, tmp_path / "b", progress=False, verbose=False)
    assert str(got.value).endswith("stopped at step 20 of 20 and saved a checkpoint there: "
                                   "the same command resumes from step 20")
    monkeypatch.undo()
    rec = train_run(CFG, tmp_path / "b", progress=False, verbose=False)
    same = ("steps", "tokens", "train_loss", "val_loss", "test_loss", "test_loss_chunks")
    assert {k: rec[k] for k in same} == {k: ref[k] for k in same}
    assert rec["train_loss"] is not None


def test_a_signal_in_the_final_evaluation_stops_with_the_resume_line(tmp_path, monkeypatch):
    # After the last step the loop's handlers are gone; a Ctrl-C in the final evaluation is a
    # plain KeyboardInterrupt. It stops the run with the same one line as a stop in a step
    # (the last step's checkpoint is on disk), and the rerun gives the uninterrupted record.
    import signal

    from depthwidth import interrupts
    from depthwidth.models import train as train_mod

    ref = train_run(CFG, tmp_path / "ref", progress=False, verbose=False)
    real_eval = train_mod._final_eval

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_mod, "_final_eval", ctrl_c)
    with pytest.raises(interrupts.Interrupted) as got:
        train_run(CFG, tmp_path / "b", progress=False, verbose=False)
    assert got.value.signum == signal.SIGINT and interrupts.exit_code(got.value) == 130
    assert str(got.value).endswith("stopped at step 20 of 20 in its final evaluation, with a checkpoint there: "
                                   "the same command resumes from step 20")
    monkeypatch.setattr(train_mod, "_final_eval", real_eval)
    rec = train_run(CFG, tmp_path / "b", progress=False, verbose=False)
    same = ("steps", "train_loss", "val_loss", "test_loss", "test_loss_chunks")
    assert {k: rec[k] for k in same} == {k: ref[k] for k in same}
