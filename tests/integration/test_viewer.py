"""The web viewer of ``bookindex serve``, in headless Chromium (``tests/browser.py``) against an
index of the sample corpus and one real paper (MMLongBench's 2303.05039v2.pdf): the login asks
for the token once and again after a wrong one; the corpus lists every document; each heading
tree is the stored ``documents.toc``; a heading opens its page with its box where the node's
stored bbox puts it at the rendered scale; every node starting on a page has its box there; the
running heads dropped as furniture are drawn and are no node; the demo question shows the four
tables as evidence with their boxes, and every method side by side. The page's requests go to
the server alone, with the token in a header and never in an address. Then hostile requests to
the new endpoints (no token, unknown documents, pages and widths out of range, paths): 4xx,
nothing echoed, nothing read outside the index; and a moved or changed PDF.

One server and one browser for the module. Screenshots of each view go to
``$BOOKINDEX_SCREENSHOTS`` (default ``build/viewer-screenshots``), their paths printed.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import secrets
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import httpx
import polars as pl
import pymupdf
import pytest

from bookindex.operators.query.registry import QUERY_METHODS
from bookindex.pipelines.store import catalog, lance_store
from bookindex.pipelines.store.schemas import NODES
from tests.browser import Browser, find_chromium
from tests.conftest import PAPER
from tests.serving import ROOT, bookindex_serve

SCREENSHOTS = Path(os.environ.get("BOOKINDEX_SCREENSHOTS", ROOT / "build" / "viewer-screenshots"))
DEMO = "How many tables are in Chapter 2?"
PX = 1.0  # how far (CSS pixels) a drawn box may sit from the stored bbox at the rendered scale


@dataclass
class Served:
    base: str
    token: str
    index: Path
    corpus: Path  # the paper's folder (the sample books are in the session's sample index's)
    log: Path


@pytest.fixture(scope="module")
def served(sample_index, shared_data, tmp_path_factory):
    """The session's index of the sample corpus, copied, with the paper added (default
    configuration), served."""
    from bookindex.pipelines.index_pipeline import run_index

    root = tmp_path_factory.mktemp("viewer")
    shutil.copytree(sample_index[0], root / "index")
    corpus = root / "corpus"
    corpus.mkdir()
    shutil.copy(shared_data / "mmlongbench" / "documents" / PAPER, corpus / PAPER)
    summary = run_index([str(corpus)], root / "index")
    assert (summary.ok, summary.failed) == (1, 0), summary.failures
    token = secrets.token_urlsafe(24)
    with bookindex_serve(root / "index", root / "serve.log", token) as base:
        yield Served(base, token, root / "index", corpus, root / "serve.log")


@pytest.fixture(scope="module")
def browser(served, tmp_path_factory):
    executable = find_chromium()
    if executable is None:
        if os.environ.get("BOOKINDEX_BROWSER_TESTS") == "required":
            pytest.fail("no chromium on the path; .ci/run installs Debian's chromium")
        pytest.skip("no chromium on the path (apt-get install chromium)")
    with Browser.start(tmp_path_factory.mktemp("chromium"), executable) as found:
        yield found


@pytest.fixture(scope="module")
def logged_in(served, browser):
    """The viewer open in the browser with the token given once."""
    browser.navigate(served.base + "/viewer")
    _visible_login(browser)
    browser.type_into("#token-input", served.token)
    browser.click("#login-button")
    browser.wait_for("document.querySelector('#documents tbody tr')", what="the corpus")
    return browser


def shot(browser: Browser, name: str) -> Path:
    path = browser.screenshot(SCREENSHOTS / name)
    print(f"screenshot: {path}")
    return path


def _visible_login(browser: Browser) -> None:
    browser.wait_for("!document.getElementById('login').hidden", what="the login form")


def _documents(served: Served) -> dict[str, dict]:
    return {d["name"]: d for d in catalog.documents(served.index)}


def _nodes(served: Served) -> pl.DataFrame:
    columns = ["doc_id", "node_id", "kind", "page_start", "bbox", "sec_id", "para_idx", "text"]
    return pl.from_arrow(lance_store.read_table(served.index, NODES, columns))


def _pdf(served: Served, name: str) -> Path:
    """The file the index holds as ``name``."""
    return Path(_documents(served)[name]["uri"])


def _page_width(served: Served, name: str, page: int) -> float:
    with pymupdf.open(_pdf(served, name)) as doc:
        return doc[page - 1].rect.width


def _drawn_box(browser: Browser, selector: str) -> dict:
    """A drawn box relative to its page image (CSS pixels) and the image's width."""
    return browser.evaluate(
        f"""(() => {{
            const box = document.querySelector({json.dumps(selector)});
            const img = box.parentElement.querySelector("img.page-image");
            const b = box.getBoundingClientRect(), i = img.getBoundingClientRect();
            return {{left: b.left - i.left, top: b.top - i.top, right: b.right - i.left,
                     bottom: b.bottom - i.top, width: i.width, node: box.dataset.nodeId}};
        }})()"""
    )


