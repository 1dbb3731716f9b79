"""Tokenizers (HF ``tokenizers``): byte-level BPE or char-level, and chunked parallel encoding.

* BPE: byte-level (ByteLevel pre-tokenizer without prefix space, ByteLevel decoder, all 256
  byte symbols in the initial alphabet), trained on the train split only, so decode(encode(s))
  == s for every string and no held-out statistics leak into the merges.
* Char: the vocabulary is the sorted set of distinct characters of the *whole* text (the
  nanoGPT convention). This is an alphabet, not a model fitted to frequencies; building it from
  the train split only would make held-out characters unencodable.

Token ids are uint16 (:data:`DTYPE`), the nanoGPT token-file convention.
"""

from __future__ import annotations

import numpy as np

from depthwidth.data.splits import text_chunks
from depthwidth.errors import UserError

MAX_VOCAB = 1 << 16  # token ids are stored as uint16
DTYPE = np.dtype("<u2")
_ENCODE_GROUP = 16  # chunks per encode_batch call: bounds the memory of Encoding objects


def train_bpe(train_text: str, vocab_size: int):
    """Train a byte-level BPE ``tokenizers.Tokenizer`` with ``vocab_size`` tokens on ``train_text``.

    Alphabet: the 256 byte symbols of ``ByteLevel.alphabet()``, so any string is encodable and
    decodes back exactly. The vocabulary is smaller than ``vocab_size`` only if the text runs
    out of pairs to merge. Raises UserError unless 256 < vocab_size <= 65536 (uint16 ids).
    """
    # optional dependency: tokenizers loaded only where used
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
    tok.train_from_iterator(text_chunks(train_text), trainer=trainer)
    return tok


def build_char(text: str):
    """A char-level ``tokenizers.Tokenizer``: id i = i-th of the sorted distinct characters of ``text``.

    Every character is its own pre-token (``Split`` on ``[\\s\\S]``), looked up in a WordLevel
    vocabulary; the ``Fuse`` decoder joins them back. Raises UserError if there are more than
    65536 distinct characters (uint16 ids).
    """
    # optional dependency: tokenizers loaded only where used
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    chars = sorted(set(text))
    if len(chars) > MAX_VOCAB:
        raise UserError(f"{len(chars)} distinct characters do not fit uint16 token ids (max {MAX_VOCAB})")
    tok = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


def tokenizer_kind(tok) -> str:
    return "char" if type(tok.model).__name__ == "WordLevel" else "bpe"


def _check_encodable(tok, text: str) -> None:
    if tokenizer_kind(tok) == "char":
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
    chunks = text_chunks(text)
    parts = []
    for g in range(0, len(chunks), _ENCODE_GROUP):
        for enc in batch(chunks[g:g + _ENCODE_GROUP], add_special_tokens=False):
            parts.append(np.asarray(enc.ids, dtype=np.int64))
    ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if ids.size and ids.max() >= MAX_VOCAB:
        raise UserError(f"token id {int(ids.max())} does not fit uint16")
    return ids.astype(DTYPE)
