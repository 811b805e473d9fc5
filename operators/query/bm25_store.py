"""BM25 indexes (``operators.query.bm25``) kept beside the index, so that a serving replica's
start, a reload and an evaluation read them instead of tokenising and indexing every text again
(about 6 s of a 22-s replica start at 40,000 passages on one CPU, growing with the corpus;
docs/results.md).

    bm25, how = bm25_from_store(texts, index_dir, "nodes")   # how: "read" or "built"

A stored index is a directory ``bm25-<name>-<key>`` written by ``bm25s``'s own ``save`` (its
arrays, vocabulary and parameters), named by a digest of everything the index is computed
from: the format, the ``bm25s`` version, the tokeniser's settings, the length normalisation b
(where not bm25s's default) and each text. The same texts give the same index, so a directory
of that name is read as it is ("read"); anything else
(none, a damaged one, a corpus that changed in any text) is indexed again ("built"), written to
a temporary name and renamed (readers never see half an index), and the directory's other
indexes of that name are removed. A directory that cannot be written is logged and the index
served from memory ("built" all the same).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bookindex.operators.index_files import texts_digest
from bookindex.operators.query.bm25 import DEFAULT_B, STOPWORDS, Bm25

log = logging.getLogger(__name__)

FORMAT = 1  # bump when Bm25's tokenising or the stored files change meaning
PREFIX = "bm25-"


def store_key(name: str, texts: Sequence[str], b: float = DEFAULT_B) -> str:
    """The digest that names the stored index of these texts (``index_files.texts_digest``);
    a length normalisation other than the default is part of it."""
    import bm25s

    params = "" if b == DEFAULT_B else f"b={b!r}|"
    prefix = f"{FORMAT}|{bm25s.__version__}|{STOPWORDS}|{name}|{len(texts)}|{params}"
    return texts_digest(prefix, texts)


def store_path(directory: str | Path, name: str, key: str) -> Path:
    return Path(directory) / f"{PREFIX}{name}-{key}"


def bm25_from_store(
    texts: Sequence[str], directory: str | Path | None, name: str, b: float = DEFAULT_B
) -> tuple[Bm25, str]:
    """``Bm25(texts, b)`` and how it was had: "read" from ``directory``'s stored index ``name``
    of these texts, or "built" (and stored there; ``directory`` None: not stored)."""
    if directory is None:
        return Bm25(list(texts), b), "built"
    path = store_path(directory, name, store_key(name, texts, b))
    stored = _load(path, len(texts))
    if stored is not None:
        return stored, "read"
    bm25 = Bm25(list(texts), b)
    _save(bm25, path, name)
    return bm25, "built"


def _load(path: Path, n_texts: int) -> Bm25 | None:
    if not path.is_dir():
        return None
    try:
        bm25 = Bm25.load(path)
        if bm25.n != n_texts:
            raise ValueError(f"{bm25.n} texts indexed, {n_texts} expected")
        return bm25
    except Exception as exc:  # damaged or foreign: indexed again and replaced
        log.warning("BM25 index %s unreadable (%s): indexing the texts again", path, exc)
        return None


def _save(bm25: Bm25, path: Path, name: str) -> None:
    tmp = None
    try:
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}-"))
        bm25.save(tmp)
        os.chmod(tmp, 0o755)  # as the index's own directories: readable by other replicas' users
        if path.exists():  # a damaged one (a sound one would have been read)
            shutil.rmtree(path)
        os.rename(tmp, path)
        tmp = None
    except OSError as exc:
        if not path.is_dir():  # (else another process stored the same index first)
            log.warning("BM25 index not stored in %s (%s): indexed again next start", path, exc)
        return
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    for old in path.parent.glob(f"{PREFIX}{name}-*"):
        if old != path and old.is_dir():  # an earlier corpus's: never read again
            with contextlib.suppress(OSError):  # another process removed it first
                shutil.rmtree(old)
