"""The entity-resolution reranker hook: a configured cross-encoder scores the candidates (its
scores are the decisions' scores); without one, the resolver rescales the cosines."""

from __future__ import annotations

import numpy as np
import pytest

from bookindex.operators.config import ModelConfig, ResolverConfig
from bookindex.operators.graph.entities import LocalEntity, NodeExtraction
from bookindex.operators.graph.entity_sets import CorpusEntities, resolve_document
from bookindex.operators.models import ModelError, check_config, load_backend, load_reranker
from bookindex.operators.models.offline import embedding_model_path


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory) -> str:
    """A local cross-encoder directory: the packaged MiniLM with a (seeded) one-logit head."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("cross_encoder")
    model = AutoModelForSequenceClassification.from_pretrained(embedding_model_path(), num_labels=1)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(embedding_model_path()).save_pretrained(path)
    return str(path)


def _extraction(names: list[str]) -> NodeExtraction:
    out = NodeExtraction()
    for i, name in enumerate(names):
        entity = LocalEntity(name, "PERSON", f"{name} in a passage")
        entity.mention(f"n{i}")
        out.entities.append(entity)
    return out


NAMES = ["Lester Smith", "Lester J. Smith", "Tim Brown", "Timothy Brown", "Smith"]


def test_no_reranker_configured_means_rescaled_cosine() -> None:
    assert load_reranker(ModelConfig()) is None
    with pytest.raises(ModelError, match="rerank_model"):
        check_config(ModelConfig(rerank_model="/nonexistent/cross-encoder"))


def test_configured_cross_encoder_scores_the_candidates(cross_encoder_dir) -> None:
    config = ModelConfig(rerank_model=cross_encoder_dir)
    check_config(config)
    rerank = load_reranker(config)
    vectors = load_backend(ModelConfig()).embed(NAMES)
    # a permissive rule, so that candidates reach the reranker and are decided on its scores
    rules = ResolverConfig(floor=0.0, c0=0.0)
    with_model = resolve_document("d", _extraction(NAMES), vectors, rules, rerank=rerank)
    scored = [d for d in with_model.decisions if d.candidates]
    assert scored
    for decision in scored:
        expected = rerank(decision.new_name, decision.candidates, np.zeros(0))
        assert sorted(decision.scores) == sorted(round(float(s), 5) for s in expected)
    cosine = resolve_document("d", _extraction(NAMES), vectors, rules)
    assert [d.scores for d in cosine.decisions] != [d.scores for d in with_model.decisions]


def test_corpus_resolution_uses_the_same_reranker(cross_encoder_dir) -> None:
    rerank = load_reranker(ModelConfig(rerank_model=cross_encoder_dir))
    vectors = load_backend(ModelConfig()).embed(NAMES)
    corpus = CorpusEntities(vectors.shape[1], ResolverConfig(floor=0.0, c0=0.0), rerank=rerank)
    assert corpus.resolver.rerank is rerank
    docs = [
        {
            "doc_id": f"d{i}",
            "entities": [
                {
                    "name": n,
                    "type": "PERSON",
                    "description": "",
                    "aliases": [],
                    "structural_key": "",
                }
            ],
        }
        for i, n in enumerate(NAMES)
    ]
    for doc, vector in zip(docs, vectors, strict=True):
        doc["vectors"] = vector[None, :]
    results = corpus.resolve(docs)
    decided = [d for r in results for d in r["decisions"] if d["candidates"]]
    assert decided
    for d in decided:
        expected = rerank(d["new_name"], d["candidates"], np.zeros(0))
        assert sorted(d["scores"]) == sorted(round(float(s), 5) for s in expected)
