"""benchmarks/scaling_model.py, the arithmetic of docs/scaling.md, on one case computed by hand."""

from __future__ import annotations

import json

import pytest

from benchmarks.scaling_model import (
    Inputs,
    break_even_gpu_rate,
    estimate,
    fit_resolver,
    from_stats,
    gpu_rate_ceiling,
    main,
    resolver_saturation_pages,
)

HAND = Inputs(
    parse_core_s=0.01,
    ocr_core_s=5.0,
    nodes_per_page=20.0,
    enrich_core_s=0.01,
    embed_share=0.75,
    entities_per_node=0.5,
    canonical_share=0.5,
    resolve_a=1e-4,
    resolve_b=1e-10,
    driver_core_s=0.008,
)


def test_one_cluster_computed_by_hand() -> None:
    # 3M pages on 16 c6i.8xlarge (512 vCPUs), 10 % of the pages OCR'd, enrich on the CPUs
    e = estimate(HAND, 3_000_000, cpu_nodes=16, gpu_nodes=0, ocr_fraction=0.1)
    assert e.nodes == 60_000_000 and e.entities == 30_000_000
    assert e.parse_s == pytest.approx(2988.28125)  # 3e6 · (0.01 + 0.1 · 5) / 512
    assert e.enrich_s == pytest.approx(1171.875)  # 6e7 · 0.01 / 512
    assert e.resolve_s == pytest.approx(93_000)  # 1e-4 · 3e7 + 1e-10 · 9e14
    assert e.driver_s == pytest.approx(60_000)  # 6e7 · 0.008 / 8 head vCPUs
    assert e.total_s == pytest.approx(157_160.15625)
    # (2988.28 + 1171.88) s at 16 · 1.36 + 0.384 $/h, then 153,000 s at 1.36 + 0.384 $/h
    assert e.cost == pytest.approx(25.5896 + 74.12, abs=1e-3)
    assert e.bottleneck == "resolve"


def test_gpu_enrich_and_its_break_even() -> None:
    e = estimate(HAND, 3_000_000, cpu_nodes=16, gpu_nodes=4, ocr_fraction=0.0, gpu_rate=1000)
    assert e.parse_s == pytest.approx(3e6 * 0.01 / (16 * 32 + 4 * 8))  # GPU nodes' CPUs parse
    assert e.enrich_s == pytest.approx(15_000)  # 6e7 nodes / (4 · 1000 nodes/s)
    # one CPU node enriches 32 / 0.01 = 3200 nodes/s for 1.36 $/h; a GPU node costs 1.212 $/h
    assert break_even_gpu_rate(HAND) == pytest.approx(3200 * 1.212 / 1.36)
    # spaCy's quarter of 0.01 CPU-s a node, on 8 vCPUs (8 workers a GPU), or on one worker's core
    assert gpu_rate_ceiling(HAND) == pytest.approx(8 / 0.0025)
    assert gpu_rate_ceiling(HAND, workers=1) == pytest.approx(1 / 0.0025)
    with pytest.raises(ValueError):
        estimate(HAND, 1000, cpu_nodes=1, gpu_nodes=0, gpu_rate=1000)


def test_the_resolver_saturates_where_it_takes_as_long_as_the_cluster() -> None:
    # one CPU node: parse + enrich 0.21 s a page / 32; resolve 1e-3 s a page + 1e-8 s · pages²
    pages = resolver_saturation_pages(HAND, cpu_nodes=1)
    assert pages == pytest.approx((0.21 / 32 - 1e-3) / 1e-8, rel=1e-6)
    # 16 nodes: the actor's fixed cost a page (1e-3 s) already exceeds the cluster's (4.1e-4 s)
    assert resolver_saturation_pages(HAND, cpu_nodes=16) == 0


def test_inputs_from_an_index_jobs_stats(tmp_path, capsys) -> None:
    stats = {
        "summary": {"pages": 100, "nodes": 2000},
        "stages": {
            "embed": {"cpu_s": 15.0},
            "entities": {"cpu_s": 5.0},
            "resolve": {"rows_in": 1000, "rows_out": 400, "wall_s": 3.0},
            "write_nodes": {"wall_s": 1.0},
            "write_entities": {"wall_s": 0.5},
            "search_indexes": {"wall_s": 2.5},
        },
    }
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(stats), encoding="utf-8")
    assert from_stats(path) == pytest.approx(
        {
            "nodes_per_page": 20.0,
            "enrich_core_s": 0.01,
            "embed_share": 0.75,
            "entities_per_node": 0.5,
            "canonical_share": 0.4,
            "driver_wall_s_per_node": 0.002,
        }
    )
    # the command takes the shares, not the stage seconds (wall time inside the calls)
    assert main(["--stats", str(path), "--cpu-nodes", "1", "--gpu-nodes", "0"]) == 0
    inputs = capsys.readouterr().out.splitlines()[1]
    assert "nodes_per_page 20," in inputs and "entities_per_node 0.5," in inputs
    assert f"enrich_core_s {Inputs().enrich_core_s:.4g}," in inputs


def test_the_command_prints_the_table(capsys) -> None:
    assert main(["--cpu-nodes", "16", "--gpu-nodes", "0", "--ocr-fraction", "0"]) == 0
    out = capsys.readouterr().out
    assert "3,000,000 pages" in out and "break-even" in out
    with pytest.raises(SystemExit):
        main(["--set", "no_such_input=1"])


def test_the_resolver_fit_recovers_a_and_b() -> None:
    # T(n) = 1e-4·n + 1e-10·n²: 1.01 s at 10k, 11 s at 100k, 39 s at 300k
    a, b = fit_resolver([(10_000, 1.01), (100_000, 11.0), (300_000, 39.0)])
    assert a == pytest.approx(1e-4) and b == pytest.approx(1e-10)
