"""Bring an index written by an older index job up to today's tables, without re-indexing.

``add_sentence_vectors``: an index built before the index job stored the vectors of a passage's
sentences (the chunks Chunk-Zoom ranks, ``nodes.sentence_vectors``) gets them: the committed
passage documents' leaves are split as the index job splits them
(``operators.graph.entity_linking.chunk_sentences``) and embedded as it embeds them
(``pipelines.enrich_worker.embed_batch``) with the configured model (the width must be the
index's), and the ``nodes`` table is written again as a new Lance version with the
column (older versions stay readable by their version number). Nothing else changes.

    bookindex migrate DIR
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

from bookindex.operators.config import ConfigError
from bookindex.operators.models import ModelBackend
from bookindex.pipelines.enrich_worker import embed_batch, embedding_texts, passage_sentences
from bookindex.pipelines.store import lance_store, recovery
from bookindex.pipelines.store.schemas import DOCUMENTS, NODES, nodes_schema


def add_sentence_vectors(index_dir: str | Path, backend: ModelBackend) -> dict[str, int]:
    """Write ``nodes.sentence_vectors`` into an index that lacks it (a no-op where it has
    it); returns the passages, leaves and sentences embedded."""
    if not lance_store.exists(index_dir, NODES):
        raise FileNotFoundError(f"no index at {index_dir} (no nodes table)")
    path = lance_store.table_path(index_dir, NODES)
    nodes = lance.dataset(path).to_table()
    if "sentence_vectors" in nodes.column_names:
        return {"passages": 0, "leaves": 0, "sentences": 0}
    width = lance_store.vector_width(index_dir)
    if width is not None and backend.dim != width:
        raise ConfigError(
            f"{index_dir} holds {width}-dimensional vectors and the configured embedding model "
            f"makes {backend.dim}-dimensional ones: configure the model the index was built with"
        )
    documents = lance_store.read_table(index_dir, DOCUMENTS, ["doc_id", "uri"])
    committed = recovery.committed_doc_ids(index_dir, documents)
    passages = {
        d for d, uri in zip(documents["doc_id"].to_pylist(), documents["uri"].to_pylist(),
                            strict=True)
        if "#" in uri and d in committed
    }  # fmt: skip
    rows = nodes.select(["doc_id", "kind", "text", "title"]).to_pylist()
    by_doc: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r["doc_id"] in passages:
            by_doc.setdefault(r["doc_id"], []).append(i)
    # as the index job finds and embeds them (pipelines/enrich_worker: passage_sentences,
    # embed_batch): read from each paragraph's run where the embedder exposes its token states
    node_lists = [[rows[i] for i in at] for at in by_doc.values()]
    sources = [{"source": "passage"}] * len(node_lists)
    counts, sentence_texts, spans = passage_sentences(sources, node_lists)
    texts = [t for nodes in node_lists for t in embedding_texts(sources[0], nodes)]
    _, vectors, _ = embed_batch(backend, texts, spans, sentence_texts, [])
    found: list[tuple[int, int] | None] = [None] * len(rows)  # (first sentence, count)
    first = 0
    for at, doc_counts in zip(by_doc.values(), counts, strict=True):
        for i, n in zip(at, doc_counts, strict=True):
            found[i] = (first, n)
            first += n
    column = [None if f is None else vectors[f[0] : f[0] + f[1]].tolist() for f in found]
    schema = nodes_schema(width or backend.dim)
    kind = schema.field("sentence_vectors").type
    table = nodes.append_column("sentence_vectors", pa.array(column, kind))
    lance.write_dataset(table.select(schema.names).cast(schema), path, mode="overwrite")
    leaves = sum(1 for f in found if f is not None and f[1])
    return {"passages": len(passages), "leaves": leaves, "sentences": len(sentence_texts)}
