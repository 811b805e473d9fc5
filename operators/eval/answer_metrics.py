"""Answer metrics of the papers, on a generated answer against the gold answers of a question
(pure functions: the model calls are in ``operators.eval.answer_judge``).

- **Extraction** (BookRAG, MMLongBench: a long generated answer is first reduced to its short
  answer). ``rule_extract`` is the rule used when no extraction model is configured:

  1. an empty answer extracts to "";
  2. an answer that declines (``says_unanswerable``: "not answerable", "cannot be answered",
     "not mentioned in the document", "no information", ...) extracts to "Not answerable";
  3. citation markers are removed ("[1]", "[2, 3]", "[p. 4]", "(page 4)", "(doc.pdf, p. 3)");
  4. a leading "Answer:" / "The answer is" / "Final answer:" is dropped, and only the first
     line and its first sentence are kept;
  5. an Int or Float question (``answer_format``) keeps the first number of it (with its %
     sign); a List question keeps the first list literal of the answer (``['a', 'b']``,
     ``[16, 19]``, ``[]``: quoted items, a comma or empty; taken before step 3, so a
     citation like "[2, 3]" can be mistaken for one) when it has one;
  6. a trailing full stop is dropped.

- **EM / token F1** (SQuAD, HotpotQA): lower-case, drop punctuation and the articles a, an,
  the, collapse whitespace (``qa_metrics.normalise_answer``); the best over the gold answers
  (aliases). A List question (``answer_format`` "List", gold like ``"['green', 'yellow']"``)
  compares items: EM when the normalised item sets are equal, F1 the F1 of the item sets
  (an item matches an equal normalised item).
- **Inclusion accuracy** (BookRAG): 1 when a normalised gold answer occurs, on word
  boundaries, in the normalised generated answer (a List gold: every item occurs).
- **Unanswerable questions** (MMLongBench's "Not answerable", ``answer_format`` None) are scored
  as MMLongBench does: correct (EM, F1 and inclusion 1) when the answer declines
  (``says_unanswerable``), else 0; an answer that declines an answerable question scores 0.
"""

from __future__ import annotations

import ast
import re

from bookindex.operators.eval.qa_metrics import exact_match, normalise_answer, token_f1

NOT_ANSWERABLE = "Not answerable"
LIST = "List"
NUMERIC = ("Int", "Float")
_DECLINES = re.compile(
    r"\b(not answerable|unanswerable|cannot be answered|can ?not be determined|"
    r"can't be (answered|determined)|(is|are) not (mentioned|provided|stated|given|specified|"
    r"available|found|shown)|no (information|answer|mention)|does not (say|mention|provide|"
    r"contain|specify|state)|insufficient information|not enough information)\b",
    re.IGNORECASE,
)
_CITATION = re.compile(
    r"\s*(\[(\d+(\s*[,;-]\s*\d+)*|p+\.?\s*\d+[^\]]*|[^\]]*\.pdf[^\]]*)\]"
    r"|\((pages?|p+\.)\s*\d+[^)]*\)|\([^)]*\.pdf[^)]*\))",
    re.IGNORECASE,
)
_LEAD = re.compile(
    r"^\s*(final answer|short answer|answer)\s*[:\-]\s*|^\s*the (final |short )?answer is\s*:?\s*",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[^\d\s][.!?])\s|(?<=\d[.!?])\s+(?=[A-Z])")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?\s*%?")
_LIST_LITERAL = re.compile(r"\[[^\[\]]*\]")


def says_unanswerable(text: str | None) -> bool:
    """Whether an answer declines: it says the question is not answerable from the document."""
    return bool(text) and bool(_DECLINES.search(str(text)))


def is_unanswerable(answers: list[str]) -> bool:
    """Whether the gold says the question has no answer in the document."""
    return any(normalise_answer(a) == normalise_answer(NOT_ANSWERABLE) for a in answers)


