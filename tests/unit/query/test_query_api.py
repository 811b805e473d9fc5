"""The query API on a real paper (MMLongBench 2303.05039v2.pdf, 9 pages: Tables 1–6, Figures 1–2,
numbered sections), indexed in memory (conftest.py): each BookRAG operator, the DeepRead and
LAD-RAG tools, the agents, the one ``answer`` call and its handling of bad requests, and the
configuration each reads."""

from __future__ import annotations

import numpy as np
import pytest

from bookindex.operators.config import BookindexConfig, QueryConfig, RelevanceConfig, WalkConfig
from bookindex.operators.query import bookrag as bookrag_agent
from bookindex.operators.query import bookrag_ops as ops
from bookindex.operators.query import deepread, ladrag, scoring
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.registry import QUERY_METHODS
from bookindex.operators.query.rules import (
    GLOBAL,
    MULTI,
    SINGLE,
    classify,
    global_spec,
    split_question,
)
from tests.conftest import PAPER


def _caption(index, position: int) -> str:
    return (index.title[position] or index.text[position]).strip()


def _labelled(index, doc: int, kind: str, label: str) -> int:
    """The node of a kind whose caption starts with a label such as 'Table 3'."""
    for p in index.scope(doc).tolist():
        if index.kind[p] == kind and _caption(index, p).startswith(label):
            return p
    raise AssertionError(f"no {kind} captioned {label!r}")


# ---- rules --------------------------------------------------------------------------------------
def test_questions_are_classified_by_what_they_need():
    assert classify("How many tables are in Section 3?") == GLOBAL
    assert classify("How many figures are on pages 3-10?") == GLOBAL
    assert classify("How many users are in the Amazon-music dataset?") == SINGLE
    assert (
        classify("Which group is larger? Republicans who are hispanic, or no leans who are male?")
        == MULTI
    )
    spec = global_spec("How many figures are on pages 3-10?")
    assert spec["operation"] == "COUNT"
    assert {"filter_type": "page", "filter_value": "3-10"} in spec["filters"]
    assert {"filter_type": "image", "filter_value": None} in spec["filters"]
    assert split_question(
        "Which is greater in 2018? Foreign born Latinos, or cellphone users?"
    ) == [
        "Which is greater in 2018? Foreign born Latinos",
        "Which is greater in 2018? cellphone users",
    ]


# ---- BookRAG operators --------------------------------------------------------------------------
def test_filters_select_by_modality_page_and_section(index, doc):
    scope = index.scope(doc)
    tables = ops.filter_modal(index, scope, "table")
    assert tables.size >= 5 and set(index.kind[tables]) == {"table"}
    on_page_4 = ops.filter_range(index, tables, pages="4-4")
    captions = sorted(_caption(index, p)[:7] for p in on_page_4)
    assert captions == ["Table 1", "Table 2", "Table 3"]
    # the page sets "3 DATASET CONSTRUCTION"; the heading takes its bookmark's "3 Dataset
    # Construction" (sections.entry_title)
    toc = index.toc(doc)
    section_3 = next(e["sec_id"] for e in toc if e["title"].upper().startswith("3 DATASET"))
    in_section = ops.filter_range(index, tables, sections=[section_3])
    assert set(in_section.tolist()) >= set(on_page_4.tolist())
    assert _labelled(index, doc, "table", "Table 5") not in in_section


def test_extract_and_select_by_entity_reach_the_sections_that_name_it(index, doc):
    scope = index.scope(doc)
    entities = ops.extract(index, "How many reviews does the Amazon-beauty dataset have?", scope)
    names = [index.entity_names[e][0].lower() for e in entities]
    assert any("amazon" in n for n in names), names
    selected, targets = ops.select_by_entity(index, scope, entities, depth=2)
    assert targets and selected.size < scope.size
    mentioned = np.asarray(index.mentions[scope][:, entities].sum(axis=1)).ravel() > 0
    assert set(scope[mentioned].tolist()) <= set(selected.tolist())


