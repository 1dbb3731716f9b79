"""depthwidth.data (corpora, text splits, tokenizers, token files, preparation) on the real corpora (the bundled tiny shakespeare; the other four from $DEPTHWIDTH_DATA, with SOURCES.md)."""

from __future__ import annotations

import dataclasses
import math
import pickle
import re
import shutil
import sys
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from depthwidth.config import DataConfig
from depthwidth.data import corpora, prepare, splits, tokenfiles, tokenizer
from depthwidth.errors import UserError

# SOURCES.md: tinyshakespeare.txt is 1,115,394 bytes of ASCII (so also 1,115,394 characters)
# with 65 distinct characters; its sha256 starts 86c4e6aa.
TS_BYTES = 1_115_394
TS_CHARS = 65


@pytest.fixture(scope="module")
def ts_text(corpora_dir: Path) -> str:
    return splits.read_text(corpora_dir / "tinyshakespeare.txt")


@pytest.fixture(scope="module")
def char_dir(corpora_dir: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("char")
    prepare.prepare_to(out, corpus="tinyshakespeare", data_dir=corpora_dir, tokenizer="char")
    return out


@pytest.fixture(scope="module")
def bpe_dir(corpora_dir: Path, tmp_path_factory) -> Path:
    # Full corpus, V = 2000: about 1-2 s on one CPU core (BPE training ~0.4 s, encoding ~1 s).
    out = tmp_path_factory.mktemp("bpe")
    prepare.prepare_to(out, corpus="tinyshakespeare", data_dir=corpora_dir, tokenizer="bpe", vocab_size=2000)
    return out


@pytest.fixture(scope="module")
def small_bpe(ts_text: str):
    return tokenizer.train_bpe(ts_text[:200_000], 400)


# --------------------------------------------------------------------------- registry / files


def test_registry_matches_sources_md(large_corpora_dir: Path):
    # Every registry entry must agree with the file on disk (size and sha256 from SOURCES.md).
    corpora_dir = large_corpora_dir
    assert set(corpora.CORPORA) == {"tinyshakespeare", "kjv", "austen", "us_speeches", "python_docs"}
    for c in corpora.CORPORA.values():
        path = corpora_dir / c.file
        assert path.stat().st_size == c.n_bytes, c.name
        assert corpora.locate(c.name, corpora_dir) == path
    sources = (corpora_dir / "SOURCES.md").read_text()
    for c in corpora.CORPORA.values():
        assert c.sha256 in sources and f"{c.n_bytes:,}" in sources
    assert corpora.CORPORA["tinyshakespeare"].url in sources


def test_checksum_mismatch_is_user_error(tmp_path: Path, corpora_dir: Path):
    raw = bytearray((corpora_dir / "tinyshakespeare.txt").read_bytes())
    raw[0] ^= 0x20  # "F" -> "f": same size, different sha256
    (tmp_path / "tinyshakespeare.txt").write_bytes(bytes(raw))
    with pytest.raises(UserError, match=r"checksum mismatch .*tinyshakespeare.txt.*expected 86c4e6aa"):
        corpora.locate("tinyshakespeare", tmp_path)
    with pytest.raises(UserError, match="checksum mismatch"):
        prepare.prepared_dir_for(DataConfig(corpus="tinyshakespeare"), tmp_path, tmp_path / "cache")


def test_the_bundled_corpus_is_the_canonical_file():
    # Tiny shakespeare ships in the package (public domain, its README says so): byte for byte
    # the char-rnn file, found with no data dir and when a data dir lacks it.
    ts = corpora.CORPORA["tinyshakespeare"]
    path = corpora.bundled_path("tinyshakespeare")
    assert path.stat().st_size == ts.n_bytes == 1_115_394
    assert corpora.sha256_file(path) == ts.sha256
    readme = (path.parent / "README.md").read_text()
    assert ts.sha256 in readme and "public domain" in readme and ts.url in readme
    assert corpora.bundled_path("kjv") is None


def test_missing_file_says_where_to_put_it(tmp_path: Path, monkeypatch):
    assert corpora.locate("tinyshakespeare", tmp_path) == corpora.bundled_path("tinyshakespeare")
    monkeypatch.setattr(corpora, "BUNDLED", frozenset())  # as for a corpus that does not ship
    ts = corpora.CORPORA["tinyshakespeare"]
    with pytest.raises(UserError) as e:
        corpora.locate("tinyshakespeare", tmp_path)
    msg = str(e.value)
    assert "tinyshakespeare.txt" in msg and str(tmp_path) in msg and ts.url in msg and "\n" not in msg
    with pytest.raises(UserError, match=r"bible -f"):  # no URL: the message quotes the command
        corpora.locate("kjv", tmp_path)
    with pytest.raises(UserError, match="unknown corpus 'nope'"):
        corpora.locate("nope", tmp_path)


def test_data_dir_from_env_or_error(monkeypatch, tmp_path: Path, corpora_dir: Path):
    # $DEPTHWIDTH_DATA only adds corpora: without it the bundled one is found, the others are
    # an error that says how to set it; a file there takes precedence over the bundled copy.
    monkeypatch.delenv(corpora.DATA_ENV, raising=False)
    assert corpora.locate("tinyshakespeare") == corpora.bundled_path("tinyshakespeare")
    with pytest.raises(UserError, match="DEPTHWIDTH_DATA"):
        corpora.locate("kjv")
    (tmp_path / "tinyshakespeare.txt").write_bytes((corpora_dir / "tinyshakespeare.txt").read_bytes())
    monkeypatch.setenv(corpora.DATA_ENV, str(tmp_path))
    assert corpora.locate("tinyshakespeare") == tmp_path / "tinyshakespeare.txt"


def test_download_from_url(monkeypatch, tmp_path: Path, corpora_dir: Path):
    # Offline stand-ins for the canonical URL: a file:// URL (urllib treats it like http).
    ts = corpora.CORPORA["tinyshakespeare"]
    good = dataclasses.replace(ts, url=(corpora_dir / "tinyshakespeare.txt").as_uri())
    monkeypatch.setitem(corpora.CORPORA, "tinyshakespeare", good)
    monkeypatch.setattr(corpora, "BUNDLED", frozenset())  # a found corpus is never downloaded
    dest = tmp_path / "fresh"
    path = corpora.locate("tinyshakespeare", dest, download=True)
    assert path == dest / "tinyshakespeare.txt" and corpora.sha256_file(path) == ts.sha256
    assert sorted(p.name for p in dest.iterdir()) == ["tinyshakespeare.txt"]

    (tmp_path / "other.txt").write_text("not shakespeare")
    wrong = dataclasses.replace(ts, url=(tmp_path / "other.txt").as_uri())
    monkeypatch.setitem(corpora.CORPORA, "tinyshakespeare", wrong)
    with pytest.raises(UserError, match="sha256 .* expected 86c4e6aa"):
        corpora.locate("tinyshakespeare", tmp_path / "bad", download=True)
    assert list((tmp_path / "bad").iterdir()) == []  # nothing half-written left behind

    refused = dataclasses.replace(ts, url="http://127.0.0.1:9/input.txt")  # port 9: nothing listens
    monkeypatch.setitem(corpora.CORPORA, "tinyshakespeare", refused)
    with pytest.raises(UserError, match="could not download http://127.0.0.1:9/input.txt"):
        corpora.locate("tinyshakespeare", tmp_path / "net", download=True)
    with pytest.raises(UserError, match="no download URL.*janeaustenr"):
        corpora.locate("austen", tmp_path / "net", download=True)


# --------------------------------------------------------------------------- splitting


def test_split_ranges_by_hand():
    # "one\n\ntwo\nthree four five": 24 characters; "\n" at 3, 4, 8.
    text = "one\n\ntwo\nthree four five"
    # Nominal cuts round(0.2*24)=5 and round(0.5*24)=12. From 5 the next "\n" between non-spaces
    # is the one at 8 (the one at 4 follows a "\n"), so cut 1 = 9. No line boundary after 12:
    # the next whitespace run after a non-space starts at 14 ("three| four"), so cut 2 = 14.
    assert splits.split_ranges(text, (0.2, 0.3, 0.5)) == [(0, 9), (9, 14), (14, 24)]
    # "ab\ncd\nef\ngh\n": nominal 6 and 9 are already just after "\n"s between letters.
    assert splits.split_ranges("ab\ncd\nef\ngh\n", (0.5, 0.25, 0.25)) == [(0, 6), (6, 9), (9, 12)]
    with pytest.raises(UserError, match="three non-empty parts"):
        splits.split_ranges("abcdefgh", (0.9, 0.05, 0.05))  # no whitespace: nowhere to cut


@pytest.mark.parametrize("bad", ["0.9,0.05", "0.9,0.2,0.1", "0.9,0,0.1", "a,b,c", "0.9,-0.05,0.15", "nan,0.5,0.5"])
def test_parse_split_rejects(bad: str):
    with pytest.raises(UserError):
        splits.parse_split(bad)


def test_whitespace_class_matches_the_byte_level_pre_tokenizer():
    # safe_cut's exactness rests on agreeing with the HF regex about what is whitespace.
    from tokenizers import pre_tokenizers

    pt = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ws = re.compile(f"[{splits.WHITESPACE}]")
    candidates = [chr(i) for i in range(sys.maxunicode + 1) if chr(i).isspace()] + ["\u180e", "\u200b", "\ufeff"]
    for c in candidates:
        # Two copies of a non-whitespace symbol form one punctuation pre-token, offsets (1, 3).
        hf_ws = (1, 3) not in [o for _, o in pt.pre_tokenize_str("a" + c + c + "b")]
        assert hf_ws == bool(ws.match(c)), hex(ord(c))


_TEXT = st.text(alphabet="absld' Z.,1\n\r\t\u00a0\u2003\x1c\u00e9", max_size=60)  # 's 'll 'd: contractions


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, pos=st.integers(0, 60))
def test_safe_cut_is_an_exact_bpe_boundary(small_bpe, text: str, pos: int):
    c = splits.safe_cut(text, pos)
    assert c >= min(pos, len(text))
    whole = small_bpe.encode(text).ids
    assert small_bpe.encode(text[:c]).ids + small_bpe.encode(text[c:]).ids == whole


