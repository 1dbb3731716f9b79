"""Claim files: which worker owns an unfinished run, so no two workers train the same config.

``RESULTS/runs/<run_id>/claim.json`` (layout in :mod:`depthwidth.storage`)::

    run_id, token (uuid4 of this claim), worker, num_workers, host, boot_id, pid,
    claimed_at, heartbeat_at (Unix seconds), heartbeat_iso

Every operation on the file goes through the results directory's store
(:func:`depthwidth.storage.open_results`: ``store`` below), local or fsspec.

Protocol
--------
* **Claim**: create the file exclusively: write a temp file, then ``os.link`` it to
  ``claim.json`` (fails if the name exists; the file appears with its whole content, so a kill
  never leaves an empty claim). On a filesystem without hard links (e.g. a gcsfuse mount) an
  ``O_EXCL`` create instead, re-read after ``settle_s``, as after any takeover: the last writer
  wins and everyone else backs off.
* **Heartbeat**: the owner rewrites ``heartbeat_at`` every ``heartbeat_s`` from a background
  thread (atomic replace), first checking that the file still holds its token.
* **Stale**: a claim is taken over when its heartbeat is older than ``stale_after_s``, or at
  once when it was made on this machine (same host name and boot id) by a process that no
  longer runs (so a sweep restarted after a kill does not wait for the timeout). Hosts must
  agree on the time to well within ``stale_after_s`` (NTP). An unreadable claim counts its
  file's modification time as its heartbeat. A caller may bring its own token (``try_claim``'s
  ``token``): a claim carrying that token is its own earlier, dead attempt's and is taken over
  at once on any host (a Ray task's retries share one token).
* **Release**: delete the file when the run ends, fails, or the worker is interrupted.

Duplicate training is prevented, not made impossible: two workers can both own a run only if a
takeover's read-to-write gap exceeds ``settle_s`` (milliseconds against seconds); the owner's
heartbeat then notices it lost the claim and logs it, and both write the same deterministic
record atomically.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.storage import ResultsStore

CLAIM_FILE = storage.CLAIM
# Tokens of the claims this process holds now: with several workers in one process (threads,
# tests) a claim carrying our own pid is stale only if it is not one of these.
_HELD: set[str] = set()


def boot_id() -> str:
    """This machine's boot id (Linux), '' elsewhere: with the host name it names a pid space."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (a zombie, killed but not reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@dataclass
class Claim:
    """One worker's claim on one run (fields as in the module docstring; times in Unix seconds)."""

    run_id: str
    token: str
    worker: int
    num_workers: int
    host: str
    boot_id: str
    pid: int
    claimed_at: float
    heartbeat_at: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["heartbeat_iso"] = _dt.datetime.fromtimestamp(self.heartbeat_at, _dt.UTC).isoformat(timespec="seconds")
        return d


def new_claim(run_id: str, worker: int, num_workers: int, now: float | None = None,
              token: str | None = None) -> Claim:
    t = time.time() if now is None else now
    return Claim(run_id=run_id, token=token or uuid.uuid4().hex, worker=worker, num_workers=num_workers,
                 host=socket.gethostname(), boot_id=boot_id(), pid=os.getpid(), claimed_at=t, heartbeat_at=t)


def claim_rel(run_id: str) -> str:
    """The claim file of ``run_id``, relative to the results directory."""
    return f"{storage.RUNS}/{run_id}/{CLAIM_FILE}"


def is_stale(old: Any, *, now: float, stale_after_s: float, mtime: float | None) -> tuple[bool, str]:
    """Whether an existing claim (parsed dict, or ``...`` if unreadable) may be taken over.

    Returns (stale, reason). Reasons: "unreadable claim, ... old", "heartbeat ... s old",
    "owner process ... is gone", or "held by ..." when not stale.
    """
    if not isinstance(old, dict):
        age = now - mtime if mtime is not None else float("inf")
        return age > stale_after_s, f"unreadable claim, {age:.0f}s old"
    hb = old.get("heartbeat_at")
    age = now - hb if isinstance(hb, (int, float)) else float("inf")
    if age > stale_after_s:
        return True, f"heartbeat {age:.0f}s old (> {stale_after_s:g}s)"
    same_machine = old.get("host") == socket.gethostname() and old.get("boot_id", "") == boot_id()
    pid = old.get("pid")
    ours_now = pid == os.getpid() and old.get("token") in _HELD
    if same_machine and isinstance(pid, int) and not ours_now and (pid == os.getpid() or not pid_alive(pid)):
        return True, f"owner process {pid} on this host is gone"
    return False, f"held by worker {old.get('worker')} on {old.get('host')} (pid {pid}), heartbeat {age:.0f}s ago"


