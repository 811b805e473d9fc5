"""Every method bookindex answers with, declared once: its name, its kind and what it does.

Two kinds: passage retrieval (``/retrieve``, ``bookindex eval --corpus``: ranked documents,
``operators.query.retrieval``) and the query API (``/query``, ``bookindex ask``,
``bookindex eval --docs``: an answer with evidence units, ``operators.query.engine``). The jobs'
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
    evaluated: bool = True  # in bookindex eval's default set
    sees: str = ""  # the text and signals it ranks by (bookindex eval's summary says it)
    needs_vectors: bool = False  # ranks by the stored vectors: no answer from an index without


_PASSAGE_VECTOR = 'each passage\'s vector: the embedder over "title text"'
_LEAF_VECTOR = "each leaf's vector: the embedder over its own text (and caption)"
_TREE = "section headings, entities, the tree and page numbers"
METHODS = (
    Method(
        "zoom",
        PASSAGE,
        "ZoomRAG: Doc-Zoom (query and bridge walks), Chunk-Zoom evidence",
        sees=f"{_PASSAGE_VECTOR}; entities and title entities; each passage's sentences",
        needs_vectors=True,
    ),
    Method(
        "bm25",
        PASSAGE,
        "BM25 over each document's title and text",
        sees="each passage's title and text (words)",
    ),
    Method(
        "dense",
        PASSAGE,
        "cosine of the question to each document's vector",
        sees=_PASSAGE_VECTOR + " (the vectors zoom starts from)",
        needs_vectors=True,
    ),
    Method(
        "auto",
        QUERY,
        "an alias of bookrag, the best single method at equal evidence units (routing by "
        "question class did not beat it on held-out questions)",
        False,
        "bookrag's",
    ),
    Method(
        "bookrag",
        QUERY,
        "BookRAG agent, structured plan: scents and Page_Ranker",
        sees=f"{_LEAF_VECTOR}; the leaves' words (BM25); {_TREE}",
    ),
    Method(
        "deepread",
        QUERY,
        "DeepRead: locate with Retrieve, then read the best section",
        sees=f"{_LEAF_VECTOR}; the TOC and the sections' paragraphs",
    ),
    Method(
        "zoom",
        QUERY,
        "ZoomRAG: Doc-Zoom over the documents, Chunk-Zoom over their leaves",
        sees=f"{_LEAF_VECTOR}; the entities the leaves mention",
        needs_vectors=True,
    ),
    Method(
        "ladrag",
        QUERY,
        "LAD-RAG: graph filter (pages, sections, tables, figures, counts) or semantic "
        "search, then layout neighbours and community; a model-driven agent with a "
        "generative backend",
        sees=f"{_LEAF_VECTOR}; the layout graph and its communities",
    ),
    Method(
        "dense",
        QUERY,
        "dense top-k leaves (the baseline)",
        False,
        _LEAF_VECTOR + ", as a user embeds a PDF's chunks (no heading prepended)",
        needs_vectors=True,
    ),
    Method(
        "hybrid",
        QUERY,
        "BM25 and dense top-k fused by reciprocal rank (the second baseline)",
        False,
        f"{_LEAF_VECTOR}; the leaves' words (BM25)",
    ),
    Method(
        "bookrag_paper",
        QUERY,
        "BookRAG eq. 9–10 as written: hard cuts, Skyline",
        False,
        f"{_LEAF_VECTOR}; the leaves' words (BM25); {_TREE}; a cross-encoder "
        "(models.rerank_model) fused in when one is configured",
    ),
)


def method_names(kind: str) -> tuple[str, ...]:
    return tuple(m.name for m in METHODS if m.kind == kind)


def evaluated(kind: str) -> tuple[str, ...]:
    """The methods ``bookindex eval`` runs when none are named."""
    return tuple(m.name for m in METHODS if m.kind == kind and m.evaluated)


def sees(kind: str, name: str) -> str:
    """What a method of a kind ranks by (its ``sees``)."""
    return next(m.sees for m in METHODS if m.kind == kind and m.name == name)


def needs_vectors(kind: str, name: str) -> bool:
    """Whether a method ranks by the stored vectors (an index built without enrich has none)."""
    return any(m.needs_vectors for m in METHODS if m.kind == kind and m.name == name)


def describe(kind: str) -> str:
    """One line per method of a kind, for a job's ``--help``."""
    return "; ".join(f"{m.name}: {m.description}" for m in METHODS if m.kind == kind)


PASSAGE_METHODS = method_names(PASSAGE)
QUERY_METHODS = method_names(QUERY)
