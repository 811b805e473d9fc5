"""Heading-tree accuracy: bookindex heading extraction vs. a pymupdf4llm baseline.

Run from the repo root::

    python -m benchmarks.tree_accuracy [--corpus hips,docugami,mmlongbench] [--limit N]
        [--methods M1,M2] [--workers N] [--json OUT] [--per-doc] [--save-pred]
        [--no-cache] [--p4llm-mode layout|legacy]

Methods (columns), all run on the same PDFs:

* ``bookindex+outline``: ``operators.structure.assemble.extract_headings(pdf, use_outline=True)``
* ``bookindex-outline``: ``operators.structure.assemble.extract_headings(pdf, use_outline=False)``
* ``pymupdf4llm``: ``pymupdf4llm.to_markdown(pdf, page_chunks=True)`` as a user gets it by
  default. In pymupdf4llm 2.0 that is the *layout* mode (``pymupdf.layout`` / the
  pymupdf-layout package is installed, so ``import pymupdf4llm`` calls ``use_layout(True)``):
  an ONNX layout model labels title / section-header boxes and levels come from their font
  sizes. ``--p4llm-mode legacy`` calls ``pymupdf4llm.use_layout(False)`` instead (the 0.x
  font-size ``IdentifyHeaders`` path). Headings are the markdown ATX lines (level = number of
  '#'), with bold/italic/code markers, HTML tags and footnote marks removed, and the page of
  the chunk they are in.
* ``outline``: the embedded outline (``doc.get_toc()``) used as a prediction. A reference on
  HiPS.

On docugami / mmlongbench the outline *is* the gold, so a method that reads it
(``bookindex+outline``, ``outline``) copies the answer: neither runs there unless named in
``--methods``, and when named its rows are printed apart from the others, labelled as reading
the gold, never in the table that compares methods.

Gold, normalisation, matching (fuzzy title, page within +-1, one-to-one greedy) and the
level accuracies are defined in :mod:`operators.eval.heading_gold`. Per corpus the table shows
micro-averaged P / R / F1 (tp, fp, fn summed over documents), the macro F1 over documents,
``level_acc`` (relative depth: level minus the smallest matched level, equal on both sides),
``lvl_map`` (the lenient variant: best order-preserving level mapping), and ``sec``: the summed per-document wall time of
the method (measured in the worker that ran it, so with ``--workers > 1`` or on a busy machine
it includes CPU contention).

Cross-validated protocol (``--cv``; the figure quoted from now on)::

    python -m benchmarks.tree_accuracy --cv [--folds 6] [--seed 0] [--p4llm cached|compute|skip]

Every labelled book (``hips`` + ``hips_extra``, 24 books) is scored by a learned section filter
trained on the other folds only (grouped by book; ``benchmarks.train_section_model``), outline
off and on, beside the rules (which were written against the 10 hips books) and, on the same
books, pymupdf4llm (cached; ``--p4llm cached`` uses only books already in the cache and then
prints every method again over exactly those books) and the PDF outline alone. Per fold and
pooled: P / R / F1, macro F1, level accuracy.

pymupdf4llm results are cached (key: sha256 of the PDF, pymupdf4llm version, mode) under
``$BOOKINDEX_CACHE_DIR`` or ``~/.cache/bookindex/tree_accuracy``; a cached result reports the
time measured when it was computed. ``--no-cache`` recomputes. bookindex methods are never
cached. If ``operators.structure.sections`` cannot be imported, the bookindex columns are skipped with a
warning. A method that raises on a document scores an empty prediction for it (and the error is
printed and kept in the JSON).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bookindex._pymupdf import allow_layout
from bookindex.operators.eval.heading_gold import (
    CORPORA,
    Heading,
    aggregate,
    hips_dir,
    iter_corpus,
    markdown_headings,
    outline_headings,
    score,
    shared_data_dir,
)

BOOKINDEX_METHODS = ("bookindex+outline", "bookindex-outline")
READS_OUTLINE = ("bookindex+outline", "outline")  # methods that read the PDF outline
OUTLINE_GOLD = ("docugami", "mmlongbench")  # corpora whose gold is the PDF outline
ALL_METHODS = (*BOOKINDEX_METHODS, "pymupdf4llm", "outline")
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "bookindex" / "tree_accuracy"

# --------------------------------------------------------------------------- methods

_P4LLM_MODE = "layout"


def _set_p4llm_mode(mode: str) -> None:
    global _P4LLM_MODE
    _P4LLM_MODE = mode


def _quiet_pymupdf() -> None:
    """Send MuPDF / pymupdf4llm messages to stderr so stdout holds only the tables."""
    import pymupdf

    pymupdf.set_messages(stream=sys.stderr)


def pymupdf4llm_headings(
    pdf_path: str, mode: str | None = None, pages: list[int] | None = None
) -> list[Heading]:
    """Baseline: markdown heading lines of ``pymupdf4llm.to_markdown(page_chunks=True)``
    (``pages``: 0-based pages to convert, default all)."""
    allow_layout()  # pymupdf4llm's default mode needs it (bookindex/_pymupdf.py)
    import pymupdf4llm

    mode = mode or _P4LLM_MODE
    pymupdf4llm.use_layout(mode == "layout")
    _quiet_pymupdf()
    with contextlib.redirect_stdout(sys.stderr):
        chunks = pymupdf4llm.to_markdown(str(pdf_path), page_chunks=True, pages=pages)
    out: list[Heading] = []
    for i, chunk in enumerate(chunks):
        meta = chunk.get("metadata") or {}
        fallback = pages[i] + 1 if pages else i + 1
        page = meta.get("page_number") or meta.get("page") or fallback  # layout / legacy keys
        for level, title in markdown_headings(chunk.get("text") or ""):
            out.append((level, title, int(page)))
    return out


def _bookindex(use_outline: bool) -> Callable[[str], list[Heading]]:
    def run(pdf_path: str) -> list[Heading]:
        from bookindex.operators.structure.assemble import extract_headings

        with contextlib.redirect_stdout(sys.stderr):
            return [
                (int(lv), str(t), int(pg)) for lv, t, pg in extract_headings(pdf_path, use_outline)
            ]

    return run


METHOD_FUNCS: dict[str, Callable[[str], list[Heading]]] = {
    "bookindex+outline": _bookindex(True),
    "bookindex-outline": _bookindex(False),
    "pymupdf4llm": pymupdf4llm_headings,
    "outline": outline_headings,
}


def bookindex_available() -> str | None:
    """None if ``operators.structure.assemble.extract_headings`` imports, else the reason it does not."""
    try:
        from bookindex.operators.structure.assemble import extract_headings  # noqa: F401
    except Exception as e:  # ImportError, or an error raised while importing the module
        return f"{type(e).__name__}: {e}"
    return None


def run_method(method: str, pdf_path: str) -> dict:
    """Run one method on one PDF; returns {"headings", "sec", "error"} (never raises)."""
    t0 = time.perf_counter()
    try:
        headings = METHOD_FUNCS[method](pdf_path)
        error = None
    except Exception as e:
        headings = []
        error = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=5)}"
    return {"headings": headings, "sec": time.perf_counter() - t0, "error": error}


def _worker_init(p4llm_mode: str) -> None:
    _set_p4llm_mode(p4llm_mode)
    with contextlib.suppress(Exception):
        _quiet_pymupdf()


# --------------------------------------------------------------------------- cache


def _p4llm_version() -> str:
    try:
        import pymupdf4llm

        return str(pymupdf4llm.__version__)
    except Exception:
        return "?"


def sample_pages(n_pages: int, window: int, seed: int = 0) -> list[int]:
    """0-based pages of one contiguous window of ``window`` pages, seeded, inside the middle
    80 % of the book (front and back matter are its least typical pages)."""
    if n_pages <= window:
        return list(range(n_pages))
    lo, hi = int(0.1 * n_pages), max(int(0.9 * n_pages) - window, int(0.1 * n_pages))
    start = lo + int(np.random.default_rng(seed).integers(0, hi - lo + 1))
    return list(range(start, start + window))


def _cache_path(cache_dir: Path, pdf: Path, mode: str, pages: list[int] | None = None) -> Path:
    """Keyed by the PDF's bytes (not its path or mtime: a re-copied data folder still hits),
    the pymupdf4llm version and the mode (and the pages, when only some were converted)."""
    digest = hashlib.sha256(pdf.read_bytes()).hexdigest()
    key = f"{digest}|pymupdf4llm-{_p4llm_version()}|{mode}"
    if pages is not None:
        key += f"|pages={pages[0]}-{pages[-1]}" if pages else "|pages="
    return cache_dir / f"{hashlib.sha1(key.encode()).hexdigest()}.json"


def _cache_get(path: Path | None) -> dict | None:
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        return {
            "headings": [tuple(h) for h in data["headings"]],
            "sec": float(data["sec"]),
            "error": None,
        }
    except Exception:
        return None


def _cache_put(path: Path | None, pdf: Path, result: dict) -> None:
    if path is None or result["error"]:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"pdf": str(pdf), "headings": result["headings"], "sec": result["sec"]})
        )
        tmp.replace(path)
    except OSError as e:
        print(f"warning: could not write cache {path}: {e}", file=sys.stderr)


# --------------------------------------------------------------------------- formatting


def _fmt(x, width: int, digits: int = 3) -> str:
    if x is None:
        return "-".rjust(width)
    if isinstance(x, float):
        return f"{x:.{digits}f}".rjust(width)
    return str(x).rjust(width)


def _short(name: str, n: int) -> str:
    return name if len(name) <= n else name[: n - 1] + "~"


def reads_gold(corpus: str, method: str) -> bool:
    """Whether a method reads the corpus's gold (the outline, on docugami and mmlongbench)."""
    return corpus in OUTLINE_GOLD and method in READS_OUTLINE


