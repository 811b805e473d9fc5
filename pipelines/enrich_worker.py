"""The enrich stage's work on a batch of documents, in the process that owns the models
(``EnrichStage``'s child, pipelines/enrich.py and pipelines/model_host.py, or a test's
process): ``EnrichWorker`` embeds every node text, a passage's sentences and the entity names
(``embed_batch``: a passage's sentence vectors are read from its paragraph's own run where the
embedder exposes its token states), extracts entities and relations (one spaCy pass over the
batch, or the model's answers), and resolves the entities within each document.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pyarrow as pa

from bookindex.operators.config import ModelConfig, ResolverConfig
from bookindex.operators.graph.entities import (
    NodeExtraction,
    extract_document,
    extract_documents,
    node_text,
)
from bookindex.operators.graph.entity_linking import chunk_sentences, sentence_spans
from bookindex.operators.graph.entity_sets import resolve_document
from bookindex.operators.graph.resolution import SelectionPhase, model_selector
from bookindex.operators.kinds import FAILED, LEAF_KINDS, ROOT, SECTION
from bookindex.operators.models import (
    ModelError,
    entities_from_answer,
    is_generative,
    load_backend,
    load_reranker,
)
from bookindex.pipelines.er_selection import entity_columns, stash_columns
from bookindex.pipelines.model_stage import ModelStage
from bookindex.pipelines.rows import encode_vectors, from_json, ray_node_id, to_json
from bookindex.pipelines.run_stats import peak_memory_mb

ENTITY_ANSWERS = "llm_entities"  # pipelines/model_requests.py
_EMBED_TEXT_CHARS = 2000


def node_embedding_text(node: dict, heading: str = "") -> str:
    """What a node's vector encodes: the title of a section, the caption and cells of a table
    or figure, the text of a paragraph; ``heading`` (a passage's title) before the rest."""
    if node["kind"] in (ROOT, SECTION):
        return node.get("title") or ""
    parts = [heading, node.get("title") or "", node.get("text") or "", node.get("summary") or ""]
    return " ".join(p for p in parts if p)[:_EMBED_TEXT_CHARS]


def embedding_texts(row: dict, nodes: list[dict]) -> list[str]:
    """The texts one document's node vectors encode. A passage's paragraph is embedded with
    the passage's title, "title text", as a user embeds a passage (the leaf itself has no
    title: the root holds it); a PDF's leaves with their own text (and caption) alone."""
    heading = passage_heading(nodes) if row.get("source") == "passage" else ""
    return [node_embedding_text(n, heading) for n in nodes]


def passage_sentences(
    rows: list[dict], node_lists: list[list[dict]]
) -> tuple[list[list[int | None]], list[str], list[list[tuple[int, int]]]]:
    """The chunks Chunk-Zoom ranks in a passage (its leaves' sentences), embedded at index
    time with the batch's other texts, so that a query embeds only its question: per
    document the count per node (None: a PDF's node, whose leaf vector is the chunk's), the
    texts in node order, and per node (in the order of ``embedding_texts``) where its
    sentences lie in its embedding text (``sentence_spans_in``; none for a PDF's node)."""
    counts, texts, spans = [], [], []
    for row, nodes in zip(rows, node_lists, strict=True):
        if row.get("source") != "passage":
            counts.append([None] * len(nodes))
            spans += [[] for _ in nodes]
            continue
        heading = passage_heading(nodes)
        found = [chunk_sentences(n["kind"], n.get("text"), n.get("title")) for n in nodes]
        counts.append([len(f) for f in found])
        texts += [t for f in found for t in f]
        spans += [sentence_spans_in(n, heading) for n in nodes]
    return counts, texts, spans


def passage_heading(nodes: list[dict]) -> str:
    """A passage's title (its root's), which its paragraph's embedding text starts with."""
    return next((n.get("title") or "" for n in nodes if n["kind"] == ROOT), "")


def sentence_spans_in(node: dict, heading: str) -> list[tuple[int, int]]:
    """Where ``chunk_sentences`` of a passage's ``node`` lie in its embedding text
    (``node_embedding_text(node, heading)``), as (start, end) characters; none for a node
    that is not a leaf. Spans past the text's cut run past the embedder's word pieces too."""
    if node["kind"] not in LEAF_KINDS:
        return []
    text = node.get("text") or ""
    title = (node.get("title") or "") if text else ""  # a leaf without text: its title is it
    before = " ".join(p for p in (heading, title) if p)
    at = len(before) + 1 if before else 0
    return [(a + at, b + at) for a, b in sentence_spans(text or node.get("title") or "")]


class EnrichWorker(ModelStage):
    """Document rows → the same rows with the enrich columns; owns the models (in the process
    that runs it: ``EnrichStage``'s child, or a test's process).

    ``resolver``: ``ResolverConfig`` fields (resolution within each document); ``width``: the
    width the index's vectors have (None: a new index, any width); ``node``: the Ray node the
    stage runs on (for ``stage_nodes``)."""

    def __init__(
        self,
        models: dict,
        resolver: dict,
        width: int | None = None,
        answers: bool = False,
        node: str | None = None,
    ) -> None:
        # answers: every generative call goes through ray.data.llm processors
        # (pipelines/model_requests.py, pipelines/er_selection.py); this stage loads only what
        # embeds (vllm's embedder is the offline one: no in-process engine)
        if answers and models.get("backend") == "vllm":
            models = {**models, "backend": "offline"}
        super().__init__(models)
        if width is not None and self.backend.dim != width:
            raise ModelError(
                f"the configured embedding model makes {self.backend.dim}-dimensional vectors "
                f"and the index holds {width}-dimensional ones"
            )
        self.info = {"dim": self.backend.dim}
        record = getattr(self.backend, "runtime_record", None)  # the offline embedder's
        self._runtime = record() if record is not None else {}
        self.resolver = ResolverConfig(**resolver)
        self.select = (
            model_selector(self.backend) if is_generative(self.backend) and not answers else None
        )
        self.rerank = load_reranker(self.models)  # None: rescaled cosines
        self.node = ray_node_id() if node is None else node
        if hasattr(self.backend, "extract_entities_batch"):
            self.extract = self.backend.extract_entities_batch
        else:
            self.extract = lambda texts: [self.backend.extract_entities(t) for t in texts]
        # answers: the model's descriptions and entity answers arrive in the rows
        # (pipelines/model_requests.py, ray.data.llm); the rules (spaCy) stand where they failed;
        # ER selection is a later phase (pipelines/er_selection.py)
        self.answers = answers
        if answers:
            self.rules = load_backend(ModelConfig(**{**models, "backend": "offline"}))

    def warm_up(self) -> None:
        """Load what the models load on first use (weights, pipelines), before any
        document's time budget starts (``pipelines.model_host``)."""
        self.backend.embed(["warm up"])
        sentence = ["Ada Lovelace lived in London."]
        if self.answers:  # the rules stand in where the model's answers failed
            self.rules.extract_entities_batch(sentence)
        elif self.select is None:  # the offline rules (a generative model is not called here)
            self.extract(sentence)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        tokens_before = self._tokens()
        started = time.perf_counter()
        node_lists = [from_json(r["nodes"]) if r["status"] != FAILED else [] for r in rows]
        # a model's figure/table descriptions are in the nodes already (model_requests.py)
        image_errors = [from_json(r.pop("model_errors", None), []) or [] for r in rows]
        if self.answers:
            extractors = [self._answered(r, n) for r, n in zip(rows, node_lists, strict=True)]
        else:
            extractors = [self.extract] * len(rows)
        flat = [n for nodes in node_lists for n in nodes]
        texts = [
            t for r, nodes in zip(rows, node_lists, strict=True) for t in embedding_texts(r, nodes)
        ]
        counts, sentence_texts, spans = passage_sentences(rows, node_lists)
        extractions = self._extract(rows, node_lists, extractors)
        extract_s = time.perf_counter() - started
        t0 = time.perf_counter()
        names = [e.name for x in extractions for e in x.entities]
        vectors, sentence_vectors, name_vectors = embed_batch(
            self.backend, texts, spans, sentence_texts, names
        )
        embed_s = time.perf_counter() - t0
        batch_facts = {
            "embed_s": embed_s,
            "extract_s": extract_s,
            "tokens": self._tokens() - tokens_before,
            "memory_mb": peak_memory_mb(),
            "n_nodes": len(flat),
        }
        out = []
        node_offset = name_offset = sentence_offset = 0
        for row, nodes, extraction, errors, doc_counts in zip(
            rows, node_lists, extractions, image_errors, counts, strict=True
        ):
            extraction.errors[:0] = errors + row.pop("_errors", [])
            doc_vectors = vectors[node_offset : node_offset + len(nodes)]
            node_offset += len(nodes)
            doc_names = name_vectors[name_offset : name_offset + len(extraction.entities)]
            name_offset += len(extraction.entities)
            n_sentences = sum(c for c in doc_counts if c)
            doc_sentences = sentence_vectors[sentence_offset : sentence_offset + n_sentences]
            sentence_offset += n_sentences
            row = dict(
                row,
                sentence_counts=to_json(doc_counts),
                sentence_vectors=encode_vectors(doc_sentences),
            )
            out.append(self._row(row, nodes, doc_vectors, extraction, doc_names, batch_facts))
        return pa.Table.from_pylist(out)

    def _extract(
        self, rows: list[dict], node_lists: list[list[dict]], extractors: list
    ) -> list[NodeExtraction]:
        """Entities and relations of each document: one extraction call for the batch, unless
        the rows carry the model's answers (each document its own extractor)."""
        documents = [
            (r["doc_id"], nodes, r.get("source") == "passage")
            for r, nodes in zip(rows, node_lists, strict=True)
        ]
        if self.answers:
            return [
                extract_document(doc_id, nodes, extract, title_is_entity=title)
                for (doc_id, nodes, title), extract in zip(documents, extractors, strict=True)
            ]
        return extract_documents(documents, self.extract)

    def _answered(self, row: dict, nodes: list[dict]):
        """The extraction of one document from the model's answers in ``row`` (one per node
        text); nodes without a usable answer get the rules' entities, and their errors are
        added to the row's ``model_errors``."""
        answers = from_json(row.pop(ENTITY_ANSWERS, None), {}) or {}
        by_text: dict[str, tuple[str, str, int]] = {}
        for node in nodes:
            found = answers.get(node["node_id"])
            if found is not None:
                by_text.setdefault(node_text(node), tuple(found))
                if found[1]:
                    row.setdefault("_errors", []).append(
                        f"{node['node_id']}: entities: {found[1]} ({found[2]} attempt(s))"
                    )

        def extract(texts: list[str]) -> list:
            results: list = [None] * len(texts)
            missing = []
            for i, text in enumerate(texts):
                answer = by_text.get(text, ("", "", 0))[0]
                if answer:
                    try:
                        results[i] = entities_from_answer(json.loads(answer))
                        continue
                    except ValueError:
                        pass
                missing.append(i)
            if missing:
                ruled = self.rules.extract_entities_batch([texts[i] for i in missing])
                for i, result in zip(missing, ruled, strict=True):
                    results[i] = result
            return results

        return extract

    def _row(
        self,
        row: dict,
        nodes: list[dict],
        vectors: np.ndarray,
        extraction: NodeExtraction,
        name_vectors: np.ndarray,
        batch: dict[str, Any],
    ) -> dict:
        """One document's enriched row; the batch's times and tokens shared by node count."""
        t1 = time.perf_counter()
        graph = self._document_graph(row["doc_id"], extraction, name_vectors)
        timings = from_json(row.get("stage_timings"), {})
        share = len(nodes) / max(1, batch["n_nodes"])
        timings.update(
            embed=round(batch["embed_s"] * share, 4),
            entities=round(batch["extract_s"] * share, 4),  # extraction: NER and relations
            resolve_document=round(time.perf_counter() - t1, 4),  # resolution in the document
        )
        memory = from_json(row.get("stage_memory"), {})
        memory_mb = batch["memory_mb"]
        return dict(
            row,
            stage_memory=to_json(
                dict(memory, embed=memory_mb, entities=memory_mb, resolve_document=memory_mb)
            ),
            stage_tokens=to_json({"entities": round(batch["tokens"] * share)}),
            nodes=to_json(nodes),  # with the figure descriptions, when a VLM made them
            node_vectors=encode_vectors(vectors),
            vector_width=self.backend.dim,
            embed_runtime=to_json(self._runtime),
            stage_timings=to_json(timings),
            stage_nodes=to_json(dict(from_json(row.get("stage_nodes"), {}), enrich=self.node)),
            **graph,
        )

    def _document_graph(
        self, doc_id: str, extraction: NodeExtraction, name_vectors: np.ndarray
    ) -> dict:
        """Resolution within one document, as the row's entity columns; with ``answers``, the
        questions for the model's selection phase are kept (``er_selection.stash_columns``)."""
        phase = SelectionPhase() if self.answers else None
        found = resolve_document(
            doc_id, extraction, name_vectors, self.resolver, phase or self.select, self.rerank
        )
        return {
            **entity_columns(found, name_vectors),
            "enrich_errors": to_json(extraction.errors),
            **(stash_columns(phase, extraction, name_vectors) if self.answers else {}),
        }

    def _tokens(self) -> int:
        usage = getattr(self.backend, "usage", {})
        return usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)