def test_chunked_encode_equals_whole_encode_on_long_lines(small_bpe, large_corpora_dir: Path):
    # us_speeches ends in very long lines: the chunker must fall back to word boundaries.
    text = splits.read_text(large_corpora_dir / "us_speeches.txt")[-400_000:]
    assert tokenizer.encode(small_bpe, text).tolist() == small_bpe.encode(text).ids


# --------------------------------------------------------------------------- char level


def test_char_tinyshakespeare(char_dir: Path, ts_text: str):
    prep = tokenfiles.open_prepared(char_dir)
    assert prep.vocab_size == TS_CHARS
    n = [prep.train.size, prep.val.size, prep.test.size]
    assert sum(n) == TS_BYTES == prep.meta["tokens"]["total"]
    assert prep.train.dtype == np.uint16 and isinstance(prep.train, np.memmap)
    # Disjoint, contiguous, in order: the three decoded splits concatenate to the corpus.
    assert prep.decode(prep.train) + prep.decode(prep.val) + prep.decode(prep.test) == ts_text
    (a0, a1), (b0, b1), (c0, c1) = (prep.meta["split"]["char_ranges"][s] for s in splits.SPLITS)
    assert (a0, a1 - b0, b1 - c0, c1) == (0, 0, 0, TS_BYTES)
    # Each cut is the nominal 90% / 95% point moved forward to a line start (lines < 200 chars).
    assert 0 <= a1 - round(0.9 * TS_BYTES) < 200 and 0 <= b1 - round(0.95 * TS_BYTES) < 200
    assert prep.meta["bytes_per_token"]["total"] == 1.0  # ASCII: one byte per character token
    assert prep.meta["tokenizer"]["heldout_only_chars"] == []
    assert prep.meta["source"]["sha256"] == corpora.CORPORA["tinyshakespeare"].sha256
    # ids are the ranks of the characters in sorted order (nanoGPT's convention)
    assert prep.encode("\n !") == [0, 1, 2] and prep.decode([13, 39]) == "Aa"
    with pytest.raises(UserError, match="not in this char vocabulary"):
        prep.encode("5€")
    with open(char_dir / "meta.pkl", "rb") as fh:  # nanoGPT's train.py/sample.py read this
        pkl = pickle.load(fh)
    assert pkl["vocab_size"] == TS_CHARS and pkl["itos"][13] == "A" and pkl["stoi"]["a"] == 39