def format_summary(results: dict) -> str:
    """The methods side by side; rows of methods that read the gold printed apart, labelled."""
    head = (
        f"{'corpus':<12} {'method':<18} {'P':>6} {'R':>6} {'F1':>6} {'macroF1':>7} "
        f"{'level_acc':>9} {'lvl_map':>8} {'n_docs':>6} {'n_gold':>6} {'n_pred':>6} {'sec':>8}"
    )
    lines = [head, "-" * len(head)]
    apart = [
        (corpus, method)
        for corpus, cres in results["corpora"].items()
        for method in cres["methods"]
        if reads_gold(corpus, method)
    ]
    for corpus, cres in results["corpora"].items():
        for method, mres in cres["methods"].items():
            if not reads_gold(corpus, method):
                lines.append(_summary_row(corpus, method, mres))
    if apart:
        lines += ["", "Not comparable: these methods read the PDF outline, which is the gold here"]
        lines += [head, "-" * len(head)]
        for corpus, method in apart:
            lines.append(
                _summary_row(corpus, method, results["corpora"][corpus]["methods"][method])
            )
    return "\n".join(lines)


def _summary_row(corpus: str, method: str, mres: dict) -> str:
    a = mres["summary"]
    return (
        f"{corpus:<12} {method:<18} {_fmt(a['precision'], 6)} {_fmt(a['recall'], 6)} "
        f"{_fmt(a['f1'], 6)} {_fmt(a['macro_f1'], 7)} {_fmt(a['level_acc'], 9)} "
        f"{_fmt(a['level_acc_map'], 8)} "
        f"{_fmt(a['n_docs'], 6)} {_fmt(a['n_gold'], 6)} {_fmt(a['n_pred'], 6)} "
        f"{_fmt(mres['sec'], 8, 1)}"
        + (f"  ({mres['n_errors']} errors)" if mres["n_errors"] else "")
    )


