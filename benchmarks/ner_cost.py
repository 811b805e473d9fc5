"""The entity extraction's CPU by spaCy component, and thinc's BLIS matrix products against
NumPy's (what the offline backend runs), side by side in one run, on the node texts of
``benchmarks.job_throughput``'s mix.

Run from the repo root (progress to stderr, the tables to stdout)::

    python -m benchmarks.ner_cost [--mix default|small] [--every N] [--rounds R]

The mix's documents are structured once in this process (probe, parse and section tree for its
PDFs, without OCR; its passages as rows), and what NER reads is taken from their nodes as the
enrich stage does (``entities.node_text``: distinct texts, blank ones left out; ``--every N``
keeps every N-th). Printed:

* the texts, characters and tokens by source and node kind;
* CPU seconds (``time.process_time``) of each part of the default pipeline (senter, then ner)
  run one after the other over the texts in batches of 64: the tokenizer, the senter, the NER's
  token encoder (its tok2vec alone) and the whole NER;
* the pipeline as the backend loads it (``offline._spacy``: matrix products by NumPy's BLAS, one
  thread) against the same pipeline with thinc's default ops (BLIS), ``--rounds`` rounds
  alternating, each ``extract_entities_batch``'s work (pipe and entities): CPU seconds,
  the ratio, and the texts whose entities (name, label, characters) or sentence starts differ
  between the two (0: the same extraction).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.index_throughput import log
from benchmarks.job_throughput import MIXES, mix_inputs

BATCH = 64


def node_texts(inputs: list[Path]) -> tuple[list[str], Counter, Counter]:
    """The distinct non-blank texts NER reads in the mix's documents, and texts and characters
    by (source, node kind)."""
    import pyarrow as pa

    from bookindex.operators.graph.entities import node_text
    from bookindex.operators.structure.passages import read_passages
    from bookindex.pipelines.rows import from_json, passage_document_row
    from bookindex.pipelines.structure_stage import index_documents, probe_document

    rows = []
    for path in inputs:
        log(f"structure {path.name} ...")
        if path.suffix == ".jsonl":
            rows += [passage_document_row(p) for p in read_passages(str(path))]
            continue
        probed = dict(
            probe_document({"doc_id": path.name, "uri": str(path), "size": path.stat().st_size})
        )
        probed.update(start=0, stop=probed["n_pages"])
        rows += index_documents(pa.Table.from_pylist([probed]), use_outline=True).to_pylist()
    texts: dict[str, None] = {}
    count, chars = Counter(), Counter()
    for row in rows:
        for node in from_json(row["nodes"], []) or []:
            text = node_text(node)
            if text.strip() and text not in texts:
                texts[text] = None
                key = (row.get("source") or "pdf", node["kind"])
                count[key] += 1
                chars[key] += len(text)
    return list(texts), count, chars


def component_cpu(nlp, texts: list[str]) -> dict[str, float]:
    """CPU seconds of the tokenizer and each component, run one after the other (BLAS on one
    thread, as ``extract_entities_batch`` runs it)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        return _component_cpu(nlp, texts)


def _component_cpu(nlp, texts: list[str]) -> dict[str, float]:
    out = {}
    t = time.process_time()
    docs = list(nlp.tokenizer.pipe(texts, batch_size=BATCH))
    out["tokenizer"] = time.process_time() - t
    out["tokens"] = sum(len(d) for d in docs)
    for name, component in nlp.pipeline:
        if name == "ner":
            encoder = component.model.get_ref("tok2vec")
            t = time.process_time()
            for i in range(0, len(docs), BATCH):
                encoder.predict(docs[i : i + BATCH])
            out["ner: token encoder"] = time.process_time() - t
        t = time.process_time()
        docs = list(component.pipe(docs, batch_size=BATCH))
        out[name] = time.process_time() - t
    return out


