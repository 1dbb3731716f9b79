"""Preparing corpora: text -> split -> tokenizer -> token files, and the shared cache of them.

Decisions (and why):

* The text is split before any tokenizer is trained, at exact BPE pre-token boundaries
  (:mod:`depthwidth.data.splits`), so ``concat(train, val, test) == encode(text)``.
* BPE is trained on the train split only; a char vocabulary is the alphabet of the whole text
  (:mod:`depthwidth.data.tokenizer`); meta.json lists the characters that occur only in
  val/test (none for tiny shakespeare).
* Files are written one by one atomically (:func:`depthwidth.records.write_atomic`), meta.json
  last, so a directory without meta.json is incomplete. A known corpus is prepared once per
  (tokenizer, vocabulary, held-out rule) into a cache that every worker shares.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from depthwidth.config import RunConfig
from depthwidth.data import corpora
from depthwidth.data.splits import (
    DEFAULT_SPLIT,
    SPLITS,
    SPREAD_BLOCK_CHARS,
    SPREAD_GROUP,
    parse_split,
    read_text,
    split_ranges,
    spread_ranges,
)
from depthwidth.data.tokenfiles import FORMAT, TOKENIZER_FILE, open_prepared, uniform_entropy, unigram_entropy
from depthwidth.data.tokenizer import build_char, encode, train_bpe
from depthwidth.errors import UserError
from depthwidth.records import unique_sibling, write_atomic

HELDOUT_MODES = ("end", "spread")
CACHE_ENV = "DEPTHWIDTH_CACHE"
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
    # optional dependency: tokenizers loaded only where used
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
    write_atomic(out / TOKENIZER_FILE, tok_json)
    for s in SPLITS:
        write_atomic(out / f"{s}.bin", ids[s].tobytes())
    pkl: dict[str, Any] = {"vocab_size": vocab}
    if tokenizer == "char":
        itos = {i: c for c, i in tok.get_vocab().items()}
        pkl.update(itos=itos, stoi={c: i for i, c in itos.items()})
    write_atomic(out / "meta.pkl", pickle.dumps(pkl))

    n_bytes = {s: len(parts[s].encode("utf-8")) for s in SPLITS}
    n_tok = {s: int(ids[s].size) for s in SPLITS}
    meta: dict[str, Any] = {
        "format": FORMAT,
        "vocab_size": vocab,
        "dtype": "uint16",
        "tokenizer": {
            "kind": tokenizer,
            "file": TOKENIZER_FILE,
            "sha256": hashlib.sha256(tok_json).hexdigest(),
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
        # Checked whenever the directory is opened (tokenfiles.open_prepared): a cached token
        # file that was overwritten must not train under the real run's id.
        "files_sha256": {f"{s}.bin": hashlib.sha256(ids[s].tobytes()).hexdigest() for s in SPLITS},
        "bytes": {**n_bytes, "total": sum(n_bytes.values())},
        "bytes_per_token": {s: n_bytes[s] / n_tok[s] if n_tok[s] else None for s in SPLITS}
        | {"total": sum(n_bytes.values()) / max(1, sum(n_tok.values()))},
        "unigram_entropy_train_nats": unigram_entropy(ids["train"]),
        "uniform_entropy_nats": uniform_entropy(vocab),
    }
    if tokenizer == "char":
        meta["tokenizer"]["heldout_only_chars"] = sorted(set(parts["val"] + parts["test"]) - set(parts["train"]))
    write_atomic(out / "meta.json", (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())
    return meta


def meta_for_record(meta: dict[str, Any]) -> dict[str, Any]:
    """meta.json's dict as a run record keeps it: a spread split's block ranges (hundreds of
    [start, end) pairs) are replaced by their count per split; everything else is kept."""
    split = meta.get("split") or {}
    if split.get("heldout") != "spread" or "char_ranges" not in split:
        return meta  # nothing to trim (or trimmed already)
    ranges = split.get("char_ranges") or {}
    return {**meta, "split": {**{k: v for k, v in split.items() if k != "char_ranges"},
                              "n_blocks": {s: len(r) for s, r in ranges.items()}}}


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
    path = Path(os.path.expanduser(text_path))
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
    out = Path(os.path.expanduser(out))
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
    """Where prepared corpora are cached: ``<cache_dir or $DEPTHWIDTH_CACHE or ~/.cache/depthwidth>/prepared-2``.

    ``-2``: entries carry token-file sha256s (meta.json ``files_sha256``), checked on every use;
    entries of the older ``prepared/`` folder have none, so they are not reused.
    """
    base = cache_dir if cache_dir not in (None, "") else os.environ.get(CACHE_ENV) or "~/.cache/depthwidth"
    return Path(os.path.expanduser(base)) / "prepared-2"


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
        tmp = unique_sibling(final)
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


def content_sha256(path: str | Path) -> str:
    """The content of a corpus given as a path: a file's sha256, or for a directory the sha256
    of the lines ``<name> <sha256>`` of the data files it holds (:data:`OUTPUT_FILES`, which
    include nanoGPT's train.bin, val.bin and meta.pkl). Raises OSError if it cannot be read."""
    p = Path(os.path.expanduser(path))
    if not p.is_dir():
        return _sha256_of(p)
    lines = "".join(f"{name} {_sha256_of(p / name)}\n" for name in OUTPUT_FILES if (p / name).is_file())
    return hashlib.sha256(lines.encode()).hexdigest()


def _sha256_of(path: Path) -> str:
    st = path.stat()
    return _sha256_cached(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    # Keyed by size and mtime too: a sweep pins every run's config, so a file is hashed once
    # per process unless it changes.
    return corpora.sha256_file(path)


def pin_corpus(cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``data.corpus_sha256`` set to the content of a corpus given as a path
    (:func:`content_sha256`), so that the run id changes when the file does; a known corpus
    (sha256 fixed in :mod:`depthwidth.data.corpora`) or a path that does not exist (training
    reports it) is returned unchanged.

    Raises UserError if ``cfg`` was pinned to other content (the file changed since).
    """
    name = cfg.data.corpus
    p = Path(os.path.expanduser(name))
    if name in corpora.CORPORA or not p.exists():
        return cfg
    try:
        sha = content_sha256(p)
    except OSError as e:
        raise UserError(f"data.corpus {name}: cannot read it ({e.strerror or e})") from None
    have = cfg.data.corpus_sha256
    if have and have != sha:
        raise UserError(f"data.corpus {name} changed since this config was made (sha256 {sha[:12]}..., "
                        f"the config says {have[:12]}...); drop data.corpus_sha256 to train on the new content")
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, corpus_sha256=sha))


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
    p = Path(os.path.expanduser(name))
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