def format_per_doc(corpus: str, cres: dict, name_width: int = 44) -> str:
    head = (
        f"{'document':<{name_width}} {'method':<18} {'P':>6} {'R':>6} {'F1':>6} "
        f"{'level_acc':>9} {'lvl_map':>8} {'n_gold':>6} {'n_pred':>6} {'sec':>7}"
    )
    lines = [f"[{corpus}] per document", head, "-" * len(head)]
    for doc in cres["docs"]:
        for method, d in doc["methods"].items():
            s = d["score"]
            label = f"{method}*" if reads_gold(corpus, method) else method
            lines.append(
                f"{_short(doc['name'], name_width):<{name_width}} {label:<18} "
                f"{_fmt(s['precision'], 6)} {_fmt(s['recall'], 6)} {_fmt(s['f1'], 6)} "
                f"{_fmt(s['level_acc'], 9)} {_fmt(s['level_acc_map'], 8)} "
                f"{_fmt(s['n_gold'], 6)} {_fmt(s['n_pred'], 6)} "
                f"{_fmt(d['sec'], 7, 1)}" + ("  ERROR" if d["error"] else "")
            )
    if any(reads_gold(corpus, m) for m in cres["methods"]):
        lines.append("* reads the PDF outline, which is the gold here: not comparable")
    return "\n".join(lines)


