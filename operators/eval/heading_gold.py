"""Gold heading lists and heading matching for the heading-tree accuracy benchmark.

A heading is a tuple ``(level, title, page)``: level is an int >= 1 (1 = top), page is the
1-based *physical* PDF page index (the same numbering as ``pymupdf.Document.get_toc()``).

Gold sources (see ``../shared/data/README.md``; override the data root with the
``BOOKINDEX_SHARED_DATA`` environment variable):

* ``hips``: human-curated TOCs ``hips/GT_TOCs/<stem>.toc`` for ``hips/PDFs/<stem>.pdf``. Lines are
  ``level,heading,page``; headings with commas are only sometimes quoted, so each line is read
  with the csv module and parsed as ``level=row[0]``, ``page=row[-1]``,
  ``heading=",".join(row[1:-1])``. Some files start with a UTF-8 BOM. Rows whose level or page
  is not an integer, or whose heading is empty, are skipped. The gold page numbers are physical
  PDF page indexes (1-based), not printed page labels: over the 10 books, 99.8% of the gold
  titles (1,646 with >= 6 normalised characters) occur in the text of exactly that physical page,
  but only 18.5% on the page whose printed label is that number.
* ``docugami`` and ``mmlongbench``: the PDF's own outline (``doc.get_toc()``) is the gold where
  it has at least 3 usable entries (non-empty title, page >= 1); other PDFs are skipped.

Matching rules (used by :func:`match_headings` and :func:`score`)
-----------------------------------------------------------------
1. Titles are normalised for matching only (:func:`normalize_title`): unicode NFKC, lower-case;
   leading section numbering is stripped, repeatedly, up to 3 times: a keyword with a number
   ("chapter 4", "part ii", "section 2.1", "appendix b", "annex i", "article 3", or a number
   spelled out: "chapter one", "part twenty-one"), dotted arabic
   numbers with 1-3 digits per component ("1", "1.2.3", "4."; years like "2019" are kept), a
   roman numeral or a single letter followed by ".", ")" or ":" ("iv.", "a)", "b:"), "§ 3", and a
   parenthesised or bracketed number, numeral or letter ("(1)", "(iv)", "[a]").
   Then every run of punctuation (any non-word character, and "_") becomes a space and
   whitespace is collapsed. If stripping the numbering leaves nothing, the un-stripped text is
   kept.
2. Titles are compared on their *compact* form (normalised, spaces removed), so that extraction
   spacing artefacts ("re fl ect") and the number stripping do not matter. Two titles match when
   they are equal (similarity 1.0), or their ``difflib.SequenceMatcher`` ratio is >= 0.8, or one
   is a prefix of the other, is at least 4 characters long and has >= 0.6 of the other's
   length (catches a heading line that also carries the author name, or a wrapped title cut
   after its first line). The similarity used to rank candidates is the SequenceMatcher ratio.
3. Pages must agree within ``page_tol`` (default 1): ``|pred_page - gold_page| <= 1``.
4. Matching is one-to-one and greedy: all (pred, gold) candidate pairs that pass 2 and 3 are
   sorted by similarity (highest first), then page distance (smallest first), then gold and
   pred order; a pair is accepted when neither side is matched yet. Each matched pair is a true
   positive; unmatched predictions are false positives, unmatched gold entries false negatives.
5. Level accuracy compares *relative* depth, because gold and predictions may number levels
   differently (gold starting at 1, a method starting at 2): over the matched pairs of one
   document, a pair is correct when ``pred_level - min_pred == gold_level - min_gold``, where
   ``min_pred`` / ``min_gold`` are the smallest pred / gold levels *among the matched pairs* of
   that document (so an unmatched, spuriously shallow prediction such as a cover title does not
   shift every other level). ``level_acc = level_correct / tp`` (``None`` when tp == 0).
   The min-based offset is brittle: one matched pair at an odd level (a cover title at pred
   level 1) shifts every other pair. So a second, more lenient figure is reported too:
   ``level_acc_map`` uses the best *order-preserving one-to-one mapping* from the document's
   predicted levels to its gold levels (pred levels p1 < p2 map to gold levels g1 < g2; found by
   dynamic programming to maximise the matched pairs whose levels correspond), so a constant
   shift, unused levels in between (pymupdf4llm numbers levels by font-size rank and puts every
   smaller heading font at level 6) and a few outliers do not count against a method. A flat
   prediction (one level) scores the share of the most common gold level under this mapping.

:func:`aggregate` micro-averages a corpus (sums tp / fp / fn / level_correct over documents)
and also reports macro F1 (mean of per-document F1).
"""

