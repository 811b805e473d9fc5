"""The vLLM side of the index job's model work on a GPU machine (needs ``pip install ".[gpu]"``,
vllm, and a local model directory: nothing is downloaded).

    python -m benchmarks.gpu_llm_check --model /models/Qwen2.5-VL-3B-Instruct \
        [--pdf ../shared/data/mmlongbench/documents/2303.05039v2.pdf] [--max-model-len 8192] \
        [--parts index,answers] [--questions 3]

Runs ``pipelines.model_requests`` with ``--models vllm`` on one PDF, every generative task of
the index job as a ``ray.data.llm`` vLLM processor on the GPU: the LLM section refiner's windows
(vLLM guided JSON), the figure and table descriptions (page crops through the vision model), the
LLM entities, and ER selection (questions built from the document's own section titles). Prints
requests, answers that were usable, retries, seconds and requests/s per task, and two sample
answers, then the refiner's decisions applied (sections before / after).

The ``answers`` part is the query side: the PDF indexed with the offline models, then the query
engine with ``--models vllm`` (the same local model, in-process) asks the first ``--questions``
MMLongBench questions of that PDF with every query method; per method it prints how many answers
the model wrote (``generated``), how many cite evidence (every citation is one of the units
sent), the fallbacks to the extractive answer, the prompt and completion tokens (vLLM's own
counts, ``usage``) and seconds per question, and one answer with its gold answer.

Exits 1 if no answer was usable (index part) or no method answered with citations (answers
part). Prepared on the CPU machine, not run there (no GPU, no vllm); ``--help`` runs anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="local model directory (a VLM)")
    parser.add_argument(
        "--pdf", default=str(SHARED / "mmlongbench" / "documents" / "2303.05039v2.pdf")
    )
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument(
        "--parts", default="index,answers", help="index (the index job's tasks), answers, or both"
    )
    parser.add_argument("--questions", type=int, default=3, help="answers: questions asked")
    args = parser.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    ok = True
    if "index" in parts:
        ok = index_tasks(args) and ok
    if "answers" in parts:
        ok = answer_check(args) and ok
    return 0 if ok else 1


def index_tasks(args: argparse.Namespace) -> bool:
    """The index job's generative tasks on one PDF; whether any answer was usable."""
    import pyarrow as pa
    import ray

    from bookindex.operators.config import BookindexConfig
    from bookindex.operators.graph.resolution import Canonical, selection_key, selection_messages
    from bookindex.pipelines.model_requests import (
        DESCRIPTIONS,
        ENTITIES,
        SECTIONS,
        SELECTIONS,
        description_requests,
        entity_requests,
        run_requests,
        section_requests,
    )
    from bookindex.pipelines.rows import from_json, to_json
    from bookindex.pipelines.structure_stage import (
        apply_section_answers,
        index_documents,
        probe_document,
    )

    def selection_requests(document: dict) -> list[dict]:
        """ER selection questions over the document's section titles (pairs of neighbours)."""
        titles = [n["title"] for n in from_json(document["nodes"]) if n["kind"] == "section"]
        requests = []
        for i in range(0, min(len(titles) - 2, 16)):
            cands = [
                Canonical(f"e{i}{j}", t, "CONCEPT", "") for j, t in enumerate(titles[i + 1 : i + 3])
            ]
            messages = selection_messages(titles[i], cands)
            key = selection_key(titles[i], cands)
            requests.append({"doc_id": "d", "node_id": key, "request": json.dumps(messages)})
        return requests

    config = BookindexConfig()
    config.models.backend = "vllm"
    config.models.vllm_model_path = args.model
    config.models.vllm_options = {"max_model_len": args.max_model_len, "max_tokens": 512}
    pdf = Path(args.pdf)
    probed = probe_document({"doc_id": pdf.name, "uri": str(pdf), "size": pdf.stat().st_size})
    probed.update(start=0, stop=probed["n_pages"])
    window = config.index.section_window
    document = index_documents(pa.Table.from_pylist([probed]), True, review=window)
    document = document.to_pylist()[0]
    ray.init(address="local", include_dashboard=False)
    usable = 0
    tasks = (
        (SECTIONS, section_requests),
        (DESCRIPTIONS, description_requests),
        (ENTITIES, entity_requests),
        (SELECTIONS, selection_requests),
    )
    for task, make in tasks:
        requests = make(document)
        if not requests:
            print(f"{task}: no requests")
            continue
        started = time.perf_counter()
        answers = run_requests(ray.data.from_items(requests), config, task).take_all()
        seconds = time.perf_counter() - started
        good = [a for a in answers if not a["answer_error"]]
        usable += len(good)
        retried = sum(1 for a in answers if a["attempts"] > 1)
        print(
            f"{task}: {len(requests)} requests, {len(good)} usable, {retried} asked again, "
            f"{seconds:.1f} s, {len(requests) / seconds:.2f} requests/s"
        )
        for answer in good[:2]:
            print("   ", json.dumps(answer["answer"])[:300])
        if task == SECTIONS:
            by_window = {
                a["node_id"]: [a["answer"], a["answer_error"], a["attempts"]] for a in answers
            }
            row = dict(document, section_answers=to_json(by_window))
            refined = apply_section_answers(pa.Table.from_pylist([row]), True, window=window)
            refined = refined.to_pylist()[0]
            changed = sum(
                d["model_level"] is not None and d["model_level"] != d["rule_level"]
                for d in from_json(refined["section_decisions"])
            )
            print(
                f"    sections: {document['n_sections']} by the rules, "
                f"{refined['n_sections']} after the model; {changed} decisions changed"
            )
    ray.shutdown()
    return bool(usable)