# --------------------------------------------------------------------------- driver


def _default_methods(corpus: str, available: list[str]) -> list[str]:
    return [m for m in available if not reads_gold(corpus, m)]


def run_benchmark(
    corpora: list[str],
    methods: list[str] | None = None,
    limit: int | None = None,
    workers: int = 1,
    cache_dir: Path | None = DEFAULT_CACHE_DIR,
    p4llm_mode: str = "layout",
    save_pred: bool = False,
) -> dict:
    """Run the methods on the corpora and score them; returns the JSON-able results dict."""
    explicit = methods is not None
    wanted = list(methods) if explicit else list(ALL_METHODS)
    notes: list[str] = []
    if any(m in BOOKINDEX_METHODS for m in wanted):
        reason = bookindex_available()
        if reason:
            msg = (
                f"bookindex methods skipped: cannot import operators.structure.sections ({reason})"
            )
            print(f"warning: {msg}", file=sys.stderr)
            notes.append(msg)
            wanted = [m for m in wanted if m not in BOOKINDEX_METHODS]

    # Collect the work: (corpus, doc index, method) -> task.
    docs: dict[str, list[tuple[Path, list[Heading]]]] = {}
    plan: dict[str, list[str]] = {}
    for corpus in corpora:
        docs[corpus] = list(iter_corpus(corpus, limit))
        plan[corpus] = wanted if explicit else _default_methods(corpus, wanted)
        print(
            f"{corpus}: {len(docs[corpus])} documents with gold; methods {plan[corpus]}",
            file=sys.stderr,
        )

    outcomes: dict[tuple[str, int, str], dict] = {}
    todo: list[tuple[str, int, str, Path, Path | None]] = []
    for corpus in corpora:
        for k, (pdf, _) in enumerate(docs[corpus]):
            for method in plan[corpus]:
                cpath = None
                if method == "pymupdf4llm" and cache_dir is not None:
                    cpath = _cache_path(cache_dir, pdf, p4llm_mode)
                    hit = _cache_get(cpath)
                    if hit is not None:
                        hit["cached"] = True
                        outcomes[(corpus, k, method)] = hit
                        continue
                todo.append((corpus, k, method, pdf, cpath))

    n_total = len(outcomes) + len(todo)
    print(
        f"{n_total} (document, method) runs, {len(outcomes)} from cache, {len(todo)} to compute"
        f" with {workers} worker(s)",
        file=sys.stderr,
    )
    done = len(outcomes)
    t_start = time.perf_counter()

    def finish(task, res):
        nonlocal done
        corpus, k, method, pdf, cpath = task
        res["cached"] = False
        _cache_put(cpath, pdf, res)
        outcomes[(corpus, k, method)] = res
        done += 1
        s = score(res["headings"], docs[corpus][k][1])
        err = f" ERROR {res['error'].splitlines()[0]}" if res["error"] else ""
        print(
            f"[{done}/{n_total} {time.perf_counter() - t_start:6.0f}s] {corpus} {method:<18}"
            f" {_short(pdf.stem, 40):<40} {res['sec']:6.1f}s F1={s['f1']:.3f}"
            f" n_pred={s['n_pred']}{err}",
            file=sys.stderr,
            flush=True,
        )

    if workers <= 1:
        _worker_init(p4llm_mode)
        for task in todo:
            finish(task, run_method(task[2], str(task[3])))
    elif todo:
        # Longest documents first, so a big book does not start last.
        todo.sort(key=lambda t: -t[3].stat().st_size)
        ctx = mp.get_context("spawn")
        with cf.ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=_worker_init, initargs=(p4llm_mode,)
        ) as pool:
            futs = {pool.submit(run_method, t[2], str(t[3])): t for t in todo}
            for fut in cf.as_completed(futs):
                try:
                    res = fut.result()
                except Exception as e:  # e.g. a worker killed by a crash in native code
                    res = {"headings": [], "sec": 0.0, "error": f"{type(e).__name__}: {e}"}
                finish(futs[fut], res)

    results: dict = {
        "config": {
            "corpora": corpora,
            "methods": plan,
            "limit": limit,
            "workers": workers,
            "page_tol": 1,
            "pymupdf4llm_version": _p4llm_version(),
            "pymupdf4llm_mode": p4llm_mode,
            "data_dir": str(shared_data_dir()),
            "notes": notes,
        },
        "corpora": {},
    }
    for corpus in corpora:
        cres: dict = {"methods": {}, "docs": []}
        per_method_scores: dict[str, list[dict]] = {m: [] for m in plan[corpus]}
        for k, (pdf, gold) in enumerate(docs[corpus]):
            drow: dict = {"name": pdf.stem, "path": str(pdf), "n_gold": len(gold), "methods": {}}
            for method in plan[corpus]:
                res = outcomes[(corpus, k, method)]
                s = score(res["headings"], gold)
                per_method_scores[method].append(s)
                entry = {
                    "score": s,
                    "sec": res["sec"],
                    "cached": res.get("cached", False),
                    "error": res["error"],
                }
                if save_pred:
                    entry["pred"] = [list(h) for h in res["headings"]]
                drow["methods"][method] = entry
            cres["docs"].append(drow)
        for method in plan[corpus]:
            rows = [d["methods"][method] for d in cres["docs"]]
            cres["methods"][method] = {
                "summary": aggregate(per_method_scores[method]),
                "sec": sum(r["sec"] for r in rows),
                "n_cached": sum(r["cached"] for r in rows),
                "n_errors": sum(r["error"] is not None for r in rows),
            }
        results["corpora"][corpus] = cres
    return results