def test_graph_reasoning_scores_the_nodes_of_the_seed_entity_first(index, engine, doc):
    leaves = index.leaves(doc)
    entities = ops.extract(index, "Amazon-beauty", leaves)
    assert entities
    scores = ops.graph_reasoning(index, leaves, [entities, []], engine.walk)
    assert scores.shape == (2, leaves.size)
    assert not scores[1].any()  # a row without seeds scores nothing, and does not leak
    seeded = np.asarray(index.mentions[leaves][:, entities].sum(axis=1)).ravel() > 0
    assert scores[0][seeded].mean() > scores[0][~seeded].mean()


def test_skyline_keeps_the_pareto_front_then_the_next_layers():
    positions = np.arange(6)
    graph = np.array([0.9, 0.1, 0.5, 0.4, 0.05, 0.0])
    text = np.array([0.1, 0.9, 0.5, 0.4, 0.05, 0.0])
    front, _ = ops.skyline_ranker(positions, [graph, text], min_keep=1, max_keep=10)
    assert sorted(front.tolist()) == [0, 1, 2]  # 3 is dominated by 2
    layered, _ = ops.skyline_ranker(positions, [graph, text], min_keep=4, max_keep=5)
    assert layered.tolist() == [0, 1, 2, 3]  # the front (tied sums: document order), then {3}


# ---- the BookRAG agent --------------------------------------------------------------------------
def test_global_questions_count_checked_nodes(index, engine, doc):
    result = bookrag_agent.run(
        index, "How many figures are in this paper?", index.scope(doc), engine.walk, k=5
    )
    assert result.query_class == GLOBAL
    assert result.answer == "2"  # Figure 2's ten panels are one figure
    images = ops.filter_modal(index, index.scope(doc), "image")
    assert images.size > 2  # the bare filter count would be wrong
    assert result.plan == ["Classify", "Plan_Filters", "Filter_Modal", "Map", "Reduce", "Fill"]
    on_page = bookrag_agent.run(
        index, "How many tables are on page 4?", index.scope(doc), engine.walk, k=5
    )
    assert on_page.answer == "3"
    assert {index.page_start[p] for p in on_page.evidence[:3]} == {4}


def test_a_global_question_s_kept_items_leave_the_rest_of_k_to_the_single_hop_ranking(
    index, engine, doc
):
    """Real paper: page 4's three tables are counted; asked for k = 5 the two units they leave
    go to the structured single-hop plan's best nodes of page 4 not among them (before: 3
    units of 5), and the count stays 3; with k = 3 nothing is added. A question that names no
    pages, or pages the document lacks (page 99: a count of 0), fills from the whole document."""
    question, scope = "How many tables are on page 4?", index.scope(doc)
    filled = bookrag_agent.run(index, question, scope, engine.walk, k=5)
    assert filled.answer == "3" and len(filled.evidence) == 5
    kept = filled.evidence[:3]
    assert set(index.kind[kept]) == {"table"}
    assert {index.page_start[p] for p in filled.evidence} == {4}
    page_4 = ops.filter_range(index, scope, pages=(4, 4))
    single, _ = bookrag_agent.structured_evidence(index, [question], page_4, 5, RelevanceConfig())
    assert filled.evidence[3:] == [p for p in single if p not in kept][:2]
    assert filled.trace[-1]["op"] == "Fill" and filled.trace[-1]["out"] == 2
    exact = bookrag_agent.run(index, question, scope, engine.walk, k=3)
    assert exact.answer == "3" and exact.evidence == kept and exact.plan[-1] == "Reduce"
    nowhere = bookrag_agent.run(index, "How many tables are on page 99?", scope, None, k=5)
    assert nowhere.answer == "0" and len(nowhere.evidence) == 5  # no page 99: the document's
    assert nowhere.trace[-1]["op"] == "Fill" and nowhere.trace[-1]["in"] == scope.size
    figures = bookrag_agent.run(index, "How many figures are in this paper?", scope, None, k=8)
    assert figures.answer == "2" and len(figures.evidence) == 8
    assert len({index.page_start[p] for p in figures.evidence[2:]}) > 1