def test_unigram_entropy_of_char_train_split(char_dir: Path, ts_text: str):
    prep = tokenfiles.open_prepared(char_dir)
    a, b = prep.meta["split"]["char_ranges"]["train"]
    # Independent computation from the text itself: H = -sum (c/n) ln(c/n) over character counts.
    counts = Counter(ts_text[a:b])
    n = b - a
    expect = -sum(c / n * math.log(c / n) for c in counts.values())
    assert tokenfiles.unigram_entropy(prep.train) == pytest.approx(expect, rel=1e-12)
    assert prep.meta["unigram_entropy_train_nats"] == pytest.approx(expect, rel=1e-12)
    assert prep.meta["uniform_entropy_nats"] == pytest.approx(math.log(65), rel=1e-15)
    assert expect < math.log(65)


def test_entropies_by_hand():
    assert tokenfiles.unigram_entropy(np.array([0, 0, 1, 1], np.uint16)) == pytest.approx(math.log(2))
    # p = (3/4, 1/4): H = -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.5623351446188083
    assert tokenfiles.unigram_entropy(np.array([7, 7, 7, 2], np.uint16)) == pytest.approx(0.5623351446188083, rel=1e-14)
    assert tokenfiles.unigram_entropy(np.array([5] * 10, np.uint16)) == 0.0
    assert tokenfiles.uniform_entropy(2000) == pytest.approx(7.600902459542082, rel=1e-15)  # ln 2000
    with pytest.raises(UserError):
        tokenfiles.unigram_entropy(np.zeros(0, np.uint16))
    with pytest.raises(UserError):
        tokenfiles.uniform_entropy(0)