from __future__ import annotations

import csv
import difflib
import io
import logging
import os
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

Heading = tuple[int, str, int]

CORPORA = ("hips", "hips_extra", "docugami", "mmlongbench")
# Corpora whose gold is a human table of contents in GT_TOCs/<stem>.toc beside PDFs/<stem>.pdf.
TOC_CORPORA = ("hips", "hips_extra")

MIN_RATIO = 0.8
PREFIX_MIN_SHARE = 0.6
PREFIX_MIN_CHARS = 4
MIN_OUTLINE_ENTRIES = 3

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- data location


def shared_data_dir() -> Path:
    """The shared evaluation data root: $BOOKINDEX_SHARED_DATA, else <repo>/../shared/data."""
    env = os.environ.get("BOOKINDEX_SHARED_DATA")
    if env:
        return Path(env)
    return REPO_ROOT.parent / "shared" / "data"


def _data_dir(data_dir: str | os.PathLike | None) -> Path:
    return Path(data_dir) if data_dir is not None else shared_data_dir()


# --------------------------------------------------------------------------- normalisation

_ROMAN = r"(?=[ivxlc])c{0,3}(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})"
_ARABIC = r"\d{1,3}(?:\.\d{1,3})*"
_KEYWORDS = (
    r"chapter|chap|part|section|sect|sec|appendix|annex|annexure|article|art|book|volume|vol"
)
_UNITS = r"one|two|three|four|five|six|seven|eight|nine"
_NUMBER_WORD = (
    r"(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[\s-]?(?:" + _UNITS + r"))?"
    r"|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|" + _UNITS
)
_NUMBERING_RE = re.compile(
    rf"""^\s*(?:
        (?:{_KEYWORDS})\.?\s+(?:{_ARABIC}|{_ROMAN}|{_NUMBER_WORD}|[a-z])(?![\w])\.?[.):\-\u2013\u2014]?
      | {_ARABIC}\.?[):\-\u2013\u2014]?(?=\s|$)
      | (?:{_ROMAN}|[a-z])[.):](?=\s|$)
      | §+\s*{_ARABIC}\.?
      | [(\[]\s*(?:{_ARABIC}|{_ROMAN}|[a-z])\s*[)\]]
    )\s*""",
    re.VERBOSE,
)
_PUNCT_RE = re.compile(r"[\W_]+")
_WS_RE = re.compile(r"\s+")


def strip_numbering(text: str) -> str:
    """Strip leading section numbering from lower-cased text (at most 3 layers).

    Returns the input unchanged if stripping would leave nothing.
    """
    out = text
    for _ in range(3):
        new = _NUMBERING_RE.sub("", out, count=1)
        if new == out:
            break
        out = new
    return out if out.strip() else text


def normalize_title(title: str) -> str:
    """Matching form of a title: NFKC, lower-case, numbering stripped, punctuation dropped."""
    s = unicodedata.normalize("NFKC", title).lower().strip()
    s = strip_numbering(s)
    s = _PUNCT_RE.sub(" ", s)
    s = _WS_RE.sub(" ", s).strip()
    if not s:  # title was numbering/punctuation only: keep something to compare
        s = _WS_RE.sub(" ", _PUNCT_RE.sub(" ", unicodedata.normalize("NFKC", title).lower()))
        s = s.strip()
    return s


def compact_title(title: str) -> str:
    """Normalised title with all spaces removed (the form titles are compared on)."""
    return normalize_title(title).replace(" ", "")


