"""The hostile-input corpus (operators/eval/hostile_corpus.py, reduced for CI) in one job: every
good input indexed, every bad one a failed document row or a failure row with its reason (a
PDF that crashes MuPDF as ``crashed: signal 11`` (or 6), a stalling one as ``timed out after 10 s``), exit 0,
exit 1 under --strict; a re-run adds no failure rows."""

from __future__ import annotations

import os
import re

import pytest

from bookindex.jobs import index_corpus
from bookindex.jobs.make_hostile_corpus import good_inputs
from bookindex.operators.eval.hostile_corpus import build_hostile_corpus
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, FAILURES, NODES

BUDGET = ["--set", "index.doc_timeout_s=10"]


@pytest.fixture(scope="module")
def hostile_run(ray_session, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    pdfs, passages = good_inputs(shared_data, reduced=True)
    manifest = build_hostile_corpus(root / "corpus", pdfs, passages, reduced=True)
    corpus = root / "corpus"
    inputs = [str(corpus / "pdfs"), str(corpus / "passages.jsonl"), str(corpus / "**" / "*.pdf")]
    out = root / "index"
    code = index_corpus.main([*inputs, "--out", str(out), "--no-enrich", *BUDGET])
    docs = {d["uri"]: d for d in lance_store.read_table(out, DOCUMENTS).to_pylist()}
    failures = lance_store.read_table(out, FAILURES).to_pylist()
    return manifest, corpus, inputs, out, code, docs, failures


def test_the_job_exits_zero(hostile_run):
    assert hostile_run[4] == 0


def test_every_good_pdf_is_indexed_and_every_bad_one_has_its_reason(hostile_run):
    manifest, _, _, out, _, docs, failures = hostile_run
    nodes = lance_store.read_table(out, NODES, ["doc_id"])["doc_id"].to_pylist()
    by_uri = {f["uri"]: f for f in failures}
    for item in manifest["inputs"]:
        path, expect = item["path"], item["expect"]
        doc = docs.get(os.path.realpath(path)) if expect != "problem" else None
        if expect == "ok":
            assert doc is not None and doc["status"] == "ok", item
            assert doc["doc_id"] in nodes
        elif expect in ("failed", "needs_ocr"):
            assert doc is not None and doc["status"] == expect and doc["error"], item
            assert by_uri[doc["uri"]]["error"] == doc["error"]
        elif expect == "either":  # read or refused: either way recorded
            assert doc is not None and (doc["status"] == "ok" or doc["error"]), item
        else:
            assert by_uri[path]["error"], item
            assert path not in docs


def test_a_crash_and_a_stall_are_failed_rows_with_their_reason(hostile_run):
    corpus, docs = hostile_run[1], hostile_run[5]
    crashed = docs[str(corpus / "pdfs" / "deep_outline.pdf")]
    assert crashed["status"] == "failed"
    assert re.match(
        r"crashed: signal (11|6) \(SIG(SEGV|ABRT)\)$", crashed["error"]
    )  # how MuPDF dies
    stalled = docs[str(corpus / "pdfs" / "text_op_bomb.pdf")]
    assert stalled["status"] == "failed" and stalled["error"] == "timed out after 10 s"


def test_every_passage_line_is_indexed_or_a_failure_with_its_rule(hostile_run):
    manifest, corpus, _, _, _, docs, failures = hostile_run
    source = str((corpus / "passages.jsonl").resolve())
    errors = {f["uri"]: f["error"] for f in failures}
    for item in manifest["passages"]:
        if item["expect"] == "ok":
            assert docs[f"{source}#{item['id']}"]["status"] == "ok"
        else:
            assert errors[f"{source}#line{item['line']}"].startswith(f"line {item['line']}: ")
    texts = [d for d in docs if d.startswith(source)]
    assert len(texts) == sum(1 for p in manifest["passages"] if p["expect"] == "ok")


def test_a_rerun_adds_nothing_and_strict_exits_one(hostile_run):
    _, _, inputs, out, _, docs, failures = hostile_run
    code = index_corpus.main([*inputs, "--out", str(out), "--no-enrich", "--strict", *BUDGET])
    assert code == 1
    again = lance_store.read_table(out, FAILURES).to_pylist()
    key = sorted((f["uri"], f["stage"], f["error"]) for f in failures)
    assert sorted((f["uri"], f["stage"], f["error"]) for f in again) == key
    assert len(lance_store.read_table(out, DOCUMENTS).to_pylist()) == len(docs)
