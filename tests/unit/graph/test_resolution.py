"""The gradient rule (BookRAG Algorithm 1) on hand-made score lists, and the incremental
resolver on hand-made vectors."""

from __future__ import annotations

import numpy as np
import pytest

from bookindex.operators.config import ResolverConfig
from bookindex.operators.graph.entities import LocalEntity, LocalRelation, NodeExtraction
from bookindex.operators.graph.entity_sets import CorpusEntities, resolve_document
from bookindex.operators.graph.resolution import (
    EXACT,
    LLM,
    MERGE,
    NEW,
    SELECT,
    SELECTION_FAILED,
    Canonical,
    Resolver,
    gradient_select,
    model_selector,
)
from bookindex.operators.graph.vector_index import VectorIndex


def test_sharp_drop_merges_with_the_top_candidate():
    choice = gradient_select([0.2, 0.95, 0.3, 0.1])
    assert choice.action == MERGE
    assert choice.selected == [1]


def test_flat_scores_carry_no_gradient_so_the_entity_is_new():
    scores = [0.9, 0.88, 0.86, 0.85, 0.83, 0.8, 0.79, 0.78, 0.76, 0.75]
    choice = gradient_select(scores)
    assert choice.action == NEW
    assert "no gradient" in choice.reason


def test_several_aliases_go_to_selection_in_score_order():
    # sorted: 0.9 → 0.8 → 0.7 → 0.5 all pass g=0.6; 0.1 < 0.6×0.5 stops
    choice = gradient_select([0.5, 0.9, 0.1, 0.8, 0.7, 0.05])
    assert choice.action == SELECT
    assert choice.selected == [1, 3, 4, 0]
    choice = gradient_select([0.9, 0.8, 0.3, 0.2])
    assert choice.selected == [0, 1]


def test_fewer_than_top_k_candidates():
    assert gradient_select([0.9]).action == MERGE  # one candidate above the floor
    assert gradient_select([0.9, 0.2]).action == MERGE
    assert gradient_select([0.9, 0.85]).action == NEW  # all of them pass: no gradient
    assert gradient_select([0.3]).action == NEW  # below the floor


def test_empty_store_and_low_scores_are_new():
    assert gradient_select([]).action == NEW
    choice = gradient_select([0.4, 0.1, 0.05])
    assert choice.action == NEW
    assert "floor" in choice.reason


def test_zero_scores_never_pass_and_only_top_k_are_read():
    assert gradient_select([0.9, 0.0, 0.0]).action == MERGE
    # eleven flat scores: the 11th is beyond top_k, so all 10 read pass → new
    assert gradient_select([0.9] * 11, ResolverConfig(top_k=10)).action == NEW
    assert gradient_select([0.9, 0.3] + [0.9] * 0, ResolverConfig(top_k=1)).action == MERGE


def test_the_configured_gradient_and_floor_decide():
    assert gradient_select([0.9, 0.5]).action == MERGE  # 0.5 < 0.6 × 0.9
    assert gradient_select([0.9, 0.5], ResolverConfig(g=0.5)).action == NEW  # both pass
    assert gradient_select([0.65]).action == MERGE
    assert gradient_select([0.65], ResolverConfig(floor=0.7)).action == NEW


def _unit(rng, n, dim=16):
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_resolver_merges_a_near_duplicate_and_keeps_distinct_ones():
    rng = np.random.default_rng(0)
    base = _unit(rng, 5)
    resolver = Resolver(dim=16)
    positions, decisions = resolver.resolve(
        [f"entity {i}" for i in range(5)], ["X"] * 5, [""] * 5, base
    )
    assert [d.action for d in decisions] == [NEW] * 5
    near = base[2] + 0.05 * _unit(rng, 1)[0]
    near /= np.linalg.norm(near)
    positions, decisions = resolver.resolve(["Entity Two"], ["X"], [""], near[None])
    assert decisions[0].action == MERGE
    assert positions == [2]
    assert resolver.entities[2].aliases == ["Entity Two"]
    # the same name again merges at once, without a search
    _, decisions = resolver.resolve(["ENTITY  two"], ["Y"], [""], _unit(rng, 1))
    assert decisions[0].action == EXACT
    assert decisions[0].entity_id == resolver.entities[2].entity_id