def rule_extract(generated: str | None, answer_format: str = "") -> str:
    """The short answer of a generated answer by the rule of the module's docstring."""
    text = (generated or "").strip()
    if not text:
        return ""
    if says_unanswerable(text):
        return NOT_ANSWERABLE
    if answer_format == LIST:  # before the citations go: "[16, 19, 25]" looks like one
        for found in _LIST_LITERAL.finditer(text):
            literal = found.group(0)
            if literal == "[]" or "'" in literal or '"' in literal or "," in literal:
                return literal
    text = _CITATION.sub("", text)
    text = _LEAD.sub("", text.strip())
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = _SENTENCE_END.split(text, maxsplit=1)[0].strip()
    if answer_format in NUMERIC:
        number = _NUMBER.search(text)
        if number:
            return re.sub(r"\s+%", "%", number.group(0).strip())
    return text.rstrip(".").strip()


def list_items(text: str) -> list[str] | None:
    """The normalised items of a list answer: a list literal (``['a', 'b']``, ``[16, 19]``), or
    else text split on commas, semicolons and "and"; None when ``text`` is not a list literal
    and holds no separator."""
    text = (text or "").strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = [p for p in re.split(r",", text[1:-1])]
        if isinstance(value, (list, tuple)):
            return [n for n in (normalise_answer(str(v)) for v in value) if n]
    parts = [p for p in re.split(r",|;|\band\b", text) if p.strip()]
    if len(parts) < 2:
        return None
    return [n for n in (normalise_answer(p) for p in parts) if n]


def _list_scores(prediction: str, gold: str) -> tuple[float, float] | None:
    """(EM, F1) of two item lists; None when ``gold`` is not a list."""
    gold_items = list_items(gold)
    if gold_items is None or not (gold.strip().startswith("[")):
        return None
    predicted = list_items(prediction)
    if predicted is None:
        single = normalise_answer(prediction)
        predicted = [single] if single else []
    gold_set, pred_set = set(gold_items), set(predicted)
    em = float(gold_set == pred_set)
    common = len(gold_set & pred_set)
    if not gold_set or not pred_set:
        return em, em
    if common == 0:
        return em, 0.0
    precision, recall = common / len(pred_set), common / len(gold_set)
    return em, 2 * precision * recall / (precision + recall)


def answer_em_f1(extracted: str, answers: list[str], answer_format: str = "") -> dict[str, float]:
    """EM and F1 of an extracted answer: the best over the gold answers; unanswerable and list
    questions as the module's docstring says."""
    answers = [str(a) for a in answers if str(a).strip()]
    if not answers:
        return {}
    if is_unanswerable(answers):
        right = float(says_unanswerable(extracted) or extracted.strip() == NOT_ANSWERABLE)
        return {"em": right, "f1": right}
    if says_unanswerable(extracted):
        return {"em": 0.0, "f1": 0.0}
    if answer_format == LIST:
        scored = [s for s in (_list_scores(extracted, a) for a in answers) if s is not None]
        if scored:
            return {"em": max(s[0] for s in scored), "f1": max(s[1] for s in scored)}
    return {"em": exact_match(extracted, answers), "f1": token_f1(extracted, answers)}


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def inclusion(generated: str | None, answers: list[str], answer_format: str = "") -> float:
    """1.0 when a normalised gold answer occurs, on word boundaries, in the normalised
    generated answer (a List gold: all of its items); unanswerable questions: when the answer
    declines. Empty answers: 0."""
    answers = [str(a) for a in answers if str(a).strip()]
    text = generated or ""
    if is_unanswerable(answers):
        return float(says_unanswerable(text))
    if not text.strip() or says_unanswerable(text):
        return 0.0
    haystack = normalise_answer(text)
    for answer in answers:
        items = list_items(answer) if answer_format == LIST and answer.strip()[:1] == "[" else None
        if items is not None:
            if items and all(_contains(haystack, item) for item in items):
                return 1.0
            if not items and list_items(text) == []:
                return 1.0
        elif _contains(haystack, normalise_answer(answer)):
            return 1.0
    return 0.0
