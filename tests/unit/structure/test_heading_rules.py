"""Heading rules found on the HiPS books, each checked on the book that showed it: apparatus
headings set at note size ("Notes"), titles broken over two body-size lines, and outline
bookmarks that name book furniture rather than sections. The rules alone
(``section_filter_kind="rules"``): they are the learned filter's features and its fallback."""

from __future__ import annotations

import functools
from pathlib import Path

from bookindex.operators.eval.heading_gold import load_hips_gold, score
from bookindex.operators.structure.assemble import extract_headings as _extract
from tests.conftest import missing_shared_data


def extract_headings(pdf: str, use_outline: bool = True) -> list[tuple[int, str, int]]:
    return _extract(pdf, use_outline, section_filter_kind="rules")


def _book(shared_data: Path, prefix: str) -> Path:
    found = sorted((shared_data / "hips" / "PDFs").glob(f"{prefix}*.pdf"))
    if not found:
        missing_shared_data(f"HiPS book {prefix} missing from the shared data")
    return found[0]


@functools.lru_cache(maxsize=8)
def _layout_headings(pdf: Path) -> tuple[tuple[int, str, int], ...]:
    """The book's headings from layout evidence alone (outline off), extracted once for all
    the tests that read the same book."""
    return tuple(extract_headings(str(pdf), use_outline=False))


def test_notes_headings_set_smaller_than_the_text(shared_data):
    # Every chapter of this book ends with "Notes" in 8 pt over 9 pt text; the human TOC
    # lists each of them.
    pdf = _book(shared_data, "access-controlled")
    headings = extract_headings(str(pdf))
    notes = [h for h in headings if h[1] == "Notes"]
    gold_notes = [h for h in load_hips_gold(pdf.stem) if h[1] == "Notes"]
    assert len(gold_notes) >= 38
    assert len(notes) >= len(gold_notes) - 2
    result = score(headings, load_hips_gold(pdf.stem))
    assert result["recall"] >= 0.95, result


def test_title_broken_over_two_lines_is_one_heading(shared_data):
    pdf = _book(shared_data, "advancing-equality")
    titles = {h[1] for h in extract_headings(str(pdf))}
    assert "CONSTITUTIONS’ ABILITY TO ADDRESS LAWS AND POLICIES FUELING GENDER INEQUALITY" in titles
    assert "SOCIOECONOMIC STATUS AND DISCRIMINATORY BARRIERS" in titles
    assert "CONSTITUTIONS’ ABILITY TO ADDRESS LAWS AND" not in titles


def test_furniture_bookmarks_are_not_sections(shared_data):
    # The outline starts with Cover, Half Title, Series Page, Title Page, Copyright Page,
    # Dedication and Table of Contents, none printed as a heading; real outline-only entries
    # ("List of abbreviations") stay.
    pdf = _book(shared_data, "the-regulation-of-megabanks")
    titles = [h[1] for h in extract_headings(str(pdf))]
    for furniture in ("Cover", "Half Title", "Series Page", "Title Page", "Copyright Page"):
        assert furniture not in titles
    assert "List of abbreviations" in titles


def test_paragraph_gap_ignores_footnotes(shared_data):
    # This thesis sets its lettered sections ("A. The Glucoamylase") in body-size italics with
    # a line of space above, and its pages end in long footnotes set far apart. Measured over
    # every block, the "typical paragraph gap" was a footnote's, wider than these headings'
    # space, so they read as emphasis in the flow of the text and were lost.
    pdf = _book(shared_data, "aegis-or-achilles-heel")
    headings = _layout_headings(pdf)
    titles = {(title, page) for _, title, page in headings}
    for title, page in [
        ("A. The Glucoamylase", 16),
        ("E. Concluding Remarks", 42),
        ("C. Rethinking the Role of Homology Language", 37),
    ]:
        assert (title, page) in titles, (title, page)
    assert score(headings, load_hips_gold(pdf.stem))["recall"] >= 0.6


def test_heading_under_a_running_header_is_not_in_the_flow(shared_data):
    # "B. The Patent" opens page 18 right under the running header. Measured to the header,
    # its space above was a paragraph's, so it read as emphasis; the header is furniture.
    pdf = _book(shared_data, "aegis-or-achilles-heel")
    titles = {(title, page) for _, title, page in _layout_headings(pdf)}
    assert ("B. The Patent", 18) in titles
    assert ("C. The Unclaimable Gap May Constitute a Discrimination", 50) in titles


