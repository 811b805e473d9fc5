"""A passage corpus's title links (``entity_linking.title_links``) kept in a file beside the
index, so that a serving replica's start, a reload and an evaluation read them instead of
linking every passage's text against every title again (about 3.5 s of a 25-s replica start
at 40,000 passages on one CPU, growing with the corpus; docs/results.md).

    names, links, own, how = title_links_from_store(titles, bodies, index_dir)  # "read", ...

The file (``title_links-<key>.npz``) is named by a digest of everything the links are computed
from: the format, ``max_words`` and each passage's title and text. The same inputs give the
same links (``title_links`` is deterministic), so a file of that name is read as it is
("read"); anything else (no file, a damaged one, a corpus that changed in any passage) is
linked again ("built"), written (to a temporary name, then renamed: readers never see half a
file), and the directory's other title-link files are removed. A directory that cannot be
written is logged and served from memory ("built" all the same).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bookindex.operators.graph.entity_linking import title_links
from bookindex.operators.index_files import texts_digest, write_npz

log = logging.getLogger(__name__)

FORMAT = 1  # bump when title_links' output or the stored arrays change meaning
PREFIX = "title_links-"
TitleLinks = tuple[list[list[str]], list[tuple[int, int]], list[int]]


def store_key(titles: Sequence[str], bodies: Sequence[str], max_words: int) -> str:
    """The digest that names the file of these inputs (``index_files.texts_digest``)."""
    texts = (text for pair in zip(titles, bodies, strict=True) for text in pair)
    return texts_digest(f"{FORMAT}|{max_words}|{len(titles)}|", texts)


def store_path(directory: str | Path, key: str) -> Path:
    return Path(directory) / f"{PREFIX}{key}.npz"


def title_links_from_store(
    titles: Sequence[str],
    bodies: Sequence[str],
    directory: str | Path | None,
    max_words: int = 10,
) -> tuple[list[list[str]], list[tuple[int, int]], list[int], str]:
    """``title_links(titles, bodies, max_words)`` and how it was had: "read" from
    ``directory``'s file of these inputs, or "built" (and stored there; ``directory`` None, or
    no passage with a title, as in a PDF index: nothing to keep, not stored)."""
    if directory is None or not any(titles):
        return (*title_links(list(titles), list(bodies), max_words), "built")
    path = store_path(directory, store_key(titles, bodies, max_words))
    stored = _load(path, len(titles))
    if stored is not None:
        return (*stored, "read")
    names, links, own = title_links(list(titles), list(bodies), max_words)
    _save(path, names, links, own)
    return names, links, own, "built"


def _load(path: Path, n_docs: int) -> TitleLinks | None:
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            names = json.loads(f["names"].tobytes().decode("utf-8", "surrogatepass"))
            links = f["links"].astype(np.int64)
            own = f["own"].astype(np.int64)
        if own.shape != (n_docs,) or links.ndim != 2 or links.shape[1] != 2:
            raise ValueError(f"arrays of shapes {own.shape} and {links.shape} for {n_docs}")
        if not isinstance(names, list) or not all(isinstance(n, list) for n in names):
            raise ValueError("names are not lists of names")
        if links.size and (links[:, 1].max() >= len(names) or own.max() >= len(names)):
            raise ValueError("a link names no title")
        return names, [(int(d), int(e)) for d, e in links], own.tolist()
    except Exception as exc:  # damaged or foreign: linked again and overwritten
        log.warning("title links %s unreadable (%s): linking the titles again", path, exc)
        return None


def _names_json(names: list[list[str]]) -> bytes:
    return json.dumps(names, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _save(path: Path, names: list[list[str]], links: list[tuple[int, int]], own: list[int]) -> None:
    written = write_npz(
        path,
        "title links",
        names=np.frombuffer(_names_json(names), np.uint8),  # UTF-8, not 4 bytes a char
        links=np.asarray(links, np.int32).reshape(-1, 2),
        own=np.asarray(own, np.int32),
    )
    if not written:
        return
    for old in path.parent.glob(f"{PREFIX}*.npz"):
        if old != path:  # an earlier corpus's: never read again
            with contextlib.suppress(OSError):  # another process removed it first
                old.unlink()
