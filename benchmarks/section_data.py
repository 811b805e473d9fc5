"""Training and cross-validation data of the learned section filter, one book at a time.

For every labelled book (``hips`` and ``hips_extra``: human tables of contents) this parses
the PDF, types its blocks and runs the rule deciders exactly as the index job does, then keeps
per title candidate: the feature rows with the outline off and on
(``operators.structure.heading_features``), the rule decisions, the text and page, and the
label: whether the candidate (with the lines the rules join to it) matches a gold heading
(``operators.eval.heading_gold.match_headings``, one to one) and that heading's level.

Books are cached under ``$BOOKINDEX_CACHE_DIR/section_features`` (default
``~/.cache/bookindex/section_features``), keyed by the PDF's and the gold file's sha256 and a
hash of the feature code, so training and cross-validation do not parse again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymupdf

from bookindex.operators.eval.heading_gold import Heading, hips_dir, iter_corpus, match_headings
from bookindex.operators.parsing.parse import document_metadata, parse_pages
from bookindex.operators.structure import heading_features
from bookindex.operators.structure.blocks import NEVER_HEADING, classify_blocks
from bookindex.operators.structure.outline_filter import OutlineSectionFilter
from bookindex.operators.structure.sections import (
    CONTINUES,
    LayoutSectionFilter,
    SectionContext,
    candidates_of,
    carried_entries,
    carried_title,
    entry_title,
)

LABELLED_CORPORA = ("hips", "hips_extra")
DEFAULT_CACHE = Path(
    os.environ.get("BOOKINDEX_CACHE_DIR") or Path.home() / ".cache" / "bookindex"
) / ("section_features")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def code_version() -> str:
    """Hash of the code a cached book depends on (features, rules, parsing)."""
    root = Path(__file__).resolve().parents[1] / "operators"
    parts = [
        root / "structure" / name
        for name in (
            "heading_features.py",
            "sections.py",
            "outline_filter.py",
            "blocks.py",
            "furniture.py",
        )
    ] + [root / "parsing" / "parse.py", Path(__file__)]
    h = hashlib.sha256()
    for p in parts:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class Book:
    """One labelled book's candidates, as the learner and the CV scorer see them."""

    corpus: str
    name: str
    pdf_sha256: str
    gold_sha256: str
    n_pages: int
    gold: list[Heading]
    x_off: np.ndarray
    x_on: np.ndarray
    has_outline: bool
    texts: list[str]  # the candidate's text with the candidates the rules join to it
    pages: list[int]
    never: list[bool]  # NEVER_HEADING: a candidate that is never a heading
    layout_level: list[int]  # rule decisions (0: not a title)
    layout_reason: list[str]
    outline_level: list[int]
    outline_reason: list[str]
    # the title a row takes as a located outline entry where it differs from its own text
    # (``sections.entry_title``), else ""
    outline_title: list[str]
    promoted: list[Heading]  # outline entries found in non-candidate blocks
    outline_only: list[Heading]  # outline entries no block carries
    label: np.ndarray  # 1: matches a gold heading
    gold_level: np.ndarray  # that heading's level relative to the book's top level (1 = top)

    def to_json(self) -> dict:
        d = {k: v for k, v in vars(self).items() if not isinstance(v, np.ndarray)}
        for k in ("x_off", "x_on", "label", "gold_level"):
            d[k] = getattr(self, k).tolist()
        return d

    @classmethod
    def from_json(cls, d: dict) -> Book:
        d = dict(d)
        d["x_off"] = np.asarray(d["x_off"], dtype=np.float64).reshape(-1, len(FEATURES))
        d["x_on"] = np.asarray(d["x_on"], dtype=np.float64).reshape(-1, len(FEATURES))
        d["label"] = np.asarray(d["label"], dtype=np.int64)
        d["gold_level"] = np.asarray(d["gold_level"], dtype=np.int64)
        d["gold"] = [tuple(h) for h in d["gold"]]
        d["promoted"] = [tuple(h) for h in d["promoted"]]
        d["outline_only"] = [tuple(h) for h in d["outline_only"]]
        return cls(**d)


FEATURES = heading_features.FEATURE_NAMES


def _joined_texts(cands, reasons: list[str]) -> list[str]:
    """Each candidate's text with the followers the rules join to it (``CONTINUES``)."""
    texts = [c.text for c in cands]
    leader = None
    for pos, reason in enumerate(reasons):
        if reason == CONTINUES and leader is not None and pos > 0:
            texts[leader] = f"{texts[leader]} {cands[pos].text}"
        else:
            leader = pos
    return texts


def _parse_version() -> str:
    """Hash of the parsing code a cached parse depends on."""
    root = Path(__file__).resolve().parents[1] / "operators" / "parsing"
    return hashlib.sha256((root / "parse.py").read_bytes()).hexdigest()[:12]


def parsed_book(pdf: Path, cache_dir: Path | None = DEFAULT_CACHE) -> tuple[dict, list]:
    """The metadata and blocks of one PDF, parsed as the index job does; cached (pickle,
    written and read only by this benchmark) beside the feature cache, keyed by the PDF's
    sha256 and the parsing code, so a change to the features or the rules does not parse the
    book again (parsing is the expensive part of extraction)."""
    path = None
    if cache_dir is not None:
        path = cache_dir / "parsed" / f"{_sha256(pdf)[:20]}-{_parse_version()}.pkl"
        if path.exists():
            with contextlib.suppress(Exception):
                meta, blocks = pickle.loads(path.read_bytes())
                return meta, blocks
    with pymupdf.open(str(pdf)) as doc:
        meta = document_metadata(doc)
        blocks = parse_pages(doc, 0, doc.page_count).blocks
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps((meta, blocks)))
        tmp.replace(path)
    return meta, blocks


