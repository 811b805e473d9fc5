"""The index job with --models openai on real PDFs: all model work goes through ray.data.llm
processors against an OpenAI-compatible server started here (127.0.0.1). Every figure and table
is described from its page crop, and the descriptions' own entities are linked to their figure
and table nodes; the section refiner's windows are asked together and its decisions written to
``section_decisions``; the LLM's entities reach the entity tables; ER selection is asked through
the processor; an answer that never becomes valid JSON is retried and then recorded in
``failures`` (the rule-based result stands); a request the server answers 503 forever (some
entity passages, one refiner window) is tried ``1 + max_retries`` times and becomes a failure
row while the job exits normally and indexes everything else; and the server saw batched,
concurrent requests. One index job serves every test (each costs a minute of processor
start-ups): the server's rules for invalid answers and for 503s pick disjoint requests."""

from __future__ import annotations

import json
import re
import zlib

import polars as pl
import pymupdf
import pytest

from bookindex.operators.config import BookindexConfig
from bookindex.operators.models import ModelConfig
from bookindex.operators.models.prompts import (
    ENTITY_PROMPT,
    RETRY_PROMPT,
    SECTION_PROMPT,
    SELECT_PROMPT,
)
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import (
    ENTITIES,
    ER_DECISIONS,
    FAILURES,
    MENTIONS,
    NODES,
    SECTION_DECISIONS,
)
from tests.fakes import FakeOpenAI, image_parts, max_overlap, prompt_text

PDFS = ("mmlongbench/documents/2303.05039v2.pdf",)  # 9 pages: 11 figures, 6 tables
RETRY_HEAD = RETRY_PROMPT.split("(")[0]


def _kind(text: str) -> int:
    """0: never valid JSON; 1: valid only when asked again; else valid at once."""
    return zlib.crc32(text.encode()) % 7


def _passage(body: dict) -> str:
    return body["messages"][1]["content"]


def _window(body: dict) -> list[dict]:
    return json.loads(body["messages"][1]["content"])["candidates"]


def _bad_window(candidates: list[dict]) -> bool:
    """A refiner window never answered with valid JSON: its first candidate decides."""
    return zlib.crc32(str(candidates[0]["index"]).encode()) % 4 == 0


def _bad_selection(body: dict) -> bool:
    return zlib.crc32(body["messages"][1]["content"].encode()) % 3 == 0


UNAVAILABLE_WINDOW: list[int] = []  # the first candidate of the one window answered 503


def _unavailable(body: dict) -> bool:
    """Requests the server answers with 503 forever: the entity passages of one residue (none
    of them one that would get an invalid answer), and the first refiner window it is sent
    that would get a valid one."""
    system = body["messages"][0].get("content")
    if system == ENTITY_PROMPT:
        passage = _passage(body)
        return zlib.crc32(passage.encode()) % 5 == 2 and _kind(passage) > 1
    if system == SECTION_PROMPT:
        first = _window(body)[0]["index"]
        if not UNAVAILABLE_WINDOW and not _bad_window(_window(body)):
            UNAVAILABLE_WINDOW.append(first)
        return first == UNAVAILABLE_WINDOW[0] if UNAVAILABLE_WINDOW else False
    return False


def _answer(body: dict):
    if _unavailable(body):
        return 503, {"error": {"message": "overloaded"}}
    images = image_parts(body)
    text = prompt_text(body)
    if images:
        kind = "table" if "this table" in text else "figure"
        return f"FAKE DESCRIPTION of a {kind} drawn by {DESCRIBER}, {len(images[0])} PNG bytes"
    system = body["messages"][0]["content"]
    if system == SECTION_PROMPT:
        candidates = _window(body)
        if _bad_window(candidates):
            return "Here are my decisions: {decisions: [..."
        # keep the proposed level, except: proposed headings at odd indices are refused
        decisions = [
            {"index": c["index"], "level": 0 if c["index"] % 2 else c["proposed_level"]}
            for c in candidates
        ]
        return json.dumps({"decisions": decisions})
    if system == SELECT_PROMPT:
        return "the first one, I think" if _bad_selection(body) else json.dumps({"choice": 0})
    assert system == ENTITY_PROMPT
    passage = _passage(body)
    asked_again = RETRY_HEAD in body["messages"][-1]["content"]
    if _kind(passage) == 0 or (_kind(passage) == 1 and not asked_again):
        return "I found these entities: none that I can put in JSON {"
    if DESCRIBER in passage:  # a figure's or table's description
        maker = {"name": DESCRIBER, "type": "ORG", "description": "draws the figures"}
        return json.dumps({"entities": [maker], "relations": []})
    return json.dumps({"entities": _entities(passage), "relations": []})


DESCRIBER = "Vizmaker"  # a name only the model's descriptions hold