def test_single_hop_plan_finds_the_table_page(engine):
    question = "How many items in total of Amazon related datasets in the paper?"
    asked = question + " Please write the answer in int format."
    result = engine.answer(asked, "bookrag", PAPER, k=3)  # 9 pages ≥ 3k: spread over pages
    assert result["error"] is None and result["query_class"] in (SINGLE, MULTI)
    assert result["plan"][-2:] == ["Page_Ranker", "Reduce"]
    assert {"Extract", "Select_by_Section", "Text_Reasoning"} <= set(result["plan"])
    pages = [e["page"] for e in result["evidence"]]
    assert 4 in pages and len(pages) == len(set(pages)) == 3  # k units on k pages
    deep = engine.answer(asked, "bookrag", PAPER, k=5)  # 9 pages < 3k: ranked by score alone
    assert len(deep["evidence"]) == 5 and 4 in {e["page"] for e in deep["evidence"]}
    assert result["answer"] and result["answer_type"] == "extractive"
    paper = engine.answer(question, "bookrag_paper", PAPER)
    assert "Skyline_Ranker" in paper["plan"] and "Graph_Reasoning" in paper["plan"]


def test_named_tables_are_found_by_caption_and_ranked_first(index, doc):
    leaves = index.leaves(doc)
    found = ops.referenced_nodes(index, leaves, "What does Table 3 say about Amazon-music?")
    assert [_caption(index, p)[:7] for p in found] == ["Table 3"]
    scores = np.zeros(leaves.size)
    kept, _ = scoring.page_ranker(index, leaves, scores, k=3, forced=found)
    assert kept[0] == found[0] and len({index.page_start[p] for p in kept}) == 3


def test_answer_format_instructions_are_not_searched():
    from bookindex.operators.query.rules import retrieval_text

    assert (
        retrieval_text("How many items? Please write the answer in int format.")
        == "How many items?"
    )
    assert retrieval_text("Round your answer to three decimal places.") == (
        "Round your answer to three decimal places."
    )


# ---- DeepRead -----------------------------------------------------------------------------------
def test_retrieve_widens_dedupes_and_keeps_document_order(index, doc):
    tools = deepread.DeepReadTools(index, doc)
    hits = tools.retrieve("Receptiviti score of a user", k=3, window=(1, 1))
    order = [h.position for h in hits]
    assert order == sorted(set(order))
    scored = [h for h in hits if h.score > 0]
    assert len(scored) == 3 and len(hits) > 3
    for h in hits:
        assert h.doc_id == index.documents[doc].doc_id and h.para_idx >= 1
        assert index.sec_id[h.position] == h.sec_id


def test_read_section_clips_to_the_section(index, doc):
    tools = deepread.DeepReadTools(index, doc)
    entry = max(index.toc(doc), key=lambda e: e["n_paragraphs"])
    n = entry["n_paragraphs"]
    paragraphs = tools.read_section(doc, entry["sec_id"], start=-5, end=n + 10)
    assert [p.para_idx for p in paragraphs] == list(range(1, n + 1))
    assert tools.read_section(doc, entry["sec_id"], start=n + 1) == []
    with pytest.raises(KeyError, match="no section"):
        tools.read_section(doc, 10_000)


def test_deepread_offline_policy_locates_then_reads(engine):
    result = engine.answer(
        "What is the Receptiviti score of user A2GBIFL43U1LKJ?", "deepread", PAPER
    )
    ops = [s["op"] for s in result["trace"]]
    assert ops[0] == "Retrieve" and ops[1:] and set(ops[1:]) == {"ReadSection"}
    assert 4 in {e["page"] for e in result["evidence"]}


