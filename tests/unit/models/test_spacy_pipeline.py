"""The offline NER pipeline leaves out the components that feed neither NER nor the sentence
boundaries, and gives exactly the entities and sentences of the full packaged pipeline on real
MuSiQue passages (``spacy_sentences=parser``); the default, ``senter``, swaps the parser for the
senter."""

from __future__ import annotations

import pytest
import spacy

from bookindex.operators.config import ModelConfig
from bookindex.operators.models.offline import OfflineBackend, _entities_of
from bookindex.operators.structure.passages import read_passages
from tests.conftest import SHARED_DATA

CORPUS = SHARED_DATA / "multihop" / "musique"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [p.text for p in read_passages(str(CORPUS / "corpus.jsonl"))[:150]]


@pytest.fixture(scope="module")
def full(texts):
    nlp = spacy.load(ModelConfig().spacy_model)  # tagger, attribute ruler, lemmatizer too
    return list(nlp.pipe(texts))


def test_trimmed_pipeline_gives_the_full_pipelines_entities_and_sentences(texts, full) -> None:
    backend = OfflineBackend(ModelConfig(spacy_sentences="parser"))
    assert backend._nlp.pipe_names == ["tok2vec", "parser", "ner"]
    docs = list(backend._nlp.pipe(texts))
    assert [[s.text for s in d.sents] for d in docs] == [[s.text for s in d.sents] for d in full]
    assert [d.ents for d in docs] != [] and [
        [(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs
    ] == [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in full]
    assert backend.extract_entities_batch(texts) == [_entities_of(d) for d in full]


def test_senter_pipeline_keeps_nearly_all_entities(texts, full) -> None:
    backend = OfflineBackend(ModelConfig())  # the default
    assert ModelConfig().spacy_sentences == "senter"
    assert backend._nlp.pipe_names == ["senter", "ner"]
    found = backend.extract_entities_batch(texts)
    names = {(i, e.name) for i, (entities, _) in enumerate(found) for e in entities}
    before = {(i, e.name) for i, d in enumerate(full) for e in _entities_of(d)[0]}
    assert len(before) > 500
    assert len(names ^ before) <= 0.01 * len(before)


@pytest.fixture(scope="module")
def paper_texts() -> list[str]:
    """What NER reads in a real paper (its nodes' texts, as the enrich stage takes them)."""
    import pyarrow as pa

    from bookindex.operators.graph.entities import node_text
    from bookindex.pipelines.rows import from_json
    from bookindex.pipelines.structure_stage import index_documents, probe_document

    pdf = SHARED_DATA / "mmlongbench" / "documents" / "2303.05039v2.pdf"
    row = dict(probe_document({"doc_id": "paper", "uri": str(pdf), "size": pdf.stat().st_size}))
    row.update(start=0, stop=row["n_pages"])
    (doc,) = index_documents(pa.Table.from_pylist([row]), use_outline=True).to_pylist()
    found = [node_text(n) for n in from_json(doc["nodes"])]
    return list(dict.fromkeys(t for t in found if t.strip()))


def test_numpy_matrix_products_give_blis_entities_and_sentences(texts, paper_texts) -> None:
    """The backend's pipeline multiplies with NumPy's BLAS (less CPU than thinc's BLIS): the
    same entities, sentences and relations as the pipeline with thinc's default ops, on a real
    paper's node texts and on MuSiQue passages (every text on the machine this was measured on;
    at most one text in 200 apart on any CPU)."""
    from thinc.api import NumpyOps

    from bookindex.operators.models.offline import SPACY_UNUSED

    backend = OfflineBackend(ModelConfig())
    layers = [layer for _, c in backend._nlp.pipeline for layer in c.model.walk()]
    assert layers and all(isinstance(x.ops, NumpyOps) and not x.ops.use_blis for x in layers)
    blis = spacy.load(ModelConfig().spacy_model, exclude=[*SPACY_UNUSED, "parser", "tok2vec"])
    blis.enable_pipe("senter")
    assert blis.get_pipe("ner").model.ops.use_blis  # thinc's default: what this is against
    both = paper_texts + texts
    assert len(paper_texts) > 100
    docs = list(blis.pipe(both))
    mine = list(backend._nlp.pipe(both))
    spans = _spans(docs)
    assert sum(map(len, spans)) > 500
    # Two BLAS libraries add in different orders: on this machine's CPU every text came out the
    # same; on another, a near-tie may flip in a text or two, not more (no test may depend on
    # the CPU's features)
    allowed = len(both) // 200
    assert sum(a != b for a, b in zip(_sentences(mine), _sentences(docs), strict=True)) <= allowed
    assert sum(a != b for a, b in zip(_spans(mine), spans, strict=True)) <= allowed
    extracted = backend.extract_entities_batch(both)
    expected = [_entities_of(d) for d in docs]
    assert sum(a != b for a, b in zip(extracted, expected, strict=True)) <= allowed


def _sentences(docs) -> list[list[str]]:
    return [[s.text for s in d.sents] for d in docs]


def _spans(docs) -> list[list[tuple[int, int, str]]]:
    return [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs]