def embed_batch(
    backend,
    texts: list[str],
    spans: list[list[tuple[int, int]]],
    sentence_texts: list[str],
    names: list[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The vectors of a batch's node texts, passage sentences and entity names. Where the
    embedder exposes its token states (``backend.embed_spans``: the offline MiniLM), a
    sentence's vector is read from its paragraph's run ("late chunking": the mean of the word
    pieces inside ``spans``, in the paragraph's context, at no extra model cost) and only the
    sentences past the paragraph's truncation, and the names that are no node's text, are run
    alone; elsewhere every text is run alone, in one call. ``spans`` per text, flattened in ``sentence_texts``' order."""
    if not sentence_texts or not hasattr(backend, "embed_spans"):
        return tuple(  # type: ignore[return-value]
            _split(
                embed_distinct(backend, texts + sentence_texts + names),
                [len(texts), len(sentence_texts), len(names)],
            )
        )
    vectors, in_text = embed_distinct_spans(backend, texts, spans)
    found = [v for per_text in in_text for v in per_text]
    if len(found) != len(sentence_texts):
        raise ValueError(f"{len(found)} sentence spans for {len(sentence_texts)} sentences")
    alone = [i for i, v in enumerate(found) if v is None]
    # a name that is a node's whole text (a passage's title: its root and its TOPIC entity)
    # takes that text's vector, as one call over every distinct text gave it
    whole = {t: k for k, (t, s) in enumerate(zip(texts, spans, strict=True)) if not s}
    new_names = [n for n in dict.fromkeys(names) if n not in whole]
    rest = embed_distinct(backend, [sentence_texts[i] for i in alone] + new_names)
    for k, i in enumerate(alone):
        found[i] = rest[k]
    width = vectors.shape[1] if vectors.size else backend.dim
    sentence_vectors = np.asarray(found, np.float32).reshape(len(found), width)
    named = dict(zip(new_names, rest[len(alone) :], strict=True))
    name_vectors = [vectors[whole[n]] if n in whole else named[n] for n in names]
    return vectors, sentence_vectors, np.asarray(name_vectors, np.float32).reshape(-1, width)


def embed_distinct(backend, texts: list[str]) -> np.ndarray:
    """``backend.embed(texts)`` with each distinct text embedded once (first-seen order, so
    the same input gives the same call), its vector copied to every place it recurs."""
    distinct = list(dict.fromkeys(texts))
    if len(distinct) == len(texts):
        return np.asarray(backend.embed(texts), np.float32)
    place = {t: i for i, t in enumerate(distinct)}
    vectors = np.asarray(backend.embed(distinct), np.float32)
    return vectors[[place[t] for t in texts]]


def embed_distinct_spans(
    backend, texts: list[str], spans: list[list[tuple[int, int]]]
) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
    """``backend.embed_spans(texts, spans)`` with each distinct (text, spans) run once."""
    keys = [(t, tuple(s)) for t, s in zip(texts, spans, strict=True)]
    distinct = list(dict.fromkeys(keys))
    place = {k: i for i, k in enumerate(distinct)}
    vectors, in_text = backend.embed_spans([t for t, _ in distinct], [list(s) for _, s in distinct])
    at = [place[k] for k in keys]
    return np.asarray(vectors, np.float32)[at], [in_text[i] for i in at]


def _split(vectors: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    """``vectors`` cut into consecutive parts of ``sizes`` rows."""
    ends = np.cumsum(sizes)
    return [vectors[end - size : end] for size, end in zip(sizes, ends, strict=True)]
