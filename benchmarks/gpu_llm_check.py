"""The vLLM side of the index job's model work on a GPU machine (needs ``pip install ".[gpu]"``,
vllm, and a local model directory: nothing is downloaded).

    python -m benchmarks.gpu_llm_check --model /models/Qwen2.5-VL-3B-Instruct \
        [--pdf ../shared/data/mmlongbench/documents/2303.05039v2.pdf] [--max-model-len 8192]

Runs ``pipelines.model_requests`` with ``--models vllm`` on one PDF: the figure and table
descriptions (page crops through the vision model) and the LLM entities (vLLM guided JSON), as
``ray.data.llm`` vLLM processors on the GPU. Prints requests, answers that were usable, retries,
seconds and requests/s per task, and two sample answers. Exits 1 if no answer was usable.
Prepared on the CPU machine, not run there (no GPU, no vllm).
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
    args = parser.parse_args(argv)
    import pyarrow as pa
    import ray

    from operators.config import BookindexConfig
    from pipelines.model_requests import (
        DESCRIPTIONS,
        ENTITIES,
        description_requests,
        entity_requests,
        run_requests,
    )
    from pipelines.structure_stage import index_documents, probe_document

    config = BookindexConfig()
    config.models.backend = "vllm"
    config.models.vllm_model_path = args.model
    config.models.vllm_options = {"max_model_len": args.max_model_len, "max_tokens": 512}
    pdf = Path(args.pdf)
    probed = probe_document({"doc_id": pdf.name, "uri": str(pdf), "size": pdf.stat().st_size})
    probed.update(start=0, stop=probed["n_pages"])
    document = index_documents(pa.Table.from_pylist([probed]), True).to_pylist()[0]
    ray.init(include_dashboard=False)
    usable = 0
    for task, make in ((DESCRIPTIONS, description_requests), (ENTITIES, entity_requests)):
        requests = make(document)
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
    return 0 if usable else 1


if __name__ == "__main__":
    sys.exit(main())
