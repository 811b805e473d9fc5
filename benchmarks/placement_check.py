"""Where the index job's stages run on a multi-node cluster: GPU-asking stages only on GPU nodes.

    python -m benchmarks.placement_check [--docs 4]

Starts a local two-node Ray cluster (``ray.cluster_utils.Cluster``): a head that declares no
GPU (1 CPU) and one worker node that declares ``num_gpus=1`` (Ray only assigns the declared
GPU; no device is needed) with 2 CPUs: one for the GPU stage's actor, one for CPU tasks. Runs the job's structure stage (plain Ray tasks, no GPU) and
the enrich stage as a model stage asking for a GPU (``index.model_gpus=1``, the offline models)
over ``--docs`` shared PDFs, and prints the node each stage ran on per document (the rows'
``stage_nodes``). Exits 1 when a GPU-asking stage ran off the GPU node, or when the CPU stage
did not use both nodes.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=8)
    args = parser.parse_args(argv)
    import ray
    from ray.cluster_utils import Cluster

    from bookindex.operators.config import BookindexConfig
    from bookindex.pipelines.enrich import EnrichStage, enrich_args
    from bookindex.pipelines.rows import from_json
    from bookindex.pipelines.structure_stage import index_documents, probe_document

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "num_gpus": 0, "object_store_memory": 200 * 2**20},
    )
    gpu_node = cluster.add_node(num_cpus=2, num_gpus=1, object_store_memory=200 * 2**20)
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes()
        head_id = cluster.head_node.node_id
        gpu_id = gpu_node.node_id
        pdfs = sorted((SHARED / "pdf_fixtures" / "pypdf").glob("*.pdf"))[: args.docs]
        rows = [{"doc_id": p.name, "uri": str(p), "size": p.stat().st_size} for p in pdfs]
        probed = ray.data.from_items(rows, override_num_blocks=len(rows)).map(probe_document)
        probed = [dict(r, start=0, stop=r["n_pages"]) for r in probed.take_all()]
        config = BookindexConfig()
        config.index.model_gpus = 1.0
        documents = ray.data.from_items(probed, override_num_blocks=len(probed)).map_batches(
            index_documents,
            fn_kwargs={"use_outline": True},
            batch_size=None,
            batch_format="pyarrow",
        )
        enriched = documents.map_batches(EnrichStage, **enrich_args(config, 2, 1, None))
        out = enriched.select_columns(["doc_id", "stage_nodes"]).take_all()
    finally:
        ray.shutdown()
        cluster.shutdown()
    names = {head_id: "head (no GPU)", gpu_id: "worker (GPU 1)"}
    placed: dict[str, Counter] = {"assemble": Counter(), "enrich": Counter()}
    for row in out:
        nodes = from_json(row["stage_nodes"], {})
        for stage, counter in placed.items():
            counter[names.get(nodes.get(stage), nodes.get(stage))] += 1
        print(
            f"{row['doc_id'][:40]:<42}assemble: {names.get(nodes.get('assemble'))}"
            f"  enrich: {names.get(nodes.get('enrich'))}"
        )
    ok = set(placed["enrich"]) == {"worker (GPU 1)"} and len(placed["assemble"]) == 2
    print(f"enrich (asks 1 GPU) on: {dict(placed['enrich'])}")
    print(f"assemble (CPU tasks) on: {dict(placed['assemble'])}")
    print("placement ok" if ok else "placement WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
