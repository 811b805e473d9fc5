"""Paragraph merging in the tree (operators/structure/tree.py): a paragraph cut into many blocks
is one leaf whose text is its blocks joined and whose token count is that text's, on real PDFs
and on a run-on paragraph of 1,500 blocks."""

from __future__ import annotations

import pymupdf

from bookindex.operators.eval.hostile_corpus import run_on_paragraph
from bookindex.operators.kinds import ROOT, SECTION
from bookindex.operators.parsing.parse import parse_pages
from bookindex.operators.parsing.probe import probe_pdf
from bookindex.operators.structure.assemble import assemble_document
from bookindex.operators.structure.tree import count_tokens


def _nodes(path: str):
    with pymupdf.open(path) as doc:
        parsed = parse_pages(doc, 0, doc.page_count)
    meta = probe_pdf(path).meta
    nodes, _, _ = assemble_document("d" * 64, meta, parsed.blocks, True, None)
    return nodes, parsed.blocks


def _check_leaves(nodes) -> None:
    for node in nodes:
        if node.kind not in (ROOT, SECTION):
            assert node.n_tokens == count_tokens(node.text), node.node_id


def test_a_run_on_paragraph_of_1500_blocks_is_one_leaf(tmp_path):
    path = tmp_path / "run_on.pdf"
    path.write_bytes(run_on_paragraph(1500))
    nodes, blocks = _nodes(str(path))
    leaves = [n for n in nodes if n.kind not in (ROOT, SECTION)]
    body = [b for b in blocks if b.text.startswith("and then clause")]
    assert len(body) == 1500
    merged = [n for n in leaves if "and then clause 0 " in n.text]
    assert len(merged) == 1  # (the page's first line, lower-case, carries on its title block)
    assert merged[0].text.endswith(" ".join(b.text for b in body))
    assert merged[0].page_end == body[-1].page
    _check_leaves(nodes)


def test_real_pdfs_keep_token_counts_of_their_merged_text(shared_data):
    for name in ("2303.05039v2.pdf", "a4f3ced0696009fec3179f493e4f28c4.pdf"):
        nodes, _ = _nodes(str(shared_data / "mmlongbench" / "documents" / name))
        assert len(nodes) > 20
        _check_leaves(nodes)
