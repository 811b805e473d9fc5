"""Nodes per second for the enrich stage with the offline backend, on shared PDFs.

    python -m benchmarks.enrich_throughput [--corpus hips|mmlongbench] [--docs 3]

Structures the first ``--docs`` PDFs in-process (parse + section tree, not timed here), then
times, on the same nodes and in one process (one model instance, torch on all cores):
- embedding: one vector per node (all-MiniLM-L6-v2, 128 word pieces);
- extraction: spaCy NER + sentence co-occurrence relations + table/figure entities;
- resolution within each document (name vectors + the gradient rule).
Prints nodes/s per step and for the whole stage.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pymupdf

from operators.graph.entities import STRUCTURAL_TYPES, extract_document
from operators.graph.resolution import Resolver
from operators.models.offline import OfflineBackend
from operators.parsing.parse import document_metadata, parse_pages
from operators.structure.assemble import assemble_document
from pipelines.enrich import node_embedding_text

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {"hips": SHARED / "hips" / "PDFs", "mmlongbench": SHARED / "mmlongbench" / "documents"}


def structured_nodes(pdf: Path) -> list[dict]:
    with pymupdf.open(pdf) as doc:
        meta = document_metadata(doc)
        blocks = parse_pages(doc, 0, doc.page_count).blocks
    nodes, _, _ = assemble_document(pdf.name, meta, blocks)
    return [asdict(n) for n in nodes]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default="mmlongbench", choices=sorted(CORPORA))
    parser.add_argument("--docs", type=int, default=3)
    args = parser.parse_args(argv)
    pdfs = sorted(CORPORA[args.corpus].glob("*.pdf"))[: args.docs]
    documents = {pdf.name: structured_nodes(pdf) for pdf in pdfs}
    n_nodes = sum(len(v) for v in documents.values())
    backend = OfflineBackend()
    backend.embed(["warm up"])
    backend.extract_entities("Warm up in Paris.")

    t0 = time.perf_counter()
    texts = [node_embedding_text(n) for nodes in documents.values() for n in nodes]
    backend.embed(texts)
    embed_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    extractions = {
        name: extract_document(name, nodes, backend.extract_entities_batch)
        for name, nodes in documents.items()
    }
    extract_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    n_entities = n_kept = 0
    for name, extraction in extractions.items():
        local = [e for e in extraction.entities if e.type not in STRUCTURAL_TYPES]
        vectors = backend.embed([e.name for e in local])
        resolver = Resolver(dim=backend.dim, id_salt=name)
        resolver.resolve(
            [e.name for e in local],
            [e.type for e in local],
            [e.description for e in local],
            vectors,
        )
        n_entities += len(local)
        n_kept += len(resolver)
    resolve_s = time.perf_counter() - t0

    tokens = int(np.sum([n["n_tokens"] for nodes in documents.values() for n in nodes]))
    total = embed_s + extract_s + resolve_s
    print(f"corpus={args.corpus} documents={len(pdfs)} nodes={n_nodes} tokens≈{tokens}")
    print(f"{'step':<12}{'seconds':>9}{'nodes/s':>10}")
    for step, seconds in (
        ("embed", embed_s),
        ("extract", extract_s),
        ("resolve", resolve_s),
        ("total", total),
    ):
        print(f"{step:<12}{seconds:>9.1f}{n_nodes / seconds:>10.1f}")
    print(f"entities found={n_entities} after resolution within documents={n_kept}")


if __name__ == "__main__":
    main()