def try_claim(store: ResultsStore, run_id: str, *, worker: int, num_workers: int, stale_after_s: float,
              settle_s: float = 1.0, log: Callable[[str], None] | None = None,
              token: str | None = None) -> tuple[Claim | None, str]:
    """Claim ``run_id`` for this process. Returns (claim, "") or (None, why not).

    ``token``: the claim's token (default a fresh uuid4). A claim file that already carries
    this token was left by an earlier attempt of the same caller (a Ray task rerun after its
    worker died, :mod:`depthwidth.experiments.ray_runner`) and is taken over at once, from any
    host. The token must therefore be unique to one run of one sweep.
    """
    rel = claim_rel(run_id)
    for _ in range(3):  # a claim released between our create and read: try again
        claim = new_claim(run_id, worker, num_workers, token=token)
        _HELD.add(claim.token)  # before it is visible: sibling threads must not see it as a dead pid's
        if store.create_exclusive(rel, claim.to_dict()):
            if store.enforces_exclusive:
                return claim, ""
            return _verify(store, rel, claim, settle_s)
        _HELD.discard(claim.token)
        old = store.read_json(rel)
        if old is None:
            continue
        if token is not None and isinstance(old, dict) and old.get("token") == token:
            stale, why = True, "left by an earlier attempt of this task"
        else:
            stale, why = is_stale(old, now=time.time(), stale_after_s=stale_after_s, mtime=store.mtime(rel))
        if not stale:
            return None, why
        if log:
            log(f"taking over {run_id}: {why}")
        _HELD.add(claim.token)
        store.replace(rel, claim.to_dict())
        return _verify(store, rel, claim, settle_s)
    return None, "claim file appeared and vanished repeatedly"


def _verify(store: ResultsStore, rel: str, claim: Claim, settle_s: float) -> tuple[Claim | None, str]:
    time.sleep(settle_s)
    cur = store.read_json(rel)
    if isinstance(cur, dict) and cur.get("token") == claim.token:
        return claim, ""
    _HELD.discard(claim.token)
    return None, "another worker claimed it at the same time"


def still_ours(store: ResultsStore, claim: Claim) -> bool:
    cur = store.read_json(claim_rel(claim.run_id))
    return isinstance(cur, dict) and cur.get("token") == claim.token


def release(store: ResultsStore, claim: Claim) -> None:
    """Delete the claim file if it is still ours."""
    if still_ours(store, claim):
        store.remove(claim_rel(claim.run_id))
    _HELD.discard(claim.token)


def release_token(store: ResultsStore, run_id: str, token: str) -> bool:
    """Delete ``run_id``'s claim file if it carries ``token``; True if it did. For a claim whose
    holder is known to be gone (a Ray task cancelled by force: the driver gave it the token)."""
    cur = store.read_json(claim_rel(run_id))
    if not (isinstance(cur, dict) and cur.get("token") == token):
        return False
    store.remove(claim_rel(run_id))
    return True


class Heartbeat:
    """Background thread refreshing ``claim.heartbeat_at`` every ``interval_s`` while training.

    Use as a context manager around the training call; on exit it stops (joined before the
    claim is released, so a late beat cannot re-create a released claim). If the file stops
    holding our token (another worker took the run over) it logs that once and stops beating.
    """

    def __init__(self, store: ResultsStore, claim: Claim, interval_s: float, log: Callable[[str], None] | None = None):
        self.store, self.claim, self.interval_s, self.log = store, claim, interval_s, log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{claim.run_id}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if not still_ours(self.store, self.claim):
                    if self.log:
                        self.log(f"lost the claim on {self.claim.run_id} to another worker")
                    return
                self.claim.heartbeat_at = time.time()
                self.store.replace(claim_rel(self.claim.run_id), self.claim.to_dict())
            except OSError as e:  # a transient filesystem error must not kill training
                if self.log:
                    self.log(f"heartbeat for {self.claim.run_id} failed: {e}")

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
