"""The known corpora: name, file, size, sha256, licence and where each comes from.

Source of every field: each corpus's canonical source (its URL, or the command that makes it,
below); docs/guide/data.md. Tiny shakespeare (1.1 MB, public domain) ships inside the package
(``depthwidth/data/bundled``, with its licence note), so training and the tests need no outside
folder. The other four live outside the repository, in ``--data-dir`` or ``$DEPTHWIDTH_DATA``,
which only adds corpora: a file there takes precedence over the bundled copy. Every file is
checked against its sha256 before use. Only tiny shakespeare has a downloadable canonical URL;
the other four are produced by a command from a Debian/R/NLTK package, which the error messages
quote.

Light module (hashlib, urllib): safe to import from the CLI.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.records import unique_sibling

DATA_ENV = "DEPTHWIDTH_DATA"
# Corpora whose file ships in the package (small and public domain): found without a data dir.
BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
BUNDLED = frozenset({"tinyshakespeare"})


@dataclass(frozen=True)
class Corpus:
    """One known corpus. ``n_bytes``: size of the UTF-8 file (bytes); ``url``: None if not downloadable."""

    name: str
    file: str
    n_bytes: int
    sha256: str
    licence: str
    url: str | None
    source: str
    description: str

    def where_from(self) -> str:
        return self.url or self.source


CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in (
        Corpus(
            "tinyshakespeare", "tinyshakespeare.txt", 1_115_394,
            "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
            "public domain",
            "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
            "char-rnn / nanoGPT 'tiny shakespeare'",
            "~40K lines of Shakespeare's plays",
        ),
        Corpus(
            "kjv", "kjv.txt", 4_137_850,
            "b5c4940bcfeee072c0935b5200d0f9d88a00a0199cb0961d16133458fcdfae5d",
            "public domain", None,
            "Debian package bible-kjv: bible -f 'gen1:1-rev22:21' </dev/null "
            "| sed -E 's/^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ //'",
            "King James Bible, one verse per line, no verse numbers",
        ),
        Corpus(
            "austen", "austen.txt", 4_025_039,
            "32432b75ad045648fc586b923f9d38cddee6ecfa14cfe8968b9a028c36a19c23",
            "public domain", None,
            "R package janeaustenr (Debian r-cran-janeaustenr): "
            "Rscript -e 'writeLines(janeaustenr::austen_books()$text)'",
            "Jane Austen's six novels, Gutenberg line wrapping, no Gutenberg header",
        ),
        Corpus(
            "us_speeches", "us_speeches.txt", 2_881_465,
            "fcee69e108eff00285262cfe39ceb18011d0a74b07f0dcd5a17de6186359f031",
            "public domain", None,
            "NLTK data corpora/inaugural + corpora/state_union",
            "US inaugural addresses 1789-2009 and State of the Union addresses 1945-2006",
        ),
        Corpus(
            "python_docs", "python_docs.txt", 11_048_662,
            "d7d917b10d010d467576bc0c48e5a3c900265f42a28ee229fcce3f89cbb0b596",
            "PSF licence", None,
            "Debian package python3.11-doc: /usr/share/doc/python3.11/html/_sources/**/*.txt, "
            "497 files joined in sorted order",
            "reStructuredText sources of the Python 3.11 documentation",
        ),
    )
}


def get(name: str) -> Corpus:
    """The registry entry for ``name``; UserError listing the known names if there is none."""
    try:
        return CORPORA[name]
    except KeyError:
        raise UserError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)} (or pass a path)") from None


def data_dir(explicit: str | Path | None = None) -> Path:
    """The corpora directory: ``explicit``, else ``$DEPTHWIDTH_DATA``; UserError if neither is set."""
    d = explicit if explicit not in (None, "") else os.environ.get(DATA_ENV)
    if not d:
        raise UserError(f"no corpora directory: pass --data-dir or set ${DATA_ENV} to the folder holding the corpus files")
    return Path(os.path.expanduser(d))


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(corpus: Corpus, path: Path) -> None:
    """Raise UserError (one line) if the file at ``path`` does not have the corpus's sha256."""
    got = sha256_file(path)
    if got != corpus.sha256:
        raise UserError(
            f"checksum mismatch for {path}: sha256 {got[:16]}..., expected {corpus.sha256[:16]}... "
            f"for {corpus.name}; replace it with the file from {corpus.where_from()}"
        )


