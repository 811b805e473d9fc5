"""``report.html`` of ``bookindex eval``: the figures of ``metrics.json``, drawn from it as inline
SVG (one self-contained file: no script, no stylesheet or font from elsewhere).

PDF QA (``operators.eval.pdf_qa.summarise_pdf``'s metrics per method):

- page recall against the evidence units taken, 1 … k, one panel per method: the method's
  first u units (solid) beside dense's first u (dashed), and the method as run (the units it
  returned on average, its page recall: a square) beside dense asked for as many (grey);
- page recall per document and method, dense's at the same units beside it;
- seconds per question per method: the mean, the median and the 90th percentile.

Passage QA (``jobs.evaluate.summarise``'s): recall@k against k per method, dense dashed, and
seconds per query.

Every mark carries its figure (``data-value``) and where it came from (``data-method``,
``data-units`` or ``data-k``, ``data-doc``), so that a test reads the plot back.

    html = report_html(json.loads(Path("metrics.json").read_text()), "pdf", "questions.jsonl")
"""

from __future__ import annotations

import math
from html import escape

PDF, PASSAGE = "pdf", "passage"
WIDTH, HEIGHT = 300, 200  # one panel, pixels
MARGIN = {"left": 40, "right": 10, "top": 24, "bottom": 30}
PALETTE = ("#1f5fbf", "#e8750a", "#2a9d3a", "#8e44ad", "#d6409f", "#138d9c", "#8c564b")
DENSE = "#555"
STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#1d1d1f}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.panels{display:flex;flex-wrap:wrap;gap:1em}svg{background:#fff;border:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:right}
th:first-child,td:first-child{text-align:left}.note{color:#666}"""


def y_of(value: float, height: int = HEIGHT) -> float:
    """Where a share (0 … 1) sits on a panel's y axis."""
    inner = height - MARGIN["top"] - MARGIN["bottom"]
    return round(MARGIN["top"] + (1 - value) * inner, 2)


def x_of(step: float, first: float, last: float, width: int = WIDTH) -> float:
    """Where ``step`` sits on a panel's x axis running from ``first`` to ``last``."""
    inner = width - MARGIN["left"] - MARGIN["right"]
    share = 0.5 if last == first else (step - first) / (last - first)
    return round(MARGIN["left"] + share * inner, 2)


def _axes(title: str, x_label: str, first: float, last: float, ticks: list[float]) -> list[str]:
    out = [f'<text x="{MARGIN["left"]}" y="15" font-weight="600">{escape(title)}</text>']
    bottom, top = y_of(0), y_of(1)
    out.append(
        f'<line x1="{MARGIN["left"]}" y1="{bottom}" x2="{WIDTH - MARGIN["right"]}" '
        f'y2="{bottom}" stroke="#999"/>'
    )
    out.append(
        f'<line x1="{MARGIN["left"]}" y1="{bottom}" x2="{MARGIN["left"]}" y2="{top}" stroke="#999"/>'
    )
    for value in (0, 0.25, 0.5, 0.75, 1):
        y = y_of(value)
        out.append(
            f'<line x1="{MARGIN["left"]}" y1="{y}" x2="{WIDTH - MARGIN["right"]}" y2="{y}" '
            'stroke="#eee"/>'
        )
        out.append(
            f'<text x="{MARGIN["left"] - 4}" y="{y + 4}" text-anchor="end" font-size="10">{value:g}</text>'
        )
    for tick in ticks:
        x = x_of(tick, first, last)
        out.append(
            f'<text x="{x}" y="{bottom + 13}" text-anchor="middle" font-size="10">{tick:g}</text>'
        )
    out.append(
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 3}" text-anchor="middle" font-size="10">'
        f"{escape(x_label)}</text>"
    )
    return out


def _line(points: list[tuple[float, float]], colour: str, dashed: bool, attrs: str) -> str:
    path = " ".join(f"{x},{y}" for x, y in points)
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    return f'<polyline class="curve" {attrs} points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'


def _svg(body: list[str], width: int = WIDTH, height: int = HEIGHT, label: str = "") -> str:
    return (
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        + "".join(body)
        + "</svg>"
    )


