"""The Doc-Zoom graph's document rows kept in a file beside the index, so that a serving
replica's start, a reload and an evaluation read them instead of comparing every pair of
documents again (the one part of the graph whose cost grows with the square of the corpus:
two minutes at 60,000 passages on one CPU, docs/results.md).

    engine = make_engine(config.walk)
    how = fit_from_store(engine, doc_vectors, doc_entity, doc_ids, index_dir)  # "read", ...

The file (``walk_graph-<fingerprint>.npz``, the fingerprint of the parameters that shape the
rows: n_std, max_doc_links, the engine's threshold slack) holds ``WalkEngine.doc_links``
(each row's Σexp, Σexp², candidate floor and candidates), a 128-bit key of each document's id
and a digest of the documents' vectors. Read back:

* "read": the same documents in the same order with the same vectors: the rows as stored;
* "grown": every stored document is still there with the same vector (a grown corpus): the
  stored rows are restored in their order, the new documents are added (``add_documents``:
  new × all pairs and the old rows' running statistics, exact; old rows recomputed only where
  their threshold fell below the stored floor), then the documents are put in the view's
  order (``WalkEngine.reorder``); equal to a build from scratch up to the order of float
  sums and the choice between exactly tied links (by column, in the order they were added);
* "built": anything else (no file, another build's file, a document removed or changed, a
  damaged file): built from scratch.

The entity links are never stored: they are cheap and change with corpus resolution. After a
"grown" or "built" graph the file is written again (to a temporary name, then renamed: readers
never see half a file); a directory that cannot be written is logged once and served from
memory.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bookindex.operators.index_files import write_npz
from bookindex.operators.walks.engine import DOC_LINK_ARRAYS, WalkEngine

log = logging.getLogger(__name__)

FORMAT = 1  # bump when the stored arrays change meaning


def store_path(directory: str | Path, engine: WalkEngine) -> Path:
    """The file of ``engine``'s graph parameters in ``directory``."""
    shape = f"{FORMAT}|{engine.config.n_std!r}|{engine.config.max_doc_links}|{engine.slack!r}"
    return Path(directory) / f"walk_graph-{hashlib.sha256(shape.encode()).hexdigest()[:12]}.npz"


def document_keys(doc_ids: Sequence[str]) -> np.ndarray:
    """A 128-bit key of each document id (n × 2 uint64)."""
    raw = b"".join(hashlib.blake2b(d.encode(), digest_size=16).digest() for d in doc_ids)
    return np.frombuffer(raw, dtype=np.uint64).reshape(-1, 2)


def vectors_digest(doc_vectors: np.ndarray) -> str:
    a = np.ascontiguousarray(doc_vectors)
    head = f"{a.dtype.str}|{a.shape}|".encode()
    return hashlib.blake2b(head + a.tobytes(), digest_size=16).hexdigest()


def fit_from_store(
    engine: WalkEngine,
    doc_vectors: np.ndarray,
    doc_entity: sp.spmatrix,
    doc_ids: Sequence[str],
    directory: str | Path,
) -> str:
    """Fit the empty ``engine`` on the documents (module docstring) with the stored rows of
    ``directory`` where they apply; "read", "grown" or "built"."""
    path = store_path(directory, engine)
    keys = document_keys(doc_ids)
    digest = vectors_digest(doc_vectors)  # checked against a stored file, and stored
    stored = _load(path)
    how, at = "built", None
    if stored is not None:
        old_keys = stored["keys"]
        if np.array_equal(old_keys, keys) and stored["digest"] == digest:
            how = "read"
        else:
            at = _old_positions(old_keys, keys)
            if at is not None and stored["digest"] == vectors_digest(doc_vectors[at]):
                how = "grown"
    if how != "built":
        try:  # checks the arrays' sizes before it changes the engine
            engine.restore_doc_links(doc_vectors if at is None else doc_vectors[at], stored)
        except ValueError as exc:
            log.warning("walk graph store %s does not fit (%s): building the graph", path, exc)
            how = "built"
    if how == "grown":
        new = np.setdiff1d(np.arange(len(keys)), at)
        engine.add_documents(doc_vectors[new], sp.csr_matrix((new.size, 0)))
        engine.reorder(np.concatenate([at, new]))  # engine document i is the view's at[i]
    elif how == "built":
        engine.fit(doc_vectors, sp.csr_matrix((len(keys), 0)))
    engine.set_doc_entity(doc_entity)
    if how != "read":
        _save(path, engine, keys, digest)
    return how


def _old_positions(old_keys: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
    """Where each stored document is now (positions in ``keys``), or None if one is gone."""
    if len(old_keys) > len(keys):
        return None
    now = {(int(a), int(b)): i for i, (a, b) in enumerate(keys)}
    at = [now.get((int(a), int(b)), -1) for a, b in old_keys]
    if -1 in at or len(set(at)) < len(at):
        return None
    return np.asarray(at, np.int64)


def _load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            out: dict[str, Any] = {k: f[k] for k in (*DOC_LINK_ARRAYS, "keys")}
            out["digest"] = str(f["digest"])
        if out["keys"].ndim != 2 or out["keys"].shape[1] != 2:
            raise ValueError(f"document keys of shape {out['keys'].shape}")
        return out
    except Exception as exc:  # damaged or foreign: built again and overwritten
        log.warning("walk graph store %s unreadable (%s): building the graph", path, exc)
        return None


def _save(path: Path, engine: WalkEngine, keys: np.ndarray, digest: str) -> None:
    links = engine.doc_links()
    links["rows"], links["cols"] = (links[k].astype(np.int32) for k in ("rows", "cols"))
    write_npz(path, "walk graph", keys=keys, digest=np.str_(digest), **links)