def test_within_a_batch_later_entities_see_earlier_new_ones():
    rng = np.random.default_rng(1)
    v = _unit(rng, 1)[0]
    twin = v + 0.02 * _unit(rng, 1)[0]
    twin /= np.linalg.norm(twin)
    resolver = Resolver(dim=16)
    positions, decisions = resolver.resolve(
        ["Alpha", "Alpha Corp"], ["ORG"] * 2, ["", ""], np.stack([v, twin])
    )
    assert [d.action for d in decisions] == [NEW, MERGE]
    assert positions == [0, 0]
    assert len(resolver) == 1


def _two_selected(rng, select) -> Resolver:
    """A resolver of three stored entities whose reranker scores the candidates 0.9, 0.8, 0.1:
    the rule selects the first two, and ``select`` picks among them."""

    def rerank(name, names, cosines):
        return np.array([0.9, 0.8, 0.1][: len(names)], np.float32)

    resolver = Resolver(dim=16, rerank=rerank, select=select)
    entities = [Canonical("e1", "A", "X", ""), Canonical("e2", "B", "X", "")]
    resolver.load([*entities, Canonical("e3", "C", "X", "")], _unit(rng, 3))
    return resolver


def test_structural_entities_are_always_new_and_selection_uses_the_model():
    rng = np.random.default_rng(2)
    v = _unit(rng, 1)
    resolver = Resolver(dim=16)
    resolver.resolve(["Table 1"], ["TABLE"], [""], v, fixed_new=[True])
    _, decisions = resolver.resolve(["Table 1 "], ["TABLE"], [""], v, fixed_new=[True])
    assert decisions[0].action == NEW and len(resolver) == 2
    assert resolver.entities[0].entity_id != resolver.entities[1].entity_id

    picked = []

    def select(name, candidates, scores):
        picked.append([c.name for c in candidates])
        return len(candidates) - 1

    resolver = _two_selected(rng, select)
    positions, decisions = resolver.resolve(["D"], ["X"], [""], _unit(rng, 1))
    assert decisions[0].action == LLM
    assert len(picked[0]) == 2
    assert decisions[0].entity_id == decisions[0].selected[-1]


class _FailingBackend:
    """A generative backend whose every call fails (an endpoint down after its retries)."""

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages, schema=None):
        from bookindex.operators.models.base import ModelError

        self.calls += 1
        raise ModelError("chat request to http://127.0.0.1:9/v1 failed: connection refused")


def test_a_failed_model_selection_is_the_rules_decision_with_the_error():
    rng = np.random.default_rng(2)
    backend = _FailingBackend()
    resolver = _two_selected(rng, model_selector(backend))
    positions, decisions = resolver.resolve(["D"], ["X"], [""], _unit(rng, 1))
    assert backend.calls == 1  # the model was asked
    decision = decisions[0]
    # the rule's decision (the best-scoring of the two selected), not the model's
    assert decision.action == SELECT and decision.action != LLM
    assert len(decision.selected) == 2 and decision.entity_id == decision.selected[0]
    assert decision.candidate_ids[0] == decision.selected[0]  # the top reranked candidate
    ids = [e.entity_id for e in resolver.entities]
    assert positions == [ids.index(decision.selected[0])]  # merged into it, not made new
    assert SELECTION_FAILED in decision.reason and "connection refused" in decision.reason


