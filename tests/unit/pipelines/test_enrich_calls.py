"""The enrich stage's calls when PDFs and passages share one worker pool: a block is cut into
runs of one source, each in calls of at most that source's documents per call
(``index.pdfs_per_enrich_batch``, ``index.passages_per_enrich_batch``), in row order; and the
job deals out its blocks to that pool by their nodes, largest first."""

from __future__ import annotations

import pyarrow as pa

from bookindex.operators.structure.passages import read_passages
from bookindex.pipelines.enrich import call_slices
from bookindex.pipelines.index_pipeline import block_nodes
from bookindex.pipelines.rows import passage_document_row


def _passage_rows(shared_data, tmp_path, n: int) -> list[dict]:
    lines = (shared_data / "multihop" / "musique" / "corpus.jsonl").read_text().splitlines()[:n]
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    return [passage_document_row(p) for p in read_passages(str(corpus))]


def test_a_mixed_block_is_cut_by_source_and_size_in_row_order(shared_data, tmp_path):
    passages = _passage_rows(shared_data, tmp_path, 7)
    assert {r["source"] for r in passages} == {"passage"}
    pdf = {**{k: None for k in passages[0]}, "doc_id": "book", "source": "pdf", "n_nodes": 40}
    rows = [pdf, dict(pdf, doc_id="paper"), *passages[:5], dict(pdf, doc_id="report")]
    rows += passages[5:]
    block = pa.Table.from_pylist(rows)
    slices = call_slices(block, {"pdf": 1, "passage": 3})
    # PDFs one a call; passages three at most, a run never crossing into the other source
    assert slices == [(0, 1), (1, 1), (2, 3), (5, 2), (7, 1), (8, 2)]
    assert sum(n for _, n in slices) == block.num_rows
    for start, n in slices:
        assert len({r["source"] for r in rows[start : start + n]}) == 1
    # a source not named: its run in one call; one call when a block fits
    assert call_slices(block.slice(2, 5), {"pdf": 1}) == [(0, 5)]
    assert call_slices(block.slice(2, 5), {"passage": 256}) == [(0, 5)]


def test_a_blocks_weight_is_its_nodes(shared_data, tmp_path):
    passages = _passage_rows(shared_data, tmp_path, 20)
    block = pa.Table.from_pylist(passages)
    assert block_nodes(block) == sum(r["n_nodes"] for r in passages) > 20  # root + leaves
    assert block_nodes(block.drop_columns(["n_nodes"])) == 20  # no counts: a row each
