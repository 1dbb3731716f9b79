"""Run configuration: frozen, typed dataclasses validated at construction (docs/architecture.md).

A run is fully described by a :class:`RunConfig` = model + data + train + mesh. Presets are
TOML files (``experiments/presets``); the CLI overrides fields by dotted name
(``--set model.n_layer=6``). The run id is a hash of the fields that change the result, so a
finished run is recognised and skipped by any worker that sees the same results directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise UserError(msg)


@dataclass(frozen=True)
class ModelConfig:
    """Decoder-only LM shape. ``vocab_size=0`` means: take it from the prepared data.

    n_layer (L), d_model (d_x), n_head (H, independent of width; the paper uses 2),
    d_ff (0 means 4*d_model), seq_len (T, tokens).
    """

    n_layer: int = 4
    d_model: int = 128
    n_head: int = 2
    d_ff: int = 0
    vocab_size: int = 0
    seq_len: int = 128
    dropout: float = 0.0
    tied_head: bool = True
    pre_ln: bool = True
    # Layers per scan iteration (performance only, not in the run id). 1 keeps compile time
    # flat in depth (accelerators); on CPU small models run ~1.6x faster fully unrolled
    # (scan_unroll >= n_layer), measured with `depthwidth bench train`.
    scan_unroll: int = 1

    def __post_init__(self) -> None:
        # Upper bounds far above any real model, so a typo fails here and not inside XLA.
        _check(1 <= self.n_layer <= 10_000, f"model.n_layer must be in 1..10000, got {self.n_layer}")
        _check(1 <= self.d_model <= 2**20, f"model.d_model must be in 1..1048576, got {self.d_model}")
        _check(self.n_head >= 1, f"model.n_head must be >= 1, got {self.n_head}")
        _check(self.d_model % self.n_head == 0,
               f"model.d_model ({self.d_model}) must be divisible by model.n_head ({self.n_head})")
        _check(0 <= self.d_ff <= 2**22, f"model.d_ff must be in 0..4194304, got {self.d_ff}")
        _check(0 <= self.vocab_size <= 2**20, f"model.vocab_size must be in 0..1048576, got {self.vocab_size}")
        _check(0 < self.seq_len <= 65536, f"model.seq_len must be in 1..65536, got {self.seq_len}")
        _check(0.0 <= self.dropout < 1.0, f"model.dropout must be in [0, 1), got {self.dropout}")
        _check(self.scan_unroll >= 1, f"model.scan_unroll must be >= 1, got {self.scan_unroll}")

    @property
    def ff_width(self) -> int:
        return self.d_ff or 4 * self.d_model


@dataclass(frozen=True)
class DataConfig:
    """Which corpus and tokenizer. ``corpus`` is a known name or a path to a prepared dir.

    tokenizer: 'char' or 'bpe' (byte-level BPE, HF tokenizers); bpe_vocab_size: target vocabulary.
    heldout: 'end' (val/test = the last 10% of the text) or 'spread' (held-out blocks taken from
    the whole text; ``depthwidth.data.splits`` module doc).
    corpus_sha256: the content of a corpus given as a path (a file's sha256, or for a directory
    the sha256 of its files' sha256s), filled in by :func:`depthwidth.data.prepare.pin_corpus`
    so that editing the file changes the run id; '' for a known corpus, whose sha256 is fixed
    in ``data/corpora.py``.
    """

    corpus: str = "tinyshakespeare"
    tokenizer: str = "char"
    bpe_vocab_size: int = 2000
    heldout: str = "end"
    corpus_sha256: str = ""

    def __post_init__(self) -> None:
        _check(self.tokenizer in ("char", "bpe"), f"data.tokenizer must be 'char' or 'bpe', got {self.tokenizer!r}")
        # 2**16: ids 0..65535 are stored as uint16, the bound data.tokenizer.train_bpe enforces too.
        _check(256 < self.bpe_vocab_size <= 65536 or self.tokenizer == "char",
               f"data.bpe_vocab_size must be in 257..65536, got {self.bpe_vocab_size}")
        _check(self.heldout in ("end", "spread"), f"data.heldout must be 'end' or 'spread', got {self.heldout!r}")
        _check(self.corpus_sha256 == "" or (len(self.corpus_sha256) == 64
                                            and all(c in "0123456789abcdef" for c in self.corpus_sha256)),
               f"data.corpus_sha256 must be '' or 64 lower-case hex digits, got {self.corpus_sha256!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation. Schedule: linear warm-up to ``lr`` then cosine decay to zero (Levine et al. §4).

    steps, warmup_steps (count); batch_size (sequences per step); lr (peak); weight_decay (AdamW,
    default 0 = Adam); grad_clip (global norm, 0 = off); compute_dtype: 'float32' or 'bfloat16'.
    eval_every (steps, 0 = only at the end), eval_batches (batches per val estimate),
    test_sequences (held-out sequences for the final test loss).

    Operational fields (not in the run id): log_every, ckpt_every (steps), keep_ckpts (the
    latest checkpoints kept while training), keep_weights (keep the checkpoints, the final one
    included, once the record is written, for :func:`depthwidth.models.train.load_run`; by
    default they are deleted: the record is the result).
    """

    steps: int = 1000
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.95
    grad_clip: float = 1.0
    seed: int = 0
    compute_dtype: str = "float32"
    eval_every: int = 0
    eval_batches: int = 8
    test_sequences: int = 1024
    # Operational fields: they do not change the result, so they are left out of the run id.
    log_every: int = 10
    ckpt_every: int = 500
    keep_ckpts: int = 2
    keep_weights: bool = False

    def __post_init__(self) -> None:
        _check(self.steps >= 1, f"train.steps must be >= 1, got {self.steps}")
        _check(1 <= self.batch_size <= 2**24, f"train.batch_size must be in 1..16777216, got {self.batch_size}")
        _check(self.lr > 0, f"train.lr must be > 0, got {self.lr}")
        # At least one step after the warm-up: the cosine decay needs a length (optax raises for 0).
        _check(0 <= self.warmup_steps < self.steps,
               f"train.warmup_steps must be in 0..{self.steps - 1} (below train.steps), got {self.warmup_steps}")
        _check(self.weight_decay >= 0, f"train.weight_decay must be >= 0, got {self.weight_decay}")
        _check(self.grad_clip >= 0, f"train.grad_clip must be >= 0, got {self.grad_clip}")
        _check(self.compute_dtype in ("float32", "bfloat16"),
               f"train.compute_dtype must be 'float32' or 'bfloat16', got {self.compute_dtype!r}")
        _check(self.eval_every >= 0 and self.eval_batches >= 1 and self.test_sequences >= 1,
               "train.eval_every >= 0, train.eval_batches >= 1 and train.test_sequences >= 1 required")
        _check(self.log_every >= 1 and self.ckpt_every >= 1 and self.keep_ckpts >= 1,
               "train.log_every, train.ckpt_every and train.keep_ckpts must be >= 1")


OPERATIONAL_TRAIN_FIELDS = ("log_every", "ckpt_every", "keep_ckpts", "keep_weights")
OPERATIONAL_MODEL_FIELDS = ("scan_unroll",)
# (section, field, default) of result-changing fields added later: left out of the id at default.
LATER_FIELDS = (("data", "heldout", "end"), ("data", "corpus_sha256", ""))


@dataclass(frozen=True)
class MeshConfig:
    """Device mesh ('data', 'model'). ``data=0`` means all devices not used by ``model``.

    rules: logical axis name -> mesh axis (or None = replicated), the one table that makes data
    parallel, FSDP and tensor parallel a config change (MaxText style).
    """

    data: int = 0
    model: int = 1
    rules: tuple[tuple[str, str | None], ...] = (
        ("batch", "data"),
        ("vocab", "model"),
        ("embed", None),
        ("mlp", "model"),
        ("heads", "model"),
        ("qkv", None),
        ("kv", None),
        ("layers", None),
        ("length", None),
    )
    distributed: bool = False

    def __post_init__(self) -> None:
        _check(self.data >= 0 and self.model >= 1, "mesh.data must be >= 0 and mesh.model >= 1")
        for pair in self.rules:
            _check(len(pair) == 2 and pair[1] in (None, "data", "model"),
                   f"mesh.rules entries map a logical name to 'data', 'model' or None, got {pair!r}")


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def identity(self) -> dict[str, Any]:
        """The fields that change the trained result (what the run id hashes)."""
        d = self.to_dict()
        d.pop("mesh")
        for k in OPERATIONAL_TRAIN_FIELDS:
            d["train"].pop(k)
        for k in OPERATIONAL_MODEL_FIELDS:
            d["model"].pop(k)
        # Fields added after records existed hash only when not at their default, so old ids stay.
        for section, name, default in LATER_FIELDS:
            if d[section].get(name) == default:
                d[section].pop(name)
        return d

    def run_id(self) -> str:
        """Readable, deterministic id: ``L4-d128-h2-s0-<10 hex of sha256(identity)>``."""
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        h = hashlib.sha256(blob.encode()).hexdigest()[:10]
        m = self.model
        return f"L{m.n_layer}-d{m.d_model}-h{m.n_head}-s{self.train.seed}-{h}"


_SECTIONS = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig, "mesh": MeshConfig}