# ---- LAD-RAG ------------------------------------------------------------------------------------
def test_graph_filter_is_validated_data(index, doc):
    tools = ladrag.LadRagTools(index, doc)
    tables = tools.graph_filter({"kinds": ["table"], "page_from": 4, "page_to": 4})
    assert len(tables) == 3 and all(index.kind[p] == "table" for p in tables)
    found = tools.graph_filter({"text_contains": "A2GBIFL43U1LKJ", "kinds": ["table"]})
    assert found and all("A2GBIFL43U1LKJ" in index.node_text(p) for p in found)
    for bad, message in [
        ({"kinds": ["tabel"]}, "kinds"),
        ({"page_from": 5, "page_to": 2}, "page_from"),
        ({"code": "__import__('os').system('true')"}, "code"),
        ({"limit": "many"}, "limit"),
        (["kinds"], "JSON object"),
    ]:
        with pytest.raises(ladrag.FilterSpecError, match=message):
            tools.graph_filter(bad)


def test_contextualize_brings_caption_and_community(index, doc):
    tools = ladrag.LadRagTools(index, doc)
    table = _labelled(index, doc, "table", "Table 3")
    context = tools.contextualize(table)
    captions = context["neighbours"].get("caption_of:in", [])
    assert any(_caption(index, c).startswith("Table 3") for c in captions)
    assert context["community"] >= 0 and context["community_members"]
    assert all(index.community[m] == context["community"] for m in context["community_members"])


# ---- the one API --------------------------------------------------------------------------------
@pytest.mark.parametrize("method", QUERY_METHODS)
def test_every_method_answers_in_one_shape(engine, method):
    result = engine.answer("What datasets are used in the study?", method, PAPER, k=5)
    assert result["error"] is None, result["error"]
    assert result["evidence"] and result["plan"] and "total_s" in result["timings"]
    for unit in result["evidence"]:
        assert unit["doc"] == PAPER and unit["page"] >= 1 and unit["text"]
        assert {"doc_id", "node_id", "sec_id", "para_idx", "score"} <= set(unit)


@pytest.mark.parametrize(
    ("question", "method", "doc", "message"),
    [
        ("", "auto", None, "empty"),
        ("   ", "bookrag", None, "empty"),
        ("x" * 5000, "auto", None, "longer"),
        ("what?", "magic", None, "unknown method"),
        ("what?", "auto", "missing.pdf", "no document"),
    ],
)
def test_bad_requests_come_back_as_errors(engine, question, method, doc, message):
    result = engine.answer(question, method, doc)
    assert message in result["error"] and result["evidence"] == []


# ---- the configuration each method reads --------------------------------------------------------
def test_query_config_sets_k_and_the_limits(index, config):
    query = QueryConfig(k=3, retrieve_k=4, max_k=4, max_question_chars=50, ladrag_budget=1)
    engine = QueryEngine(index, config.model_copy(update={"query": query}))
    assert len(engine.answer("What datasets are used?", "dense", PAPER)["evidence"]) == 3
    assert "between 1 and 4" in engine.answer("What datasets?", "dense", PAPER, k=5)["error"]
    assert "longer than 50" in engine.answer("x" * 51, "dense", PAPER)["error"]
    assert len(engine.answer("What datasets are used?", "ladrag", PAPER)["evidence"]) == 3


def test_named_references_and_page_ranker_are_relevance_toggles(index, doc):
    question = ["What does Table 3 say about Amazon-music?"]
    table = ops.referenced_nodes(index, index.leaves(doc), question[0])
    on, on_scores = bookrag_agent.structured_evidence(
        index, question, index.scope(doc), 3, RelevanceConfig()
    )
    assert on[0] == table[0] and on_scores[0] >= 1.0  # named: first, whatever it scored
    off, off_scores = bookrag_agent.structured_evidence(
        index, question, index.scope(doc), 3, RelevanceConfig(named_references=False)
    )
    assert off_scores == sorted(off_scores, reverse=True)
    assert len({int(index.page_start[p]) for p in off}) == 3  # 9 pages ≥ 3 × 3: spread
    leaves = index.leaves(doc)
    scores = scoring.structured_relevance(
        index, question[0], leaves, index.embed(question)[0], relevance=RelevanceConfig()
    )
    top, _ = scoring.page_ranker(
        index, leaves, scores, 3, relevance=RelevanceConfig(page_ranker=False)
    )
    assert top.tolist() == leaves[np.lexsort((leaves, -scores))[:3]].tolist()


