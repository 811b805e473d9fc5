"""The query side over Lance indexes written by the index job: the reader (committed rows, one
snapshot), the query engine and passage retrieval opened from a directory, and ``jobs.query``.
The methods themselves are tested without Ray or Lance in tests/unit/query."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bookindex.operators.config import BookindexConfig, WalkConfig
from bookindex.operators.query.documents import TITLE_ENTITY
from bookindex.operators.query.read_model import COLUMNS
from bookindex.operators.query.registry import QUERY_METHODS
from bookindex.pipelines.store.reader import open_engine, read_index
from tests.conftest import PAPER, REPO

CPU = BookindexConfig(walk=WalkConfig(device="cpu"))


@pytest.fixture(scope="module")
def engine(paper_index):
    return open_engine(paper_index, CPU)


@pytest.mark.parametrize("method", QUERY_METHODS)
def test_every_method_answers_from_the_lance_index(engine, method):
    result = engine.answer("What datasets are used in the study?", method, PAPER)
    assert result["error"] is None, result["error"]
    assert len(result["evidence"]) >= 1 and result["evidence"][0]["doc"] == PAPER


def test_the_reader_reads_each_table_once_through_the_commit_rule(paper_index):
    tables = read_index(paper_index)
    committed = set(tables.documents.column("doc_id").to_pylist())
    for name in ("nodes", "mentions", "relations", "edges", "communities"):
        table = getattr(tables, name)
        assert table.num_rows > 0, name
        assert table.column_names == COLUMNS[name]  # the read model's columns only
    assert len(committed) == 1
    with pytest.raises(FileNotFoundError, match="no index"):
        read_index(paper_index.parent / "nowhere")


def test_query_job_prints_json(paper_index):
    command = [sys.executable, "-m", "bookindex.jobs.query", "How many tables are on page 4?"]
    command += ["--index", str(paper_index), "--doc", PAPER, "--json", "--set", "query.k=3"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout[done.stdout.index("{") :])
    assert result["answer"] == "3" and result["method"] == "bookrag"
    bad = subprocess.run(
        [sys.executable, "-m", "bookindex.jobs.query", " ", "--index", str(paper_index)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "empty" in bad.stdout
    wrong = subprocess.run(
        [
            sys.executable,
            "-m",
            "bookindex.jobs.query",
            "q",
            "--index",
            str(paper_index),
            "--set",
            "query.k=0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert wrong.returncode == 2 and "query.k" in wrong.stderr


def test_indexed_hotpotqa_passages_get_title_entities(hotpot_questions_index):
    """Through the index job and the reader: title entities follow the index's entities, and
    zoom ranks both passages of a bridge question first. (The session's 25 HotpotQA passages,
    shared with the Serve test: the first 12 of them were this test's own index before.)"""
    index, _ = hotpot_questions_index
    engine = open_engine(index, CPU)
    view = engine.zoom.view
    titles = [i for i, e in enumerate(view.entity_ids) if e.startswith(TITLE_ENTITY)]
    assert titles and min(titles) == view.n_index_entities
    position = {view.external_id(d): d for d in range(view.n_docs)}
    named = {view.entity_names[e][0] for e in view.doc_entity[position["p24"]].indices}
    assert {"Recovery of Aristotle", "Haymo of Faversham"} <= named
    assert view.entity_ids[view.title_entity[position["p24"]]] == "title:haymo of faversham"
    question = (
        "What language were books being translated into during the era of Haymo of Faversham?"
    )
    hits = engine.retrieval.retrieve([question], "zoom", k=2)[0]
    assert {h.id for h in hits} == {"p21", "p24"}
    assert hits[0].chunks  # Chunk-Zoom evidence still attached
    answer = engine.answer(question, "zoom", k=3)  # the query API's zoom: the same walks
    assert {"p21", "p24"} & {e["doc"] for e in answer["evidence"]}
    # A passage's sentences share its node: Chunk-Zoom seeds by their cosine whatever
    # walk.seed_scores says (the relevance seed reads a PDF's leaves).
    cosine = open_engine(
        index, BookindexConfig(walk=WalkConfig(device="cpu", seed_scores="similarity"))
    )
    assert cosine.answer(question, "zoom", k=3)["evidence"] == answer["evidence"]
    chunks = [c for d in range(view.n_docs) for c in engine.zoom.chunks(d)]
    vectors = engine.model.embed([question])
    assert engine._relevance_seeds([question], vectors, chunks) == [None]
