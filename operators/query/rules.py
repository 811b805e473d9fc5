"""Reading a question without a generative model: its class (BookRAG Table 2), its structural
filters, its parts. Rules over the question's words; the LLM planner replaces them when one is
configured, and falls back to them when its answer is not usable.

    classify("How many tables are in Section 3?")   # "global"
    global_spec("How many figures are on pages 3-10?")
    # {"filters": [{"filter_type": "page", "filter_value": "3-10"},
    #              {"filter_type": "image", "filter_value": None}], "operation": "COUNT"}
"""

from __future__ import annotations

import re

from bookindex.operators.kinds import (  # noqa: F401 (the query modules import them from here)
    FILTER_TYPES,
    GLOBAL,
    MULTI,
    OPERATIONS,
    QUERY_CLASSES,
    SINGLE,
)

_MODAL_WORDS = {
    "table": "table",
    "tables": "table",
    "figure": "image",
    "figures": "image",
    "fig": "image",
    "image": "image",
    "images": "image",
    "picture": "image",
    "pictures": "image",
    "photo": "image",
    "photos": "image",
    "chart": "image",
    "charts": "image",
    "graph": "image",
    "graphs": "image",
    "plot": "image",
    "plots": "image",
    "diagram": "image",
    "diagrams": "image",
    "illustration": "image",
    "illustrations": "image",
}
_STRUCTURE_WORDS = {"section", "sections", "chapter", "chapters", "appendix", "appendices"}
_COUNT = re.compile(r"\b(how many|number of|count of|count the|total number)\b", re.I)
_LIST = re.compile(r"\b(list (all|every|the)|which (tables|figures|sections|chapters))\b", re.I)
_SUMMARY = re.compile(r"\b(summari[sz]e|overview of|main (points|topics))\b", re.I)
_PAGES = re.compile(r"\bpages?\s+(\d+)\s*(?:-|–|to|through|and)\s*(\d+)\b|\bpage\s+(\d+)\b", re.I)
_SECTION_REF = re.compile(
    r"\b(section|chapter|appendix)\s+([0-9]+(?:\.[0-9]+)*|[A-Z](?:\.[0-9]+)*)\b"
    r"|\b(?:the|in)\s+[\"“']([^\"”']{3,60})[\"”']\s+(?:section|chapter)",
    re.I,
)
_MULTI_CUES = re.compile(
    r"\b(compare|comparison|difference between|differ|both|respectively|in total|sum of|"
    r"combined|more than|less than|greater|higher|lower|larger|smaller|versus|vs\.?)\b",
    re.I,
)
_ALTERNATIVES = re.compile(r"[?:]\s*([^?]+?),?\s+or\s+([^?]+)\?\s*$")


def classify(question: str) -> str:
    """single-hop, multi-hop or global."""
    text = question.strip()
    words = set(re.findall(r"[a-z]+", text.lower()))
    structural = bool(words & set(_MODAL_WORDS)) or bool(words & _STRUCTURE_WORDS)
    aggregate = _COUNT.search(text) or _LIST.search(text) or _SUMMARY.search(text)
    if aggregate and structural and _counts_structure(text):
        return GLOBAL
    if _MULTI_CUES.search(text) or _ALTERNATIVES.search(text) or len(split_question(text)) > 1:
        return MULTI
    return SINGLE


def _counts_structure(text: str) -> bool:
    """'How many tables…' counts document items; 'how many people in the table…' does not."""
    lowered = text.lower()
    match = _COUNT.search(lowered) or _LIST.search(lowered) or _SUMMARY.search(lowered)
    tail = lowered[match.end() : match.end() + 40] if match else ""
    head_words = re.findall(r"[a-z]+", tail)[:3]
    return any(w in _MODAL_WORDS or w in _STRUCTURE_WORDS or w == "pages" for w in head_words)


def global_spec(question: str) -> dict:
    """BookRAG's filter plan (Figure 12's JSON) for a global question."""
    text = question.strip()
    lowered = text.lower()
    filters: list[dict] = []
    for match in _PAGES.finditer(text):
        if match.group(3):
            filters.append({"filter_type": "page", "filter_value": match.group(3)})
        else:
            filters.append(
                {"filter_type": "page", "filter_value": f"{match.group(1)}-{match.group(2)}"}
            )
    for match in _SECTION_REF.finditer(text):
        value = match.group(2) or match.group(3)
        filters.append({"filter_type": "section", "filter_value": value})
    words = re.findall(r"[a-z]+", lowered)
    modal = next((_MODAL_WORDS[w] for w in words if w in _MODAL_WORDS), None)
    if modal:
        filters.append({"filter_type": modal, "filter_value": None})
    elif any(w in _STRUCTURE_WORDS for w in words) and not any(
        f["filter_type"] == "section" for f in filters
    ):
        filters.append({"filter_type": "section", "filter_value": None})
    if _COUNT.search(text):
        operation = "COUNT"
    elif _LIST.search(text):
        operation = "LIST"
    elif _SUMMARY.search(text):
        operation = "SUMMARIZE"
    else:
        operation = "ANALYZE"
    return {"filters": filters, "operation": operation, "topic": _topic(text)}


