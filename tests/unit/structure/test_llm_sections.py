"""LLMSectionFilter on a real HiPS PDF, with a fake OpenAI-compatible model server.

The PDF is parsed once per module; every test runs the section filters on a copy of its
blocks. The fake server reads the candidates the filter sends and answers by rule.
"""

from __future__ import annotations

import copy
import json
import math

import pytest

from bookindex.operators.models import ModelConfig
from bookindex.operators.models.offline import OfflineBackend
from bookindex.operators.models.openai_compatible import OpenAIBackend
from bookindex.operators.structure.assemble import assemble_document, structure_blocks
from bookindex.operators.structure.llm_refiner import LLMSectionFilter
from bookindex.operators.structure.outline_filter import OutlineSectionFilter, choose_filter
from bookindex.operators.structure.sections import LayoutSectionFilter
from tests.conftest import missing_shared_data
from tests.fakes import FakeOpenAI


@pytest.fixture(scope="module")
def book(shared_data):
    import pymupdf

    from bookindex.operators.parsing.parse import document_metadata, parse_pages

    pdfs = sorted((shared_data / "hips" / "PDFs").glob("*.pdf"))
    if not pdfs:
        missing_shared_data("no HiPS PDFs in the shared data")
    with pymupdf.open(str(pdfs[0])) as doc:
        meta = document_metadata(doc)
        blocks = parse_pages(doc, 0, doc.page_count).blocks
    return meta, blocks


@pytest.fixture
def server():
    servers: list[FakeOpenAI] = []

    def start(rule) -> FakeOpenAI:
        servers.append(FakeOpenAI(rule))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def candidates_in(body: dict) -> list[dict]:
    return json.loads(body["messages"][-1]["content"])["candidates"]


def answer(decisions: list[dict]) -> str:
    return json.dumps({"decisions": decisions})


def demote_all(body: dict) -> str:
    return answer([{"index": c["index"], "level": 0} for c in candidates_in(body)])


def echo_base(body: dict) -> str:
    return answer(
        [{"index": c["index"], "level": c["proposed_level"]} for c in candidates_in(body)]
    )


def garbage(body: dict) -> str:
    return "As an AI model I would rather not say."


def headings_with(book, section_filter, use_outline: bool = False) -> list[tuple]:
    meta, blocks = book
    blocks = copy.deepcopy(blocks)
    _, headings = structure_blocks(
        blocks, meta["n_pages"], meta["outline"], use_outline, section_filter
    )
    return [(h.level, h.title, h.page) for h in headings]


def refiner(fake: FakeOpenAI, base, batch_size: int = 40, max_retries: int = 0):
    config = ModelConfig(backend="openai", base_url=fake.url, model="fake", max_retries=max_retries)
    return LLMSectionFilter(OpenAIBackend(config), base, batch_size=batch_size)


@pytest.fixture(scope="module")
def layout_headings(book):
    headings = headings_with(book, LayoutSectionFilter())
    assert len(headings) >= 3, "the test book should have layout headings"
    return headings


def test_model_demoting_everything_leaves_no_headings(book, server, layout_headings):
    fake = server(demote_all)
    section_filter = refiner(fake, LayoutSectionFilter())
    assert headings_with(book, section_filter) == []
    assert section_filter.errors == []
    assert len(fake.chats) == 1
    assert section_filter.n_changed == len(layout_headings)


def test_model_echoing_the_base_levels_changes_nothing(book, server, layout_headings):
    fake = server(echo_base)
    section_filter = refiner(fake, LayoutSectionFilter(), batch_size=4)
    assert headings_with(book, section_filter) == layout_headings
    assert section_filter.errors == [] and section_filter.n_changed == 0
    sent = [c for body in fake.chats for c in candidates_in(body)]
    assert len(fake.chats) == math.ceil(len(sent) / 4)
    assert all(len(c["text"]) <= 120 for c in sent)
    assert {"index", "text", "font_size", "bold", "page", "proposed_level"} <= set(sent[0])
    assert fake.chats[0]["response_format"]["type"] == "json_schema"
    # Later batches carry the headings decided before them, in order.
    last = json.loads(fake.chats[-1]["messages"][-1]["content"])["earlier_headings"]
    n_before = sum(c["proposed_level"] > 0 for b in fake.chats[:-1] for c in candidates_in(b))
    earlier = layout_headings[:n_before]
    assert earlier, "the test needs headings before the last batch"
    assert [(h["level"], h["title"]) for h in last] == [
        (lv, title[:79] + "…" if len(title) > 80 else title) for lv, title, _ in earlier
    ][-30:]