# --------------------------------------------------------------------------- BPE


def test_bpe_tinyshakespeare(bpe_dir: Path, ts_text: str):
    prep = tokenfiles.open_prepared(bpe_dir)
    assert prep.vocab_size <= 2000 and prep.vocab_size == prep.tokenizer.get_vocab_size()
    assert prep.meta["tokenizer"]["vocab_size_requested"] == 2000
    for s in splits.SPLITS:
        a, b = prep.meta["split"]["char_ranges"][s]
        assert prep.decode(getattr(prep, s)) == ts_text[a:b], s
        assert prep.meta["bytes"][s] == b - a  # ASCII
        assert prep.meta["bytes_per_token"][s] == pytest.approx((b - a) / getattr(prep, s).size)
    # Cutting at exact pre-token boundaries: the splits are the whole corpus's encoding, cut.
    whole = prep.tokenizer.encode(ts_text).ids
    assert np.concatenate([prep.train, prep.val, prep.test]).tolist() == whole
    assert sum(prep.meta["tokens"][s] for s in splits.SPLITS) == prep.meta["tokens"]["total"] == len(whole)
    # Byte level: any string round-trips, including characters the corpus never had.
    for s in ["naïve café — 東京 🙂\r\n\t", "", "   x  \n\n"]:
        assert prep.decode(prep.encode(s)) == s
    assert tokenfiles.uniform_entropy(prep.vocab_size) > prep.meta["unigram_entropy_train_nats"] > 0


