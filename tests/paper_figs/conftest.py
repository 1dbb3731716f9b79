"""Shared fixtures: a small synthetic sweep (fits.synthetic, known law) and its fit file; the
comparison of a drawn figure with the committed one."""

import hashlib
import json
import re
import zlib
from pathlib import Path

import pytest

_STREAM = re.compile(rb"<<((?:(?!>>\s*stream).)*?)>>\s*stream\r?\n(.*?)\r?\nendstream", re.S)
_XREF = re.compile(rb"^\d{10} \d{5} [nf] *\r?$|^startxref\r?\n\d+", re.M)


def pdf_producer(data: bytes) -> bytes | None:
    """A PDF's Producer: the plotting stack that drew it (paper_figs.style.producer)."""
    m = re.search(rb"/Producer \((.*?)\)", data)
    return m.group(1) if m else None


def pdf_without_font_programs(data: bytes) -> tuple[bytes, list[bytes]]:
    """A PDF as (its objects with every stream, length, cross-reference offset and the Producer cut out,
    [every stream but the embedded font programs (the ones with /Length1), decompressed]): what
    stays the same when only fontTools' subset of the embedded font changes."""
    streams = []

    def cut(m):
        if b"/Length1" not in m.group(1):
            streams.append(zlib.decompress(m.group(2)) if b"FlateDecode" in m.group(1) else m.group(2))
        return b"<<" + re.sub(rb"/Length1? \d+", b"", m.group(1)) + b">> stream"

    return re.sub(rb" ?/Producer \(.*?\)", b"", _XREF.sub(b"", _STREAM.sub(cut, data))), streams


@pytest.fixture(scope="session")
def assert_same_figure():
    """``check(drawn, committed)``: a PNG has the committed bytes; so has a PDF drawn by the
    plotting stack its Producer names (the locked one, uv.lock). A PDF drawn by another
    matplotlib/fontTools must agree in everything but the embedded font program, whose subset
    fontTools cuts differently from version to version (docs/guide/figures.md)."""

    def check(drawn: Path, committed: Path) -> None:
        a, b = drawn.read_bytes(), committed.read_bytes()
        if drawn.suffix != ".pdf" or pdf_producer(a) == pdf_producer(b):
            assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest(), committed
        else:
            assert pdf_without_font_programs(a) == pdf_without_font_programs(b), committed

    return check


@pytest.fixture(scope="package")
def sweep(tmp_path_factory):
    """Synthetic records for depths 4, 8, 16 (3 seeds, 4 widths a decade) and a fit file made
    from them with 200 bootstrap replicates. Returns (results_dir, fit_path, fit dict)."""
    from depthwidth.fits.lawfit import build_fit
    from depthwidth.fits.synthetic import write_synthetic
    from depthwidth.fits.table import load_table

    root = tmp_path_factory.mktemp("sweep")
    results = root / "results"
    write_synthetic(results, depths=(4, 8, 16), n_seeds=3, per_decade=4)
    fit = build_fit(load_table(results), bootstrap=200)
    fit_path = root / "fit.json"
    fit_path.write_text(json.dumps(fit))
    return results, fit_path, fit
