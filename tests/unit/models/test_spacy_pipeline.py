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
