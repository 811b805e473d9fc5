"""How long the web viewer takes to open a long book's document view and page views, through a
real ``bookindex serve`` on this machine (docs/viewer.md).

    python -m benchmarks.viewer_latency [--pdf BOOK.pdf] [--index DIR] [--pages 12] [--width 1000]

Indexes the book (default: HiPS's 498-page "Climate Change and International Shipping", from
../shared/data; the default configuration) unless ``--index`` names an index that holds it,
starts ``bookindex serve`` on it, and times over HTTP, as the viewer's page asks:

- the document view (heading tree, tables and figures): the first request and the median of
  five more;
- a page view, first render: the page's nodes and its image at ``--width`` pixels, for
  ``--pages`` pages spread over the book (the first also reads the book's page geometry);
- the same page views again, after their first render (the images come from the cache);
- the running heads and footers: the first request (the whole book parsed, in a child
  process) and a later page's;
- in headless Chromium (where it is installed; driven by ``tests/browser.py``), until the
  viewer shows the document view (its tree drawn) and each page view (image loaded, boxes
  placed): pages not opened before, then again in a fresh load of the viewer.

Prints one line per measurement (seconds: median and slowest) and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
BOOK = (
    REPO.parent
    / "shared/data/hips/PDFs"
    / "climate-change-and-international-shipping-the-regulatory-framework-for-the-reduction-of-greenhouse-gas-emissions.pdf"
)


def _bookindex() -> str:
    return str(Path(sys.executable).with_name("bookindex"))


def ensure_index(pdf: Path, index: Path) -> None:
    """Index ``pdf`` into ``index`` (nothing to do when it holds it already)."""
    command = [_bookindex(), "index", str(pdf), "--out", str(index), "--quiet"]
    subprocess.run(command, check=True)


def start_server(index: Path, log: Path, token: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, BOOKINDEX_SERVE_TOKEN=token)
    env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] = "0"
    server = subprocess.Popen(
        [_bookindex(), "serve", "--index", str(index), "--port", str(port)],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 600
    while "serving" not in log.read_text():
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("bookindex serve did not start:\n" + log.read_text()[-3000:])
        time.sleep(1)
    return server, f"http://127.0.0.1:{port}"


def timed(client: httpx.Client, *paths: str) -> float:
    """Seconds to fetch ``paths`` one after another (each must answer 200)."""
    started = time.perf_counter()
    for path in paths:
        answer = client.get(path)
        answer.raise_for_status()
    return time.perf_counter() - started


def line(what: str, seconds: list[float]) -> str:
    return (
        f"{what:<58} median {statistics.median(seconds):7.3f} s   slowest {max(seconds):7.3f} s"
        f"   ({len(seconds)})"
    )


# In the page: set the address, then poll (5 ms) until ``ready`` holds; milliseconds taken.
SHOW = """(async () => {{ const t0 = performance.now(); location.hash = {hash};
  while (!({ready})) await new Promise((r) => setTimeout(r, 5));
  return performance.now() - t0; }})()"""


def in_browser(base: str, token: str, doc_id: str, pages: list[int], work: Path) -> dict:
    """Seconds until headless Chromium shows the document view (its tree drawn) and each page
    view (image loaded, boxes placed): pages not opened before, then the same pages again in
    a fresh load of the viewer (its own caches empty, the server's images cached). Empty
    without Chromium."""
    from tests.browser import Browser, find_chromium  # the tests' DevTools driver

    if find_chromium() is None:
        print("no chromium: the in-browser figures are left out", file=sys.stderr)
        return {}
    out: dict[str, list[float]] = {}
    with Browser.start(work / "chromium") as browser:
        for attempt in ("first render", "after its first render"):
            browser.navigate(f"{base}/viewer?{attempt.replace(' ', '-')}")
            corpus = "document.querySelector('#documents tbody tr')"
            browser.wait_for(f"{corpus} || !document.getElementById('login').hidden")
            if not browser.evaluate(f"!!{corpus}"):  # the token is asked once (this tab)
                browser.type_into("#token-input", token)
                browser.click("#login-button")
                browser.wait_for(corpus)
            tree = f"document.querySelector('#tree[data-doc-id=\"{doc_id}\"] li.toc-entry')"
            key = f"in Chromium: document view, {attempt}"
            ms = browser.evaluate(SHOW.format(hash=json.dumps(f"#/doc/{doc_id}"), ready=tree))
            out[key] = [ms / 1000]
            key = f"in Chromium: page view, {attempt}"
            for page in pages:
                stage = f'#page-stage[data-doc-id="{doc_id}"][data-page="{page}"].ready'
                ready = f"document.querySelector('{stage}')"
                hash_ = json.dumps(f"#/doc/{doc_id}/page/{page}")
                out.setdefault(key, []).append(
                    browser.evaluate(SHOW.format(hash=hash_, ready=ready)) / 1000
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pdf", type=Path, default=BOOK)
    parser.add_argument("--index", type=Path, default=None, help="an index holding --pdf")
    parser.add_argument("--pages", type=int, default=12, help="pages to open")
    parser.add_argument("--width", type=int, default=1000, help="image width, pixels")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="viewer_latency_"))
    index = args.index or work / "index"
    started = time.perf_counter()
    ensure_index(args.pdf, index)
    print(f"index ready in {time.perf_counter() - started:.0f} s: {index}", flush=True)
    token = secrets.token_urlsafe(24)
    server, base = start_server(index, work / "serve.log", token)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
            corpus = client.get("/viewer/api/corpus").json()
            doc = next(d for d in corpus["documents"] if d["name"] == args.pdf.name)
            n_pages, api = doc["n_pages"], f"/viewer/api/docs/{doc['doc_id']}"
            print(
                f"{doc['name']}: {n_pages} pages, {doc['n_nodes']} nodes, "
                f"{doc['n_sections']} sections; {os.cpu_count()} CPUs",
                flush=True,
            )
            first_doc = timed(client, api)
            tree = len(client.get(api).json()["tree"])
            again_doc = [timed(client, api) for _ in range(5)]
            pages = sorted(
                {1 + round(i * (n_pages - 1) / max(1, args.pages - 1)) for i in range(args.pages)}
            )

            def page_paths(page: int) -> tuple[str, str]:
                return f"{api}/pages/{page}", f"{api}/pages/{page}/image?width={args.width}"

            first_pages = [timed(client, *page_paths(p)) for p in pages]
            again_pages = [timed(client, *page_paths(p)) for p in pages for _ in range(3)]
            heads_first = timed(client, f"{api}/pages/{pages[1]}/furniture")
            heads_again = [timed(client, f"{api}/pages/{p}/furniture") for p in pages]
            found = sum(
                len(client.get(f"{api}/pages/{p}/furniture").json()["furniture"]) for p in pages
            )
        shown = in_browser(base, token, doc["doc_id"], [min(n_pages, p + 1) for p in pages], work)
        print(line(f"document view, first request ({tree} headings)", [first_doc]))
        print(line("document view, again", again_doc))
        print(line(f"page view, first render (nodes + {args.width}px image)", first_pages))
        print(line("  of which the first page (reads the page geometry)", first_pages[:1]))
        print(line("page view after its first render (image cached)", again_pages))
        print(line("running heads, first request (whole book parsed)", [heads_first]))
        print(line(f"running heads, later pages ({found} on {len(pages)} pages)", heads_again))
        for what, seconds in shown.items():
            print(line(what, seconds))
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