def _coerce(cls: type, name: str, value: Any) -> Any:
    f = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    if f is None:
        raise UserError(f"unknown config field {cls.__name__}.{name}")
    default = f.default if f.default is not dataclasses.MISSING else None
    if isinstance(default, bool):
        if isinstance(value, str):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise UserError(f"{name} must be true/false, got {value!r}")
        return bool(value)
    if isinstance(default, int) and not isinstance(default, bool):
        try:
            fv = float(value)
        except (TypeError, ValueError):
            raise UserError(f"{name} must be an integer, got {value!r}") from None
        if not math.isfinite(fv) or abs(fv) > 2**62 or fv != int(fv):
            raise UserError(f"{name} must be an integer, got {value!r}")
        return int(fv)
    if isinstance(default, float):
        try:
            fv = float(value)
        except (TypeError, ValueError):
            raise UserError(f"{name} must be a number, got {value!r}") from None
        if not math.isfinite(fv):
            raise UserError(f"{name} must be a finite number, got {value!r}")
        return fv
    if isinstance(default, tuple):
        return tuple(tuple(x) for x in value)
    return value if not isinstance(value, str) else value


def from_dict(d: dict[str, Any]) -> RunConfig:
    """Build a validated RunConfig from nested dicts (e.g. a TOML table); unknown keys raise."""
    parts = {}
    for key, sub in d.items():
        if key not in _SECTIONS:
            raise UserError(f"unknown config section {key!r} (expected model, data, train, mesh)")
        if not isinstance(sub, dict):
            raise UserError(f"config section {key!r} must be a table")
        cls = _SECTIONS[key]
        parts[key] = cls(**{k: _coerce(cls, k, v) for k, v in sub.items()})
    return RunConfig(**parts)


def override(cfg: RunConfig, assignments: list[str]) -> RunConfig:
    """Apply ``["model.n_layer=6", "train.lr=1e-3"]``; raise UserError on a bad name or value."""
    d = cfg.to_dict()
    for a in assignments:
        if "=" not in a or "." not in a.split("=", 1)[0]:
            raise UserError(f"override {a!r} must look like section.field=value")
        key, value = a.split("=", 1)
        section, name = key.strip().split(".", 1)
        if section not in _SECTIONS:
            raise UserError(f"unknown config section {section!r} in {a!r}")
        d[section][name] = _coerce(_SECTIONS[section], name, value.strip())
    return from_dict(d)


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; raise UserError (one line) if it is missing or malformed."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise UserError(f"config file not found: {p}") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"malformed TOML in {p}: {e}") from None
    except UnicodeDecodeError:
        raise UserError(f"malformed TOML in {p}: not UTF-8 text") from None