def test_lettered_headings_are_not_list_items(shared_data):
    # This book numbers its lower levels "a) …" and "(1) …" in body-size italics, set apart
    # by a line of space: headings, though they start like list items.
    pdf = _book(shared_data, "the-role-of-the-patent-system")
    headings = _layout_headings(pdf)
    titles = {(title, page) for _, title, page in headings}
    for title, page in [
        ("a) Responsibility for Vulnerable Countries", 24),
        ("b) Push Factors", 24),
        ("(1) Patent Cooperation Treaty", 43),
    ]:
        assert (title, page) in titles, (title, page)
    assert score(headings, load_hips_gold(pdf.stem))["f1"] >= 0.8


def test_numbered_chapter_title_keeps_its_subtitle(shared_data):
    # "1 From women's rights to human rights" (18 pt bold) with its subtitle in 16 pt right
    # below: one title, as the book's contents lists it.
    pdf = _book(shared_data, "women-and-the-un")
    titles = {title for _, title, _ in _layout_headings(pdf)}
    assert (
        "1 From women’s rights to human rights The influence of Pan-American feminism on the "
        "United Nations" in titles
    )
    assert "The influence of Pan-American feminism on the United Nations" not in titles
    # the authors' names in 14 pt italics under every chapter title are bylines, not a level
    assert "Katherine M. Marino" not in titles and "Khushi Singh Rathore" not in titles


def test_cells_of_a_table_without_vertical_rules_are_not_headings(shared_data):
    # Table 3.1 of this book is ruled by horizontal lines only; its bold first-column cells
    # ("Berlin Mandate" beside "28 Mar–7 Apr 1995") looked like headings.
    pdf = _book(shared_data, "climate-change-and-international-shipping")
    headings = _layout_headings(pdf)
    titles = {title for _, title, _ in headings}
    for cell in ("Berlin Mandate", "Cancun Agreements", "Durban Package", "Kyoto Protocol (KP)"):
        assert cell not in titles, cell
    assert score(headings, load_hips_gold(pdf.stem))["recall"] >= 0.85


def test_title_and_series_pages_before_the_contents_are_not_sections(shared_data):
    # Pages 2-3 hold the series page and the title page: large lines, no running text.
    pdf = _book(shared_data, "climate-change-and-international-shipping")
    headings = _layout_headings(pdf)
    early = {title for _, title, page in headings if page <= 3}
    for line in ("Series Editor", "VOLUME 23", "LEIDEN | BOSTON", "Yubing Shi"):
        assert line not in early, line
    assert score(headings, load_hips_gold(pdf.stem))["precision"] >= 0.85


def _mmlongbench(shared_data: Path, name: str) -> Path:
    pdf = shared_data / "mmlongbench" / "documents" / name
    if not pdf.exists():
        missing_shared_data(f"{name} missing from the shared data")
    return pdf


def test_code_furniture_and_chapter_openers_of_a_software_manual(shared_data):
    # A Sphinx manual: commands set in a fixed-pitch face (t1xtt) between the paragraphs,
    # the section name printed beside the page number in the footer of a page or two, and
    # chapter openers set as "CHAPTER" / "ONE" / "PREREQUISITES" on three lines.
    pdf = _mmlongbench(shared_data, "mmdetection-readthedocs-io-en-v2.18.0.pdf")
    headings = _layout_headings(pdf)
    titles = [h[1] for h in headings]
    assert not any(t.startswith(("conda install", "pip install", "python tools/")) for t in titles)
    assert "Chapter 2. Installation" not in titles  # footer beside the page number
    assert "CHAPTER" not in titles and "ONE" not in titles
    chapter = next(h for h in headings if h[1] == "CHAPTER ONE PREREQUISITES")
    section = next(h for h in headings if h[1] == "2.1 Prepare environment")
    assert chapter[2] == 9 and chapter[0] < section[0]
    installation = next(h for h in headings if h[1] == "CHAPTER TWO INSTALLATION")
    assert installation[0] == chapter[0]


def test_a_bare_label_takes_only_a_number(shared_data):
    # "Appendix" on its own line above "Methods" is a part and its first chapter (the human
    # TOC lists both), not one title "Appendix Methods".
    pdf = _book(shared_data, "advancing-equality")
    titles = [h[1] for h in _layout_headings(pdf)]
    assert "Appendix Methods" not in titles
    assert "Appendix" in titles and "Methods" in titles


