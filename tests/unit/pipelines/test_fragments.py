"""The index job's last step without Ray: a block of document rows of two real papers (the
structure stage's own functions) written as Lance fragments of ``nodes``, ``edges`` and
``communities`` — invisible until the driver's commit, one version per table and commit, the
rows those of the documents — and a table whose fragments were never committed removed by
recovery."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

from bookindex.operators.parsing.probe import identify
from bookindex.pipelines.rows import HEAVY, from_json
from bookindex.pipelines.store import fragments, lance_store, recovery
from bookindex.pipelines.store.document_writes import node_rows, write_document_rows
from bookindex.pipelines.store.layout_graph_store import graph_tables
from bookindex.pipelines.store.schemas import (
    COMMUNITIES,
    EDGES,
    NODES,
    communities_schema,
    edges_schema,
    nodes_schema,
)
from bookindex.pipelines.structure_stage import index_documents, probe_document
from tests.conftest import PAPER, missing_shared_data

WIDTH = 384
SECOND = "2310.07609v1.pdf"  # another MMLongBench paper


@pytest.fixture(scope="module")
def blocks(shared_data) -> list[pa.Table]:
    """Two blocks of one document row each, as the structure stage makes them."""
    out = []
    for name in (PAPER, SECOND):
        path = shared_data / "mmlongbench" / "documents" / name
        if not path.exists():
            missing_shared_data(f"no {name} in the shared data")
        f = identify([str(path)])[0]
        probed = probe_document({"doc_id": f.doc_id, "uri": f.uri, "size": f.size})
        whole = pa.Table.from_pylist([dict(probed, start=0, stop=probed["n_pages"])])
        out.append(index_documents(whole, use_outline=True))
    return out


def _committed(index_dir, table: str) -> int:
    path = lance_store.table_path(index_dir, table)
    return lance.dataset(path).count_rows()


def test_rows_are_invisible_until_committed_then_one_version_per_commit(tmp_path, blocks):
    first = write_document_rows(blocks[0], str(tmp_path), WIDTH)
    assert not set(HEAVY) & set(first.column_names)
    assert first.num_rows == 1 and first["n_nodes"][0].as_py() > 20
    written = from_json(first["fragments"][0].as_py())
    assert set(written) == {NODES, EDGES, COMMUNITIES} and all(written.values())
    # data files only: no reader sees a table, and recovery would remove it
    assert not any((tmp_path / "nodes.lance" / "_versions").glob("*.manifest"))
    with pytest.raises(ValueError):
        lance.dataset(lance_store.table_path(tmp_path, NODES))

    schemas = {NODES: nodes_schema(WIDTH), EDGES: edges_schema, COMMUNITIES: communities_schema}
    for table, schema in schemas.items():
        fragments.commit(tmp_path, table, schema, written[table])
    source = blocks[0].to_pylist()
    edges, communities = graph_tables(source)
    expected = {
        NODES: node_rows(blocks[0], WIDTH),
        EDGES: edges,
        COMMUNITIES: communities,
    }
    for table in schemas:
        stored = lance.dataset(lance_store.table_path(tmp_path, table))
        assert stored.version == 1
        assert stored.to_table().to_pylist() == expected[table].to_pylist()
    assert _committed(tmp_path, NODES) == first["n_nodes"][0].as_py()

    # the next block appends: the table's rows are both documents', in one more version
    second = write_document_rows(blocks[1], str(tmp_path), WIDTH)
    more = from_json(second["fragments"][0].as_py())
    rows = fragments.commit(tmp_path, NODES, nodes_schema(WIDTH), more[NODES])
    assert rows == second["n_nodes"][0].as_py()
    stored = lance.dataset(lance_store.table_path(tmp_path, NODES))
    assert stored.version == 2
    total = first["n_nodes"][0].as_py() + second["n_nodes"][0].as_py()
    assert stored.count_rows() == total
    doc_ids = set(stored.to_table(columns=["doc_id"])["doc_id"].to_pylist())
    assert doc_ids == {blocks[0]["doc_id"][0].as_py(), blocks[1]["doc_id"][0].as_py()}
    # fragments written and never committed (a killed job) change nothing a reader sees
    write_document_rows(blocks[0], str(tmp_path), WIDTH)
    assert lance.dataset(lance_store.table_path(tmp_path, NODES)).count_rows() == total


def test_a_table_never_committed_is_removed_by_recovery(tmp_path, blocks):
    write_document_rows(blocks[0], str(tmp_path), WIDTH)  # the job killed before its commit
    assert (tmp_path / "nodes.lance").is_dir()
    assert sorted(recovery.remove_uncommitted_tables(tmp_path)) == [COMMUNITIES, EDGES, NODES]
    assert not (tmp_path / "nodes.lance").exists()
    assert fragments.commit(tmp_path, NODES, nodes_schema(WIDTH), []) == 0
