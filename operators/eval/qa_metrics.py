"""PDF QA metrics (the recipes of ../shared/data/README.md).

- page recall = |gold pages ∩ retrieved pages| / |gold pages| (answerable questions only);
  a unit covers every page from its page_start to its page_end;
- perfect recall (PR) = 1 when every gold page is retrieved; irrelevant-page ratio (IPR) =
  share of retrieved pages not in the gold set (LAD-RAG's pair);
- span recall = share of gold ``evidence_texts`` found in the retrieved text: whitespace- and
  case-normalised substring, or (fuzzy) at least SPAN_COVERAGE of the span's words present
  among the retrieved words;
- EM / token F1 after SQuAD normalisation, the maximum over the gold answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter

SPAN_COVERAGE = 0.8
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_WORDS = re.compile(r"\w+")


def retrieved_pages(evidence: list[dict]) -> set[int]:
    pages: set[int] = set()
    for unit in evidence:
        start = int(unit["page"])
        end = max(start, int(unit.get("page_end") or start))
        pages.update(range(start, end + 1))
    return pages


def page_metrics(evidence: list[dict], gold_pages: list[int]) -> dict[str, float] | None:
    """page_recall, perfect_recall, irrelevant_page_ratio; None when there is no gold page."""
    gold = {int(p) for p in gold_pages}
    if not gold:
        return None
    pages = retrieved_pages(evidence)
    hit = len(gold & pages)
    return {
        "page_recall": hit / len(gold),
        "perfect_recall": float(hit == len(gold)),
        "irrelevant_page_ratio": (len(pages - gold) / len(pages)) if pages else 1.0,
    }


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def span_recall(evidence_texts: list[str], retrieved: list[str]) -> float | None:
    spans = [s for s in evidence_texts if s and s.strip()]
    if not spans:
        return None
    haystack = _squash(" ".join(retrieved))
    words = set(_WORDS.findall(haystack))
    found = 0
    for span in spans:
        needle = _squash(span)
        if needle in haystack:
            found += 1
            continue
        span_words = _WORDS.findall(needle)
        if span_words and sum(w in words for w in span_words) / len(span_words) >= SPAN_COVERAGE:
            found += 1
    return found / len(spans)


def normalise_answer(text: str) -> str:
    text = str(text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, answers: list[str]) -> float:
    pred = normalise_answer(prediction)
    return float(any(pred == normalise_answer(a) for a in answers))


def token_f1(prediction: str, answers: list[str]) -> float:
    pred = normalise_answer(prediction).split()
    best = 0.0
    for answer in answers:
        gold = normalise_answer(answer).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if not pred or not gold or common == 0:
            best = max(best, float(pred == gold))
            continue
        precision, recall = common / len(pred), common / len(gold)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best
