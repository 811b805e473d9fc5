"""From a document's blocks to its headings: block typing, then section filtering.

Shared by the Ray pipeline (which parses page ranges in parallel and joins them) and by
``extract_headings``, the one-call entry point the benchmarks use.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import pymupdf

from bookindex.operators.kinds import SECTION
from bookindex.operators.models import is_generative
from bookindex.operators.parsing.parse import Block, document_metadata, parse_pages
from bookindex.operators.structure.blocks import classify_blocks
from bookindex.operators.structure.furniture import BodyStyle
from bookindex.operators.structure.learned_filter import section_filter as learned_or_rules
from bookindex.operators.structure.learned_filter import unavailable as learned_unavailable
from bookindex.operators.structure.outline_filter import choose_filter
from bookindex.operators.structure.sections import (
    Heading,
    SectionContext,
    SectionFilter,
    resolve_headings,
)
from bookindex.operators.structure.tree import build_tree, toc_skeleton

if TYPE_CHECKING:
    from bookindex.operators.models import ModelBackend


@dataclass
class Review:
    """The LLM refiner run in two passes (the index job's): ``decided`` None plans its windows
    (``facts["section_review"]``); then the model's decisions (block index → level, 0: not a
    title) and the errors of the windows that got none (window → why) are applied."""

    decided: dict[int, int] | None = None
    errors: dict[int, str] = field(default_factory=dict)
    window: int = 40  # candidates per request


SECTION_FILTERS = ("learned", "rules")
# The learned filter by default: better than the rules on unseen books under grouped CV (issue
# 20, README), and it keeps the generated sample books' trees (the title is the root, run-in
# labels are not sections); index.section_filter=rules chooses the rules.
DEFAULT_SECTION_FILTER = "learned"


# What a document's ``section_filter`` fact starts with when the learned filter was asked for
# and its model could not load: the rules decided (``filter_used``).
FALLBACK = "rules (fallback: "


def filter_used(kind: str = DEFAULT_SECTION_FILTER) -> str:
    """The section filter that decides for ``kind`` here: "learned", "rules", or "rules
    (fallback: why)" when the learned filter was asked for and its model file cannot load."""
    if kind != "learned":
        return "rules"
    why = learned_unavailable()
    return f"{FALLBACK}{why})" if why else "learned"


def section_filter_for(
    outline: list[tuple[int, str, int]],
    use_outline: bool,
    backend: ModelBackend | None = None,
    kind: str = DEFAULT_SECTION_FILTER,
    review: Review | None = None,
) -> SectionFilter:
    """The learned filter (``kind="learned"``; the rules when its model file cannot load) or
    the rule filters (layout, or outline when used); wrapped by the LLM refiner (BookRAG
    §4.2.2) when ``backend`` is a generative model, which then reviews the learned filter's
    least certain candidates first (the caller owns the backend, loaded once per worker), or
    when ``review`` is given: the refiner's windows are then only planned, or its decisions
    (``review.decided``: block index → level, from a ``ray.data.llm`` processor) applied."""
    if kind not in SECTION_FILTERS:
        raise ValueError(f"unknown section filter {kind!r}; expected one of {SECTION_FILTERS}")
    if kind == "learned":
        base = learned_or_rules(outline, use_outline)
    else:
        base = choose_filter(outline, use_outline)
    from bookindex.operators.structure.llm_refiner import LLMSectionFilter

    if review is not None:
        return LLMSectionFilter(
            None, base, review.window, decided=review.decided, window_errors=review.errors
        )
    if backend is None or not is_generative(backend):
        return base
    return LLMSectionFilter(backend, base)


def structure_blocks(
    blocks: list[Block],
    n_pages: int,
    outline: list[tuple[int, str, int]],
    use_outline: bool,
    section_filter: SectionFilter | None = None,
) -> tuple[BodyStyle, list[Heading]]:
    """Type the blocks in place and decide the headings. Blocks must be in document order."""
    body = classify_blocks(blocks, n_pages)
    context = SectionContext(body=body, n_pages=n_pages, outline=outline, blocks=blocks)
    section_filter = section_filter or section_filter_for(outline, use_outline)
    headings = resolve_headings(blocks, context, section_filter)
    return body, headings


def extract_headings(
    pdf_path: str,
    use_outline: bool = True,
    backend: ModelBackend | None = None,
    section_filter_kind: str = DEFAULT_SECTION_FILTER,
) -> list[tuple[int, str, int]]:
    """(level, title, 1-based page) of every heading the indexer finds in a PDF."""
    with pymupdf.open(pdf_path) as doc:
        meta = document_metadata(doc)
        parsed = parse_pages(doc, 0, doc.page_count)
    section_filter = section_filter_for(meta["outline"], use_outline, backend, section_filter_kind)
    _, headings = structure_blocks(
        parsed.blocks, meta["n_pages"], meta["outline"], use_outline, section_filter
    )
    return [(h.level, h.title, h.page) for h in headings]


def assemble_document(
    doc_id: str,
    meta: dict,
    blocks: list[Block],
    use_outline: bool = True,
    backend: ModelBackend | None = None,
    section_filter_kind: str = DEFAULT_SECTION_FILTER,
    review: Review | None = None,
) -> tuple[list, list[dict], dict]:
    """Blocks of a whole document (in page order) → tree nodes, TOC skeleton, facts.

    ``meta`` is ``operators.parsing.parse.document_metadata`` output; ``facts["section_filter"]``
    names the filter that decided (``filter_used``: a fallback to the rules says why). With a
    generative ``backend`` the headings are refined by the model (``operators.structure.llm_refiner``) and
    the facts say how many model calls failed (``section_model_errors``). With ``review``
    (``Review``), the facts hold the refiner's ``section_review``: its windows (``number``,
    ``blocks``: the candidates' block indices, ``messages``) and the reviewed candidates
    (``llm_refiner.Review`` fields), with the model's levels once ``review.decided`` is given.
    """
    blocks = sorted(blocks, key=lambda b: (b.page, b.order))
    section_filter = section_filter_for(
        meta["outline"], use_outline, backend, section_filter_kind, review
    )
    body, headings = structure_blocks(
        blocks, meta["n_pages"], meta["outline"], use_outline, section_filter
    )
    title = meta["title"] or _first_title(blocks) or ""
    nodes = build_tree(doc_id, title, blocks, headings)
    facts = {
        "body_font_size": body.font_size,
        "outline_used": bool(use_outline and len(meta["outline"]) >= 2),
        "n_sections": sum(n.kind == SECTION for n in nodes),
        "section_filter": filter_used(section_filter_kind),
    }
    errors = getattr(section_filter, "errors", None)
    if errors is not None and review is None:
        facts["section_model_errors"] = len(errors)
    if review is not None:
        reviews = section_filter.reviews
        facts["section_review"] = {
            "windows": [
                {
                    "number": w.number,
                    "blocks": [r.block_index for r in reviews if r.window == w.number],
                    "messages": w.messages,
                }
                for w in section_filter.windows
            ],
            "reviews": [asdict(r) for r in reviews],
        }
    return nodes, toc_skeleton(nodes), facts


def _first_title(blocks: list[Block]) -> str | None:
    """The largest text on the first page, as a fallback document title."""
    first = [b for b in blocks if b.page == 1 and b.text.strip()]
    if not first:
        return None
    return max(first, key=lambda b: (b.font_size, -b.order)).text[:300]
