"""`depthwidth data prepare` / `depthwidth data info`: real corpora, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from depthwidth.cli import main
from depthwidth.data import prepare, tokenfiles


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_prepare_char_json(capsys, tmp_path: Path, corpora_dir: Path):
    out = tmp_path / "ts-char"
    rc, stdout, err = _run(capsys, ["data", "prepare", "--corpus", "tinyshakespeare", "--tokenizer", "char",
                                    "--out", str(out), "--data-dir", str(corpora_dir), "--json"])
    assert rc == 0, err
    obj = json.loads(stdout)  # one JSON object
    # SOURCES.md: 65 distinct characters, 1,115,394 characters in all.
    assert obj["vocab_size"] == 65 and obj["tokens"]["total"] == 1_115_394
    assert sorted(p.name for p in out.iterdir()) == sorted(prepare.OUTPUT_FILES)
    assert json.loads((out / "meta.json").read_text())["tokenizer"]["sha256"] == obj["tokenizer"]["sha256"]

    # Refuses to overwrite, then does with --force.
    argv = ["data", "prepare", "--corpus", "tinyshakespeare", "--tokenizer", "char", "--out", str(out),
            "--data-dir", str(corpora_dir)]
    rc, _, err = _run(capsys, argv)
    assert rc == 2 and "--force" in err
    rc, stdout, _ = _run(capsys, argv + ["--force"])
    assert rc == 0 and "vocab_size 65" in stdout and "1,115,394" in stdout

    rc, stdout, _ = _run(capsys, ["data", "info", str(out), "--json"])
    assert rc == 0 and json.loads(stdout)["tokens"]["train"] == tokenfiles.open_prepared(out).train.size


def test_prepare_bpe_from_text_file(capsys, tmp_path: Path, corpora_dir: Path, monkeypatch):
    src = tmp_path / "snippet.txt"
    src.write_bytes((corpora_dir / "tinyshakespeare.txt").read_bytes()[:200_000])
    monkeypatch.delenv("DEPTHWIDTH_DATA", raising=False)  # --text needs no data dir
    out = tmp_path / "snip"
    rc, stdout, err = _run(capsys, ["data", "prepare", "--text", str(src), "--vocab-size", "500",
                                    "--split", "0.8,0.1,0.1", "--out", str(out), "--json"])
    assert rc == 0, err
    meta = json.loads(stdout)
    assert meta["tokenizer"]["kind"] == "bpe" and meta["vocab_size"] == 500
    assert meta["split"]["fractions"] == [0.8, 0.1, 0.1] and meta["source"]["name"] == "snippet"
    prep = tokenfiles.open_prepared(out)
    assert prep.decode(prep.val) == src.read_text()[slice(*meta["split"]["char_ranges"]["val"])]


def test_info_lists_and_verifies_corpora(capsys, large_corpora_dir: Path):
    corpora_dir = large_corpora_dir
    rc, stdout, _ = _run(capsys, ["data", "info", "--data-dir", str(corpora_dir), "--json"])
    assert rc == 0
    rows = json.loads(stdout)["corpora"]
    assert [r["name"] for r in rows] == ["tinyshakespeare", "kjv", "austen", "us_speeches", "python_docs"]
    assert all(r["status"] == "ok (sha256 verified)" for r in rows)
    rc, stdout, _ = _run(capsys, ["data", "info", "tinyshakespeare", "--data-dir", str(corpora_dir), "--json"])
    assert rc == 0 and json.loads(stdout)["status"] == "ok (sha256 verified)"


def test_info_without_a_data_dir_finds_the_bundled_corpus(capsys, monkeypatch):
    # Issue 39: tiny shakespeare ships with the package; the others need $DEPTHWIDTH_DATA.
    monkeypatch.delenv("DEPTHWIDTH_DATA", raising=False)
    rc, stdout, _ = _run(capsys, ["data", "info", "--json"])
    rows = {r["name"]: r for r in json.loads(stdout)["corpora"]}
    assert rc == 0 and rows["tinyshakespeare"]["status"] == "ok (sha256 verified) (ships with depthwidth)"
    assert rows["tinyshakespeare"]["path"].endswith("depthwidth/data/bundled/tinyshakespeare.txt")
    assert rows["kjv"]["status"] == "data dir not set (--data-dir or $DEPTHWIDTH_DATA)" and "path" not in rows["kjv"]


def test_info_list_flags_a_corpus_with_a_wrong_checksum(capsys, tmp_path: Path, corpora_dir: Path):
    # Issue 10 item 7: the listing said "present" for a file whose sha256 is wrong.
    text = (corpora_dir / "tinyshakespeare.txt").read_bytes()
    (tmp_path / "tinyshakespeare.txt").write_bytes(text.replace(b"First Citizen", b"Second Citizen", 1))
    rc, stdout, _ = _run(capsys, ["data", "info", "--data-dir", str(tmp_path), "--json"])
    status = {r["name"]: r["status"] for r in json.loads(stdout)["corpora"]}
    assert status["tinyshakespeare"] == "CHECKSUM MISMATCH" and status["kjv"] == "missing"
    assert rc == 1
    rc, stdout, _ = _run(capsys, ["data", "info", "tinyshakespeare", "--data-dir", str(tmp_path), "--json"])
    assert rc == 1 and json.loads(stdout)["status"] == "CHECKSUM MISMATCH"


def _bad_cases(tmp: Path, corpora_dir: Path) -> list[tuple[list[str], str]]:
    out = ["--out", str(tmp / "o")]
    dd = ["--data-dir", str(corpora_dir)]
    return [
        (["data", "prepare", "--corpus", "nope", *out, *dd], "unknown corpus"),
        (["data", "prepare", "--corpus", "tinyshakespeare", "--split", "0.9,0.2,0.1", *out, *dd], "sum to 1"),
        (["data", "prepare", "--corpus", "tinyshakespeare", "--split", "a,b,c", *out, *dd], "split"),
        (["data", "prepare", "--corpus", "tinyshakespeare", "--vocab-size", "100", *out, *dd], "257"),
        (["data", "prepare", "--corpus", "tinyshakespeare", "--vocab-size", "lots", *out, *dd], "--vocab-size"),
        (["data", "prepare", "--corpus", "tinyshakespeare", "--tokenizer", "word", *out, *dd], "invalid choice"),
        (["data", "prepare", "--corpus", "tinyshakespeare", *dd], "--out"),
        (["data", "prepare", "--corpus", "tinyshakespeare", "--text", "x.txt", *out, *dd], "not allowed"),
        (["data", "prepare", "--text", str(tmp / "absent.txt"), *out], "not found"),
        (["data", "prepare", "--text", str(tmp / "latin1.txt"), *out], "not UTF-8"),
        # tiny shakespeare ships with the package, so an empty data dir is missing only the others
        (["data", "prepare", "--corpus", "kjv", *out, "--data-dir", str(tmp / "empty")], "put kjv.txt"),
        (["data", "prepare", "--corpus", "tinyshakespeare", *out, "--data-dir", str(tmp / "corrupt")],
         "checksum mismatch"),
        (["data", "info", str(tmp / "absent")], "neither a known corpus"),
        (["data"], ""),
    ]


def test_bad_input_exits_2_with_one_line(capsys, tmp_path: Path, corpora_dir: Path):
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "corrupt").mkdir()
    raw = bytearray((corpora_dir / "tinyshakespeare.txt").read_bytes())
    raw[-2] ^= 1
    (tmp_path / "corrupt" / "tinyshakespeare.txt").write_bytes(bytes(raw))
    for argv, needle in _bad_cases(tmp_path, corpora_dir):
        rc, _, err = _run(capsys, argv)
        assert rc == 2, argv
        if needle:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("depthwidth: error:") and needle in lines[0], (argv, err)
    assert not (tmp_path / "o").exists()  # nothing written on failure


def test_download_of_a_corpus_without_url_says_how_to_make_it(capsys, tmp_path: Path):
    # kjv has no canonical URL (SOURCES.md gives a command): --download quotes the command.
    rc, _, err = _run(capsys, ["data", "prepare", "--corpus", "kjv", "--download", "--out", str(tmp_path / "o"),
                               "--data-dir", str(tmp_path)])
    assert rc == 2 and "no download URL" in err and "bible" in err