def units_panels(metrics: dict[str, dict]) -> str:
    """One panel per method: page recall of its first u units and of dense's, u = 1 … k; and
    the method as run (units returned on average, page recall: a square) beside dense asked
    for as many units (a grey square at the same x). A method may return more than k units
    (DeepRead reads a whole section): the x axis then runs on to its average."""
    panels = []
    for i, (method, m) in enumerate(metrics.items()):
        curve = m.get("recall_by_units") or []
        if not curve:
            continue
        colour = PALETTE[i % len(PALETTE)]
        first, last = 1, max(len(curve), math.ceil(m.get("n_units", 0)))
        ticks = list(range(1, last + 1)) if last <= 12 else [1, *range(5, last + 1, 5)]
        body = _axes(method, "evidence units taken", first, last, ticks)
        for key, col, dashed, who in (
            ("dense_page_recall", DENSE, True, "dense"),
            ("page_recall", colour, False, method),
        ):
            points = [(x_of(p["units"], first, last), y_of(p[key])) for p in curve]
            body.append(_line(points, col, dashed, f'data-method="{escape(who)}"'))
            for p, (x, y) in zip(curve, points, strict=True):
                body.append(
                    f'<circle class="point" cx="{x}" cy="{y}" r="3" fill="{col}" '
                    f'data-panel="{escape(method)}" data-method="{escape(who)}" '
                    f'data-units="{p["units"]}" '
                    f'data-value="{p[key]:.6f}"><title>{escape(who)}: {p["units"]} units, '
                    f"page recall {p[key]:.3f}</title></circle>"
                )
        units = m.get("n_units")
        for key, col, who in (
            ("dense_page_recall", DENSE, "dense"),
            ("page_recall", colour, method),
        ):
            if units is None or key not in m:
                continue
            x, y = x_of(min(max(units, first), last), first, last), y_of(m[key])
            body.append(
                f'<rect class="operating-point" x="{x - 5}" y="{y - 5}" width="10" height="10" '
                f'fill="none" stroke="{col}" stroke-width="2" data-panel="{escape(method)}" '
                f'data-method="{escape(who)}" data-units="{units:.6f}" '
                f'data-value="{m[key]:.6f}"><title>{escape(who)} at {escape(method)}\'s units '
                f"({units:.2f} on average): page recall {m[key]:.3f}</title></rect>"
            )
        body.append(
            f'<text x="{WIDTH - MARGIN["right"]}" y="15" text-anchor="end" '
            f'font-size="10" fill="{DENSE}">dashed, grey: dense</text>'
        )
        panels.append(_svg(body, label=f"{method}: page recall against units"))
    return '<div class="panels" id="units">' + "".join(panels) + "</div>"


def documents_chart(metrics: dict[str, dict]) -> str:
    """Page recall per document (rows) and method (columns), dense's at the same units
    beside each: bars on a 0 … 1 scale."""
    methods = [m for m, v in metrics.items() if v.get("per_document")]
    docs = sorted({d for m in methods for d in metrics[m]["per_document"]})
    if not docs:
        return '<p class="note">No per-document figures.</p>'
    name_w, cell_w, row_h = 220, 150, 26
    width, height = name_w + cell_w * len(methods) + 10, 30 + row_h * len(docs)
    body = []
    for j, method in enumerate(methods):
        x = name_w + j * cell_w
        body.append(f'<text x="{x + 5}" y="18" font-weight="600">{escape(method)}</text>')
    for i, doc in enumerate(docs):
        y = 30 + i * row_h
        body.append(f'<text x="5" y="{y + 16}" font-size="11">{escape(doc[:34])}</text>')
        for j, method in enumerate(methods):
            entry = metrics[method]["per_document"].get(doc, {})
            x = name_w + j * cell_w + 5
            for key, col, dy, who in (
                ("page_recall", PALETTE[j % len(PALETTE)], 3, method),
                ("dense_page_recall", DENSE, 13, "dense"),
            ):
                if key not in entry:
                    continue
                value = entry[key]
                w = round(100 * value, 2)
                body.append(
                    f'<rect class="bar" x="{x}" y="{y + dy}" width="{w}" height="8" fill="{col}" '
                    f'data-doc="{escape(doc)}" data-method="{escape(who)}" data-of="{escape(method)}" '
                    f'data-value="{value:.6f}"><title>{escape(doc)} · {escape(who)}: page recall '
                    f"{value:.3f}</title></rect>"
                )
                body.append(
                    f'<text x="{x + w + 3}" y="{y + dy + 8}" font-size="9">{value:.2f}</text>'
                )
    return _svg(body, width, height, "page recall per document")


