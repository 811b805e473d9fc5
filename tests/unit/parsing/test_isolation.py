"""A document's PDF work in a child process (operators/parsing/isolation.py): a crash, a stall,
an exception or an allocation past the memory budget is an ``Isolated`` with its reason, and the
caller goes on; a real PDF parsed in a child gives what it gives in-process."""

from __future__ import annotations

import ctypes
import os
import time

import pymupdf
import pytest

from bookindex.operators.eval.hostile_corpus import deep_outline
from bookindex.operators.parsing.isolation import Isolated, run_isolated
from bookindex.operators.parsing.parse import parse_pages
from bookindex.operators.parsing.probe import probe_pdf


def _parse_texts(path: str) -> list[str]:
    with pymupdf.open(path) as doc:
        return [b.text for b in parse_pages(doc, 0, doc.page_count).blocks]


def test_a_real_pdf_parses_in_a_child_as_in_process(shared_data):
    pdf = str(shared_data / "mmlongbench" / "documents" / "2303.05039v2.pdf")
    assert run_isolated(_parse_texts, pdf, timeout_s=120) == _parse_texts(pdf)


def test_a_segfault_is_a_crash_with_its_signal_and_the_caller_goes_on():
    with pytest.raises(Isolated, match=r"^crashed: signal 11"):
        run_isolated(ctypes.string_at, 0, timeout_s=30)
    assert run_isolated(len, "still here", timeout_s=30) == 10


def test_the_60000_deep_outline_crashes_its_child_not_the_caller(tmp_path):
    path = tmp_path / "deep_outline.pdf"
    path.write_bytes(deep_outline(60_000))
    with pytest.raises(Isolated, match=r"^crashed: signal (11|6) \(SIG(SEGV|ABRT)\)$"):
        run_isolated(probe_pdf, str(path), timeout_s=120)  # (its stack overflows: either signal)


def test_a_stall_is_killed_at_its_budget():
    started = time.monotonic()
    with pytest.raises(Isolated, match=r"^timed out after 1 s$"):
        run_isolated(time.sleep, 3600, timeout_s=1)
    # killed, not waited for: an hour's sleep ends long before its hour on any machine
    assert time.monotonic() - started < 1800


def test_an_exception_in_the_child_keeps_its_type_message_and_traceback():
    with pytest.raises(Isolated) as raised:
        run_isolated(int, "not a number", timeout_s=30)
    assert raised.value.reason.startswith("ValueError: invalid literal")
    assert "Traceback" in raised.value.trace


def test_an_allocation_past_the_memory_budget_fails_in_the_child():
    with pytest.raises(Isolated, match="MemoryError"):
        run_isolated(bytearray, 8 << 30, timeout_s=60, memory_mb=512)


def test_no_child_outlives_its_call():
    run_isolated(os.getpid, timeout_s=30)
    with pytest.raises(Isolated):
        run_isolated(time.sleep, 60, timeout_s=0.5)
    import multiprocessing

    assert multiprocessing.active_children() == []


def _probe_or_crash(path: str):
    """A probe, but the child dies on a file named crash*.pdf (as a hostile PDF kills MuPDF)."""
    if os.path.basename(path).startswith("crash"):
        ctypes.string_at(0)
    return probe_pdf(path)


def test_many_items_in_one_child_each_get_the_verdict_of_their_own_child(shared_data, tmp_path):
    """Real PDFs probed in one child answer as each in a child of its own; an item that kills
    the child, one that stalls and one past the memory budget are each that item's failure,
    judged alone, and the items after them are still run."""
    from bookindex.operators.parsing.isolation import run_isolated_each

    papers = sorted((shared_data / "mmlongbench" / "documents").glob("23*.pdf"))[:3]
    crashing = tmp_path / "crash.pdf"
    crashing.write_bytes(b"%PDF-1.4 not really")
    items = [str(papers[0]), str(crashing), str(papers[1]), str(papers[2])]
    found = run_isolated_each(_probe_or_crash, items, timeout_s=120)
    assert [type(v).__name__ for v, _ in found] == ["Probe", "Isolated", "Probe", "Probe"]
    assert found[1][0].reason == "crashed: signal 11 (SIGSEGV)"
    for (value, seconds), path in zip(found, items, strict=True):
        if not isinstance(value, Isolated):
            assert value == run_isolated(probe_pdf, path, timeout_s=120) and seconds > 0

    stalled = run_isolated_each(time.sleep, [0, 60, 0], timeout_s=1)
    assert [v if not isinstance(v, Isolated) else v.reason for v, _ in stalled] == [
        None,
        "timed out after 1 s",
        None,
    ]
    big = run_isolated_each(bytearray, [16, 8 << 30, 16], timeout_s=60, memory_mb=512)
    assert isinstance(big[1][0], Isolated) and "MemoryError" in big[1][0].reason
    assert big[0][0] == big[2][0] == bytearray(16)
    import multiprocessing

    assert multiprocessing.active_children() == []


class _PipesKeptOpen:
    """The fork context, but every answer pipe's writing end is also held by this process (as
    a process forked elsewhere meanwhile, by another thread of a Ray worker, holds a copy), so
    that a child's death gives no end of file on the pipe."""

    def __init__(self, context) -> None:
        self.context, self.copies = context, []

    def Pipe(self, duplex: bool = True):  # noqa: N802  (multiprocessing's name)
        receive, send = self.context.Pipe(duplex)
        self.copies.append(os.dup(send.fileno()))
        return receive, send

    def Process(self, *args, **kwargs):  # noqa: N802
        return self.context.Process(*args, **kwargs)


def test_a_crash_is_a_crash_while_another_process_holds_the_pipe(monkeypatch, tmp_path):
    """The child's exit is its verdict, not the pipe's end of file: a crash is reported as the
    crash (at once), not as a stall at the end of the budget."""
    from bookindex.operators.parsing import isolation

    kept = _PipesKeptOpen(isolation._context)
    monkeypatch.setattr(isolation, "_context", kept)
    try:
        with pytest.raises(Isolated, match=r"^crashed: signal 11 \(SIGSEGV\)$"):
            run_isolated(ctypes.string_at, 0, timeout_s=600)
        crashing = tmp_path / "crash.pdf"
        crashing.write_bytes(b"%PDF-1.4 not really")
        found = isolation.run_isolated_each(_probe_or_crash, [str(crashing), "x"], timeout_s=600)
        assert found[0][0].reason == "crashed: signal 11 (SIGSEGV)"
        assert found[1][0].status == "failed"  # the item after it still ran (no such file)
        assert run_isolated(len, "still here", timeout_s=600) == 10
    finally:
        for copy in kept.copies:
            os.close(copy)