def _assert_at_stored_box(drawn: dict, bbox: list[float], page_width: float) -> None:
    scale = drawn["width"] / page_width
    expected = [v * scale for v in bbox]
    found = [drawn["left"], drawn["top"], drawn["right"], drawn["bottom"]]
    assert all(abs(a - b) <= PX for a, b in zip(found, expected, strict=True)), (found, expected)


# ---- the browser ---------------------------------------------------------------------------------
def test_the_token_is_asked_once_and_a_wrong_one_shows_the_login_again(served, browser):
    browser.navigate(served.base + "/viewer")
    _visible_login(browser)
    assert browser.evaluate("document.querySelector('#documents') === null")
    browser.type_into("#token-input", "w" * 32)
    browser.click("#login-button")
    browser.wait_for(
        "document.getElementById('login-message').textContent.includes('refused')",
        what="the refusal",
    )
    _visible_login(browser)
    assert browser.evaluate("sessionStorage.length") == 0
    shot(browser, "01-login-wrong-token.png")
    browser.type_into("#token-input", served.token)
    browser.click("#login-button")
    browser.wait_for("document.querySelector('#documents tbody tr')", what="the corpus")
    browser.navigate(served.base + "/viewer")  # asked once: a reload keeps it (this tab)
    browser.wait_for("document.querySelector('#documents tbody tr')", what="the corpus again")
    assert browser.evaluate("document.getElementById('login').hidden")
    browser.evaluate("sessionStorage.setItem('bookindex.token', 'x'.repeat(30))")
    browser.navigate(served.base + "/viewer")  # a token the server refuses: the login again
    _visible_login(browser)
    assert "refused" in browser.evaluate("document.getElementById('login-message').textContent")


def test_the_corpus_lists_every_document_with_its_figures(served, logged_in):
    browser = logged_in
    browser.navigate(served.base + "/viewer#/")
    rows = browser.wait_for(
        """(() => { const rows = [...document.querySelectorAll('#documents tbody tr')];
            return rows.length && rows.map((r) => [...r.cells].map((c) => c.textContent)); })()""",
        what="the corpus table",
    )
    stored = _documents(served)
    assert [r[0] for r in rows] == list(stored)  # by uri, as the catalog lists them
    for name, title, status, pages, ocr, nodes, sections, build, _ in rows:
        row = stored[name]
        assert (title, status) == (row["title"] or "", row["status"])
        assert [int(pages), int(ocr), int(nodes), int(sections)] == [
            row["n_pages"],
            row["ocr_pages"],
            row["n_nodes"],
            row["n_sections"],
        ]
        assert build and build != "none"
    assert browser.evaluate("document.getElementById('failures').textContent") == "No failure rows."
    shot(browser, "02-corpus.png")


def test_each_heading_tree_is_the_stored_toc(served, logged_in):
    browser = logged_in
    for name, row in _documents(served).items():
        browser.navigate(f"{served.base}/viewer#/doc/{row['doc_id']}")
        tree = f"#tree[data-doc-id='{row['doc_id']}'] li.toc-entry"
        shown = browser.wait_for(
            f"""(() => {{ const items = [...document.querySelectorAll("{tree}")];
                return items.length && items.map((li) => [Number(li.dataset.secId),
                  Number(li.dataset.level), Number(li.dataset.page),
                  li.querySelector('.heading-title').textContent]); }})()""",
            what=f"the tree of {name}",
        )
        stored = catalog.toc(served.index, name)
        assert shown == [
            [t["sec_id"], t["level"], t["page"], t["title"] or "(untitled)"] for t in stored
        ]
        if name == "sample_00.pdf":
            shot(browser, "03-document-tree.png")
    # collapsible: a heading with children closes and opens
    first = "#tree li.toc-entry:has(> ul) > .heading .toggle"
    child = "#tree li.toc-entry:has(> ul) > ul > li"
    assert browser.evaluate(f"document.querySelector({json.dumps(child)}).offsetParent !== null")
    browser.click(first)
    assert browser.evaluate(f"document.querySelector({json.dumps(child)}).offsetParent === null")
    browser.click(first)
    assert browser.evaluate(f"document.querySelector({json.dumps(child)}).offsetParent !== null")


