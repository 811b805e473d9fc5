"""One writer per index: the lock every index job takes before it touches an index directory.

The lock is a file, ``<index>/index.lock``, created exclusively (``O_CREAT | O_EXCL``: atomic on
local file systems and on NFSv3+) and holding its holder: host, PID, start time, command and a
random token. The holder's heartbeat is the file's modification time, touched every
``index.lock_heartbeat_s`` through the holder's own open descriptor (so a holder that lost its
lock touches an unlinked file, never the new holder's).

A lock is *stale* when its holder ran on this host and its process is gone (a job killed with
SIGKILL, a crashed machine rebooted), or when its heartbeat is older than
``index.lock_stale_s`` (a holder on another host that died). A stale lock is broken under a
second exclusive file (``index.lock.break``), so two jobs never both break it and take it: the
breaker re-reads the lock under that file and removes it only when it is still the same stale
holder's. A job finding a live lock waits up to ``index.lock_wait_s`` for it, then stops with
``IndexLocked`` naming the holder. A holder that finds its lock gone or replaced (it was judged
stale while alive: a machine paused longer than ``lock_stale_s``) stops before its commit.

Because only the holder writes, ``recovery.recover`` (run under the lock) only ever removes rows
of a job that is dead. Readers take no lock: they read committed data throughout (recovery.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

LOCK_FILE = "index.lock"
BREAK_FILE = "index.lock.break"


class IndexLocked(Exception):
    """Another job holds the index (or this job lost its lock): the message says who, and
    what to do."""


@dataclass
class Holder:
    host: str
    pid: int
    started_at: str
    command: str
    token: str

    def describe(self, heartbeat_age: float) -> str:
        return (
            f"host {self.host}, PID {self.pid}, started {self.started_at}, "
            f"last heartbeat {heartbeat_age:.0f} s ago"
        )


def _me() -> Holder:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    command = " ".join(sys.argv)[:500]
    return Holder(socket.gethostname(), os.getpid(), started, command, secrets.token_hex(16))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


class IndexLock:
    """The index lock of ``index_dir`` (a context manager: acquired on enter, released on
    exit). ``notes``: what acquiring it took (a stale lock broken, a wait)."""

    def __init__(
        self,
        index_dir: str | Path,
        heartbeat_s: float = 10.0,
        stale_s: float = 120.0,
        wait_s: float = 0.0,
    ) -> None:
        self.dir = Path(index_dir)
        self.path = self.dir / LOCK_FILE
        self.heartbeat_s, self.stale_s, self.wait_s = heartbeat_s, stale_s, wait_s
        self.me = _me()
        self.notes: list[str] = []
        self.lost = ""
        self._fd: int | None = None
        self._inode = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- acquire / release ----

    def __enter__(self) -> IndexLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        waited = False
        while True:
            if self._try_create():
                if waited:
                    self.notes.append("waited for another job's index lock")
                return
            found = self._read()
            if found is None:  # removed meanwhile, or being written: look again
                time.sleep(0.05)
                continue
            holder, age = found
            reason = self._stale_reason(holder, age)
            if reason:
                if self._break(holder, reason):
                    self.notes.append(
                        f"broke a stale index lock ({reason}): {holder.describe(age)}"
                    )
                continue
            if time.monotonic() >= deadline:
                raise IndexLocked(
                    f"{self.dir} is being written by another index job ({holder.describe(age)}; "
                    f"lock file {self.path}). Run again when it has finished, or wait for it: "
                    "--set index.lock_wait_s=SECONDS. A lock whose holder is gone is broken "
                    f"by the next job (same host: at once; another host: after "
                    f"{self.stale_s:g} s without a heartbeat)."
                )
            waited = True
            time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))

    def _try_create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        os.write(fd, json.dumps(vars(self.me)).encode("utf-8"))
        os.fsync(fd)
        self._fd, self._inode = fd, os.fstat(fd).st_ino
        self._thread = threading.Thread(target=self._beat, name="index-lock", daemon=True)
        self._thread.start()
        return True

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._fd is None:
            return
        if self._owned():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None

    def check(self) -> None:
        """Raise ``IndexLocked`` when this job no longer holds its lock (call before a
        commit)."""
        if self._fd is None or not self._owned():
            self.lost = self.lost or "the lock file was removed or replaced"
        if self.lost:
            raise IndexLocked(
                f"this job lost the index lock of {self.dir} ({self.lost}): another job may be "
                "writing it; nothing was committed by this job. Run it again."
            )

    # ---- heartbeat ----

    def _owned(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            if not self._owned():
                self.lost = "the lock file was removed or replaced while this job ran"
                return
            with contextlib.suppress(OSError):
                os.utime(self._fd)

    # ---- other holders ----

    def _read(self) -> tuple[Holder, float] | None:
        """The holder of the lock file and its heartbeat's age; None when there is none (or
        it is being written: a holder's first bytes come right after the file)."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                info = os.fstat(handle.fileno())
                age = time.time() - info.st_mtime
                text = handle.read()
        except FileNotFoundError:
            return None
        try:
            return Holder(**json.loads(text)), age
        except (ValueError, TypeError):
            if age < self.stale_s:
                return None  # being written (or torn): judged again in a moment
            return Holder("?", -1, "?", "?", f"unreadable:{info.st_ino}"), age

    def _stale_reason(self, holder: Holder, age: float) -> str:
        if holder.host == self.me.host and holder.pid > 0 and not _pid_alive(holder.pid):
            return f"its process {holder.pid} on this host is gone"
        if age > self.stale_s:
            return f"no heartbeat for {age:.0f} s (more than index.lock_stale_s={self.stale_s:g})"
        return ""

    def _break(self, holder: Holder, reason: str) -> bool:
        """Remove the stale lock of ``holder``, under the break file; False when another job
        is breaking it or it changed meanwhile."""
        breaker = self.dir / BREAK_FILE
        try:
            fd = os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):  # a breaker that died while breaking
                if time.time() - os.stat(breaker).st_mtime > self.stale_s:
                    os.unlink(breaker)
            time.sleep(0.05)
            return False
        try:
            found = self._read()
            if found is None or found[0].token != holder.token:
                return False
            if not self._stale_reason(*found):
                return False
            os.unlink(self.path)
            return True
        finally:
            os.close(fd)
            os.unlink(breaker)