def extract_book(
    corpus: str, pdf: Path, gold: list[Heading], cache_dir: Path | None = None
) -> Book:
    """Parse one book (or read its parse cached under ``cache_dir``) and compute its
    candidates' features, rule decisions and labels."""
    meta, blocks = parsed_book(pdf, cache_dir)
    body = classify_blocks(blocks, meta["n_pages"])
    cands = candidates_of(blocks)
    outline = meta["outline"]
    ctx_off = SectionContext(body=body, n_pages=meta["n_pages"], outline=[], blocks=blocks)
    layout = LayoutSectionFilter().decide(cands, ctx_off)
    pool = heading_features.heading_pool(cands, blocks)
    members = pool.members
    pool_layout = heading_features.pool_decisions(pool, layout.decisions)
    has_outline = len([e for e in outline if e[1].strip()]) >= 2
    x_off = heading_features.candidate_features(members, ctx_off, pool_layout).x
    promoted: list[Heading] = []
    outline_only: list[Heading] = []
    outline_title = [""] * len(members)
    if has_outline:
        ctx_on = SectionContext(body=body, n_pages=meta["n_pages"], outline=outline, blocks=blocks)
        on = OutlineSectionFilter().decide(cands, ctx_on)
        o_dec = heading_features.pool_decisions(pool, on.decisions, on.promoted)
        x_on = heading_features.candidate_features(members, ctx_on, pool_layout, o_dec).x
        in_pool = {c.index for c in members}
        promoted = [
            (d.level, entry_title(blocks[i].text, on.titles.get(i)), blocks[i].page)
            for i, d in on.promoted.items()
            if i not in in_pool
        ]
        for pos, c in enumerate(members):
            title = entry_title(c.text, on.titles.get(c.index))
            outline_title[pos] = title if title != c.text else ""
        outline_only = [(e.level, e.title, e.page) for e in on.outline_only]
    else:
        x_on = x_off
        o_dec = pool_layout
    reasons = [d.reason for d in pool_layout]
    texts = _joined_texts(members, reasons)
    leaders = [pos for pos, r in enumerate(reasons) if r != CONTINUES]
    # a located entry's row is labelled by the title it takes (a subtitle the rules join to it
    # does not make it less of a heading)
    pred = [(1, outline_title[pos] or texts[pos], members[pos].page) for pos in leaders]
    label = np.zeros(len(members), dtype=np.int64)
    gold_level = np.zeros(len(members), dtype=np.int64)
    top = min((lv for lv, _, _ in gold), default=1)
    for m in match_headings(pred, gold):
        pos = leaders[m.pred_idx]
        label[pos] = 1
        gold_level[pos] = gold[m.gold_idx][0] - top + 1
    return Book(
        corpus=corpus,
        name=pdf.stem,
        pdf_sha256=_sha256(pdf),
        gold_sha256="",
        n_pages=meta["n_pages"],
        gold=gold,
        x_off=x_off,
        x_on=x_on,
        has_outline=has_outline,
        texts=texts,
        pages=[c.page for c in members],
        never=[bool(blocks[c.index].extra.get(NEVER_HEADING)) for c in members],
        layout_level=[d.level or 0 for d in pool_layout],
        layout_reason=reasons,
        outline_level=[d.level or 0 for d in o_dec],
        outline_reason=[d.reason for d in o_dec],
        outline_title=outline_title,
        promoted=promoted,
        outline_only=outline_only,
        label=label,
        gold_level=gold_level,
    )


def load_books(
    corpora: tuple[str, ...] = LABELLED_CORPORA,
    cache_dir: Path | None = DEFAULT_CACHE,
    verbose: bool = True,
) -> list[Book]:
    """Every labelled book, from the cache where it is fresh, else extracted and cached."""
    version = code_version()
    books: list[Book] = []
    for corpus in corpora:
        for pdf, gold in iter_corpus(corpus):
            gold_path = hips_dir(None, corpus) / "GT_TOCs" / f"{pdf.stem}.toc"
            pdf_sha, gold_sha = _sha256(pdf), _sha256(gold_path)
            path = None
            if cache_dir is not None:
                path = cache_dir / f"{pdf_sha[:20]}-{gold_sha[:12]}-{version}.json"
                if path.exists():
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        books.append(Book.from_json(json.loads(path.read_text())))
                        continue
            if verbose:
                print(f"extracting {corpus}/{pdf.stem[:60]}", file=sys.stderr, flush=True)
            book = extract_book(corpus, pdf, gold, cache_dir)
            book.gold_sha256 = gold_sha
            books.append(book)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(book.to_json()))
                tmp.replace(path)
    return books


def headings_of(book: Book, decisions: list[tuple[int, str]], with_outline: bool) -> list[Heading]:
    """The headings ``sections.resolve_headings`` would return for these decisions ((level or
    0, reason) per candidate), rebuilt from the cached candidates."""
    out: list[tuple[int, int, Heading]] = []  # (page, order, heading) to sort as the product
    last = -2
    for pos, (level, reason) in enumerate(decisions):
        if reason == CONTINUES and last == pos - 1:
            last = pos  # the leader's text already holds the follower's
        elif level and not book.never[pos]:
            text = (with_outline and book.outline_title[pos]) or book.texts[pos]
            out.append((book.pages[pos], pos, (level, text, book.pages[pos])))
            last = pos
    headings = [h for _, _, h in out]
    if with_outline and book.has_outline:
        headings += list(book.promoted)
        only = list(book.outline_only)
        found = carried_entries([e[1:] for e in only], [h[1:] for h in headings])
        for e, k in found.items():
            headings[k] = (only[e][0], carried_title(only[e][1], headings[k][1]), headings[k][2])
        headings += [entry for e, entry in enumerate(only) if e not in found]
    return headings
