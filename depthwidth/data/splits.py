"""Corpus text -> train/val/test character ranges, cut where byte-level BPE cannot notice.

The *text* is split into train/val/test as disjoint contiguous character ranges (default
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
that are encoded in parallel (:func:`text_chunks`).

stdlib only.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

from depthwidth.errors import UserError

SPLITS = ("train", "val", "test")
DEFAULT_SPLIT = (0.9, 0.05, 0.05)
SPREAD_BLOCK_CHARS = 8192  # "spread" held-out: block size (characters, cut at safe boundaries)
SPREAD_GROUP = 20  # ... and in every SPREAD_GROUP blocks: block 9 -> val, block 19 -> test
_CHUNK_CHARS = 1 << 16
# Whitespace as the HF ByteLevel regex (\s, Unicode White_Space) sees it: Python's str.isspace
# minus U+001C..U+001F (a test checks this against the pre-tokenizer).
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Exact pre-token boundaries (module doc), preferred first: after a newline between non-space
# characters (a piece then starts at a line start), else just before a whitespace run.
_LINE_BOUNDARY = re.compile(f"(?<=[^{WHITESPACE}])\n(?=[^{WHITESPACE}])")
_WORD_BOUNDARY = re.compile(f"(?<=[^{WHITESPACE}])(?=[{WHITESPACE}])")
_LINE_SEARCH_CHARS = 1 << 20  # how far to look for a line boundary before taking a word one


def read_text(path: str | Path) -> str:
    """The UTF-8 text of a file, byte-exact (no newline translation); UserError if unreadable or empty."""
    p = Path(os.path.expanduser(path))
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


def text_chunks(text: str, size: int = _CHUNK_CHARS) -> list[str]:
    out, i = [], 0
    while i < len(text):
        j = safe_cut(text, i + size)
        out.append(text[i:j])
        i = j
    return out
