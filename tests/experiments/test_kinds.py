"""Experiment-kind records: ids from (kind, spec), resumable 'done' lookup, and the table's indifference."""

import pytest

from depthwidth import records
from depthwidth.errors import UserError
from depthwidth.experiments import kinds


def test_unit_id_depends_on_kind_and_spec_only():
    a = kinds.unit_id("latency", {"n_layer": 3, "d_model": 1536})
    assert a == kinds.unit_id("latency", {"d_model": 1536, "n_layer": 3})  # key order does not matter
    assert a.startswith("latency-") and len(a) == len("latency-") + 12
    assert a != kinds.unit_id("latency", {"n_layer": 3, "d_model": 1537})
    assert a != kinds.unit_id("band", {"n_layer": 3, "d_model": 1536})
    with pytest.raises(UserError):
        kinds.unit_id("not a name", {})


def test_write_then_done_round_trip(tmp_path):
    assert kinds.done(tmp_path / "missing", "latency") == {}
    spec = {"n_layer": 2, "d_model": 8}
    rec = kinds.write(tmp_path, "latency", spec, n_layer=2, d_model=8, seconds=0.25,
                      provenance={"git_rev": "abc", "versions": {"jax": "x"}, "host": {}})
    got = kinds.done(tmp_path, "latency")
    assert list(got) == [kinds.unit_id("latency", spec)] == [rec["run_id"]]
    stored = got[rec["run_id"]]
    assert stored["seconds"] == 0.25 and stored["n_layer"] == 2 and stored["git_rev"] == "abc"
    assert stored["config"] == spec and stored["kind"] == "latency" and stored["status"] == "finished"
    assert kinds.done(tmp_path, "band") == {}
    assert records.records_of_kind(tmp_path, "latency") == [stored]
