"""Entity graph: exact-name merging vs. gradient entity resolution, on a passage corpus.

Run from the repo root (progress goes to stderr, the tables to stdout)::

    python -m benchmarks.graph_stats [--corpus musique|hotpotqa|PATH] [--limit N] [--sweep]
        [--sweep-limit N] [--sweep-stage both|corpus] [--sweep-c0 LIST] [--sweep-floor LIST]
        [--cache FILE] [--threads 1]

``--cache FILE`` keeps the extraction and name vectors (a pickle; reused when the corpus file
and ``--limit`` are unchanged). ``--threads`` (default 1): torch and BLAS threads.

Extraction, once, in this process, exactly as the index job does it: every passage of the
JSONL corpus (``operators.structure.passages.read_passages``) becomes its nodes (``passage_nodes``) and
goes through ``extract_document(doc_id, nodes, backend.extract_entities_batch,
title_is_entity=True)`` with the offline backend (spaCy NER, sentence co-occurrence relations).
For speed, spaCy runs once over all passage texts in one ``nlp.pipe``; ``extract_document``
then reads those results. A check on the first passages compares them with one spaCy call per
passage, as the job makes (printed). Entity names are embedded once (``backend.embed`` over the
distinct names; only names, no paragraph vectors).

The SAME extracted entities are then resolved two ways:

* (a) exact: entities with equal ``normalise_name`` are one entity, corpus-wide.
* (b) gradient: as the job does it. Within each document, ``operators.graph.entity_sets.resolve_document``
  (a fresh ``Resolver(dim, id_salt=doc_id)`` over the non-structural entities, relations
  re-pointed); then corpus-wide with ``operators.graph.entity_sets.CorpusEntities`` (one
  ``Resolver``, starting from nothing) over the documents in the job's order (``uri``, then
  ``doc_id``), all in-process, without Ray. Calibration settings (``c0``, ``floor``) apply to
  both stages, as the job's resolver configuration (``ResolverConfig``) does.

Graph (each method): nodes = canonical entities, edges = relations re-pointed to canonical ids,
undirected (relations are sentence co-occurrences), self-loops dropped, parallel edges merged.
Printed: entities, edges, density 2E/(N(N−1)), average degree 2E/N, connected components, size
and diameter of the largest component (exact for ≤ 3,000 nodes, else the 2-sweep lower bound of
``networkx.algorithms.approximation.diameter``; the row says which), and gradient/exact ratios
beside BookRAG's Fig. 6 (gradient ER: ~12 % fewer entities, > 20 % higher density).

Labelled pairs. Every label is a pair of MENTIONS (a name as extracted from one passage), and a
pair is merged when both mentions end up in the same canonical entity (for (b): the mention's
entity in its document → its merged document entity → the corpus entity CorpusEntities gave
it; for (a): equal ``normalise_name``). Mapping mentions rather than bare names keeps a name
that became two entities (as an alias of one and the name of another) unambiguous.

Positives: the passage's title T (the TOPIC entity) and a different name S that spaCy found in
the same passage, where S is a short form of T by one of these rules (names compared
normalised; ``base`` is T without a trailing parenthetical qualifier):

* ``article``: S is T without a leading "The" or a possessive (``clean_name`` of T) — the title
  entity keeps its article, NER names lose it ("The Laramie Project" / "Laramie Project");
* ``qualifier``: S is the base of a disambiguated title ("The Prestige (film)" / "Prestige");
* ``place``: T is "X, Y" with Y found as a PLACE in the passage, and S is X ("Santa Monica,
  California" / "Santa Monica");
* ``surname``: the base is found as a PERSON in the passage, has ≥ 2 words, S is a PERSON and
  is a proper suffix of its words (whitespace words: "Taylor" is no surname of "Samuel
  Coleridge-Taylor"), or its first and last word when it has ≥ 3 words ("Jan Philip Solovej" /
  "Solovej", "Jan Solovej");
* ``acronym``: S is 2–6 capital letters (dots ignored) equal to the initials of the base's words,
  with or without stop words ("New South Wales" / "NSW").

Cross-document positives (a name in another passage, whose title is a different one):

* ``article-xdoc``: S is an unqualified title T without its article ("Bronx" anywhere / the
  title "The Bronx");
* ``place-xdoc``: T is "X, Y" (one comma, no qualifier), S is X and the passage of S also names
  the place Y ("Richmond" in a passage that names "Virginia" / "Richmond, Virginia").

Other sub-spans are NOT positives: "University of Copenhagen" contains "Copenhagen", a different
entity; "Oxford University" is no sub-span of "University of Oxford" at all.

Negatives (different Wikipedia articles are different entities; except for ``qualifier-part``,
a pair is a negative only when the two names are close, i.e. share a word that is not a spaCy
stop word, or their name embeddings have cosine ≥ 0.6):

* ``titles``: the titles of two passages with different (normalised) titles;
* ``alias-title``: a positive's short form S (which is T) and another close title T' ≠ T
  ("Prestige" in the film's passage vs. the title "The Prestige (novel)");
* ``mention-title``: an NER name in any passage equal to a title T1 with no qualifier (by
  Wikipedia's primary-topic rule an unqualified title is the name's main sense; its own passage
  excluded), and another close title T2 ≠ T1 (a "West Virginia" mention vs. "Virginia");
  counted once per (name, T2), first mention in job order;
* within one passage: ``qualifier-part``, the title T and a name equal to a part of its
  qualifier ("Santa Monica, California" / "California", "Black Lake (Michigan)" / "Michigan");
  ``mention-pair``, two close names of the passage equal to two different unqualified titles
  ("Virginia" / "West Virginia").

P = TP / (TP + FP) over the labelled pairs that are merged (merged negatives are false merges),
R = TP / positives, F1 their harmonic mean. Exact-name merging never merges two different names,
so its recall on these positives is 0 by construction; what it shows is its false merges (a
short form equal to another article's title).

Sweep (``--sweep``): the gradient method for ``c0`` ∈ {0.0, 0.1 … 0.7} × ``floor`` ∈ {0.3, 0.5,
0.6, 0.7} (``--sweep-c0``, ``--sweep-floor``; the asked grid was c0 0.3–0.7 × floor 0.3/0.5/0.7,
widened because its best F1 sat at the c0 = 0.3 edge) on the same extraction and vectors
(``--sweep-limit N``: its first N passages only, and the labelled pairs among them), with
P/R/F1, cross-document positives merged, entity count and density beside exact merging, and
the cosine at which a top candidate reaches the floor (c0 + floor·(1 − c0)); the best setting
by F1 is printed. ``--sweep-stage corpus`` varies the corpus stage only, the document stage
keeping the configured defaults.
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path

import networkx as nx
import numpy as np

from bookindex.operators.config import ResolverConfig
from bookindex.operators.graph.entities import TOPIC, NodeExtraction, extract_document
from bookindex.operators.graph.entity_sets import CorpusEntities, resolve_document
from bookindex.operators.graph.resolution import normalise_name
from bookindex.operators.models import ModelConfig
from bookindex.operators.models.offline import OfflineBackend, clean_name
from bookindex.operators.structure.passages import Passage, passage_nodes, read_passages

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPORA = {
    "musique": "multihop/musique/corpus.jsonl",
    "hotpotqa": "multihop/hotpotqa/corpus.jsonl",
}
EXACT_DIAMETER_MAX = 3000
CLOSE_COSINE = 0.6
# The asked grid (c0 0.3–0.7, floor 0.3/0.5/0.7), widened: the best F1 sat at its c0 = 0.3 edge.
SWEEP_C0 = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
SWEEP_FLOOR = (0.3, 0.5, 0.6, 0.7)
BOOKRAG_FIG6 = "BookRAG Fig. 6 (gradient vs. exact): entities ≈ 0.88× (~12 % fewer), density > 1.2×"
_QUALIFIED = re.compile(r"^(.*\S)\s*\([^()]*\)$")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def data_dir() -> Path:
    return Path(os.environ.get("BOOKINDEX_SHARED_DATA") or REPO_ROOT.parent / "shared" / "data")


def corpus_path(corpus: str) -> Path:
    return data_dir() / CORPORA[corpus] if corpus in CORPORA else Path(corpus)


# --------------------------------------------------------------------------- extraction


@dataclass
class Corpus:
    passages: list[Passage]
    extractions: list[NodeExtraction]
    ner: list[list[tuple[str, str]]]  # per passage: (name, type) of the spaCy entities
    names: list[str]  # distinct entity names
    vectors: np.ndarray  # one name vector per entry of ``names``
    row: dict[str, int] = field(default_factory=dict)  # name → row of ``vectors``
    ner_check: str = ""

    def __post_init__(self) -> None:
        self.row = {name: i for i, name in enumerate(self.names)}

    def doc_vectors(self, d: int) -> np.ndarray:
        return self.vectors[[self.row[e.name] for e in self.extractions[d].entities]]

    def subset(self, n: int) -> Corpus:
        return Corpus(
            self.passages[:n], self.extractions[:n], self.ner[:n], self.names, self.vectors
        )


def extract_corpus(path: Path, limit: int | None, threads: int = 1, check: int = 30) -> Corpus:
    passages = [p for p in read_passages(str(path)) if not p.error][:limit]
    backend = OfflineBackend(ModelConfig(torch_threads=threads))
    texts = [p.text for p in passages]
    t0 = time.perf_counter()
    results = backend.extract_entities_batch(texts)  # one spaCy pipe over every passage
    done: dict[str, tuple] = dict(zip(texts, results, strict=True))
    single = [backend.extract_entities_batch([t])[0] for t in texts[:check]]
    same = sum(a == b for a, b in zip(single, results[:check], strict=False))
    ner_check = f"batched NER == one call per passage on the first {len(single)}: {same} equal"
    log(f"NER: {len(passages)} passages in {time.perf_counter() - t0:.0f}s; {ner_check}")

    def cached(batch: list[str]) -> list:
        return [done[t] for t in batch]

    extractions = []
    for p in passages:
        nodes, _ = passage_nodes(p)
        extractions.append(
            extract_document(p.doc_id, [asdict(n) for n in nodes], cached, title_is_entity=True)
        )
    ner = [[(e.name, e.type) for e in done[p.text][0]] if p.text.strip() else [] for p in passages]
    names = sorted({e.name for x in extractions for e in x.entities})
    t0 = time.perf_counter()
    vectors = backend.embed(names)
    log(f"embedded {len(names)} distinct names in {time.perf_counter() - t0:.0f}s")
    return Corpus(passages, extractions, ner, names, vectors, ner_check=ner_check)


# --------------------------------------------------------------------------- resolution


@dataclass
class Resolution:
    method: str
    mention_ids: list[list[str]]  # per passage, per entity of its extraction: canonical id
    nodes: set[str]
    edges: set[tuple[str, str]]
    seconds: float = 0.0


def _edge(a: str, b: str) -> tuple[str, str] | None:
    return None if a == b else (min(a, b), max(a, b))


def resolve_exact(corpus: Corpus) -> Resolution:
    t0 = time.perf_counter()
    ids = [[normalise_name(e.name) for e in x.entities] for x in corpus.extractions]
    edges = {
        edge
        for x, m in zip(corpus.extractions, ids, strict=True)
        for r in x.relations
        if (edge := _edge(m[r.source], m[r.target]))
    }
    nodes = {i for m in ids for i in m}
    return Resolution("exact", ids, nodes, edges, time.perf_counter() - t0)


def job_order(passages: list[Passage]) -> list[int]:
    """The order ``resolve_corpus`` feeds documents to the corpus resolver: uri, doc_id."""
    return sorted(range(len(passages)), key=lambda d: (passages[d].uri, passages[d].doc_id))


def resolve_gradient(
    corpus: Corpus,
    config: ResolverConfig | None = None,
    corpus_config: ResolverConfig | None = None,
) -> Resolution:
    """Within-document then corpus-wide gradient resolution, as the index job runs them
    (``operators.graph.entity_sets``; offline: no model selection, the best-scoring candidate
    wins). ``config``: of both stages (the job's resolver section); ``corpus_config``: of the
    corpus stage alone, when given."""
    t0 = time.perf_counter()
    config = config or ResolverConfig()
    docs: list[dict] = []
    slot_of: list[list[int]] = []
    for d, (passage, extraction) in enumerate(
        zip(corpus.passages, corpus.extractions, strict=True)
    ):
        vectors = corpus.doc_vectors(d)
        merged = resolve_document(passage.doc_id, extraction, vectors, config)
        by_name = {n: s for s, e in enumerate(merged.entities) for n in [e["name"], *e["aliases"]]}
        slot_of.append([by_name[e.name] for e in extraction.entities])
        docs.append(
            {
                "doc_id": passage.doc_id,
                "entities": merged.entities,
                "vectors": vectors[merged.vector_rows],
                "relations": merged.relations,
            }
        )
    corpus_entities = CorpusEntities(corpus.vectors.shape[1], corpus_config or config)
    entity_ids: list[list[str]] = [[] for _ in docs]
    for d in job_order(corpus.passages):
        (result,) = corpus_entities.resolve([docs[d]])
        entity_ids[d] = result["entity_ids"]
    n_canonical = len(corpus_entities)
    ids = [[entity_ids[d][s] for s in slots] for d, slots in enumerate(slot_of)]  # per mention
    edges = {
        edge
        for d, doc in enumerate(docs)
        for r in doc["relations"]
        if (edge := _edge(entity_ids[d][r["source"]], entity_ids[d][r["target"]]))
    }
    nodes = {i for m in entity_ids for i in m}
    assert len(nodes) == n_canonical, (len(nodes), n_canonical)
    return Resolution("gradient", ids, nodes, edges, time.perf_counter() - t0)


# --------------------------------------------------------------------------- graph statistics


def graph_stats(res: Resolution) -> dict:
    graph = nx.Graph()
    graph.add_nodes_from(res.nodes)
    graph.add_edges_from(res.edges)
    n, e = graph.number_of_nodes(), graph.number_of_edges()
    components = list(nx.connected_components(graph))
    largest = graph.subgraph(max(components, key=len)) if components else nx.Graph()
    if largest.number_of_nodes() <= EXACT_DIAMETER_MAX:
        diameter, how = (nx.diameter(largest) if largest.number_of_nodes() else 0), "exact"
    else:
        from networkx.algorithms.approximation import diameter as approx_diameter

        diameter, how = approx_diameter(largest, seed=0), "2-sweep lower bound"
    return {
        "entities": n,
        "edges": e,
        "density": 2 * e / (n * (n - 1)) if n > 1 else 0.0,
        "avg_degree": 2 * e / n if n else 0.0,
        "components": len(components),
        "largest": largest.number_of_nodes(),
        "diameter": diameter,
        "diameter_how": how,
    }


# --------------------------------------------------------------------------- labelled pairs

Mention = tuple[int, int]  # (passage index, entity index in its extraction)


@dataclass
class Pair:
    kind: str
    positive: bool
    a: Mention
    b: Mention
    names: tuple[str, str]


def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def content_words(name: str, stop: frozenset[str]) -> set[str]:
    return {w for w in normalise_name(name).split() if len(w) > 1 and w not in stop}


def _initials(words: list[str]) -> str:
    return "".join(w[0] for w in words if w and w[0].isalpha()).upper()


def short_form_rule(title: str, name: str, ner: list[tuple[str, str]], stop) -> str:
    """Which positive rule (module docstring) makes ``name`` a short form of ``title``; ''."""
    t, s = normalise_name(title), normalise_name(name)
    if not s or s == t:
        return ""
    if s == normalise_name(clean_name(title)):
        return "article"
    match = _QUALIFIED.match(title)
    base = match.group(1) if match else title
    if match and s == normalise_name(clean_name(base)):
        return "qualifier"
    places = {normalise_name(n) for n, typ in ner if typ == "PLACE"}
    head, sep, tail = title.partition(", ")
    in_place = sep and ", " not in tail and normalise_name(tail) in places
    if in_place and s == normalise_name(clean_name(head)):
        return "place"
    types = {normalise_name(n): typ for n, typ in reversed(ner)}
    # whole words as written ("Coleridge-Taylor" is one word: "Taylor" is no surname of it)
    words, short = base.casefold().split(), name.casefold().split()
    if types.get(s) == "PERSON" and types.get(normalise_name(base)) == "PERSON" and len(words) > 1:
        suffix = len(short) < len(words) and words[-len(short) :] == short
        first_last = len(words) >= 3 and short == [words[0], words[-1]]
        if (suffix or first_last) and len(short[-1]) > 1:
            return "surname"
    compact = name.replace(".", "").replace(" ", "")
    if 2 <= len(compact) <= 6 and compact.isalpha() and compact.isupper():
        raw = [w for w in re.split(r"[\s\-–/]+", base) if w]
        content = [w for w in raw if w.lower() not in stop]
        if compact in {_initials(raw), _initials(content)}:
            return "acronym"
    return ""


def labelled_pairs(corpus: Corpus, close_cosine: float = CLOSE_COSINE) -> list[Pair]:
    """Positives and negatives as the module docstring defines them."""
    stop = _stop_words()
    order = job_order(corpus.passages)
    # One mention per distinct title: the TOPIC entity of its first passage (in job order).
    titles: dict[str, Mention] = {}
    title_name: dict[str, str] = {}
    for d in order:
        x = corpus.extractions[d]
        title = corpus.passages[d].title.strip()
        t = normalise_name(title)
        if not t or t in titles:
            continue
        topic = next(i for i, e in enumerate(x.entities) if e.type == TOPIC)
        titles[t], title_name[t] = (d, topic), x.entities[topic].name
    keys = list(titles)
    words = [content_words(title_name[k], stop) for k in keys]
    by_word: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        for w in ws:
            by_word.setdefault(w, []).append(i)
    tvec = corpus.vectors[[corpus.row[title_name[k]] for k in keys]]

    def close_titles(name: str) -> set[int]:
        """Titles sharing a content word with ``name`` or with name cosine ≥ close_cosine."""
        near = {i for w in content_words(name, stop) for i in by_word.get(w, [])}
        sims = tvec @ corpus.vectors[corpus.row[name]]
        return near | set(np.flatnonzero(sims >= close_cosine).tolist())

    pairs: list[Pair] = []
    for i, j in sorted(
        {(min(i, j), max(i, j)) for ids in by_word.values() for i, j in combinations(ids, 2)}
        | {
            (int(i), int(j))
            for i, j in zip(*np.nonzero(np.triu(tvec @ tvec.T >= close_cosine, 1)), strict=True)
        }
    ):
        pairs.append(
            Pair(
                "titles",
                False,
                titles[keys[i]],
                titles[keys[j]],
                tuple(title_name[k] for k in (keys[i], keys[j])),
            )
        )

    # Cross-document positives: "X" for an unqualified title "The X"; "X" for a title "X, Y"
    # when the passage also names the place Y.
    articled = {}
    place_heads = {}
    for k, name in title_name.items():
        if _QUALIFIED.match(name):
            continue
        if normalise_name(clean_name(name)) != k:
            articled[normalise_name(clean_name(name))] = k
        head, sep, tail = name.partition(", ")
        if sep and ", " not in tail:
            place_heads[normalise_name(clean_name(head))] = (k, normalise_name(tail))

    seen_mention_title: set[tuple[str, int]] = set()
    for d in order:
        passage, x = corpus.passages[d], corpus.extractions[d]
        title = passage.title.strip()
        t = normalise_name(title)
        topic = next((i for i, e in enumerate(x.entities) if e.type == TOPIC), None)
        local = {e.name.lower(): i for i, e in enumerate(x.entities)}
        places = {normalise_name(n) for n, typ in corpus.ner[d] if typ == "PLACE"}
        parts = qualifier_parts(title)
        as_titles: list[tuple[str, Mention, str]] = []  # mentions equal to other titles
        for name, _type in corpus.ner[d]:
            mention = (d, local[name.lower()])
            s = normalise_name(name)
            if topic is not None and s in parts and s != t:
                pairs.append(Pair("qualifier-part", False, (d, topic), mention, (title, name)))
            if s in titles and s != t and not _QUALIFIED.match(title_name[s]):
                as_titles.append((s, mention, name))
            if s in articled and articled[s] != t:
                k = articled[s]
                pairs.append(Pair("article-xdoc", True, titles[k], mention, (title_name[k], name)))
            if s in place_heads and place_heads[s][0] != t and place_heads[s][1] in places:
                k = place_heads[s][0]
                pairs.append(Pair("place-xdoc", True, titles[k], mention, (title_name[k], name)))
            rule = short_form_rule(title, name, corpus.ner[d], stop) if topic is not None else ""
            if rule:
                pairs.append(Pair(rule, True, (d, topic), mention, (title, name)))
                for k in sorted(close_titles(name)):
                    if keys[k] != t:
                        pairs.append(
                            Pair(
                                "alias-title",
                                False,
                                mention,
                                titles[keys[k]],
                                (name, title_name[keys[k]]),
                            )
                        )
            elif s in titles and s != t and not _QUALIFIED.match(title_name[s]):
                for k in sorted(close_titles(name)):
                    if keys[k] not in (s, t) and (s, k) not in seen_mention_title:
                        seen_mention_title.add((s, k))
                        pairs.append(
                            Pair(
                                "mention-title",
                                False,
                                mention,
                                titles[keys[k]],
                                (name, title_name[keys[k]]),
                            )
                        )
        for (s1, m1, n1), (s2, m2, n2) in combinations(as_titles, 2):
            close = content_words(n1, stop) & content_words(n2, stop) or (
                float(corpus.vectors[corpus.row[n1]] @ corpus.vectors[corpus.row[n2]])
                >= close_cosine
            )
            if s1 != s2 and m1 != m2 and close:
                pairs.append(Pair("mention-pair", False, m1, m2, (n1, n2)))
    return pairs


def qualifier_parts(title: str) -> set[str]:
    """What qualifies a title, normalised: the parenthetical ("Black Lake (Michigan)" →
    "michigan") and the comma parts after the first ("Goshen Township, Hardin County, Ohio" →
    "hardin county", "ohio"), each also split at its commas."""
    match = _QUALIFIED.match(title)
    base = match.group(1) if match else title
    pieces = base.split(", ")[1:]
    if match:
        inner = title[len(match.group(1)) :].strip()[1:-1]
        pieces += [inner, *inner.split(", ")]
    return {normalise_name(p) for p in pieces if normalise_name(p)}


@dataclass
class Scores:
    tp: int
    fp: int
    positives: int
    negatives: int
    recall_by_kind: dict[str, tuple[int, int]]  # kind → (merged, total)

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float:
        return self.tp / self.positives if self.positives else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision or 0.0, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(res: Resolution, pairs: list[Pair]) -> Scores:
    by_kind: Counter[tuple[str, bool]] = Counter()
    total: Counter[str] = Counter()
    tp = fp = positives = 0
    for pair in pairs:
        merged = res.mention_ids[pair.a[0]][pair.a[1]] == res.mention_ids[pair.b[0]][pair.b[1]]
        total[pair.kind] += 1
        by_kind[pair.kind, merged] += 1
        positives += pair.positive
        tp += pair.positive and merged
        fp += (not pair.positive) and merged
    kinds = {k: (by_kind[k, True], n) for k, n in total.items()}
    return Scores(tp, fp, positives, len(pairs) - positives, kinds)


# --------------------------------------------------------------------------- printing


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def print_graph_table(exact: dict, gradient: dict) -> None:
    rows = [
        ("entities", "{:d}", "entities"),
        ("edges", "{:d}", "edges"),
        ("density 2E/(N(N-1))", "{:.3e}", "density"),
        ("average degree", "{:.3f}", "avg_degree"),
        ("connected components", "{:d}", "components"),
        ("largest component (nodes)", "{:d}", "largest"),
        ("diameter of largest", "{:d}", "diameter"),
    ]
    print(f"{'':28s} {'(a) exact':>12s} {'(b) gradient':>13s} {'gradient/exact':>15s}")
    for label, fmt, key in rows:
        a, b = exact[key], gradient[key]
        ratio = b / a if a else float("nan")
        print(f"{label:28s} {fmt.format(a):>12s} {fmt.format(b):>13s} {ratio:>15.3f}")
    print(f"diameter: (a) {exact['diameter_how']}, (b) {gradient['diameter_how']}")
    print(f"reference: {BOOKRAG_FIG6}")


def print_pair_table(pairs: list[Pair], results: list[tuple[str, Scores]]) -> None:
    kinds = Counter(p.kind for p in pairs)
    pos = sorted({p.kind for p in pairs if p.positive})
    neg = sorted({p.kind for p in pairs if not p.positive})
    print(
        f"labelled pairs: {sum(kinds[k] for k in pos)} positives "
        f"({', '.join(f'{k} {kinds[k]}' for k in pos)}), {sum(kinds[k] for k in neg)} negatives "
        f"({', '.join(f'{k} {kinds[k]}' for k in neg)})"
    )
    print(f"{'method':14s} {'TP':>5s} {'FP':>5s} {'P':>6s} {'R':>6s} {'F1':>6s}   merged/labelled")
    for name, s in results:
        detail = "  ".join(f"{k} {m}/{n}" for k, (m, n) in sorted(s.recall_by_kind.items()))
        print(
            f"{name:14s} {s.tp:5d} {s.fp:5d} {_fmt(s.precision):>6s} {s.recall:6.3f} "
            f"{s.f1:6.3f}   {detail}"
        )


def print_examples(pairs: list[Pair], exact: Resolution, grad: Resolution, n: int = 6) -> None:
    def merged(res: Resolution, p: Pair) -> bool:
        return res.mention_ids[p.a[0]][p.a[1]] == res.mention_ids[p.b[0]][p.b[1]]

    missed = [p for p in pairs if p.positive and not merged(grad, p)]
    false = [p for p in pairs if not p.positive and merged(grad, p)]
    exact_false = [p for p in pairs if not p.positive and merged(exact, p)]
    for label, items in (
        ("gradient missed positives", missed),
        ("gradient false merges", false),
        ("exact false merges", exact_false),
    ):
        shown = "; ".join(f"{p.names[0]!r}~{p.names[1]!r} ({p.kind})" for p in items[:n])
        print(f"  {label} ({len(items)}): {shown}")


def entity_notes(corpus: Corpus) -> None:
    ents = [e for x in corpus.extractions for e in x.entities]
    types = Counter(e.type for e in ents)
    odd = [e.name for e in ents if re.search(r"``|''|\"|[^\w\s&.,'’\-()!?:+/]", e.name)]
    lower = [e.name for e in ents if e.name[:1].islower()]
    print(
        f"extracted: {len(ents)} document entities ({len(corpus.names)} distinct names), "
        f"{sum(len(x.relations) for x in corpus.extractions)} relations "
        f"({', '.join(sorted({r.type for x in corpus.extractions for r in x.relations}))}); "
        f"types: {', '.join(f'{t} {n}' for t, n in types.most_common())}"
    )
    print(
        f"noise: {len(odd)} names with quote/odd characters (e.g. {odd[:4]}), {len(lower)} "
        f"starting lower-case (e.g. {lower[:4]})"
    )


def run_sweep(
    corpus: Corpus, pairs: list[Pair], c0s: list[float], floors: list[float], stage: str = "both"
) -> list[tuple[float, float, Scores, dict]]:
    """``stage``: "both" sets c0 and floor for both stages; "corpus" for the corpus stage only
    (the document stage keeping the defaults)."""
    rows = []
    for c0 in c0s:
        for floor in floors:
            config = ResolverConfig(c0=c0, floor=floor)
            if stage == "corpus":
                res = resolve_gradient(corpus, None, config)
            else:
                res = resolve_gradient(corpus, config)
            s = score(res, pairs)
            rows.append((c0, floor, s, graph_stats_light(res)))
            log(f"sweep c0={c0} floor={floor}: F1 {s.f1:.3f} ({res.seconds:.1f}s)")
    return rows


def graph_stats_light(res: Resolution) -> dict:
    n, e = len(res.nodes), len(res.edges)
    return {"entities": n, "edges": e, "density": 2 * e / (n * (n - 1)) if n > 1 else 0.0}


def print_sweep(rows: list, exact: dict) -> None:
    """``cos≥``: the cosine at which the top candidate reaches the floor, c0 + floor·(1 − c0);
    ``xdoc``: cross-document positives merged / labelled (they are also in P, R and F1)."""
    print(
        f"{'c0':>4s} {'floor':>5s} {'cos>=':>5s} {'P':>6s} {'R':>6s} {'F1':>6s} {'TP':>5s} "
        f"{'FP':>4s} {'xdoc':>6s} {'entities':>9s} {'vs exact':>8s} {'density':>10s} "
        f"{'vs exact':>8s}"
    )
    defaults = ResolverConfig()
    for c0, floor, s, g in rows:
        default = "  (default)" if (c0, floor) == (defaults.c0, defaults.floor) else ""
        xdoc = [v for k, v in s.recall_by_kind.items() if k.endswith("-xdoc")]
        xdoc_text = f"{sum(m for m, _ in xdoc)}/{sum(n for _, n in xdoc)}"
        print(
            f"{c0:4.1f} {floor:5.1f} {c0 + floor * (1 - c0):5.2f} {_fmt(s.precision):>6s} "
            f"{s.recall:6.3f} {s.f1:6.3f} {s.tp:5d} {s.fp:4d} {xdoc_text:>6s} "
            f"{g['entities']:9d} {g['entities'] / exact['entities']:8.3f} "
            f"{g['density']:10.3e} {g['density'] / exact['density']:8.3f}{default}"
        )
    best = max(rows, key=lambda r: (round(r[2].f1, 6), r[2].precision or 0.0, -r[0], -r[1]))
    c0, floor, s, _ = best
    print(
        f"best by F1: c0={c0} floor={floor} (P {_fmt(s.precision)}, R {s.recall:.3f}, "
        f"F1 {s.f1:.3f}); configured defaults c0={defaults.c0} floor={defaults.floor}"
    )


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def load_or_extract(path: Path, limit: int | None, cache: str | None, threads: int) -> Corpus:
    key = (str(path.resolve()), path.stat().st_mtime, limit)
    if cache and Path(cache).exists():
        with open(cache, "rb") as handle:
            stored_key, corpus = pickle.load(handle)
        if stored_key == key:
            log(f"extraction and vectors from {cache}")
            return corpus
    corpus = extract_corpus(path, limit, threads)
    if cache:
        with open(cache, "wb") as handle:
            pickle.dump((key, corpus), handle)
    return corpus


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.graph_stats",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--corpus", default="musique", help="musique, hotpotqa or a JSONL path")
    ap.add_argument("--limit", type=int, default=None, help="first N passages only")
    ap.add_argument("--sweep", action="store_true", help="calibration sweep over c0 × floor")
    ap.add_argument("--sweep-limit", type=int, default=None, help="sweep on the first N passages")
    ap.add_argument(
        "--sweep-stage",
        choices=("both", "corpus"),
        default="both",
        help="corpus: sweep the corpus stage only (the document stage keeps the defaults)",
    )
    ap.add_argument("--sweep-c0", type=_floats, default=list(SWEEP_C0), help="e.g. 0.3,0.5")
    ap.add_argument("--sweep-floor", type=_floats, default=list(SWEEP_FLOOR), help="e.g. 0.5,0.7")
    ap.add_argument("--cache", default=None, help="pickle of the extraction and vectors (reused)")
    ap.add_argument("--threads", type=int, default=1, help="torch and BLAS threads (0: default)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    path = corpus_path(args.corpus)
    from threadpoolctl import threadpool_limits

    # One thread each for BLAS and torch by default: on this shared 2-core machine a second
    # thread made name embedding ~6× and the resolver's small products up to ~20× slower
    # whenever other processes held the cores (one thread is also what a one-CPU Ray actor has).
    if args.threads:
        threadpool_limits(args.threads, "blas")
    corpus = load_or_extract(path, args.limit, args.cache, args.threads)
    dim = corpus.vectors.shape[1]
    exact = resolve_exact(corpus)
    gradient = resolve_gradient(corpus)
    log(f"resolution: exact {exact.seconds:.1f}s, gradient {gradient.seconds:.1f}s")
    stats_a, stats_b = graph_stats(exact), graph_stats(gradient)
    pairs = labelled_pairs(corpus)
    scores = [("(a) exact", score(exact, pairs)), ("(b) gradient", score(gradient, pairs))]

    print(f"corpus: {path} — {len(corpus.passages)} passages; {corpus.ner_check}")
    entity_notes(corpus)
    config = ResolverConfig()
    print(
        f"gradient: g={config.g}, top_k={config.top_k}, c0={config.c0}, floor={config.floor}, "
        f"dim={dim}"
    )
    print()
    print_graph_table(stats_a, stats_b)
    print()
    print_pair_table(pairs, scores)
    print_examples(pairs, exact, gradient)
    if args.sweep:
        sub = corpus.subset(args.sweep_limit) if args.sweep_limit else corpus
        sub_pairs = labelled_pairs(sub) if args.sweep_limit else pairs
        print()
        n_pos = sum(p.positive for p in sub_pairs)
        print(
            f"sweep (gradient, g=0.6; c0 and floor set for "
            f"{'the corpus stage only' if args.sweep_stage == 'corpus' else 'both stages'}) on "
            f"{len(sub.passages)} passages, {n_pos} positives, {len(sub_pairs) - n_pos} negatives:"
        )
        rows = run_sweep(sub, sub_pairs, args.sweep_c0, args.sweep_floor, args.sweep_stage)
        print_sweep(rows, graph_stats_light(resolve_exact(sub)))
    print(f"\nwall time {time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
