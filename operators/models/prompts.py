"""Every prompt bookindex sends to a model, and the JSON schema of every structured answer, in one
place (docs/architecture.md, "Models").

The index side: entity extraction (BookRAG §4.3), the section filter (BookRAG §4.2.2), the choice
among entity-resolution candidates (BookRAG Alg. 1), figure descriptions, and the structured
output retry (operators/models/structured.py). The query side: question classification, global
filters, entity names, decomposition, section choice, the answer (BookRAG §5) and DeepRead's
ReAct step, BookRAG's batched Map, and the cited answer every query method ends with. Plain data: the modules that send them import them from here; nothing here calls a
model.
"""

from __future__ import annotations

from typing import Any

from bookindex.operators.kinds import FILTER_TYPES, MAX_LEVEL, OPERATIONS, QUERY_CLASSES

# ---- structured output (operators/models/structured.py) ---------------------------------------


def chat(system: str, user: str) -> list[dict]:
    """The chat messages of one request: the instruction, then the user's content."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


RETRY_PROMPT = (
    "Your previous answer was not valid JSON for the requested schema ({problem}). "
    "Answer again with one JSON object only, no prose and no code fences."
)
SCHEMA_PROMPT = "Answer with one JSON object that follows this JSON schema:\n{schema}"

# ---- entities and relations (operators/models/base.py: extract_entities) ----------------------

ENTITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "type": {"type": "string"},
                    "description": {"type": "string"},
                },
                "required": ["name", "type", "description"],
            },
        },
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "source": {"type": "string"},
                    "target": {"type": "string"},
                    "type": {"type": "string"},
                    "description": {"type": "string"},
                    "weight": {"type": "number"},
                },
                "required": ["source", "target", "type"],
            },
        },
    },
    "required": ["entities", "relations"],
}

ENTITY_PROMPT = (
    "Extract the named entities of the passage (people, organisations, places, works, laws, "
    "events, products, concepts that the passage defines) and the relations the passage states "
    "between them. Give each entity a type (one word, upper case) and a one-sentence "
    "description from the passage. Relations join two extracted entity names with a short "
    "relation type and a weight from 1 (weak) to 10 (strong). Answer with JSON only."
)

# ---- the section filter (operators/structure/llm_refiner.py) ----------------------------------

SECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "level": {"type": "integer", "minimum": 0, "maximum": MAX_LEVEL},
                },
                "required": ["index", "level"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["decisions"],
    "additionalProperties": False,
}

# "cut at 120 characters": llm_refiner.TEXT_CHARS
SECTION_PROMPT = (
    "You decide the section structure of a long document (a book, report or article). "
    "Layout analysis found the title candidates below, in reading order. For each one decide "
    "whether it is a real section heading and, if so, its level: 1 for the top level (parts or "
    "chapters), 2 for sections within them, and so on down to 6. Answer level 0 for text that "
    "is not a section heading: running headers and footers, page numbers, the document's own "
    "title and author lines, figure or table captions, table cells, emphasised sentences. "
    "Each candidate has its index, text (cut at 120 characters), font size in points, whether "
    "it is bold, its page, and the level the layout analysis proposes (0: not a title); "
    "when present, p_title is a learned classifier's probability that it is a heading. "
    "Headings decided earlier in the document are given for context: keep the levels "
    "consistent with them. Answer with JSON only: "
    '{"decisions": [{"index": <candidate index>, "level": <0..6>}, ...]}, one entry per '
    "candidate."
)

# ---- entity resolution: one of several candidates (operators/graph/resolution.py) -------------

SELECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"choice": {"type": "integer"}},
    "required": ["choice"],
}

SELECT_PROMPT = (
    "You decide whether a newly found entity is the same real-world "
    "entity as one of the known candidates. Answer with JSON: the number of the "
    "matching candidate as choice, or -1 when none of them is the same entity."
)

# ---- figures and tables (pipelines/enrich.py, pipelines/model_requests.py) ------------------------------------------------------------

IMAGE_PROMPT = (
    "Describe this figure from a document for a search index: what it shows, the names, "
    "labels and numbers it contains, in at most five sentences."
)

TABLE_PROMPT = (
    "Describe this table from a document for a search index: what it compares, its row and "
    "column headers, and the notable values, in at most five sentences."
)

# ---- BookRAG's query planner (operators/query/bookrag.py, bookrag_ops.py) ---------------------

CLASS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"category": {"type": "string", "enum": list(QUERY_CLASSES)}},
    "required": ["category"],
}

CLASS_PROMPT = (
    "Classify the question. single-hop: answered from one place in "
    "the document (a paragraph, a table, a figure). multi-hop: needs several "
    "separate lookups that are then combined. global: an aggregation (count, list, "
    "summary) over items picked by a structural filter (all tables, figures in "
    'Section 3, pages 2-5). JSON: {"category": "single-hop"|"multi-hop"|"global"}'
)

FILTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "filters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "filter_type": {"type": "string", "enum": list(FILTER_TYPES)},
                    "filter_value": {"type": ["string", "null"]},
                },
                "required": ["filter_type"],
            },
        },
        "operation": {"type": "string", "enum": list(OPERATIONS)},
    },
    "required": ["filters", "operation"],
}

FILTER_PROMPT = (
    "Turn the aggregation question into filters and one operation. "
    "filter_type: section (with a title or number as value, or null for all), "
    "image, table, or page (value '3-10' or '5'). operation: COUNT, LIST, "
    'SUMMARIZE or ANALYZE. JSON: {"filters": [{"filter_type", "filter_value"}], '
    '"operation"}'
)

NAMES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
    "required": ["entities"],
}

NAMES_PROMPT = (
    "List the named things (people, organisations, products, places, "
    "technical terms, table or figure names) that the question asks about. Answer "
    'with JSON: {"entities": [names as written in the question]}.'
)

DECOMPOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sub_questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "type": {"type": "string", "enum": ["retrieval", "synthesis"]},
                },
                "required": ["question", "type"],
            },
        }
    },
    "required": ["sub_questions"],
}

DECOMPOSE_PROMPT = (
    "Break the question into simple sub-questions that can each be "
    "answered by one lookup in the document and do not depend on each other; put "
    "the combining step last with type 'synthesis'. JSON: "
    '{"sub_questions": [{"question": ..., "type": "retrieval"|"synthesis"}]}'
)

SECTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sections": {"type": "array", "items": {"type": "integer"}}},
    "required": ["sections"],
}

SECTIONS_PROMPT = (
    "Pick the sections most likely to answer the question. JSON: "
    '{"sections": [section numbers from the list, best first]}'
)

# ---- the cited answer of every query method (operators/query/answering.py) --------------------

CITED_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "sentences": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "cites": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["text", "cites"],
            },
        },
    },
    "required": ["answer", "sentences"],
}

CITED_ANSWER_PROMPT = (
    "Answer the question from the numbered evidence only. Each evidence unit is given as "
    "[number] (document, page, section, paragraph) followed by its text. Give a short answer "
    "(a number, a name, a list or a phrase; a sentence when the question needs one), then the "
    "sentences that support it, each with the numbers of the evidence units it rests on. "
    'If the evidence does not contain the answer, answer "Not answerable" with no sentences. '
    'JSON: {"answer": str, "sentences": [{"text": str, "cites": [evidence numbers]}]}'
)

# ---- BookRAG's Map, batched per question (operators/query/bookrag_map.py) ---------------------

PARTIALS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answers": {"type": "array", "items": {"type": "string"}}},
    "required": ["answers"],
}

PARTIALS_PROMPT = (
    "Answer each numbered sub-question briefly from the numbered evidence only (an empty "
    'string where the evidence does not answer it). JSON: {"answers": [one answer per '
    "sub-question, in order]}"
)

CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"keep": {"type": "array", "items": {"type": "integer"}}},
    "required": ["keep"],
}

CHECK_PROMPT = (
    "A structural filter picked the numbered items below (tables, figures or section "
    "headings, each with its page and text) for an aggregation question. Keep only the items "
    "that are real instances of what the question counts or lists (not icons, logos, empty or "
    'decorative items, not items off its topic). JSON: {"keep": [item numbers]}'
)

# ---- DeepRead's ReAct loop (operators/query/deepread.py) --------------------------------------

ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {"type": "string", "enum": ["toc", "retrieve", "read_section", "answer"]},
        "query": {"type": "string"},
        "doc": {"type": "integer"},
        "sec_id": {"type": "integer"},
        "start": {"type": "integer"},
        "end": {"type": "integer"},
        "answer": {"type": "string"},
    },
    "required": ["thought", "action"],
}

REACT_PROMPT = (
    "You answer questions about documents by using tools. Each turn, reply "
    "with JSON: thought, action (toc | retrieve | read_section | answer) and its "
    "arguments (retrieve: query; read_section: doc, sec_id, start, end; toc: doc; "
    "answer: answer). Read before you answer; cite nothing you did not read."
)

# ---- LAD-RAG's retriever agent (operators/query/ladrag.py: agent_loop; LAD-RAG §2.2, Fig. 12) --

LADRAG_ACTIONS = ("semantic_search", "graph_filter", "contextualize", "answer")
LADRAG_ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {"type": "string", "enum": list(LADRAG_ACTIONS)},
        "query": {"type": "string"},
        "spec": {"type": "object"},
        "node_id": {"type": "string"},
        "answer": {"type": "string"},
        "node_ids": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["thought", "action"],
}
LADRAG_AGENT_PROMPT = (
    "You retrieve the evidence for a question from a document held as a graph of nodes "
    "(paragraphs, lists, tables, images, captions, formulas, sections) with their text, page "
    "and section. Prefer recall over precision: when the question asks about all the tables "
    "or figures of some kind, take them all. Each turn, reply with JSON: thought, action and "
    "its arguments.\n"
    "- semantic_search: query (a string) → the nodes closest in meaning;\n"
    "- graph_filter: spec, an object with any of doc, kinds (list of {kinds}), page_from, "
    'page_to, sec_id, section_title_contains, section_number (e.g. "3.2"), text_contains, '
    "has_caption, min_tokens, limit → the nodes matching every condition, in reading order;\n"
    "- contextualize: node_id (of a node you were shown) → its layout neighbours (caption, "
    "references, continuation) and the other members of its community;\n"
    "- answer: answer (short) and node_ids (the evidence you keep, best first; default: "
    "everything you were shown) — this ends the search.\n"
    "You have at most {rounds} turns."
)
