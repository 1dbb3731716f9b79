"""Where results live: a local path, or any fsspec URL (``gs://``, ``s3://``, ``memory://``, ...).

The bottom layer of the package. A results directory is opened with :func:`open_results`, which
returns the one object every reader and writer of it goes through (records, claims, logs,
checkpoints, the results table): :class:`ResultsStore` for a local or mounted path,
:class:`UrlResultsStore` for a URL. The store knows the directory's layout (:data:`RUNS` and
the file names below) and the operations whose implementation differs between the two: an
atomic write, an exclusive create, reading a claim, listing runs, and appending to a log.
The files derived from the records (a fit, its estimator table, a summary, a figure) are written
through a store as well: the store of the directory they go to (:func:`open_results`, or
:func:`store_of_file` for one named file such as ``fit --out``), whose
:meth:`~ResultsStore.write_if_changed` and :meth:`~ResultsStore.write_json_if_changed` leave a
file that already holds the same result untouched (a regenerated committed file keeps its bytes
and its mtime); :func:`read_bytes` / :func:`read_text` read one named file the same way. Under
the stores, :func:`path` turns a location into a path object: a local path stays a
:class:`pathlib.Path`; a URL becomes a :class:`upath.UPath` (universal_pathlib, the pathlib API
over fsspec), so the same ``/``, ``exists``, ``read_text``, ``glob`` and ``open`` work on
object storage. Orbax checkpoints and tracker files, which their libraries write themselves, are
the exception: the store only says where they go (:meth:`ResultsStore.checkpoint_dir`,
:func:`scratch_dir`).

Three things an object store does not have, and what this package does instead:

* **Rename.** A record is written with one whole-object write (one PUT on GCS/S3, which is
  atomic: readers see the old object or the new one, never half of it), not temp file + rename.
* **Append.** ``log.jsonl`` on a URL is rewritten whole at every log window
  (:meth:`UrlResultsStore.open_log`); it is a few kB per run.
* **A POSIX disk for libraries that need one.** Orbax checkpoints go to the run's own ``ckpt/``
  when orbax can write the URL itself (:data:`ORBAX_SCHEMES`: ``gs://``, through etils.epath and
  tensorstore), so a run that resumes on another machine finds them; for ``file://`` they go
  beside the record as for a plain path.
  For other schemes (``s3://``, ``memory://``, ...) checkpoints, and for every URL the W&B and
  TensorBoard files, go to :func:`scratch_dir`, a local mirror of the URL: resume then works on
  the same machine only. ``s3://`` is among them because orbax 0.12 cannot checkpoint there: it
  normalises the URL to ``s3:/...`` (repairing only ``gs:/``), refuses it as a relative path
  (having made a ``./s3:`` folder in the working directory), and tensorstore's s3 driver ignores
  ``AWS_ENDPOINT_URL`` (measured against moto's server, issue 25).

Endpoints and credentials come from the environment of the process, never from this
repository: for GCS, Application Default Credentials (``gcloud auth application-default
login`` or a VM's service account; gcsfs and tensorstore both read them); for S3, botocore's
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` or ``~/.aws``). To use another endpoint than the
cloud's (an emulator, an on-premises store) set one variable per store, :data:`ENDPOINT_ENV`:
``STORAGE_EMULATOR_HOST`` (gs://) or ``AWS_ENDPOINT_URL`` (s3://). :func:`client_env` is the one
place that derives from it what each client library needs (gcsfs and botocore/s3fs read those
two themselves; tensorstore, which writes orbax's gs:// checkpoints, needs
``TENSORSTORE_GCS_HTTP_URL``; gcsfs's bucket-type probe, a gRPC call no emulator answers, is
turned off); :func:`path` applies it to this process before opening a URL, and a Ray sweep
sends it to its tasks. ``memory://`` lives in one process: it is for tests and for trying the
pipeline, and is refused where work would leave the process (:func:`require_shared`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError

ORBAX_SCHEMES = ("gs",)  # URLs orbax checkpoints to by itself (etils.epath + tensorstore); module doc: not s3
# the one variable per store that names a non-default endpoint (module doc); read by gcsfs / botocore
ENDPOINT_ENV = {"gs": "STORAGE_EMULATOR_HOST", "s3": "AWS_ENDPOINT_URL"}
PROCESS_LOCAL_SCHEMES = ("memory",)  # fsspec stores that only the current process sees
SCRATCH_ENV = "DEPTHWIDTH_SCRATCH"

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def scheme(p: Any) -> str | None:
    """The URL scheme of ``p`` (``"gs"`` for ``gs://b/x``), or None for a local path."""
    m = _URL.match(str(p))
    return m.group(1).lower() if m else None


def is_url(p: Any) -> bool:
    """Whether ``p`` names a location through fsspec (``scheme://...``) rather than a local path."""
    return scheme(p) is not None


def client_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the object-store clients need, from :data:`ENDPOINT_ENV` (module doc):
    the endpoint variables that are set (``env``, default ``os.environ``) and what each client
    needs besides them, a value already in ``env`` winning. Empty when no endpoint is set."""
    env = os.environ if env is None else env
    out = {name: env[name] for name in ENDPOINT_ENV.values() if env.get(name)}
    gcs = out.get(ENDPOINT_ENV["gs"])
    if gcs:
        url = gcs if "://" in gcs else f"http://{gcs}"  # gcsfs takes host:port too; tensorstore a URL
        out["TENSORSTORE_GCS_HTTP_URL"] = env.get("TENSORSTORE_GCS_HTTP_URL") or url
        # gcsfs >= 2025.11 asks GCS's storage-control gRPC API for the bucket type first: no
        # emulator answers it, and every call then logs a warning (read at gcsfs's import)
        out["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = env.get("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT") or "false"
    return out


def configure_clients() -> None:
    """Put :func:`client_env` into this process's environment (before gcsfs, s3fs or orbax
    open a URL; a client already imported keeps what it read at import)."""
    for k, v in client_env().items():
        os.environ.setdefault(k, v)


def path(p: Any):
    """``p`` as a path object: :class:`pathlib.Path` for a local path (or a path object already),
    :class:`upath.UPath` for a URL (its scheme lower-cased). Raises UserError for a URL whose
    fsspec backend is missing (e.g. ``gs://`` without gcsfs: ``pip install 'depthwidth[gcs]'``)
    or unknown, a ``file://`` URL without an absolute path, and a URL with a ``..`` part."""
    if not isinstance(p, str):
        if isinstance(p, os.PathLike):
            return p if isinstance(p, Path) or hasattr(p, "fs") else Path(p)
        p = str(p)
    if not is_url(p):
        return Path(p)
    sch = scheme(p)
    p = sch + p[len(sch):]  # FILE:// -> file://: fsspec's protocols are lower case
    rest = p[len(sch) + 3:]
    if sch == "file" and not rest.startswith("/"):
        raise UserError(f"{p}: a file:// URL needs an absolute path (file:///abs/path; "
                        f"file://{rest} names host {rest.split('/')[0]!r})")
    if ".." in rest.split("/"):
        raise UserError(f"{p}: '..' in a URL is not resolved by object stores; give the location itself")
    # optional dependency: upath loaded only where used
    from upath import UPath

    configure_clients()
    try:
        q = UPath(p)
        q.fs  # noqa: B018 -- makes the fsspec filesystem now: a missing backend is one line here
    except (ImportError, ValueError) as e:
        extra = {"gs": " (pip install 'depthwidth[gcs]')", "s3": " (pip install 'depthwidth[s3]')"}.get(scheme(p), "")
        raise UserError(f"cannot open {p}: {e}{extra}") from None
    return q


def require_shared(p: Any, what: str) -> None:
    """Raise UserError when ``p`` is a URL only this process sees (``memory://``) and ``what``
    (e.g. "--jobs 2") would hand it to other processes, which would each see an empty store."""
    if scheme(p) in PROCESS_LOCAL_SCHEMES:
        raise UserError(f"{p}: a {scheme(p)}:// store lives inside one process, and {what} runs other "
                        "processes; use a local path or a shared URL (gs://, s3://, file://)")


def scratch_dir(p: Any) -> Path:
    """The local mirror of URL ``p`` for files that need a POSIX disk (module doc):
    ``$DEPTHWIDTH_SCRATCH/<scheme>/<rest of the URL>``, by default under the system temp
    directory. A local ``p`` is its own mirror (returned as a Path)."""
    s = str(p)
    sch = scheme(s)
    if sch is None:
        return Path(s)
    root = Path(os.environ.get(SCRATCH_ENV) or Path(tempfile.gettempdir()) / "depthwidth-scratch")
    rest = [part for part in s[len(sch) + 3:].split("/") if part not in ("", ".", "..")]
    return root.joinpath(sch, *rest)


def checkpoint_dir(run_dir: Any) -> str | Path:
    """Where orbax keeps a run's checkpoints: ``RUN_DIR/ckpt`` (absolute) for a local run
    directory (also one given as a ``file://`` URL) or an :data:`ORBAX_SCHEMES` URL (a string,
    as orbax takes it); the ``ckpt`` of the :func:`scratch_dir` for any other URL."""
    s = str(run_dir).rstrip("/")
    sch = scheme(s)
    if sch is None:
        return Path(s, "ckpt").absolute()
    if sch == "file":  # a local path spelled as a URL: beside the record, like a plain path
        return Path(path(s).path, "ckpt")
    if sch in ORBAX_SCHEMES:
        return f"{s}/ckpt"
    return scratch_dir(s) / "ckpt"


def local_checkpoint_note(run_dir: Any) -> str | None:
    """One line saying where a URL run's checkpoints stay when they cannot go beside its record
    (:func:`checkpoint_dir` in the local mirror: resume works on this machine only), or None
    when they go beside the record."""
    sch = scheme(run_dir)
    if sch in (None, "file", *ORBAX_SCHEMES):
        return None
    why = "orbax cannot write s3://" if sch == "s3" else f"orbax cannot write {sch}://"
    return (f"checkpoints of {sch}:// runs stay on this machine, under {scratch_dir(f'{sch}://')} "
            f"({why}; ${SCRATCH_ENV} moves them): a run resumed on another machine starts again")


def drop_checkpoints(run_dir: Any) -> None:
    """Delete a finished run's checkpoints (:func:`checkpoint_dir`) and, when they were in the
    local mirror, the mirror's directories they leave empty."""
    ckpt = checkpoint_dir(run_dir)
    rmtree(ckpt)
    if scheme(run_dir) not in (None, "file", *ORBAX_SCHEMES):
        with contextlib.suppress(OSError):
            os.removedirs(ckpt.parent)  # stops at the first directory that is not empty


def rmtree(p: Any) -> None:
    """Delete directory ``p`` and everything under it (local path or URL); absent: nothing."""
    if is_url(p):
        q = path(p)
        try:
            q.fs.rm(q.path, recursive=True)
        except FileNotFoundError:
            pass
        return
    shutil.rmtree(p, ignore_errors=True)


def is_file(p: Any) -> bool:
    """Whether ``p`` (local path or URL) exists and is not a directory (a results directory
    given as a file is refused before any work)."""
    q = path(p)
    return q.exists() and not q.is_dir()


def file_in_the_way(p: Any) -> str | None:
    """The file that keeps directory ``p`` from being made: ``p`` itself, or the nearest of its
    existing ancestors when that is not a directory; None when nothing is in the way."""
    q = path(p)
    for cand in (q, *q.parents):
        if cand.exists():
            return None if cand.is_dir() else str(cand)
    return None


def same_location(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` name the same directory (local paths resolved; URLs compared as text)."""
    a, b = (path(x).path if scheme(x) == "file" else x for x in (a, b))  # file:///x is the path /x
    if is_url(a) or is_url(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    return Path(a).resolve() == Path(b).resolve()


# ------------------------------------------------------------------------------ atomic writes


def json_text(obj: Any) -> str:
    """The package's JSON file format: indent 1, sorted keys, no NaN/Infinity, a final newline."""
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n"


def unique_sibling(p: str | Path) -> Path:
    """A fresh hidden name beside ``p``, for a temporary file or directory.

    Files are then opened by name (mode ``"xb"``), not with tempfile.mkstemp/mkdtemp, which
    force mode 0600/0700: a file created here gets 0666 & ~umask (0644 under umask 022).
    """
    p = Path(p)
    return p.with_name(f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}")


def write_atomic(p: str | Path, data: bytes | str, *, exclusive: bool = False) -> bool:
    """Write ``data`` to ``p`` atomically: a temp file in the same directory (fsynced), then
    rename over ``p`` (POSIX atomic). With ``exclusive`` the temp file is hard-linked to
    ``p`` instead, which fails if ``p`` exists: returns False then, and ``p`` never
    appears half-written. Returns True when written. The parent directory is created if needed.

    On a URL the object is written whole in one write (atomic on object stores) and
    ``exclusive`` opens it in mode ``"xb"``, which backends that implement it refuse when the
    object exists (returns False then).

    Raises OSError from the filesystem (with ``exclusive``, also when it has no hard links;
    on a URL, NotImplementedError/ValueError when the backend has no exclusive create).
    """
    raw = data.encode() if isinstance(data, str) else data
    if is_url(p):
        return _write_url(path(p), raw, exclusive)
    p = Path(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = unique_sibling(p)
    try:
        try:
            fh = open(tmp, "xb")
        except OSError as e:  # name the file the caller asked for, not the hidden temp name
            raise type(e)(e.errno, f"{e.strerror}: cannot create a temporary file in {p.parent} to write",
                          str(p)) from None
        with fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        if not exclusive:
            os.replace(tmp, p)
            return True
        try:
            os.link(tmp, p)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def _write_url(p, raw: bytes, exclusive: bool) -> bool:
    p.parent.mkdir(parents=True, exist_ok=True)  # a no-op on object stores, needed on others
    if not exclusive:
        p.write_bytes(raw)
        return True
    try:
        with p.open("xb") as fh:
            fh.write(raw)
    except FileExistsError:
        return False
    return True


# Relative tolerance under which two stored results are the same result: float sums whose order
# a CPU's SIMD width or a BLAS build chooses differ in the last bit or two (~1e-16), and a
# committed fit must not change because it was regenerated on another machine.
SAME_RTOL = 1e-12


def same_within(a: Any, b: Any, rtol: float = SAME_RTOL) -> bool:
    """Whether two parsed JSON values are equal, floats within ``rtol`` (relative; exact at 0):
    same keys, lengths, strings, booleans and None, numbers within tolerance."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str):
        return a == b and type(a) is type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_within(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_within(x, y, rtol) for x, y in zip(a, b))
    return False


# ------------------------------------------------------------------------------ the results store

# Layout of a results directory (field by field in depthwidth.records' module doc)
RUNS = "runs"                # RUNS/<run_id>/ per run
RECORD = "record.json"       # the result record, written once, atomically
CONFIG = "config.json"       # {"run_id", "config", "vocab_size"}, written when the run starts
LOG = "log.jsonl"            # one JSON line per log window
CLAIM = "claim.json"         # the worker that owns an unfinished run (experiments.claims)

# Errors that say the results directory cannot be written at all (not that it lacks hard links).
_CANNOT_WRITE = (errno.EROFS, errno.EACCES, errno.ENOTDIR, errno.ENOSPC, errno.EDQUOT)


class ResultsStore:
    """A results directory on a local or mounted filesystem: its layout and the operations on it.

    ``root``: the directory (str or path). Paths it returns are :class:`pathlib.Path`; ``rel``
    arguments are POSIX paths relative to ``root`` (e.g. ``runs/<run_id>/claim.json``).
    Writes are atomic (temp file + rename); an exclusive create hard-links a temp file, and on a
    filesystem without hard links (a gcsfuse mount) falls back to an ``O_EXCL`` create, after
    which :attr:`enforces_exclusive` is False and a caller must verify by re-reading
    (:mod:`depthwidth.experiments.claims`). :class:`UrlResultsStore` is the fsspec version.
    """

    is_url = False
    enforces_exclusive = True  # False once the filesystem turned out to have no hard links

    def __init__(self, root: Any):
        self.location = str(root)
        self.root = path(root)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    # -- layout
    def path(self, rel: str):
        return self.root / rel

    def run_dir(self, run_id: str):
        """``root/runs/<run_id>``."""
        return self.root / RUNS / run_id

    def record_path(self, run_id: str):
        return self.run_dir(run_id) / RECORD

    def record_paths(self) -> list:
        """Every ``runs/*/record.json`` under the root, sorted by path (an absent root: none)."""
        return sorted(self.root.glob(f"{RUNS}/*/{RECORD}"), key=str)

    def run_ids(self) -> list[str]:
        """The names of the run directories under ``runs/`` (finished or not), sorted."""
        runs = self.root / RUNS
        return sorted(p.name for p in runs.glob("*") if p.is_dir())

    def checkpoint_dir(self, run_id: str) -> str | Path:
        """Where orbax keeps this run's checkpoints (:func:`checkpoint_dir`)."""
        return checkpoint_dir(self.run_dir(run_id))

    # -- files
    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read_bytes(self, rel: str) -> bytes:
        """The bytes of ``rel``. Raises OSError (FileNotFoundError when it is missing)."""
        return self.path(rel).read_bytes()

    def read_text(self, rel: str) -> str:
        """The text of ``rel`` (UTF-8). Raises OSError (FileNotFoundError when it is missing)."""
        return self.read_bytes(rel).decode()

    def write_if_changed(self, rel: str, data: bytes | str) -> bool:
        """:meth:`write` unless ``rel`` already holds exactly ``data``; True when written.

        Why: regenerating a tracked file (``summary.json``, ``fit.json``, a figure) from
        unchanged records must leave it untouched, mtime included, not rewrite it."""
        raw = data.encode() if isinstance(data, str) else data
        try:
            if self.read_bytes(rel) == raw:
                return False
        except OSError:  # absent or unreadable: write it
            pass
        return self.write(rel, raw)

    def write_json_if_changed(self, rel: str, obj: Any, rtol: float = SAME_RTOL) -> bool:
        """:meth:`write_if_changed` of ``obj`` as :func:`json_text`, also leaving ``rel`` alone
        when it holds the same result up to ``rtol`` (:func:`same_within`): a fit regenerated on
        another CPU keeps its committed bytes. True when written."""
        try:
            if same_within(json.loads(self.read_bytes(rel)), obj, rtol):
                return False
        except (OSError, ValueError):  # absent, unreadable or not JSON: write it
            pass
        return self.write_if_changed(rel, json_text(obj))

    def write(self, rel: str, data: bytes | str, *, exclusive: bool = False) -> bool:
        """:func:`write_atomic` of ``data`` at ``rel``; True when written (False: ``exclusive`` and it exists)."""
        return write_atomic(self.path(rel), data, exclusive=exclusive)

    def replace(self, rel: str, obj: Any) -> None:
        """Write ``obj`` as :func:`json_text` at ``rel`` atomically, whatever was there."""
        self.write(rel, json_text(obj))

    def read_json(self, rel: str) -> Any:
        """Parsed JSON, None if the file is missing, ``...`` (Ellipsis) if it is unreadable."""
        try:
            return json.loads(self.path(rel).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return ...

    def mtime(self, rel: str) -> float | None:
        """The modification time of ``rel`` (Unix seconds), None when it is missing."""
        try:
            return self.path(rel).stat().st_mtime
        except FileNotFoundError:
            return None

    def remove(self, rel: str) -> None:
        """Delete ``rel``; absent: nothing."""
        try:
            self.path(rel).unlink()
        except FileNotFoundError:
            pass

    def create_exclusive(self, rel: str, obj: Any) -> bool:
        """Create ``rel`` holding ``obj`` (:func:`json_text`) unless it exists; True if this call created it.
        Raises OSError when the directory cannot be written at all."""
        p = self.path(rel)
        try:
            return self.write(rel, json_text(obj), exclusive=True)
        except OSError as e:
            if e.errno in _CANNOT_WRITE:  # the fallback would fail too, and name a missing claim.json
                raise
            # No hard links (e.g. a gcsfuse mount): O_EXCL create, then verify by re-reading.
            self.enforces_exclusive = False
            try:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as fh:
                fh.write(json_text(obj))
            return True

    def open_log(self, rel: str, text: str):
        """``rel`` (a ``log.jsonl``) holding ``text`` now, open for appending: a file object
        whose ``write``, ``flush`` and ``close`` the caller uses. A file that already begins with
        ``text`` (a resumed run's log) is only cut after it, never rewritten: its lines stay
        where they were, and a resume after a clean stop appends."""
        p = self.path(rel)
        data = text.encode()
        try:
            with open(p, "rb") as f:
                same = f.read(len(data)) == data
        except FileNotFoundError:
            same = not data
        if same:
            with open(p, "ab") as f:
                f.truncate(len(data))  # lines after the restored step (a kill between log and checkpoint)
        else:
            p.write_text(text)
        return open(p, "a")


class UrlResultsStore(ResultsStore):
    """A results directory at an fsspec URL (``gs://``, ``s3://``, ``memory://``, ``file://``...).

    Paths it returns are :class:`upath.UPath`. What differs from :class:`ResultsStore` (module
    doc): a write is one whole-object write (no rename); the exclusive create is fsspec's mode
    ``"xb"`` (a conditional create where the backend implements it), and a backend without it
    falls back to write-then-verify (:attr:`enforces_exclusive` False); a store that keeps no
    modification time reports None; a log is rewritten whole at every flush (no append).
    """

    is_url = True

    def mtime(self, rel: str) -> float | None:
        try:
            return super().mtime(rel)
        except (AttributeError, NotImplementedError, OSError, ValueError):
            return None  # a store that keeps no modification time: an unreadable claim is stale

    def create_exclusive(self, rel: str, obj: Any) -> bool:
        try:
            return self.write(rel, json_text(obj), exclusive=True)
        except (NotImplementedError, ValueError):  # no "xb" in this backend: verify by re-reading
            self.enforces_exclusive = False
            if self.exists(rel):
                return False
            self.write(rel, json_text(obj))
            return True

    def open_log(self, rel: str, text: str):
        p = self.path(rel)
        p.write_text(text)
        return _RewrittenLog(p, text)


class _RewrittenLog:
    """A file-like ``log.jsonl`` on a URL: each flush writes the whole text again, in one write."""

    def __init__(self, p, text: str):
        self._path, self._text = p, text

    def write(self, s: str) -> None:
        self._text += s

    def flush(self) -> None:
        self._path.write_text(self._text)

    def close(self) -> None:
        pass


def open_results(root: Any) -> ResultsStore:
    """The store of the results directory ``root``: :class:`UrlResultsStore` for a URL
    (``scheme://...``), else :class:`ResultsStore`. Raises UserError as :func:`path` does
    (a URL whose fsspec backend is missing, ...). Nothing is created."""
    if isinstance(root, ResultsStore):
        return root
    return UrlResultsStore(root) if is_url(root) else ResultsStore(root)


def store_of_file(p: Any) -> tuple[ResultsStore, str]:
    """The store of the directory holding the file ``p``, and ``p``'s name in it: how a file
    named on its own (``fit --out FILE``, ``--fit FILE``) is read and written through a store.
    ``"fit.json"`` is ``(store of ".", "fit.json")``; ``gs://b/x/fit.json`` is
    ``(store of "gs://b/x", "fit.json")``. Raises UserError as :func:`path` does."""
    s = str(p)
    if is_url(s):
        parent, _, name = s.rstrip("/").rpartition("/")
        return open_results(parent), name
    q = Path(p)
    return open_results(q.parent), q.name


def read_bytes(p: Any) -> bytes:
    """The bytes of the file ``p`` (a path or URL), read through its store (:func:`store_of_file`).
    Raises OSError (FileNotFoundError when missing), UserError as :func:`path` does."""
    store, name = store_of_file(p)
    return store.read_bytes(name)


def read_text(p: Any) -> str:
    """:func:`read_bytes` decoded as UTF-8."""
    return read_bytes(p).decode()


def write_if_changed(p: Any, data: bytes | str) -> bool:
    """:meth:`ResultsStore.write_if_changed` of the file ``p`` (a path or URL) through its store."""
    store, name = store_of_file(p)
    return store.write_if_changed(name, data)


def write_json_if_changed(p: Any, obj: Any, rtol: float = SAME_RTOL) -> bool:
    """:meth:`ResultsStore.write_json_if_changed` of the file ``p`` (a path or URL) through its store."""
    store, name = store_of_file(p)
    return store.write_json_if_changed(name, obj, rtol)
