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

from bookindex.operators.kinds import ROOT
from bookindex.operators.structure.tree import Node, count_tokens, toc_skeleton

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
    """Every line of a JSONL corpus; a line that breaks a rule is a Passage with ``error``.

    The rules (docs/indexing.md, "Input rules"): a line is a JSON object (bytes that are not UTF-8,
    text that is not JSON, nesting deeper than Python's parser takes: errors of that line);
    ``id`` is a string or an integer; ``title`` a string or null; ``text`` a non-blank string
    (null, empty and whitespace-only text is not indexed); no string holds a lone surrogate
    (``"\\ud800"``: not UTF-8, so not storable); an ``id`` seen on an earlier line of the file
    is not indexed again (the first line with it wins, whatever the later text: a re-run
    indexes the same passage). Blank lines are skipped."""
    passages: list[Passage] = []
    source = str(Path(path).resolve())
    first_line: dict[str, int] = {}
    with open(source, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                passage_id, title, text = _passage_fields(raw)
            except _NotAPassage as exc:
                error = f"line {number}: not a passage ({exc})"
                passages.append(Passage(f"{source}#line{number}", "", "", "", "", error))
                continue
            if passage_id in first_line:
                error = (
                    f"line {number}: duplicate id {passage_id!r} (first on line "
                    f"{first_line[passage_id]}, which is the one indexed)"
                )
                passages.append(Passage(f"{source}#line{number}", passage_id, "", "", "", error))
                continue
            first_line[passage_id] = number
            canonical = json.dumps([passage_id, title, text], ensure_ascii=False)
            doc_id = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
            passages.append(Passage(f"{source}#{passage_id}", passage_id, title, text, doc_id))
    return passages


class _NotAPassage(ValueError):
    pass


def _passage_fields(raw: bytes) -> tuple[str, str, str]:
    """(id, title, text) of one line, or ``_NotAPassage`` saying which rule it breaks."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _NotAPassage(f"not UTF-8: byte {exc.start}") from None
    except RecursionError:
        raise _NotAPassage("JSON nested too deeply") from None
    except ValueError as exc:
        raise _NotAPassage(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise _NotAPassage("a line must be a JSON object")
    passage_id = record.get("id")
    if isinstance(passage_id, bool) or not isinstance(passage_id, str | int):
        raise _NotAPassage(f"id must be a string or an integer, not {_kind(record, 'id')}")
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise _NotAPassage(f"title must be a string or null, not {_kind(record, 'title')}")
    text = record.get("text")
    if not isinstance(text, str):
        raise _NotAPassage(f"text must be a string, not {_kind(record, 'text')}")
    if not text.strip():
        raise _NotAPassage("text is empty")
    fields = (str(passage_id), title or "", text)
    for name, value in zip(("id", "title", "text"), fields, strict=True):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _NotAPassage(f"{name} holds a lone surrogate at character {exc.start}") from None
    if not fields[0].strip():
        raise _NotAPassage("id is empty")
    return fields


def _kind(record: dict, key: str) -> str:
    if key not in record:
        return "missing"
    return "null" if record[key] is None else type(record[key]).__name__


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
