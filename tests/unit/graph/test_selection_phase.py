"""BookRAG's LLM step as a phase (operators/graph/resolution.SelectionPhase): a first resolution
lets the rule stand and records the questions; a second one with the answers applies them."""

from __future__ import annotations

import numpy as np

from bookindex.operators.config import ResolverConfig
from bookindex.operators.graph.resolution import LLM, SELECT, Canonical, Resolver, SelectionPhase

CONFIG = ResolverConfig(c0=0.0, floor=0.1, g=0.6, top_k=10)


def _unit(*v: float) -> np.ndarray:
    a = np.asarray(v, np.float32)
    return a / np.linalg.norm(a)


def _resolver(select) -> Resolver:
    resolver = Resolver(3, CONFIG, select=select)
    stored = [
        Canonical("e1", "Apple Inc", "ORG", "maker of phones"),
        Canonical("e2", "Apple Records", "ORG", "record label"),
        Canonical("e3", "Pear", "FRUIT", "a fruit"),
    ]
    vectors = np.stack([_unit(1, 0.05, 0), _unit(1, -0.05, 0), _unit(0.2, 0, 1)])
    resolver.load(stored, vectors)
    return resolver


def _resolve(select):
    resolver = _resolver(select)
    positions, decisions = resolver.resolve(["Apple"], ["ORG"], [""], _unit(1, 0, 0)[None, :])
    return resolver, positions, decisions


def test_the_rule_stands_and_the_question_is_recorded() -> None:
    phase = SelectionPhase()
    resolver, positions, decisions = _resolve(phase)
    assert decisions[0].action == SELECT and len(decisions[0].selected) == 2
    assert resolver.entities[positions[0]].entity_id == decisions[0].selected[0]
    assert len(phase.asked) == 1
    key, (scope, messages) = next(iter(phase.asked.items()))
    assert key == "|".join(["Apple", *decisions[0].selected])
    assert "Apple Inc" in messages[1]["content"] and "Apple Records" in messages[1]["content"]


def test_answers_are_applied_in_a_second_resolution() -> None:
    phase = SelectionPhase()
    _, _, first = _resolve(phase)
    key = next(iter(phase.asked))
    second_choice = first[0].selected[1]
    resolver, positions, decisions = _resolve(SelectionPhase({key: 1}))
    assert decisions[0].action == LLM and decisions[0].entity_id == second_choice
    assert resolver.entities[positions[0]].entity_id == second_choice
    _, _, none = _resolve(SelectionPhase({key: -1}))  # none of them: a new entity
    assert none[0].action == "new" and none[0].entity_id not in first[0].selected


def _corpus(n: int = 900, docs: int = 30, seed: int = 0) -> list[dict]:
    """``docs`` documents of name vectors shaped like sentence-embedding names (the recipe of
    benchmarks/er_scaling.py: a direction all share, one of n/40 topics — near misses — and
    each cluster's own part; half the clusters have 1–3 aliases near their base)."""
    dim = 48
    rng = np.random.default_rng(seed)

    def unit(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    sizes = np.where(rng.random(n) < 0.5, 1, 1 + rng.integers(1, 4, n))
    clusters = int(np.searchsorted(np.cumsum(sizes), n)) + 1
    common, own = unit(rng.normal(size=dim)), unit(rng.normal(size=(clusters, dim)))
    topics = unit(rng.normal(size=(n // 40, dim)))
    base = unit(0.55 * common + 0.5 * topics[rng.integers(0, len(topics), clusters)] + 0.67 * own)
    cluster = np.repeat(np.arange(clusters), sizes[:clusters])[:n]
    member = np.concatenate([np.arange(s) for s in sizes[:clusters]])[:n]
    noise = unit(rng.normal(size=(n, dim))) * rng.uniform(0.3, 0.75, n)[:, None]
    vectors = np.where(member[:, None] == 0, base[cluster], unit(base[cluster] + noise))
    order = rng.permutation(n)
    entities = [
        {"name": f"ent{cluster[i]}-{member[i]}", "type": "ORG", "description": "", "aliases": []}
        for i in order
    ]
    vectors = vectors[order].astype(np.float32)
    per = n // docs
    return [
        {"doc_id": f"doc{d:02d}", "entities": entities[d * per : (d + 1) * per],
         "vectors": vectors[d * per : (d + 1) * per]}
        for d in range(docs)
    ]  # fmt: skip


def _corpus_run(corpus: list[dict], phase: SelectionPhase):
    from bookindex.operators.graph.entity_sets import CorpusEntities

    entities = CorpusEntities(48, ResolverConfig(top_k=10), phase)
    results = entities.resolve(corpus)
    return results, entities.canonical_rows()


def test_answers_that_keep_the_rules_merges_need_no_second_corpus_resolution() -> None:
    from bookindex.operators.graph.resolution import relabel_answered

    corpus = _corpus()
    first_phase = SelectionPhase({})
    first, (rows, vectors) = _corpus_run(corpus, first_phase)
    keys = sorted(first_phase.asked)
    assert len(keys) >= 10  # the rule left many selections to the model
    # the model agrees with the rule (0), or answers beyond the candidates (ignored)
    answers = {k: (0 if i % 3 else first_phase.sizes[k]) for i, k in enumerate(keys[:-1])}
    assert not first_phase.changes(answers)
    second, (rows2, vectors2) = _corpus_run(corpus, SelectionPhase(answers))
    relabelled = [dict(r, decisions=relabel_answered(r["decisions"], answers)) for r in first]
    assert relabelled == second  # ids, candidates, scores and actions: the second run's
    assert rows == rows2 and np.array_equal(vectors, vectors2)
    actions = [d["action"] for r in second for d in r["decisions"]]
    assert actions.count(LLM) >= len(answers) and SELECT in actions  # keys[-1]: unanswered
    # an answer that picks another candidate, or none, changes merges: a second run is needed
    assert first_phase.changes({keys[0]: 1}) and first_phase.changes({keys[0]: -1})
    changed, _ = _corpus_run(corpus, SelectionPhase({keys[0]: -1}))
    assert [dict(r, decisions=relabel_answered(r["decisions"], {})) for r in first] != changed
