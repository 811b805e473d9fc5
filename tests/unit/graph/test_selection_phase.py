"""BookRAG's LLM step as a phase (operators/graph/resolution.SelectionPhase): a first resolution
lets the rule stand and records the questions; a second one with the answers applies them."""

from __future__ import annotations

import numpy as np

from operators.config import ResolverConfig
from operators.graph.resolution import LLM, SELECT, Canonical, Resolver, SelectionPhase

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
