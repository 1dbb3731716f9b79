"""Records of the experiment kinds other than "train" (the seed experiments, ``depthwidth exp``).

Each unit of work of an experiment (one shape timed, one deletion evaluated, one small net
trained) is one record in the ordinary results layout (``RESULTS/runs/<run_id>/record.json``,
:mod:`depthwidth.records`) with ``kind`` set to the experiment's name. Its ``config`` is the
unit's *spec*: a JSON dict of everything that determines the result, and its run id is a hash
of (kind, spec), so rerunning an experiment skips every unit whose record exists (a killed
experiment resumes) and a changed spec is new work, never a silent overwrite.

Why not a :class:`~depthwidth.config.RunConfig`: these units are not training runs of the LM
(a latency timing has no optimiser, a sawtooth net no corpus), and the results table reads only
kind "train" records, so the other kinds live beside the law's records without touching it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from depthwidth import records, storage
from depthwidth.errors import UserError


def unit_id(kind: str, spec: dict[str, Any]) -> str:
    """``<kind>-<12 hex>``: sha256 of the canonical JSON of (kind, spec). Equal specs, equal ids."""
    if not (isinstance(kind, str) and kind.isidentifier()):
        raise UserError(f"experiment kind must be an identifier, got {kind!r}")
    blob = json.dumps({"kind": kind, "spec": spec}, sort_keys=True, separators=(",", ":"))
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def done(results: str | Path, kind: str) -> dict[str, dict[str, Any]]:
    """{run_id: record} of the stored records of ``kind`` under ``results`` (empty if none yet)."""
    if not storage.path(results).is_dir():
        return {}
    return {r["run_id"]: r for r in records.records_of_kind(results, kind)}


def write(results: str | Path, kind: str, spec: dict[str, Any], *, status: str = "finished",
          provenance: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """Store one unit's record (atomically) and return it as a dict.

    ``fields``: the :class:`~depthwidth.records.Record` fields that apply (``n_layer``,
    ``d_model``, ``params``, ``wall_s``, ...); any other name goes to the record's ``extra``.
    ``provenance``: ``git_rev``/``versions``/``host`` (:func:`depthwidth.models.train.provenance`).
    """
    names = {f.name for f in dataclasses.fields(records.Record)}
    known = {k: v for k, v in {**(provenance or {}), **fields}.items() if k in names}
    extra = {k: v for k, v in fields.items() if k not in names}
    rec = records.Record(run_id=unit_id(kind, spec), status=status, config=spec, kind=kind, **known, extra=extra)
    records.write_record(results, rec)
    return rec.to_dict()
