"""An index of one real paper built in memory, without Ray or Lance: the index job's own stage
functions (probe, parse + assemble + layout graph, enrich: vectors and entities with the offline
models) on MMLongBench's 2303.05039v2.pdf (9 pages: Tables 1–6, Figures 1–2, numbered sections),
their rows turned into the tables a read model is built from. Entities keep the document's own
resolution (one document: no corpus resolution to do); their ids are local to this fixture."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from bookindex.operators.config import BookindexConfig, WalkConfig
from bookindex.operators.models import ModelConfig, load_backend
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.read_model import COLUMNS, IndexTables, ReadModel
from tests.conftest import PAPER


def tables_of(doc_rows: list[dict]) -> IndexTables:
    """The read model's tables from enriched document rows of the index job."""
    from bookindex.pipelines.store.document_writes import node_rows
    from bookindex.pipelines.store.layout_graph_store import graph_tables

    batch = pa.Table.from_pylist(doc_rows)
    edges, communities = graph_tables(doc_rows)
    entities, mentions, relations = [], [], []
    for row in doc_rows:
        ids = []
        for entity in json.loads(row.get("entities") or "[]"):
            ids.append(f"{row['doc_id'][:8]}:{len(ids)}")
            entities.append(dict(entity, entity_id=ids[-1], doc_id=""))
            mentions += [{"entity_id": ids[-1], "node_id": n} for n in entity["node_ids"]]
        for r in json.loads(row.get("relations") or "[]"):
            relations.append(
                {
                    "src_entity": ids[r["source"]],
                    "dst_entity": ids[r["target"]],
                    "weight": r["weight"],
                }
            )
    documents = [{k: row[k] for k in COLUMNS["documents"]} for row in doc_rows]

    def table(name: str, rows: list[dict]) -> pa.Table:
        return pa.table({c: pa.array([r.get(c) for r in rows]) for c in COLUMNS[name]})

    return IndexTables(
        documents=table("documents", documents),
        nodes=node_rows(batch, load_backend(ModelConfig()).dim).select(COLUMNS["nodes"]),
        entities=table("entities", entities),
        mentions=table("mentions", mentions),
        relations=table("relations", relations),
        edges=edges.select(COLUMNS["edges"]),
        communities=communities.select(COLUMNS["communities"]),
    )


def index_pdfs(paths: list[str]) -> list[dict]:
    """PDFs through the index job's stage functions, in this process: enriched document rows."""
    from bookindex.operators.config import ResolverConfig
    from bookindex.operators.parsing.probe import identify
    from bookindex.pipelines.enrich_worker import EnrichWorker
    from bookindex.pipelines.structure_stage import index_documents, probe_document

    probed = [
        probe_document({"doc_id": f.doc_id, "uri": f.uri, "size": f.size}) for f in identify(paths)
    ]
    whole = pa.Table.from_pylist([dict(p, start=0, stop=p["n_pages"]) for p in probed])
    enrich = EnrichWorker(ModelConfig().to_dict(), ResolverConfig().model_dump())
    return enrich(index_documents(whole, use_outline=True)).to_pylist()


@pytest.fixture(scope="session")
def paper_rows(shared_data) -> list[dict]:
    return index_pdfs([str(shared_data / "mmlongbench" / "documents" / PAPER)])


@pytest.fixture(scope="session")
def paper_tables(paper_rows) -> IndexTables:
    return tables_of(paper_rows)


@pytest.fixture(scope="session")
def backend():
    return load_backend(ModelConfig())


@pytest.fixture(scope="session")
def config() -> BookindexConfig:
    return BookindexConfig(walk=WalkConfig(device="cpu"))


@pytest.fixture(scope="session")
def engine(paper_tables, backend, config) -> QueryEngine:
    return QueryEngine(ReadModel.from_tables(paper_tables, backend), config)


@pytest.fixture(scope="session")
def index(engine) -> ReadModel:
    return engine.model


@pytest.fixture(scope="session")
def doc(index) -> int:
    return index.find_document(PAPER)
