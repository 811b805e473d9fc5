"""Gradient-based entity resolution (BookRAG Algorithm 1), incremental.

For every new entity: the ``top_k`` nearest canonical entities by vector search, reranked and
sorted by score; keep the top candidate and extend while the next score ≥ g × the previous
one (g = 0.6). Then:

* no candidates (empty store) → new;
* top score below ``floor`` → new;
* every one of ≥ 2 candidates passes → the scores carry no gradient → new;
* exactly one selected → merge into it;
* several selected → the model picks (``select``, action ``llm``); offline, the best-scoring
  one (action ``select``).

Before the search, a name already in the store (case- and space-normalised) merges at once
(action ``exact``): the same name is the same entity for both the exact-name baseline and this
rule, and it keeps one canonical row per name.

Scores. The offline reranker is cosine over the entity-name embeddings, optionally rescaled to
``max(0, (cos − c0) / (1 − c0))`` (names below cosine c0 score 0 and never pass). Unrelated
names still score 0.3–0.6 with all-MiniLM; without rescaling a large store's top-10 is flat and
the rule answers "new" almost always. c0 and the floor are calibrated on labelled alias pairs
(benchmarks/graph_stats.py --sweep): see the constants below.

Incremental: ``Resolver.resolve`` compares a batch against what is already stored plus the
earlier new entities of the same batch (exactly what one-by-one insertion would see), then
adds the new ones — never all pairs of the corpus. Search is exact up to ``exact_limit``
entities and HNSW (faiss) above, so that resolution time grows close to linearly.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

G = 0.6
TOP_K = 10
# Calibrated on MuSiQue's labelled alias pairs (benchmarks/graph_stats.py --sweep, 241 positive,
# 12,444 negative pairs incl. near misses like "California" / "Santa Monica, California"):
# c0 = 0.3, floor 0.6 (merge from cosine 0.72): F1 0.728, 7 of 15 cross-document positives.
# Plain cosine (c0 = 0) scored 0.680 and, with a large store's flat top-10, almost never merges
# across documents (1-2 of 15; synthetic alias recall 0.17); c0 = 0.5 / 0.5 scored 0.656.
# In-sample: the pairs come from the same corpus.
COSINE_C0 = 0.3  # cosine that maps to score 0
FLOOR = 0.6  # score below which the best candidate is not the same entity
NEW, MERGE, SELECT, LLM, EXACT = "new", "merge", "select", "llm", "exact"


@dataclass
class Choice:
    action: str  # new / merge / llm
    selected: list[int]  # indices into the candidate list as given, best first
    reason: str


def gradient_select(
    scores: list[float], g: float = G, floor: float = FLOOR, top_k: int = TOP_K
) -> Choice:
    """The rule on one candidate list (any order; only the ``top_k`` best are read)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:top_k]
    if not order:
        return Choice(NEW, [], "no candidates")
    top = scores[order[0]]
    if top < floor:
        return Choice(NEW, [], f"top score {top:.3f} below floor {floor}")
    selected = [order[0]]
    for prev, cur in zip(order, order[1:], strict=False):
        if scores[cur] > 0 and scores[cur] >= g * scores[prev]:
            selected.append(cur)
        else:
            break
    if len(selected) == len(order) and len(order) >= 2:
        return Choice(NEW, [], f"no gradient: all {len(order)} candidates within g={g}")
    if len(selected) == 1:
        drop = (
            f"next {scores[order[1]]:.3f} < {g}×{top:.3f}" if len(order) > 1 else "only candidate"
        )
        return Choice(MERGE, selected, f"one candidate selected ({drop})")
    return Choice(SELECT, selected, f"{len(selected)} candidates selected")


def rescale_cosine(cos: np.ndarray, c0: float = COSINE_C0) -> np.ndarray:
    return np.clip((cos - c0) / (1.0 - c0), 0.0, 1.0)


def normalise_name(name: str) -> str:
    text = unicodedata.normalize("NFKC", name).casefold()
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s&]", " ", text)).strip()


def entity_id_for(name: str, salt: str = "") -> str:
    return "e" + hashlib.sha1(f"{normalise_name(name)}|{salt}".encode()).hexdigest()[:16]


