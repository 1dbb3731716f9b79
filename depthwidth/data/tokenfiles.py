"""Token files: a prepared directory opened as uint16 arrays, training batches, baselines.

A *prepared directory* holds::

    tokenizer.json          a HF ``tokenizers`` Tokenizer (byte-level BPE, or char-level WordLevel)
    train.bin val.bin test.bin   flat little-endian uint16 token ids (the nanoGPT convention)
    meta.pkl                {'vocab_size': V[, 'itos', 'stoi']} so nanoGPT's train.py reads it too
    meta.json               vocab size, token counts, source sha256, tokenizer and token-file sha256s, ...

(written by :mod:`depthwidth.data.prepare`). A nanoGPT directory (train.bin + val.bin [+
test.bin, meta.pkl]) opens too. The batch at step k is a pure function of (seed, k): resuming
needs no iterator state.

numpy + tokenizers only (no jax): the engine moves arrays to devices itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth.data.corpora import sha256_file
from depthwidth.data.splits import SPLITS
from depthwidth.data.tokenizer import DTYPE, MAX_VOCAB, encode
from depthwidth.errors import UserError

FORMAT = "depthwidth-prepared/1"
TOKENIZER_FILE = "tokenizer.json"
GPT2_VOCAB = 50257  # nanoGPT's assumption for a directory without meta.pkl (tiktoken "gpt2")
_MAX_ID_CHECK = 1 << 28  # scan token files up to this many tokens for ids >= vocab_size


@dataclass(frozen=True, eq=False)
class Prepared:
    """An opened prepared (or nanoGPT) directory.

    train/val/test: read-only uint16 memmaps of token ids, shape (n_split,). meta: meta.json's
    dict (synthesised for a nanoGPT dir). tokenizer: a ``tokenizers.Tokenizer`` or None.
    """

    path: Path
    meta: dict[str, Any]
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    tokenizer: Any = None
    itos: dict[int, str] | None = None

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; UserError if this directory has no tokenizer or lacks a character."""
        if self.tokenizer is not None:
            return encode(self.tokenizer, text).tolist()
        if self.itos is not None:
            stoi = {c: i for i, c in self.itos.items()}
            missing = sorted(set(text) - set(stoi))
            if missing:
                raise UserError(f"characters not in this char vocabulary: {''.join(missing[:10])!r}")
            return [stoi[c] for c in text]
        raise UserError(f"{self.path} has no tokenizer (nanoGPT dir without meta.pkl itos)")

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """Text of token ids (invalid UTF-8 from a partial BPE byte sequence becomes U+FFFD)."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        if self.tokenizer is not None:
            return self.tokenizer.decode(ids, skip_special_tokens=False)
        if self.itos is not None:
            return "".join(self.itos[i] for i in ids)
        raise UserError(f"{self.path} has no tokenizer (nanoGPT dir without meta.pkl itos)")


def _memmap(path: Path) -> np.ndarray:
    size = path.stat().st_size
    if size % DTYPE.itemsize:
        raise UserError(f"{path} has {size} bytes, not a whole number of uint16 tokens")
    if size == 0:
        return np.zeros(0, DTYPE)
    return np.memmap(path, dtype=DTYPE, mode="r")


def _check_ids(arr: np.ndarray, vocab_size: int, where: str) -> None:
    # A too-large id would be silently clamped by an embedding lookup on device; catch it here.
    if 0 < arr.size <= _MAX_ID_CHECK and int(arr.max()) >= vocab_size:
        raise UserError(f"{where} holds token id {int(arr.max())} >= vocab_size {vocab_size}")


def _load_json(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {path}: {e}") from None
    if not isinstance(obj, dict):
        raise UserError(f"{path} is not a JSON object")
    return obj


def _open_ours(p: Path) -> Prepared:
    # optional dependency: tokenizers loaded only where used
    from tokenizers import Tokenizer

    meta = _load_json(p / "meta.json")
    if meta.get("format") != FORMAT:
        raise UserError(f"{p / 'meta.json'} has format {meta.get('format')!r}, expected {FORMAT!r}")
    tok_path = p / meta["tokenizer"]["file"]
    try:
        raw = tok_path.read_bytes()
        tok = Tokenizer.from_str(raw.decode())
    except Exception as e:  # OSError, UnicodeError, or the bare Exception tokenizers raises on bad JSON
        raise UserError(f"cannot load tokenizer {tok_path}: {e}") from None
    if hashlib.sha256(raw).hexdigest() != meta["tokenizer"]["sha256"]:
        raise UserError(f"{tok_path} does not match the sha256 recorded in meta.json; prepare the data again")
    arrays = {}
    for s in SPLITS:
        f = p / f"{s}.bin"
        if not f.is_file():
            raise UserError(f"{f} is missing; prepare the data again")
        arrays[s] = _memmap(f)
        if arrays[s].size != meta["tokens"][s]:
            raise UserError(f"{f} holds {arrays[s].size} tokens, meta.json says {meta['tokens'][s]}; prepare the data again")
        # Directories prepared before token checksums have none to check (the cache does not reuse them).
        want = (meta.get("files_sha256") or {}).get(f.name)
        if want is not None and sha256_file(f) != want:
            raise UserError(f"{f} does not match the sha256 recorded in meta.json; prepare the data again")
        _check_ids(arrays[s], meta["vocab_size"], str(f))
    return Prepared(p, meta, arrays["train"], arrays["val"], arrays["test"], tokenizer=tok)


def _open_nanogpt(p: Path) -> Prepared:
    train, val = _memmap(p / "train.bin"), _memmap(p / "val.bin")
    itos, kind = None, "gpt2 (assumed: no meta.pkl, as nanoGPT does)"
    vocab = GPT2_VOCAB
    if (p / "meta.pkl").is_file():
        try:
            with open(p / "meta.pkl", "rb") as fh:
                pkl = pickle.load(fh)
            vocab = int(pkl["vocab_size"])
        except Exception as e:  # a foreign pickle can raise anything
            raise UserError(f"cannot read vocab_size from {p / 'meta.pkl'}: {e}") from None
        itos = {int(k): v for k, v in pkl["itos"].items()} if isinstance(pkl.get("itos"), dict) else None
        kind = "char" if itos is not None else "unknown (meta.pkl has no itos)"
    if not 0 < vocab <= MAX_VOCAB:
        raise UserError(f"{p / 'meta.pkl'} has vocab_size {vocab}, outside 1..{MAX_VOCAB}")
    if (p / "test.bin").is_file():
        test, test_rule = _memmap(p / "test.bin"), "test.bin"
    else:
        # nanoGPT has no test split: halve val so that val and test stay disjoint.
        half = val.size // 2
        val, test = val[:half], val[half:]
        test_rule = "no test.bin: val = first half of val.bin, test = second half"
    for s, arr in (("train", train), ("val", val), ("test", test)):
        if arr.size < 2:
            raise UserError(f"{p}: the {s} split holds {arr.size} tokens; need at least 2")
        _check_ids(arr, vocab, f"{p} {s} split")
    meta = {
        "format": "nanogpt",
        "vocab_size": vocab,
        "dtype": "uint16",
        "tokenizer": {"kind": kind},
        "source": {"name": p.name, "path": str(p)},
        "split": {"rule": test_rule},
        "tokens": {"train": int(train.size), "val": int(val.size), "test": int(test.size),
                   "total": int(train.size + val.size + test.size)},
    }
    return Prepared(p, meta, train, val, test, tokenizer=None, itos=itos)


def open_prepared(path: str | Path) -> Prepared:
    """Open a prepared directory (meta.json) or a nanoGPT one (train.bin + val.bin [+ test.bin, meta.pkl]).

    nanoGPT dirs: vocab_size from meta.pkl, else 50257 (GPT-2 BPE, nanoGPT's assumption); without
    test.bin, val is the first half of val.bin and test the second half. Raises UserError if the
    directory is missing, incomplete, inconsistent with its meta.json (token counts, tokenizer
    and token-file sha256s), or holds ids >= vocab_size.
    """
    p = Path(os.path.expanduser(path))
    if not p.is_dir():
        raise UserError(f"prepared data directory not found: {p}")
    if (p / "meta.json").is_file():
        return _open_ours(p)
    if (p / "train.bin").is_file() and (p / "val.bin").is_file():
        return _open_nanogpt(p)
    raise UserError(f"{p} is not prepared data: it has neither meta.json nor nanoGPT's train.bin + val.bin")


# --------------------------------------------------------------------------- batches


def get_batch(tokens: np.ndarray, seed: int, step: int, batch_size: int,
              seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Training batch at ``step``: inputs x and next-token targets y, each int32 of shape (B, T).

    Row b is ``tokens[o_b : o_b + T]`` and ``tokens[o_b + 1 : o_b + T + 1]`` with offsets o_b
    drawn uniformly from [0, n - T) by ``np.random.default_rng([seed, step])`` (nanoGPT's
    sampling, keyed by step): a pure function of (seed, step), so resuming needs no iterator
    state. Reproducible for a fixed numpy version (numpy does not promise identical
    ``Generator.integers`` streams across versions). Raises UserError if seed or step is
    negative or the split holds fewer than T + 1 tokens.
    """
    n = len(tokens)
    if seed < 0 or step < 0:
        raise UserError(f"seed and step must be >= 0, got seed={seed}, step={step}")
    if batch_size < 1 or seq_len < 1:
        raise UserError(f"batch_size and seq_len must be >= 1, got {batch_size}, {seq_len}")
    if n < seq_len + 1:
        raise UserError(f"a split of {n} tokens is too short for seq_len {seq_len} (needs {seq_len + 1})")
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, n - seq_len, size=batch_size)
    buf = np.asarray(tokens[starts[:, None] + np.arange(seq_len + 1)], dtype=np.int32)
    return np.ascontiguousarray(buf[:, :-1]), np.ascontiguousarray(buf[:, 1:])



# --------------------------------------------------------------------------- baselines


def unigram_entropy(tokens: np.ndarray) -> float:
    """Entropy of the empirical unigram distribution, H = -sum_v p_v ln p_v (nats/token).

    The cross-entropy a model that ignores context reaches at best on its own training
    distribution: the baseline a trained LM must beat. Raises UserError on an empty array.
    """
    n = len(tokens)
    if n == 0:
        raise UserError("cannot take the unigram entropy of an empty token array")
    counts = np.zeros(0, np.int64)
    for i in range(0, n, 1 << 24):  # bincount of a memmap chunk-wise: bounded memory
        c = np.bincount(np.asarray(tokens[i:i + (1 << 24)]).reshape(-1))
        if c.size > counts.size:
            counts = np.pad(counts, (0, c.size - counts.size))
        counts[:c.size] += c
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum())


def uniform_entropy(vocab_size: int) -> float:
    """ln V nats/token: the loss of a uniform guess over V tokens (a model at initialisation)."""
    if vocab_size < 1:
        raise UserError(f"vocab_size must be >= 1, got {vocab_size}")
    return math.log(vocab_size)