P4LLM_WINDOW = 30  # pages per book pymupdf4llm converts when a book has no full cached run


def _on_pages(headings: list[Heading], pages: set[int] | None) -> list[Heading]:
    return list(headings) if pages is None else [h for h in headings if h[2] in pages]


def run_cv(folds: int, seed: int, p4llm: str, cache_dir: Path | None, workers: int) -> dict:
    """The grouped cross-validation table (module docstring): learned and rule filters,
    pymupdf4llm and the outline on the same books (and pages)."""
    import pymupdf

    from benchmarks.section_data import LABELLED_CORPORA, load_books
    from benchmarks.train_section_model import cross_validate, cv_summary, format_cv

    books = load_books()
    cv = cross_validate(books, folds, seed, workers=workers)
    summary = cv_summary(books, cv)
    summary["protocol"] = f"{folds} folds grouped by book, seed {seed}"
    preds: dict[str, dict[str, list]] = {m: dict(p) for m, p in cv.predictions.items()}
    gold_of: dict[str, list[Heading]] = {}
    p4llm_pages: dict[str, set[int] | None] = {}  # 1-based pages pymupdf4llm ran on
    errors: list[str] = []
    for corpus in LABELLED_CORPORA:
        for pdf, gold in iter_corpus(corpus):
            gold_of[pdf.stem] = gold
            preds.setdefault("outline", {})[pdf.stem] = outline_headings(pdf)
            if p4llm == "skip":
                continue
            res = _cache_get(_cache_path(cache_dir, pdf, _P4LLM_MODE)) if cache_dir else None
            pages: list[int] | None = None
            if res is None:  # no full run cached: one window of pages
                with pymupdf.open(str(pdf)) as doc:
                    pages = sample_pages(doc.page_count, P4LLM_WINDOW)
                cpath = _cache_path(cache_dir, pdf, _P4LLM_MODE, pages) if cache_dir else None
                res = _cache_get(cpath)
                if res is None and p4llm == "compute":
                    t0 = time.perf_counter()
                    try:
                        res = {
                            "headings": pymupdf4llm_headings(str(pdf), _P4LLM_MODE, pages),
                            "sec": time.perf_counter() - t0,
                            "error": None,
                        }
                        _cache_put(cpath, pdf, res)
                    except Exception as e:  # scored as an empty prediction, as in run_benchmark
                        res = {"headings": [], "sec": 0.0, "error": f"{type(e).__name__}: {e}"}
                if res is None:
                    continue
            if res.get("error"):
                errors.append(f"{pdf.stem}: {res['error']}")
            preds.setdefault("pymupdf4llm", {})[pdf.stem] = res["headings"]
            p4llm_pages[pdf.stem] = None if pages is None else {p + 1 for p in pages}
    names = [b.name for b in books]
    per_book = {
        m: {n: score(preds[m][n], gold_of[n]) for n in names if n in preds[m]} for m in preds
    }
    extra = {"outline": aggregate(per_book["outline"][n] for n in names)}
    text = format_cv(summary, extra)
    covered = [n for n in names if n in p4llm_pages]
    if covered:
        sub: dict[str, dict] = {}
        for m in preds:
            sub[m] = aggregate(
                score(
                    _on_pages(preds[m][n], p4llm_pages[n]),
                    _on_pages(gold_of[n], p4llm_pages[n]),
                )
                for n in covered
            )
        n_full = sum(p4llm_pages[n] is None for n in covered)
        text += (
            f"\n\nbeside pymupdf4llm on the same books and pages: {len(covered)} books, "
            f"{n_full} whole (cached), {len(covered) - n_full} on a window of "
            f"{P4LLM_WINDOW} pages (--p4llm {p4llm}); gold and every method restricted to "
            "those pages\n"
        )
        text += format_cv({"pooled": sub, "folds": []}).split("\n\nper fold")[0]
        summary["same_pages"] = sub
    if errors:
        text += "\n\npymupdf4llm errors (scored as empty predictions): " + "; ".join(errors)
    summary["baselines"] = extra
    summary["per_book"] = per_book
    summary["predictions"] = preds
    summary["table"] = text
    summary["made_by"] = cv_identity(folds, seed)
    return summary