def seconds_chart(metrics: dict[str, dict]) -> str:
    """Seconds per question per method: a bar for the mean, ticks at the median and the 90th
    percentile (where the metrics have them)."""
    rows = [(m, v) for m, v in metrics.items() if "seconds_per_query" in v]
    top = max(
        [v["seconds_per_query"] for _, v in rows]
        + [v.get("seconds", {}).get("p90", 0.0) for _, v in rows]
        + [1e-9]
    )
    name_w, bar_w, row_h = 130, 320, 24
    width, height = name_w + bar_w + 90, 20 + row_h * len(rows)
    body = []
    for i, (method, v) in enumerate(rows):
        y = 10 + i * row_h
        mean = v["seconds_per_query"]
        w = round(bar_w * mean / top, 2)
        body.append(f'<text x="5" y="{y + 14}">{escape(method)}</text>')
        body.append(
            f'<rect class="bar" x="{name_w}" y="{y + 3}" width="{w}" height="14" '
            f'fill="{PALETTE[i % len(PALETTE)]}" data-method="{escape(method)}" '
            f'data-value="{mean:.6f}"><title>{escape(method)}: {mean:.4f} s per question on '
            "average</title></rect>"
        )
        spread = v.get("seconds", {})
        for key in ("p50", "p90"):
            if key in spread:
                x = round(name_w + bar_w * spread[key] / top, 2)
                body.append(
                    f'<line class="tick" x1="{x}" y1="{y}" x2="{x}" y2="{y + 20}" stroke="#000" '
                    f'data-method="{escape(method)}" data-stat="{key}" '
                    f'data-value="{spread[key]:.6f}"><title>{key}: {spread[key]:.4f} s</title></line>'
                )
        label = f"{mean:.3f} s" + (f" (p90 {spread['p90']:.3f})" if "p90" in spread else "")
        body.append(f'<text x="{name_w + w + 6}" y="{y + 14}" font-size="11">{label}</text>')
    return _svg(body, width, height, "seconds per question")


def recall_at_k_chart(metrics: dict[str, dict]) -> str:
    """Passage QA: recall@k against k, one line per method, dense dashed."""
    ks = sorted(
        {int(key.split("@")[1]) for m in metrics.values() for key in m if key.startswith("recall@")}
    )
    if not ks:
        return '<p class="note">No recall@k figures.</p>'
    body = _axes("recall@k", "k (passages returned)", ks[0], ks[-1], ks)
    for i, (method, m) in enumerate(metrics.items()):
        dense = method == "dense"
        colour = DENSE if dense else PALETTE[i % len(PALETTE)]
        points = [(x_of(k, ks[0], ks[-1]), y_of(m[f"recall@{k}"])) for k in ks]
        body.append(_line(points, colour, dense, f'data-method="{escape(method)}"'))
        for k, (x, y) in zip(ks, points, strict=True):
            value = m[f"recall@{k}"]
            body.append(
                f'<circle class="point" cx="{x}" cy="{y}" r="3" fill="{colour}" '
                f'data-method="{escape(method)}" data-k="{k}" data-value="{value:.6f}">'
                f"<title>{escape(method)}: recall@{k} {value:.3f}</title></circle>"
            )
    legend = " · ".join(
        f'<span style="color:{DENSE if m == "dense" else PALETTE[i % len(PALETTE)]}">'
        f"{escape(m)}</span>"
        for i, m in enumerate(metrics)
    )
    return _svg(body, label="recall at k") + f"<p>{legend} (dense dashed)</p>"


def _table(metrics: dict[str, dict], keys: list[str]) -> str:
    head = "".join(f"<th>{escape(k)}</th>" for k in keys)
    rows = []
    for method, m in metrics.items():
        cells = "".join(
            f"<td>{m[k]:.3f}</td>" if isinstance(m.get(k), float) else f"<td>{m.get(k, '–')}</td>"
            for k in keys
        )
        rows.append(f"<tr><td>{escape(method)}</td>{cells}</tr>")
    return f"<table><tr><th>method</th>{head}</tr>{''.join(rows)}</table>"


def report_html(metrics: dict[str, dict], kind: str, questions: str) -> str:
    """The report of ``metrics`` (``metrics.json`` as read back) for ``kind`` (PDF or PASSAGE)."""
    if kind == PDF:
        keys = ["questions", "answerable", "n_units", "page_recall", "dense_page_recall"]
        keys += ["perfect_recall", "span_recall", "seconds_per_query"]
        sections = [
            "<h2>Page recall against evidence units</h2>",
            '<p class="note">Each method\'s first 1, 2, … k evidence units (solid) beside dense '
            "top-k's first as many (dashed), over the answerable questions; the squares are the "
            "method as run (units returned on average, page recall) and dense asked for as many "
            "units (grey).</p>",
            units_panels(metrics),
            "<h2>Page recall per document</h2>",
            '<p class="note">Each method (colour) and dense asked for the same number of units '
            "(grey), over the document's answerable questions.</p>",
            documents_chart(metrics),
        ]
        title = "PDF QA evaluation"
    else:
        keys = [
            "questions",
            *[k for k in ("recall@2", "recall@5", "recall@10")],
            "seconds_per_query",
        ]
        sections = ["<h2>Recall against passages returned</h2>", recall_at_k_chart(metrics)]
        title = "Retrieval evaluation"
    sections += [
        "<h2>Seconds per question</h2>",
        '<p class="note">Bar: the mean; ticks: the median and the 90th percentile.</p>',
        seconds_chart(metrics),
        "<h2>The figures</h2>",
        _table(metrics, keys),
    ]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><p>questions: <code>{escape(questions)}</code>; drawn from "
        "<code>metrics.json</code> beside this file.</p>" + "".join(sections) + "</body></html>\n"
    )