def _entities(passage: str) -> list[dict]:
    """The model's entities of a passage: its first capitalised word, and, so that the
    resolver meets names it cannot tell apart by their vectors alone, the same word as the
    name of a product and of a model ("ER selection")."""
    words = re.findall(r"\b[A-Z][a-z]{3,}\b", passage)
    names = [f"LLM {w}" for w in words[:1]] + [f"{w} {s}" for w in words[:1] for s in SUFFIXES]
    return [{"name": n, "type": "CONCEPT", "description": "by the model"} for n in names]


SUFFIXES = ("Model", "Models", "model family")


@pytest.fixture(scope="module")
def indexed(ray_session, shared_data, tmp_path_factory):
    fake = FakeOpenAI(_answer, delay_s=0.02)
    models = ModelConfig(backend="openai", base_url=fake.url, model="fake-vlm", max_retries=1)
    config = BookindexConfig(models=models)
    config.index.enrich_workers = 2
    config.index.section_window = 6  # several refiner requests for one paper
    out = tmp_path_factory.mktemp("llm_batch") / "index"
    try:
        summary = run_index([str(shared_data / p) for p in PDFS], out, config)
    finally:
        fake.close()
    return out, summary, fake


def _entity_requests(fake: FakeOpenAI) -> list[dict]:
    return [b for b in fake.chats if b["messages"][0].get("content") == ENTITY_PROMPT]


def _tables(out) -> dict[str, pl.DataFrame]:
    names = (NODES, ENTITIES, MENTIONS, FAILURES, SECTION_DECISIONS, ER_DECISIONS)
    return {name: pl.from_arrow(lance_store.read_table(out, name)) for name in names}


def test_every_figure_and_table_is_described_from_its_crop(indexed) -> None:
    out, summary, fake = indexed
    assert (summary.ok, summary.failed) == (len(PDFS), 0)
    nodes = _tables(out)[NODES]
    modal = nodes.filter(pl.col("kind").is_in(["image", "table"]))
    assert modal.filter(pl.col("kind") == "image").height >= 5
    assert modal.filter(pl.col("kind") == "table").height >= 5
    for kind, summary_text in zip(modal["kind"], modal["summary"], strict=True):
        word = "table" if kind == "table" else "figure"
        assert summary_text.startswith(f"FAKE DESCRIPTION of a {word}")
    crops = [image for body in fake.chats for image in image_parts(body)]
    assert len(crops) == modal.height
    for png in crops:  # real page crops, readable PNGs
        pixmap = pymupdf.Pixmap(png)
        assert pixmap.width > 10 and pixmap.height > 10


def test_the_descriptions_own_entities_are_linked_to_their_figures_and_tables(indexed) -> None:
    out, _, fake = indexed
    tables = _tables(out)
    answered = [  # the descriptions' own extraction, answered with the describer
        b for b in _entity_requests(fake) if DESCRIBER in _passage(b) and not _unavailable(b)
    ]
    assert any(_kind(_passage(b)) > 0 for b in answered)
    named = tables[ENTITIES].filter(pl.col("name") == DESCRIBER)
    assert named.height == 1 and named["type"][0] == "ORG"
    linked = (
        tables[MENTIONS]
        .select("entity_id", "node_id")
        .join(named.select("entity_id"), on="entity_id")
        .join(tables[NODES].select("node_id", "kind"), on="node_id")
    )
    assert linked.height >= 1 and set(linked["kind"]) <= {"image", "table"}
    assert tables[ENTITIES].filter(pl.col("type") == "TABLE").height >= 1  # the rule's tables


def test_llm_entities_and_invalid_answers(indexed) -> None:
    out, _, fake = indexed
    requests = [b for b in _entity_requests(fake) if not _unavailable(b)]
    first = [_passage(b) for b in requests if len(b["messages"]) == 2]  # one per text node
    never = {p for p in first if _kind(p) == 0}
    later = {p for p in first if _kind(p) == 1}
    assert never and later
    asked_again = [_passage(b) for b in requests if len(b["messages"]) == 4]
    # max_retries=1: each invalid first answer was asked for once more, and nothing else
    assert sorted(asked_again) == sorted(p for p in first if _kind(p) in (0, 1))
    tables = _tables(out)
    llm = tables[ENTITIES].filter(pl.col("name").str.starts_with("LLM "))
    assert llm.height >= 10 and set(llm["type"]) == {"CONCEPT"}
    failures = tables[FAILURES]
    invalid = failures.filter(
        (pl.col("stage") == "enrich") & pl.col("error").str.contains("invalid JSON answer")
    )
    # one failure row per node whose text never got valid JSON (several nodes may share one)
    assert invalid.height >= len(never)
    assert all("2 attempt(s)" in e for e in invalid["error"])


def _section_requests(fake: FakeOpenAI) -> list[dict]:
    """The refiner's first asks, one per window (a window answered 503 was sent twice)."""
    asked = [b for b in fake.chats if b["messages"][0].get("content") == SECTION_PROMPT]
    unique = {b["messages"][1]["content"]: b for b in asked if len(b["messages"]) == 2}
    return list(unique.values())


