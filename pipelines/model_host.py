"""A model-backed stage's work in a child process of its Ray actor, so that a document whose
model work crashes or stalls is that document's failure and not its actor's (nor the job's).

The enrich stage (spaCy, the embedder, an LLM client) and the OCR stage (ONNX models) hold
models in C libraries: a document can crash them (a segfault kills the actor; Ray restarts it a
bounded number of times, then fails the job) or keep them busy without end. ``ModelHost`` starts
a child process (``python -m pipelines.model_host``: a fresh interpreter, not a fork of the
multi-threaded actor), which builds the stage's worker object once (its models), then answers
one call at a time over a socket pair (its ``warm_up``, if it has one, runs first: models that
load lazily load before any document's budget starts). Each call has a time budget (per
document, plus an allowance per node: ``budget_s``); a child that dies or runs
past it is killed and replaced (the next call loads the models again), and the call raises
``Isolated`` with a reason a user reads: ``crashed: signal 11 (SIGSEGV)``, ``timed out after
600 s``, or the worker's exception. ``call_isolated`` runs a batch of documents: the batch at
once within the sum of its documents' budgets, and when that fails each document alone (bounded
retries of a crash), so that one document's failure never costs its neighbours theirs.

Tables cross the socket as Arrow IPC streams (``send_bytes``: the buffers as they are, no
pickling of the table, no conversion to Python rows); the child's answer is checked (an Arrow
table with one row per row sent) and handed back as the table it is. Only when rows were run
alone are their tables put together (their schemas unified: a column all null in one row's
table takes the other rows' type).
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import pyarrow as pa

from bookindex.operators.parsing.isolation import Isolated, death_reason, own_process

_TRACE_CHARS = 2000
_START_POLL_S = 1.0  # how often a loading child is checked for life


class ModelHost:
    """One child process holding ``factory(**kwargs)`` (``factory``: "module:Name", a class or
    function whose result is called with a ``pa.Table`` and returns one). ``timeout_s``: the
    budget of one document; ``retries``: how often a document whose child crashed is tried
    again alone. ``info``: what the worker reported when it was built (its ``info`` attribute,
    e.g. the embedder's width). A worker that cannot be built raises here, in the actor's
    ``__init__`` (a configuration error fails the job at once, as without the child)."""

    def __init__(
        self, factory: str, kwargs: dict, timeout_s: float, retries: int, per_node_s: float = 0.0
    ) -> None:
        self.factory, self.kwargs = factory, kwargs
        self.timeout_s, self.retries, self.per_node_s = timeout_s, retries, per_node_s
        self.child: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.info: Any = None
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        parent_end, child_end = socket.socketpair()
        env = dict(os.environ)  # the child imports this repository's modules as the actor does
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.child = subprocess.Popen(
            [sys.executable, "-m", "bookindex.pipelines.model_host", str(child_end.fileno())],
            pass_fds=(child_end.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
        )
        child_end.close()
        self.conn = Connection(parent_end.detach())
        self.conn.send(("build", self.factory, self.kwargs))
        while not self.conn.poll(_START_POLL_S):  # loading models: no budget, but alive
            if self.child.poll() is not None:
                break
        answer = self._receive()
        if answer[0] != "ready":
            self.close()
            raise RuntimeError(f"the model worker {self.factory} did not start: {answer[1]}")
        self.info = answer[1]

    def _receive(self) -> tuple:
        try:
            return self.conn.recv()
        except (EOFError, OSError):  # the child died before it answered
            code = self.child.wait(timeout=10)
            return ("died", death_reason(code))

    def budget_s(self, batch: pa.Table) -> float:
        """The seconds ``batch`` may take: per row ``timeout_s``, plus ``per_node_s`` for each
        of its nodes (a row with an ``n_nodes`` column: a document; a long book may take longer
        than a short one, a stalled one no longer than its size allows)."""
        nodes = batch.column("n_nodes").to_pylist() if "n_nodes" in batch.column_names else []
        return self.timeout_s * batch.num_rows + self.per_node_s * sum(n or 0 for n in nodes)

    def call(self, batch: pa.Table) -> pa.Table:
        """``worker(batch)`` in the child within ``budget_s(batch)``; ``Isolated`` when the
        child crashed, stalled (it is killed) or the worker raised."""
        if self.child is None or self.child.poll() is not None:
            self.restarts += 1
            self._start()
        budget = self.budget_s(batch)
        self.conn.send(("call",))
        self.conn.send_bytes(to_ipc(batch))
        if not self.conn.poll(budget):
            self._kill()
            raise Isolated(f"timed out after {budget:.3g} s")
        answer = self._receive()
        if answer[0] == "ok":
            return self._answered(batch)
        if answer[0] == "died":
            self._kill()
            raise Isolated(answer[1])
        raise Isolated(answer[1], answer[2])

    def _answered(self, batch: pa.Table) -> pa.Table:
        """The table that follows an "ok": an Arrow IPC stream with one row per row of
        ``batch`` (``Isolated`` otherwise: a worker that broke the contract)."""
        try:
            table = from_ipc(self.conn.recv_bytes())
        except (EOFError, OSError):
            code = self.child.wait(timeout=10)
            self._kill()
            raise Isolated(death_reason(code)) from None
        except pa.ArrowException as exc:
            raise Isolated(f"the worker's answer is not an Arrow table: {exc}") from None
        if table.num_rows != batch.num_rows:
            raise Isolated(f"the worker answered {table.num_rows} rows for {batch.num_rows}")
        return table

    def call_isolated(self, batch: pa.Table, failed: Callable[[dict, Isolated], dict]) -> pa.Table:
        """The output of ``batch`` (one row per input row): the batch in one call, its table
        as the child sent it; when that fails, each row alone, a crashed row tried
        ``retries`` times more; a row that still fails becomes ``failed(row, reason)`` run
        through the worker (so that it has the stage's columns)."""
        try:
            return self.call(batch)
        except Isolated as exc:
            if batch.num_rows == 1:  # that was this document's own first try
                return self._alone(batch, failed, exc)
        return concat_rows([self._alone(batch.slice(i, 1), failed) for i in range(batch.num_rows)])

    def _alone(
        self,
        row: pa.Table,
        failed: Callable[[dict, Isolated], dict],
        first: Isolated | None = None,
    ) -> pa.Table:
        """One row alone: its output, or (a time-out or an exception at once, a crash after
        ``retries`` more tries) ``failed(row, reason)`` through the worker."""
        crashes, exc = 0, first
        while True:
            if exc is None:
                try:
                    return self.call(row)
                except Isolated as raised:
                    exc = raised
            crashes += exc.reason.startswith("crashed:")
            if not exc.reason.startswith("crashed:") or crashes > self.retries:
                marked = failed(row.to_pylist()[0], exc)
                return self.call(row_table(marked, row.schema))
            exc = None

    def _kill(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        if self.conn is not None:
            self.conn.close()
        self.child, self.conn = None, None

    def close(self) -> None:
        self._kill()

    def __del__(self) -> None:
        self._kill()


def to_ipc(table: pa.Table) -> pa.Buffer:
    """``table`` as one Arrow IPC stream (its buffers, no pickling)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def from_ipc(data: bytes) -> pa.Table:
    """The table of an Arrow IPC stream (``to_ipc``), read without copying its buffers."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def row_table(row: dict, schema: pa.Schema) -> pa.Table:
    """One row as a table, its columns of ``schema`` with their types there (a float32
    vector stays float32), the others as Arrow infers them."""
    table = pa.Table.from_pylist([row])
    for name in table.column_names:
        if name in schema.names and table.schema.field(name).type != schema.field(name).type:
            try:
                column = table.column(name).cast(schema.field(name).type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                continue
            table = table.set_column(table.column_names.index(name), name, column)
    return table


def concat_rows(tables: list[pa.Table]) -> pa.Table:
    """The tables of rows run alone, one after the other, under one schema: a column missing
    from a table, or all null in it (its type then unknown), takes the others' type; where
    types conflict otherwise, the rows are put together as Python values."""
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pa.Table.from_pylist([row for table in tables for row in table.to_pylist()])


def _load(factory: str) -> Any:
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(fd: int) -> None:
    """The child: build the worker, then answer calls until the parent closes the socket."""
    own_process(b"bookindex-model")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the actor decides when this process ends
    conn = Connection(fd)
    _, factory, kwargs = conn.recv()
    try:
        worker = _load(factory)(**kwargs)
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    warm_up = getattr(worker, "warm_up", None)
    if warm_up is not None:  # lazily loaded models load now, outside any document's budget
        try:
            warm_up()
        except BaseException as exc:
            conn.send(("error", f"warm-up: {type(exc).__name__}: {exc}"))
            return
    # the Arrow IPC reader and writer load now too: a call's budget (0.5 s in a test) is not
    # the place for a fresh interpreter's first use of them
    from_ipc(to_ipc(pa.table({"warm": [0]})).to_pybytes())
    conn.send(("ready", getattr(worker, "info", None)))
    while True:
        try:
            conn.recv()  # ("call",), then the batch as an Arrow IPC stream
            batch = from_ipc(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            result = worker(batch)
            if not isinstance(result, pa.Table):
                raise TypeError(f"the worker returned {type(result).__name__}, not a pa.Table")
            data = to_ipc(result)
        except Exception as exc:  # this call's failure: reported, the worker stays up
            tail = "".join(traceback.format_exception(exc))[-_TRACE_CHARS:]
            conn.send(("raised", f"{type(exc).__name__}: {exc}", tail))
            continue
        conn.send(("ok",))
        conn.send_bytes(data)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