def test_page_ranker_spreads_only_over_pages_near_the_best(index, doc):
    """Page_Ranker's floor (off by default): pages scoring under page_floor × the best page's
    are not spread to; the next best nodes fill the rest of k, from the strong pages."""
    leaves = index.leaves(doc)
    pages = index.page_start[leaves]
    strong, second = sorted(set(pages.tolist()), key=lambda p: -(pages == p).sum())[:2]
    scores = np.full(leaves.size, 0.1)
    on_strong = np.flatnonzero(pages == strong)
    scores[on_strong] = np.linspace(1.0, 0.5, on_strong.size)
    scores[np.flatnonzero(pages == second)[0]] = 0.7
    floor = RelevanceConfig(page_floor=0.6, page_runners_up=0, section_first=0)
    kept, kept_scores = scoring.page_ranker(index, leaves, scores, 3, relevance=floor)
    assert [int(index.page_start[p]) for p in kept] == [strong, second, strong]
    assert kept_scores.tolist() == pytest.approx([1.0, 0.7, scores[on_strong[1]]])
    spread, _ = scoring.page_ranker(
        index, leaves, scores, 3, relevance=RelevanceConfig(page_runners_up=0, section_first=0)
    )
    assert len({int(index.page_start[p]) for p in spread}) == 3  # no floor: k pages
    assert spread[:2].tolist() == kept[:2].tolist()


def test_page_ranker_spreads_over_as_many_pages_as_the_scope_holds_per_unit(index, doc):
    """A 9-page paper asked for 5 units: 9 // pages_per_unit (3) pages get their best node,
    best page first, and the next best nodes fill the rest wherever they are; 1 per unit: 5
    pages; more per unit than the scope holds pages: the plain top k."""
    leaves = index.leaves(doc)
    pages = index.page_start[leaves]
    assert len(set(pages.tolist())) == 9
    strong = max(set(pages.tolist()), key=lambda p: (pages == p).sum())
    on_strong = np.flatnonzero(pages == strong)
    assert on_strong.size >= 5
    scores = np.linspace(0.5, 0.1, leaves.size)
    scores[on_strong] = np.linspace(1.0, 0.6, on_strong.size)
    by_score = leaves[np.lexsort((leaves, -scores))].tolist()
    plain = RelevanceConfig(page_runners_up=0, section_first=0)
    kept, _ = scoring.page_ranker(index, leaves, scores, 5, relevance=plain)
    kept_pages = [int(index.page_start[p]) for p in kept]
    assert kept_pages[0] == strong and len(set(kept_pages[:3])) == 3
    assert kept[3:].tolist() == [p for p in by_score if p not in kept[:3]][:2]
    assert kept_pages[3:] == [strong, strong]
    every, _ = scoring.page_ranker(
        index,
        leaves,
        scores,
        5,
        relevance=RelevanceConfig(page_runners_up=0, pages_per_unit=1, section_first=0),
    )
    assert len({int(index.page_start[p]) for p in every}) == 5
    short, _ = scoring.page_ranker(
        index,
        leaves,
        scores,
        5,
        relevance=RelevanceConfig(page_runners_up=0, pages_per_unit=10, section_first=0),
    )
    assert short.tolist() == by_score[:5]


def test_page_ranker_takes_a_page_s_second_node_when_it_outscores_a_new_page_discounted(index, doc):
    """page_repeat: a taken page's next node competes with the pages not yet taken at its score
    (above the scope's lowest) × page_repeat per unit already on its page; 0: one unit a page."""
    leaves = index.leaves(doc)
    pages = index.page_start[leaves]
    strong, second = sorted(set(pages.tolist()), key=lambda p: -(pages == p).sum())[:2]
    scores = np.full(leaves.size, 0.1)
    on_strong = np.flatnonzero(pages == strong)
    scores[on_strong[:3]] = [1.0, 0.95, 0.9]
    scores[np.flatnonzero(pages == second)[0]] = 0.7

    def ranked(repeat: float) -> list[int]:
        relevance = RelevanceConfig(
            page_runners_up=0, pages_per_unit=1, page_repeat=repeat, section_first=0
        )
        kept, _ = scoring.page_ranker(index, leaves, scores, 3, relevance=relevance)
        return kept.tolist()

    # 0.1 + 0.85 × 0.85 beats the second page's 0.7; 0.1 + 0.8 × 0.85² does not
    assert ranked(0.85) == [leaves[on_strong[0]], leaves[on_strong[1]], ranked(0.0)[1]]
    assert [int(index.page_start[p]) for p in ranked(0.85)] == [strong, strong, second]
    assert len({int(index.page_start[p]) for p in ranked(0.0)}) == 3
    assert [int(index.page_start[p]) for p in ranked(1.0)] == [strong] * 3


