"""What the enrich stage embeds (pipelines/enrich_worker.embedding_texts): a passage as a user embeds
it, "title text"; a PDF's leaves with their own text."""

from __future__ import annotations

from bookindex.operators.kinds import ROOT
from bookindex.operators.structure.passages import read_passages
from bookindex.pipelines.enrich_worker import embedding_texts
from bookindex.pipelines.rows import from_json, passage_document_row


def test_a_passage_is_embedded_with_its_title(shared_data):
    passage = read_passages(str(shared_data / "multihop" / "hotpotqa" / "corpus.jsonl"))[0]
    assert passage.title and passage.text
    row = passage_document_row(passage)
    nodes = from_json(row["nodes"])
    texts = dict(zip((n["kind"] for n in nodes), embedding_texts(row, nodes), strict=True))
    assert texts[ROOT] == passage.title
    assert texts["text"] == f"{passage.title} {passage.text}"[:2000]
    # the same nodes as a PDF's: the leaf's own text only
    assert embedding_texts(dict(row, source="pdf"), nodes)[1] == passage.text[:2000]