@pytest.mark.parametrize("n", [50, 5000])
def test_vector_index_matches_exact_search(n):
    rng = np.random.default_rng(3)
    vectors = _unit(rng, n, 32)
    queries = vectors[:20] + 0.01 * _unit(rng, 20, 32)
    index = VectorIndex(32, exact_limit=1000)
    index.add(vectors[: n // 2])
    index.add(vectors[n // 2 :])
    ids, sims = index.search(queries, 10)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    assert ids.shape == (20, min(10, n))
    assert (ids[:, 0] == np.arange(20)).all()
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact, strict=True)])
    assert recall >= 0.95
    assert np.all(np.diff(sims, axis=1) <= 1e-6)


def test_batches_decide_as_one_entity_at_a_time():
    # planted aliases (some within a batch, some across batches), exact search throughout
    rng = np.random.default_rng(4)
    base = _unit(rng, 150, 32)
    noise = _unit(rng, 300, 32)
    vectors = np.concatenate([base, base[rng.integers(0, 150, 300)] + 0.35 * noise])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors[rng.permutation(len(vectors))]
    names = [f"entity {i}" for i in range(len(vectors))]
    outcomes = []
    for batch in (1, 64, len(vectors)):
        resolver = Resolver(dim=32)
        decisions = []
        for start in range(0, len(vectors), batch):
            end = start + batch
            decisions += resolver.resolve(
                names[start:end], ["X"] * batch, [""] * batch, vectors[start:end]
            )[1]
        outcomes.append(decisions)
    actions = {d.action for d in outcomes[0]}
    assert MERGE in actions and NEW in actions
    for other in outcomes[1:]:
        for a, b in zip(outcomes[0], other, strict=True):
            assert (a.action, a.entity_id, a.candidate_ids) == (
                b.action,
                b.entity_id,
                b.candidate_ids,
            )
            assert np.allclose(a.scores, b.scores, atol=2e-5)


def test_ivf_probing_every_cell_is_exact_search():
    rng = np.random.default_rng(5)
    vectors = _unit(rng, 3000, 24)
    queries = _unit(rng, 40, 24)
    index = VectorIndex(24, exact_limit=400, n_lists=32, n_probe=32, spill=2)
    for start in range(0, 3000, 700):
        index.add(vectors[start : start + 700])
    assert index.is_ivf
    ids, sims = index.search(queries, 10)
    exact = queries @ vectors.T
    expected = np.lexsort((np.arange(3000)[None, :].repeat(40, 0), -exact), axis=1)[:, :10]
    assert (ids == expected).all()  # each id once, though every vector sits in two cells
    assert np.allclose(sims, np.take_along_axis(exact, ids, axis=1), atol=1e-5)


def test_ivf_is_deterministic_and_independent_of_batch_sizes():
    rng = np.random.default_rng(6)
    vectors = _unit(rng, 4000, 32)
    queries = vectors[::97] + 0.05 * _unit(rng, len(vectors[::97]), 32)
    answers = []
    for batch in (4000, 333, 333):
        index = VectorIndex(32, exact_limit=500)
        for start in range(0, 4000, batch):
            index.add(vectors[start : start + batch])
        answers.append(index.search(queries, 10))
    for ids, sims in answers[1:]:
        assert (ids == answers[0][0]).all() and (sims == answers[0][1]).all()
    ids = answers[0][0]
    assert (ids[:, 0] == np.arange(0, 4000, 97)).all()
    assert ((ids >= 0).sum(axis=1) == 10).all()


def test_corpus_entities_remember_aliases_found_within_a_document():
    rng = np.random.default_rng(7)
    v = _unit(rng, 3, 16)
    corpus = CorpusEntities(16)

    def doc(doc_id, name, aliases, vector):
        entity = {"name": name, "type": "ORG", "description": "", "aliases": aliases}
        return {"doc_id": doc_id, "entities": [entity], "vectors": vector[None, :]}

    first = corpus.resolve([doc("a", "International Business Machines", ["IBM"], v[0])])[0]
    # a later document names it by the alias only, with an unrelated name vector
    second = corpus.resolve([doc("b", "IBM", [], v[1]), doc("c", "ibm", [], v[2])])
    assert second[0]["entity_ids"] == first["entity_ids"]
    assert second[1]["entity_ids"] == first["entity_ids"]
    assert [r["decisions"][0]["action"] for r in second] == [EXACT, EXACT]
    assert len(corpus) == 1
    assert corpus.resolver.entities[0].aliases[0] == "IBM"
    rows, vectors = corpus.canonical_rows()
    assert [r["name"] for r in rows] == ["International Business Machines"]
    assert vectors.shape == (1, 16)


def _extraction(names: list[str], types: list[str]) -> NodeExtraction:
    entities = [
        LocalEntity(n, t, f"about {n}", [f"n{i}"])
        for i, (n, t) in enumerate(zip(names, types, strict=True))
    ]
    relations = [LocalRelation(0, i, "co_occurs", 1.0, "", "n0") for i in range(1, len(names))]
    return NodeExtraction(entities, relations)


def test_one_resolver_config_reaches_the_document_and_the_corpus_scope():
    rng = np.random.default_rng(9)
    v = _unit(rng, 1, 16)[0]
    near = v + 0.05 * _unit(rng, 1, 16)[0]
    vectors = np.stack([v, near / np.linalg.norm(near), _unit(rng, 1, 16)[0]])
    extraction = _extraction(["Acme", "Acme Corp", "Table 1"], ["ORG", "ORG", "TABLE"])
    merged = resolve_document("d", extraction, vectors)
    # the near duplicate merges (an alias), the table stays one object; relations re-pointed
    assert [e["name"] for e in merged.entities] == ["Acme", "Table 1"]
    assert merged.entities[0]["aliases"] == ["Acme Corp"]
    assert merged.entities[0]["node_ids"] == ["n0", "n1"]
    assert merged.vector_rows == [0, 2]
    assert [(r["source"], r["target"]) for r in merged.relations] == [(0, 1)]
    strict = ResolverConfig(floor=1.0)  # nothing short of identical vectors merges
    unmerged = resolve_document("d", extraction, vectors, strict)
    assert [e["name"] for e in unmerged.entities] == ["Acme", "Acme Corp", "Table 1"]
    outcomes = []
    for config in (None, strict):
        corpus = CorpusEntities(16, config)
        docs = [
            {
                "doc_id": d,
                "entities": [{"name": n, "type": "ORG", "aliases": []} | {"description": ""}],
                "vectors": x[None, :],
            }
            for d, n, x in (("a", "Acme", vectors[0]), ("b", "Acme Corp", vectors[1]))
        ]
        outcomes.append([r["decisions"][0]["action"] for r in corpus.resolve(docs)])
    assert outcomes == [[NEW, MERGE], [NEW, NEW]]


def test_resolution_past_the_exact_limit_is_deterministic_and_finds_aliases():
    rng = np.random.default_rng(8)
    base = _unit(rng, 1200, 32)
    alias = base[:300] + 0.1 * _unit(rng, 300, 32)
    vectors = np.concatenate([base, alias / np.linalg.norm(alias, axis=1, keepdims=True)])
    names = [f"entity {i}" for i in range(len(vectors))]
    runs = []
    for _ in range(2):
        resolver = Resolver(32, ResolverConfig(exact_limit=400))
        positions, decisions = [], []
        for start in range(0, len(vectors), 250):
            end = start + 250
            found, made = resolver.resolve(
                names[start:end], ["X"] * 250, [""] * 250, vectors[start:end]
            )
            positions += found
            decisions += made
        assert resolver.index.is_ivf
        runs.append((positions, decisions))
    assert runs[0] == runs[1]
    positions = runs[0][0]
    assert sum(positions[1200 + i] == positions[i] for i in range(300)) >= 295


def test_an_empty_batch_resolves_to_nothing():
    assert Resolver(dim=16).resolve([], [], [], np.zeros((0, 16), np.float32)) == ([], [])