def test_refiner_windows_are_asked_together_and_decide_the_candidates(indexed) -> None:
    out, _, fake = indexed
    asked = _section_requests(fake)
    assert len(asked) >= 3  # windows of 6 candidates
    # the windows are independent requests sent through the processor at once
    spans = [sp for sp in fake.spans if sp[2]["messages"][0].get("content") == SECTION_PROMPT]
    assert max_overlap(spans) >= 2
    answered = [b for b in asked if not _bad_window(_window(b)) and not _unavailable(b)]
    assert answered and len(answered) < len(asked)
    refused = {
        " ".join(c["text"].split())
        for b in answered
        for c in _window(b)
        if c["index"] % 2 and c["proposed_level"] and not c["text"].endswith("…")
    }
    titles = {
        " ".join(t.split())
        for t in _tables(out)[NODES].filter(pl.col("kind") == "section")["title"]
    }
    assert refused and not refused & titles


def test_refiner_decisions_are_written_for_the_candidates(indexed) -> None:
    out, _, fake = indexed
    tables = _tables(out)
    decisions = tables[SECTION_DECISIONS]
    asked = _section_requests(fake)
    sent = [c for b in asked for c in _window(b)]
    assert decisions.height == len(sent)
    assert sorted(decisions["block_index"]) == sorted(c["index"] for c in sent)
    by_index = {c["index"]: c for c in sent}
    bad = {c["index"] for b in asked if _bad_window(_window(b)) for c in _window(b)}
    unavailable = {c["index"] for b in asked if _unavailable(b) for c in _window(b)}
    assert unavailable and not unavailable & bad
    for row in decisions.iter_rows(named=True):
        candidate = by_index[row["block_index"]]
        assert row["rule_level"] == candidate["proposed_level"] and row["page"] == candidate["page"]
        if row["block_index"] in bad:  # asked again once, never valid: the rule stands
            assert row["model_level"] is None and "2 attempt(s)" in row["error"]
            assert "invalid JSON answer" in row["error"]
        elif row["block_index"] in unavailable:  # tried twice, 503 both times: the rule stands
            assert row["model_level"] is None and "HTTP 503" in row["error"]
            assert "failed after 2 attempt(s)" in row["error"]
        else:
            refused = row["block_index"] % 2
            assert row["model_level"] == (0 if refused else candidate["proposed_level"])
    windows = tables[FAILURES].filter(pl.col("stage") == "sections")
    invalid = windows.filter(pl.col("error").str.contains("invalid JSON answer"))
    assert invalid.height == len([b for b in asked if _bad_window(_window(b))])
    assert windows.filter(pl.col("error").str.contains("HTTP 503")).height == 1
    assert invalid.height + 1 == windows.height


def test_er_selection_goes_through_the_processor(indexed) -> None:
    out, _, fake = indexed
    asked = [b for b in fake.chats if b["messages"][0].get("content") == SELECT_PROMPT]
    first = [b for b in asked if len(b["messages"]) == 2]
    assert first, "the resolver met no entity with several selected candidates"
    tables = _tables(out)
    decisions = tables[ER_DECISIONS]
    assert decisions.filter(pl.col("action") == "llm").height >= 1
    never = [b for b in first if _bad_selection(b)]
    selection = tables[FAILURES].filter(pl.col("error").str.contains("ER selection"))
    assert selection.height >= (1 if never else 0)
    assert all("2 attempt(s)" in e for e in selection["error"])
    # a question without a usable answer keeps the rule (action "select")
    if never:
        assert decisions.filter(pl.col("action") == "select").height >= 1


def test_requests_that_keep_failing_become_failure_rows(indexed) -> None:
    out, summary, fake = indexed
    assert summary.ok == len(PDFS) and summary.failed == 0
    failed_bodies = [b for b in fake.chats if _unavailable(b)]
    assert failed_bodies
    tables = _tables(out)
    unavailable = tables[FAILURES].filter(pl.col("error").str.contains("HTTP 503"))
    assert unavailable.height >= 2
    assert all("failed after 2 attempt(s)" in e for e in unavailable["error"])
    assert unavailable.filter(pl.col("stage") == "sections").height == 1
    assert unavailable.filter(pl.col("stage") == "enrich").height >= 1
    # each failing request was tried twice (max_retries=1) and no more
    tries: dict[str, int] = {}
    for body in failed_bodies:
        key = json.dumps(body["messages"])
        tries[key] = tries.get(key, 0) + 1
    assert all(n % 2 == 0 for n in tries.values())  # a text on two nodes is asked twice
    # everything else is indexed: the nodes, the descriptions, the other entities
    assert tables[NODES].height > 100
    assert tables[ENTITIES].filter(pl.col("name").str.starts_with("LLM ")).height >= 5
    decisions = tables[SECTION_DECISIONS]
    assert decisions.filter(pl.col("model_level").is_not_null()).height >= 1


def test_the_server_saw_concurrent_batched_requests(indexed) -> None:
    _, _, fake = indexed
    assert len(fake.chats) >= 100
    assert fake.max_in_flight >= 2
