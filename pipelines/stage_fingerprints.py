"""Each index stage's output fingerprint: what the stage writes for a small fixed probe set,
hashed. A document's build (``pipelines/provenance.py``) names each stage that wrote its rows
by the fingerprint recorded here, so a change of a stage's behaviour changes the build id of
every document that stage builds, without anyone bumping a version by hand.

The probe set (under the shared data directory, ``$BOOKINDEX_SHARED_DATA`` or
``<repo>/../shared/data``): three PDFs of ``PROBE_PDFS`` (a paper with tables, captions and an
outline; a book chapter; the first pages of an agency report with a deep outline) and the
first ``PROBE_PASSAGES`` passages of HotpotQA. Per stage, what is hashed:

* ``parse``: each PDF's metadata (outline, page labels, title, problems) and parsed blocks.
* ``structure``: each PDF's tree, TOC and facts with the rule filters, outline on and off
  (block typing, furniture, sections, outline filter, tree).
* ``learned_filter``: the same with the learned filter (its code and the committed model):
  part of a PDF's build only when ``index.section_filter`` is ``learned``.
* ``layout_graph``: the edges and communities of those trees (rules, outline on) and of the
  passages.
* ``passages``: the passages' trees (``read_passages``, ``passage_document_row``).
* ``enrich``: what the enrich stage hands its embedder: every node's embedding text and a
  passage's sentences with their spans (``pipelines.enrich_worker``). The vectors themselves
  come from the embedder named in the build's ``models``.
* ``entities``: the entities, relations and decisions of resolution within each document for
  the entities the tree gives (tables, figures, table headers, a passage's topic), with name
  vectors drawn from each name's hash (far apart unless the names are equal: no decision sits
  near a threshold). The named entities come from the NER model named in ``models``.

``layout_graph``, ``enrich`` and ``entities`` have one fingerprint per source (``pdf``,
``passage``), each over that source's probe trees, so that a change of the PDFs' tree does not
make passages stale (and the other way round); a change of those stages' own code moves both.

Floats are rounded (2 decimals) and decision scores left out before hashing, so a fingerprint
depends on the code and the pinned libraries, not on the CPU. The values live in
``stage_fingerprints.json`` beside this module; ``tests/unit/pipelines/test_stage_fingerprints.py``
recomputes them and fails when a stage's output changed and its fingerprint was not renewed.
Renew them (then every index built before is stale for the stages that changed, and the next
index job re-indexes those documents):

    python -m bookindex.pipelines.stage_fingerprints --renew

Without ``--renew`` it prints each stage's recorded and current fingerprint and exits 1 when
one differs. A change that the probe set does not show keeps the fingerprint: add a probe
input that shows it, then renew.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

FINGERPRINTS = Path(__file__).with_name("stage_fingerprints.json")
# The stages after the tree have one fingerprint per source, each over that source's probe
# documents: a change of the PDF tree moves only the PDFs' and a change of a passage's tree only
# the passages' (``fingerprint_of``).
PER_SOURCE = ("layout_graph", "enrich", "entities")
SOURCES = ("pdf", "passage")
STAGES = (
    "parse",
    "structure",
    "learned_filter",
    "passages",
    *(f"{stage}/{source}" for stage in PER_SOURCE for source in SOURCES),
)
# (path under the shared data directory, pages: the first N)
PROBE_PDFS = (
    ("mmlongbench/documents/2303.05039v2.pdf", 9),
    ("hips/PDFs/6-traditional-medicines-law-and-the-dis-ordering-of-temporalities.pdf", 18),
    ("docugami/us-fed-agency-reports/data/v1/docs/2016-annual-performance-report.pdf", 12),
)
PROBE_PASSAGES = ("multihop/hotpotqa/corpus.jsonl", 8)
RENEW = "python -m bookindex.pipelines.stage_fingerprints --renew"
_NAME_WIDTH = 64  # width of the hashed name vectors of the entities probe


@functools.cache
def recorded() -> dict[str, str]:
    """The committed fingerprint of every stage (``STAGES``)."""
    return dict(json.loads(FINGERPRINTS.read_text())["stages"])


def fingerprint_of(stage: str, source: str) -> str:
    """The recorded fingerprint of ``stage`` for a document of ``source`` (pdf or passage)."""
    stored = recorded()
    return stored[f"{stage}/{source}"] if stage in PER_SOURCE else stored[stage]


def digest(value: Any) -> str:
    """16 hex digits of the sha256 of ``value`` as canonical JSON, floats rounded."""
    text = json.dumps(_rounded(value), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {str(k): _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def compute(data_dir: str | Path | None = None) -> dict[str, str]:
    """Every stage's fingerprint on the probe set under ``data_dir`` (default: the shared
    data directory); raises FileNotFoundError naming a missing probe file."""
    from bookindex.operators.eval.heading_gold import shared_data_dir

    data = Path(data_dir) if data_dir is not None else shared_data_dir()
    missing = [r for r, _ in PROBE_PDFS if not (data / r).is_file()]
    missing += [PROBE_PASSAGES[0]] if not (data / PROBE_PASSAGES[0]).is_file() else []
    if missing:
        raise FileNotFoundError(f"probe files missing under {data}: {', '.join(missing)}")
    outputs = _stage_outputs(data)
    return {stage: digest(outputs[stage]) for stage in STAGES}


def _stage_outputs(data: Path) -> dict[str, Any]:
    """What each stage writes for the probe set (before hashing)."""
    from bookindex.operators.graph.layout_graph import graph_columns
    from bookindex.operators.structure.assemble import assemble_document
    from bookindex.pipelines.enrich_worker import embedding_texts, passage_sentences

    parsed = [_parsed(data / rel, pages) for rel, pages in PROBE_PDFS]
    out: dict[str, Any] = {"parse": [], "structure": [], "learned_filter": []}
    trees: dict[str, tuple[list[dict], list[list[dict]]]] = {s: ([], []) for s in SOURCES}
    for doc_id, meta, blocks, errors in parsed:
        out["parse"].append(
            {"meta": meta, "blocks": [b.as_row() for b in blocks], "errors": errors}
        )
        for kind in ("rules", "learned"):
            for use_outline in (True, False):
                nodes, toc, facts = assemble_document(
                    doc_id, meta, copy.deepcopy(blocks), use_outline, None, kind
                )
                tree = {"nodes": [dict(vars(n)) for n in nodes], "toc": toc, "facts": facts}
                out["structure" if kind == "rules" else "learned_filter"].append(tree)
                if kind == "rules" and use_outline:  # what the later PDF stages read
                    trees["pdf"][0].append({"doc_id": doc_id, "source": "pdf"})
                    trees["pdf"][1].append(tree["nodes"])
    passages = _passage_rows(data)
    out["passages"] = [
        {k: r[k] for k in ("doc_id", "title", "n_nodes", "nodes", "toc")} for r in passages
    ]
    for row in passages:
        trees["passage"][0].append({"doc_id": row["doc_id"], "source": "passage"})
        trees["passage"][1].append(json.loads(row["nodes"]))
    for source, (rows, node_lists) in trees.items():
        pairs = list(zip(rows, node_lists, strict=True))
        out[f"layout_graph/{source}"] = [graph_columns(n, r["doc_id"]) for r, n in pairs]
        out[f"enrich/{source}"] = {
            "texts": [embedding_texts(r, n) for r, n in pairs],
            "sentences": passage_sentences(rows, node_lists),
        }
        out[f"entities/{source}"] = _entities(rows, node_lists)
    return out


def _parsed(path: Path, pages: int) -> tuple[str, dict, list, list[str]]:
    """A probe PDF's first ``pages`` pages: its id (the file name), metadata (the outline and
    labels of those pages), blocks and page errors."""
    import pymupdf

    from bookindex.operators.parsing.parse import document_metadata, parse_pages

    with pymupdf.open(path) as doc:
        meta = document_metadata(doc)
        stop = min(pages, doc.page_count)
        parsed = parse_pages(doc, 0, stop)
    meta = dict(
        meta,
        n_pages=stop,
        outline=[e for e in meta["outline"] if e[2] <= stop],
        page_labels=meta["page_labels"][:stop],
    )
    return f"probe-{path.name}", meta, parsed.blocks, parsed.errors


def _passage_rows(data: Path) -> list[dict]:
    from bookindex.operators.structure.passages import read_passages
    from bookindex.pipelines.rows import passage_document_row

    rel, first = PROBE_PASSAGES
    found = [p for p in read_passages(str(data / rel)) if not p.error][:first]
    return [passage_document_row(p) for p in found]


def _entities(rows: list[dict], node_lists: list[list[dict]]) -> list[dict]:
    """Resolution within each probe document of the entities its tree gives."""
    import numpy as np

    from bookindex.operators.graph.entities import extract_documents
    from bookindex.operators.graph.entity_sets import resolve_document

    def no_named_entities(texts: list[str]) -> list:
        return [([], []) for _ in texts]

    documents = [
        (r["doc_id"], nodes, r["source"] == "passage")
        for r, nodes in zip(rows, node_lists, strict=True)
    ]
    out = []
    for (doc_id, _, _), extraction in zip(
        documents, extract_documents(documents, no_named_entities), strict=True
    ):
        vectors = np.asarray([_name_vector(e.name) for e in extraction.entities], np.float32)
        found = resolve_document(doc_id, extraction, vectors.reshape(-1, _NAME_WIDTH))
        decisions = [{k: v for k, v in vars(d).items() if k != "scores"} for d in found.decisions]
        out.append(
            {"entities": found.entities, "relations": found.relations, "decisions": decisions}
        )
    return out


def _name_vector(name: str):
    """A unit vector drawn from the name's hash: equal names, equal vectors; others far apart."""
    import numpy as np

    seed = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(_NAME_WIDTH)
    return vector / np.linalg.norm(vector)


def changed(current: dict[str, str]) -> list[str]:
    """The stages whose ``current`` fingerprint is not the recorded one."""
    stored = recorded()
    return [s for s in STAGES if stored.get(s) != current.get(s)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--renew", action="store_true", help=f"write {FINGERPRINTS.name}")
    parser.add_argument("--data", default=None, help="the shared data directory")
    args = parser.parse_args(argv)
    current = compute(args.data)
    stored = recorded() if FINGERPRINTS.is_file() else {}
    for stage in STAGES:
        mark = "" if stored.get(stage) == current[stage] else "  changed"
        print(f"{stage:<21} recorded {stored.get(stage, '-'):<16}  now {current[stage]}{mark}")
    if args.renew:
        FINGERPRINTS.write_text(json.dumps({"renew": RENEW, "stages": current}, indent=1) + "\n")
        print(f"wrote {FINGERPRINTS}")
        return 0
    return 1 if any(stored.get(s) != current[s] for s in STAGES) else 0


if __name__ == "__main__":
    sys.exit(main())
