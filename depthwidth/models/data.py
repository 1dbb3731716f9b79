"""Data pipeline: corpus text -> tokenizer -> flat uint16 token files -> batches (DESIGN §2, Data).

A *prepared directory* holds::

    tokenizer.json          a HF ``tokenizers`` Tokenizer (byte-level BPE, or char-level WordLevel)
    train.bin val.bin test.bin   flat little-endian uint16 token ids (the nanoGPT convention)
    meta.pkl                {'vocab_size': V[, 'itos', 'stoi']} so nanoGPT's train.py reads it too
    meta.json               vocab size, token counts, source sha256, tokenizer sha256, split, ...

Decisions (and why):

* The *text* is split into train/val/test as disjoint contiguous character ranges (default
  90/5/5, ``heldout="end"``: val and test are the last 10% of the text) before any tokenizer is
  trained. ``heldout="spread"`` instead cuts the text into blocks of ~8,192 characters and, in
  every run of 20 consecutive blocks, sends the 10th to val and the 20th to test, so the held-out
  sets sample the whole corpus (every play or novel) rather than its last pages; each split is
  the concatenation of its blocks. Each cut is moved forward to the next point where
  the GPT-2 pre-tokenizer regex
  ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``
  ends a pre-token whether or not the text goes on:
  just after a lone "\\n" between non-whitespace characters (it is a pre-token of its own either
  way; a longer whitespace run at the end of a piece would become one pre-token that the whole
  text splits differently), or, on very long lines, just before a whitespace run that follows
  a non-whitespace character (no non-whitespace alternative can cross whitespace). The regex
  has no look-behind, so BPE encodes each piece exactly as it encodes the whole text:
  ``concat(train, val, test) == encode(text)``. The same rule cuts long texts into chunks
  that are encoded in parallel.
* BPE: byte-level (ByteLevel pre-tokenizer without prefix space, ByteLevel decoder, all 256
  byte symbols in the initial alphabet), trained on the train split only, so decode(encode(s))
  == s for every string and no held-out statistics leak into the merges.
* Char: the vocabulary is the sorted set of distinct characters of the *whole* text (the
  nanoGPT convention). This is an alphabet, not a model fitted to frequencies; building it from
  the train split only would make held-out characters unencodable. meta.json lists the
  characters that occur only in val/test (none for tiny shakespeare).
* The batch at step k is a pure function of (seed, k): resuming needs no iterator state.

numpy + tokenizers only (no jax): the engine moves arrays to devices itself.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.models import corpora

FORMAT = "depthwidth-prepared/1"
SPLITS = ("train", "val", "test")
DEFAULT_SPLIT = (0.9, 0.05, 0.05)
HELDOUT_MODES = ("end", "spread")
SPREAD_BLOCK_CHARS = 8192  # "spread" held-out: block size (characters, cut at safe boundaries)
SPREAD_GROUP = 20  # ... and in every SPREAD_GROUP blocks: block 9 -> val, block 19 -> test
MAX_VOCAB = 1 << 16  # token ids are stored as uint16
DTYPE = np.dtype("<u2")
GPT2_VOCAB = 50257  # nanoGPT's assumption for a directory without meta.pkl (tiktoken "gpt2")
CACHE_ENV = "DEPTHWIDTH_CACHE"
TOKENIZER_FILE = "tokenizer.json"
_CHUNK_CHARS = 1 << 16
_ENCODE_GROUP = 16  # chunks per encode_batch call: bounds the memory of Encoding objects
_MAX_ID_CHECK = 1 << 28  # scan token files up to this many tokens for ids >= vocab_size
# Whitespace as the HF ByteLevel regex (\s, Unicode White_Space) sees it: Python's str.isspace
# minus U+001C..U+001F (a test checks this against the pre-tokenizer).
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Exact pre-token boundaries (module doc), preferred first: after a newline between non-space
# characters (a piece then starts at a line start), else just before a whitespace run.
_LINE_BOUNDARY = re.compile(f"(?<=[^{WHITESPACE}])\n(?=[^{WHITESPACE}])")
_WORD_BOUNDARY = re.compile(f"(?<=[^{WHITESPACE}])(?=[{WHITESPACE}])")
_LINE_SEARCH_CHARS = 1 << 20  # how far to look for a line boundary before taking a word one


# --------------------------------------------------------------------------- splitting


def parse_split(text: str | Sequence[float]) -> tuple[float, float, float]:
    """Parse ``"0.9,0.05,0.05"`` into train/val/test fractions.

    Raises UserError unless there are three finite fractions, each > 0, summing to 1 (+-1e-6).
    """
    if isinstance(text, str):
        try:
            parts = [float(t) for t in text.split(",")]
        except ValueError:
            raise UserError(f"split {text!r} must be three fractions like 0.9,0.05,0.05") from None
    else:
        parts = [float(t) for t in text]
    if len(parts) != 3 or not all(math.isfinite(p) and p > 0 for p in parts):
        raise UserError(f"split {text!r} must be three positive fractions (train,val,test), e.g. 0.9,0.05,0.05")
    if abs(sum(parts) - 1.0) > 1e-6:
        raise UserError(f"split fractions must sum to 1, got {sum(parts):g} from {text!r}")
    return (parts[0], parts[1], parts[2])


def safe_cut(text: str, pos: int) -> int:
    """The first exact pre-token boundary at or after character ``pos`` (the text's end if none).

    Preferred: just after a "\\n" with non-whitespace on both sides, within 2**20 characters;
    else the start of the next whitespace run that follows a non-whitespace character; else the
    end of the text. At either kind of boundary byte-level BPE encodes the two pieces exactly as
    it encodes the whole (module doc).
    """
    if pos <= 0:
        return 0
    if pos >= len(text):
        return len(text)
    m = _LINE_BOUNDARY.search(text, pos - 1, pos + _LINE_SEARCH_CHARS) or _WORD_BOUNDARY.search(text, pos)
    return m.end() if m else len(text)


def split_ranges(text: str, fractions: Sequence[float] = DEFAULT_SPLIT) -> list[tuple[int, int]]:
    """Character ranges ``[(0, a), (a, b), (b, len(text))]`` for train/val/test.

    Nominal cuts at round(f_train * n) and round((f_train + f_val) * n) characters, each moved
    forward by :func:`safe_cut`. Raises UserError if a split would be empty.
    """
    f = parse_split(fractions)
    n = len(text)
    a = safe_cut(text, round(f[0] * n))
    b = safe_cut(text, round((f[0] + f[1]) * n))
    ranges = [(0, a), (a, b), (b, n)]
    if any(e <= s for s, e in ranges):
        raise UserError(f"cannot split a text of {n} characters into three non-empty parts {f} "
                        "at whitespace boundaries (too short, or too little whitespace)")
    return ranges


def spread_ranges(text: str, block_chars: int = SPREAD_BLOCK_CHARS,
                  group: int = SPREAD_GROUP) -> dict[str, list[tuple[int, int]]]:
    """Character ranges per split for ``heldout="spread"`` (module doc): blocks of ~``block_chars``
    cut by :func:`safe_cut`; block i goes to val if i % group == group // 2 - 1, to test if
    i % group == group - 1, else to train. Raises UserError if val or test would be empty."""
    out: dict[str, list[tuple[int, int]]] = {s: [] for s in SPLITS}
    i, k = 0, 0
    while i < len(text):
        j = safe_cut(text, i + block_chars)
        r = k % group
        out["val" if r == group // 2 - 1 else "test" if r == group - 1 else "train"].append((i, j))
        i, k = j, k + 1
    if not out["val"] or not out["test"]:
        raise UserError(f"a text of {len(text)} characters has fewer than {group} blocks of {block_chars}: "
                        "too short for spread held-out sets; use heldout='end'")
    return out


def _chunks(text: str, size: int = _CHUNK_CHARS) -> list[str]:
    out, i = [], 0
    while i < len(text):
        j = safe_cut(text, i + size)
        out.append(text[i:j])
        i = j
    return out


# --------------------------------------------------------------------------- tokenizers


def train_bpe(train_text: str, vocab_size: int):
    """Train a byte-level BPE ``tokenizers.Tokenizer`` with ``vocab_size`` tokens on ``train_text``.

    Alphabet: the 256 byte symbols of ``ByteLevel.alphabet()``, so any string is encodable and
    decodes back exactly. The vocabulary is smaller than ``vocab_size`` only if the text runs
    out of pairs to merge. Raises UserError unless 256 < vocab_size <= 65536 (uint16 ids).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not 256 < vocab_size <= MAX_VOCAB:
        raise UserError(f"BPE vocab size must be in 257..{MAX_VOCAB} (256 byte symbols + merges; uint16 ids), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_chunks(train_text), trainer=trainer)
    return tok


def build_char(text: str):
    """A char-level ``tokenizers.Tokenizer``: id i = i-th of the sorted distinct characters of ``text``.

    Every character is its own pre-token (``Split`` on ``[\\s\\S]``), looked up in a WordLevel
    vocabulary; the ``Fuse`` decoder joins them back. Raises UserError if there are more than
    65536 distinct characters (uint16 ids).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    chars = sorted(set(text))
    if len(chars) > MAX_VOCAB:
        raise UserError(f"{len(chars)} distinct characters do not fit uint16 token ids (max {MAX_VOCAB})")
    tok = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


def _tokenizer_kind(tok) -> str:
    return "char" if type(tok.model).__name__ == "WordLevel" else "bpe"


def _check_encodable(tok, text: str) -> None:
    if _tokenizer_kind(tok) == "char":
        vocab = tok.get_vocab()
        missing = sorted({c for c in set(text) if c not in vocab})
        if missing:
            raise UserError(f"characters not in this char vocabulary: {''.join(missing[:10])!r}"
                            + (f" and {len(missing) - 10} more" if len(missing) > 10 else ""))


def encode(tok, text: str) -> np.ndarray:
    """Token ids of ``text`` as a uint16 array (shape (n,)), encoded in parallel chunks.

    The chunks are cut at exact pre-token boundaries (module doc), so the result equals
    ``tok.encode(text).ids``. Raises UserError for characters a char vocabulary lacks.
    """
    _check_encodable(tok, text)
    batch = getattr(tok, "encode_batch_fast", tok.encode_batch)
    chunks = _chunks(text)
    parts = []
    for g in range(0, len(chunks), _ENCODE_GROUP):
        for enc in batch(chunks[g:g + _ENCODE_GROUP], add_special_tokens=False):
            parts.append(np.asarray(enc.ids, dtype=np.int64))
    ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if ids.size and ids.max() >= MAX_VOCAB:
        raise UserError(f"token id {int(ids.max())} does not fit uint16")
    return ids.astype(DTYPE)


# --------------------------------------------------------------------------- prepare


def read_text(path: str | Path) -> str:
    """The UTF-8 text of a file, byte-exact (no newline translation); UserError if unreadable or empty."""
    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UserError(f"text file not found: {p}") from None
    except OSError as e:
        raise UserError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{p} is not UTF-8 text (byte {e.start}: {e.reason})") from None
    if not text:
        raise UserError(f"{p} is empty")
    return text


def _unique(path: Path) -> Path:
    # Not tempfile.mkstemp/mkdtemp: those force mode 0600/0700; these files follow the umask.
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = _unique(path)
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _sha256_bytes(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


OUTPUT_FILES = (TOKENIZER_FILE, "train.bin", "val.bin", "test.bin", "meta.pkl", "meta.json")


def prepare(text: str, out: str | Path, *, tokenizer: str = "bpe", vocab_size: int = 2000,
            split: Sequence[float] = DEFAULT_SPLIT, source: dict[str, Any] | None = None,
            heldout: str = "end") -> dict[str, Any]:
    """Tokenise ``text`` into the prepared directory ``out`` (created if needed); return meta.json's dict.

    tokenizer: 'bpe' (trained on the train split, ``vocab_size`` tokens) or 'char' (alphabet of
    the whole text; ``vocab_size`` ignored). split: train/val/test fractions of the characters
    (``heldout="end"``); ``heldout="spread"`` takes held-out blocks from the whole text instead
    (module doc; its fractions are fixed at ~90/5/5). source: provenance copied into meta.json (name, file, sha256, url, licence).
    Files are written one by one via temp file + rename, meta.json last, so a directory
    without meta.json is incomplete. Raises UserError on bad arguments.
    """
    import tokenizers

    fractions = parse_split(split)
    if heldout == "end":
        ranges = {s: [r] for s, r in zip(SPLITS, split_ranges(text, fractions))}
        rule = ("contiguous; each cut moved forward to the next exact BPE pre-token boundary: after a "
                "newline between non-whitespace characters, else before a whitespace run")
    elif heldout == "spread":
        ranges = spread_ranges(text)
        fractions = tuple(sum(b - a for a, b in ranges[s]) / len(text) for s in SPLITS)
        rule = (f"spread; blocks of ~{SPREAD_BLOCK_CHARS} characters cut at exact BPE pre-token boundaries, "
                f"block i to val if i % {SPREAD_GROUP} == {SPREAD_GROUP // 2 - 1}, to test if i % {SPREAD_GROUP} == "
                f"{SPREAD_GROUP - 1}, else to train")
    else:
        raise UserError(f"heldout must be one of {', '.join(HELDOUT_MODES)}, got {heldout!r}")
    parts = {s: "".join(text[a:b] for a, b in ranges[s]) for s in SPLITS}
    if tokenizer == "bpe":
        tok = train_bpe(parts["train"], vocab_size)
    elif tokenizer == "char":
        tok = build_char(text)
    else:
        raise UserError(f"tokenizer must be 'bpe' or 'char', got {tokenizer!r}")
    vocab = tok.get_vocab_size()
    ids = {s: encode(tok, parts[s]) for s in SPLITS}

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok_json = tok.to_str(pretty=True).encode()
    _write_atomic(out / TOKENIZER_FILE, tok_json)
    for s in SPLITS:
        _write_atomic(out / f"{s}.bin", ids[s].tobytes())
    pkl: dict[str, Any] = {"vocab_size": vocab}
    if tokenizer == "char":
        itos = {i: c for c, i in tok.get_vocab().items()}
        pkl.update(itos=itos, stoi={c: i for i, c in itos.items()})
    _write_atomic(out / "meta.pkl", pickle.dumps(pkl))

    n_bytes = {s: len(parts[s].encode("utf-8")) for s in SPLITS}
    n_tok = {s: int(ids[s].size) for s in SPLITS}
    meta: dict[str, Any] = {
        "format": FORMAT,
        "vocab_size": vocab,
        "dtype": "uint16",
        "tokenizer": {
            "kind": tokenizer,
            "file": TOKENIZER_FILE,
            "sha256": _sha256_bytes(tok_json),
            "vocab_size_requested": vocab_size if tokenizer == "bpe" else None,
            "fitted_on": "train split" if tokenizer == "bpe" else "alphabet of the whole text",
            "library": f"tokenizers {tokenizers.__version__}",
        },
        "source": dict(source or {}),
        "split": {
            "heldout": heldout,
            "fractions": list(fractions),
            # "end": one [start, end) range per split; "spread": a list of them
            "char_ranges": {s: (list(ranges[s][0]) if heldout == "end" else [list(r) for r in ranges[s]])
                            for s in SPLITS},
            "rule": rule,
        },
        "tokens": {**n_tok, "total": sum(n_tok.values())},
        "bytes": {**n_bytes, "total": sum(n_bytes.values())},
        "bytes_per_token": {s: n_bytes[s] / n_tok[s] if n_tok[s] else None for s in SPLITS}
        | {"total": sum(n_bytes.values()) / max(1, sum(n_tok.values()))},
        "unigram_entropy_train_nats": unigram_entropy(ids["train"]),
        "uniform_entropy_nats": uniform_entropy(vocab),
    }
    if tokenizer == "char":
        meta["tokenizer"]["heldout_only_chars"] = sorted(set(parts["val"] + parts["test"]) - set(parts["train"]))
    _write_atomic(out / "meta.json", (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())
    return meta


def _source_of_corpus(name: str) -> dict[str, Any]:
    c = corpora.get(name)
    return {"name": c.name, "file": c.file, "sha256": c.sha256, "bytes": c.n_bytes,
            "url": c.url, "origin": c.source, "licence": c.licence}


def _source_of_text(path: Path) -> dict[str, Any]:
    return {"name": path.stem, "file": str(path), "sha256": corpora.sha256_file(path),
            "bytes": path.stat().st_size, "url": None, "origin": "user text file", "licence": None}


def load_source(*, corpus: str | None = None, text_path: str | Path | None = None,
                data_dir: str | Path | None = None, download: bool = False) -> tuple[str, dict[str, Any]]:
    """(text, provenance) of a known corpus (located and sha256-verified) or of a text file.

    Raises UserError as :func:`corpora.locate` does, or if neither/both sources are given.
    """
    if (corpus is None) == (text_path is None):
        raise UserError("give exactly one of a corpus name (--corpus) or a text file (--text)")
    if corpus is not None:
        path = corpora.locate(corpus, data_dir, download=download)
        return read_text(path), _source_of_corpus(corpus)
    path = Path(text_path).expanduser()
    text = read_text(path)
    return text, _source_of_text(path)


def prepare_to(out: str | Path, *, corpus: str | None = None, text_path: str | Path | None = None,
               data_dir: str | Path | None = None, download: bool = False, tokenizer: str = "bpe",
               vocab_size: int = 2000, split: Sequence[float] = DEFAULT_SPLIT,
               force: bool = False, heldout: str = "end") -> dict[str, Any]:
    """Load a source (:func:`load_source`) and :func:`prepare` it into ``out``; return meta.json's dict.

    Refuses (UserError) to overwrite a directory that already holds prepared files unless
    ``force``; with ``force`` meta.json is removed first so a crash never leaves a directory
    that looks complete. Nothing is written if the source cannot be loaded.
    """
    out = Path(out).expanduser()
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    present = [f for f in OUTPUT_FILES if (out / f).exists()]
    if present and not force:
        raise UserError(f"{out} already holds prepared data ({', '.join(present)}); pass --force to overwrite")
    text, source = load_source(corpus=corpus, text_path=text_path, data_dir=data_dir, download=download)
    if force and (out / "meta.json").exists():
        (out / "meta.json").unlink()
    return prepare(text, out, tokenizer=tokenizer, vocab_size=vocab_size, split=split, source=source,
                   heldout=heldout)


# --------------------------------------------------------------------------- cache


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Where prepared corpora are cached: ``<cache_dir or $DEPTHWIDTH_CACHE or ~/.cache/depthwidth>/prepared``."""
    base = cache_dir if cache_dir not in (None, "") else os.environ.get(CACHE_ENV) or "~/.cache/depthwidth"
    return Path(base).expanduser() / "prepared"


def cache_key(name: str, tokenizer: str, vocab_size: int, sha256: str, heldout: str = "end") -> str:
    """``<name>-bpe-<vocab>-<sha8>`` or ``<name>-char-<sha8>`` (a char vocabulary has no size knob),
    with ``-spread`` appended for spread held-out sets."""
    tok = f"bpe-{vocab_size}" if tokenizer == "bpe" else "char"
    return f"{name}-{tok}-{sha256[:8]}" + ("" if heldout == "end" else f"-{heldout}")


def _publish(tmp: Path, final: Path) -> Path:
    """Rename the finished ``tmp`` dir to ``final``; if another worker got there first, use theirs."""
    try:
        os.rename(tmp, final)
    except OSError:
        if not (final / "meta.json").is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _prepare_cached(path: Path, source: dict[str, Any], data_cfg: Any, cache_dir: str | Path | None) -> Path:
    root = cache_root(cache_dir)
    heldout = getattr(data_cfg, "heldout", "end")
    final = root / cache_key(source["name"], data_cfg.tokenizer, data_cfg.bpe_vocab_size, source["sha256"], heldout)
    if (final / "meta.json").is_file():
        return final
    text = read_text(path)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = _unique(final)
        tmp.mkdir()
    except OSError as e:
        raise UserError(f"cannot write the data cache {root}: {e.strerror or e} (set ${CACHE_ENV})") from None
    try:
        prepare(text, tmp, tokenizer=data_cfg.tokenizer, vocab_size=data_cfg.bpe_vocab_size, source=source,
                heldout=heldout)
        return _publish(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def prepared_dir_for(data_cfg: Any, data_dir: str | Path | None = None,
                     cache_dir: str | Path | None = None) -> Path:
    """Resolve ``data_cfg.corpus`` (a :class:`depthwidth.config.DataConfig`) to a prepared directory.

    * a known corpus name: located in ``data_dir`` / ``$DEPTHWIDTH_DATA`` and sha256-verified,
      then prepared once with ``data_cfg.tokenizer`` / ``bpe_vocab_size`` and the default 90/5/5
      split into ``cache_root(cache_dir)/cache_key(...)``. Concurrency-safe: each worker builds in
      its own temp dir and renames it into place; a worker that loses the race uses the winner's.
    * a directory: a prepared dir (its tokenizer must match ``data_cfg``) or a nanoGPT dir.
    * a text file: prepared like a known corpus, keyed by its file stem and sha256.

    Raises UserError if the corpus is unknown, the data dir is unset, a file is missing or
    corrupt, or a prepared dir does not match ``data_cfg``.
    """
    name = data_cfg.corpus
    if name in corpora.CORPORA:
        return _prepare_cached(corpora.locate(name, data_dir), _source_of_corpus(name), data_cfg, cache_dir)
    p = Path(name).expanduser()
    if p.is_dir():
        prep = open_prepared(p)
        kind = prep.meta["tokenizer"]["kind"]
        if prep.meta["format"] == FORMAT:
            if kind != data_cfg.tokenizer:
                raise UserError(f"{p} holds {kind} tokens but data.tokenizer={data_cfg.tokenizer!r}; set data.tokenizer={kind}")
            have = prep.meta.get("split", {}).get("heldout", "end")
            if have != getattr(data_cfg, "heldout", "end"):
                raise UserError(f"{p} has {have!r} held-out sets but data.heldout={data_cfg.heldout!r}")
            want = prep.meta["tokenizer"]["vocab_size_requested"]
            if kind == "bpe" and want != data_cfg.bpe_vocab_size:
                raise UserError(f"{p} was prepared with a {want}-token BPE but data.bpe_vocab_size={data_cfg.bpe_vocab_size}")
        return p
    if p.is_file():
        return _prepare_cached(p, _source_of_text(p), data_cfg, cache_dir)
    raise UserError(f"data.corpus {name!r} is neither a known corpus ({', '.join(corpora.CORPORA)}) nor an existing path")


# --------------------------------------------------------------------------- reading


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


def meta_for_record(meta: dict[str, Any]) -> dict[str, Any]:
    """meta.json's dict as a run record keeps it: a spread split's block ranges (hundreds of
    [start, end) pairs) are replaced by their count per split; everything else is kept."""
    split = meta.get("split") or {}
    if split.get("heldout") != "spread":
        return meta
    ranges = split.get("char_ranges") or {}
    return {**meta, "split": {**{k: v for k, v in split.items() if k != "char_ranges"},
                              "n_blocks": {s: len(r) for s, r in ranges.items()}}}


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
    if _sha256_bytes(raw) != meta["tokenizer"]["sha256"]:
        raise UserError(f"{tok_path} does not match the sha256 recorded in meta.json; prepare the data again")
    arrays = {}
    for s in SPLITS:
        f = p / f"{s}.bin"
        if not f.is_file():
            raise UserError(f"{f} is missing; prepare the data again")
        arrays[s] = _memmap(f)
        if arrays[s].size != meta["tokens"][s]:
            raise UserError(f"{f} holds {arrays[s].size} tokens, meta.json says {meta['tokens'][s]}; prepare the data again")
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
    directory is missing, incomplete, inconsistent with its meta.json, or holds ids >= vocab_size.
    """
    p = Path(path).expanduser()
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


def n_eval_sequences(tokens: np.ndarray, seq_len: int, n: int) -> int:
    """How many held-out sequences :func:`eval_batches` uses: min(n, (len(tokens) - 1) // T).

    Raises UserError if not even one sequence of T inputs + 1 target fits, or n < 1.
    """
    if n < 1 or seq_len < 1:
        raise UserError(f"number of eval sequences and seq_len must be >= 1, got {n}, {seq_len}")
    fit = (len(tokens) - 1) // seq_len
    if fit < 1:
        raise UserError(f"held-out split of {len(tokens)} tokens is too short for one sequence of seq_len {seq_len}")
    return min(n, fit)


@dataclass(frozen=True, eq=False)
class EvalSet:
    """Fixed held-out sequences: sequence i is inputs ``tokens[iT:(i+1)T]``, targets shifted by one.

    Windows are consecutive and non-overlapping from the start of the split. Iterating yields
    (x, y) int32 of shape (b, T) with b = batch_size except possibly the last batch (shorter);
    weight each batch's mean loss by b when averaging. n_tokens = n_sequences * T predictions.
    Iterable more than once.
    """

    tokens: np.ndarray
    seq_len: int
    n_sequences: int
    batch_size: int

    @property
    def n_batches(self) -> int:
        return -(-self.n_sequences // self.batch_size)

    @property
    def n_tokens(self) -> int:
        return self.n_sequences * self.seq_len

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        T = self.seq_len
        for s in range(0, self.n_sequences, self.batch_size):
            b = min(self.batch_size, self.n_sequences - s)
            block = np.asarray(self.tokens[s * T:(s + b) * T + 1], dtype=np.int32)
            yield block[:-1].reshape(b, T), block[1:].reshape(b, T)


def eval_batches(tokens: np.ndarray, seq_len: int, n_sequences: int, batch_size: int) -> EvalSet:
    """The held-out evaluation set: :func:`n_eval_sequences` windows in batches of ``batch_size``.

    Raises UserError as :func:`n_eval_sequences` does, or if batch_size < 1.
    """
    if batch_size < 1:
        raise UserError(f"eval batch_size must be >= 1, got {batch_size}")
    return EvalSet(tokens, seq_len, n_eval_sequences(tokens, seq_len, n_sequences), batch_size)


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
