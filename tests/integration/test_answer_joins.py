"""How the model answers reach their documents (pipelines/model_requests.attach: section
decisions, figure and table descriptions, LLM entities) on inputs with empty partitions and empty
blocks, both ways: a small answer set by a map that carries it (the job's way below
``BROADCAST_BYTES``), a larger one by a hash join (``broadcast_bytes=0`` here); both give the
same rows.

Ray 2.60's hash join takes each side's schema from its first block; a zero-row block without
columns — what ``Dataset.filter`` leaves of a block it empties — carries none, and the
partitions that then get no row of that side fail (``ColumnNotFoundError: doc_id``). ``attach``
drops such blocks first. The cases: documents whose first blocks are such empties, more
partitions than rows, and a corpus where most documents have no answer at all."""

from __future__ import annotations

import json

import pytest

from bookindex.pipelines.model_requests import attach, rows_only


def _answer(doc_id: str, node_id: str) -> dict:
    return {
        "doc_id": doc_id,
        "node_id": node_id,
        "answer": f"about {doc_id}/{node_id}",
        "answer_error": "",
        "attempts": 1,
    }


def _blocks(dataset) -> list[tuple[int, int]]:
    """(rows, columns) of each block."""
    import ray

    return [(t.num_rows, t.num_columns) for t in map(ray.get, dataset.to_arrow_refs())]


def _documents(ray, n: int, keep: set[str] | None = None):
    """``n`` document rows in a block each; with ``keep``, a Python filter empties the other
    blocks (leaving zero-row blocks without columns, as Ray's filter does)."""
    rows = [{"doc_id": f"d{i:02d}", "nodes": json.dumps([f"n{i}"])} for i in range(n)]
    dataset = ray.data.from_items(rows, override_num_blocks=n)
    if keep is not None:
        dataset = dataset.filter(lambda r: r["doc_id"] in keep)
    return dataset.materialize()


WAYS = {"join": 0, "broadcast": None}  # attach's broadcast_bytes: 0 joins, None: the default


@pytest.fixture(params=sorted(WAYS))
def way(request) -> int | None:
    return WAYS[request.param]


# The join is the job's way only for answer sets over BROADCAST_BYTES; its longer cases (their
# shuffles start aggregator actors: 20-30 s each in CI) run in `make test-slow`, the job's own way
# and the join's one-document case in every run
@pytest.fixture(params=["broadcast", pytest.param("join", marks=pytest.mark.slow)])
def way_join_slow(request) -> int | None:
    return WAYS[request.param]


def _joined(documents, answers, partitions: int, way: int | None) -> dict[str, dict | None]:
    out = attach(documents, answers, "descriptions", partitions, broadcast_bytes=way).take_all()
    return {r["doc_id"]: json.loads(r["descriptions"]) if r["descriptions"] else None for r in out}


@pytest.fixture(scope="module")
def ray(ray_session):
    return ray_session


def _with_shuffle(strategy, **settings):
    """Ray Data's shuffle strategy (and other context ``settings``) set for one test, then put
    back."""
    from ray.data.context import DataContext

    context = DataContext.get_current()
    changed = {"shuffle_strategy": strategy, **settings}
    saved = {name: getattr(context, name) for name in changed}
    for name, value in changed.items():
        setattr(context, name, value)
    yield
    for name, value in saved.items():
        setattr(context, name, value)


@pytest.fixture
def sort_groupby(ray):
    """Ray Data's shuffle as the index job sets it (``pipelines/index_pipeline.py``): the
    groupby in ``attach`` a task-based sort shuffle; the join is a hash shuffle either way.
    (With Ray's default the groupby is a hash shuffle too, whose aggregator actors took about
    a minute a join here under load.)"""
    from ray.data.context import ShuffleStrategy

    yield from _with_shuffle(ShuffleStrategy.SORT_SHUFFLE_PULL_BASED)


@pytest.fixture
def hash_groupby(ray):
    """Ray Data's default: the groupby in ``attach`` a hash shuffle as well, the other shuffle
    ``rows_only`` guards (without it, the groupby fails on the filtered answers). Into 8
    partitions, not Ray's default 200: most of them still get no answer row."""
    from ray.data.context import DataContext

    yield from _with_shuffle(DataContext().shuffle_strategy, default_hash_shuffle_parallelism=8)


def test_leading_empty_blocks_without_columns_are_dropped_before_the_join(
    ray, sort_groupby, way_join_slow
):
    way = way_join_slow
    documents = _documents(ray, 6, keep={"d05"})
    assert (0, 0) in _blocks(documents)  # the input the plain join fails on
    assert _blocks(rows_only(documents)) == [(1, 2)]
    answers = ray.data.from_items([_answer("d05", "n5")]).materialize()
    for partitions in (2, 8):  # more partitions than rows on both sides, and than CPUs
        joined = _joined(documents, answers, partitions, way)
        assert joined == {"d05": {"n5": ["about d05/n5", "", 1]}}


def test_most_documents_without_answers_keep_their_rows_with_none(ray, hash_groupby, way_join_slow):
    way = way_join_slow
    documents = _documents(ray, 12)
    # the answers side as run_requests makes it: a filter over the processor's rows
    answers = ray.data.from_items(
        [_answer(f"d{i:02d}", f"n{j}") for i in range(12) for j in range(2)],
        override_num_blocks=6,
    ).filter(lambda r: r["doc_id"] == "d07")
    joined = _joined(documents, answers.materialize(), partitions=16, way=way)
    assert sorted(joined) == [f"d{i:02d}" for i in range(12)]
    assert joined.pop("d07") == {"n0": ["about d07/n0", "", 1], "n1": ["about d07/n1", "", 1]}
    assert set(joined.values()) == {None}


def test_both_sides_with_empty_blocks_and_one_document(ray, sort_groupby, way):
    documents = _documents(ray, 4, keep={"d02"})
    answers = ray.data.from_items(
        [_answer(f"d{i:02d}", "n") for i in range(4)], override_num_blocks=4
    ).filter(lambda r: r["doc_id"] == "d02")
    assert _joined(documents, answers.materialize(), partitions=2, way=way) == {
        "d02": {"n": ["about d02/n", "", 1]}
    }