def _topic(question: str) -> str:
    """What the counted items must be about: 'figures related to IFT' → 'IFT'."""
    match = re.search(
        r"\b(?:related to|about|on|regarding|concerning|that (?:show|shows|mention|mentions|"
        r"describe|describes)|showing|of)\s+(.+?)(?:\s+(?:in|on|from|are|is|does|do)\b.*)?\??$",
        question.strip(),
        re.I,
    )
    if not match:
        return ""
    topic = match.group(1).strip(" ?.")
    if topic.lower().split()[:1] in (["the"], ["this"]) and len(topic.split()) <= 2:
        return ""
    if re.fullmatch(r"(the\s+)?(document|report|paper|pages?\b.*|this\s+\w+)", topic, re.I):
        return ""
    return topic


def split_question(question: str) -> list[str]:
    """Sub-questions of a compound question (rules: alternatives 'A, or B?' and lists joined by
    'and' after a shared stem). The question itself when it does not split."""
    text = question.strip()
    match = _ALTERNATIVES.search(text)
    if match:
        stem = text[: match.start() + 1].strip()
        return [f"{stem} {match.group(1).strip()}", f"{stem} {match.group(2).strip()}"]
    match = re.match(
        r"^(what|which|who|how much|how many)\b(.+?)\b(?:of|for|in)\s+(.+?)\s+and\s+(.+?)\?$",
        text,
        re.I,
    )
    if match and len(match.group(3).split()) <= 6 and len(match.group(4).split()) <= 6:
        stem = f"{match.group(1)}{match.group(2)}"
        return [f"{stem} of {match.group(3)}?", f"{stem} of {match.group(4)}?"]
    return [text]


def parse_pages(value: str | None) -> tuple[int, int] | None:
    """'3-10' → (3, 10); '5' → (5, 5); None or junk → None."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*(?:-|–|to)\s*(\d+)\s*|\s*(\d+)\s*", str(value))
    if not match:
        return None
    if match.group(3):
        page = int(match.group(3))
        return page, page
    lo, hi = int(match.group(1)), int(match.group(2))
    return (lo, hi) if lo <= hi else (hi, lo)


_INSTRUCTION = re.compile(
    r"^(please\b|kindly\b|round\b|give me an?\b|return me\b|answer (in|with|'|\")|"
    r"write (down )?the answer|represent\b|express\b|your answer\b|e\.g\.)"
    r"|\b(in|with|into) (the |a )?(int|integer|float|string|list|str)\b.*\bformat\b"
    r"|\bformat\b.*\b(int|integer|float|string|list)\b",
    re.I,
)


def retrieval_text(question: str) -> str:
    """The question without its answer-format instructions ('Please write the answer in float
    format.', 'Round your answer to three decimal places.'): they name no content and pull
    lexical and dense search toward unrelated text. The question itself if nothing is left."""
    parts = re.split(r"(?<=[.?!])\s+", question.strip())
    kept = [p for p in parts if not _INSTRUCTION.search(p.strip())]
    return " ".join(kept).strip() or question.strip()


def modalities(question: str) -> set[str]:
    """Node kinds the question names: 'table', 'image' (figure, chart, photo…)."""
    words = set(re.findall(r"[a-z]+", question.lower()))
    return {_MODAL_WORDS[w] for w in words if w in _MODAL_WORDS}


_NUMBERED = re.compile(r"\b(table|tab\.|figure|fig\.?)\s*(\d+)\b", re.I)


def numbered_references(question: str) -> list[tuple[str, str]]:
    """('table', '3') / ('image', '2') for every 'Table 3', 'Fig. 2' the question names."""
    out = []
    for match in _NUMBERED.finditer(question):
        kind = "table" if match.group(1).lower().startswith("tab") else "image"
        if (kind, match.group(2)) not in out:
            out.append((kind, match.group(2)))
    return out
