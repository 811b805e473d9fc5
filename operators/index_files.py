"""Files the query side keeps beside an index (the walk graph's rows, a passage corpus's title
links, the BM25 indexes): written whole or not at all, so that a reader never sees half a file,
and named by a digest of what they are computed from (``texts_digest``)."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


def texts_digest(head: str, texts: Iterable[str]) -> str:
    """A hex digest of ``head`` (the format and parameters) and ``texts``, each text
    length-prefixed, so that no two different lists of texts join to the same bytes."""
    digest = hashlib.blake2b(head.encode(), digest_size=16)
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def write_npz(path: Path, what: str, **arrays: np.ndarray) -> bool:
    """``arrays`` saved as ``path`` (an .npz: to a temporary name in its directory, then
    renamed); whether it was written. A directory that cannot be written is logged (``what``:
    what is lost, for the message) and nothing is left behind."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".npz")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.chmod(tmp, 0o644)  # as the index's own files: readable by other replicas' users
        os.replace(tmp, path)
        return True
    except OSError as exc:
        log.warning("%s not stored in %s (%s): computed again next start", what, path, exc)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        return False