def cv_identity(folds: int, seed: int) -> dict:
    """What a CV's figures depend on besides the learner: the feature code
    (``section_data.code_version``), the folds, the seed and the labelled books (corpus, PDF
    and gold sha256). ``train_section_model --cv-from`` takes a CV only where this matches."""
    from benchmarks.section_data import LABELLED_CORPORA, code_version

    def sha256(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    books = sorted(
        f"{corpus}/{sha256(pdf)}/{sha256(hips_dir(None, corpus) / 'GT_TOCs' / f'{pdf.stem}.toc')}"
        for corpus in LABELLED_CORPORA
        for pdf, _ in iter_corpus(corpus)
    )
    return {"feature_code": code_version(), "folds": folds, "seed": seed, "books": books}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.tree_accuracy",
        description="Heading-tree accuracy of bookindex vs. pymupdf4llm (see module docstring).",
    )
    ap.add_argument("--corpus", default=",".join(CORPORA), help="comma-separated corpora")
    ap.add_argument("--limit", type=int, default=None, help="at most N documents per corpus")
    ap.add_argument(
        "--methods",
        default=None,
        help=f"comma-separated subset of {','.join(ALL_METHODS)} "
        "(default: all, but on docugami/mmlongbench none that reads the outline, their gold)",
    )
    ap.add_argument("--workers", type=int, default=1, help="parallel processes (default 1)")
    ap.add_argument("--json", dest="json_out", default=None, help="write results JSON here")
    ap.add_argument("--per-doc", action="store_true", help="per-document tables for all corpora")
    ap.add_argument("--save-pred", action="store_true", help="keep predictions in the JSON")
    ap.add_argument("--no-cache", action="store_true", help="recompute pymupdf4llm results")
    ap.add_argument(
        "--cache-dir",
        default=os.environ.get("BOOKINDEX_CACHE_DIR") or str(DEFAULT_CACHE_DIR),
        help="pymupdf4llm result cache (default $BOOKINDEX_CACHE_DIR or %(default)s)",
    )
    ap.add_argument(
        "--p4llm-mode",
        choices=("layout", "legacy"),
        default="layout",
        help="pymupdf4llm engine: layout (the 2.0 default) or legacy (use_layout(False))",
    )
    ap.add_argument("--cv", action="store_true", help="grouped cross-validation (docstring)")
    ap.add_argument("--folds", type=int, default=6, help="--cv: folds (default 6)")
    ap.add_argument("--seed", type=int, default=0, help="--cv: seed of the fold split")
    ap.add_argument(
        "--p4llm",
        choices=("cached", "compute", "skip"),
        default="compute",
        help="--cv: pymupdf4llm from the cache only, computed where missing, or not at all",
    )
    args = ap.parse_args(argv)
    if args.cv:
        _set_p4llm_mode(args.p4llm_mode)
        cache = None if args.no_cache else Path(args.cache_dir)
        summary = run_cv(args.folds, args.seed, args.p4llm, cache, args.workers)
        print(summary["table"])
        if args.json_out:
            Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json_out).write_text(json.dumps(summary, indent=1, default=str))
        return 0

    corpora = [c.strip() for c in args.corpus.split(",") if c.strip()]
    bad = [c for c in corpora if c not in CORPORA]
    if bad:
        ap.error(f"unknown corpus {bad}; choose from {','.join(CORPORA)}")
    methods = None
    if args.methods:
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        bad = [m for m in methods if m not in ALL_METHODS]
        if bad:
            ap.error(f"unknown method {bad}; choose from {','.join(ALL_METHODS)}")
    if not shared_data_dir().is_dir():
        ap.error(f"shared data not found at {shared_data_dir()} (set BOOKINDEX_SHARED_DATA)")

    t0 = time.perf_counter()
    results = run_benchmark(
        corpora,
        methods=methods,
        limit=args.limit,
        workers=args.workers,
        cache_dir=None if args.no_cache else Path(args.cache_dir),
        p4llm_mode=args.p4llm_mode,
        save_pred=args.save_pred,
    )
    results["wall_sec"] = time.perf_counter() - t0

    print(format_summary(results))
    for corpus, cres in results["corpora"].items():
        if corpus == "hips" or args.per_doc:
            print()
            print(format_per_doc(corpus, cres))
    for note in results["config"]["notes"]:
        print(f"\nnote: {note}")
    cached = {
        f"{c}/{m}": r["n_cached"]
        for c, cr in results["corpora"].items()
        for m, r in cr["methods"].items()
        if r["n_cached"]
    }
    if cached:
        print(f"\nnote: cached pymupdf4llm results (sec = time when computed): {cached}")
    print(
        f"\npymupdf4llm {results['config']['pymupdf4llm_version']} mode={args.p4llm_mode}; "
        f"wall time {results['wall_sec']:.0f}s"
    )

    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.json_out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