def test_bpe_is_trained_on_the_train_split_only(tmp_path: Path, ts_text: str, large_corpora_dir: Path):
    text = ts_text[:300_000]
    a = splits.split_ranges(text)[0][1]
    assert text[a - 1] == "\n" and not text[a].isspace()
    # Same train range, entirely different held-out text (Austen), same total length.
    austen = splits.read_text(large_corpora_dir / "austen.txt")
    start = austen.index("\nIt is a truth") + 1
    other = text[:a] + austen[start:start + len(text) - a]
    assert splits.split_ranges(other)[0] == (0, a)
    m1 = prepare.prepare(text, tmp_path / "1", tokenizer="bpe", vocab_size=500)
    m2 = prepare.prepare(other, tmp_path / "2", tokenizer="bpe", vocab_size=500)
    prepare.prepare(text, tmp_path / "3", tokenizer="bpe", vocab_size=500)
    assert m1["tokenizer"]["sha256"] == m2["tokenizer"]["sha256"]
    assert (tmp_path / "1" / "meta.json").read_bytes() == (tmp_path / "3" / "meta.json").read_bytes()  # deterministic
    direct = tokenizer.train_bpe(text[:a], 500).to_str(pretty=True).encode()
    assert (tmp_path / "1" / "tokenizer.json").read_bytes() == direct
    shifted = prepare.prepare(ts_text[1000:301_000], tmp_path / "4", tokenizer="bpe", vocab_size=500)
    assert shifted["tokenizer"]["sha256"] != m1["tokenizer"]["sha256"]


def test_bpe_vocab_bounds():
    with pytest.raises(UserError, match="257"):
        tokenizer.train_bpe("hello world", 256)
    with pytest.raises(UserError, match="uint16"):
        tokenizer.train_bpe("hello world", 70_000)
    # Issue 10: `data prepare --vocab-size 65536` was accepted, data.bpe_vocab_size=65536 refused.
    assert DataConfig(tokenizer="bpe", bpe_vocab_size=tokenizer.MAX_VOCAB).bpe_vocab_size == 65536
    for bad in (256, tokenizer.MAX_VOCAB + 1):
        with pytest.raises(UserError, match=r"257\.\.65536"):
            DataConfig(tokenizer="bpe", bpe_vocab_size=bad)
        with pytest.raises(UserError, match=r"257\.\.65536"):
            tokenizer.train_bpe("hello world", bad)


# --------------------------------------------------------------------------- opening


def _write_nanogpt(d: Path, train: np.ndarray, val: np.ndarray, pkl: dict | None, test: np.ndarray | None = None):
    d.mkdir()
    train.astype(np.uint16).tofile(d / "train.bin")  # exactly what nanoGPT's prepare.py does
    val.astype(np.uint16).tofile(d / "val.bin")
    if test is not None:
        test.astype(np.uint16).tofile(d / "test.bin")
    if pkl is not None:
        with open(d / "meta.pkl", "wb") as fh:
            pickle.dump(pkl, fh)


def test_nanogpt_directory(tmp_path: Path, char_dir: Path):
    ours = tokenfiles.open_prepared(char_dir)
    itos = {i: c for c, i in ours.tokenizer.get_vocab().items()}
    pkl = {"vocab_size": 65, "itos": itos, "stoi": {c: i for i, c in itos.items()}}
    val = np.asarray(ours.val)
    _write_nanogpt(tmp_path / "ng", np.asarray(ours.train), val, pkl)
    ng = tokenfiles.open_prepared(tmp_path / "ng")
    assert ng.vocab_size == 65 and ng.meta["format"] == "nanogpt"
    # No test.bin: val is the first half of val.bin, test the second half (disjoint).
    half = val.size // 2
    assert np.array_equal(ng.val, val[:half]) and np.array_equal(ng.test, val[half:])
    assert "second half" in ng.meta["split"]["rule"]
    assert ng.decode(ng.train[:12]) == ours.decode(ours.train[:12]) == "First Citize"
    assert ng.encode("First") == ours.encode("First")
    assert prepare.prepared_dir_for(DataConfig(corpus=str(tmp_path / "ng"))) == tmp_path / "ng"

    _write_nanogpt(tmp_path / "ng3", np.asarray(ours.train), val, pkl, test=np.asarray(ours.test))
    ng3 = tokenfiles.open_prepared(tmp_path / "ng3")
    assert np.array_equal(ng3.val, val) and np.array_equal(ng3.test, ours.test)

    _write_nanogpt(tmp_path / "gpt2", np.arange(100), np.arange(50), None)
    g = tokenfiles.open_prepared(tmp_path / "gpt2")
    assert g.vocab_size == tokenfiles.GPT2_VOCAB == 50257  # nanoGPT's default without meta.pkl
    with pytest.raises(UserError, match="no tokenizer"):
        g.decode([1, 2])

    _write_nanogpt(tmp_path / "small", np.arange(100), np.arange(50), {"vocab_size": 10})
    with pytest.raises(UserError, match="token id 99 >= vocab_size 10"):
        tokenfiles.open_prepared(tmp_path / "small")