def test_deepread_scan_window_and_walk_parameters_come_from_the_config(index, doc):
    narrow = deepread.DeepReadTools(index, doc, scan_window=(0, 0))
    hits = narrow.retrieve("Receptiviti score of a user", k=3)
    assert len(hits) == 3 and all(h.score > 0 for h in hits)
    engine = QueryEngine(index, BookindexConfig(walk=WalkConfig(device="cpu", keep_fraction=0.2)))
    assert engine.walk.config.keep_fraction == 0.2
    result = engine.answer("What datasets are used in the study?", "zoom", PAPER, k=100)
    n_leaves = index.leaves(doc).size
    assert result["trace"][-1]["out"] == int(np.ceil(0.2 * result["trace"][-1]["in"]))
    assert len(result["evidence"]) <= n_leaves


@pytest.mark.parametrize(
    ("question", "spec", "count"),
    [
        ("How many tables are on page 4?", {"kinds": ["table", "caption"], "page_from": 4,
                                            "page_to": 4}, True),
        ("What does Table 3 report?", {"text_contains": "Table 3"}, False),
        ("Which charts are in Section 4.2?", {"kinds": ["image", "caption"],
                                              "section_number": "4.2"}, False),
        ("What is on pages 2-3?", {"page_from": 2, "page_to": 3}, False),
        ("Summarise the Related Work section", {"section_title_contains": "Related Work"}, False),
        ("How many users wrote reviews?", None, True),
        ("What datasets are used in the study?", None, False),
    ],
)  # fmt: skip
def test_structural_spec_reads_pages_sections_kinds_and_counts(question, spec, count):
    found, counted = ladrag.structural_spec(question)
    assert counted == count
    if spec is None:
        assert found is None
    else:
        assert found.model_dump(exclude_none=True, exclude={"limit"}) == spec


def test_ladrag_offline_filters_the_graph_when_the_question_names_structure(engine, index, doc):
    """Real paper: a question about the tables of page 4 goes through graph_filter and gets
    the three tables there; one that names no structure goes through semantic_search."""
    result = engine.answer("How many tables are on page 4?", "ladrag", PAPER, k=3)
    assert [s["op"] for s in result["trace"]] == ["graph_filter", "contextualize"]
    tables = [e for e in result["evidence"] if e["kind"] == "table"]
    assert len(tables) == 3 and all(e["page"] == 4 for e in tables)
    named = engine.answer("What does Table 3 show?", "ladrag", PAPER, k=3)
    assert named["trace"][0]["op"] == "graph_filter"
    assert any(e["text"].startswith("Table 3") for e in named["evidence"])
    plain = engine.answer("What datasets are used in the study?", "ladrag", PAPER, k=3)
    assert [s["op"] for s in plain["trace"]] == ["semantic_search", "contextualize"]
    missing = engine.answer("What is on page 99?", "ladrag", PAPER, k=3)
    assert [s["op"] for s in missing["trace"]] == ["graph_filter", "semantic_search",
                                                    "contextualize"]  # fmt: skip
    assert missing["trace"][0]["out"] == 0 and missing["evidence"]


