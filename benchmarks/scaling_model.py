"""Time and cost of indexing a corpus on the cluster of ``cluster.yaml``, by arithmetic from the
per-stage rates measured on one machine (docs/scaling.md). Nothing is timed here.

    python -m benchmarks.scaling_model [--books 10000] [--pages-per-book 300]
        [--cpu-nodes 1,4,16] [--gpu-nodes 0,4] [--ocr-fraction 0.001,1]
        [--gpu-rate 500,2000] [--stats INDEX/stats.json] [--set NAME=VALUE ...]
        [--resolver-points N:CPU_S,...]
    python -m benchmarks.scaling_model --index INDEX    # nodes and entities a page, per folder

The job runs in phases, one after the other (pipelines/index_pipeline.py): the parse phase
(probe, parse, OCR, section tree, layout graph: tasks on every CPU of the cluster), the enrich
phase (its input is materialised first; actors on every CPU, or with ``models.embed_device=cuda``
on the GPUs only), the corpus entity resolution (one actor, one CPU, whatever the cluster), then
the driver's commits, entity tables and search indexes (on the head; only the search indexes
are counted: the rest is not measured). So

    parse   = pages · (parse_core_s + ocr_fraction · ocr_core_s) / (cluster vCPUs · vcpu_eff)
    enrich  = nodes · enrich_core_s / (cluster vCPUs · vcpu_eff)     (CPU path)
            = nodes / (gpu_nodes · gpu_rate)                          (GPU path)
    resolve = a · E + b · E²   (E = the documents' entities after resolution within each)
    driver  = nodes · driver_core_s / (head vCPUs · vcpu_eff)
    time    = parse + enrich + resolve + driver

with ``nodes = pages · nodes_per_page`` and ``E = nodes · entities_per_node``. Cost: every node
and the head for the parse and enrich phases; then one CPU worker (the actor's, cluster.yaml's
``min_workers: 1``) and the head, the other workers being released by the autoscaler after
``idle_timeout_minutes`` (10) idle, which is not counted. ``--stats`` reads an index job's
``stats.json``, prints its figures and takes nodes per page, the embedding's share of enrich,
entities per node and the canonical share from it (not its stage seconds: wall time inside the
calls, which a busy machine stretches); ``--set`` overrides any input by name;
``--resolver-points`` fits a and b to other (entities, CPU seconds) points.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

VECTOR_BYTES = 384 * 4  # one all-MiniLM-L6-v2 name vector, float32
IVF_COPIES = 3  # VectorIndex keeps each vector once and once more per spill (2)


def fit_resolver(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of ``T(n) = a·n + b·n²`` from (entities, CPU seconds) points: a least-squares
    line through the cost an entity, T/n = a + b·n (through both points when there are two)."""
    xs = [n for n, _ in points]
    ys = [t / n for n, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return my - b * mx, b


# The corpus actor's own code (CorpusEntities) resolving er_scaling's synthetic names, one CPU:
# (entities, CPU seconds), printed by er_selection_phase (first_cpu_s). Measured here.
RESOLVER_POINTS = ((10_000, 2.5), (100_000, 47.1), (300_000, 309.5))
RESOLVE_A, RESOLVE_B = fit_resolver(list(RESOLVER_POINTS))


# LanceDB's search indexes (full text and IVF-HNSW-SQ) over a node table, CPU seconds a row at
# the largest size search_index_build measured (the cost a row still grows with the rows).
DRIVER_CORE_S = 153.5 / 300_000


@dataclass(frozen=True)
class Inputs:
    """Every input of the arithmetic; docs/scaling.md traces each to the command that printed it
    (or says it is an assumption)."""

    # measured here (2 cores, no GPU); docs/scaling.md gives each one's command
    parse_core_s: float = 2 / 159.9  # core-s a page: the index job's 159.9 pages/s on 2 workers
    ocr_core_s: float = 1 / 0.088  # CPU-s an OCR'd page: ocr_quality's pages per CPU-second
    nodes_per_page: float = 8.83  # the 24 HiPS books: 71,751 nodes, 8,128 pages
    enrich_core_s: float = 54.5 / 2676  # CPU-s a node: enrich_throughput --corpus hips
    embed_share: float = 66.762 / (66.762 + 33.844)  # of enrich, the embedding's (--stats)
    entities_per_node: float = 1704 / 2676  # the entities the corpus actor gets, a node
    canonical_share: float = 1.0  # of those, the ones that stay entities (1: upper bound)
    resolve_a: float = RESOLVE_A  # CPU-s an entity: the corpus actor's fixed part
    resolve_b: float = RESOLVE_B  # CPU-s an entity per stored entity: its growing part
    driver_core_s: float = DRIVER_CORE_S  # CPU-s a node: the search indexes, on the head
    # assumptions
    vcpu_eff: float = 1.0  # one cloud vCPU does the work of one core of the measuring machine
    cpu_vcpus: int = 32  # c6i.8xlarge
    gpu_vcpus: int = 8  # g5.2xlarge (1 A10G)
    cpu_price: float = 1.36  # $/h c6i.8xlarge, on-demand us-west-2 (list price as known; check)
    gpu_price: float = 1.212  # $/h g5.2xlarge
    head_price: float = 0.384  # $/h m6i.2xlarge
    cpu_node_gib: float = 64  # c6i.8xlarge memory: the corpus actor's node
    head_vcpus: int = 8  # m6i.2xlarge
    head_gib: float = 32  # m6i.2xlarge memory: the driver


@dataclass(frozen=True)
class Estimate:
    pages: float
    nodes: float
    entities: float
    parse_s: float
    enrich_s: float
    resolve_s: float
    driver_s: float
    cost: float

    @property
    def total_s(self) -> float:
        return self.parse_s + self.enrich_s + self.resolve_s + self.driver_s

    @property
    def bottleneck(self) -> str:
        phases = {
            "parse": self.parse_s,
            "enrich": self.enrich_s,
            "resolve": self.resolve_s,
            "driver": self.driver_s,
        }
        return max(phases, key=phases.get)


def resolve_seconds(entities: float, inp: Inputs) -> float:
    """One actor resolving ``entities`` in turn: a fixed cost each, and a search over the
    inverted file's probed share of what is already stored (so b·E² in all)."""
    return inp.resolve_a * entities + inp.resolve_b * entities**2


def estimate(
    inp: Inputs,
    pages: float,
    cpu_nodes: int,
    gpu_nodes: int = 0,
    ocr_fraction: float = 0.0,
    gpu_rate: float | None = None,
) -> Estimate:
    """The job's phases on ``cpu_nodes`` CPU and ``gpu_nodes`` GPU workers; ``gpu_rate``
    (nodes/s of one GPU node's enrich) puts enrich on the GPUs, None keeps it on every CPU."""
    cores = (cpu_nodes * inp.cpu_vcpus + gpu_nodes * inp.gpu_vcpus) * inp.vcpu_eff
    nodes = pages * inp.nodes_per_page
    entities = nodes * inp.entities_per_node
    parse_s = pages * (inp.parse_core_s + ocr_fraction * inp.ocr_core_s) / cores
    if gpu_rate is None:
        enrich_s = nodes * inp.enrich_core_s / cores
    else:
        if gpu_nodes < 1:
            raise ValueError("a GPU enrich rate needs GPU nodes")
        enrich_s = nodes / (gpu_nodes * gpu_rate)
    resolve_s = resolve_seconds(entities, inp)
    driver_s = nodes * inp.driver_core_s / (inp.head_vcpus * inp.vcpu_eff)
    cluster_h = (cpu_nodes * inp.cpu_price + gpu_nodes * inp.gpu_price + inp.head_price) / 3600
    tail_h = (inp.cpu_price + inp.head_price) / 3600
    cost = (parse_s + enrich_s) * cluster_h + (resolve_s + driver_s) * tail_h
    return Estimate(pages, nodes, entities, parse_s, enrich_s, resolve_s, driver_s, cost)


def break_even_gpu_rate(inp: Inputs) -> float:
    """Nodes/s a GPU node's enrich must reach to cost as little a node as a CPU node's."""
    cpu_rate = inp.cpu_vcpus * inp.vcpu_eff / inp.enrich_core_s  # nodes/s of one CPU node
    return cpu_rate * inp.gpu_price / inp.cpu_price


def gpu_rate_ceiling(inp: Inputs, workers: int | None = None) -> float:
    """Nodes/s above which a GPU node cannot go while the entities (spaCy) stay on its CPUs:
    ``workers`` enrich workers on the node (one a GPU by default, ``index.model_gpus`` 1; up to
    its vCPUs with a fractional share), each with one core for the non-embedding part."""
    cores = min(workers or inp.gpu_vcpus, inp.gpu_vcpus) * inp.vcpu_eff
    return cores / (inp.enrich_core_s * (1 - inp.embed_share))


def resolver_saturation_pages(inp: Inputs, cpu_nodes: int, ocr_fraction: float = 0.0) -> float:
    """Pages at which the one resolver actor takes as long as the parse and enrich phases on
    ``cpu_nodes`` CPU nodes together: with k entities a page and c core-seconds a page, where
    a·k·p + b·k²·p² = c·p / cores; 0 when the actor's fixed cost a page (a·k) is already
    above the cluster's (c / cores)."""
    cores = cpu_nodes * inp.cpu_vcpus * inp.vcpu_eff
    k = inp.nodes_per_page * inp.entities_per_node
    c = inp.parse_core_s + ocr_fraction * inp.ocr_core_s + inp.nodes_per_page * inp.enrich_core_s
    return max(0.0, (c / cores - inp.resolve_a * k) / (inp.resolve_b * k**2))


def memory_limits(inp: Inputs) -> tuple[float, float]:
    """Entities resolved (E) at which the corpus actor's canonical vectors fill its CPU node,
    and at which the driver's document rows, which carry every entity's vector to the
    resolution, fill the head. Vectors only: a lower bound of the memory."""
    gib = 1024**3
    actor = inp.cpu_node_gib * gib / (VECTOR_BYTES * IVF_COPIES * inp.canonical_share)
    driver = inp.head_gib * gib / VECTOR_BYTES
    return actor, driver


# What --stats takes from a job: shares, which a busy machine stretches alike on both sides. Its
# stage seconds are wall time inside the calls: printed, not taken (enrich_core_s comes from
# enrich_throughput's CPU seconds; the driver's seconds on a small index are fixed costs).
FROM_STATS = ("nodes_per_page", "embed_share", "entities_per_node", "canonical_share")


def from_stats(path: str | Path) -> dict[str, float]:
    """Figures of one index job (enrich on), from its ``stats.json``."""
    stats = json.loads(Path(path).read_text(encoding="utf-8"))
    summary, stages = stats["summary"], stats["stages"]
    pages, nodes = summary["pages"], summary["nodes"]
    embed, entities = stages["embed"]["cpu_s"], stages["entities"]["cpu_s"]
    driver = sum(stages[s]["wall_s"] for s in ("write_nodes", "write_entities", "search_indexes"))
    return {
        "nodes_per_page": nodes / pages,
        "enrich_core_s": (embed + entities) / nodes,
        "embed_share": embed / (embed + entities),
        "entities_per_node": stages["resolve"]["rows_in"] / nodes,
        "canonical_share": stages["resolve"]["rows_out"] / stages["resolve"]["rows_in"],
        "driver_wall_s_per_node": driver / nodes,
    }


def index_figures(index_dir: str | Path) -> list[tuple[str, int, int, int, int]]:
    """Per folder of the indexed PDFs (its parent's name and its own): (folder, documents, pages, nodes, entities), entities
    being the distinct corpus entities each document mentions, summed over its documents (0
    without enrich). Read from the index's tables."""
    from bookindex.pipelines.store import lance_store
    from bookindex.pipelines.store.schemas import DOCUMENTS, MENTIONS

    docs = lance_store.read_table(index_dir, DOCUMENTS, ["doc_id", "uri", "n_pages", "n_nodes"])
    per_doc: dict[str, set] = {}
    if lance_store.exists(index_dir, MENTIONS):
        mentions = lance_store.read_table(index_dir, MENTIONS, ["doc_id", "entity_id"])
        for doc, entity in zip(*mentions.to_pydict().values(), strict=True):
            per_doc.setdefault(doc, set()).add(entity)
    folders: dict[str, list[int]] = {}
    for row in docs.to_pylist():
        folder = Path(row["uri"]).parent
        counts = folders.setdefault(f"{folder.parent.name}/{folder.name}", [0, 0, 0, 0])
        counts[0] += 1
        counts[1] += row["n_pages"] or 0
        counts[2] += row["n_nodes"] or 0
        counts[3] += len(per_doc.get(row["doc_id"], ()))
    return [(folder, *counts) for folder, counts in sorted(folders.items())]


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 360 else f"{seconds / 60:.1f} min"


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--books", type=int, default=10_000)
    ap.add_argument("--pages-per-book", type=int, default=300)
    ap.add_argument("--cpu-nodes", default="1,4,16", help="cluster.yaml allows 1 to 16")
    ap.add_argument("--gpu-nodes", default="0,4", help="cluster.yaml allows 0 to 4")
    ap.add_argument("--ocr-fraction", default="0.001,1", help="share of pages to OCR")
    ap.add_argument("--gpu-rate", default="500,2000", help="nodes/s of one GPU node's enrich")
    ap.add_argument("--stats", default=None, help="an index job's stats.json (enrich on)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--resolver-points", default=None, metavar="N:CPU_S,...")
    ap.add_argument("--index", default=None, help="print an index's nodes and entities a page")
    args = ap.parse_args(argv)
    if args.index:
        print(
            f"{'folder':28s} {'docs':>5s} {'pages':>7s} {'nodes':>8s} {'nodes/page':>10s} "
            f"{'entities/node':>13s}"
        )
        for folder, n_docs, pages, nodes, entities in index_figures(args.index):
            print(
                f"{folder[:28]:28s} {n_docs:5d} {pages:7d} {nodes:8d} {nodes / max(pages, 1):10.2f} "
                f"{entities / max(nodes, 1):13.3f}"
            )
        return 0

    inp = Inputs()
    if args.stats:
        measured = from_stats(args.stats)
        print(f"from {args.stats}: " + ", ".join(f"{k} {v:.4g}" for k, v in measured.items()))
        inp = replace(inp, **{k: measured[k] for k in FROM_STATS})
    if args.resolver_points:
        points = [tuple(map(float, p.split(":"))) for p in args.resolver_points.split(",")]
        a, b = fit_resolver(points)
        inp = replace(inp, resolve_a=a, resolve_b=b)
    kinds = {f.name: f.type for f in fields(Inputs)}
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in kinds:
            ap.error(f"--set: no input {name!r}")
        inp = replace(inp, **{name: int(value) if kinds[name] == "int" else float(value)})
    print("inputs: " + ", ".join(f"{f.name} {getattr(inp, f.name):.4g}" for f in fields(Inputs)))

    pages = args.books * args.pages_per_book
    base = estimate(inp, pages, 1)
    print(
        f"\ncorpus: {args.books:,} books x {args.pages_per_book} pages = {pages:,} pages, "
        f"{base.nodes:,.0f} nodes, {base.entities:,.0f} entities for the corpus resolver"
    )
    print("\nCPU path (enrich on every vCPU):")
    print(
        f"{'CPU':>4s} {'GPU':>4s} {'OCR':>6s}  {'parse':>9s} {'enrich':>9s} {'resolve':>9s} "
        f"{'driver':>9s} {'total':>9s} {'cost $':>9s}  bottleneck"
    )
    for ocr in _floats(args.ocr_fraction):
        for m in [int(x) for x in _floats(args.gpu_nodes)]:
            for n in [int(x) for x in _floats(args.cpu_nodes)]:
                e = estimate(inp, pages, n, m, ocr)
                print(
                    f"{n:4d} {m:4d} {ocr:6.1%}  {_hours(e.parse_s):>9s} {_hours(e.enrich_s):>9s} "
                    f"{_hours(e.resolve_s):>9s} {_hours(e.driver_s):>9s} "
                    f"{_hours(e.total_s):>9s} {e.cost:9,.0f}  {e.bottleneck}"
                )
    even, ceiling = break_even_gpu_rate(inp), gpu_rate_ceiling(inp)
    cpu_node_rate = inp.cpu_vcpus * inp.vcpu_eff / inp.enrich_core_s
    print(
        f"\nGPU path (enrich on the GPU nodes only; the GPU rate is NOT measured): one CPU node "
        f"enriches {cpu_node_rate:,.0f} nodes/s; a GPU node costs less a node above "
        f"{even:,.0f} nodes/s (break-even); with spaCy on its CPUs it cannot pass "
        f"{gpu_rate_ceiling(inp, 1):,.0f} nodes/s with one enrich worker (index.model_gpus 1), "
        f"{ceiling:,.0f} with {inp.gpu_vcpus} (index.model_gpus {1 / inp.gpu_vcpus:g})"
    )
    gpus = max(int(x) for x in _floats(args.gpu_nodes))
    cpus = max(int(x) for x in _floats(args.cpu_nodes))
    if gpus:
        print(f"{'rate/s':>7s}  enrich on {gpus} GPU nodes ({cpus} CPU nodes parse): total, cost")
        for rate in sorted({*_floats(args.gpu_rate), round(even)}):
            e = estimate(inp, pages, cpus, gpus, _floats(args.ocr_fraction)[0], rate)
            above = "  (above the ceiling: not reachable as built)" if rate > ceiling else ""
            print(
                f"{rate:7,.0f}  enrich {_hours(e.enrich_s)}, total {_hours(e.total_s)}, "
                f"${e.cost:,.0f}{above}"
            )
    actor, driver = memory_limits(inp)
    ocr = _floats(args.ocr_fraction)[0]
    print(
        f"\ncorpus resolver (one actor, one CPU), OCR {ocr:.1%}: it takes as long as parse + enrich"
    )
    for n in [int(x) for x in _floats(args.cpu_nodes)]:
        pages_at = resolver_saturation_pages(inp, n, ocr)
        at = (
            f"at {pages_at:,.0f} pages ({pages_at / args.pages_per_book:,.0f} books, "
            f"{pages_at * inp.nodes_per_page * inp.entities_per_node:,.0f} entities)"
            if pages_at > 0
            else "from the first page (its cost an entity is above the cluster's)"
        )
        print(f"  on {n} CPU nodes {at}")
    print(
        f"  memory: its canonical vectors fill a {inp.cpu_node_gib:.0f} GiB node at "
        f"{actor:,.0f} entities resolved; the driver's document rows (every entity's vector) "
        f"fill the {inp.head_gib:.0f} GiB head at {driver:,.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