def test_open_prepared_rejects_broken_dirs(tmp_path: Path, char_dir: Path):
    with pytest.raises(UserError, match="not found"):
        tokenfiles.open_prepared(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="neither meta.json nor"):
        tokenfiles.open_prepared(tmp_path / "empty")
    broken = tmp_path / "broken"
    shutil.copytree(char_dir, broken)
    with open(broken / "val.bin", "ab") as fh:
        fh.write(b"\x00")  # odd byte count
    with pytest.raises(UserError, match="whole number of uint16"):
        tokenfiles.open_prepared(broken)
    with open(broken / "val.bin", "ab") as fh:
        fh.write(b"\x00")  # one token too many
    with pytest.raises(UserError, match="meta.json says"):
        tokenfiles.open_prepared(broken)
    shutil.rmtree(broken)
    shutil.copytree(char_dir, broken)
    tok_json = (broken / "tokenizer.json").read_text()
    assert '"a": 39' in tok_json
    (broken / "tokenizer.json").write_text(tok_json.replace('"a": 39', '"a": 40'))
    with pytest.raises(UserError, match="sha256"):
        tokenfiles.open_prepared(broken)


# --------------------------------------------------------------------------- cache


def test_prepared_dir_for_builds_once_into_the_cache(tmp_path: Path, corpora_dir: Path, monkeypatch):
    cfg = DataConfig(corpus="tinyshakespeare", tokenizer="char")
    p = prepare.prepared_dir_for(cfg, corpora_dir, tmp_path)
    assert p == tmp_path / "prepared-2" / "tinyshakespeare-char-86c4e6aa"
    stamp = (p / "meta.json").stat().st_mtime_ns
    monkeypatch.setenv(corpora.DATA_ENV, str(corpora_dir))
    monkeypatch.setenv(prepare.CACHE_ENV, str(tmp_path))
    assert prepare.prepared_dir_for(cfg) == p and (p / "meta.json").stat().st_mtime_ns == stamp
    assert [q.name for q in (tmp_path / "prepared-2").iterdir()] == [p.name]  # no temp dirs left
    assert tokenfiles.open_prepared(p).vocab_size == TS_CHARS
    assert prepare.cache_key("tinyshakespeare", "bpe", 2000, "86c4e6aa" + "0" * 56) == "tinyshakespeare-bpe-2000-86c4e6aa"
    # A prepared path must match the config's tokenizer, or the run record would mislabel it.
    with pytest.raises(UserError, match="data.tokenizer=char"):
        prepare.prepared_dir_for(DataConfig(corpus=str(p), tokenizer="bpe"))
    with pytest.raises(UserError, match="neither a known corpus"):
        prepare.prepared_dir_for(DataConfig(corpus=str(tmp_path / "nothing")))
    monkeypatch.delenv(corpora.DATA_ENV)  # the bundled copy: same bytes, so the same cache entry
    assert prepare.prepared_dir_for(cfg) == p and (p / "meta.json").stat().st_mtime_ns == stamp
    with pytest.raises(UserError, match="DEPTHWIDTH_DATA"):
        prepare.prepared_dir_for(DataConfig(corpus="kjv", tokenizer="char"))


def test_publish_keeps_the_first_winner(tmp_path: Path):
    final = tmp_path / "final"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text(name)
    assert prepare._publish(tmp_path / "a", final) == final
    assert prepare._publish(tmp_path / "b", final) == final  # lost the race: uses the winner's dir
    assert (final / "meta.json").read_text() == "a" and not (tmp_path / "b").exists()