def test_model_garbage_keeps_the_base_decision_and_records_errors(book, server, layout_headings):
    fake = server(garbage)
    section_filter = refiner(fake, LayoutSectionFilter(), batch_size=8)
    assert headings_with(book, section_filter) == layout_headings
    assert section_filter.errors and len(section_filter.errors) == len(fake.chats)
    assert "no valid JSON" in section_filter.errors[0]


def test_partial_answers_clamped_levels_and_unknown_indices(book, server, layout_headings):
    def rule(body: dict) -> str:
        rows = [
            {"index": c["index"], "level": 9} for c in candidates_in(body) if c["proposed_level"]
        ]
        return answer([*rows, {"index": 10**6, "level": 1}, {"index": "x", "level": 2}])

    fake = server(rule)
    got = headings_with(book, refiner(fake, LayoutSectionFilter()))
    assert got == [(6, title, page) for _, title, page in layout_headings]


def test_outline_extras_pass_through(book, server):
    meta, blocks = book
    # The book's own outline-only entries are production file names ("9780415792219c06"),
    # which the outline filter drops; add one real entry that no block carries.
    missing = (1, "Appendix Z: Material Not Printed Here", 2)
    book = ({**meta, "outline": [*meta["outline"], missing]}, blocks)
    base = choose_filter(book[0]["outline"], True)
    assert isinstance(base, OutlineSectionFilter)
    expected = headings_with(book, OutlineSectionFilter(), use_outline=True)
    assert missing in expected
    assert not any(t.startswith("9780415792219") for _, t, _ in expected)
    fake = server(demote_all)
    got = headings_with(book, refiner(fake, OutlineSectionFilter()), use_outline=True)
    # Every candidate is demoted; what is left are the outline-only / promoted headings.
    extras = [h for h in expected if h[1] in {t.strip() for _, t, _ in book[0]["outline"]}]
    assert missing in extras
    assert got == extras


def test_backend_without_generation_keeps_the_base(book, layout_headings):
    section_filter = LLMSectionFilter(OfflineBackend(), LayoutSectionFilter(), batch_size=4)
    assert headings_with(book, section_filter) == layout_headings
    assert section_filter.n_calls == 1  # stops at the first NoGeneration
    assert len(section_filter.errors) == 1 and "no generation" in section_filter.errors[0]


def test_assemble_document_uses_the_model_only_when_it_generates(book, server):
    meta, blocks = book
    _, _, facts = assemble_document("doc", meta, copy.deepcopy(blocks), use_outline=False)
    assert facts["n_sections"] > 0 and "section_model_errors" not in facts
    _, _, same = assemble_document("doc", meta, copy.deepcopy(blocks), False, OfflineBackend())
    assert same == facts
    fake = server(demote_all)
    model = OpenAIBackend(ModelConfig(backend="openai", base_url=fake.url, model="fake"))
    # Over the rules the model sees every candidate; the learned filter's headings found in
    # text blocks (its "promoted" ones) are not sent to the model yet, so only the rules
    # base can be demoted to nothing.
    _, toc, facts = assemble_document(
        "doc", meta, copy.deepcopy(blocks), False, model, section_filter_kind="rules"
    )
    assert facts["n_sections"] == 0 and facts["section_model_errors"] == 0
    assert len(fake.chats) == 1
    _, _, learned = assemble_document("doc", meta, copy.deepcopy(blocks), False, model)
    assert learned["section_model_errors"] == 0 and len(fake.chats) == 2