def _similarity_compact(a: str, b: str) -> float:
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    is_prefix = (
        len(short) >= PREFIX_MIN_CHARS
        and long_.startswith(short)
        and len(short) >= PREFIX_MIN_SHARE * len(long_)
    )
    # Upper bound on the ratio from lengths alone; skip hopeless pairs cheaply.
    if not is_prefix and 2 * len(short) / (len(a) + len(b)) < MIN_RATIO:
        return 0.0
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if not is_prefix and sm.quick_ratio() < MIN_RATIO:
        return 0.0
    ratio = sm.ratio()
    if ratio >= MIN_RATIO or is_prefix:
        return ratio
    return 0.0


def title_similarity(a: str, b: str) -> float:
    """Similarity in (0, 1] if the two titles match under the module's rules, else 0.0."""
    return _similarity_compact(compact_title(a), compact_title(b))


# --------------------------------------------------------------------------- markdown titles

_MD_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SUP_SUB_RE = re.compile(r"<(sup|sub)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG_RE = re.compile(r"</?[A-Za-z][^>]*>")
_MD_LINK_RE = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_ESCAPE_RE = re.compile(r"\\(.)")


def clean_markdown_title(text: str) -> str:
    """Plain text of a markdown heading: no bold/italic/code markers, links, HTML, footnote marks."""
    s = _SUP_SUB_RE.sub("", text)  # footnote markers like <sup>1</sup>
    s = _TAG_RE.sub("", s)
    s = _MD_LINK_RE.sub(r"\1", s)
    s = re.sub(r"[*_`~]+", "", s)  # emphasis / code / strike markers
    s = _MD_ESCAPE_RE.sub(r"\1", s)
    return _WS_RE.sub(" ", s).strip()


def markdown_headings(md: str) -> list[tuple[int, str]]:
    """ATX heading lines of a markdown string as ``(level, clean title)``; level = number of '#'.

    Lines inside fenced code blocks are ignored, as are headings whose cleaned title is empty.
    """
    out: list[tuple[int, str]] = []
    in_fence = False
    for line in md.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = _MD_HEADING_RE.match(line)
        if not m:
            continue
        title = clean_markdown_title(m.group(2))
        if title:
            out.append((len(m.group(1)), title))
    return out


# --------------------------------------------------------------------------- gold loading


def parse_toc_file(path: str | os.PathLike) -> list[Heading]:
    """Parse a HiPS ``.toc`` file (``level,heading,page`` lines, optional BOM, mixed quoting)."""
    text = Path(path).read_text(encoding="utf-8-sig")
    out: list[Heading] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < 3:
            log.debug("%s:%d: skipping short row %r", path, lineno, row)
            continue
        try:
            level = int(row[0].strip())
            page = int(row[-1].strip())
        except ValueError:
            log.debug("%s:%d: skipping irregular row %r", path, lineno, row)
            continue
        title = _WS_RE.sub(" ", ",".join(row[1:-1])).strip()
        if not title or level < 1:
            log.debug("%s:%d: skipping row without title/level %r", path, lineno, row)
            continue
        out.append((level, title, page))
    return out


def hips_dir(data_dir: str | os.PathLike | None = None, corpus: str = "hips") -> Path:
    return _data_dir(data_dir) / corpus


def hips_stems(data_dir: str | os.PathLike | None = None, corpus: str = "hips") -> list[str]:
    """Stems of the HiPS books (``hips`` or ``hips_extra``) that have both a PDF and a gold
    TOC, sorted."""
    d = hips_dir(data_dir, corpus)
    return sorted(
        p.stem for p in (d / "PDFs").glob("*.pdf") if (d / "GT_TOCs" / f"{p.stem}.toc").exists()
    )


def load_hips_gold(
    stem: str, data_dir: str | os.PathLike | None = None, corpus: str = "hips"
) -> list[Heading]:
    """Gold heading list of one HiPS book, by file stem."""
    return parse_toc_file(hips_dir(data_dir, corpus) / "GT_TOCs" / f"{stem}.toc")


def outline_headings(pdf_path: str | os.PathLike) -> list[Heading]:
    """The PDF's embedded outline as headings (entries without title or target page dropped)."""
    import pymupdf

    with pymupdf.open(str(pdf_path)) as doc:
        toc = doc.get_toc(simple=True)
    out: list[Heading] = []
    for level, title, page in toc:
        title = _WS_RE.sub(" ", title or "").strip()
        if title and page >= 1:
            out.append((int(level), title, int(page)))
    return out


def outline_gold(
    pdf_path: str | os.PathLike, min_entries: int = MIN_OUTLINE_ENTRIES
) -> list[Heading] | None:
    """The PDF outline as gold, or None when it has fewer than ``min_entries`` usable entries."""
    gold = outline_headings(pdf_path)
    return gold if len(gold) >= min_entries else None


def corpus_pdfs(name: str, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """All PDFs of a corpus, sorted (with or without gold)."""
    root = _data_dir(data_dir)
    if name in TOC_CORPORA:
        d = hips_dir(data_dir, name)
        return [d / "PDFs" / f"{s}.pdf" for s in hips_stems(data_dir, name)]
    if name == "docugami":
        return sorted((root / "docugami").glob("*/data/**/*.pdf"))
    if name == "mmlongbench":
        return sorted((root / "mmlongbench" / "documents").glob("*.pdf"))
    raise ValueError(f"unknown corpus {name!r}; expected one of {CORPORA}")


def iter_corpus(
    name: str, limit: int | None = None, data_dir: str | os.PathLike | None = None
) -> Iterator[tuple[Path, list[Heading]]]:
    """Yield ``(pdf_path, gold)`` for the documents of a corpus that have gold, sorted by path.

    ``limit`` caps the number of documents yielded (documents without gold do not count).
    """
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; expected one of {CORPORA}")
    if limit is not None and limit <= 0:
        return
    n = 0
    for pdf in corpus_pdfs(name, data_dir):
        if name in TOC_CORPORA:
            gold: list[Heading] | None = load_hips_gold(pdf.stem, data_dir, name)
        else:
            gold = outline_gold(pdf)
        if not gold:
            continue
        yield pdf, gold
        n += 1
        if limit is not None and n >= limit:
            return


# --------------------------------------------------------------------------- matching & scores


@dataclass(frozen=True)
class Match:
    pred_idx: int
    gold_idx: int
    similarity: float
    page_distance: int


def match_headings(
    pred: Sequence[Heading], gold: Sequence[Heading], page_tol: int = 1
) -> list[Match]:
    """One-to-one greedy matching of predicted to gold headings (rules in the module docstring)."""
    gold_keys = [compact_title(t) for _, t, _ in gold]
    gold_by_page: dict[int, list[int]] = defaultdict(list)
    for j, (_, _, page) in enumerate(gold):
        gold_by_page[int(page)].append(j)

    candidates: list[tuple[float, int, int, int]] = []
    sim_cache: dict[tuple[str, str], float] = {}
    for i, (_, title, page) in enumerate(pred):
        key = compact_title(title)
        page = int(page)
        for p in range(page - page_tol, page + page_tol + 1):
            for j in gold_by_page.get(p, ()):
                ck = (key, gold_keys[j])
                sim = sim_cache.get(ck)
                if sim is None:
                    sim = sim_cache[ck] = _similarity_compact(key, gold_keys[j])
                if sim > 0.0:
                    candidates.append((sim, abs(p - page), j, i))

    candidates.sort(key=lambda c: (-c[0], c[1], c[2], c[3]))
    used_pred: set[int] = set()
    used_gold: set[int] = set()
    matches: list[Match] = []
    for sim, dist, j, i in candidates:
        if i in used_pred or j in used_gold:
            continue
        used_pred.add(i)
        used_gold.add(j)
        matches.append(Match(i, j, sim, dist))
    matches.sort(key=lambda m: m.gold_idx)
    return matches


def level_correct(
    matches: Sequence[Match], pred: Sequence[Heading], gold: Sequence[Heading]
) -> int:
    """Number of matched pairs whose relative depth agrees (min taken over the matched pairs)."""
    if not matches:
        return 0
    min_p = min(int(pred[m.pred_idx][0]) for m in matches)
    min_g = min(int(gold[m.gold_idx][0]) for m in matches)
    return sum(
        int(pred[m.pred_idx][0]) - min_p == int(gold[m.gold_idx][0]) - min_g for m in matches
    )


def level_correct_mapped(
    matches: Sequence[Match], pred: Sequence[Heading], gold: Sequence[Heading]
) -> int:
    """Matched pairs whose levels agree under the best order-preserving level mapping."""
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for m in matches:
        counts[(int(pred[m.pred_idx][0]), int(gold[m.gold_idx][0]))] += 1
    p_levels = sorted({p for p, _ in counts})
    g_levels = sorted({g for _, g in counts})
    # dp[i][j]: best total using the first i pred levels and the first j gold levels
    dp = [[0] * (len(g_levels) + 1) for _ in range(len(p_levels) + 1)]
    for i, p in enumerate(p_levels, start=1):
        for j, g in enumerate(g_levels, start=1):
            dp[i][j] = max(dp[i - 1][j], dp[i][j - 1], dp[i - 1][j - 1] + counts.get((p, g), 0))
    return dp[-1][-1]


def _prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def score(
    pred: Sequence[Heading],
    gold: Sequence[Heading],
    page_tol: int = 1,
    return_matches: bool = False,
) -> dict:
    """Score predicted headings against gold for one document.

    Returns a JSON-friendly dict: n_pred, n_gold, tp, fp, fn, precision, recall, f1,
    level_correct, level_acc (None when nothing matched), level_correct_map, level_acc_map
    and, with ``return_matches``,
    ``matches`` as ``[pred_idx, gold_idx, similarity, page_distance]`` lists.
    """
    pred = [(int(lv), str(t), int(pg)) for lv, t, pg in pred]
    gold = [(int(lv), str(t), int(pg)) for lv, t, pg in gold]
    matches = match_headings(pred, gold, page_tol=page_tol)
    tp = len(matches)
    p, r, f = _prf(tp, len(pred), len(gold))
    lc = level_correct(matches, pred, gold)
    lcm = level_correct_mapped(matches, pred, gold)
    out = {
        "n_pred": len(pred),
        "n_gold": len(gold),
        "tp": tp,
        "fp": len(pred) - tp,
        "fn": len(gold) - tp,
        "precision": p,
        "recall": r,
        "f1": f,
        "level_correct": lc,
        "level_acc": lc / tp if tp else None,
        "level_correct_map": lcm,
        "level_acc_map": lcm / tp if tp else None,
    }
    if return_matches:
        out["matches"] = [
            [m.pred_idx, m.gold_idx, round(m.similarity, 4), m.page_distance] for m in matches
        ]
    return out


def aggregate(scores: Iterable[dict]) -> dict:
    """Micro-averaged P/R/F1 and level accuracy over documents, plus macro F1 and doc count."""
    scores = list(scores)
    tp = sum(s["tp"] for s in scores)
    n_pred = sum(s["n_pred"] for s in scores)
    n_gold = sum(s["n_gold"] for s in scores)
    lc = sum(s["level_correct"] for s in scores)
    lcm = sum(s["level_correct_map"] for s in scores)
    p, r, f = _prf(tp, n_pred, n_gold)
    return {
        "n_docs": len(scores),
        "n_pred": n_pred,
        "n_gold": n_gold,
        "tp": tp,
        "fp": n_pred - tp,
        "fn": n_gold - tp,
        "precision": p,
        "recall": r,
        "f1": f,
        "macro_f1": sum(s["f1"] for s in scores) / len(scores) if scores else 0.0,
        "level_correct": lc,
        "level_acc": lc / tp if tp else None,
        "level_correct_map": lcm,
        "level_acc_map": lcm / tp if tp else None,
    }
