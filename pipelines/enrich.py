"""The enrich stage: node vectors, entities and relations, and resolution within a document.

Runs as a Ray Data ``map_batches`` over document rows (the output of the structure stage).
Models are loaded once per worker process (operators.models.offline keeps them), so the Ray
worker pool reuses them from batch to batch and from job to job.

Added columns per document:
    node_vectors    float32 bytes, one vector per node in node order
    entities        JSON: the document's entities after resolution within the document
                    [{name, type, description, aliases, node_ids, structural_key}]
    entity_vectors  float32 bytes, one name vector per entity
    relations       JSON: [{source, target, type, weight, description, node_id}] (indices into
                    ``entities``)
    er_decisions    JSON: the within-document decisions (scope "document")
    enrich_errors   JSON: nodes whose extraction failed, with why
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import numpy as np
import pyarrow as pa

from operators.graph.entities import STRUCTURAL_TYPES, NodeExtraction, extract_document
from operators.graph.resolution import Resolver, model_selector
from operators.models import ModelConfig, is_generative, load_backend
from pipelines.run_stats import peak_memory_mb

_backends: dict[str, object] = {}
MAX_IMAGES_PER_DOCUMENT = 200
IMAGE_DPI = 150
IMAGE_PROMPT = (
    "Describe this figure from a document for a search index: what it shows, the names, "
    "labels and numbers it contains, in at most five sentences."
)
_EMBED_TEXT_CHARS = 2000


def backend_for(config: dict):
    key = json.dumps(config, sort_keys=True)
    if key not in _backends:
        _backends[key] = load_backend(ModelConfig(**config))
    return _backends[key]


def node_embedding_text(node: dict) -> str:
    """What a node's vector encodes: the title of a section, the caption and cells of a table
    or figure, the text of a paragraph."""
    if node["kind"] in ("root", "section"):
        return node.get("title") or ""
    parts = [node.get("title") or "", node.get("text") or "", node.get("summary") or ""]
    return " ".join(p for p in parts if p)[:_EMBED_TEXT_CHARS]


def enrich_batch(batch: pa.Table, model_config: dict) -> pa.Table:
    """Document rows → the same rows with the enrich columns (see the module docstring)."""
    backend = backend_for(model_config)
    rows = batch.to_pylist()
    usage = getattr(backend, "usage", {})
    tokens_before = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    started = time.perf_counter()
    node_lists = [json.loads(r["nodes"]) if r["status"] != "failed" else [] for r in rows]
    image_errors = [
        _describe_images(r, nodes, backend) for r, nodes in zip(rows, node_lists, strict=True)
    ]
    flat = [n for nodes in node_lists for n in nodes]
    vectors = backend.embed([node_embedding_text(n) for n in flat])
    embed_s = time.perf_counter() - started
    extractor = _batch_extractor(backend)
    t0 = time.perf_counter()
    extractions = [
        extract_document(
            r["doc_id"], nodes, extractor, title_is_entity=r.get("source") == "passage"
        )
        for r, nodes in zip(rows, node_lists, strict=True)
    ]
    # One embedding call for the entity names of the whole batch (small calls cost far more).
    names = [e.name for x in extractions for e in x.entities]
    name_vectors = backend.embed(names)
    extract_s = time.perf_counter() - t0
    node_offset = name_offset = 0
    tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0) - tokens_before
    memory_mb = peak_memory_mb()
    out = []
    for row, nodes, extraction, errors in zip(
        rows, node_lists, extractions, image_errors, strict=True
    ):
        extraction.errors[:0] = errors
        doc_vectors = vectors[node_offset : node_offset + len(nodes)]
        node_offset += len(nodes)
        doc_names = name_vectors[name_offset : name_offset + len(extraction.entities)]
        name_offset += len(extraction.entities)
        t1 = time.perf_counter()
        graph = _document_graph(row["doc_id"], extraction, doc_names, backend)
        timings = json.loads(row.get("stage_timings") or "{}")
        share = len(nodes) / max(1, len(flat))
        timings.update(
            embed=round(embed_s * share, 4),
            entities=round(extract_s * share + time.perf_counter() - t1, 4),
        )
        memory = json.loads(row.get("stage_memory") or "{}")
        out.append(
            dict(
                row,
                stage_memory=json.dumps(dict(memory, embed=memory_mb, entities=memory_mb)),
                stage_tokens=json.dumps({"entities": round(tokens * share)}),
                nodes=json.dumps(nodes),  # with the figure descriptions, when a VLM made them
                node_vectors=np.ascontiguousarray(doc_vectors, np.float32).tobytes(),
                stage_timings=json.dumps(timings),
                **graph,
            )
        )
    return pa.Table.from_pylist(out)


def _document_graph(
    doc_id: str, extraction: NodeExtraction, name_vectors: np.ndarray, backend
) -> dict:
    """Resolution within one document: its entities merged, relations re-pointed."""
    local = extraction.entities
    if not local:
        return {
            "entities": "[]",
            "entity_vectors": b"",
            "relations": "[]",
            "er_decisions": "[]",
            "enrich_errors": json.dumps(extraction.errors),
        }
    # Tables, figures and formulas are one object each: they take part in no resolution.
    resolvable = [i for i, e in enumerate(local) if e.type not in STRUCTURAL_TYPES]
    selector = model_selector(backend) if is_generative(backend) else None
    resolver = Resolver(dim=backend.dim, id_salt=doc_id, select=selector)
    found, decisions = resolver.resolve(
        [local[i].name for i in resolvable],
        [local[i].type for i in resolvable],
        [local[i].description for i in resolvable],
        name_vectors[resolvable],
    )
    group_of = {i: ("e", p) for i, p in zip(resolvable, found, strict=True)}
    positions = [group_of.get(i, ("s", i)) for i in range(len(local))]
    merged: list[dict] = []
    kept_rows: list[int] = []
    slot_of: dict[tuple, int] = {}
    for i, position in enumerate(positions):
        entity = local[i]
        if position not in slot_of:
            slot_of[position] = len(merged)
            kept_rows.append(i)
            merged.append(
                {
                    "name": entity.name,
                    "type": entity.type,
                    "description": entity.description,
                    "aliases": [],
                    "node_ids": list(entity.node_ids),
                    "structural_key": entity.structural_key,
                }
            )
            continue
        target = merged[slot_of[position]]
        if entity.name != target["name"] and entity.name not in target["aliases"]:
            target["aliases"].append(entity.name)
        target["node_ids"] += [n for n in entity.node_ids if n not in target["node_ids"]]
    relations = []
    for r in extraction.relations:
        src, dst = slot_of[positions[r.source]], slot_of[positions[r.target]]
        if src != dst:
            relations.append(dict(asdict(r), source=src, target=dst))
    return {
        "entities": json.dumps(merged),
        "entity_vectors": np.ascontiguousarray(name_vectors[kept_rows], np.float32).tobytes(),
        "relations": json.dumps(relations),
        "er_decisions": json.dumps([asdict(d) for d in decisions]),
        "enrich_errors": json.dumps(extraction.errors),
    }


def _describe_images(row: dict, nodes: list[dict], backend) -> list[str]:
    """Figures (and the page images of scans, status ``needs_ocr``) described by the configured
    vision-language model into the node's ``summary``. Without one, nothing happens."""
    images = [n for n in nodes if n["kind"] == "image"][:MAX_IMAGES_PER_DOCUMENT]
    if not images or not is_generative(backend):
        return []
    import pymupdf

    errors = []
    try:
        pdf = pymupdf.open(row["uri"], filetype="pdf")
    except Exception as exc:
        return [f"images: {type(exc).__name__}: {exc}"]
    with pdf:
        for node in images:
            try:
                page = pdf[node["page_start"] - 1]
                clip = pymupdf.Rect(node["bbox"]) & page.rect
                pixmap = page.get_pixmap(dpi=IMAGE_DPI, clip=clip if not clip.is_empty else None)
                prompt = IMAGE_PROMPT + (f" Its caption: {node['title']}" if node["title"] else "")
                node["summary"] = backend.describe_image(pixmap.tobytes("png"), prompt)
            except Exception as exc:  # this figure's failure alone
                errors.append(f"{node['node_id']}: describe_image: {type(exc).__name__}: {exc}")
    return errors


def _batch_extractor(backend):
    if hasattr(backend, "extract_entities_batch"):
        return backend.extract_entities_batch
    return lambda texts: [backend.extract_entities(t) for t in texts]
