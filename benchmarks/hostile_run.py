"""The full hostile-input corpus in one index job, checked against its manifest, with the wall time.

    python -m jobs.make_hostile_corpus --out /tmp/hostile
    python -m benchmarks.hostile_run --corpus /tmp/hostile --out /tmp/hostile_index \
        [--bound-s 900] [-- --set index.doc_timeout_s=60 ...]

What CI's ``tests/integration/test_hostile_inputs.py`` checks on the reduced corpus, here on the
full one (the 60,000-deep outline, the 20,000 blank pages, the bombs, the symlink loops, every
JSONL case): every good input ``ok`` with nodes, every bad one ``failed`` / ``needs_ocr`` with
its reason equal to its failure row's, every refused input a failure row and no document.
Prints the exit code, the wall time against ``--bound-s``, the status counts and every
mismatch; exits 1 on a mismatch, a non-zero job exit or a run past the bound.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bookindex.jobs import index_corpus
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, FAILURES, NODES


def mismatches(manifest: dict, docs: dict, failures: list[dict], node_docs: set) -> list[tuple]:
    """The manifest's inputs whose outcome in the index is not the one the manifest names."""
    by_uri = {f["uri"]: f for f in failures}
    wrong = []
    for item in manifest["inputs"]:
        path, expect = item["path"], item["expect"]
        doc = docs.get(os.path.realpath(path)) if expect != "problem" else None
        if expect == "ok":
            good = doc is not None and doc["status"] == "ok" and doc["doc_id"] in node_docs
        elif expect in ("failed", "needs_ocr"):
            good = (
                doc is not None
                and doc["status"] == expect
                and bool(doc["error"])
                and by_uri.get(doc["uri"], {}).get("error") == doc["error"]
            )
        elif expect == "either":  # read or refused: either way recorded
            good = doc is not None and (doc["status"] == "ok" or bool(doc["error"]))
        else:  # refused before it became a document
            good = bool(by_uri.get(path, {}).get("error")) and path not in docs
        if not good:
            wrong.append((path, expect, doc and doc["status"], doc and doc["error"]))
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus", required=True, help="bookindex.jobs.make_hostile_corpus's --out"
    )
    parser.add_argument("--out", required=True, help="the index to write (new or empty)")
    parser.add_argument("--bound-s", type=float, default=900.0, help="wall-clock bound")
    parser.add_argument("job_args", nargs="*", help="more index_corpus arguments (after --)")
    args = parser.parse_args(argv)
    root = Path(args.corpus)
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    inputs = [str(root / "pdfs"), str(root / "passages.jsonl"), str(root / "**" / "*.pdf")]
    started = time.perf_counter()
    code = index_corpus.main([*inputs, "--out", args.out, *args.job_args])
    wall = time.perf_counter() - started
    docs = {d["uri"]: d for d in lance_store.read_table(args.out, DOCUMENTS).to_pylist()}
    failures = lance_store.read_table(args.out, FAILURES).to_pylist()
    node_docs = set(lance_store.read_table(args.out, NODES, ["doc_id"])["doc_id"].to_pylist())
    wrong = mismatches(manifest, docs, failures, node_docs)
    statuses: dict[str, int] = {}
    for doc in docs.values():
        statuses[doc["status"]] = statuses.get(doc["status"], 0) + 1
    print(
        f"exit {code}; wall {wall:.0f} s (bound {args.bound_s:.0f} s); load average "
        f"{os.getloadavg()[0]:.1f}; documents {statuses}; failure rows {len(failures)}; "
        f"{len(manifest['inputs'])} inputs, {len(manifest['passages'])} passage lines; "
        f"mismatches {len(wrong)}"
    )
    for item in wrong:
        print("MISMATCH", item)
    for doc in sorted(docs.values(), key=lambda d: d["uri"]):
        if doc["status"] != "ok":
            print(f"  {doc['status']:<9} {os.path.basename(doc['uri'])}: {doc['error'][:100]}")
    return int(bool(wrong) or code != 0 or wall > args.bound_s)


if __name__ == "__main__":
    sys.exit(main())
