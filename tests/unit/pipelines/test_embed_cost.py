"""benchmarks/embed_cost.py counts what the enrich stage embeds: its groups of texts (node texts
by kind, the sentences cut by truncation, the entity names) are, together, exactly the texts
``pipelines.enrich_worker.embed_batch`` runs through the model on the same documents, each once,
so that its word pieces and CPU seconds by kind are those of the job."""

from __future__ import annotations

import numpy as np

from tests.conftest import SHARED_DATA, missing_shared_data

MUSIQUE = SHARED_DATA / "multihop" / "musique" / "corpus.jsonl"


class Recording:
    """The offline backend, recording every text it embeds (alone or with spans)."""

    def __init__(self, backend) -> None:
        self.backend, self.dim, self.texts = backend, backend.dim, []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return self.backend.embed(texts)

    def embed_spans(self, texts: list[str], spans: list):
        self.texts += texts
        return self.backend.embed_spans(texts, spans)


def test_the_groups_are_what_embed_batch_embeds() -> None:
    from benchmarks.embed_cost import text_groups
    from bookindex.operators.config import ModelConfig
    from bookindex.operators.graph.entities import extract_documents
    from bookindex.operators.models.offline import OfflineBackend
    from bookindex.operators.structure.passages import read_passages
    from bookindex.pipelines.enrich_worker import embed_batch, embedding_texts, passage_sentences
    from bookindex.pipelines.rows import from_json, passage_document_row

    if not MUSIQUE.is_file():
        missing_shared_data(f"{MUSIQUE} not found")
    rows = [passage_document_row(p) for p in read_passages(str(MUSIQUE))[:40]]
    backend = OfflineBackend(ModelConfig())
    node_lists = [from_json(r["nodes"]) for r in rows]
    documents = [(r["doc_id"], nodes, True) for r, nodes in zip(rows, node_lists, strict=True)]
    extractions = extract_documents(documents, backend.extract_entities_batch)
    names = [[e.name for e in x.entities] for x in extractions]
    texts = [
        t for r, nodes in zip(rows, node_lists, strict=True) for t in embedding_texts(r, nodes)
    ]
    _, sentences, spans = passage_sentences(rows, node_lists)
    recording = Recording(backend)
    embed_batch(recording, texts, spans, sentences, [n for doc in names for n in doc])

    groups = text_groups(rows, names)
    counted = [t for group, _ in groups.values() for t in group]
    assert len(counted) == len(set(counted))  # each text once
    assert sorted(counted) == sorted(recording.texts)
    # 40 MuSiQue passages: roots, paragraphs, names, and paragraphs past 128 word pieces
    assert {name for name, (found, _) in groups.items() if found} == {
        "passage root",
        "passage text",
        "sentences alone",
        "entity names",
    }