def test_concurrent_workers_share_one_prepared_dir(tmp_path: Path, ts_text: str):
    src = tmp_path / "snippet.txt"
    src.write_text(ts_text[:60_000])
    cfg = DataConfig(corpus=str(src), tokenizer="char")
    barrier, results, errors = threading.Barrier(4), [], []

    def worker():
        barrier.wait()
        try:
            results.append(prepare.prepared_dir_for(cfg, cache_dir=tmp_path / "cache"))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    assert [q.name for q in (tmp_path / "cache" / "prepared-2").iterdir()] == [results[0].name]
    assert tokenfiles.open_prepared(results[0]).meta["tokens"]["total"] == 60_000


# --------------------------------------------------------------------------- batches


def test_get_batch_is_a_pure_function_of_seed_and_step(tmp_path: Path):
    np.arange(1000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    tokens = np.memmap(tmp_path / "t.bin", dtype=np.uint16, mode="r")
    x, y = tokenfiles.get_batch(tokens, seed=0, step=5, batch_size=4, seq_len=16)
    assert x.shape == y.shape == (4, 16) and x.dtype == y.dtype == np.int32
    # tokens[i] = i, so each row counts up by one and the target is the input plus one.
    assert np.array_equal(x, x[:, :1] + np.arange(16)) and np.array_equal(y, x + 1)
    assert np.array_equal(x[:, 1:], y[:, :-1])
    # The documented contract: row offsets from default_rng([seed, step]) in [0, n - T).
    assert np.array_equal(x[:, 0], np.random.default_rng([0, 5]).integers(0, 1000 - 16, size=4))
    x2, y2 = tokenfiles.get_batch(tokens, 0, 5, 4, 16)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    assert not np.array_equal(x, tokenfiles.get_batch(tokens, 0, 6, 4, 16)[0])
    assert not np.array_equal(x, tokenfiles.get_batch(tokens, 1, 5, 4, 16)[0])
    # Exactly T + 1 tokens: the only window is the whole array.
    x1, y1 = tokenfiles.get_batch(np.arange(17, dtype=np.uint16), 3, 9, 2, 16)
    assert x1.tolist() == [list(range(16))] * 2 and y1.tolist() == [list(range(1, 17))] * 2
    with pytest.raises(UserError, match="too short"):
        tokenfiles.get_batch(np.arange(16, dtype=np.uint16), 0, 0, 2, 16)
    with pytest.raises(UserError):
        tokenfiles.get_batch(tokens, -1, 0, 2, 16)


def test_spread_heldout_blocks_sample_the_whole_text(tmp_path: Path, corpora_dir: Path):
    text = (corpora_dir / "tinyshakespeare.txt").read_text()
    ranges = splits.spread_ranges(text)
    blocks = sorted(r for s in splits.SPLITS for r in ranges[s])
    # the blocks tile the text exactly, in order, without gaps or overlaps
    assert blocks[0][0] == 0 and blocks[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    # 1 val and 1 test block in every 20: block 9 and block 19 of each group
    order = {r: i for i, r in enumerate(blocks)}
    assert [order[r] % 20 for r in ranges["val"]] == [9] * len(ranges["val"])
    assert [order[r] % 20 for r in ranges["test"]] == [19] * len(ranges["test"])
    # 1,115,394 characters in ~8,192-character blocks: 136 blocks, 7 val and 6 test (by hand:
    # 136 = 6*20 + 16, so the last group reaches block 9 but not 19)
    assert len(blocks) == 136 and len(ranges["val"]) == 7 and len(ranges["test"]) == 6
    # held-out text comes from the whole play collection, not its end
    assert ranges["test"][0][1] < len(text) / 5 and ranges["val"][0][1] < len(text) / 5
    meta = prepare.prepare(text, tmp_path / "p", tokenizer="char", heldout="spread")
    assert meta["split"]["heldout"] == "spread"
    assert meta["tokens"]["val"] == sum(b - a for a, b in ranges["val"])  # char level: 1 token per char
    trimmed = prepare.meta_for_record(meta)
    assert "char_ranges" not in trimmed["split"] and trimmed["split"]["n_blocks"] == {"train": 123, "val": 7, "test": 6}
    assert prepare.meta_for_record({"split": {"heldout": "end"}}) == {"split": {"heldout": "end"}}
    with pytest.raises(UserError, match="fewer than 20 blocks"):
        splits.spread_ranges(text[:50_000])


def test_spread_is_its_own_cache_entry_and_run_identity(tmp_path: Path, corpora_dir: Path):
    from depthwidth.config import RunConfig

    end = DataConfig(corpus="tinyshakespeare", tokenizer="char")
    spread = dataclasses.replace(end, heldout="spread")
    a = prepare.prepared_dir_for(end, corpora_dir, cache_dir=tmp_path)
    b = prepare.prepared_dir_for(spread, corpora_dir, cache_dir=tmp_path)
    assert a != b and b.name.endswith("-spread")
    # the default ('end') is left out of the run id, so ids made before the field existed hold
    assert "heldout" not in RunConfig(data=end).identity()["data"]
    assert RunConfig(data=end).run_id() != RunConfig(data=spread).run_id()
    with pytest.raises(UserError, match="'end' held-out sets but data.heldout='spread'"):
        prepare.prepared_dir_for(dataclasses.replace(spread, corpus=str(a)), corpora_dir)


# --------------------------------------------------------------------------- content identity


def test_token_files_are_checked_against_their_sha256_on_use(tmp_path: Path, char_dir: Path):
    # Issue 10 item 4: a cached train.bin overwritten with other in-range ids trained under the
    # real run's id. meta.json records each token file's sha256; opening verifies it.
    meta = tokenfiles.open_prepared(char_dir).meta
    assert set(meta["files_sha256"]) == {"train.bin", "val.bin", "test.bin"}
    broken = tmp_path / "swapped"
    shutil.copytree(char_dir, broken)
    ids = np.fromfile(broken / "train.bin", dtype=np.uint16)
    ids[::-1].tofile(broken / "train.bin")  # same size, same ids, other order
    with pytest.raises(UserError, match=r"train.bin does not match the sha256"):
        tokenfiles.open_prepared(broken)


def test_a_corpus_given_as_a_path_is_identified_by_its_content(tmp_path: Path, ts_text: str):
    # Issue 10 item 3: editing the file kept the run id, so the old record counted as finished.
    from depthwidth.config import RunConfig

    f = tmp_path / "web.txt"
    f.write_text(ts_text[:50_000])
    cfg = RunConfig(data=DataConfig(corpus=str(f), tokenizer="char"))
    pinned = prepare.pin_corpus(cfg)
    assert pinned.data.corpus_sha256 == corpora.sha256_file(f)
    assert prepare.pin_corpus(pinned) == pinned  # pinning twice changes nothing
    f.write_text(ts_text[:50_000].replace("the", "teh"))
    repinned = prepare.pin_corpus(cfg)
    assert repinned.run_id() != pinned.run_id()
    with pytest.raises(UserError, match="changed"):  # a config pinned to the old content
        prepare.pin_corpus(pinned)
    # A directory: the sha256 of its files' sha256s; editing a token file changes it.
    d = tmp_path / "nano"
    d.mkdir()
    np.arange(100, dtype=np.uint16).tofile(d / "train.bin")
    np.arange(50, dtype=np.uint16).tofile(d / "val.bin")
    dcfg = RunConfig(data=DataConfig(corpus=str(d), tokenizer="char"))
    a = prepare.pin_corpus(dcfg).run_id()
    np.arange(1, 101, dtype=np.uint16).tofile(d / "train.bin")
    assert prepare.pin_corpus(dcfg).run_id() != a
    # A known corpus keeps its id: its sha256 is fixed in data/corpora.py.
    known = RunConfig(data=DataConfig(corpus="tinyshakespeare", tokenizer="char"))
    assert prepare.pin_corpus(known) == known