@pytest.mark.parametrize("name", ["sample_00.pdf", PAPER])
def test_a_heading_opens_its_page_with_its_box_where_the_node_is(served, logged_in, name):
    browser = logged_in
    doc = _documents(served)[name]
    browser.navigate(f"{served.base}/viewer#/doc/{doc['doc_id']}")
    tree = f"#tree[data-doc-id='{doc['doc_id']}'] li.toc-entry"
    browser.wait_for(f'document.querySelector("{tree}")', what="the tree")
    # the second heading below the document's title
    target = browser.evaluate(
        """(() => { const li = [...document.querySelectorAll('#tree li.toc-entry')]
                .filter((e) => Number(e.dataset.level) >= 1)[1];
            li.querySelector('.heading-title').id = 'clicked';
            return {node: li.dataset.nodeId, page: Number(li.dataset.page)}; })()"""
    )
    browser.click("#clicked")
    browser.wait_for(
        "document.querySelector('#page-stage.ready .box.highlight')", what="the highlighted box"
    )
    assert browser.evaluate("location.hash").endswith(
        f"/page/{target['page']}/node/" + target["node"].replace(":", "%3A")
    )
    nodes = _nodes(served).filter(pl.col("doc_id") == doc["doc_id"])
    stored = nodes.filter(pl.col("node_id") == target["node"]).row(0, named=True)
    drawn = _drawn_box(browser, "#page-stage .box.highlight")
    assert drawn["node"] == target["node"]
    _assert_at_stored_box(drawn, stored["bbox"], _page_width(served, name, target["page"]))
    # every node that starts on the page has its box, each where its bbox is
    on_page = [
        row
        for row in nodes.filter(pl.col("page_start") == target["page"]).iter_rows(named=True)
        if row["kind"] != "root" and any(row["bbox"])
    ]
    boxes = browser.evaluate(
        "[...document.querySelectorAll('#page-stage .box:not(.kind-furniture)')]"
        ".map((b) => b.dataset.nodeId)"
    )
    assert sorted(boxes) == sorted(row["node_id"] for row in on_page)
    width = _page_width(served, name, target["page"])
    for row in on_page:
        selector = f"#page-stage .box[data-node-id='{row['node_id']}']"
        _assert_at_stored_box(_drawn_box(browser, selector), row["bbox"], width)
    shot(browser, f"04-page-{Path(name).stem}.png")


def test_a_box_shows_its_coordinates_on_hover_and_opens_its_node(served, logged_in):
    browser = logged_in
    doc = _documents(served)["sample_00.pdf"]
    browser.navigate(f"{served.base}/viewer#/doc/{doc['doc_id']}/page/3")
    stage = f"#page-stage[data-doc-id='{doc['doc_id']}'][data-page='3'].ready"
    browser.wait_for(f'document.querySelector("{stage} .box.kind-text")', what="page 3")
    node_id = browser.evaluate(
        "document.querySelector('#page-stage .box.kind-text').dataset.nodeId"
    )
    stored = _nodes(served).filter(pl.col("node_id") == node_id).row(0, named=True)
    browser.hover(f"#page-stage .box[data-node-id='{node_id}']")
    tip = browser.wait_for(
        "!document.getElementById('tip').hidden && document.getElementById('tip').textContent",
        what="the tooltip",
    )
    assert f"sample_00.pdf · sec {stored['sec_id']} ¶{stored['para_idx']} · p.3" in tip
    shot(browser, "05-hover-coordinates.png")
    browser.click(f"#page-stage .box[data-node-id='{node_id}']")
    text = browser.wait_for("document.getElementById('node-text')?.textContent", what="the node")
    assert text.startswith(stored["text"][:200])
    assert (
        browser.evaluate("document.querySelector('#page-stage .box.highlight').dataset.nodeId")
        == node_id
    )


