"""The result record: one immutable JSON file per finished run (DESIGN §2).

Layout of a results directory (shared by every worker; local path or any fsspec URL)::

    RESULTS/runs/<run_id>/record.json   the record below, written once, atomically
    RESULTS/runs/<run_id>/log.jsonl     per-step log (step, loss, lr, grad_norm, tokens_per_s, mfu)
    RESULTS/runs/<run_id>/config.json   the RunConfig, written when the run starts
    RESULTS/runs/<run_id>/ckpt/         orbax checkpoints (never committed)
    RESULTS/runs/<run_id>/claim.json    the worker that owns an unfinished run (runner)

Record fields (schema 1); losses are mean cross-entropy in nats per token of the run's tokenizer:

    schema            1
    run_id            RunConfig.run_id()
    status            "finished" | "diverged"
    config            RunConfig.to_dict()
    n_layer, d_model, n_head, vocab_size, seq_len, seed      copied from config for easy tables
    params            {"non_embedding": exact stack count L*(12d^2+13d)+2d,
                       "kaplan": 12*L*d^2 (Kaplan et al. 2020; the N of Levine et al.'s fit),
                       "embedding": V*d + T*d, "total": all trainable parameters}
    tokens            D, tokens trained on (steps * batch_size * seq_len)
    steps             optimiser steps done
    train_loss        mean training loss over the last log window (nats/token)
    val_loss          final validation loss (nats/token) or null
    test_loss         final test loss on train.test_sequences held-out sequences, or null if diverged
    test_loss_chunks  (optional) the test loss of 32 consecutive equal groups of those sequences
                      (models.train.evaluate), for evaluation-set uncertainty; null if diverged
    host              (optional) {"cpu_threads", "cores_visible", "pinned", "cpu_model", "machine"}
                      (depthwidth.hostcpu): a CPU run always uses one XLA thread
    wall_s            training wall time (seconds, excluding compilation)
    compile_s         ahead-of-time compilation time (seconds)
    tokens_per_s      training throughput
    mfu               model FLOPs utilisation against the measured/declared peak, or null
    flops_per_token   training FLOPs per token used for MFU (convention named in mfu_convention)
    mfu_convention    e.g. "6N+6LTd (causal, MaxText)"
    git_rev           git revision of the code, or null
    versions          {"jax": ..., "flax": ..., "optax": ..., "python": ...}
    device            e.g. "cpu x1"
    finished_at       ISO 8601 UTC timestamp
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError

SCHEMA = 1
STATUSES = ("finished", "diverged")
REQUIRED = ("schema", "run_id", "status", "config", "n_layer", "d_model", "n_head", "seed",
            "params", "tokens", "test_loss")


def run_dir(results: str | Path, run_id: str) -> Path:
    return Path(results) / "runs" / run_id


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write JSON to ``path`` via a temp file in the same directory + rename (atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=1, sort_keys=True, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def validate_record(rec: dict[str, Any], source: str = "record") -> dict[str, Any]:
    """Check a record's required fields; raise UserError naming ``source`` if malformed."""
    if not isinstance(rec, dict):
        raise UserError(f"{source}: not a JSON object")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise UserError(f"{source}: missing fields {', '.join(missing)}")
    if rec["status"] not in STATUSES:
        raise UserError(f"{source}: status must be one of {STATUSES}, got {rec['status']!r}")
    return rec


def read_record(path: str | Path) -> dict[str, Any]:
    """Load and validate one record.json; raise UserError if unreadable or malformed."""
    try:
        with open(path) as fh:
            rec = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read result record {path}: {e}") from None
    return validate_record(rec, str(path))


def iter_records(results: str | Path) -> list[dict[str, Any]]:
    """All records under ``results`` (``runs/*/record.json``), sorted by run id."""
    root = Path(results)
    if not root.is_dir():
        raise UserError(f"results directory not found: {root}")
    return [read_record(p) for p in sorted(root.glob("runs/*/record.json"))]
