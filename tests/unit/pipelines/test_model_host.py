"""ModelHost: a model-backed stage's worker in a child process — a document that crashes it,
stalls it or makes it raise becomes that document's failure (reason as a user reads it), the
child is replaced, and the other documents of the batch get their answers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from bookindex.operators.parsing.isolation import Isolated
from bookindex.pipelines.model_host import ModelHost

WORKER = "tests.fakes:PoisonWorker"


def _failed(row: dict, exc: Isolated) -> dict:
    return dict(row, status="failed", error=exc.reason)


def _batch(*ids: str) -> pa.Table:
    return pa.Table.from_pylist([{"doc_id": i, "status": "ok", "error": ""} for i in ids])


def test_the_worker_is_built_once_in_a_child_and_answers_calls():
    host = ModelHost(WORKER, {"tag": "x"}, timeout_s=30, retries=1)
    try:
        assert host.info == {"tag": "x"}
        first = host.call(_batch("a", "b")).to_pylist()
        second = host.call(_batch("c")).to_pylist()
        pid = host.child.pid
        assert {r["seen"] for r in first + second} == {pid}  # one child, kept between calls
        assert host.restarts == 0
    finally:
        host.close()


def test_crash_stall_and_exception_are_the_documents_own_failures():
    host = ModelHost(WORKER, {}, timeout_s=5, retries=1)
    try:
        with pytest.raises(Isolated, match=r"crashed: signal 11 \(SIGSEGV\)"):
            host.call(_batch("segv"))
        with pytest.raises(Isolated, match=r"timed out after 5 s"):
            host.call(_batch("stall"))
        with pytest.raises(Isolated, match="ValueError: this document cannot be read"):
            host.call(_batch("raise"))
        assert host.call(_batch("ok")).to_pylist()[0]["seen"] == host.child.pid
        assert host.restarts == 2  # after the crash and after the time-out
    finally:
        host.close()


def test_a_poisoned_batch_fails_only_its_poisoned_documents():
    host = ModelHost(WORKER, {}, timeout_s=5, retries=1)
    try:
        table = host.call_isolated(
            _batch("a", "segv", "b", "stall", "raise", "vanish", "c"), _failed
        )
    finally:
        host.close()
    out = table.to_pylist()
    by_id = {r["doc_id"]: r for r in out}
    assert [r["doc_id"] for r in out] == ["a", "segv", "b", "stall", "raise", "vanish", "c"]
    assert all(by_id[i]["status"] == "ok" and by_id[i]["seen"] for i in "abc")
    assert by_id["segv"]["error"] == "crashed: signal 11 (SIGSEGV)"
    assert by_id["stall"]["error"] == "timed out after 5 s"
    assert by_id["raise"]["error"] == "ValueError: this document cannot be read"
    # a worker that leaves a row out of its answer breaks the contract: that row fails
    assert by_id["vanish"]["error"] == "the worker answered 0 rows for 1"
    # the rows run alone are put together under one schema: the failed rows' null ``seen``
    # takes the others' type
    assert table.schema.field("seen").type == pa.int64()


def test_the_childs_table_comes_back_as_it_is_without_python_rows():
    vectors = pa.array([[0.25, -1.5], [3.0, 0.125]], pa.list_(pa.float32(), 2))
    batch = _batch("a", "b").append_column("vector", vectors)
    batch = batch.append_column("blob", pa.array([b"\x00\x01", b""], pa.binary()))
    host = ModelHost(WORKER, {}, timeout_s=30, retries=0)
    try:
        whole = host.call_isolated(batch, _failed)
        alone = host.call_isolated(batch.append_column("x", pa.nulls(2)).slice(0, 1), _failed)
        poisoned = host.call_isolated(pa.concat_tables([batch, _with(batch, "raise")]), _failed)
    finally:
        host.close()
    # float32 fixed-size lists and binary survive (Python rows would make them list<double>)
    assert whole.schema == batch.schema.append(pa.field("seen", pa.int64()))
    assert whole.column("vector").equals(batch.column("vector"))
    assert alone.schema.field("x").type == pa.null()  # as sent, no type guessed for it
    assert poisoned.schema.field("vector").type == pa.list_(pa.float32(), 2)
    assert poisoned.column("error").to_pylist()[2] == "ValueError: this document cannot be read"


def _with(batch: pa.Table, doc_id: str) -> pa.Table:
    """The first row of ``batch`` under another ``doc_id``."""
    row = batch.slice(0, 1)
    return row.set_column(0, "doc_id", pa.array([doc_id]))


def test_a_crash_is_retried_a_bounded_number_of_times_a_stall_is_not():
    host = ModelHost(WORKER, {}, timeout_s=5, retries=2)
    try:
        out = host.call_isolated(_batch("segv"), _failed).to_pylist()
        assert out[0]["error"] == "crashed: signal 11 (SIGSEGV)"
        assert host.restarts == 3  # the first try + 2 retries crashed; the failed row's call
        out = host.call_isolated(_batch("stall"), _failed).to_pylist()
        assert out[0]["error"] == "timed out after 5 s"
        assert host.restarts == 4  # one try: its budget is spent
    finally:
        host.close()


def test_the_budget_grows_with_the_documents_and_their_nodes():
    host = ModelHost(WORKER, {}, timeout_s=10, retries=0, per_node_s=0.5)
    try:
        nodes = pa.Table.from_pylist(
            [{"doc_id": "a", "n_nodes": 100}, {"doc_id": "b", "n_nodes": 4}]
        )
        assert host.budget_s(nodes) == 10 * 2 + 0.5 * 104
        assert host.budget_s(_batch("page 1", "page 2", "page 3")) == 30  # rows without nodes
    finally:
        host.close()


def test_a_worker_that_cannot_be_built_fails_at_once():
    with pytest.raises(RuntimeError, match="did not start: TypeError"):
        ModelHost(WORKER, {"no_such_argument": 1}, timeout_s=2, retries=0)
