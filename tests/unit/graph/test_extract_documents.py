"""Entities of a batch of documents in one model pass (``extract_documents``) are exactly the
ones a pass per document gives, on real MuSiQue passages read by the packaged spaCy model."""

from __future__ import annotations

import logging
from dataclasses import asdict

import pytest

from bookindex.operators.config import ModelConfig
from bookindex.operators.graph.entities import extract_document, extract_documents
from bookindex.operators.models.offline import OfflineBackend
from bookindex.operators.structure.passages import passage_nodes, read_passages
from tests.conftest import SHARED_DATA

CORPUS = SHARED_DATA / "multihop" / "musique"


@pytest.fixture(scope="module")
def documents() -> list[tuple[str, list[dict], bool]]:
    passages = read_passages(str(CORPUS / "corpus.jsonl"))[:40]
    out = [(p.doc_id, [asdict(n) for n in passage_nodes(p)[0]], True) for p in passages]
    # the same text in two documents: read once, found in both
    return [*out, ("copy", out[0][1], True)]


@pytest.fixture(scope="module")
def backend() -> OfflineBackend:
    return OfflineBackend(ModelConfig())


def test_one_pass_gives_the_per_document_entities(documents, backend) -> None:
    calls: list[list[str]] = []

    def counted(texts: list[str]):
        calls.append(list(texts))
        return backend.extract_entities_batch(texts)

    batched = extract_documents(documents, counted)
    single = [extract_document(d, n, backend.extract_entities_batch, t) for d, n, t in documents]
    assert batched == single
    assert sum(len(x.entities) for x in batched) > 100  # real passages name many things
    assert len(calls) == 1 and len(calls[0]) == len(set(calls[0])) == 40  # the copy read once


def test_a_failing_pass_falls_back_to_each_document(documents, backend, caplog) -> None:
    poisoned = documents[3][1][-1]["text"]

    def fails_on_one(texts: list[str]):
        if poisoned in texts:
            raise ValueError("unreadable")
        return backend.extract_entities_batch(texts)

    with caplog.at_level(logging.WARNING, logger="bookindex.operators.graph.entities"):
        batched = extract_documents(documents[:6], fails_on_one)
    assert "entity extraction of 6 documents" in caplog.text and "unreadable" in caplog.text
    assert [bool(x.errors) for x in batched] == [False, False, False, True, False, False]
    # the poisoned document's own batch failed too (a warning row), then its node alone
    first, last = batched[3].errors[0], batched[3].errors[-1]
    assert first.startswith("entity extraction of the document's batch") and "unreadable" in first
    assert last.startswith(documents[3][1][-1]["node_id"])
    good = extract_document(*documents[0][:2], backend.extract_entities_batch, True)
    assert batched[0] == good
