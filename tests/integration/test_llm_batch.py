"""The index job with --models openai on real PDFs: the model work goes through ray.data.llm
processors against an OpenAI-compatible server started here (127.0.0.1). Every figure and table
is described from its page crop, the section refiner decides the candidates, the LLM's entities
reach the entity tables, an answer that never becomes valid JSON is retried and then recorded
in ``failures`` (the rule-based entities stand), and the server saw concurrent requests."""

from __future__ import annotations

import json
import re
import zlib

import polars as pl
import pymupdf
import pytest

from operators.config import BookindexConfig
from operators.models import ModelConfig
from operators.models.prompts import ENTITY_PROMPT, RETRY_PROMPT, SECTION_PROMPT, SELECT_PROMPT
from pipelines.index_pipeline import run_index
from pipelines.store import lance_store
from pipelines.store.schemas import ENTITIES, FAILURES, NODES
from tests.fakes import FakeOpenAI, image_parts, prompt_text

PDFS = ("mmlongbench/documents/2303.05039v2.pdf",)  # 9 pages: 11 figures, 6 tables
RETRY_HEAD = RETRY_PROMPT.split("(")[0]


def _kind(text: str) -> int:
    """0: never valid JSON; 1: valid only when asked again; else valid at once."""
    return zlib.crc32(text.encode()) % 7


def _passage(body: dict) -> str:
    return body["messages"][1]["content"]


def _answer(body: dict) -> str:
    images = image_parts(body)
    text = prompt_text(body)
    if images:
        kind = "table" if "this table" in text else "figure"
        return f"FAKE DESCRIPTION of a {kind}, {len(images[0])} PNG bytes"
    system = body["messages"][0]["content"]
    if system == SECTION_PROMPT:
        candidates = json.loads(body["messages"][1]["content"])["candidates"]
        # keep the proposed level, except: proposed headings at odd indices are refused
        decisions = [
            {"index": c["index"], "level": 0 if c["index"] % 2 else c["proposed_level"]}
            for c in candidates
        ]
        return json.dumps({"decisions": decisions})
    if system == SELECT_PROMPT:
        return json.dumps({"choice": 0})
    assert system == ENTITY_PROMPT
    passage = _passage(body)
    asked_again = RETRY_HEAD in body["messages"][-1]["content"]
    if _kind(passage) == 0 or (_kind(passage) == 1 and not asked_again):
        return "I found these entities: none that I can put in JSON {"
    words = re.findall(r"\b[A-Z][a-z]{3,}\b", passage)
    entities = [
        {"name": f"LLM {word}", "type": "CONCEPT", "description": "by the model"}
        for word in words[:1]
    ]
    return json.dumps({"entities": entities, "relations": []})


@pytest.fixture(scope="module")
def indexed(ray_session, shared_data, tmp_path_factory):
    fake = FakeOpenAI(_answer, delay_s=0.02)
    models = ModelConfig(backend="openai", base_url=fake.url, model="fake-vlm", max_retries=1)
    config = BookindexConfig(models=models)
    config.index.enrich_workers = 2
    out = tmp_path_factory.mktemp("llm_batch") / "index"
    summary = run_index([str(shared_data / p) for p in PDFS], out, config)
    yield out, summary, fake
    fake.close()


def _entity_requests(fake: FakeOpenAI) -> list[dict]:
    return [b for b in fake.chats if b["messages"][0].get("content") == ENTITY_PROMPT]


def test_every_figure_and_table_is_described_from_its_crop(indexed) -> None:
    out, summary, fake = indexed
    assert summary.ok == len(PDFS)
    nodes = pl.from_arrow(lance_store.read_table(out, NODES))
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


def test_llm_entities_and_invalid_answers(indexed) -> None:
    out, _, fake = indexed
    requests = _entity_requests(fake)
    first = [_passage(b) for b in requests if len(b["messages"]) == 2]  # one per text node
    never = {p for p in first if _kind(p) == 0}
    later = {p for p in first if _kind(p) == 1}
    assert never and later
    asked_again = [_passage(b) for b in requests if len(b["messages"]) == 4]
    # max_retries=1: each invalid first answer was asked for once more, and nothing else
    assert sorted(asked_again) == sorted(p for p in first if _kind(p) in (0, 1))
    entities = pl.from_arrow(lance_store.read_table(out, ENTITIES))
    llm = entities.filter(pl.col("name").str.starts_with("LLM "))
    assert llm.height >= 10 and set(llm["type"]) == {"CONCEPT"}
    failures = pl.from_arrow(lance_store.read_table(out, FAILURES))
    invalid = failures.filter(
        (pl.col("stage") == "enrich") & pl.col("error").str.contains("invalid JSON answer")
    )
    # one failure row per node whose text never got valid JSON (several nodes may share one)
    assert invalid.height >= len(never)
    assert all("2 attempt(s)" in e for e in invalid["error"])


def test_refiner_decided_the_candidates(indexed) -> None:
    out, _, fake = indexed
    asked = [b for b in fake.chats if b["messages"][0].get("content") == SECTION_PROMPT]
    assert asked
    refused = {
        " ".join(c["text"].split())
        for b in asked
        for c in json.loads(b["messages"][1]["content"])["candidates"]
        if c["index"] % 2 and c["proposed_level"] and not c["text"].endswith("…")
    }
    nodes = pl.from_arrow(lance_store.read_table(out, NODES))
    titles = {" ".join(t.split()) for t in nodes.filter(pl.col("kind") == "section")["title"]}
    assert refused and not refused & titles


def test_the_server_saw_concurrent_batched_requests(indexed) -> None:
    _, _, fake = indexed
    assert len(fake.chats) >= 100
    assert fake.max_in_flight >= 2
