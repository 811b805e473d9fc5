"""Where the whole job's embedding CPU goes: the texts and word pieces the enrich stage embeds on
``job_throughput``'s mix, by kind, and the CPU seconds of each kind per embedder runtime, side
by side in one run.

    python -m benchmarks.embed_cost [--mix default|small] [--runtimes onnx,bf16,onnx-int8]
        [--reps 1]

The documents are the mix's (``benchmarks.job_throughput.MIXES``): the structure stage's rows
made in this process (probe, parse, section tree; passages: ``passage_document_row``), and their
entities found as the enrich worker finds them (``EnrichWorker._extract``: spaCy), not timed.
The texts are then grouped as ``pipelines.enrich_worker.embed_batch`` runs them, each distinct
text once over the whole mix (the job deduplicates within a batch of documents):

* node texts by source and kind (``embedding_texts``: a section's or root's title, a leaf's
  text; a passage's paragraph with its title, run with its sentences' spans, from which the
  sentence vectors are read: late chunking);
* ``sentences alone``: a passage's sentences that the paragraph's 128 word pieces cut;
* ``entity names``: the distinct names that are no node's whole text.

Each runtime (``models.embed_runtime``; ``bf16`` runs ``onnx`` on a CPU without native
bfloat16, as the job does) embeds every group in one thread (``torch_threads=1``: what Ray gives
an enrich worker), runtimes alternating ``--reps`` rounds; per group the least CPU seconds
(``time.process_time``) of its rounds. Printed per group: texts, word pieces (as the model sees
them: truncated to 128, with [CLS] and [SEP]), the first runtime's CPU seconds, its share of the
total and word pieces per CPU-second; per other runtime its CPU seconds, the ratio to the first
runtime's and the minimum cosine of its vectors (sentence vectors too) to the first's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.job_throughput import MIXES, mix_inputs

Group = tuple[list[str], list[list[tuple[int, int]]] | None]  # texts, spans (None: plain embed)


def mix_rows(mix: str) -> tuple[list[dict], list[list[str]]]:
    """The structure stage's rows of the mix's documents and each one's entity names."""
    import pyarrow as pa

    from bookindex.operators.config import BookindexConfig
    from bookindex.operators.kinds import FAILED
    from bookindex.operators.structure.passages import read_passages
    from bookindex.pipelines.enrich_worker import EnrichWorker
    from bookindex.pipelines.rows import from_json, passage_document_row
    from bookindex.pipelines.structure_stage import index_documents, probe_document

    with tempfile.TemporaryDirectory() as scratch:
        inputs = mix_inputs(MIXES[mix], Path(scratch))
        pdfs, corpus = inputs[:-1], inputs[-1]
        passages = read_passages(str(corpus))
    probed = [
        dict(probe_document({"doc_id": p.name, "uri": str(p), "size": p.stat().st_size}))
        for p in pdfs
    ]
    for row in probed:
        row.update(start=0, stop=row["n_pages"])
    rows = index_documents(pa.Table.from_pylist(probed), use_outline=True).to_pylist()
    rows += [passage_document_row(p) for p in passages]
    config = BookindexConfig()
    worker = EnrichWorker(config.models.to_dict(), config.resolver.model_dump(), node="")
    nodes = [from_json(r["nodes"]) if r["status"] != FAILED else [] for r in rows]
    extractions = worker._extract(rows, nodes, [worker.extract] * len(rows))
    return rows, [[e.name for e in x.entities] for x in extractions]


def text_groups(rows: list[dict], names: list[list[str]]) -> dict[str, Group]:
    """The distinct texts the enrich stage embeds, by kind (the module's docstring)."""
    from bookindex.operators.kinds import FAILED
    from bookindex.pipelines.enrich_worker import embedding_texts, passage_sentences
    from bookindex.pipelines.rows import from_json

    node_lists = [from_json(r["nodes"]) if r["status"] != FAILED else [] for r in rows]
    _, _, spans = passage_sentences(rows, node_lists)
    groups: dict[str, dict] = {}
    whole: set[str] = set()
    at = 0
    for row, nodes in zip(rows, node_lists, strict=True):
        source = "passage" if row.get("source") == "passage" else "pdf"
        for node, text in zip(nodes, embedding_texts(row, nodes), strict=True):
            text_spans = tuple(spans[at])
            at += 1
            groups.setdefault(f"{source} {node['kind']}", {})[(text or " ", text_spans)] = None
            if not text_spans:
                whole.add(text)
    out: dict[str, Group] = {
        name: (
            [t for t, _ in keys],
            [list(s) for _, s in keys] if any(s for _, s in keys) else None,
        )
        for name, keys in sorted(groups.items())
    }
    cut = [c for name, (t, s) in out.items() if s is not None for c in cut_sentences(t, s)]
    out["sentences alone"] = (list(dict.fromkeys(cut)), None)
    distinct = dict.fromkeys(n for doc in names for n in doc)
    out["entity names"] = ([n for n in distinct if n not in whole], None)
    return out