def test_ladrag_fills_the_budget_a_graph_filter_s_matches_leave_open(engine, index, doc):
    """Real paper: "Table 3" matches a few nodes; with a budget of 12 units the matches and
    their context come first and the rest of the budget goes to the scope's leaves in the
    order the search ranks them (before: 4 units of 12)."""
    question, budget = "What does Table 3 show?", 12
    tools = ladrag.LadRagTools(index, doc, engine.config.relevance)
    result = ladrag.offline_policy(tools, question, 6, budget)
    matched, context = result.trace[0], result.trace[1]
    assert matched["op"] == "graph_filter" and 0 < matched["out"] <= context["out"] < budget
    assert len(result.evidence) == budget
    assert index.node_text(result.evidence[0]).startswith("Table 3")
    positions = index.leaves(doc)
    vector = index.embed([question])[0]
    scores = scoring.scented_text_scores(index, question, positions, vector, tools.relevance)
    ranked = [int(positions[i]) for i in np.lexsort((positions, -scores))]
    head = result.evidence[: context["out"]]
    rest = [p for p in ranked if p not in head][: budget - len(head)]
    assert result.evidence[len(head) :] == rest


def _section_page_with(index, doc: int, n: int) -> tuple[int, int]:
    """A (section, page) holding at least ``n`` of the paper's leaves."""
    leaves = index.leaves(doc)
    pairs = list(zip(index.parent[leaves].tolist(), index.page_start[leaves].tolist(), strict=True))
    for pair in dict.fromkeys(pairs):
        if pairs.count(pair) >= n and index.kind[pair[0]] == "section":
            return pair
    raise AssertionError(f"no section holds {n} leaves on one page")


def test_page_ranker_takes_the_answer_section_s_best_nodes_before_spreading(index, doc):
    """section_first: where at least that many of the section_window best nodes sit in the
    best node's section, they are the first units whatever their pages, then spreading goes
    on over the other pages; fewer of them in the window (or 0: off): one unit a page."""
    leaves = index.leaves(doc)
    section, page = _section_page_with(index, doc, 3)
    members = np.flatnonzero((index.parent[leaves] == section) & (index.page_start[leaves] == page))
    scores = np.linspace(0.5, 0.1, leaves.size)
    scores[index.parent[leaves] == section] = 0.0  # the section's other nodes: last
    scores[members[:3]] = [1.0, 0.9, 0.8]
    on = RelevanceConfig(page_runners_up=0, pages_per_unit=1, section_first=3)
    kept, kept_scores = scoring.page_ranker(index, leaves, scores, 5, relevance=on)
    assert kept[:3].tolist() == leaves[members[:3]].tolist()
    assert kept_scores[:3].tolist() == pytest.approx([1.0, 0.9, 0.8])
    rest = [int(index.page_start[p]) for p in kept[3:]]
    assert len(set(rest)) == 2 and page not in rest  # then one unit a page not yet taken
    off_config = RelevanceConfig(page_runners_up=0, pages_per_unit=1, section_first=0)
    off, _ = scoring.page_ranker(index, leaves, scores, 5, relevance=off_config)
    assert len({int(index.page_start[p]) for p in off}) == 5
    scores[members[2]] = 0.0  # two of the five best in the section: not concentrated
    assert (
        scoring.answer_section(leaves[np.lexsort((leaves, -scores))].tolist(), index, on, 5) == []
    )
    two, _ = scoring.page_ranker(index, leaves, scores, 5, relevance=on)
    assert len({int(index.page_start[p]) for p in two}) == 5


def test_ladrag_search_spends_the_answer_section_before_spreading(index, doc):
    """LAD-RAG's search path reads the same rule: the concentrated section's best nodes are
    its first units (one page may give several), then hits and context spread by page."""
    leaves = index.leaves(doc)
    on = RelevanceConfig(section_first=3)
    for question in (
        "What datasets are used in the experiments?",
        "How is the model trained?",
        "What are the limitations of the method?",
        "What related work is discussed?",
    ):
        vector = index.embed([question])[0]
        scores = scoring.scented_text_scores(index, question, leaves, vector, on)
        ranked = leaves[np.lexsort((leaves, -scores))].tolist()
        first = scoring.answer_section(ranked, index, on, 5)
        if first:
            break
    else:
        raise AssertionError("no question's best nodes concentrate in one section")
    tools = ladrag.LadRagTools(index, doc, on)
    result = ladrag.search_policy(tools, question, 5, 10)
    assert result.evidence[: len(first)] == first
    off = RelevanceConfig(section_first=0)
    plain = ladrag.search_policy(ladrag.LadRagTools(index, doc, off), question, 5, 10)
    assert plain.evidence != result.evidence


