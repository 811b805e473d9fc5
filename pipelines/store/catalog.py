"""What an index holds, read without loading a model: its documents and their builds, one
document's table of contents, the nodes of a section by DeepRead's coordinates (document,
section, paragraph), and the failure rows. ``bookindex show`` and the Python API (``bookindex.Index``) read through it.

Every function reads committed rows only (a document with a ``documents`` row: the commit rule
of ``recovery``) and never writes: a path that holds no index is a ``FileNotFoundError``, and
nothing is created there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import lance

from bookindex.operators.kinds import FAILED
from bookindex.operators.query.read_model import match_document
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, FAILURES, NODES

DOCUMENT_COLUMNS = [
    "doc_id",
    "uri",
    "title",
    "status",
    "error",
    "n_pages",
    "n_sections",
    "n_nodes",
    "ocr_pages",
    "outline_used",
    "indexed_at",
]
NODE_COLUMNS = [
    "node_id",
    "parent_id",
    "kind",
    "level",
    "title",
    "text",
    "page_start",
    "page_end",
    "bbox",
    "sec_id",
    "para_idx",
]


@dataclass
class DocumentEntry:
    """A document as ``match_document`` matches it (file name, title, doc_id, uri)."""

    doc_id: str
    uri: str
    name: str
    title: str
    row: dict


def check_index(index_dir: str | Path) -> Path:
    """``index_dir`` as a Path; FileNotFoundError when it holds no index (nothing created)."""
    path = Path(index_dir)
    if not lance_store.exists(path, DOCUMENTS):
        what = "does not exist" if not path.exists() else "holds no index (no documents table)"
        raise FileNotFoundError(f"no index at {path}: it {what}; build one with bookindex index")
    return path


def documents(index_dir: str | Path) -> list[dict]:
    """Every committed document, failed ones included, by uri: ``DOCUMENT_COLUMNS`` and its
    file ``name``."""
    path = check_index(index_dir)
    stored = lance.dataset(lance_store.table_path(path, DOCUMENTS)).schema.names
    columns = [c for c in DOCUMENT_COLUMNS if c in stored]  # an index from before a column
    rows = lance_store.read_table(path, DOCUMENTS, columns).to_pylist()
    for row in rows:
        row["name"] = document_name(row["uri"])
        row.setdefault("ocr_pages", 0)
    return sorted(rows, key=lambda r: r["uri"])


def document_name(uri: str) -> str:
    """A PDF's file name, or a passage's id (``file.jsonl#id``)."""
    return uri.rsplit("#", 1)[1] if "#" in uri else Path(uri).name


def find_document(index_dir: str | Path, name: str) -> dict:
    """The committed document that ``name`` names (file name, title, doc_id or a prefix of 12
    or more, uri); KeyError saying what went wrong."""
    entries = [
        DocumentEntry(r["doc_id"], r["uri"], r["name"], r["title"] or "", r)
        for r in documents(index_dir)
    ]
    return match_document(name, entries).row


def toc(index_dir: str | Path, name: str) -> list[dict]:
    """One document's table of contents: ``sec_id``, ``level``, ``title``, ``page``,
    ``n_paragraphs`` per heading, the document's title first (level 0)."""
    row = find_document(index_dir, name)
    if row["status"] == FAILED:
        raise KeyError(f"{row['name']} failed to index: {row['error']}")
    stored = lance_store.read_table(index_dir, DOCUMENTS, ["doc_id", "toc"]).to_pylist()
    found = next(r["toc"] for r in stored if r["doc_id"] == row["doc_id"])
    return json.loads(found or "[]")


def section(
    index_dir: str | Path, name: str, sec_id: int, para_idx: int | None = None
) -> list[dict]:
    """The nodes at DeepRead's coordinates: the section ``sec_id`` of the document ``name``
    (its heading first, then its paragraphs, tables and figures in order), or only its
    paragraph ``para_idx``. Each node: ``NODE_COLUMNS``. KeyError when there is none."""
    row = find_document(index_dir, name)
    where = f"doc_id = '{row['doc_id']}' AND sec_id = {int(sec_id)}"
    if para_idx is not None:
        where += f" AND para_idx = {int(para_idx)}"
    dataset = lance.dataset(lance_store.table_path(index_dir, NODES))
    nodes = dataset.to_table(columns=NODE_COLUMNS, filter=where).to_pylist()
    if not nodes:
        at = f"section {sec_id}" + (f", paragraph {para_idx}" if para_idx is not None else "")
        raise KeyError(f"no {at} in {row['name']}")
    heading = [n for n in nodes if n["kind"] in ("section", "root")]
    rest = sorted((n for n in nodes if n not in heading), key=lambda n: n["para_idx"] or 0)
    return heading + rest


def builds(index_dir: str | Path) -> dict[str, str | None]:
    """``doc_id`` → the build JSON stored with each committed document (None for a document
    indexed before builds were recorded; ``pipelines.provenance.describe`` says it in a line)."""
    path = check_index(index_dir)
    stored = lance.dataset(lance_store.table_path(path, DOCUMENTS)).schema.names
    if "build" not in stored:
        ids = lance_store.read_table(path, DOCUMENTS, ["doc_id"]).column("doc_id").to_pylist()
        return dict.fromkeys(ids)
    rows = lance_store.read_table(path, DOCUMENTS, ["doc_id", "build"]).to_pylist()
    return {r["doc_id"]: r["build"] for r in rows}


def failures(index_dir: str | Path) -> list[dict]:
    """The failure rows: input, stage and error of every file or step that failed."""
    path = check_index(index_dir)
    return lance_store.read_table(path, FAILURES).to_pylist()
