"""A passage's sentence vectors (the chunks Chunk-Zoom ranks) are read from its paragraph's own
run where the embedder exposes its token states ("late chunking", pipelines/enrich_worker.
embed_batch): the mean of the word pieces inside the sentence; sentences past the paragraph's
128 word pieces, and every sentence of an embedder without token states, are run alone."""

from __future__ import annotations

import numpy as np
import pytest

from bookindex.operators.config import ModelConfig
from bookindex.operators.graph.entity_linking import chunk_sentences, sentence_spans, sentences
from bookindex.operators.kinds import LEAF_KINDS
from bookindex.operators.models.offline import OfflineBackend
from bookindex.operators.structure.passages import read_passages
from bookindex.pipelines.enrich_worker import (
    embed_batch,
    embedding_texts,
    passage_heading,
    passage_sentences,
    sentence_spans_in,
)
from bookindex.pipelines.rows import from_json, passage_document_row


@pytest.fixture(scope="module")
def backend() -> OfflineBackend:
    return OfflineBackend(ModelConfig(embed_runtime="onnx"))


@pytest.fixture(scope="module")
def passages(shared_data):
    corpus = shared_data / "multihop"
    return [
        *read_passages(str(corpus / "musique" / "corpus.jsonl")),
        *read_passages(str(corpus / "hotpotqa" / "corpus.jsonl")),
    ]


def test_spans_are_where_the_sentences_are(passages) -> None:
    for passage in passages:
        text = passage.text
        found, spans = sentences(text), sentence_spans(text)
        assert len(found) == len(spans)
        end = 0
        for sentence, (a, b) in zip(found, spans, strict=True):
            assert end <= a < b <= len(text)
            # a sentence joins its pieces with one space; its span keeps the text between
            assert text[a:b].startswith(sentence.split(" ")[0])
            assert text[a:b].endswith(sentence.split(" ")[-1])
            end = b


def test_spans_point_into_the_embedding_text(passages) -> None:
    for passage in passages[:400]:
        row = passage_document_row(passage)
        nodes = from_json(row["nodes"])
        heading = passage_heading(nodes)
        for node, embedded in zip(nodes, embedding_texts(row, nodes), strict=True):
            spans = sentence_spans_in(node, heading)
            body = node.get("text") or node.get("title") or ""
            own = sentence_spans(body) if node["kind"] in LEAF_KINDS else []
            assert len(spans) == len(chunk_sentences(node["kind"], node.get("text"), None))
            for (a, b), (a0, b0) in zip(spans, own, strict=True):
                if b <= len(embedded):  # node_embedding_text cuts at 2,000 characters
                    assert embedded[a:b] == body[a0:b0]


def test_a_span_vector_is_the_mean_of_its_word_pieces(backend) -> None:
    text = "Ada Lovelace wrote the notes. She lived in London with her mother."
    first, second = sentence_spans(text, min_chars=5)
    vectors, spans = backend.embed_spans([text], [[first, second]])
    encoder = backend._encoder
    encoding = encoder.tokenizer.encode(text)
    ids = np.asarray([encoding.ids], dtype=np.int64)
    states = encoder.hidden(ids, np.ones_like(ids))[0]
    tokens = encoding.tokens
    stop = tokens.index(".")  # [CLS] ada love ##lace wrote the notes . she ... . [SEP]
    for got, rows in ((spans[0][0], slice(1, stop + 1)), (spans[0][1], slice(stop + 1, -1))):
        mean = states[rows].mean(axis=0)
        assert np.allclose(got, mean / np.linalg.norm(mean), atol=1e-5)
    # the text's own vector is the one embed gives; a sentence read in context is not the
    # sentence run alone, but near it
    assert float(vectors[0] @ backend.embed([text])[0]) > 0.9999
    alone = backend.embed(sentences(text, min_chars=5))
    cosines = (np.stack(spans[0]) * alone).sum(axis=1)
    assert (cosines < 0.999).all() and (cosines > 0.5).all()


def test_sentences_past_the_truncation_are_run_alone(backend, passages) -> None:
    long = next(p for p in passages if len(p.text) > 1200)  # well past 128 word pieces
    row = passage_document_row(long)
    nodes = from_json(row["nodes"])
    counts, sentence_texts, spans = passage_sentences([row], [nodes])
    texts = embedding_texts(row, nodes)
    names = ["Paris", long.title]
    vectors, sentence_vectors, name_vectors = embed_batch(
        backend, texts, spans, sentence_texts, names
    )
    assert sentence_vectors.shape == (len(sentence_texts), backend.dim) == (sum(counts[0]), 384)
    assert (vectors * backend.embed(texts)).sum(axis=1).min() > 0.9999
    assert (name_vectors * backend.embed(names)).sum(axis=1).min() > 0.9999
    # the passage's title is its root's text and a name: one vector, embedded once
    assert texts[0] == long.title and np.array_equal(name_vectors[1], vectors[0])
    alone = (sentence_vectors * backend.embed(sentence_texts)).sum(axis=1)
    assert alone[0] < 0.999  # the first sentence: read in its paragraph's context
    assert alone[-1] > 0.9999  # the last: past the paragraph's 128 word pieces, run alone
    # an embedder without token states runs every sentence alone, in one call
    calls = []

    class EmbedOnly:
        dim = backend.dim

        def embed(self, batch: list[str]) -> np.ndarray:
            calls.append(batch)
            return backend.embed(batch)

    _, plain, _ = embed_batch(EmbedOnly(), texts, spans, sentence_texts, names)
    assert len(calls) == 1
    assert (plain * backend.embed(sentence_texts)).sum(axis=1).min() > 0.9999


def test_every_runtime_reads_the_same_span_vectors(backend, passages) -> None:
    texts = [f"{p.title} {p.text}" for p in passages[:12]]
    spans = [[(a + len(p.title) + 1, b + len(p.title) + 1) for a, b in sentence_spans(p.text)]
             for p in passages[:12]]  # fmt: skip
    _, reference = backend.embed_spans(texts, spans)
    # torch (the GPU's runtime) the same to rounding; bf16 products within its 0.9998
    for runtime, least in (("torch", 0.9999), ("bf16", 0.999)):
        _, got = OfflineBackend(ModelConfig(embed_runtime=runtime)).embed_spans(texts, spans)
        for ours, theirs in zip(reference, got, strict=True):
            assert [v is None for v in ours] == [v is None for v in theirs]
            pairs = [(a, b) for a, b in zip(ours, theirs, strict=True) if a is not None]
            assert pairs and min(float(a @ b) for a, b in pairs) > least, runtime
