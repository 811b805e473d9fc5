"""benchmarks/search_index_build.py times the search indexes the index job builds: on a small
table of real passages it builds both (full-text and vector) and prints their timings."""

from __future__ import annotations

import re

from tests.conftest import SHARED_DATA, missing_shared_data


def test_the_benchmark_builds_both_search_indexes(capsys) -> None:
    from benchmarks.search_index_build import main

    if not (SHARED_DATA / "multihop" / "musique" / "corpus.jsonl").is_file():
        missing_shared_data("the MuSiQue corpus is not there")
    assert main(["--rows", "1500"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("1500 "))
    assert re.search(r"built nodes\.text:fts, nodes\.vector:ivf_hnsw_sq$", row), row
    seconds = [float(x) for x in row.split()[1:5]]
    assert all(s >= 0 for s in seconds) and seconds[2] > 0  # the index build took time
