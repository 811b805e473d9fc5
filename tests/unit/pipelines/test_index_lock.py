"""One writer per index (pipelines/store/index_lock.py): a second job is refused with the holder
named, or waits; a lock whose holder died is broken (at once on this host, after the stale time
otherwise), once, by one job; a holder that lost its lock stops before its commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from bookindex.pipelines.store.index_lock import LOCK_FILE, IndexLock, IndexLocked


def test_the_lock_names_its_holder_and_a_second_job_is_refused(tmp_path):
    with IndexLock(tmp_path, heartbeat_s=0.1) as held:
        holder = json.loads((tmp_path / LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid() and holder["host"] and holder["started_at"]
        with pytest.raises(IndexLocked, match=rf"PID {os.getpid()}, started .*last heartbeat"):
            IndexLock(tmp_path).acquire()
        held.check()  # still ours
    assert not (tmp_path / LOCK_FILE).exists()


def test_the_heartbeat_keeps_the_lock_fresh(tmp_path):
    with IndexLock(tmp_path, heartbeat_s=0.1):
        os.utime(tmp_path / LOCK_FILE, (time.time() - 100, time.time() - 100))
        time.sleep(0.5)
        age = time.time() - (tmp_path / LOCK_FILE).stat().st_mtime
        assert age < 1.0


def test_a_second_job_waits_for_the_first(tmp_path):
    first = IndexLock(tmp_path, heartbeat_s=0.1)
    first.acquire()
    threading.Timer(0.5, first.release).start()
    second = IndexLock(tmp_path, wait_s=30)
    second.acquire()
    assert second.notes == ["waited for another job's index lock"]
    second.release()


def test_a_dead_holder_on_this_host_is_broken_at_once(tmp_path):
    # a real job process that took the lock and was killed with SIGKILL
    code = (
        "import sys, time; from bookindex.pipelines.store.index_lock import IndexLock;"
        f"lock = IndexLock({str(tmp_path)!r}); lock.acquire(); print('held', flush=True);"
        "time.sleep(600)"
    )
    job = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert job.stdout.readline().strip() == b"held"
    job.kill()
    job.wait()
    lock = IndexLock(tmp_path, stale_s=3600)
    lock.acquire()
    assert len(lock.notes) == 1 and f"its process {job.pid} on this host is gone" in lock.notes[0]
    lock.release()


def test_a_holder_without_heartbeat_on_another_host_is_broken_after_the_stale_time(tmp_path):
    other = {"host": "elsewhere", "pid": 1, "started_at": "x", "command": "x", "token": "t"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(other))
    with pytest.raises(IndexLocked):  # fresh: alive as far as anyone can tell
        IndexLock(tmp_path, stale_s=60).acquire()
    old = time.time() - 120
    os.utime(tmp_path / LOCK_FILE, (old, old))
    lock = IndexLock(tmp_path, stale_s=60)
    lock.acquire()
    assert "no heartbeat for 120 s" in lock.notes[0] and "host elsewhere" in lock.notes[0]
    lock.release()


def test_many_jobs_racing_for_a_stale_lock_one_wins(tmp_path):
    other = {"host": "elsewhere", "pid": 1, "started_at": "x", "command": "x", "token": "t"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(other))
    old = time.time() - 1000
    os.utime(tmp_path / LOCK_FILE, (old, old))
    winners, refused = [], []
    start = threading.Barrier(8)

    def race() -> None:
        lock = IndexLock(tmp_path, stale_s=60, heartbeat_s=0.05)
        start.wait()
        try:
            lock.acquire()
            winners.append(lock)
        except IndexLocked:
            refused.append(lock)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and len(refused) == 7
    winners[0].check()
    winners[0].release()


def test_a_holder_that_lost_its_lock_stops_before_its_commit(tmp_path):
    lock = IndexLock(tmp_path, heartbeat_s=0.05)
    lock.acquire()
    os.unlink(tmp_path / LOCK_FILE)  # judged stale and broken by another job
    successor = IndexLock(tmp_path)
    successor.acquire()
    time.sleep(0.3)
    with pytest.raises(IndexLocked, match="lost the index lock"):
        lock.check()
    lock.release()  # leaves the successor's lock alone
    successor.check()
    successor.release()