def answer_check(args: argparse.Namespace) -> bool:
    """Every query method answering with the local model over its own evidence; whether any
    answer was the model's with citations."""
    import tempfile

    from bookindex.operators.config import BookindexConfig
    from bookindex.operators.query.bookrag import fallbacks
    from bookindex.operators.query.registry import QUERY_METHODS
    from bookindex.pipelines.index_pipeline import run_index
    from bookindex.pipelines.store.reader import open_engine

    pdf = Path(args.pdf)
    gold = SHARED / "mmlongbench" / "questions.jsonl"
    asked = [q for q in map(json.loads, gold.open(encoding="utf-8")) if q["doc"] == pdf.name]
    asked = asked[: args.questions] or [{"question": "What is this document about?"}]
    out = Path(tempfile.mkdtemp(prefix="gpu_answers_")) / "index"
    summary = run_index([str(pdf)], out)  # the offline models: only answering is under test
    print(f"answers: indexed {pdf.name}: {summary.ok} ok, {summary.failed} failed")
    config = BookindexConfig()
    config.models.backend = "vllm"
    config.models.vllm_model_path = args.model
    config.models.vllm_options = {
        "max_model_len": args.max_model_len,
        "max_tokens": 512,
        "gpu_memory_utilization": 0.6,
    }
    engine = open_engine(out, config)
    cited_anywhere = False
    for method in QUERY_METHODS:
        started = time.perf_counter()
        requests = [{"question": q["question"], "method": method, "doc": pdf.name} for q in asked]
        results = engine.answer_many(requests)
        seconds = (time.perf_counter() - started) / len(results)
        generated = sum(r["answer_type"] == "generated" for r in results)
        cited = 0
        for r in results:
            sent = [{k: e[k] for k in ("doc", "page", "sec_id", "para_idx")} for e in r["evidence"]]
            if r["citations"] and all(c in sent for c in r["citations"]):
                cited += 1
        fell_back = sum(bool(fallbacks(r["trace"])) for r in results)
        prompt = sum(r["usage"]["prompt_tokens"] for r in results)
        completion = sum(r["usage"]["completion_tokens"] for r in results)
        cited_anywhere = cited_anywhere or cited > 0
        print(
            f"{method}: {len(results)} questions, {generated} generated, {cited} with checked "
            f"citations, {fell_back} with fallbacks, {prompt} prompt + {completion} completion "
            f"tokens, {seconds:.2f} s/question"
        )
        first = results[0]
        print(f"    answer: {str(first['answer'])[:200]!r}; gold: {asked[0].get('answers')}")
        for f in fallbacks(first["trace"])[:2]:
            print(f"    fallback: {f}")
    return cited_anywhere


if __name__ == "__main__":
    sys.exit(main())
