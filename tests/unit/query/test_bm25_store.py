"""BM25 indexes kept beside the index (operators/query/bm25_store.py), on the real HotpotQA
passages: read back they score every passage as indexing gives it; a corpus changed in one text
is indexed again and the earlier index goes; a damaged index or a directory that cannot be
written costs an indexing, never a wrong or failed answer; an engine opened on an index
directory keeps its indexes there and a second engine reads them."""

from __future__ import annotations

import numpy as np
import pytest

from bookindex.operators.query.bm25 import Bm25
from bookindex.operators.query.bm25_store import PREFIX, bm25_from_store, store_key, store_path
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.read_model import ReadModel

QUERIES = ["Which magazine was started first?", "the director of the film", "Scott Derrickson"]


@pytest.fixture(scope="module")
def texts(hotpot) -> list[str]:
    passages = sorted(hotpot.values(), key=lambda p: p["id"])[:600]
    return [f"{p['title']}\n{p['text']}" for p in passages]


def _same_scores(found: Bm25, expected: Bm25) -> bool:
    return found.n == expected.n and all(
        np.array_equal(found.scores(q), expected.scores(q)) for q in QUERIES
    )


def test_a_stored_index_reads_back_as_indexing_gives_it(texts, tmp_path):
    expected = Bm25(texts)
    assert all(expected.scores(q).max() > 0 for q in QUERIES)  # words found: a real test
    built, how = bm25_from_store(texts, tmp_path, "documents")
    assert how == "built" and _same_scores(built, expected)
    assert [p.name for p in tmp_path.iterdir()] == [
        store_path(tmp_path, "documents", store_key("documents", texts)).name
    ]
    read, how = bm25_from_store(texts, tmp_path, "documents")
    assert how == "read" and _same_scores(read, expected)
    assert read.search(QUERIES, 5) == expected.search(QUERIES, 5)
    unstored, how = bm25_from_store(texts, None, "documents")
    assert how == "built" and _same_scores(unstored, expected)
    assert len(list(tmp_path.iterdir())) == 1


def test_a_changed_text_is_indexed_again_and_the_old_index_goes(texts, tmp_path):
    texts = list(texts)
    bm25_from_store(texts, tmp_path, "nodes")
    bm25_from_store(texts, tmp_path, "headings")  # another index: kept beside
    old = store_path(tmp_path, "nodes", store_key("nodes", texts))
    texts[7] += " Zanzibar"
    changed, how = bm25_from_store(texts, tmp_path, "nodes")
    assert how == "built" and _same_scores(changed, Bm25(texts))
    assert changed.scores("Zanzibar").argmax() == 7
    assert not old.exists() and len(list(tmp_path.glob(f"{PREFIX}nodes-*"))) == 1
    assert len(list(tmp_path.glob(f"{PREFIX}headings-*"))) == 1
    # the same strings cut differently are another corpus: the key length-prefixes each one
    assert store_key("nodes", ["ab", "c"]) != store_key("nodes", ["a", "bc"])


def test_a_length_normalisation_names_its_own_index(texts, tmp_path):
    default, _ = bm25_from_store(texts, tmp_path, "headings")
    lower, how = bm25_from_store(texts, tmp_path, "headings", b=0.3)
    assert how == "built" and _same_scores(lower, Bm25(texts, b=0.3))
    assert not _same_scores(lower, default)  # not the default's index read back
    again, how = bm25_from_store(texts, tmp_path, "headings", b=0.3)
    assert how == "read" and _same_scores(again, lower)
    # bm25s's default b keeps the names indexes were stored under before b was a setting
    assert store_key("headings", texts, 0.75) == store_key("headings", texts)


def test_a_damaged_index_or_an_unwritable_directory_costs_only_an_indexing(texts, tmp_path):
    expected = Bm25(texts)
    path = store_path(tmp_path, "nodes", store_key("nodes", texts))
    path.mkdir()
    (path / "params.index.json").write_text("not json")
    found, how = bm25_from_store(texts, tmp_path, "nodes")
    assert how == "built" and _same_scores(found, expected)
    assert bm25_from_store(texts, tmp_path, "nodes")[1] == "read"  # replaced
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers
    blocked = tmp_path / "a file, not a directory"
    blocked.write_text("")
    found, how = bm25_from_store(texts, blocked, "nodes")
    assert how == "built" and _same_scores(found, expected)


def test_an_engine_on_an_index_directory_reads_its_indexes_the_second_time(
    paper_tables, backend, tmp_path
):
    """The paper's engine keeps its three indexes (documents, nodes, nodes with headings) in
    the index directory; the next engine on it reads all three and answers the same."""
    first = QueryEngine(ReadModel.from_tables(paper_tables, backend), graph_dir=tmp_path)
    first.warm_up()
    assert first.retrieval.bm25_source == "built"
    assert first.model.lexical_sources == {"nodes": "built", "headings": "built"}
    second = QueryEngine(ReadModel.from_tables(paper_tables, backend), graph_dir=tmp_path)
    second.warm_up()
    assert second.retrieval.bm25_source == "read"
    assert second.model.lexical_sources == {"nodes": "read", "headings": "read"}
    for method in ("bookrag", "deepread", "hybrid", "ladrag"):
        answers = [e.answer(QUERIES[1], method, generate=False) for e in (first, second)]
        assert [a["evidence"] for a in answers[:1]] == [a["evidence"] for a in answers[1:]]
