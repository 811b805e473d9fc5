"""Inner-product top-k over a growing set of unit vectors (the entity resolver's candidate
search, operators/graph/resolution.py): exact up to ``exact_limit`` vectors, an inverted file
above. Plain numpy; see ``VectorIndex``.
"""

from __future__ import annotations

import numpy as np


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
        exact_limit: int,
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
