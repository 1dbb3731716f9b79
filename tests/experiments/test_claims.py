"""Claim files: exclusive creation, stale takeover (timeout and dead process), heartbeat, release."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from depthwidth import storage
from depthwidth.experiments import claims


@pytest.fixture
def store(tmp_path):
    return storage.open_results(tmp_path / "results")


def _claim(store, run_id="r1", stale=60.0, worker=0):
    return claims.try_claim(store, run_id, worker=worker, num_workers=2, stale_after_s=stale, settle_s=0.05)


def test_first_claim_wins_second_is_refused(store):
    c, why = _claim(store)
    assert c is not None and why == ""
    on_disk = store.read_json(claims.claim_rel("r1"))
    assert on_disk["token"] == c.token and on_disk["pid"] == os.getpid() and on_disk["worker"] == 0
    c2, why2 = _claim(store, worker=1)
    assert c2 is None and "held by worker 0" in why2
    claims.release(store, c)
    assert store.read_json(claims.claim_rel("r1")) is None
    c3, _ = _claim(store, worker=1)
    assert c3 is not None
    claims.release(store, c3)


def test_stale_heartbeat_is_taken_over(store):
    c, _ = _claim(store)
    old = c.to_dict()
    old["heartbeat_at"] = time.time() - 120  # 2 minutes without a heartbeat
    old["host"] = "another-host"  # not this machine: only the timeout can free it
    store.replace(claims.claim_rel("r1"), old)
    busy, why = _claim(store, stale=600.0)
    assert busy is None and "held by" in why
    taker, why = _claim(store, stale=60.0)
    assert taker is not None and taker.token != c.token
    assert store.read_json(claims.claim_rel("r1"))["token"] == taker.token
    claims.release(store, c)  # the old owner's release must not delete the new owner's claim
    assert store.read_json(claims.claim_rel("r1"))["token"] == taker.token
    claims.release(store, taker)


def test_dead_process_on_this_host_is_taken_over_at_once(tmp_path):
    store = storage.open_results(tmp_path)
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(proc.stdout)
    assert not claims.pid_alive(dead_pid)
    dead = claims.new_claim("r1", 1, 2)
    dead.pid = dead_pid
    store.replace(claims.claim_rel("r1"), dead.to_dict())
    stale, why = claims.is_stale(store.read_json(claims.claim_rel("r1")), now=time.time(),
                                 stale_after_s=600, mtime=None)
    assert stale and f"owner process {dead_pid}" in why
    c, _ = _claim(store, stale=600.0)
    assert c is not None


def test_live_process_on_this_host_is_not_stale(tmp_path):
    store = storage.open_results(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = claims.new_claim("r1", 1, 2)
        live.pid = proc.pid
        store.replace(claims.claim_rel("r1"), live.to_dict())
        c, why = _claim(store, stale=600.0)
        assert c is None and f"pid {proc.pid}" in why
    finally:
        proc.kill()
        proc.wait()
    c, why = _claim(store, stale=600.0)  # killed and reaped: taken over without waiting
    assert c is not None


def test_a_claim_with_the_callers_own_token_is_taken_over_at_once(tmp_path):
    # A Ray task's retry brings the token of its dead first attempt: that claim may come from
    # another host with a fresh heartbeat, and is still its own.
    store = storage.open_results(tmp_path)
    left = claims.new_claim("r1", 0, 1, token="task-7")
    left.host, left.pid = "another-node", 1
    store.replace(claims.claim_rel("r1"), left.to_dict())
    c, why = claims.try_claim(store, "r1", worker=0, num_workers=1, stale_after_s=600.0, settle_s=0.01, token="other")
    assert c is None and "on another-node" in why
    msgs = []
    c, why = claims.try_claim(store, "r1", worker=0, num_workers=1, stale_after_s=600.0, settle_s=0.01,
                              token="task-7", log=msgs.append)
    assert c is not None and c.token == "task-7" and why == ""
    assert msgs == ["taking over r1: left by an earlier attempt of this task"]
    assert store.read_json(claims.claim_rel("r1"))["host"] != "another-node"
    claims.release(store, c)
    assert store.read_json(claims.claim_rel("r1")) is None


def test_unreadable_claim_uses_file_age(tmp_path):
    store = storage.open_results(tmp_path)
    p = store.path(claims.claim_rel("r1"))
    p.parent.mkdir(parents=True)
    p.write_text("{not json")
    assert store.read_json(claims.claim_rel("r1")) is ...
    assert _claim(store, stale=600.0)[0] is None  # fresh garbage: someone may be writing it
    os.utime(p, (time.time() - 700, time.time() - 700))
    assert _claim(store, stale=600.0)[0] is not None


def test_heartbeat_refreshes_and_detects_loss(store):
    c, _ = _claim(store)
    t0 = store.read_json(claims.claim_rel("r1"))["heartbeat_at"]
    logs = []
    with claims.Heartbeat(store, c, 0.05, log=logs.append):
        # polled, not slept for a fixed time: on a loaded machine (CI beside a sweep) the
        # heartbeat thread can wait longer than a few periods for a core (it failed so once)
        deadline = time.monotonic() + 30
        while store.read_json(claims.claim_rel("r1"))["heartbeat_at"] == t0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.read_json(claims.claim_rel("r1"))["heartbeat_at"] > t0 and not logs
        other = claims.new_claim("r1", 1, 2)
        # A beat checks, then writes (fsynced): a takeover that lands inside that window is
        # written over once, and the next beat sees the file as its own again. With a 50 ms
        # period and a slow fsync that happens every time, so the takeover is repeated until the
        # heartbeat has seen it (in a sweep the period is 60 s and a takeover needs a claim
        # 600 s stale).
        while not any("lost the claim" in m for m in logs) and time.monotonic() < deadline:
            if store.read_json(claims.claim_rel("r1"))["token"] != other.token:
                store.replace(claims.claim_rel("r1"), other.to_dict())
            time.sleep(0.05)
    assert [m for m in logs if "lost the claim" in m] == ["lost the claim on r1 to another worker"]
    # The heartbeat never overwrote the new owner.
    assert store.read_json(claims.claim_rel("r1"))["token"] == other.token


def test_heartbeat_stops_before_release(store):
    c, _ = _claim(store)
    with claims.Heartbeat(store, c, 0.01):
        time.sleep(0.05)
    claims.release(store, c)
    time.sleep(0.05)
    assert store.read_json(claims.claim_rel("r1")) is None  # no late beat re-created it


def test_racing_claimers_exactly_one_wins(store):
    # 8 threads claim the same run at once; exactly one may own it.
    barrier = threading.Barrier(8)
    winners = []

    def go(i):
        barrier.wait()
        c, _ = claims.try_claim(store, "race", worker=i, num_workers=8, stale_after_s=60, settle_s=0.05)
        if c is not None:
            winners.append(c)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert store.read_json(claims.claim_rel("race"))["token"] == winners[0].token


def test_racing_takeover_of_a_stale_claim_exactly_one_wins(tmp_path):
    store = storage.open_results(tmp_path)
    dead = claims.new_claim("r1", 9, 10, now=time.time() - 3600)
    dead.host = "gone-host"
    store.replace(claims.claim_rel("r1"), dead.to_dict())
    barrier = threading.Barrier(6)
    winners = []

    def go(i):
        barrier.wait()
        c, _ = claims.try_claim(store, "r1", worker=i, num_workers=6, stale_after_s=60, settle_s=0.3)
        if c is not None:
            winners.append(c)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert json.loads(store.path(claims.claim_rel("r1")).read_text())["token"] == winners[0].token


def test_filesystem_without_hard_links_falls_back_to_o_excl(tmp_path, monkeypatch):
    def no_link(*a, **k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    store = storage.open_results(tmp_path)
    c, _ = claims.try_claim(store, "r1", worker=0, num_workers=1, stale_after_s=60, settle_s=0.01)
    assert c is not None and not store.enforces_exclusive  # now verified by re-reading
    assert store.read_json(claims.claim_rel("r1"))["token"] == c.token
    c2, why = claims.try_claim(store, "r1", worker=1, num_workers=2, stale_after_s=60, settle_s=0.01)
    assert c2 is None and "held by" in why
