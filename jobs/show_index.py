"""Print what an index holds: documents, the top of each TOC, and a few sample look-ups.

python -m jobs.show_index DIR [--config FILE] [--set SECTION.FIELD=VALUE ...]

Also each build that made the index's documents (pipelines/provenance.py) and how many of them
this code and configuration would build otherwise (stale).
"""

from __future__ import annotations

import argparse
import json
import sys

import lancedb
import polars as pl

from operators.config import add_config_arguments, config_from_args
from pipelines import provenance
from pipelines.store import lance_store
from pipelines.store.schemas import DOCUMENTS, FAILURES, NODES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.show_index")
    parser.add_argument("index_dir")
    parser.add_argument("--toc-depth", type=int, default=2)
    add_config_arguments(parser)  # the configuration a build is compared with
    args = parser.parse_args(argv)
    config = config_from_args(args)

    docs = pl.from_arrow(lance_store.read_table(args.index_dir, DOCUMENTS))
    print(f"{docs.height} documents")
    print(
        docs.select("title", "status", "n_pages", "n_sections", "n_nodes").to_pandas().to_string()
    )
    print("\nBuilds (pipelines/provenance.py; stale: built otherwise than this code and the")
    print("configuration (--config, --set) would, so the index job re-indexes it):")
    stale = provenance.stale_documents(provenance.stored_builds(args.index_dir), config)
    by_build: dict[str | None, list[str]] = {}
    for row in provenance.stored_builds(args.index_dir):
        by_build.setdefault(row["build"], []).append(row["doc_id"])
    for build, doc_ids in by_build.items():
        n_stale = sum(d in stale for d in doc_ids)
        print(f"  {len(doc_ids)} document(s), {n_stale} stale: {provenance.describe(build)}")
        if n_stale:
            print(f"    why: {stale[next(d for d in doc_ids if d in stale)]}")
    db = lancedb.connect(args.index_dir)
    nodes = db.open_table(NODES)
    for doc in docs.filter(pl.col("status") == "ok").head(2).iter_rows(named=True):
        print(f"\nTOC of {doc['title']!r} (sec_id, level, page, paragraphs):")
        for entry in json.loads(doc["toc"]):
            if entry["level"] <= args.toc_depth:
                indent = "  " * entry["level"]
                print(
                    f"{indent}[{entry['sec_id']}] {entry['title'][:70]} "
                    f"(p{entry['page']}, {entry['n_paragraphs']} paragraphs)"
                )
    print("\nSample look-ups:")
    tables = nodes.search().where("kind = 'table'").limit(3).to_list()
    for t in tables:
        print(
            f"  table  doc={t['doc_id'][:8]} sec={t['sec_id']} para={t['para_idx']} "
            f"page={t['page_start']} title={t['title'][:60]!r}"
        )
    first_docs = docs.filter(pl.col("status") == "ok")
    if first_docs.height:
        doc_id = first_docs.row(0, named=True)["doc_id"]
        para = (
            nodes.search()
            .where(f"doc_id = '{doc_id}' AND sec_id = 2 AND para_idx = 1")
            .limit(1)
            .to_list()
        )
        for p in para:
            print(f"  ReadSection(doc={doc_id[:8]}, sec=2, para=1): {p['text'][:100]!r}")
    failures = lance_store.read_table(args.index_dir, FAILURES)
    print(f"\n{failures.num_rows} failure rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
