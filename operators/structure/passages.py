"""Passage corpora (JSONL, one ``{"id", "title", "text"}`` per line) as documents.

Each passage becomes a document of one section: the root carries the title, and the text is
its one paragraph (``sec_id`` 0, ``para_idx`` 1). ``doc_id`` is the sha256 of the passage's
canonical JSON, so an edited passage is re-indexed and an unchanged one is skipped, exactly as
for PDFs; ``uri`` is ``<file>#<id>``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from operators.kinds import ROOT
from operators.structure.tree import Node, count_tokens, toc_skeleton

# Bumped by a change to a passage's tree (pipelines/provenance.py).
BUILD_VERSION = 1
PASSAGE_SUFFIXES = (".jsonl",)


@dataclass
class Passage:
    uri: str
    passage_id: str
    title: str
    text: str
    doc_id: str
    error: str = ""


def is_passage_file(path: str) -> bool:
    return path.lower().endswith(PASSAGE_SUFFIXES)


def read_passages(path: str) -> list[Passage]:
    """Every line of a JSONL corpus; a malformed line is a Passage with ``error`` set."""
    passages = []
    source = str(Path(path).resolve())
    with open(source, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            uri = f"{source}#line{number}"
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("a line must be a JSON object")
                passage_id = str(record["id"])
                title = str(record.get("title") or "")
                text = str(record["text"])
            except (ValueError, KeyError) as exc:
                error = f"line {number}: not a passage ({type(exc).__name__}: {exc})"
                passages.append(Passage(uri, "", "", "", "", error))
                continue
            canonical = json.dumps([passage_id, title, text], ensure_ascii=False)
            doc_id = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
            passages.append(Passage(f"{source}#{passage_id}", passage_id, title, text, doc_id))
    return passages


def passage_nodes(passage: Passage) -> tuple[list[Node], list[dict]]:
    """The tree of one passage (root + one paragraph) and its TOC skeleton."""
    prefix = passage.doc_id[:12]
    n_tokens = count_tokens(passage.text)
    common = dict(page_start=0, page_end=0, bbox=[0.0, 0.0, 0.0, 0.0], sec_id=0)
    common.update(font_size=0.0, bold=False)
    root = Node(
        node_id=f"{prefix}:0",
        parent_id=None,
        kind=ROOT,
        level=0,
        title=passage.title,
        text="",
        para_idx=None,
        order=0,
        n_tokens=n_tokens,
        children=[],
        n_paragraphs=1,
        **common,
    )
    leaf = Node(
        node_id=f"{prefix}:1",
        parent_id=root.node_id,
        kind="text",
        level=1,
        title="",
        text=passage.text,
        para_idx=1,
        order=1,
        n_tokens=n_tokens,
        children=[],
        n_paragraphs=0,
        **common,
    )
    nodes = [root, leaf]
    return nodes, toc_skeleton(nodes)
