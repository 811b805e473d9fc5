"""An uncaptioned table's entity is named after the page it is on (1-based, as node pages are)."""

from __future__ import annotations

import pymupdf
import pytest

from bookindex.operators.graph.entities import modal_entity_name
from bookindex.operators.parsing.parse import document_metadata, parse_pages
from bookindex.operators.structure.assemble import assemble_document

SYLLABUS = "syllabusqa/syllabi/pdf/130 syllabus_2 S 2023.pdf"  # tables without captions


@pytest.fixture(scope="module")
def syllabus(shared_data):
    path = shared_data / SYLLABUS
    with pymupdf.open(path) as doc:
        meta = document_metadata(doc)
        blocks = parse_pages(doc, 0, doc.page_count).blocks
        nodes, _, _ = assemble_document("syllabus", meta, blocks)
        page_texts = [" ".join(page.get_text().split()) for page in doc]
    return [dict(vars(n)) for n in nodes], page_texts


def test_an_uncaptioned_table_is_named_after_the_page_it_is_on(syllabus):
    nodes, page_texts = syllabus
    tables = [n for n in nodes if n["kind"] == "table" and not n["title"].strip()]
    assert len(tables) >= 3
    first = tables[0]
    assert first["page_start"] == 1  # "Nutrition 130 Class Broad Learning Objectives", page 1
    assert modal_entity_name(first) == "Table on page 1"
    for table in tables:
        page = table["page_start"]
        assert modal_entity_name(table) == f"Table on page {page}"
        cell = next(c.strip() for c in table["text"].replace("\n", " | ").split(" | ") if c.strip())
        # the named page (1-based) is the physical page that holds the table's first cell
        assert " ".join(cell.split()) in page_texts[page - 1]


def test_a_captioned_table_keeps_its_caption_as_name(shared_data):
    path = shared_data / "mmlongbench/documents/2303.05039v2.pdf"
    with pymupdf.open(path) as doc:
        meta = document_metadata(doc)
        nodes, _, _ = assemble_document("paper", meta, parse_pages(doc, 0, doc.page_count).blocks)
    table = next(vars(n) for n in nodes if n.kind == "table")
    assert modal_entity_name(table).startswith("Table 1: An example of Receptiviti score")