def bundled_path(name: str) -> Path | None:
    """The copy of corpus ``name`` that ships with the package, or None if it has none."""
    return BUNDLED_DIR / CORPORA[name].file if name in BUNDLED else None


def find(name: str, directory: str | Path | None = None) -> Path | None:
    """Where corpus ``name`` would be read from, unverified: ``<data dir>/<file>`` if that file
    exists (data dir: ``directory``, else ``$DEPTHWIDTH_DATA``), else the bundled copy, else None.
    UserError if the name is unknown."""
    corpus = get(name)
    d = directory if directory not in (None, "") else os.environ.get(DATA_ENV)
    if d:
        path = Path(os.path.expanduser(d)) / corpus.file
        if path.is_file():
            return path
    return bundled_path(name)


def locate(name: str, directory: str | Path | None = None, *, download: bool = False) -> Path:
    """Path of the verified corpus file: ``<data dir>/<file>`` if it exists, else the copy that
    ships with the package (tiny shakespeare only).

    Data dir: ``directory``, else ``$DEPTHWIDTH_DATA``. With ``download=True`` a corpus found in
    neither place is fetched from its canonical URL into the data dir first. Raises UserError if the name is
    unknown, the corpus neither ships nor is in a data dir (saying where to put it and where it
    comes from), the download fails, or the sha256 does not match.
    """
    corpus = get(name)
    path = find(name, directory)
    if path is None and download:
        return fetch(corpus, data_dir(directory))
    if path is None:
        where = data_dir(directory)  # UserError when no data dir is set: say how to set one
        how = f"download it from {corpus.url} (or run `depthwidth data prepare --download` or `sweep --download`)" if corpus.url else f"make it with: {corpus.source}"
        raise UserError(
            f"corpus {name!r} not found: put {corpus.file} ({corpus.n_bytes:,} bytes, "
            f"sha256 {corpus.sha256[:16]}...) in {where}; {how}"
        )
    verify(corpus, path)
    return path


def require(names, directory: str | Path | None = None) -> None:
    """:func:`locate` every known corpus among ``names`` (a path to a text file is left to its
    reader): UserError (one line) for the first that is missing or corrupt. A sweep calls it
    before it makes any run directory."""
    for name in sorted(names):
        if name in CORPORA:
            locate(name, directory)


def fetch(corpus: Corpus, directory: str | Path, *, timeout_s: float = 60.0) -> Path:
    """Download ``corpus.url`` into ``directory/corpus.file``, verify its sha256, rename into place.

    Raises UserError if the corpus has no URL, on any network or file error, or if the
    downloaded bytes do not have the expected sha256 (nothing is left behind then).
    """
    if not corpus.url:
        raise UserError(f"corpus {corpus.name!r} has no download URL; make it with: {corpus.source}")
    directory = Path(directory)
    tmp = unique_sibling(directory / corpus.file)  # opened with "xb": the file follows the umask
    try:
        directory.mkdir(parents=True, exist_ok=True)
        out = open(tmp, "xb")
    except OSError as e:
        raise UserError(f"cannot write to data directory {directory}: {e.strerror or e}") from None
    try:
        with out, urllib.request.urlopen(corpus.url, timeout=timeout_s) as resp:
            for block in iter(lambda: resp.read(1 << 20), b""):
                out.write(block)
        got = sha256_file(tmp)
        if got != corpus.sha256:
            raise UserError(
                f"downloaded {corpus.url} but its sha256 is {got[:16]}..., expected {corpus.sha256[:16]}...; not saved"
            )
        dest = directory / corpus.file
        os.replace(tmp, dest)
        return dest
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
        raise UserError(f"could not download {corpus.url}: {reason}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
