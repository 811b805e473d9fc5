"""Run one document's work in a child process, so that a crash or a stall is that document's
failure and not its worker's.

MuPDF is C: a crafted PDF can crash the process that opens it (a 60,000-deep outline makes
``pymupdf.open`` segfault) or keep it busy for as long as it likes. ``run_isolated`` calls a
function in a forked child (it inherits the worker's imported modules, so a child costs a fork
and a pickle of the function's answer: milliseconds), waits at most ``timeout_s`` for its answer, and turns what can go
wrong into ``Isolated`` with a reason a user can read: ``crashed: signal 11``, ``timed out after
30 s``, ``crashed: exit code 1`` (an allocation the memory budget refused, say). The child's
address space may grow by at most ``memory_mb`` (``RLIMIT_AS``), so an image or Flate bomb fails its
own allocation instead of the machine's memory.

``run_isolated_each`` calls a function on many small items in one child (a fork per batch, not
per item), each item within its own budget; an item whose call fails there is judged again alone
(``run_isolated``), so every item gets the verdict it would get in a child of its own.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import resource
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

_TRACE_CHARS = 2000
_PR_SET_PDEATHSIG, _PR_SET_NAME = 1, 15
# fork, not spawn or forkserver: those re-import the parent's __main__ in the child (a Ray
# worker's main module), and spawn re-imports every module a call needs.
_context = multiprocessing.get_context("fork")


class Isolated(Exception):
    """The isolated call did not return: ``reason`` says why (crash, time-out, exception)."""

    def __init__(self, reason: str, trace: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.trace = trace


def own_process(name: bytes = b"bookindex-doc") -> None:
    """Name this (child) process ``name`` (not its worker's name) and have it killed when its
    parent dies (a worker killed mid-call leaves no stalled orphan behind). Linux only."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, name[:15], 0, 0, 0)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _own_budget(memory_mb: int) -> None:
    """In a child: its own name and death signal, and its memory budget on top of what the
    parent had mapped (a Ray worker maps its object store)."""
    own_process()
    if memory_mb > 0:
        limit = _mapped_bytes() + memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child(conn: Any, fn: Callable, args: tuple, memory_mb: int) -> None:
    _own_budget(memory_mb)
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as exc:  # reported to the parent, which raises Isolated
        tail = "".join(traceback.format_exception(exc))[-_TRACE_CHARS:]
        conn.send(("raised", f"{type(exc).__name__}: {exc}", tail))
    finally:
        conn.close()


def _each_child(conn: Any, fn: Callable, items: list, memory_mb: int) -> None:
    """``fn`` on each item in turn, each answer sent as it is ready (``_child``'s answers)."""
    _own_budget(memory_mb)
    try:
        for item in items:
            try:
                answer = ("ok", fn(item))
            except BaseException as exc:  # judged again alone by the parent
                answer = ("raised", f"{type(exc).__name__}: {exc}", "")
            conn.send(answer)
            if answer[0] != "ok":
                return
    finally:
        conn.close()


def _mapped_bytes() -> int:
    """This process's virtual memory size (``VmSize``), 0 when /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_isolated(fn: Callable, *args: Any, timeout_s: float, memory_mb: int = 0) -> Any:
    """``fn(*args)`` in a child process: its value, or ``Isolated`` when the child crashed,
    ran past ``timeout_s`` seconds (it is killed), or raised. ``fn`` must be a module-level
    function or a builtin."""
    receive, child = _start(_child, (fn, args, memory_mb))
    try:
        answer = _next_answer(receive, child, timeout_s)
        if answer is None:
            child.kill()
            raise Isolated(f"timed out after {timeout_s:g} s")
        if answer[0] == "died":
            child.join(timeout=10)
            raise Isolated(death_reason(child.exitcode))
    finally:
        _reap(receive, child)
    if answer[0] == "ok":
        return answer[1]
    raise Isolated(answer[1], answer[2])


def run_isolated_each(
    fn: Callable, items: list, *, timeout_s: float, memory_mb: int = 0
) -> list[tuple[Any, float]]:
    """``fn(item)`` for each item, in one child process for as many items as go well: per
    item, its value or the ``Isolated`` that ``run_isolated(fn, item)`` would raise, and its
    seconds. Each item has ``timeout_s`` from the answer before it; a stalled item is killed at
    its budget (its own stall) and the rest go on in a new child. An item whose call crashed
    the child or raised there (an allocation past the child's budget, which the items before
    it share, say) is run again alone, so that its verdict is its own."""
    out: list[tuple[Any, float]] = []
    while len(out) < len(items):
        rest = items[len(out) :]
        started = time.perf_counter()
        receive, child = _start(_each_child, (fn, rest, memory_mb))
        try:
            for item in rest:
                answer = _next_answer(receive, child, timeout_s)
                if answer is None:
                    child.kill()
                    out.append((Isolated(f"timed out after {timeout_s:g} s"), timeout_s))
                    break
                if answer[0] != "ok":  # raised, or the child died on this item: judged alone
                    out.append(_alone(fn, item, timeout_s, memory_mb))
                    break
                now = time.perf_counter()
                out.append((answer[1], now - started))
                started = now
        finally:
            _reap(receive, child)
    return out


def _next_answer(receive: Any, child: Any, timeout_s: float) -> tuple | None:
    """The child's next answer; ``("died",)`` when it exited without one; None when neither
    came within ``timeout_s``. The child's exit is seen by its process sentinel, not by the
    pipe's end of file alone: a process forked meanwhile elsewhere in this one (a thread of a
    Ray worker, a library) may hold a copy of the pipe's writing end, and the end of file then
    waits for that process too."""
    ready = multiprocessing.connection.wait([receive, child.sentinel], timeout_s)
    if not ready:
        return None
    if receive.poll(0):  # an answer (sent before any exit), or the end of file
        try:
            return receive.recv()
        except EOFError:
            return ("died",)
    return ("died",)  # exited, the pipe still open somewhere else


def _alone(fn: Callable, item: Any, timeout_s: float, memory_mb: int) -> tuple[Any, float]:
    """``run_isolated(fn, item)``'s value or ``Isolated``, and its seconds."""
    started = time.perf_counter()
    try:
        value: Any = run_isolated(fn, item, timeout_s=timeout_s, memory_mb=memory_mb)
    except Isolated as exc:
        value = exc
    return value, time.perf_counter() - started


def _start(target: Callable, args: tuple) -> tuple[Any, Any]:
    """A forked child running ``target(connection, *args)``; the end its answers arrive at."""
    receive, send = _context.Pipe(duplex=False)
    child = _context.Process(target=target, args=(send, *args), daemon=True)
    child.start()
    send.close()
    return receive, child


def _reap(receive: Any, child: Any) -> None:
    """Close the answers' end and wait for the child; one still running is killed."""
    receive.close()
    child.join(timeout=10)
    if child.is_alive():
        child.kill()
        child.join()


def death_reason(exitcode: int | None) -> str:
    """``crashed: signal 11 (SIGSEGV)`` for a child killed by a signal, else its exit code."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown"
        return f"crashed: signal {-exitcode} ({name})"
    return f"crashed: exit code {exitcode}"
