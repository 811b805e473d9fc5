"""Start-up of the enrich stage's model process, before and after, side by side in one run.

    python -m benchmarks.enrich_startup [--start a380abd] [--reps 4]

Each enrich worker starts a child process (pipelines/model_host.py) that imports
pipelines/enrich_worker.py, builds ``EnrichWorker`` with the default configuration and runs its
``warm_up`` (the embedder's session and spaCy's pipeline loaded); every worker of a job pays it
once, all workers at once. This runs that in a fresh interpreter (one thread, as Ray gives each
worker), alternately from the source tree of ``--start`` (``git archive``) and from this tree,
``--reps`` times each, and prints per tree the CPU seconds (user + system of the process) and
the wall seconds of each start, and whether torch was imported.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.enrich_throughput import START, _tree

_CODE = """
import os, sys, importlib
prefix = "bookindex." if os.path.isfile("bookindex/__init__.py") else ""  # benchmarks/trees.py
BookindexConfig = importlib.import_module(prefix + "operators.config").BookindexConfig
EnrichWorker = importlib.import_module(prefix + "pipelines.enrich_worker").EnrichWorker
config = BookindexConfig()
EnrichWorker(config.models.to_dict(), config.resolver.model_dump(), None, False, "n").warm_up()
print("torch" in sys.modules)
"""


def start_once(tree: Path) -> tuple[float, float, bool]:
    """(CPU s, wall s, torch imported) of one model-process start from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", _CODE], cwd=tree, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"start from {tree} failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, wall, done.stdout.strip().splitlines()[-1] == "True"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--start", default=START, help="the commit whose start-up is 'start'")
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args(argv)
    print(f"start={args.start} load={' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="enrich-startup-") as scratch:
        trees = {
            "start": _tree("start", {"start": args.start}, Path(scratch)),
            "after": _tree("here", {}, Path(scratch)),
        }
        found: dict[str, list[tuple[float, float, bool]]] = {name: [] for name in trees}
        for _ in range(args.reps):
            for name, tree in trees.items():
                found[name].append(start_once(tree))
    for name, runs in found.items():
        cpus = " ".join(f"{c:.2f}" for c, _, _ in runs)
        walls = " ".join(f"{w:.2f}" for _, w, _ in runs)
        print(
            f"{name:<6} CPU s {cpus} (min {min(c for c, _, _ in runs):.2f})  wall s {walls} "
            f"(min {min(w for _, w, _ in runs):.2f})  torch imported: {runs[0][2]}"
        )
    print(f"load at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