def test_running_heads_dropped_as_furniture_are_drawn_and_are_no_node(served, logged_in):
    browser = logged_in
    doc = _documents(served)["sample_00.pdf"]
    browser.navigate(f"{served.base}/viewer#/doc/{doc['doc_id']}/page/3")
    stage = f"#page-stage[data-doc-id='{doc['doc_id']}'][data-page='3'].ready"
    boxes = browser.wait_for(
        f"""(() => {{ const b = [...document.querySelectorAll("{stage} .box.kind-furniture")];
            return b.length && b.map((e) => JSON.parse(e.dataset.bbox)); }})()""",
        what="the furniture boxes",
    )
    with pymupdf.open(_pdf(served, "sample_00.pdf")) as pdf:
        height = pdf[2].rect.height
        title = pdf.metadata["title"]
    tops = sorted(boxes, key=lambda b: b[1])
    assert len(tops) == 2 and tops[0][3] < 0.1 * height and tops[1][1] > 0.9 * height
    nodes = _nodes(served).filter((pl.col("doc_id") == doc["doc_id"]) & (pl.col("page_start") == 3))
    for x0, y0, x1, y1 in boxes:  # no node lies over a running head or footer
        for bx0, by0, bx1, by1 in nodes["bbox"].to_list():
            assert min(x1, bx1) <= max(x0, bx0) or min(y1, by1) <= max(y0, by0)
    browser.hover("#page-stage .box.kind-furniture")
    tip = browser.wait_for(
        "!document.getElementById('tip').hidden && document.getElementById('tip').textContent"
    )
    assert "dropped as page furniture" in tip and title[:20] in tip
    shot(browser, "06-page-furniture.png")


def _ask(browser: Browser, served: Served, method: str) -> None:
    """The demo question in the ask view, with ``method`` (``*``: every method)."""
    browser.navigate(served.base + "/viewer#/ask")
    browser.wait_for("document.getElementById('question')", what="the ask form")
    browser.type_into("#question", DEMO)
    assert browser.evaluate("document.getElementById('method').value") == "auto"  # the default
    browser.evaluate(f"document.getElementById('method').value = {json.dumps(method)}")
    browser.click("#ask-button")


def test_the_demo_question_shows_the_four_tables_with_their_boxes(served, logged_in):
    browser = logged_in
    _ask(browser, served, "auto")
    answer = ".answer[data-method=auto]"
    browser.wait_for(  # every evidence unit's page drawn with its box
        f"document.querySelectorAll('{answer} .evidence-item').length > 0 && "
        f"document.querySelectorAll('{answer} .evidence-item').length === "
        f"document.querySelectorAll('{answer} .thumb-stage.ready').length",
        what="the evidence pages with their boxes",
    )
    items = browser.evaluate(
        f"""[...document.querySelectorAll('{answer} .evidence-item')].map((li) =>
            ({{node: li.dataset.nodeId, kind: li.dataset.kind, page: Number(li.dataset.page),
              doc: li.dataset.docId}}))"""
    )
    assert {i["kind"] for i in items} == {"table"}
    # the four sample books' Chapter 2 tables, one each (the paper's section 2 tables too:
    # "Chapter 2" names its second section)
    docs = _documents(served)
    samples = [i for i in items if i["doc"] != docs[PAPER]["doc_id"]]
    assert len(samples) == 4 and len({i["doc"] for i in samples}) == 4
    count = browser.evaluate(f"document.querySelector('{answer} .answer-text').textContent")
    assert count.endswith(f": {len(items)}")
    steps = browser.evaluate(
        "document.querySelectorAll('.answer[data-method=auto] .trace tbody tr').length"
    )
    assert steps >= 3
    nodes = _nodes(served)
    names = {d["doc_id"]: name for name, d in _documents(served).items()}
    for item in items:
        stored = nodes.filter(pl.col("node_id") == item["node"]).row(0, named=True)
        assert stored["kind"] == "table" and stored["page_start"] == item["page"]
        drawn = _drawn_box(browser, f".evidence-item[data-node-id='{item['node']}'] .box")
        _assert_at_stored_box(
            drawn, stored["bbox"], _page_width(served, names[item["doc"]], item["page"])
        )
    shot(browser, "07-ask-demo-question.png")
    first = items[0]
    browser.click(f".evidence-item[data-node-id='{first['node']}'] .evidence-link")
    browser.wait_for(
        "document.querySelector('#page-stage.ready .box.highlight')", what="the evidence's page"
    )
    drawn = _drawn_box(browser, "#page-stage .box.highlight")
    assert drawn["node"] == first["node"]
    stored = nodes.filter(pl.col("node_id") == first["node"]).row(0, named=True)
    _assert_at_stored_box(
        drawn, stored["bbox"], _page_width(served, names[first["doc"]], first["page"])
    )
    shot(browser, "08-evidence-page.png")


