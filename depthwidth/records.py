"""The result record: one immutable JSON file per run, of any kind of experiment (docs/architecture.md).

The bottom layer beside :mod:`depthwidth.config`: whatever writes results (the training engine,
the synthetic sweeps, every other experiment kind) builds a :class:`Record`, and whatever reads
them (the runner, the results table) reads the JSON dicts this module validates. Files are
read and written through :func:`depthwidth.storage.open_results` (the layout's names, the
atomic writer :func:`write_atomic`, re-exported here).

Layout of a results directory (shared by every worker; a local or mounted path, or any fsspec
URL such as ``gs://bucket/dir``: :mod:`depthwidth.storage`)::

    RESULTS/runs/<run_id>/record.json   the record below, written once, atomically
    RESULTS/runs/<run_id>/log.jsonl     per-step log (step, loss, lr, grad_norm, tokens_per_s, mfu, wall_s)
    RESULTS/runs/<run_id>/config.json   {"run_id", "config", "vocab_size"}, written when the run starts
    RESULTS/runs/<run_id>/ckpt/         orbax checkpoints (never committed; deleted once the record
                                        exists unless train.keep_weights)
    RESULTS/runs/<run_id>/claim.json    the worker that owns an unfinished run (experiments.claims)

Record fields (schema 1); losses are mean cross-entropy in nats per token of the run's tokenizer:

    schema            1
    kind              "train" (a training run) or the name of another experiment kind; a record
                      without the field (every record written before it existed) is a "train" record
    run_id            RunConfig.run_id() of ``config``
    status            "finished" | "diverged" for kind "train"; any word for other kinds
    config            RunConfig.to_dict() of the config as requested (model.vocab_size 0 = taken
                      from the data), so ``from_dict(config).run_id() == run_id``
    n_layer, d_model, n_head, vocab_size, seq_len, seed      copied from the config for easy
                      tables; vocab_size is the resolved vocabulary (the data's when the config says 0)
    params            {"non_embedding": exact stack count L*(12d^2+13d)+2d,
                       "kaplan": 12*L*d^2 (Kaplan et al. 2020; the N of Levine et al.'s fit),
                       "embedding": V*d + T*d, "total": all trainable parameters}
    tokens            D, tokens trained on (steps * batch_size * seq_len)
    steps             optimiser steps done
    train_loss        mean training loss over the last log window (nats/token)
    val_loss          final validation loss (nats/token) or null
    test_loss         final test loss on train.test_sequences held-out sequences, or null if diverged
    diverged_reason   (diverged runs, new) why: a non-finite training loss, or a final loss above
                      2 ln V (records.diverged_reason)
    test_sequences    held-out sequences the test loss used
    test_loss_chunks  (optional, new) the test loss of 32 consecutive equal groups of those
                      sequences (models.engine.evaluate), for evaluation-set uncertainty; null if diverged
    wall_s            training wall time (seconds, excluding compilation)
    compile_s         ahead-of-time compilation time (seconds)
    tokens_per_s      training throughput
    mfu               model FLOPs utilisation: tokens_per_s * flops_per_token / (mfu_devices *
                      peak_flops_per_s), or null; above 1 the record also has mfu_warning
    flops_per_token   training FLOPs per token used for MFU (convention named in mfu_convention)
    mfu_convention    e.g. "6N + 6Vd + 6LTd (causal attention, MaxText convention)"
    peak_flops_per_s  the peak of ONE device the MFU is measured against (measured, models.perf)
    mfu_devices       (new) the devices that trained, whose peaks add up; null in older records
                      (which divided by one device's peak)
    git_rev           git revision of the code, or null
    versions          {"depthwidth" (new), "jax": ..., "flax": ..., "optax": ..., "python": ...};
                      newer records add "jaxlib", "scipy", "tokenizers" and "uv.lock" (the sha256 of
                      the checkout's lock file, absent for a pip install)
    device            e.g. "cpu x1" (all devices of the run, over every process)
    processes         (multi-process runs only, new) the jax processes that trained together
    host              (optional, new) {"cpu_threads", "cores_visible", "pinned", "cpu_model", "machine"}
                      (depthwidth.hostcpu): a CPU run always uses one XLA thread
    data              the prepared data's meta.json
    finished_at       ISO 8601 UTC timestamp

A record of another kind carries the same envelope (schema, kind, run_id, status, config,
finished_at), any of the fields above that apply (null otherwise) and its own fields
(:attr:`Record.extra`, stored at the top level). Only kind "train" records enter the results
table and the law (:mod:`depthwidth.fits.table`), and only those :func:`train_record_problem`
finds nothing wrong with: every reader of training records excludes the others with its reason.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.errors import UserError
from depthwidth.storage import (  # noqa: F401 -- this module's API since before storage had them
    SAME_RTOL,
    json_text,
    same_within,
    unique_sibling,
    write_atomic,
    write_if_changed,
    write_json_if_changed,
)
from depthwidth.theory.accounting import param_counts

SCHEMA = 1
TRAIN = "train"
STATUSES = ("finished", "diverged")  # the statuses of a "train" record
REQUIRED = ("schema", "run_id", "status", "config")  # every kind
TRAIN_REQUIRED = REQUIRED + ("n_layer", "d_model", "n_head", "seed", "params", "tokens", "test_loss")


# A mean loss above twice ln V (the loss of a uniform guess over V tokens, a model at
# initialisation) means training blew up, however finite the number: such a run is diverged.
DIVERGED_ABOVE_UNIFORM = 2.0


def diverged_reason(loss: float | None, vocab_size: int | None, what: str = "loss") -> str | None:
    """Why ``loss`` (nats/token) marks a diverged run, or None when it does not: a non-finite
    value, or one above ``DIVERGED_ABOVE_UNIFORM`` · ln V (V = ``vocab_size``; not checked for
    V < 2 or V unknown). ``what`` names the loss in the message. None loss: None."""
    if loss is None:
        return None
    if not math.isfinite(loss):
        return f"non-finite {what}"
    if isinstance(vocab_size, int) and vocab_size >= 2:
        bound = DIVERGED_ABOVE_UNIFORM * math.log(vocab_size)
        if loss > bound:
            return (f"{what} {loss:.4g} nats/token is above {DIVERGED_ABOVE_UNIFORM:g} ln V = {bound:.3f} "
                    f"(V = {vocab_size}, ln V = a uniform guess)")
    return None


# test_loss is the sequence-weighted mean of test_loss_chunks (models.engine.evaluate), in float64
# from float32 sums: the committed records agree to 2e-7. Without test_sequences the chunks'
# sizes are unknown (they differ by at most one sequence): their plain mean must agree to 1%.
CHUNKS_RTOL, CHUNKS_RTOL_UNWEIGHTED = 1e-4, 1e-2
_COUNTS = ("n_layer", "d_model", "n_head")  # positive integers of every training record


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _loss_problem(v: Any, what: str, vocab_size: Any) -> str | None:
    """Why ``v`` cannot be a mean cross-entropy (nats/token): not a number, not finite, not
    positive, or above the diverged bound (:func:`diverged_reason`, prefixed "diverged: ")."""
    if not _is_number(v):
        return f"{what} is not a number ({_short(v)})"
    if not math.isfinite(v):
        return f"non-finite {what}"
    if v <= 0:
        return f"{what} {v:.4g} is not positive (a cross-entropy on held-out text is > 0 nats/token)"
    why = diverged_reason(v, vocab_size, what)
    return f"diverged: {why}" if why else None


def _short(v: Any, limit: int = 40) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _chunks_problem(rec: dict[str, Any]) -> str | None:
    chunks, mean = rec.get("test_loss_chunks"), rec["test_loss"]
    if chunks is None:
        return None  # records from before the chunks existed
    if not (isinstance(chunks, list) and chunks):
        return f"test_loss_chunks is not a non-empty list ({_short(chunks)})"
    for i, c in enumerate(chunks):
        why = _loss_problem(c, f"test_loss_chunks[{i}]", rec.get("vocab_size"))
        if why and not why.startswith("diverged"):  # one unlucky chunk may lie above 2 ln V
            return why
    k, n = len(chunks), rec.get("test_sequences")
    if _is_int(n) and n >= k:
        bounds = [c * n // k for c in range(k + 1)]
        expect, rtol = sum(c * (b - a) for c, a, b in zip(chunks, bounds, bounds[1:])) / n, CHUNKS_RTOL
    else:
        expect, rtol = sum(chunks) / k, CHUNKS_RTOL_UNWEIGHTED
    if abs(expect - mean) > rtol * mean:
        return (f"test_loss_chunks average {expect:.6g}, not test_loss {mean:.6g} "
                f"(they are the same evaluation, within {rtol:g})")
    return None


def train_record_problem(rec: dict[str, Any]) -> str | None:
    """Why a kind "train" record cannot be a measurement of the law, or None when it can.

    The one check of every reader of training records (the results table, the lr scans). In
    order: a status other than "finished" (the status is the reason); ``n_layer``, ``d_model``,
    ``n_head`` not positive integers, ``seed`` not an integer >= 0; ``params`` not an object
    whose counts are positive integers; ``tokens`` not a positive integer; ``test_loss`` (and
    ``val_loss``, ``train_loss`` when present) not a finite number in (0, 2 ln V] nats/token
    (above: "diverged: ...", :func:`diverged_reason`); ``test_loss_chunks`` not finite,
    positive, or not averaging to ``test_loss`` (weighted by the chunks' sequence counts when
    ``test_sequences`` is known: relative tolerance :data:`CHUNKS_RTOL`, else
    :data:`CHUNKS_RTOL_UNWEIGHTED`). Expects :func:`validate_record` to have passed (the fields
    exist); never raises for a field's value.
    """
    if rec["status"] != "finished":
        return str(rec["status"])
    for k in _COUNTS:
        if not (_is_int(rec[k]) and rec[k] >= 1):
            return f"{k} is not a positive integer ({_short(rec[k])})"
    if not (_is_int(rec["seed"]) and rec["seed"] >= 0):
        return f"seed is not an integer >= 0 ({_short(rec['seed'])})"
    params = rec["params"]
    if not (isinstance(params, dict) and params):
        return f"params is not an object of parameter counts ({_short(params)})"
    for k, v in sorted(params.items()):
        if not (_is_int(v) and v > 0):
            return f"params.{k} is not a positive integer ({_short(v)})"
    if not (_is_int(rec["tokens"]) and rec["tokens"] > 0):
        return f"tokens is not a positive integer ({_short(rec['tokens'])})"
    vocab = rec.get("vocab_size")
    if vocab is not None and not (_is_int(vocab) and vocab >= 2):
        return f"vocab_size is not an integer >= 2 ({_short(vocab)})"
    for what in ("test_loss", "val_loss", "train_loss"):
        if what == "test_loss" or rec.get(what) is not None:
            why = _loss_problem(rec.get(what), what, vocab)
            if why:
                return "no test_loss" if what == "test_loss" and rec[what] is None else why
    return _chunks_problem(rec)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def code_revision() -> str | None:
    """HEAD of the source checkout this package runs from (what a record's ``git_rev`` and a
    prediction's ``git_rev`` store), or None for a pip install, whose ``versions["depthwidth"]``
    names the code instead."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file():  # site-packages inside some other git repo is not our code
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def lock_hash() -> str | None:
    """sha256 (hex) of the ``uv.lock`` beside the source checkout this package runs from: the
    lock ``./dw`` installs the environment from (docs/getting-started.md), stored in a record's
    ``versions["uv.lock"]``; None for a pip install, which has no lock."""
    lock = Path(__file__).resolve().parents[1] / "uv.lock"
    if not (lock.parent / "pyproject.toml").is_file() or not lock.is_file():
        return None
    return hashlib.sha256(lock.read_bytes()).hexdigest()


def code_is_dirty() -> bool | None:
    """Whether the source checkout :func:`code_revision` names has uncommitted changes to tracked
    files (``git status --porcelain --untracked-files=no``), so that its ``git_rev`` alone does
    not name the code that ran; None where there is no checkout or git cannot say."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file():
        return None
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


@dataclass(frozen=True)
class Record:
    """One result record (fields and units in the module docstring); :meth:`to_dict` is the JSON.

    Fields that do not apply to a run are None (null on disk). ``extra`` holds the fields of
    other experiment kinds; they may not reuse a name defined here.
    """

    run_id: str
    status: str
    config: dict[str, Any]
    kind: str = TRAIN
    n_layer: int | None = None
    d_model: int | None = None
    n_head: int | None = None
    vocab_size: int | None = None
    seq_len: int | None = None
    seed: int | None = None
    params: dict[str, int] | None = None
    tokens: int | None = None
    steps: int | None = None
    train_loss: float | None = None
    val_loss: float | None = None
    test_loss: float | None = None
    test_sequences: int | None = None
    test_loss_chunks: list[float] | None = None
    wall_s: float | None = None
    compile_s: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    flops_per_token: int | None = None
    mfu_convention: str | None = None
    peak_flops_per_s: float | None = None
    mfu_devices: int | None = None
    git_rev: str | None = None
    versions: dict[str, str] | None = None
    device: str | None = None
    host: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    finished_at: str = field(default_factory=_now)
    extra: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if not (isinstance(self.kind, str) and self.kind):
            raise UserError(f"record {self.run_id}: kind must be a non-empty string, got {self.kind!r}")
        if self.kind == TRAIN and self.status not in STATUSES:
            raise UserError(f"record {self.run_id}: status must be one of {STATUSES}, got {self.status!r}")
        clash = sorted(set(self.extra) & {f.name for f in dataclasses.fields(self)})
        if clash:
            raise UserError(f"record {self.run_id}: extra fields {clash} reuse names of record fields")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written to ``record.json`` (every field, then ``extra`` at the top level)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "record") -> Record:
        """The record of a JSON dict (validated; unknown fields go to ``extra``; no kind = "train")."""
        validate_record(d, source)
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in d.items() if k in names},
                   extra={k: v for k, v in d.items() if k not in names})


def params_of(n_layer: int, d_model: int, *, n_head: int = 1, vocab_size: int = 0, seq_len: int = 0,
              tied_head: bool = True, d_ff: int | None = None) -> dict[str, int]:
    """A record's ``params`` block, exact (:func:`depthwidth.theory.accounting.param_counts`)."""
    c = param_counts(n_layer, d_model, n_head=n_head, vocab_size=vocab_size, seq_len=seq_len,
                     tied_head=tied_head, d_ff=d_ff)
    return {"non_embedding": c["stack_params"], "kaplan": c["kaplan_params"],
            "embedding": c["embedding_params"], "total": c["total_params"]}


def kind_of(rec: dict[str, Any]) -> str:
    """A record dict's kind ("train" when it has none: the records written before kinds existed)."""
    return rec.get("kind", TRAIN)


def run_dir(results: str | Path, run_id: str) -> Path:
    """``results/runs/<run_id>`` (a Path, or a UPath when ``results`` is a URL; :class:`storage.ResultsStore`)."""
    return storage.open_results(results).run_dir(run_id)


# ------------------------------------------------------------------------------ writing


def write_json_atomic(path: str | Path, obj: Any, *, exclusive: bool = False) -> bool:
    """:func:`write_atomic` of ``obj`` as :func:`json_text`."""
    return write_atomic(path, json_text(obj), exclusive=exclusive)


def stored_path(path: str | Path, base_dir: str | Path) -> str:
    """``path`` as a result file in ``base_dir`` stores it: the one rule of docs/guide/sweeps.md
    ("Paths in result files").

    Relative to ``base_dir`` (POSIX separators, ``..`` where needed) when ``path`` lies in the
    same tree: under ``base_dir``, or in the same git checkout as ``base_dir`` (so committed
    files name their neighbours, ``../law-long``, the same on every clone); absolute otherwise
    (``fit --out /tmp/fit.json`` stores where the records are, not a path from ``/tmp``). A URL
    on either side is stored as given. :func:`resolve_stored` reads it back.
    """
    if storage.is_url(path) or storage.is_url(base_dir):
        return str(path)
    target, base = os.path.abspath(path), os.path.abspath(base_dir)
    rel = os.path.relpath(target, base)
    if rel == os.curdir or not rel.startswith(os.pardir) or _same_checkout(target, base):
        return Path(rel).as_posix()
    return Path(target).as_posix()


def resolve_stored(stored: str, file: str | Path) -> str:
    """A path that the result file ``file`` stores (:func:`stored_path`), as a path usable from
    here: an absolute path or URL as it is, a relative one joined to the file's folder."""
    if storage.is_url(stored) or Path(stored).is_absolute():
        return stored
    base = storage.path(file).path if storage.scheme(file) == "file" else str(file)
    if storage.is_url(base):  # a relative path in a bucket's file: taken as written (no folder to join)
        return stored
    return str(Path(base).absolute().parent / stored)


def _git_root(path: str) -> str | None:
    """The nearest folder at or above ``path`` holding ``.git`` (a checkout or a worktree), or None."""
    d = Path(path)
    for p in (d, *d.parents):
        if (p / ".git").exists():
            return str(p)
    return None


def _same_checkout(target: str, base: str) -> bool:
    root = _git_root(base)
    return root is not None and _git_root(target) == root


def write_record(results: str | Path, rec: Record) -> Path:
    """Write ``rec`` to ``results/runs/<run_id>/record.json`` atomically; return the path."""
    store = storage.open_results(results)
    store.write(f"{storage.RUNS}/{rec.run_id}/{storage.RECORD}", json_text(rec.to_dict()))
    return store.record_path(rec.run_id)


# ------------------------------------------------------------------------------ reading


def validate_record(rec: dict[str, Any], source: str = "record") -> dict[str, Any]:
    """Check a record's required fields (by kind); raise UserError naming ``source`` if malformed."""
    if not isinstance(rec, dict):
        raise UserError(f"{source}: not a JSON object")
    kind = kind_of(rec)
    if not (isinstance(kind, str) and kind):
        raise UserError(f"{source}: kind must be a non-empty string, got {kind!r}")
    missing = [k for k in (TRAIN_REQUIRED if kind == TRAIN else REQUIRED) if k not in rec]
    if missing:
        raise UserError(f"{source}: missing fields {', '.join(missing)}")
    if kind == TRAIN and rec["status"] not in STATUSES:
        raise UserError(f"{source}: status must be one of {STATUSES}, got {rec['status']!r}")
    return rec


def read_record(path: str | Path) -> dict[str, Any]:
    """Load and validate one record.json; raise UserError if unreadable or malformed."""
    try:
        with storage.path(path).open() as fh:
            rec = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read result record {path}: {e}") from None
    return validate_record(rec, str(path))


def iter_records(results: str | Path) -> list[dict[str, Any]]:
    """All records under ``results`` (``runs/*/record.json``, every kind), sorted by run id.
    UserError for an empty path (it would read the working directory), a missing one or a file."""
    store = require_results_dir(results)
    return [read_record(p) for p in store.record_paths()]


def require_results_dir(results: str | Path) -> storage.ResultsStore:
    """The store of an existing results directory; UserError for an empty path (it would read the
    working directory), a missing one or a file."""
    if not str(results).strip():
        raise UserError("a results directory must be a non-empty path, got ''")
    store = storage.open_results(results)
    if not store.root.is_dir():
        raise UserError(f"results directory {'is a file' if store.root.exists() else 'not found'}: {results}")
    return store


def records_of_kind(results: str | Path, kind: str) -> list[dict[str, Any]]:
    """The records of one kind under ``results``, sorted by run id (none: an empty list; a
    missing directory: UserError, as :func:`iter_records`)."""
    return [r for r in iter_records(results) if kind_of(r) == kind]
