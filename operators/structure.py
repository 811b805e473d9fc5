"""From a document's blocks to its headings: block typing, then section filtering.

Shared by the Ray pipeline (which parses page ranges in parallel and joins them) and by
``extract_headings``, the one-call entry point the benchmarks use.
"""

from __future__ import annotations

import pymupdf

from operators.blocks import BodyStyle, classify_blocks
from operators.parse import Block, document_metadata, parse_pages
from operators.sections import Heading, SectionContext, choose_filter, resolve_headings


def structure_blocks(
    blocks: list[Block], n_pages: int, outline: list[tuple[int, str, int]], use_outline: bool
) -> tuple[BodyStyle, list[Heading]]:
    """Type the blocks in place and decide the headings. Blocks must be in document order."""
    body = classify_blocks(blocks, n_pages)
    context = SectionContext(body=body, n_pages=n_pages, outline=outline, blocks=blocks)
    headings = resolve_headings(blocks, context, choose_filter(outline, use_outline))
    return body, headings


def extract_headings(pdf_path: str, use_outline: bool = True) -> list[tuple[int, str, int]]:
    """(level, title, 1-based page) of every heading the indexer finds in a PDF."""
    with pymupdf.open(pdf_path) as doc:
        meta = document_metadata(doc)
        parsed = parse_pages(doc, 0, doc.page_count)
    _, headings = structure_blocks(parsed.blocks, meta["n_pages"], meta["outline"], use_outline)
    return [(h.level, h.title, h.page) for h in headings]