def test_every_method_side_by_side(served, logged_in):
    browser = logged_in
    _ask(browser, served, "*")
    browser.wait_for(
        f"document.querySelectorAll('.answer[data-done]').length === {len(QUERY_METHODS)}",
        what="every method's answer",
    )
    columns = browser.evaluate(
        "[...document.querySelectorAll('#answers.side-by-side .answer')]"
        ".map((a) => [a.dataset.method, a.querySelectorAll('.evidence-item').length,"
        " (a.querySelector('.error') || {}).textContent || ''])"
    )
    assert [c[0] for c in columns] == list(QUERY_METHODS)
    assert all(n >= 1 or error for _, n, error in columns), columns  # evidence, or why not
    assert dict((m, n) for m, n, _ in columns)["auto"] >= 4
    browser.wait_for(  # every evidence unit's page drawn, or why not
        "document.querySelectorAll('.evidence-item').length === "
        "document.querySelectorAll('.thumb-stage.ready, .thumb > p').length",
        what="the evidence pages",
    )
    shot(browser, "09-every-method.png")


def test_the_page_talks_to_its_server_alone_with_the_token_in_a_header(served, logged_in):
    browser = logged_in
    urls = [r["url"] for r in browser.requests]
    assert urls and all(u.startswith((served.base + "/", "blob:", "data:")) for u in urls), urls
    assert not any(served.token in u for u in urls)
    prefixes = (served.base + "/viewer/api/", served.base + "/query")
    data = [r for r in browser.requests if r["url"].startswith(prefixes)]
    sent = [r["headers"].get("Authorization") for r in data]
    assert all(s is None or s.startswith("Bearer ") for s in sent)  # none before the login
    assert sent.count(f"Bearer {served.token}") >= 10
    assert any(r["url"].endswith("/image?width=300") for r in data)  # images too, in a header
    assert browser.errors == []


# ---- hostile requests ----------------------------------------------------------------------------
IN_ACCESS, IN_OPEN, IN_NONBLOCK = 0x1, 0x20, 0o4000


class Watch:
    """inotify: who opens or reads anything in a directory (any process)."""

    def __init__(self, directory: Path) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK)
        assert self.fd >= 0
        assert (
            self.libc.inotify_add_watch(self.fd, str(directory).encode(), IN_ACCESS | IN_OPEN) >= 0
        )

    def events(self) -> int:
        count = 0
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return count
            offset = 0
            while offset < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, offset)
                offset += 16 + length
                count += 1

    def close(self) -> None:
        os.close(self.fd)