def test_ladrag_search_ranks_with_the_section_title_s_scent(index, doc):
    """LAD-RAG's search ranks the leaves by their text scores plus the section title's scent
    (BookRAG's weight, ``relevance.section_scent``): asked about each section of the paper by
    its title, more of that section's leaves are among the five best than by text scores
    alone; with the weight 0 the two rankings are one."""
    leaves = index.leaves(doc)
    parents = index.parent[leaves]
    sections = sorted({int(p) for p in parents if p >= 0 and index.kind[p] == "section"})
    assert len(sections) > 10
    relevance = RelevanceConfig()
    in_section = {"text": 0, "scented": 0}
    for section in sections:
        question = f"What does the section {index.node_text(section)} say?"
        vector = index.embed([question])[0]
        text = scoring.text_scores(index, question, leaves, vector, relevance.dense_weight)
        scented = scoring.scented_text_scores(index, question, leaves, vector, relevance)
        for name, scores in (("text", text), ("scented", scented)):
            top = leaves[np.lexsort((leaves, -scores))][:5]
            in_section[name] += int((index.parent[top] == section).sum())
        unscented = RelevanceConfig(section_scent=0)
        plain = scoring.scented_text_scores(index, question, leaves, vector, unscented)
        assert plain.tolist() == text.tolist()
    assert in_section["scented"] > 1.2 * in_section["text"]


def test_page_budget_spreads_to_more_pages_before_filling_wherever(index, doc):
    """``PageBudget.spread_to``: the next of a ranking on pages not yet covered, up to a number
    of pages; then ``fill`` spends the rest on the ranking's best wherever; unspread: nothing."""
    leaves = index.leaves(doc)
    pages = index.page_start[leaves]
    busiest = int(np.bincount(pages).argmax())
    ranked = leaves[pages == busiest].tolist() + leaves[pages != busiest].tolist()
    spent = scoring.PageBudget(index, 6, spread=True)
    spent.spend(ranked[0], 1.0)
    spent.spread_to(ranked, {}, 4)
    taken = list(spent.evidence)
    assert len(taken) == 4 and len({int(index.page_start[p]) for p in taken}) == 4
    new_pages = list(dict.fromkeys(int(index.page_start[p]) for p in ranked[1:]))
    expected = [next(p for p in ranked if index.page_start[p] == page) for page in new_pages]
    assert taken[1:] == [p for p in expected if index.page_start[p] != busiest][:3]
    spent.fill(ranked, {})
    assert list(spent.evidence)[4:] == ranked[1:3]  # then the best nodes, wherever
    unspread = scoring.PageBudget(index, 6, spread=False)
    unspread.spread_to(ranked, {}, 4)
    assert not unspread.evidence


def test_ladrag_s_top_up_adds_pages_up_to_the_scope_s_pages_per_unit(index, doc):
    """Real paper, 9 pages, budget 8: with one page a unit (``pages_per_unit`` 1) what the hits
    and their context leave goes to new pages, so every unit is on a page of its own; with the
    default 3 (3 pages) the top-up spends the ranking's best nodes wherever, on fewer pages."""
    questions = (
        "How is the model trained?",
        "What are the limitations of the method?",
        "What is the main contribution?",
    )
    spread_pages, default_pages = [], []
    for pages_per_unit, out in ((1, spread_pages), (3, default_pages)):
        relevance = RelevanceConfig(pages_per_unit=pages_per_unit, section_first=0)
        for question in questions:
            result = ladrag.search_policy(ladrag.LadRagTools(index, doc, relevance), question, 4, 8)
            assert len(result.evidence) == 8
            out.append(len({int(index.page_start[p]) for p in result.evidence}))
    assert spread_pages == [8, 8, 8]
    assert all(3 <= n < 8 for n in default_pages)
