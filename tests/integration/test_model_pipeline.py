"""The index job with a generative backend configured: an OpenAI-compatible endpoint (a fake
server on 127.0.0.1) describes the figures and extracts the entities; a node whose answer is
never valid JSON is recorded as that node's failure and the job goes on."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from bookindex.operators.config import BookindexConfig
from bookindex.operators.models import ModelConfig
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import ENTITIES, FAILURES, MENTIONS, NODES
from tests.fakes import FakeOpenAI

FIGURE_TEXT = "A bar chart of quarterly widget sales by the Acme Widget Company."


def _answer(body: dict) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, list):  # an image: the vision call
        return FIGURE_TEXT
    text = json.dumps(body["messages"])
    if "Acme" in text:  # the figure description's own extraction
        return json.dumps(
            {
                "entities": [
                    {"name": "Acme Widget Company", "type": "ORG", "description": "maker"}
                ],
                "relations": [],
            }
        )
    if "see Table 2" in text:
        return "this is not JSON {"
    return json.dumps({"entities": [], "relations": []})


@pytest.fixture(scope="module")
def indexed_with_model(ray_session, sample_corpus, tmp_path_factory):
    fake = FakeOpenAI(_answer)
    root = tmp_path_factory.mktemp("model_index")
    manifest = json.loads((sample_corpus / "manifest.json").read_text())
    with_figure = next(d for d in manifest["documents"] if d["figures"])
    shutil.copy(sample_corpus / with_figure["file"], root / with_figure["file"])
    config = ModelConfig(backend="openai", base_url=fake.url, model="fake", max_retries=1)
    out = root / "index"
    summary = run_index([str(root / with_figure["file"])], out, BookindexConfig(models=config))
    yield out, summary, with_figure, fake
    fake.close()


def test_figures_are_described_by_the_vision_model(indexed_with_model):
    out, summary, truth, fake = indexed_with_model
    assert summary.ok == 1
    nodes = pl.from_arrow(lance_store.read_table(out, NODES))
    images = nodes.filter(pl.col("kind") == "image")
    assert images.height == len(truth["figures"])
    assert images["summary"].to_list() == [FIGURE_TEXT] * images.height
    tables = nodes.filter(pl.col("kind") == "table")  # described from their crops too
    vision = [b for _, b in fake.requests if isinstance(b["messages"][-1]["content"], list)]
    assert len(vision) == images.height + tables.height
    image_part = vision[0]["messages"][-1]["content"]
    assert any(p.get("type") == "image_url" for p in image_part)


def test_model_entities_are_linked_and_bad_answers_stay_node_failures(indexed_with_model):
    out, _, _, fake = indexed_with_model
    entities = pl.from_arrow(lance_store.read_table(out, ENTITIES))
    acme = entities.filter(pl.col("name") == "Acme Widget Company")
    assert acme.height == 1 and acme["type"][0] == "ORG"
    mentions = pl.from_arrow(lance_store.read_table(out, MENTIONS))
    nodes = pl.from_arrow(lance_store.read_table(out, NODES))
    linked = mentions.filter(pl.col("entity_id") == acme["entity_id"][0]).join(nodes, on="node_id")
    assert set(linked["kind"].to_list()) == {"image"}
    # the paragraph that never got valid JSON: retried, then recorded, and the job went on
    bad = [b for _, b in fake.requests if "see Table 2" in json.dumps(b["messages"])]
    assert len(bad) >= 2
    failures = pl.from_arrow(lance_store.read_table(out, FAILURES))
    recorded = failures.filter(pl.col("stage") == "enrich")
    assert recorded.height == 1 and "invalid JSON answer" in recorded["error"][0]
    assert entities.filter(pl.col("type") == "TABLE").height >= 1