def test_hostile_requests_are_refused_without_echo_and_nothing_outside_the_index_is_read(
    served, tmp_path
):
    from bookindex.operators.eval.sample_corpus import build_sample_corpus

    canary_dir = tmp_path / "canary"
    build_sample_corpus(canary_dir, n_docs=1, seed=11)
    canary = canary_dir / "sample_00.pdf"
    canary_id = hashlib.sha256(canary.read_bytes()).hexdigest()
    docs = _documents(served)
    assert canary_id not in {d["doc_id"] for d in docs.values()}
    sample = docs["sample_00.pdf"]
    doc, n_pages = sample["doc_id"], sample["n_pages"]
    auth = {"Authorization": f"Bearer {served.token}"}
    api = f"/viewer/api/docs/{doc}"
    marker = "ZZ" + secrets.token_hex(8)  # a string that must never come back
    hostile = [
        (f"/viewer/api/docs/{canary_id}", 404),
        (f"/viewer/api/docs/{canary_id}/pages/1", 404),
        (f"/viewer/api/docs/{canary_id}/pages/1/image", 404),
        (f"/viewer/api/docs/{canary_id}/pages/1/furniture", 404),
        ("/viewer/api/docs/" + str(canary).replace("/", "%2F") + "/pages/1/image", 404),
        ("/viewer/api/docs/..%2F..%2F..%2Fetc%2Fpasswd/pages/1/image", 404),
        ("/viewer/api/docs/" + marker * 500 + "/pages/1", 404),
        (f"/viewer/api/docs/{doc[:12]}/pages/1", 404),  # a prefix names nothing here
        (f"/viewer/api/docs/{doc.upper()}/pages/1", 404),
        (f"{api}/pages/0", 422),
        (f"{api}/pages/-1", 422),
        (f"{api}/pages/{n_pages + 1}", 404),
        (f"{api}/pages/{n_pages + 1}/image", 404),
        (f"{api}/pages/{10**30}", 422),
        (f"{api}/pages/1e3", 422),
        (f"{api}/pages/{marker}", 422),
        (f"{api}/pages/1/image?width=0", 422),
        (f"{api}/pages/1/image?width=63", 422),
        (f"{api}/pages/1/image?width=2401", 422),
        (f"{api}/pages/1/image?width={10**12}", 422),
        (f"{api}/pages/1/image?width=-5", 422),
        (f"{api}/pages/1/image?width={marker}", 422),
        (f"{api}/sections/-1", 422),
        (f"{api}/sections/99999", 404),
        (f"{api}/pages/1/image/../../../../etc/passwd", 404),
        ("/viewer/" + marker, 404),
        ("/viewer/api/" + marker, 404),
    ]
    watch = Watch(canary_dir)
    try:
        with httpx.Client(base_url=served.base, timeout=120) as client:
            for path in (
                "/viewer/api/corpus",
                f"{api}",
                f"{api}/pages/1",
                f"{api}/pages/1/image",
                f"{api}/pages/1/furniture",
                f"{api}/sections/1",
            ):
                for headers in (
                    {},
                    {"Authorization": "Bearer " + "w" * 32},
                    {"Authorization": served.token},
                ):
                    answer = client.get(path, headers=headers)
                    assert answer.status_code == 401, (path, headers)
            folders = (str(served.corpus), str(_pdf(served, "sample_00.pdf").parent))
            for path, status in hostile:
                answer = client.get(path, headers=auth)
                assert answer.status_code == status, (
                    path[:120],
                    answer.status_code,
                    answer.text[:300],
                )
                assert len(answer.content) < 4096
                for secret in (marker, str(canary), canary_dir.name, "passwd", *folders):
                    assert secret not in answer.text, (path[:120], answer.text[:300])
            # within the cap, cached, and sent with its validator
            first = client.get(f"{api}/pages/1/image?width=2400", headers=auth)
            assert first.status_code == 200 and first.headers["content-type"] == "image/png"
            width, height = struct.unpack(">II", first.content[16:24])
            assert 2390 <= max(width, height) <= 2400  # a portrait page: its height capped
            again = client.get(f"{api}/pages/1/image?width=2400", headers=auth)
            assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
            unchanged = client.get(
                f"{api}/pages/1/image?width=2400",
                headers={**auth, "If-None-Match": first.headers["etag"]},
            )
            assert unchanged.status_code == 304 and not unchanged.content
        assert watch.events() == 0  # the canary, a PDF outside the index, was never opened
    finally:
        watch.close()


def test_a_moved_or_changed_pdf_is_answered_with_a_clear_message(served, logged_in):
    browser = logged_in
    doc = _documents(served)[PAPER]
    path = served.corpus / PAPER
    auth = {"Authorization": f"Bearer {served.token}"}
    image = f"/viewer/api/docs/{doc['doc_id']}/pages/2/image?width=800"
    aside = path.with_suffix(".moved")
    with httpx.Client(base_url=served.base, timeout=120) as client:
        assert client.get(image, headers=auth).status_code == 200
        path.rename(aside)
        try:
            moved = client.get(image, headers=auth)
            assert moved.status_code == 410
            assert (
                "moved or deleted" in moved.json()["error"] and str(served.corpus) not in moved.text
            )
            page = client.get(f"/viewer/api/docs/{doc['doc_id']}/pages/2", headers=auth)
            assert page.status_code == 410
            # a new load of the page: nothing of this page kept from before
            browser.navigate(f"{served.base}/viewer?again#/doc/{doc['doc_id']}/page/2")
            browser.wait_for(
                "document.getElementById('status').textContent.includes('moved or deleted')",
                what="the message",
            )
            shot(browser, "10-moved-pdf.png")
            shutil.copy(_pdf(served, "sample_01.pdf"), path)  # other bytes under its name
            changed = client.get(image, headers=auth)
            assert changed.status_code == 409 and "index it again" in changed.json()["error"]
        finally:
            path.unlink(missing_ok=True)
            aside.rename(path)
        assert client.get(image, headers=auth).status_code == 200
