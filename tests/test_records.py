"""The result record (depthwidth.records): the one atomic writer, the Record type and its kinds,
and the run-id rule on every committed record."""

import json
import os
import stat
from pathlib import Path

import pytest

from depthwidth import records
from depthwidth.config import from_dict
from depthwidth.errors import UserError

REPO = Path(__file__).resolve().parents[1]
COMMITTED = sorted(REPO.glob("results/*/runs/*/record.json"))


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_atomic_writer_files_follow_the_umask(tmp_path, umask_022):
    # 0666 & ~022 = 0644, as a plain open() gives (tempfile.mkstemp would give 0600).
    p = tmp_path / "sub" / "x.json"
    assert records.write_json_atomic(p, {"b": 1, "a": [1.5]})
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert p.read_text() == '{\n "a": [\n  1.5\n ],\n "b": 1\n}\n'  # indent 1, sorted keys, final newline
    records.write_atomic(p, b"bytes")
    assert p.read_bytes() == b"bytes" and stat.S_IMODE(p.stat().st_mode) == 0o644
    assert sorted(q.name for q in p.parent.iterdir()) == ["x.json"]  # no temp file left behind


def test_write_if_changed_leaves_an_identical_file_alone(tmp_path):
    # Issue 10: the quick start rewrote the tracked results/cpu/summary.json.
    p = tmp_path / "summary.json"
    assert records.write_if_changed(p, records.json_text({"a": 1}))
    os.utime(p, ns=(1, 1))
    assert not records.write_if_changed(p, records.json_text({"a": 1}))
    assert p.stat().st_mtime_ns == 1
    assert records.write_if_changed(p, records.json_text({"a": 2}))
    assert json.loads(p.read_text()) == {"a": 2}


def test_atomic_writer_exclusive_never_overwrites(tmp_path):
    p = tmp_path / "claim.json"
    assert records.write_json_atomic(p, {"owner": 1}, exclusive=True)
    assert not records.write_json_atomic(p, {"owner": 2}, exclusive=True)
    assert json.loads(p.read_text()) == {"owner": 1}
    assert [q.name for q in tmp_path.iterdir()] == ["claim.json"]
    with pytest.raises(ValueError):  # NaN is not JSON: refused before anything is written
        records.write_json_atomic(tmp_path / "nan.json", {"x": float("nan")})
    assert not (tmp_path / "nan.json").exists()


def test_record_kinds():
    cfg = {"model": {"n_layer": 2}}
    rec = records.Record(run_id="r", status="finished", config=cfg, n_layer=2, test_loss=1.5)
    d = rec.to_dict()
    assert d["kind"] == "train" and d["schema"] == 1 and d["test_loss"] == 1.5 and d["host"] is None
    with pytest.raises(UserError, match="status"):
        records.Record(run_id="r", status="measured", config=cfg)  # a training run finishes or diverges
    # Another kind: its own status and fields, no training fields required, same validation on read.
    lat = records.Record(run_id="lat-1", status="measured", config=cfg, kind="latency",
                         extra={"latency_s": [0.1, 0.2]})
    d = lat.to_dict()
    assert d["kind"] == "latency" and d["latency_s"] == [0.1, 0.2] and d["test_loss"] is None
    assert records.validate_record(d) is d
    assert records.Record.from_dict(d) == lat
    with pytest.raises(UserError, match="reuse names"):
        records.Record(run_id="x", status="measured", config=cfg, kind="latency", extra={"test_loss": 1.0})
    # A record without "kind" (every record written before it existed) is a training run.
    old = {k: v for k, v in records.Record(run_id="r", status="finished", config=cfg, n_layer=2, d_model=8,
                                           n_head=2, seed=0, params={}, tokens=0, test_loss=1.0).to_dict().items()
           if k != "kind"}
    assert records.kind_of(old) == "train" and records.Record.from_dict(old).kind == "train"
    with pytest.raises(UserError, match="missing fields"):
        records.validate_record({k: v for k, v in old.items() if k != "test_loss"})


def test_params_block_is_the_exact_accounting():
    # L=2, d=32, V=65, T=32: stack 2*(12*1024 + 13*32) + 2*32 = 25,472; Kaplan 12*2*1024 = 24,576;
    # embedding 65*32 + 32*32 = 3,104; tied head: total 28,576.
    assert records.params_of(2, 32, n_head=2, vocab_size=65, seq_len=32) == {
        "non_embedding": 25_472, "kaplan": 24_576, "embedding": 3_104, "total": 28_576}


def test_committed_records_exist():
    assert len(COMMITTED) >= 20  # results/cpu: the 20 runs of the cpu preset


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parts[-4]}/{p.parts[-2]}")
def test_committed_record_id_is_the_id_of_its_recorded_config(path):
    rec = records.read_record(path)
    if records.kind_of(rec) != records.TRAIN:  # a seed experiment's unit: its id hashes (kind, spec)
        from depthwidth.experiments.kinds import unit_id

        assert unit_id(rec["kind"], rec["config"]) == rec["run_id"] == path.parent.name
        assert records.Record.from_dict(rec).to_dict() == rec
        return
    assert from_dict(rec["config"]).run_id() == rec["run_id"] == path.parent.name
    # Readable as a Record; written back it is the same dict plus the kind and, for records
    # older than them, the optional fields host, test_loss_chunks and mfu_devices as null.
    d = records.Record.from_dict(rec).to_dict()
    assert {k: d[k] for k in rec} == rec and d["kind"] == "train"
    assert set(d) - set(rec) <= {"kind", "host", "test_loss_chunks", "mfu_devices"}
    assert all(d[k] is None for k in set(d) - set(rec) - {"kind"})


def test_a_result_equal_up_to_the_last_bits_keeps_its_bytes(tmp_path):
    """A committed fit regenerated on another CPU differs in the last bit of a bootstrap
    covariance (seen: 0.004619489972995642 vs ...641): the file keeps its bytes; a real change,
    a new key or another string is written."""
    import json

    from depthwidth.records import same_within, write_json_if_changed

    stored = {"cov": [[0.004619489972995642, -0.0027941848123662822]], "n": 3, "ok": True, "s": "x", "z": None}
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    before = path.read_bytes()
    moved = {**stored, "cov": [[0.004619489972995641, -0.0027941848123662827]]}
    assert same_within(stored, moved) and not write_json_if_changed(path, moved)
    assert path.read_bytes() == before
    for changed in ({**stored, "cov": [[0.0046194899, -0.0027941848123662822]]}, {**stored, "s": "y"},
                    {**stored, "ok": 1}, {**stored, "extra": 0}, {**stored, "cov": [[0.004619489972995642]]}):
        assert not same_within(stored, changed)
        assert write_json_if_changed(path, changed) and json.loads(path.read_text()) == changed
        path.write_bytes(before)
    assert same_within(0.0, 0.0) and not same_within(0.0, 1e-300)
