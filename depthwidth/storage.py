"""Where results live: a local path, or any fsspec URL (``gs://``, ``s3://``, ``memory://``, ...).

The bottom layer beside :mod:`depthwidth.records`. Every module that reads or writes a results
directory turns the user's string into a path with :func:`path`: a local path stays a
:class:`pathlib.Path` (nothing changes for the default CPU path); a URL becomes a
:class:`upath.UPath` (universal_pathlib, the pathlib API over fsspec), so the same
``/``, ``exists``, ``read_text``, ``glob`` and ``open`` work on object storage.

Three things an object store does not have, and what this package does instead:

* **Rename.** A record is written with one whole-object write (one PUT on GCS/S3, which is
  atomic: readers see the old object or the new one, never half of it), not temp file + rename.
* **Append.** ``log.jsonl`` on a URL is rewritten whole at every log window
  (:class:`depthwidth.models.train.RunLogger`); it is a few kB per run.
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
import os
import re
import shutil
import tempfile
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
