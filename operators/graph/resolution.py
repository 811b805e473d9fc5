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
earlier new entities of the same batch (the same decisions as one-by-one insertion), then adds
the new ones — never all pairs of the corpus. Search is exact up to ``exact_limit`` entities and
an inverted file above (``VectorIndex``): an insert costs a product with 1,024 centroids, a
query scans ~8 % of the store at BLAS speed, so resolution time grows close to linearly up to a
few hundred thousand entities (benchmarks/er_scaling.py: 100k take ~10-13× the time of 10k).
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
_CHUNK = 512  # batch rows per within-batch similarity block
_MAX_EARLY = 64  # earlier batch rows kept per row; more: compared when its turn comes


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
    choice = gradient_select_sorted([scores[i] for i in order], g, floor)
    choice.selected = [order[j] for j in choice.selected]
    return choice


def gradient_select_sorted(ranked: list[float], g: float = G, floor: float = FLOOR) -> Choice:
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


def rescale_cosine(cos: np.ndarray, c0: float = COSINE_C0) -> np.ndarray:
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


class VectorIndex:
    """Inner-product top-k over a growing set of unit vectors: exact (BLAS) up to
    ``exact_limit`` vectors, an inverted file (IVF) above.

    The IVF is trained once, when the store first passes ``exact_limit``: spherical k-means
    (seeded, ``kmeans_iters`` rounds) of the first ``exact_limit`` vectors, centred on their
    mean, into ``n_lists`` cells (at most a quarter of the sample). Every vector goes to its
    ``spill`` nearest cells; a query scans its ``n_probe`` nearest cells exactly (with the
    defaults 40 · 2 / 1,024 ≈ 8 % of the store). A batch of queries is answered cell by cell:
    one matrix product per cell with all the queries that probe it, so a cell is read once per
    batch, contiguously, and scored at BLAS speed; then per query only the scores above a bound
    (the (spill·k)-th best of its per-cell maxima; none when ``n_probe`` ≤ spill·k, which is
    correct but slow) are sorted. Inserts are a product with the centroids (reused from the
    search when the resolver adds vectors it just searched). No randomness beyond the seed and
    no threads of its own: the same vectors in the same order give the same index and the same
    answers, whatever the batch sizes (up to float rounding at exact ties).

    Cost, single-threaded, 384-d: per insert ~0.03 ms; per query a fixed part (the centroids)
    and a part proportional to the store (n_probe · spill / n_lists of it): ~0.15 ms at 56k
    stored vectors. The second part makes the total quadratic in the long run: at 100k entities
    searching is about half of the resolution time (benchmarks/er_scaling.py), at 1M it would
    dominate (more cells, trained on more vectors, would then be the next step). Memory: the
    vectors once more per spill (per-cell copies).

    Quality, on the synthetic 384-d names of benchmarks/er_scaling.py at 56k stored: it finds
    99 % of the top-10 neighbours above cosine 0.72 (the merge floor) and 89 % of those above
    0.55; more probes find more (64: 100 % / 92 %) at a proportional cost. faiss HNSW, the
    previous index, needed M=32, efConstruction 80, efSearch 64 for 99 % / 99 % at ~0.7 ms per
    insert and ~0.55 ms per query; cheaper settings lost a quarter of them.
    """

    def __init__(
        self,
        dim: int,
        exact_limit: int = 4096,
        n_lists: int = 1024,
        n_probe: int = 40,
        spill: int = 2,
        kmeans_iters: int = 4,
        seed: int = 0,
    ) -> None:
        self.dim = dim
        self.exact_limit = exact_limit
        self.n_lists, self.n_probe, self.spill = n_lists, n_probe, spill
        self.kmeans_iters, self.seed = kmeans_iters, seed
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        self._centroids: np.ndarray | None = None  # (lists, dim) once the IVF is trained
        self._centroid_bias = np.zeros(0, np.float32)  # mean · centroids
        # The cells' ids as one sorted run (CSR): cell c holds
        # _cell_ids[_cell_start[c] : _cell_start[c + 1]], ascending; its vectors, in the same
        # order, are _cell_vectors[c][: _cell_len[c]] (a copy per cell: read contiguously).
        self._cell_ids = np.zeros(0, np.int64)
        self._cell_start = np.zeros(1, np.int64)
        self._cell_vectors: list[np.ndarray] = []
        self._cell_len: list[int] = []
        self.last_cells: np.ndarray | None = None

    def __len__(self) -> int:
        return self._n

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[: self._n]

    @property
    def is_ivf(self) -> bool:
        return self._centroids is not None

    def add(self, vectors: np.ndarray, cells: np.ndarray | None = None) -> None:
        """Append vectors (ids continue from ``len(self)``). ``cells``: their ``spill`` nearest
        cells when already known (``last_cells`` of a search of these same vectors)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if len(vectors) == 0:
            return
        start, need = self._n, self._n + len(vectors)
        if need > len(self._vectors):
            grown = np.zeros((max(need, 2 * len(self._vectors), 1024), self.dim), np.float32)
            grown[: self._n] = self._vectors[: self._n]
            self._vectors = grown
        self._vectors[start:need] = vectors
        self._n = need
        if self._centroids is None and self._n > self.exact_limit:
            self._train(self._vectors[: self.exact_limit])
            start, cells = 0, None
        if self._centroids is not None:
            self._insert(start, need, cells)

    def _train(self, sample: np.ndarray) -> None:
        mean = sample.mean(axis=0, dtype=np.float64).astype(np.float32)
        x = sample - mean
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        k = max(1, min(self.n_lists, len(x) // 4))  # at least 4 training vectors a cell
        rng = np.random.default_rng(self.seed)
        centroids = x[np.sort(rng.choice(len(x), k, replace=False))]
        for _ in range(self.kmeans_iters):
            cell = np.argmax(x @ centroids.T, axis=1)
            order = np.argsort(cell, kind="stable")
            cells, first = np.unique(cell[order], return_index=True)
            sums = np.add.reduceat(x[order], first, axis=0)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            centroids[cells] = sums / np.maximum(norms, 1e-12)  # empty cells keep their centre
        self._centroids = np.ascontiguousarray(centroids, np.float32)
        self._centroid_bias = (self._centroids @ mean).astype(np.float32)
        self._cell_ids = np.zeros(0, np.int64)
        self._cell_start = np.zeros(k + 1, np.int64)
        self._cell_vectors = [np.zeros((4, self.dim), np.float32) for _ in range(k)]
        self._cell_len = [0] * k

    def _nearest_cells(self, vectors: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``m`` cells of highest (v − mean) · centroid for each row (any order), and of
        those the ``spill`` highest (where the row's vector goes)."""
        scores = vectors @ self._centroids.T - self._centroid_bias
        m = min(m, scores.shape[1])
        if m == scores.shape[1]:
            cells = np.tile(np.arange(m), (len(vectors), 1))
        elif m == 1:
            cells = np.argmax(scores, axis=1)[:, None]
        else:
            cells = np.argpartition(scores, scores.shape[1] - m, axis=1)[:, -m:]
        spill = min(self.spill, m)
        if spill == m:
            return cells, cells
        top = np.take_along_axis(scores, cells, axis=1)
        best = np.argpartition(top, m - spill, axis=1)[:, -spill:]
        return cells, np.take_along_axis(cells, best, axis=1)

    def _insert(self, start: int, end: int, cells: np.ndarray | None = None) -> None:
        if cells is None or cells.shape != (end - start, min(self.spill, len(self._centroids))):
            cells = self._nearest_cells(self._vectors[start:end], self.spill)[1]
        flat = cells.ravel()
        ids = np.repeat(np.arange(start, end), cells.shape[1])
        order = np.argsort(flat, kind="stable")  # by cell, ids ascending within a cell
        flat, ids = flat[order], ids[order]
        # new ids are above every stored one: each goes to the end of its cell's run
        self._cell_ids = np.insert(self._cell_ids, self._cell_start[flat + 1], ids)
        self._cell_start[1:] += np.cumsum(np.bincount(flat, minlength=len(self._centroids)))
        cuts = (np.flatnonzero(np.diff(flat)) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(flat)], strict=True):
            cell = int(flat[lo])
            n = self._cell_len[cell]
            store = self._cell_vectors[cell]
            if n + hi - lo > len(store):
                store = np.zeros((max(n + hi - lo, 2 * len(store)), self.dim), np.float32)
                store[:n] = self._cell_vectors[cell][:n]
                self._cell_vectors[cell] = store
            store[n : n + hi - lo] = self._vectors[ids[lo:hi]]
            self._cell_len[cell] = n + hi - lo

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, similarities), each (len(queries), min(k, n)); ids best first, ties by id. Past
        ``exact_limit`` a row may end in id -1 (similarity -inf) when its probed cells hold
        fewer than k vectors; ``last_cells`` then holds the queries' ``spill`` nearest cells (to
        pass to ``add`` for the same vectors), else None."""
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        self.last_cells = None
        k = min(k, self._n)
        if k == 0 or len(queries) == 0:
            return np.zeros((len(queries), 0), np.int64), np.zeros((len(queries), 0), np.float32)
        if self._centroids is not None:
            return self._search_ivf(queries, k)
        sims = queries @ self.vectors.T
        ids = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < self._n else None
        if ids is None:
            ids = np.tile(np.arange(self._n), (len(queries), 1))
        part = np.take_along_axis(sims, ids, axis=1)
        order = np.lexsort((ids, -part), axis=1)
        ids = np.take_along_axis(ids, order, axis=1)
        return ids, np.take_along_axis(sims, ids, axis=1)

    def _search_ivf(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        b = len(queries)
        probes, self.last_cells = self._nearest_cells(queries, self.n_probe)  # (b, P), (b, spill)
        n_probe = probes.shape[1]
        # (query, cell) pairs by cell: each cell is scored once, for all the queries probing it,
        # into one flat array, a pair's similarities contiguous.
        pair_order = np.argsort(probes.ravel(), kind="stable")
        pair_cell = probes.ravel()[pair_order]
        pair_row = pair_order // n_probe
        cell_len = np.asarray(self._cell_len, np.int64)
        pair_len = cell_len[pair_cell]
        pair_start = np.cumsum(pair_len) - pair_len
        scores = np.empty(int(pair_len.sum()), np.float32)
        lows = np.flatnonzero(np.r_[True, pair_cell[1:] != pair_cell[:-1]])
        highs = np.r_[lows[1:], len(pair_cell)]
        for lo, hi, cell, first in zip(
            lows.tolist(),
            highs.tolist(),
            pair_cell[lows].tolist(),
            pair_start[lows].tolist(),
            strict=True,
        ):
            n = self._cell_len[cell]
            if n:
                block = scores[first : first + (hi - lo) * n].reshape(hi - lo, n)
                np.matmul(queries[pair_row[lo:hi]], self._cell_vectors[cell][:n].T, out=block)
        # A vector sits in up to ``spill`` cells, so a row's best spill·k scores hold its best k
        # ids. Their lower bound: the (spill·k)-th largest of the row's per-cell maxima (each a
        # distinct score); only scores at or above it are sorted.
        m = self.spill * k
        filled = pair_len > 0
        pair_max = np.full(len(pair_cell), -np.inf, np.float32)
        if filled.any():
            pair_max[filled] = np.maximum.reduceat(scores, pair_start[filled])
        row_max = np.empty(len(pair_cell), np.float32)
        row_max[pair_order] = pair_max
        row_max = row_max.reshape(b, n_probe)
        if n_probe > m:
            bound = -np.partition(-row_max, m - 1, axis=1)[:, m - 1]
        else:
            bound = np.full(b, -np.inf, np.float32)
        hit = np.flatnonzero(scores >= np.repeat(bound[pair_row], pair_len))
        pair = np.searchsorted(pair_start, hit, side="right") - 1
        rows = pair_row[pair]
        sims = scores[hit]
        ids = self._cell_ids[self._cell_start[pair_cell[pair]] + hit - pair_start[pair]]
        # one copy of a spilled vector (the copies score alike; keep the larger), then per row
        # (similarity desc, id) and the first k; sorts on packed int64 keys
        order = np.argsort((rows << 32) | ids)
        rows, ids, sims = rows[order], ids[order], sims[order]
        first = np.ones(len(ids), bool)
        first[1:] = (ids[1:] != ids[:-1]) | (rows[1:] != rows[:-1])
        starts = np.flatnonzero(first)
        rows, ids = rows[starts], ids[starts]
        sims = np.maximum.reduceat(sims, starts) if len(starts) else sims[:0]
        order = np.argsort((rows << 32) | _descending_key(sims), kind="stable")  # ids stay sorted
        rows, ids, sims = rows[order], ids[order], sims[order]
        rank = np.arange(len(rows)) - np.searchsorted(rows, rows, side="left")
        keep = rank < k
        out_ids = np.full((b, k), -1, np.int64)
        out_sims = np.full((b, k), -np.inf, np.float32)
        out_ids[rows[keep], rank[keep]] = ids[keep]
        out_sims[rows[keep], rank[keep]] = sims[keep]
        return out_ids, out_sims


def _descending_key(values: np.ndarray) -> np.ndarray:
    """float32 → int64 in [0, 2³²) that sorts ascending as the values sort descending."""
    bits = (np.asarray(values, np.float32) + np.float32(0.0)).view(np.uint32)  # −0 → +0
    ascending = np.where(bits >> 31, ~bits, bits | np.uint32(1 << 31))
    return (np.uint32(0xFFFFFFFF) - ascending).astype(np.int64)


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
        index_options: dict | None = None,
    ) -> None:
        self.g, self.floor, self.top_k, self.c0 = g, floor, top_k, c0
        self.rerank, self.select, self.id_salt = rerank, select, id_salt
        self.index = VectorIndex(dim, exact_limit=exact_limit, **(index_options or {}))
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
        store_ids, store_sims = self.index.search(vectors[searched], self.top_k)
        store_cells = self.index.last_cells  # where a searched entity goes if it becomes new
        found = (store_ids >= 0).sum(axis=1).tolist()  # valid candidates come first
        id_rows = store_ids.tolist()
        score_rows = None if self.rerank else rescale_cosine(store_sims, self.c0).tolist()
        full = store_sims.shape[1] == self.top_k
        kth = store_sims[:, -1] if full else np.full(len(searched), -np.inf, np.float32)
        early = self._early_candidates(vectors, searched, kth)
        stored = len(self.entities)
        new_vectors = np.empty_like(vectors)  # the batch's new entities so far, in order
        new_position = np.full(n, -1, np.int64)  # batch row → position, once it became new
        row_of = dict(zip(searched, range(len(searched)), strict=True))
        positions: list[int] = []
        decisions: list[Decision] = []
        for i, name in enumerate(names):
            key = keys[i]
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
                r = row_of[i]
                count = found[r]
                cand = id_rows[r][:count]
                cosines = store_sims[r, :count]
                ranked = None if score_rows is None else score_rows[r][:count]
                if i in early:
                    if early[i] is None:  # many: compare with the new ones so far
                        n_new = len(self.entities) - stored
                        sims = new_vectors[:n_new] @ vectors[i]
                        cols = np.flatnonzero(sims > kth[r])
                        batch_pos, batch_sims = stored + cols, sims[cols]
                    else:
                        cols, batch_sims = early[i]
                        batch_pos = new_position[cols]
                        new = batch_pos >= 0
                        batch_pos, batch_sims = batch_pos[new], batch_sims[new]
                    if len(batch_pos) > self.top_k:  # only its own top_k (and ties) can make it
                        cut = len(batch_pos) - self.top_k
                        keep = batch_sims >= np.partition(batch_sims, cut)[cut]
                        batch_pos, batch_sims = batch_pos[keep], batch_sims[keep]
                    if len(batch_pos):
                        both = np.concatenate([store_ids[r, :count], batch_pos])
                        cosines = np.concatenate([cosines, batch_sims])
                        top = np.lexsort((both, -cosines))[: self.top_k]
                        cand, cosines = both[top].tolist(), cosines[top]
                        if ranked is not None:
                            ranked = rescale_cosine(cosines, self.c0).tolist()
                position, decision = self._decide(name, types[i], cand, cosines, ranked)
            if decision is None or decision.action == NEW:
                position = self._register(
                    Canonical(self._new_id(key), name, types[i], descriptions[i]), key
                )
                new_position[i] = position
                new_vectors[position - stored] = vectors[i]
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
                self.add_alias(position, name, key)
            positions.append(position)
            decisions.append(decision)
        new_rows = np.flatnonzero(new_position >= 0)
        cells = None
        if store_cells is not None and all(i in row_of for i in new_rows.tolist()):
            cells = store_cells[[row_of[i] for i in new_rows.tolist()]]
        self.index.add(vectors[new_rows], cells)
        return positions, decisions

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
            choice = gradient_select(ranked, self.g, self.floor, self.top_k)
        else:
            if ranked is None:
                ranked = rescale_cosine(cosines, self.c0).tolist()
            # rescaling keeps the cosine order, so the list is sorted as the rule sorts it
            choice = gradient_select_sorted(ranked[: self.top_k], self.g, self.floor)
        chosen = [positions[k] for k in choice.selected]
        target = chosen[0] if chosen else -1
        action = choice.action
        if choice.action == SELECT and self.select is not None:
            action = LLM
            picked = self.select(
                name,
                [self.entities[p] for p in chosen],
                [ranked[k] for k in choice.selected],
            )
            if 0 <= picked < len(chosen):
                target = chosen[picked]
            elif picked < 0:  # the model says none of them: a new entity
                action, target = NEW, -1
        decision = self._decision(
            name, type_, positions, ranked, chosen, action, choice.reason, target
        )
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
