"""benchmarks/gpu_check.py's end-to-end ZoomRAG timing, CPU side (the GPU side needs CuPy and a
device; here it is reported as skipped): on the real paper's index it times every batch size and
returns each question's ranking, as it will beside the GPU's."""

from __future__ import annotations

from benchmarks.gpu_check import zoom_end_to_end


def test_zoom_end_to_end_runs_the_cpu_twin_and_skips_a_missing_gpu(engine, capsys):
    questions = [
        "What datasets are used in the study?",
        "How are the Receptiviti scores computed?",
        "Which baselines are compared?",
        "What is the size of the Amazon-beauty dataset?",
    ]
    results = zoom_end_to_end(lambda d: engine if d == "cpu" else None, questions, [1, 2, 4])
    assert list(results) == ["cpu"]
    cpu = results["cpu"]
    assert set(cpu["s_per_query"]) == {1, 2, 4} and all(s > 0 for s in cpu["s_per_query"].values())
    assert len(cpu["ranked"]) == 4 and all(ranked for ranked in cpu["ranked"])
    # one PDF: every question ranks it; the batch does not change a question's answer
    single = engine.retrieval.retrieve(questions[:1], "zoom", 10)[0]
    assert [h.id for h in single] == cpu["ranked"][0]