class VectorIndex:
    """Inner-product top-k over a growing set of unit vectors: exact (BLAS) while small, faiss
    HNSW once past ``exact_limit``. Single-threaded inserts keep the graph deterministic."""

    def __init__(self, dim: int, exact_limit: int = 4096, hnsw_m: int = 32) -> None:
        self.dim = dim
        self.exact_limit = exact_limit
        self.hnsw_m = hnsw_m
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        self._hnsw = None

    def __len__(self) -> int:
        return self._n

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[: self._n]

    def add(self, vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if len(vectors) == 0:
            return
        need = self._n + len(vectors)
        if need > len(self._vectors):
            grown = np.zeros((max(need, 2 * len(self._vectors), 1024), self.dim), np.float32)
            grown[: self._n] = self._vectors[: self._n]
            self._vectors = grown
        self._vectors[self._n : need] = vectors
        self._n = need
        if self._hnsw is not None:
            self._hnsw.add(vectors)
        elif self._n > self.exact_limit:
            self._build_hnsw()

    def _build_hnsw(self) -> None:
        import faiss

        faiss.omp_set_num_threads(1)
        index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
        index.hnsw.efSearch = 64
        index.add(self.vectors)
        self._hnsw = index

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, similarities), each (len(queries), min(k, n)); ids best first."""
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        k = min(k, self._n)
        if k == 0 or len(queries) == 0:
            return np.zeros((len(queries), 0), np.int64), np.zeros((len(queries), 0), np.float32)
        if self._hnsw is not None:
            sims, ids = self._hnsw.search(queries, k)
            return ids.astype(np.int64), sims
        sims = queries @ self.vectors.T
        ids = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < self._n else None
        if ids is None:
            ids = np.tile(np.arange(self._n), (len(queries), 1))
        part = np.take_along_axis(sims, ids, axis=1)
        order = np.lexsort((ids, -part), axis=1)
        ids = np.take_along_axis(ids, order, axis=1)
        return ids, np.take_along_axis(sims, ids, axis=1)


@dataclass
class Canonical:
    entity_id: str
    name: str
    type: str
    description: str
    aliases: list[str] = field(default_factory=list)


@dataclass
class Decision:
    """One resolution decision (a row of ``er_decisions``)."""

    new_name: str
    new_type: str
    candidates: list[str]
    candidate_ids: list[str]
    scores: list[float]
    selected: list[str]
    action: str
    reason: str
    entity_id: str  # the canonical entity the new one became or joined


Selector = Callable[[str, list[Canonical], list[float]], int]


class Resolver:
    """Canonical entities with their name vectors; resolves batches of new entities.

    ``rerank(name, candidate_names, cosines) -> scores`` replaces the rescaled cosine when a
    model reranker is configured; ``select(name, candidates, scores) -> index`` picks among
    several selected candidates (an LLM); offline it is the best-scoring one.
    """

    def __init__(
        self,
        dim: int,
        g: float = G,
        floor: float = FLOOR,
        top_k: int = TOP_K,
        c0: float = COSINE_C0,
        rerank: Callable[[str, list[str], np.ndarray], np.ndarray] | None = None,
        select: Selector | None = None,
        exact_limit: int = 4096,
        id_salt: str = "",
    ) -> None:
        self.g, self.floor, self.top_k, self.c0 = g, floor, top_k, c0
        self.rerank, self.select, self.id_salt = rerank, select, id_salt
        self.index = VectorIndex(dim, exact_limit=exact_limit)
        self.entities: list[Canonical] = []
        self._by_name: dict[str, int] = {}
        self._ids: set[str] = set()

    def __len__(self) -> int:
        return len(self.entities)

    def load(self, entities: list[Canonical], vectors: np.ndarray) -> None:
        """Start from stored canonical entities (a later run resolves only new ones)."""
        for entity in entities:
            self._register(entity)
        self.index.add(vectors)

    def _register(self, entity: Canonical) -> int:
        position = len(self.entities)
        self.entities.append(entity)
        self._ids.add(entity.entity_id)
        for name in [entity.name, *entity.aliases]:
            self._by_name.setdefault(normalise_name(name), position)
        return position

    def _new_id(self, name: str) -> str:
        entity_id = entity_id_for(name, self.id_salt)
        n = 1
        while entity_id in self._ids:
            n += 1
            entity_id = entity_id_for(name, f"{self.id_salt}#{n}")
        return entity_id

    def resolve(
        self,
        names: list[str],
        types: list[str],
        descriptions: list[str],
        vectors: np.ndarray,
        fixed_new: list[bool] | None = None,
    ) -> tuple[list[int], list[Decision]]:
        """Resolve a batch in order. Returns each entity's position in ``self.entities`` and the
        decisions. ``fixed_new`` marks entities that are new by construction (tables, figures:
        one object of one document) and are only registered."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(names), -1)
        fixed_new = fixed_new or [False] * len(names)
        stored = len(self.entities)
        ids, sims = self.index.search(vectors, self.top_k)
        batch_new: list[int] = []  # batch rows that became new canonical entities
        new_vectors = np.empty_like(vectors)  # their vectors, in order (no gather per entity)
        positions: list[int] = []
        decisions: list[Decision] = []
        for i, name in enumerate(names):
            key = normalise_name(name)
            if fixed_new[i]:
                decision = None
            elif key in self._by_name:
                position = self._by_name[key]
                decision = self._decision(
                    name,
                    types[i],
                    [position],
                    [1.0],
                    [position],
                    EXACT,
                    "same normalised name",
                    position,
                )
            else:
                position, decision = self._decide(
                    i,
                    name,
                    types[i],
                    vectors,
                    ids[i],
                    sims[i],
                    new_vectors[: len(batch_new)],
                    stored,
                )
            if decision is None or decision.action == NEW:
                position = self._register(
                    Canonical(self._new_id(name), name, types[i], descriptions[i])
                )
                new_vectors[len(batch_new)] = vectors[i]
                batch_new.append(i)
                if decision is None:
                    decision = self._decision(
                        name,
                        types[i],
                        [],
                        [],
                        [],
                        NEW,
                        "structural entity: one object of one document",
                        position,
                    )
                decision.entity_id = self.entities[position].entity_id
            else:
                canonical = self.entities[position]
                if normalise_name(name) != normalise_name(canonical.name) and name not in (
                    canonical.aliases
                ):
                    canonical.aliases.append(name)
                self._by_name.setdefault(key, position)
            positions.append(position)
            decisions.append(decision)
        self.index.add(new_vectors[: len(batch_new)])
        return positions, decisions

    def _decide(
        self,
        i: int,
        name: str,
        type_: str,
        vectors: np.ndarray,
        store_ids: np.ndarray,
        store_sims: np.ndarray,
        new_vectors: np.ndarray,
        stored: int,
    ) -> tuple[int, Decision]:
        cand = {int(p): float(s) for p, s in zip(store_ids, store_sims, strict=True) if p >= 0}
        if len(new_vectors):  # earlier new entities of this batch are candidates too
            sims = new_vectors @ vectors[i]
            keep = range(len(sims))
            if len(sims) > self.top_k:
                # Only the batch's own top_k (ties at the cut kept) can reach the overall top_k:
                # every other one has ≥ top_k batch candidates ahead of it in the sort below.
                cut = np.partition(sims, len(sims) - self.top_k)[len(sims) - self.top_k]
                keep = np.flatnonzero(sims >= cut).tolist()
            for j in keep:
                cand[stored + j] = float(sims[j])
        ranked = sorted(cand.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top_k]
        positions = [p for p, _ in ranked]
        cosines = np.array([s for _, s in ranked], dtype=np.float32)
        if self.rerank is not None and positions:
            scores = np.asarray(
                self.rerank(name, [self.entities[p].name for p in positions], cosines), np.float32
            )
        else:
            scores = rescale_cosine(cosines, self.c0)
        choice = gradient_select(scores.tolist(), self.g, self.floor, self.top_k)
        chosen = [positions[k] for k in choice.selected]
        target = chosen[0] if chosen else -1
        action = choice.action
        if choice.action == SELECT and self.select is not None:
            action = LLM
            picked = self.select(
                name,
                [self.entities[p] for p in chosen],
                [float(scores[k]) for k in choice.selected],
            )
            if 0 <= picked < len(chosen):
                target = chosen[picked]
            elif picked < 0:  # the model says none of them: a new entity
                action, target = NEW, -1
        decision = self._decision(
            name, type_, positions, scores.tolist(), chosen, action, choice.reason, target
        )
        return target, decision

    def _decision(self, name, type_, positions, scores, chosen, action, reason, target):
        return Decision(
            new_name=name,
            new_type=type_,
            candidates=[self.entities[p].name for p in positions],
            candidate_ids=[self.entities[p].entity_id for p in positions],
            scores=[round(float(s), 5) for s in scores],
            selected=[self.entities[p].entity_id for p in chosen],
            action=action,
            reason=reason,
            entity_id=self.entities[target].entity_id if target >= 0 else "",
        )


SELECT_SCHEMA = {
    "type": "object",
    "properties": {"choice": {"type": "integer"}},
    "required": ["choice"],
}


def model_selector(backend) -> Selector:
    """BookRAG's LLM step: which of several selected candidates is the new entity (or -1 for
    none). A failed call falls back to the best-scoring candidate."""

    def select(name: str, candidates: list[Canonical], scores: list[float]) -> int:
        listing = "\n".join(
            f"{i}. {c.name} ({c.type}): {c.description[:200]}" for i, c in enumerate(candidates)
        )
        messages = [
            {
                "role": "system",
                "content": "You decide whether a newly found entity is the same real-world "
                "entity as one of the known candidates. Answer with JSON: the number of the "
                "matching candidate as choice, or -1 when none of them is the same entity.",
            },
            {"role": "user", "content": f"New entity: {name}\nCandidates:\n{listing}"},
        ]
        try:
            return int(backend.complete(messages, SELECT_SCHEMA)["choice"])
        except Exception:
            return 0

    return select