def test_numbered_heading_with_a_hanging_second_line_is_one_heading(shared_data):
    # "1.4  Challenges and opportunities facing" / "G-SIBs – differences in the future?",
    # the second line indented to the title, set as two blocks that touch.
    pdf = _book(shared_data, "the-regulation-of-megabanks")
    headings = _layout_headings(pdf)
    titles = [" ".join(h[1].split()) for h in headings]
    assert "1.4 Challenges and opportunities facing G-SIBs – differences in the future?" in titles
    assert "2.1 Regulation before the GFC: Regulatory loopholes and generalization" in titles
    assert "G-SIBs – differences in the future?" not in titles


def test_number_set_apart_beside_a_long_first_line(shared_data):
    # "1.1.1.2" set apart on the left, its title the first line of the paragraph beside it;
    # the title runs to within two ems of the right margin, unlike a justified text line.
    pdf = _book(shared_data, "climate-change-and-international-shipping")
    titles = {h[1] for h in _layout_headings(pdf)}
    assert "1.1.1.2 Contribution of Greenhouse Gas Emissions to Climate Change" in titles
    assert "1.2.2.2 General Emissions Statistics from International Shipping" in titles


def test_numbered_subsections_in_a_style_shared_with_run_in_heads(shared_data):
    # The paper sets "2.1 The Ladder of Causation" and the run-in heads "Rung 1 ("seeing")."
    # in the same bold at text size; the run-in heads make the style read like emphasis, but
    # the numbered lines are still subsections, below their section.
    pdf = _mmlongbench(shared_data, "2312.04350v3.pdf")
    headings = {h[1]: h for h in _layout_headings(pdf)}
    assert "2.1 The Ladder of Causation" in headings
    assert "5.2 Main Results" in headings
    assert (
        headings["2.1 The Ladder of Causation"][0]
        > headings["2 Preliminaries on Causal Inference"][0]
    )
    assert not any(t.startswith("Rung 1") for t in headings)


def test_section_number_beside_a_small_capitals_title(shared_data):
    # "2" at 12 pt beside "RELATED WORK" in small capitals, which PyMuPDF sizes at 9.6 pt.
    pdf = _mmlongbench(shared_data, "2312.09390v1.pdf")
    headings = {h[1]: h for h in _layout_headings(pdf)}
    assert headings["2 RELATED WORK"][2] == 4
    assert headings["4.1 TASKS"][0] > headings["4 MAIN RESULTS"][0]


def test_line_boxes_that_overlap_the_line_above_are_in_the_flow(shared_data):
    # Tightly set text: a line's box starts a point above where the previous block's box
    # ends. Measured past that block, an italic line in the middle of a paragraph looked
    # set apart by 90 pt and became a heading.
    titles = {h[1] for h in _layout_headings(_book(shared_data, "aegis-or-achilles"))}
    assert not any(t.startswith("rived from Talaromyces") for t in titles)
    titles = {h[1] for h in _layout_headings(_book(shared_data, "women-and-the-un"))}
    assert not any(t.startswith("Women.57") for t in titles)


def test_formula_lines_are_not_headings(shared_data):
    headings = _layout_headings(_book(shared_data, "aegis-or-achilles"))
    assert not any(h[1].startswith("C 591") for h in headings)


def test_headings_of_notes_and_an_appendix_in_small_print(shared_data):
    # The book's methods appendix and its notes are set at 9 pt under 10 pt body text; their
    # headings (centred capitals, centred italics) stand out from that small text, not from
    # the body size, and the human TOC lists them.
    headings = {h[1]: h for h in _layout_headings(_book(shared_data, "advancing-equality"))}
    assert headings["1. THE URGENCY OF ADVANCING EQUALITY"][2] == 324
    assert headings["FRAMEWORK FOR COMPARING CONSTITUTIONAL PROTECTIONS"][2] == 315
    assert headings["Approach to Rights Analysis"][2] == 315


def test_two_centred_lines_are_one_title(shared_data):
    # Centred italic titles over two lines, set as two blocks: "…Persisting Inequalities:
    # Advancing" / "Equal Rights on the Basis of Race and Ethnicity".
    titles = {h[1] for h in _layout_headings(_book(shared_data, "advancing-equality"))}
    assert (
        "Chapter 2: Historic Exclusion and Persisting Inequalities: Advancing Equal Rights on "
        "the Basis of Race and Ethnicity" in titles
    )
    assert "Chapter 2: Historic Exclusion and Persisting Inequalities: Advancing" not in titles


