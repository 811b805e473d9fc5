"""Linking text to the entities of the index by their names, and splitting text into sentences.

``EntityLinker`` finds, in a query or a chunk, every entity whose canonical name or alias
occurs as a whole run of words (case- and punctuation-normalised, up to ``max_words`` words).
A dictionary of normalised names makes this one lookup per word n-gram of the text: no scan
over the entity table, so linking a query costs the same for 1k or 1M entities. Names that are
one stop word, or shorter than ``min_chars``, are not linked.
"""

from __future__ import annotations

import re
from collections import defaultdict

from operators.resolution import normalise_name

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "he",
        "her",
        "his",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "you",
        "how",
        "did",
        "does",
        "do",
        "first",
        "second",
        "one",
        "two",
        "three",
        "new",
    ]
)
_SENTENCE = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[A-Z0-9\"“(])")


def sentences(text: str, min_chars: int = 20) -> list[str]:
    """Sentences of a passage (a regex splitter: fast, and good enough for encyclopedic prose);
    fragments shorter than ``min_chars`` join the sentence before them."""
    pieces = [p.strip() for p in _SENTENCE.split(text or "") if p and p.strip()]
    out: list[str] = []
    for piece in pieces:
        if out and len(piece) < min_chars:
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


class EntityLinker:
    def __init__(self, names: list[list[str]], max_words: int = 8, min_chars: int = 3) -> None:
        """``names[i]``: the canonical name and aliases of entity ``i``."""
        self.max_words = max_words
        self._by_name: dict[str, list[int]] = defaultdict(list)
        for position, forms in enumerate(names):
            for form in {normalise_name(f) for f in forms if f}:
                if len(form) < min_chars or form in STOP_WORDS:
                    continue
                if len(form.split()) > max_words:
                    continue
                self._by_name[form].append(position)

    def __len__(self) -> int:
        return len(self._by_name)

    def link(self, text: str) -> list[int]:
        """Entities named in ``text``, in order of first occurrence, each once."""
        words = normalise_name(text).split()
        found: dict[int, None] = {}
        for start in range(len(words)):
            for stop in range(min(len(words), start + self.max_words), start, -1):
                for position in self._by_name.get(" ".join(words[start:stop]), ()):
                    found.setdefault(position, None)
        return list(found)