def cut_sentences(texts: list[str], spans: list) -> list[str]:
    """The sentences (``texts[i][start:end]``) that the 128 word pieces of their paragraph's run
    cut, which ``embed_batch`` runs alone: the spans ``pooled_span_vectors`` finds no vector
    for (found from the word pieces' offsets alone: no model run)."""
    from bookindex.operators.models.offline import _word_pieces
    from bookindex.operators.models.onnx_embedder import pooled_span_vectors

    def states(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.ones((*ids.shape, 1), np.float32)

    _, in_text = pooled_span_vectors(_word_pieces(), texts, spans, states, 64)
    return [
        t[a:b]
        for t, s, found in zip(texts, spans, in_text, strict=True)
        for (a, b), v in zip(s, found, strict=True)
        if v is None
    ]


def word_pieces(texts: list[str]) -> int:
    from bookindex.operators.models.offline import _word_pieces

    return sum(len(e.ids) for e in _word_pieces().encode_batch(texts))


def run_group(backend, group: Group) -> tuple[float, np.ndarray, list]:
    """CPU seconds, vectors and span vectors of one group on ``backend``."""
    texts, spans = group
    started = time.process_time()
    if spans is None:
        vectors, in_text = backend.embed(texts), []
    else:
        vectors, in_text = backend.embed_spans(texts, spans)
    return time.process_time() - started, np.asarray(vectors, np.float32), in_text


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float((a * b).sum(axis=1).min()) if len(a) else 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mix", default="default", choices=sorted(MIXES))
    ap.add_argument("--runtimes", default="onnx", help="models.embed_runtime values, first: base")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"
    from bookindex.operators.config import ModelConfig
    from bookindex.operators.models.offline import OfflineBackend

    started = time.perf_counter()
    rows, names = mix_rows(args.mix)
    groups = text_groups(rows, names)
    runtimes = args.runtimes.split(",")
    backends = {r: OfflineBackend(ModelConfig(embed_runtime=r, torch_threads=1)) for r in runtimes}
    ran = {}
    for runtime, backend in backends.items():
        backend.embed(["warm up"])  # the export, quantization and session: not timed
        ran[runtime] = backend.runtime
    print(
        f"mix {args.mix}: {len(rows)} documents, {sum(r['n_nodes'] for r in rows)} nodes "
        f"(made in {time.perf_counter() - started:.0f} s, not timed); runtimes "
        + ", ".join(f"{r} (ran {ran[r]})" for r in runtimes)
        + f"; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    seconds: dict[tuple[str, str], float] = {}
    vectors: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for _ in range(args.reps):
        for runtime, backend in backends.items():
            for name, group in groups.items():
                cpu, found, in_text = run_group(backend, group)
                key = (name, runtime)
                seconds[key] = min(seconds.get(key, cpu), cpu)
                spans = [v for per in in_text for v in per if v is not None]
                vectors[key] = (found, np.asarray(spans, np.float32).reshape(-1, found.shape[1]))
    print_table(groups, runtimes, seconds, vectors)
    return 0


def print_table(groups: dict[str, Group], runtimes: list[str], seconds: dict, vectors: dict):
    base = runtimes[0]
    total = sum(seconds[(g, base)] for g in groups)
    head = f"| texts | word pieces | {base} CPU s | share | word pieces / CPU s |"
    head += "".join(f" {r} CPU s | {r} / {base} | {r} min cosine |" for r in runtimes[1:])
    print("\n| group " + head)
    print("|---" * (6 + 3 * len(runtimes[1:])) + "|")
    sums = {r: 0.0 for r in runtimes}
    n_texts = n_pieces = 0
    for name, (texts, _) in groups.items():
        pieces = word_pieces(texts)
        n_texts += len(texts)
        n_pieces += pieces
        cpu = seconds[(name, base)]
        line = f"| {name} | {len(texts)} | {pieces} | {cpu:.2f} | {100 * cpu / total:.1f} % |"
        line += f" {pieces / max(cpu, 1e-9):.0f} |"
        for r in runtimes:
            sums[r] += seconds[(name, r)]
        for r in runtimes[1:]:
            a, b = vectors[(name, base)], vectors[(name, r)]
            cos = min(min_cosine(a[0], b[0]), min_cosine(a[1], b[1]))
            line += f" {seconds[(name, r)]:.2f} | {seconds[(name, r)] / max(cpu, 1e-9):.2f} |"
            line += f" {cos:.4f} |"
        print(line)
    line = f"| all | {n_texts} | {n_pieces} | {total:.2f} | 100 % | {n_pieces / total:.0f} |"
    for r in runtimes[1:]:
        line += f" {sums[r]:.2f} | {sums[r] / total:.2f} | |"
    print(line)


if __name__ == "__main__":
    sys.exit(main())
