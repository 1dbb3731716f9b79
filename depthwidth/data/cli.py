"""``depthwidth data prepare`` and ``depthwidth data info`` (thin: parse, call depthwidth.data, print).

Nothing heavy at module level: numpy and tokenizers are imported inside the handlers.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.units import parse_int

MISMATCH = "CHECKSUM MISMATCH"  # the status of a known corpus file whose sha256 is wrong


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare and inspect tokenised corpora")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    pp = dsub.add_parser(
        "prepare", help="tokenise a corpus into train/val/test uint16 files",
        description="Split the text into contiguous train/val/test ranges, train the tokenizer on "
                    "train only (bpe) or take the alphabet (char), write tokenizer.json, "
                    "{train,val,test}.bin (uint16) and meta.json into --out.",
    )
    src = pp.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", metavar="NAME", help="a known corpus (see `depthwidth data info`)")
    src.add_argument("--text", metavar="PATH", help="any UTF-8 text file")
    pp.add_argument("--tokenizer", choices=("bpe", "char"), default="bpe", help="default: bpe")
    pp.add_argument("--vocab-size", default="2000", help="BPE vocabulary size V (default 2000; ignored for char)")
    pp.add_argument("--out", required=True, metavar="DIR", help="output directory")
    pp.add_argument("--data-dir", metavar="DIR", help="folder holding the corpus files (default $DEPTHWIDTH_DATA)")
    pp.add_argument("--download", action="store_true", help="fetch a missing corpus from its canonical URL")
    pp.add_argument("--split", default="0.9,0.05,0.05", help="train,val,test fractions of the text (default 0.9,0.05,0.05)")
    pp.add_argument("--heldout", choices=("end", "spread"), default="end",
                    help="end: val/test are the text's last part (--split); spread: held-out blocks from the "
                         "whole text (~90/5/5)")
    pp.add_argument("--force", action="store_true", help="overwrite prepared files already in --out")
    add_json_flag(pp)
    pp.set_defaults(func=_prepare)

    pi = dsub.add_parser(
        "info", help="describe a prepared directory, a known corpus, or list the known corpora (each file "
                   "sha256-verified; exit 1 on a mismatch)",
    )
    pi.add_argument("target", nargs="?", metavar="DIR|NAME",
                    help="a prepared (or nanoGPT) directory, or a known corpus name; omit to list corpora")
    pi.add_argument("--data-dir", metavar="DIR", help="folder holding the corpus files (default $DEPTHWIDTH_DATA)")
    add_json_flag(pi)
    pi.set_defaults(func=_info)


def _prepare(args: argparse.Namespace) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.data.prepare import prepare_to

    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.data.splits import parse_split

    meta = prepare_to(
        args.out, force=args.force, corpus=args.corpus, text_path=args.text, data_dir=args.data_dir,
        download=args.download, tokenizer=args.tokenizer,
        vocab_size=parse_int(args.vocab_size, name="--vocab-size"), split=parse_split(args.split),
        heldout=args.heldout,
    )
    emit(args, {"out": str(args.out), **meta}, _prepared_text(args.out, meta))
    return 0


def _prepared_text(out: Any, meta: dict[str, Any]) -> str:
    src, tok = meta["source"], meta["tokenizer"]
    lines = [f"{src.get('name')} -> {out}"]
    if src.get("sha256"):
        lines.append(f"  source     {src.get('file')}  sha256 {src['sha256'][:16]}...  {src.get('bytes', 0):,} bytes")
    tline = f"  tokenizer  {tok['kind']}, vocab_size {meta['vocab_size']}"
    if tok.get("vocab_size_requested"):
        tline += f" (requested {tok['vocab_size_requested']})"
    if tok.get("fitted_on"):
        tline += f", fitted on the {tok['fitted_on']}"
    lines.append(tline)
    if tok.get("sha256"):
        lines.append(f"  tokenizer.json sha256 {tok['sha256'][:16]}...")
    if "rule" in meta.get("split", {}):
        lines.append(f"  split      {meta['split']['rule']}")
    lines.append(f"  {'split':<6} {'tokens':>12} {'bytes':>12} {'bytes/token':>12}")
    bpt = meta.get("bytes_per_token", {})
    for s in ("train", "val", "test", "total"):
        nb = meta.get("bytes", {}).get(s)
        b = bpt.get(s)
        lines.append(f"  {s:<6} {meta['tokens'][s]:>12,} {f'{nb:,}' if nb is not None else '-':>12} "
                     f"{f'{b:.3f}' if b is not None else '-':>12}")
    if meta.get("unigram_entropy_train_nats") is not None:
        lines.append(f"  unigram entropy (train) {meta['unigram_entropy_train_nats']:.4f} nats/token; "
                     f"uniform ln V {meta['uniform_entropy_nats']:.4f}")
    return "\n".join(lines)


def _info(args: argparse.Namespace) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.data import corpora

    if args.target is None:
        rows = [_corpus_row(c, args.data_dir) for c in corpora.CORPORA.values()]
        text = "\n".join(f"{r['name']:<16} {r['bytes']:>11,} bytes  {r['licence']:<14} {r['status']}" for r in rows)
        emit(args, {"corpora": rows}, text)
        return 1 if any(r["status"] == MISMATCH for r in rows) else 0
    if args.target in corpora.CORPORA:
        row = _corpus_row(corpora.CORPORA[args.target], args.data_dir)
        emit(args, row, "\n".join(f"{k:<12} {v}" for k, v in row.items()))
        return 1 if row["status"] == MISMATCH else 0
    target = Path(os.path.expanduser(args.target))
    if not target.exists():
        raise UserError(f"data info {args.target}: neither a known corpus ({', '.join(corpora.CORPORA)}) "
                        "nor an existing prepared directory")
    if not target.is_dir():
        raise UserError(f"data info {args.target}: a file; give a prepared directory (`data prepare --out DIR`) "
                        f"or a known corpus ({', '.join(corpora.CORPORA)})")
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.data import tokenfiles

    prep = tokenfiles.open_prepared(args.target)
    meta = dict(prep.meta)
    if "unigram_entropy_train_nats" not in meta:
        meta["unigram_entropy_train_nats"] = tokenfiles.unigram_entropy(prep.train)
        meta["uniform_entropy_nats"] = tokenfiles.uniform_entropy(prep.vocab_size)
    emit(args, {"path": str(prep.path), **meta}, _prepared_text(prep.path, meta))
    return 0


def _corpus_row(c: Any, data_dir: str | None) -> dict[str, Any]:
    """A known corpus as ``data info`` shows it; the file, when present, is sha256-verified (a
    file that is there but wrong must not read as usable)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.data import corpora

    row = {"name": c.name, "file": c.file, "bytes": c.n_bytes, "sha256": c.sha256, "licence": c.licence,
           "url": c.url, "origin": c.source, "description": c.description}
    path = corpora.find(c.name, data_dir)  # the data dir's file, else the copy that ships
    if path is None:
        try:
            row["path"] = str(corpora.data_dir(data_dir) / c.file)
            row["status"] = "missing"
        except UserError:
            row["status"] = "data dir not set (--data-dir or $DEPTHWIDTH_DATA)"
        return row
    row["path"] = str(path)
    ok = corpora.sha256_file(path) == c.sha256
    shipped = " (ships with depthwidth)" if path == corpora.bundled_path(c.name) else ""
    row["status"] = f"ok (sha256 verified){shipped}" if ok else MISMATCH
    return row
