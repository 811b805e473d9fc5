"""Every method bookindex answers with, declared once: its name, its kind and what it does.

Two kinds: passage retrieval (``/retrieve``, ``jobs.evaluate --corpus``: ranked documents,
``operators.query.retrieval``) and the query API (``/query``, ``jobs.query``,
``jobs.evaluate --docs``: an answer with evidence units, ``operators.query.engine``). The jobs'
``--method`` choices, the Serve request models and the evaluation's defaults read this table.
"""

from __future__ import annotations

from dataclasses import dataclass

PASSAGE, QUERY = "passage retrieval", "query API"


@dataclass(frozen=True)
class Method:
    name: str
    kind: str  # PASSAGE or QUERY
    description: str
    evaluated: bool = True  # in jobs.evaluate's default set


METHODS = (
    Method("zoom", PASSAGE, "ZoomRAG: Doc-Zoom (query and bridge walks), Chunk-Zoom evidence"),
    Method("bm25", PASSAGE, "BM25 over each document's title and text"),
    Method("dense", PASSAGE, "cosine of the question to each document's vector"),
    Method("auto", QUERY, "the method that measured best for the question's class", False),
    Method("bookrag", QUERY, "BookRAG agent, structured plan: scents and Page_Ranker"),
    Method("deepread", QUERY, "DeepRead: locate with Retrieve, then read the best section"),
    Method("zoom", QUERY, "ZoomRAG: Doc-Zoom over the documents, Chunk-Zoom over their leaves"),
    Method("ladrag", QUERY, "LAD-RAG: semantic search, then layout neighbours and community"),
    Method("dense", QUERY, "dense top-k leaves (the baseline)", False),
    Method("bookrag_paper", QUERY, "BookRAG eq. 9–10 as written: hard cuts, Skyline", False),
)


def method_names(kind: str) -> tuple[str, ...]:
    return tuple(m.name for m in METHODS if m.kind == kind)


def evaluated(kind: str) -> tuple[str, ...]:
    """The methods ``jobs.evaluate`` runs when none are named."""
    return tuple(m.name for m in METHODS if m.kind == kind and m.evaluated)


def describe(kind: str) -> str:
    """One line per method of a kind, for a job's ``--help``."""
    return "; ".join(f"{m.name}: {m.description}" for m in METHODS if m.kind == kind)


PASSAGE_METHODS = method_names(PASSAGE)
QUERY_METHODS = method_names(QUERY)