def test_numbered_heading_in_the_text_face(shared_data):
    # "1. The Patent Reexamination Board": the text's own face and size, one short line set
    # apart above, stopping well short of the margin; the wrapped first line of a numbered
    # list item reaches the margin and stays text.
    titles = {h[1] for h in _layout_headings(_book(shared_data, "aegis-or-achilles"))}
    assert "1. The Patent Reexamination Board" in titles
    assert "2. The Technical Meaning of Homology" in titles
    paper = {h[1] for h in _layout_headings(_mmlongbench(shared_data, "2312.04350v3.pdf"))}
    assert not any(t.startswith("3. We develop") for t in paper)


def test_levels_follow_chapters_and_numbering(shared_data):
    # Styles met once on the cover (title, author, series) do not push the chapters down;
    # "CHAPTER 1" in small capitals takes the level of the title under it; "1.1" and
    # "1.1.1", set alike, sit one level apart as their numbers say.
    pdf = _book(shared_data, "climate-change-and-international-shipping")
    levels = {h[1]: h[0] for h in _layout_headings(pdf)}
    assert levels["CHAPTER 1 Introduction"] == 1
    assert levels["1.1 Greenhouse Gas Emissions as a Regulatory Challenge"] == 2
    assert levels["1.1.1 Greenhouse Gas Emissions and Climate Change"] == 3


def test_cells_side_by_side_are_not_joined_into_a_title(shared_data):
    # A table's header cells overlap in height ("Table" beside "Performance FY 2013 …") but
    # sit side by side: they are not the two lines of one title.
    pdf = next((shared_data / "docugami").rglob("2017-annual-performance-report.pdf"), None)
    if pdf is None:
        missing_shared_data("2017-annual-performance-report.pdf missing from the shared data")
    on_page_20 = [h[1] for h in _layout_headings(pdf) if h[2] == 20]
    assert not any(t.startswith(("Performance FY 2013", "Table Perf")) for t in on_page_20)


def test_byline_style_with_a_list_of_names_on_one_page(shared_data):
    # Contributors' names under each chapter title, and a page listing them together: the
    # style is a byline style on nearly every page it is on, so it gives no sections.
    titles = [h[1] for h in _layout_headings(_book(shared_data, "a-kind-of-mending"))]
    assert "Sinclair Dinnen" not in titles and "Anita Jowitt" not in titles


def test_contents_with_page_numbers_set_apart(shared_data):
    # The contents set each page number apart at the right, level with its entry; found as
    # a contents page, it makes the sparse pages before it (half title, title page,
    # dedication) front matter with no sections.
    headings = _layout_headings(_book(shared_data, "advancing-equality"))
    assert not [h for h in headings if h[2] <= 8]
    assert any("Urgency of Advancing Equality" in h[1] and h[2] > 12 for h in headings)


def test_entries_on_the_contents_pages_are_not_sections(shared_data):
    # The contents' own entries set as candidates ("Preface", "Part I:") are not sections;
    # the contents' heading is.
    headings = _layout_headings(_book(shared_data, "access-controlled"))
    on_contents = [h[1] for h in headings if h[2] in (6, 7)]
    assert "Contents" in on_contents
    assert "Preface" not in on_contents and "Part I:" not in on_contents


def test_title_under_a_caption_label_belongs_to_the_caption(shared_data):
    # "Table 2.1" on a line of its own, "INDEX OF DEMOCRACY" in capitals right under it: the
    # table's title, not a section.
    titles = {h[1] for h in _layout_headings(_book(shared_data, "access-controlled"))}
    assert "INDEX OF DEMOCRACY" not in titles
    assert "PROFILE OF INTERNET USE, PENETRATION, AND GROWTH IN THE CIS" not in titles


def test_run_in_terms_are_not_headings(shared_data):
    # A glossary sets each term on the line of its definition ("MP3" + "(MPEG-1 Audio Layer
    # 3) is a digital audio encoding …"): a run-in term, not a section.
    titles = {h[1] for h in _layout_headings(_book(shared_data, "access-controlled"))}
    assert not {"MP3", "KB", "MB", "SMS"} & titles
    assert "Glossary of Technical Terms" in titles


def test_folio_heads_and_the_contents_last_page(shared_data):
    # "xii  Acknowledgments": a running head with its roman folio, printed on one page only.
    titles = {h[1] for h in _layout_headings(_book(shared_data, "the-regulation-of-megabanks"))}
    assert not any(t.startswith(("xii ", "xiv ")) for t in titles)
    # The contents end on a page holding its last few entries ("581 United Arab Emirates").
    on_page_8 = [
        h[1] for h in _layout_headings(_book(shared_data, "access-controlled")) if h[2] == 8
    ]
    assert "Tunisia" not in on_page_8 and "599 Index" not in on_page_8
