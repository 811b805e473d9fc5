"""Linking text to the entities of the index by their names, and splitting text into sentences.

``EntityLinker`` finds, in a query or a chunk, every entity whose canonical name or alias
occurs as a whole run of words (case- and punctuation-normalised, up to ``max_words`` words).
A dictionary of normalised names makes this one lookup per word n-gram of the text: no scan
over the entity table, so linking a query costs the same for 1k or 1M entities. Names that are
one stop word, or shorter than ``min_chars``, are not linked. Two options serve query linking
and title matching: ``fold_accents`` (a linker that compares names without diacritics:
"Aschenbrodel" finds "Aschenbrödel") and ``link(text, capitalised=True)`` (a run of words
counts only when one of its words is capitalised in the text, so "the state" does not link the
entity "State" while "State of Palestine" still does).

Title entities (``title_links``): in a passage corpus built from an encyclopedia, the passage
title names what the passage is about, and another passage that names that title in its text
points at it, like a hyperlink. Every distinct title becomes one entity, linked to the passages
with that title and to every passage whose text names it (``title_forms``: the title, without a
trailing parenthetical qualifier, without a leading "The").
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict

from bookindex.operators.graph.resolution import normalise_name
from bookindex.operators.kinds import LEAF_KINDS

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
_WORD = re.compile(r"[\w&]+")
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")


def sentences(text: str, min_chars: int = 20) -> list[str]:
    """Sentences of a passage (a regex splitter: fast, and good enough for encyclopedic prose);
    fragments shorter than ``min_chars`` join the sentence before them."""
    text = text or ""
    return [" ".join(text[a:b] for a, b in group) for group in _sentence_pieces(text, min_chars)]


def sentence_spans(text: str, min_chars: int = 20) -> list[tuple[int, int]]:
    """Where each of ``sentences(text)`` lies in ``text``: (first character, end), from its
    first piece's start to its last piece's end."""
    return [(group[0][0], group[-1][1]) for group in _sentence_pieces(text or "", min_chars)]


def _sentence_pieces(text: str, min_chars: int) -> list[list[tuple[int, int]]]:
    """The (start, end) of the stripped pieces ``_SENTENCE`` cuts ``text`` into, grouped by
    sentence (a piece shorter than ``min_chars`` joins the group before it)."""
    bounds, start = [], 0
    for cut in _SENTENCE.finditer(text):
        bounds.append((start, cut.start()))
        start = cut.end()
    bounds.append((start, len(text)))
    groups: list[list[tuple[int, int]]] = []
    for a, b in bounds:
        piece = text[a:b]
        stripped = piece.strip()
        if not stripped:
            continue
        a += len(piece) - len(piece.lstrip())
        b = a + len(stripped)
        if groups and len(stripped) < min_chars:
            groups[-1].append((a, b))
        else:
            groups.append([(a, b)])
    return groups


def chunk_sentences(kind: str, text: str | None, title: str | None) -> list[str]:
    """The chunks Chunk-Zoom ranks of one node of a passage: the sentences of a leaf's text
    (else its title); none for a non-leaf. The index job embeds exactly these
    (``pipelines.enrich_worker``), the view splits them again when it reads the index
    (operators/query/documents.py); here, beside ``sentences``, so that the enrich process
    imports neither the query side nor its libraries."""
    return sentences(text or title or "") if kind in LEAF_KINDS else []


def strip_accents(text: str) -> str:
    """``text`` without diacritics (NFKD, combining marks dropped): "Tekezé" -> "Tekeze"."""
    if text.isascii():  # NFKD leaves ASCII as it is, and it has no combining marks
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def title_forms(title: str) -> list[str]:
    """The names a passage title is cited by: the title itself, the title without a trailing
    parenthetical qualifier ("Lilu (mythology)" -> "Lilu"), and each of those without a leading
    "The" ("The Rank Organisation" -> "Rank Organisation"). First the title, no repeats."""
    forms = [title.strip()]
    forms.append(_QUALIFIER.sub("", forms[0]).strip())
    forms += [f[4:].strip() for f in list(forms) if f[:4].lower() == "the "]
    return list(dict.fromkeys(f for f in forms if f))


class EntityLinker:
    def __init__(
        self,
        names: list[list[str]],
        max_words: int = 8,
        min_chars: int = 3,
        fold_accents: bool = False,
    ) -> None:
        """``names[i]``: the canonical name and aliases of entity ``i``. ``fold_accents``:
        names and texts are compared without diacritics."""
        self.max_words = max_words
        self.fold_accents = fold_accents
        self._by_name: dict[str, list[int]] = defaultdict(list)
        for position, forms in enumerate(names):
            for form in {self._normalise(f) for f in forms if f}:
                if len(form) < min_chars or form in STOP_WORDS:
                    continue
                if len(form.split()) > max_words:
                    continue
                self._by_name[form].append(position)
        # first word of a name -> most words of a name starting with it: ``link`` tries only
        # the spans that can be a name (the same names found, without joining every span)
        self._first: dict[str, int] = {}
        self._prefixes: set[str] = set()  # every name's leading words ("new", "new york", ...)
        for form in self._by_name:
            words = form.split()
            self._first[words[0]] = max(self._first.get(words[0], 0), len(words))
            self._prefixes.update(" ".join(words[:n]) for n in range(1, len(words) + 1))
        self._forms_of: dict[int, list[str]] | None = None  # link_among's, built on first use

    def __len__(self) -> int:
        return len(self._by_name)

    def link_among(self, texts: list[str], allowed: set[int]) -> list[list[int]]:
        """Per text, ``[e for e in self.link(text) if e in allowed]``, looking up only the
        names of the ``allowed`` entities (Chunk-Zoom links a document's chunks to that
        document's own entities: a few names, not the corpus's)."""
        if self._forms_of is None:  # entity -> its normalised names (once, on first use)
            forms_of: dict[int, list[str]] = defaultdict(list)
            for form, positions in self._by_name.items():
                for position in positions:
                    forms_of[position].append(form)
            self._forms_of = forms_of
        first: dict[str, int] = {}
        for entity in allowed:
            for form in self._forms_of.get(entity, ()):
                words = form.split()
                first[words[0]] = max(first.get(words[0], 0), len(words))
        out = []
        for text in texts:
            found: dict[int, None] = {}
            words = self._normalise(text).split() if first else []
            for start in range(len(words)):
                longest = first.get(words[start])
                if longest is None:
                    continue
                for stop in range(min(len(words), start + longest), start, -1):
                    for position in self._by_name.get(" ".join(words[start:stop]), ()):
                        if position in allowed:
                            found.setdefault(position, None)
            out.append(list(found))
        return out

    def _normalise(self, text: str) -> str:
        return normalise_name(strip_accents(text) if self.fold_accents else text)

    def _words(self, text: str) -> tuple[list[str], list[bool]]:
        """The normalised words of ``text`` and, for each, whether it is capitalised there
        (starts with an upper-case letter or a digit)."""
        raw = unicodedata.normalize("NFKC", text or "")
        words, capitalised = [], []
        for token in _WORD.findall(strip_accents(raw) if self.fold_accents else raw):
            # an ASCII token ([A-Za-z0-9_&]+) normalises to itself in lower case
            normalised = (token.lower(),) if token.isascii() else normalise_name(token).split()
            cap = token[0].isupper() or token[0].isdigit()
            for word in normalised:
                words.append(word)
                capitalised.append(cap)
        return words, capitalised

    def link(self, text: str, capitalised: bool = False) -> list[int]:
        """Entities named in ``text``, in order of first occurrence, each once. With
        ``capitalised``, a name counts only where one of its words is capitalised in the text."""
        if capitalised:
            words, caps = self._words(text)
        else:
            words, caps = self._normalise(text).split(), []
        found: dict[int, None] = {}
        first, by_name, prefixes = self._first, self._by_name, self._prefixes
        for start in range(len(words)):
            longest = first.get(words[start])
            if longest is None:
                continue
            # the names starting here, shortest first: a span is extended only while it is
            # the start of some name (a name's every leading part is in ``prefixes``)
            last = min(len(words), start + longest)
            span, stop, names = words[start], start + 1, []
            while True:
                positions = by_name.get(span)
                if positions:
                    names.append((stop, positions))
                if stop == last:
                    break
                span += " " + words[stop]
                stop += 1
                if span not in prefixes:
                    break
            for stop, positions in reversed(names):  # longest first, as the names are found
                if not caps or any(caps[start:stop]):
                    for position in positions:
                        found.setdefault(position, None)
        return list(found)


def title_links(
    titles: list[str], bodies: list[str], max_words: int = 10
) -> tuple[list[list[str]], list[tuple[int, int]], list[int]]:
    """Title entities of a passage corpus: (names of each distinct title, canonical first;
    (passage, title entity) links; each passage's own title entity, -1 for none). A passage
    links to its own title's entity and to the entity of every title its body names
    (capitalised, accents folded); ``bodies[i]`` is the text of passage ``i`` without its
    title. Passages with an empty title own no entity."""
    key_of: dict[str, int] = {}
    names: list[list[str]] = []
    own: list[int] = []
    for title in titles:
        key = normalise_name(strip_accents(title or ""))
        if not key:
            own.append(-1)
            continue
        if key not in key_of:
            key_of[key] = len(names)
            names.append(title_forms(title))
        own.append(key_of[key])
    linker = EntityLinker(names, max_words=max_words, fold_accents=True)
    links: list[tuple[int, int]] = []
    for passage, (entity, body) in enumerate(zip(own, bodies, strict=True)):
        named = dict.fromkeys(([entity] if entity >= 0 else []) + linker.link(body, True))
        links += [(passage, e) for e in named]
    return names, links, own