def blis_pipeline(name: str, sentences: str):
    """The backend's pipeline loaded again with thinc's default ops (BLIS)."""
    import spacy

    from bookindex.operators.models.offline import SPACY_UNUSED

    if sentences == "senter":
        nlp = spacy.load(name, exclude=[*SPACY_UNUSED, "parser", "tok2vec"])
        nlp.enable_pipe("senter")
        return nlp
    return spacy.load(name, exclude=[*SPACY_UNUSED, "senter"])


def extraction(nlp, texts: list[str]) -> tuple[float, list]:
    """CPU seconds of the backend's extraction work with ``nlp``, and per text its entities
    and sentence starts."""
    from threadpoolctl import threadpool_limits

    from bookindex.operators.models.offline import _entities_of

    t = time.process_time()
    with threadpool_limits(1, user_api="blas"):
        docs = list(nlp.pipe(texts, batch_size=BATCH))
        for doc in docs:
            _entities_of(doc)
    seconds = time.process_time() - t
    keys = [
        ([(e.text, e.label_, e.start_char, e.end_char) for e in d.ents], [s.start for s in d.sents])
        for d in docs
    ]
    return seconds, keys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ner_cost", description=__doc__)
    ap.add_argument("--mix", choices=sorted(MIXES), default="default")
    ap.add_argument("--every", type=int, default=1, help="keep every N-th distinct text")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the side-by-side runs")
    args = ap.parse_args(argv)
    from bookindex.operators.config import ModelConfig
    from bookindex.operators.models.offline import _spacy

    with tempfile.TemporaryDirectory(prefix="bookindex_ner_cost_") as tmp:
        texts, count, chars = node_texts(mix_inputs(MIXES[args.mix], Path(tmp)))
    texts = texts[:: args.every]
    config = ModelConfig()
    numpy_nlp = _spacy(config.spacy_model, config.spacy_sentences)
    blis_nlp = blis_pipeline(config.spacy_model, config.spacy_sentences)
    for nlp in (numpy_nlp, blis_nlp):  # first use (lazy tables) outside the timings
        list(nlp.pipe(["Ada Lovelace lived in London."]))
    print(f"mix {args.mix}: {len(texts)} distinct node texts run (every {args.every}-th)")
    print(f"{'all, by source, kind':<22} | {'texts':>7} | {'chars':>9}")
    for key in sorted(count):
        print(f"{', '.join(key):<22} | {count[key]:>7} | {chars[key]:>9}")
    print()
    log("components ...")
    parts = {"blis": component_cpu(blis_nlp, texts), "numpy": component_cpu(numpy_nlp, texts)}
    print(f"tokens: {parts['blis']['tokens']}; pipeline {config.spacy_sentences} + ner")
    print(f"{'CPU s by part':<22} | {'blis':>8} | {'numpy':>8} | {'numpy / blis':>12}")
    for part in [p for p in parts["blis"] if p != "tokens"]:
        a, b = parts["blis"][part], parts["numpy"][part]
        print(f"{part:<22} | {a:>8.2f} | {b:>8.2f} | {b / a if a else 0:>11.2f}x")
    print()
    seconds = {"blis": 0.0, "numpy": 0.0}
    keys: dict[str, list] = {}
    for r in range(args.rounds):
        for name, nlp in (("blis", blis_nlp), ("numpy", numpy_nlp)):
            log(f"extraction {name} round {r + 1}/{args.rounds} ...")
            spent, keys[name] = extraction(nlp, texts)
            seconds[name] += spent
    differ = sum(a != b for a, b in zip(keys["blis"], keys["numpy"], strict=True))
    print(f"extraction ({args.rounds} rounds, alternating): CPU s blis {seconds['blis']:.2f},")
    print(
        f"numpy {seconds['numpy']:.2f}, numpy / blis {seconds['numpy'] / seconds['blis']:.2f}x;"
        f" texts whose entities or sentences differ: {differ} of {len(texts)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
