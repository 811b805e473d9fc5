"""Gradient-based entity resolution (BookRAG Algorithm 1), incremental.

For every new entity: the ``top_k`` nearest canonical entities by vector search, reranked and
sorted by score; keep the top candidate and extend while the next score ≥ g × the previous
one (g = 0.6). Then:

* no candidates (empty store) → new;
* top score below ``floor`` → new;
* every one of ≥ 2 candidates passes → the scores carry no gradient → new;
* exactly one selected → merge into it;
* several selected → the model picks (``select``, action ``llm``); offline, or when the
  model's call fails, the best-scoring one (action ``select``; a failure's error is in the
  decision's ``reason``).

Before the search, a name already in the store (case- and space-normalised) merges at once
(action ``exact``): the same name is the same entity for both the exact-name baseline and this
rule, and it keeps one canonical row per name.

Scores. The offline reranker is cosine over the entity-name embeddings, optionally rescaled to
``max(0, (cos − c0) / (1 − c0))`` (names below cosine c0 score 0 and never pass). Unrelated
names still score 0.3–0.6 with all-MiniLM; without rescaling a large store's top-10 is flat and
the rule answers "new" almost always. g, top_k, c0 and the floor are ``ResolverConfig`` fields
(operators/config.py, with the calibration of c0 and the floor on labelled alias pairs); one
configuration reaches the resolution within a document and across the corpus alike.

Incremental: ``Resolver.resolve`` compares a batch against what is already stored plus the
earlier new entities of the same batch (the same decisions as one-by-one insertion), then adds
the new ones — never all pairs of the corpus. Search is exact up to ``exact_limit`` entities and
an inverted file above (``operators.graph.vector_index.VectorIndex``): an insert costs a product
with 1,024 centroids, a query scans ~8 % of the store at BLAS speed, so resolution time grows
close to linearly up to a few hundred thousand entities (benchmarks/er_scaling.py: 100k take
~10-13× the time of 10k).
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from bookindex.operators.config import ResolverConfig
from bookindex.operators.graph.vector_index import VectorIndex
from bookindex.operators.models.prompts import SELECT_PROMPT, SELECT_SCHEMA, chat

log = logging.getLogger(__name__)

NEW, MERGE, SELECT, LLM, EXACT = "new", "merge", "select", "llm", "exact"
SELECTION_FAILED = "model selection failed, the rule stands"  # in a decision's reason
STRUCTURAL = "structural entity: one object of one document"
_CHUNK = 512  # batch rows per within-batch similarity block
_MAX_EARLY = 64  # earlier batch rows kept per row; more: compared when its turn comes


@dataclass
class Choice:
    action: str  # new / merge / llm
    selected: list[int]  # indices into the candidate list as given, best first
    reason: str


def gradient_select(scores: list[float], config: ResolverConfig | None = None) -> Choice:
    """The rule on one candidate list (any order; only the ``top_k`` best are read)."""
    config = config or ResolverConfig()
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: config.top_k]
    choice = gradient_select_sorted([scores[i] for i in order], config.g, config.floor)
    choice.selected = [order[j] for j in choice.selected]
    return choice


def gradient_select_sorted(ranked: list[float], g: float, floor: float) -> Choice:
    """The rule on scores already sorted best first and cut to ``top_k``; ``selected`` indexes
    ``ranked``."""
    if not ranked:
        return Choice(NEW, [], "no candidates")
    top = ranked[0]
    if top < floor:
        return Choice(NEW, [], f"top score {top:.3f} below floor {floor}")
    count = 1
    while count < len(ranked) and ranked[count] > 0 and ranked[count] >= g * ranked[count - 1]:
        count += 1
    if count == len(ranked) and count >= 2:
        return Choice(NEW, [], f"no gradient: all {count} candidates within g={g}")
    if count == 1:
        drop = f"next {ranked[1]:.3f} < {g}×{top:.3f}" if len(ranked) > 1 else "only candidate"
        return Choice(MERGE, [0], f"one candidate selected ({drop})")
    return Choice(SELECT, list(range(count)), f"{count} candidates selected")


def rescale_cosine(cos: np.ndarray, c0: float) -> np.ndarray:
    """``max(0, (cos − c0) / (1 − c0))``, capped at 1 (ResolverConfig.c0)."""
    return np.clip((cos - c0) / (1.0 - c0), 0.0, 1.0)


_PUNCT = re.compile(r"[^\w\s&]")
_SPACE = re.compile(r"\s+")


def normalise_name(name: str) -> str:
    text = unicodedata.normalize("NFKC", name).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def entity_id_for(name: str, salt: str = "") -> str:
    return _id_for_key(normalise_name(name), salt)


def _id_for_key(key: str, salt: str) -> str:
    return "e" + hashlib.sha1(f"{key}|{salt}".encode()).hexdigest()[:16]


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


# picks among several selected candidates: an index, -1 for none, None to let the rule stand
Selector = Callable[[str, list[Canonical], list[float]], int | None]
Reranker = Callable[[str, list[str], np.ndarray], np.ndarray]


@dataclass
class _Batch:
    """One batch in ``Resolver.resolve``: its search against the store (rows searched, by
    search row: candidate ids, cosines, valid counts, rescaled scores, k-th cosine, the spill
    cells), its earlier rows that may be candidates, and its new entities so far."""

    rows: dict[int, int]  # batch row → search row
    ids: np.ndarray  # (searched, ≤ top_k) store positions, best first (-1: none)
    sims: np.ndarray  # their cosines
    found: list[int]  # valid candidates per search row (they come first)
    id_rows: list[list[int]]
    scores: list[list[float]] | None  # rescaled cosines; None with a reranker
    kth: np.ndarray  # the k-th stored cosine per search row (-inf: fewer stored)
    cells: np.ndarray | None  # where a searched row goes if it becomes new (IVF)
    early: dict[int, tuple[np.ndarray, np.ndarray] | None]
    stored: int  # entities stored before the batch
    new_vectors: np.ndarray  # the batch's new entities' vectors, in order
    new_position: np.ndarray  # batch row → position, once it became new (else -1)


class Resolver:
    """Canonical entities with their name vectors; resolves batches of new entities.

    ``config``: g, top_k, c0, floor and exact_limit (``ResolverConfig``; its defaults when
    None). ``rerank(name, candidate_names, cosines) -> scores`` replaces the rescaled cosine
    when a model reranker is configured; ``select(name, candidates, scores) -> index`` picks
    among several selected candidates (an LLM); offline it is the best-scoring one.
    """

    def __init__(
        self,
        dim: int,
        config: ResolverConfig | None = None,
        rerank: Reranker | None = None,
        select: Selector | None = None,
        id_salt: str = "",
        index_options: dict | None = None,
    ) -> None:
        self.config = config or ResolverConfig()
        self.rerank, self.select, self.id_salt = rerank, select, id_salt
        self.index = VectorIndex(dim, exact_limit=self.config.exact_limit, **(index_options or {}))
        self.entities: list[Canonical] = []
        self._keys: list[str] = []  # normalised canonical names, by position
        self._by_name: dict[str, int] = {}  # normalised names and aliases → position
        self._ids: set[str] = set()

    def __len__(self) -> int:
        return len(self.entities)

    def load(self, entities: list[Canonical], vectors: np.ndarray) -> None:
        """Start from stored canonical entities (a later run resolves only new ones)."""
        for entity in entities:
            self._register(entity)
        self.index.add(vectors)

    def _register(self, entity: Canonical, key: str | None = None) -> int:
        position = len(self.entities)
        key = normalise_name(entity.name) if key is None else key
        self.entities.append(entity)
        self._keys.append(key)
        self._ids.add(entity.entity_id)
        self._by_name.setdefault(key, position)
        for alias in entity.aliases:
            self._by_name.setdefault(normalise_name(alias), position)
        return position

    def add_alias(self, position: int, name: str, key: str | None = None) -> None:
        """Another name of the canonical entity at ``position``: kept in its aliases (unless it
        is the canonical name) and in the name lookup, so that a later entity of that name
        merges at once. A name already known for another entity keeps that one."""
        key = normalise_name(name) if key is None else key
        canonical = self.entities[position]
        if key != self._keys[position] and name not in canonical.aliases:
            canonical.aliases.append(name)
        self._by_name.setdefault(key, position)

    def _new_id(self, key: str) -> str:
        """``entity_id_for`` the name (``key``: its normalised form), unique in the store."""
        entity_id = _id_for_key(key, self.id_salt)
        n = 1
        while entity_id in self._ids:
            n += 1
            entity_id = _id_for_key(key, f"{self.id_salt}#{n}")
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
        one object of one document) and are only registered.

        The same decisions as resolving the entities one at a time: entity i sees the stored
        entities (one search for the batch) and, exactly, the batch's earlier entities that
        became new (one batch × batch product). A name already known, as a name or an alias
        (before the batch or from an earlier entity of it), merges at once without a search."""
        n = len(names)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(n, self.index.dim)
        fixed_new = fixed_new or [False] * n
        keys = [normalise_name(name) for name in names]
        searched = [i for i in range(n) if not fixed_new[i] and keys[i] not in self._by_name]
        batch = self._search(vectors, searched)
        positions: list[int] = []
        decisions: list[Decision] = []
        for i, (name, key) in enumerate(zip(names, keys, strict=True)):
            type_ = types[i]
            decision = None  # fixed_new: registered without a decision of the rule
            if fixed_new[i]:
                position = -1
            elif key in self._by_name:
                position = self._by_name[key]
                reason = "same normalised name"
                decision = self._decision(
                    name, type_, [position], [1.0], [position], EXACT, reason, position
                )
            else:
                position, decision = self._decide(
                    name, type_, *self._candidates(batch, i, vectors[i])
                )
            if decision is None or decision.action == NEW:
                canonical = Canonical(self._new_id(key), name, type_, descriptions[i])
                position = self._add_new(batch, i, canonical, key, vectors[i])
                if decision is None:
                    decision = self._decision(name, type_, [], [], [], NEW, STRUCTURAL, position)
                decision.entity_id = canonical.entity_id
            else:
                self.add_alias(position, name, key)
            positions.append(position)
            decisions.append(decision)
        self._index_new(batch, vectors)
        return positions, decisions

    def _search(self, vectors: np.ndarray, searched: list[int]) -> _Batch:
        """The batch's rows ``searched`` against the store, one search for all of them."""
        top_k = self.config.top_k
        ids, sims = self.index.search(vectors[searched], top_k)
        cells = self.index.last_cells  # where a searched entity goes if it becomes new
        scores = None if self.rerank else rescale_cosine(sims, self.config.c0).tolist()
        full = sims.shape[1] == top_k
        kth = sims[:, -1] if full else np.full(len(searched), -np.inf, np.float32)
        return _Batch(
            rows=dict(zip(searched, range(len(searched)), strict=True)),
            ids=ids,
            sims=sims,
            found=(ids >= 0).sum(axis=1).tolist(),  # valid candidates come first
            id_rows=ids.tolist(),
            scores=scores,
            kth=kth,
            cells=cells,
            early=self._early_candidates(vectors, searched, kth),
            stored=len(self.entities),
            new_vectors=np.empty_like(vectors),
            new_position=np.full(len(vectors), -1, np.int64),
        )

    def _candidates(
        self, batch: _Batch, i: int, vector: np.ndarray
    ) -> tuple[list[int], np.ndarray, list[float] | None]:
        """Batch row i's candidates, best first: its stored ones and the batch's earlier new
        entities that enter its top_k, as (positions, cosines, rescaled scores or None)."""
        r = batch.rows[i]
        count = batch.found[r]
        cand = batch.id_rows[r][:count]
        cosines = batch.sims[r, :count]
        ranked = None if batch.scores is None else batch.scores[r][:count]
        if i not in batch.early:
            return cand, cosines, ranked
        batch_pos, batch_sims = self._earlier_new(batch, i, vector)
        if not len(batch_pos):
            return cand, cosines, ranked
        both = np.concatenate([batch.ids[r, :count], batch_pos])
        cosines = np.concatenate([cosines, batch_sims])
        top = np.lexsort((both, -cosines))[: self.config.top_k]
        cand, cosines = both[top].tolist(), cosines[top]
        if ranked is not None:
            ranked = rescale_cosine(cosines, self.config.c0).tolist()
        return cand, cosines, ranked

    def _earlier_new(
        self, batch: _Batch, i: int, vector: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The batch's earlier rows that became new and may enter row i's top_k (positions,
        cosines): all of them compared now when ``_early_candidates`` found too many."""
        early = batch.early[i]
        if early is None:  # many: compare with the new ones so far
            n_new = len(self.entities) - batch.stored
            sims = batch.new_vectors[:n_new] @ vector
            cols = np.flatnonzero(sims > batch.kth[batch.rows[i]])
            positions, sims = batch.stored + cols, sims[cols]
        else:
            cols, sims = early
            positions = batch.new_position[cols]
            new = positions >= 0
            positions, sims = positions[new], sims[new]
        top_k = self.config.top_k
        if len(positions) > top_k:  # only its own top_k (and ties) can make it
            cut = len(positions) - top_k
            keep = sims >= np.partition(sims, cut)[cut]
            positions, sims = positions[keep], sims[keep]
        return positions, sims

    def _add_new(
        self, batch: _Batch, i: int, entity: Canonical, key: str, vector: np.ndarray
    ) -> int:
        """Register batch row i as a new canonical entity (indexed by ``_index_new``)."""
        position = self._register(entity, key)
        batch.new_position[i] = position
        batch.new_vectors[position - batch.stored] = vector
        return position

    def _index_new(self, batch: _Batch, vectors: np.ndarray) -> None:
        """The batch's new entities into the vector index (with their cells when searched)."""
        new_rows = np.flatnonzero(batch.new_position >= 0).tolist()
        cells = None
        if batch.cells is not None and all(i in batch.rows for i in new_rows):
            cells = batch.cells[[batch.rows[i] for i in new_rows]]
        self.index.add(vectors[new_rows], cells)

    def _early_candidates(
        self, vectors: np.ndarray, searched: list[int], kth: np.ndarray
    ) -> dict[int, tuple[np.ndarray, np.ndarray] | None]:
        """For each searched batch row (``kth``: its k-th stored similarity, by search order),
        the earlier rows of the batch that could enter its top_k: those above ``kth`` (a tie
        goes to the stored candidate, which sorts first), as (rows, similarities), in row
        chunks. None for a row with more than ``_MAX_EARLY`` of them (a small store): it is
        compared with the batch's new entities when its turn comes. Rows without any are
        left out."""
        early: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
        rows = np.asarray(searched, np.int64)
        for lo in range(0, len(rows), _CHUNK):
            part, bound = rows[lo : lo + _CHUNK], kth[lo : lo + _CHUNK]
            width = int(part[-1])  # earlier rows only
            if width == 0:
                continue
            if not np.isfinite(bound).any():  # fewer than top_k stored: all earlier ones
                early.update((i, None) for i in part.tolist() if i > 0)
                continue
            sims = vectors[part] @ vectors[:width].T
            hits = (sims > bound[:, None]) & (np.arange(width)[None, :] < part[:, None])
            hit_row, hit_col = np.nonzero(hits)
            cuts = np.searchsorted(hit_row, np.arange(len(part) + 1)).tolist()
            for r in np.unique(hit_row).tolist():
                i = int(part[r])
                if cuts[r + 1] - cuts[r] > _MAX_EARLY:
                    early[i] = None
                else:
                    cols = hit_col[cuts[r] : cuts[r + 1]]
                    early[i] = (cols, sims[r, cols])
        return early

    def _decide(
        self,
        name: str,
        type_: str,
        positions: list[int],
        cosines: np.ndarray,
        ranked: list[float] | None = None,
    ) -> tuple[int, Decision]:
        """The rule on the candidates (positions, cosines), sorted best first; ``ranked``: their
        rescaled cosines when already computed (no reranker)."""
        if self.rerank is not None and positions:
            names = [self.entities[p].name for p in positions]
            ranked = np.asarray(self.rerank(name, names, cosines), np.float32).tolist()
            choice = gradient_select(ranked, self.config)
        else:
            if ranked is None:
                ranked = rescale_cosine(cosines, self.config.c0).tolist()
            # rescaling keeps the cosine order, so the list is sorted as the rule sorts it
            choice = gradient_select_sorted(
                ranked[: self.config.top_k], self.config.g, self.config.floor
            )
        chosen = [positions[k] for k in choice.selected]
        target = chosen[0] if chosen else -1
        action = choice.action
        picked, reason = None, choice.reason
        if choice.action == SELECT and self.select is not None:
            try:
                picked = self.select(
                    name,
                    [self.entities[p] for p in chosen],
                    [ranked[k] for k in choice.selected],
                )
            except Exception as exc:  # the model failed: the rule's decision, with the error
                error = f"{type(exc).__name__}: {exc}"[:300]
                reason = f"{reason}; {SELECTION_FAILED}: {error}"
                log.warning("entity selection for %r failed, the rule stands: %s", name, error)
        if picked is not None:  # the model's choice (None: not asked, the rule stands)
            action = LLM
            if 0 <= picked < len(chosen):
                target = chosen[picked]
            elif picked < 0:  # the model says none of them: a new entity
                action, target = NEW, -1
        decision = self._decision(name, type_, positions, ranked, chosen, action, reason, target)
        return target, decision

    def _decision(self, name, type_, positions, scores, chosen, action, reason, target):
        return Decision(
            new_name=name,
            new_type=type_,
            candidates=[self.entities[p].name for p in positions],
            candidate_ids=[self.entities[p].entity_id for p in positions],
            scores=[round(s, 5) for s in map(float, scores)],
            selected=[self.entities[p].entity_id for p in chosen],
            action=action,
            reason=reason,
            entity_id=self.entities[target].entity_id if target >= 0 else "",
        )


def selection_messages(name: str, candidates: list[Canonical]) -> list[dict]:
    """The chat messages of BookRAG's LLM step for one new entity and its selected candidates
    (SELECT_PROMPT; the answer follows SELECT_SCHEMA)."""
    listing = "\n".join(
        f"{i}. {c.name} ({c.type}): {c.description[:200]}" for i, c in enumerate(candidates)
    )
    return chat(SELECT_PROMPT, f"New entity: {name}\nCandidates:\n{listing}")


def selection_key(name: str, candidates: list[Canonical]) -> str:
    """What one selection is about: the new name and its candidates' ids, in order."""
    return "|".join([name, *(c.entity_id for c in candidates)])


def model_selector(backend) -> Selector:
    """BookRAG's LLM step: which of several selected candidates is the new entity (or -1 for
    none), asked of ``backend`` one entity at a time. A failed call (or an answer without an
    integer choice) raises: ``Resolver`` then lets the rule stand (the best-scoring candidate;
    the decision's ``action`` is the rule's, not ``llm``) and records the error in the
    decision's ``reason`` (``er_decisions``)."""

    def select(name: str, candidates: list[Canonical], scores: list[float]) -> int | None:
        answer = backend.complete(selection_messages(name, candidates), SELECT_SCHEMA)
        return int(answer["choice"])

    return select


class SelectionPhase:
    """BookRAG's LLM step as a phase (the index job's): a ``Selector`` that answers from
    ``answers`` (``selection_key`` → the model's choice, -1: none) and otherwise lets the rule
    stand (the best-scoring candidate, action ``select``) and records the question in
    ``asked`` (key → (``scope``, chat messages)). A first resolution collects the questions,
    one ``ray.data.llm`` processor pass answers them all, and a second resolution with the
    answers applies the merges in the resolver's own deterministic order; a question that only
    arises in the second pass (an earlier answer changed the candidates) keeps the rule."""

    def __init__(self, answers: dict[str, int] | None = None) -> None:
        self.answers = answers or {}
        self.asked: dict[str, tuple[str, list[dict]]] = {}
        self.sizes: dict[str, int] = {}  # key → how many candidates the question offered
        self.scope = ""  # who asks (the corpus resolver: the document being resolved)

    def __call__(self, name: str, candidates: list[Canonical], scores: list[float]) -> int | None:
        key = selection_key(name, candidates)
        if key in self.answers:
            return self.answers[key]
        self.asked.setdefault(key, (self.scope, selection_messages(name, candidates)))
        self.sizes[key] = len(candidates)
        return None

    def changes(self, answers: dict[str, int]) -> bool:
        """Whether ``answers`` to the questions asked change any merge of the resolution that
        asked them. The rule merged into the first candidate; an answer 0 (or one beyond the
        candidates, which ``Resolver`` ignores) merges there too and only relabels the
        decision (``relabel_answered``); any other answer (another candidate, or -1: none)
        changes the state every later decision sees."""
        return any(
            key in answers and answers[key] != 0 and answers[key] < self.sizes[key]
            for key in self.asked
        )


def relabel_answered(decisions: list[dict], answers: dict[str, int]) -> list[dict]:
    """The decisions (dicts of ``Decision``'s fields) of a resolution whose questions were
    answered with the rule's own choice (``SelectionPhase.changes`` false): what a second
    resolution with ``answers`` gives — the same merges, the answered ``select`` decisions
    marked ``llm``."""
    out = []
    for decision in decisions:
        key = "|".join([decision["new_name"], *decision["selected"]])
        if decision["action"] == SELECT and key in answers:
            decision = dict(decision, action=LLM)
        out.append(decision)
    return out
