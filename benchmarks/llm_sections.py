"""Heading F1 on the HiPS books: the base section filter alone vs. refined by a generative model.

Run from the repo root::

    python -m benchmarks.llm_sections [--model-config model.json] [--config FILE]
        [--set models.FIELD=VALUE] [--limit N] [--use-outline] [--batch-size 40] [--json OUT]

The model is the configuration's models section (``operators.config``): ``--model-config`` a
JSON file of its fields, ``--config`` a configuration file, ``--set`` single fields;
``BOOKINDEX_*`` environment variables fill the rest. Without a generative backend
(``openai`` or ``vllm``) configured, it prints one line saying so and exits 0.

Each book is parsed once; the base filter (layout-only by default, the outline filter with
``--use-outline``) and ``LLMSectionFilter`` over the same base run on copies of its blocks.
Scores are those of ``operators.eval.heading_gold`` (fuzzy title, page within ±1, one-to-one);
the table shows micro P / R / F1, macro F1 and the lenient level accuracy (``lvl_map``) per
method, then per book, with the model calls, failed calls and tokens used.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import sys
import time
from pathlib import Path

from bookindex.operators.config import add_config_arguments, config_from_args
from bookindex.operators.eval.heading_gold import aggregate, iter_corpus, score, shared_data_dir

METHODS = ("base", "llm")


def _headings(blocks, meta: dict, use_outline: bool, section_filter) -> list[tuple]:
    from bookindex.operators.structure.assemble import structure_blocks

    blocks = copy.deepcopy(blocks)  # structure_blocks retypes the blocks in place
    _, headings = structure_blocks(
        blocks, meta["n_pages"], meta["outline"], use_outline, section_filter
    )
    return [(h.level, h.title, h.page) for h in headings]


def run_book(pdf: Path, gold: list, backend, use_outline: bool, batch_size: int) -> dict:
    """Both methods on one book: scores, seconds, and the refiner's calls and errors."""
    import pymupdf

    from bookindex.operators.parsing.parse import document_metadata, parse_pages
    from bookindex.operators.structure.llm_refiner import LLMSectionFilter
    from bookindex.operators.structure.outline_filter import choose_filter

    with pymupdf.open(str(pdf)) as doc:
        meta = document_metadata(doc)
        blocks = parse_pages(doc, 0, doc.page_count).blocks
    out: dict = {"name": pdf.stem, "n_gold": len(gold)}
    t0 = time.perf_counter()
    base = choose_filter(meta["outline"], use_outline)
    out["base"] = {
        "score": score(_headings(blocks, meta, use_outline, base), gold),
        "sec": time.perf_counter() - t0,
    }
    t0 = time.perf_counter()
    refiner = LLMSectionFilter(backend, choose_filter(meta["outline"], use_outline), batch_size)
    out["llm"] = {
        "score": score(_headings(blocks, meta, use_outline, refiner), gold),
        "sec": time.perf_counter() - t0,
        "calls": refiner.n_calls,
        "changed": refiner.n_changed,
        "errors": list(refiner.errors),
    }
    return out


def _f(x, width: int = 6) -> str:
    return "-".rjust(width) if x is None else f"{x:.3f}".rjust(width)


def format_table(books: list[dict], usage: dict) -> str:
    head = f"{'method':<8} {'P':>6} {'R':>6} {'F1':>6} {'macroF1':>7} {'lvl_map':>7} {'sec':>7}"
    lines = [head, "-" * len(head)]
    for method in METHODS:
        a = aggregate([b[method]["score"] for b in books])
        sec = sum(b[method]["sec"] for b in books)
        lines.append(
            f"{method:<8} {_f(a['precision'])} {_f(a['recall'])} {_f(a['f1'])} "
            f"{_f(a['macro_f1'], 7)} {_f(a['level_acc_map'], 7)} {sec:7.1f}"
        )
    lines += ["", f"{'book':<44} {'F1 base':>7} {'F1 llm':>7} {'calls':>5} {'failed':>6}"]
    for b in books:
        lines.append(
            f"{b['name'][:44]:<44} {_f(b['base']['score']['f1'], 7)} "
            f"{_f(b['llm']['score']['f1'], 7)} {b['llm']['calls']:>5} {len(b['llm']['errors']):>6}"
        )
    if usage:
        lines += ["", "model usage: " + ", ".join(f"{k}={v}" for k, v in usage.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.llm_sections", description=__doc__)
    add_config_arguments(ap)
    ap.add_argument("--model-config", default=None, help="a JSON file of models fields")
    ap.add_argument("--limit", type=int, default=None, help="at most N books")
    ap.add_argument("--use-outline", action="store_true", help="base = outline filter")
    ap.add_argument("--batch-size", type=int, default=40, help="candidates per model call")
    ap.add_argument("--json", dest="json_out", default=None, help="write results JSON here")
    args = ap.parse_args(argv)

    from bookindex.operators.models import ModelError, load_backend

    models = {}
    if args.model_config:
        models = json.loads(Path(args.model_config).read_text(encoding="utf-8"))
    config = config_from_args(args, {"models": models}).models
    if not config.generative:
        print(
            f"no generative model configured (backend {config.backend!r}): pass --model-config with "
            "backend 'openai' or 'vllm' (or set BOOKINDEX_MODEL_BACKEND); nothing to compare"
        )
        return 0
    if not (shared_data_dir() / "hips" / "GT_TOCs").is_dir():
        ap.error(f"HiPS data not found under {shared_data_dir()} (set BOOKINDEX_SHARED_DATA)")
    try:
        backend = load_backend(config)
    except ModelError as e:
        print(f"model backend {config.backend!r} unavailable: {e}")
        return 1
    books = []
    for pdf, gold in iter_corpus("hips", args.limit):
        with contextlib.redirect_stdout(sys.stderr):
            book = run_book(pdf, gold, backend, args.use_outline, args.batch_size)
        books.append(book)
        print(
            f"{pdf.stem[:50]:<50} F1 base {book['base']['score']['f1']:.3f} "
            f"llm {book['llm']['score']['f1']:.3f} ({book['llm']['calls']} calls, "
            f"{len(book['llm']['errors'])} failed, {book['llm']['sec']:.0f}s)",
            file=sys.stderr,
            flush=True,
        )
    usage = dict(getattr(backend, "usage", {}) or {})
    print(
        f"base = {'outline' if args.use_outline else 'layout-only'} filter; model {config.model or config.vllm_model_path}"
    )
    print(format_table(books, usage))
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        result = {"config": config.to_dict(), "books": books, "usage": usage}
        Path(args.json_out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
