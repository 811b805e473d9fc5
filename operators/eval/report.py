"""``report.html`` of ``bookindex eval``: the figures of ``metrics.json``, drawn from it as inline
SVG (one self-contained file: no script, no stylesheet or font from elsewhere).

PDF QA (``operators.eval.pdf_qa.summarise_pdf``'s metrics per method):

- recall against the evidence units spent, one panel per method and metric (page recall; span
  recall where the questions have evidence texts): the method's ``curve`` at the budgets of
  ``pdf_qa.CURVE_POINTS`` (solid) beside dense's and hybrid's top n, n = 1 … 20 (dashed,
  dotted), and the method as run (the units it returned on average, its recall: a square)
  beside each baseline asked for as many units (its own square);
- each method's margin over each baseline at those budgets, paired by question, with its 95 %
  bootstrap interval (``margins_table``: above, below or holding 0);
- recall per document (``per_document``) and method, dense's and hybrid's at the same units
  beside it; where the documents have kinds, the same per kind of document (``kinds_table``);
- seconds per question per method: the mean, the median and the 90th percentile (``seconds``);
- the answer metrics per method (``answers_table``): EM, F1, inclusion, the judge's accuracy
  ("not computed" without a judge) and the answering model's tokens per question ("not
  measured" without usage).

Passage QA (``jobs.evaluate.summarise``'s): recall@k against k per method, dense dashed, and
seconds per query.

Every mark carries its figure (``data-value``) and where it came from (``data-panel``,
``data-method``, ``data-units`` or ``data-k``, ``data-doc``), so that a test reads the plot back.

    html = report_html(json.loads(Path("metrics.json").read_text()), "pdf", "questions.jsonl")
"""

from __future__ import annotations

import math
from html import escape

from bookindex.operators.eval.pdf_qa import BASELINES, CURVE_POINTS, margin_text

PDF, PASSAGE = "pdf", "passage"
WIDTH, HEIGHT = 300, 200  # one panel, pixels
MARGIN = {"left": 40, "right": 10, "top": 24, "bottom": 30}
PALETTE = ("#1f5fbf", "#e8750a", "#2a9d3a", "#8e44ad", "#d6409f", "#138d9c", "#8c564b")
DENSE = "#555"
BASELINE_STYLE = {"dense": ("#555", "6 3"), "hybrid": ("#999", "2 3")}  # colour, dash pattern
METRICS = {"page_recall": "page recall", "span_recall": "span recall"}
STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#1d1d1f}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.panels{display:flex;flex-wrap:wrap;gap:1em}svg{background:#fff;border:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:right}
th:first-child,td:first-child{text-align:left}.note{color:#666}
td.above{background:#e3f4e5}td.below{background:#fbe3e1}"""


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


def _line(points: list[tuple[float, float]], colour: str, dash: str, attrs: str) -> str:
    """A polyline through ``points``; ``dash``: an SVG dash pattern ("": solid)."""
    path = " ".join(f"{x},{y}" for x, y in points)
    dash = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline class="curve" {attrs} points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'


def _svg(body: list[str], width: int = WIDTH, height: int = HEIGHT, label: str = "") -> str:
    return (
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        + "".join(body)
        + "</svg>"
    )


def units_panels(metrics: dict[str, dict], metric: str) -> str:
    """One panel per method: its recall (``metric``) at the budgets of ``CURVE_POINTS`` beside
    the baselines' top n, and the squares of the method as run and of each baseline asked for
    as many units. A method that returns more units than the axis holds on average (DeepRead
    reads sections) widens it."""
    panels = []
    for i, (method, m) in enumerate(metrics.items()):
        curve = m.get("curve", {}).get(metric)
        if not curve:
            continue
        colour = PALETTE[i % len(PALETTE)]
        units = m.get("n_units")
        baseline_len = max(
            [len(m.get(f"{b}_curve", {}).get(metric, [])) for b in BASELINES] + [CURVE_POINTS[-1]]
        )
        first, last = 1, max(baseline_len, math.ceil(units or 0))
        ticks = [1, *range(5, last + 1, 5)]
        body = _axes(method, "evidence units spent", first, last, ticks)
        lines = [(method, colour, "", list(zip(CURVE_POINTS, curve, strict=False)))]
        for name in BASELINES:
            values = m.get(f"{name}_curve", {}).get(metric, [])
            style = BASELINE_STYLE.get(name, (DENSE, "4 2"))
            lines.append((name, style[0], style[1], list(enumerate(values, start=1))))
        for who, col, dash, points in lines:
            if not points:
                continue
            xy = [(x_of(n, first, last), y_of(v)) for n, v in points]
            body.append(
                _line(xy, col, dash, f'data-panel="{escape(method)}" data-method="{escape(who)}"')
            )
            for (n, v), (x, y) in zip(points, xy, strict=True):
                if who != method and n not in CURVE_POINTS:
                    continue  # a baseline's points marked at the method's budgets
                body.append(
                    f'<circle class="point" cx="{x}" cy="{y}" r="3" fill="{col}" '
                    f'data-panel="{escape(method)}" data-method="{escape(who)}" data-units="{n}" '
                    f'data-value="{v:.6f}"><title>{escape(who)}: {n} units, '
                    f"{METRICS[metric]} {v:.3f}</title></circle>"
                )
        squares = [(method, colour, metric)] + [
            (b, BASELINE_STYLE.get(b, (DENSE, ""))[0], f"{b}_{metric}") for b in BASELINES
        ]
        for who, col, key in squares:
            if units is None or key not in m:
                continue
            x, y = x_of(min(max(units, first), last), first, last), y_of(m[key])
            body.append(
                f'<rect class="operating-point" x="{x - 5}" y="{y - 5}" width="10" height="10" '
                f'fill="none" stroke="{col}" stroke-width="2" data-panel="{escape(method)}" '
                f'data-method="{escape(who)}" data-units="{units:.6f}" '
                f'data-value="{m[key]:.6f}"><title>{escape(who)} at {escape(method)}\'s units '
                f"({units:.2f} on average): {METRICS[metric]} {m[key]:.3f}</title></rect>"
            )
        legend = ", ".join(
            f"{b} {'dashed' if i == 0 else 'dotted'}" for i, b in enumerate(BASELINES)
        )
        body.append(
            f'<text x="{WIDTH - MARGIN["right"]}" y="15" text-anchor="end" '
            f'font-size="10" fill="{DENSE}">{escape(legend)}</text>'
        )
        panels.append(_svg(body, label=f"{method}: {METRICS[metric]} against units"))
    return f'<div class="panels" id="units-{metric}">' + "".join(panels) + "</div>"


def documents_chart(metrics: dict[str, dict]) -> str:
    """Recall per document (rows) and method (columns): page recall, or span recall for a
    document whose questions have no evidence pages; each baseline's at the same units beside
    it: bars on a 0 … 1 scale."""
    methods = [m for m, v in metrics.items() if v.get("per_document")]
    docs = sorted({d for m in methods for d in metrics[m]["per_document"]})
    if not docs:
        return '<p class="note">No per-document figures.</p>'
    bars = 1 + len(BASELINES)
    name_w, cell_w, row_h = 240, 150, 10 * bars + 8
    width, height = name_w + cell_w * len(methods) + 10, 30 + row_h * len(docs)
    body = []
    for j, method in enumerate(methods):
        x = name_w + j * cell_w
        body.append(f'<text x="{x + 5}" y="18" font-weight="600">{escape(method)}</text>')
    for i, doc in enumerate(docs):
        y = 30 + i * row_h
        entries = [metrics[m]["per_document"].get(doc, {}) for m in methods]
        metric = "page_recall" if any("page_recall" in e for e in entries) else "span_recall"
        body.append(
            f'<text x="5" y="{y + 12}" font-size="11">{escape(doc[:36])}</text>'
            f'<text x="5" y="{y + 24}" font-size="9" fill="#666">{METRICS[metric]}</text>'
        )
        for j, (method, entry) in enumerate(zip(methods, entries, strict=True)):
            x = name_w + j * cell_w + 5
            rows = [(metric, PALETTE[j % len(PALETTE)], method)]
            rows += [(f"{b}_{metric}", BASELINE_STYLE.get(b, (DENSE, ""))[0], b) for b in BASELINES]
            for r, (key, col, who) in enumerate(rows):
                if key not in entry:
                    continue
                value, dy = entry[key], 2 + 10 * r
                w = round(100 * value, 2)
                body.append(
                    f'<rect class="bar" x="{x}" y="{y + dy}" width="{w}" height="8" fill="{col}" '
                    f'data-doc="{escape(doc)}" data-method="{escape(who)}" data-of="{escape(method)}" '
                    f'data-metric="{metric}" data-value="{value:.6f}"><title>{escape(doc)} · '
                    f"{escape(who)}: {METRICS[metric]} {value:.3f}</title></rect>"
                )
                body.append(
                    f'<text x="{x + w + 3}" y="{y + dy + 8}" font-size="9">{value:.2f}</text>'
                )
    return _svg(body, width, height, "recall per document")


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
    width, height = name_w + bar_w + 150, 20 + row_h * len(rows)
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
        right = max(w, bar_w * spread.get("p90", 0.0) / top)  # after the bar and its ticks
        body.append(f'<text x="{name_w + right + 6}" y="{y + 14}" font-size="11">{label}</text>')
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
        body.append(
            _line(points, colour, "5 3" if dense else "", f'data-method="{escape(method)}"')
        )
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


def answers_table(metrics: dict[str, dict]) -> str:
    """The answer metrics per method (``pdf_qa.summarise_answers``): each cell carries its
    figure (``data-value``), and says "not computed" (no judge) or "not measured" (no token
    counts) where the figure does not exist."""

    def cell(method: str, key: str, value, shown: str) -> str:
        data = f' data-value="{value}"' if value is not None else ""
        return f'<td data-method="{escape(method)}" data-key="{key}"{data}>{escape(shown)}</td>'

    keys = ["answered", "em", "f1", "inclusion", "judge", "prompt tok/q", "completion tok/q"]
    head = "".join(f"<th>{escape(k)}</th>" for k in keys)
    rows = []
    for method, m in metrics.items():
        cells = [cell(method, "answered", m.get("answered", 0), str(m.get("answered", 0)))]
        for key in ("em", "f1", "inclusion"):
            value = m.get(key) if m.get("answered") else None
            cells.append(cell(method, key, value, "–" if value is None else f"{value:.3f}"))
        judged = m.get("judge") if m.get("judged") else None
        cells.append(
            cell(method, "judge", judged, "not computed" if judged is None else f"{judged:.3f}")
        )
        tokens = m.get("tokens") or {}
        for key in ("prompt_tokens_per_question", "completion_tokens_per_question"):
            value = tokens.get(key)
            cells.append(
                cell(method, key, value, "not measured" if value is None else f"{value:.1f}")
            )
        rows.append(f"<tr><td>{escape(method)}</td>{''.join(cells)}</tr>")
    return f"<table><tr><th>method</th>{head}</tr>{''.join(rows)}</table>"


def margins_table(metrics: dict[str, dict], metric: str) -> str:
    """Each method's margin over each baseline at the curve's budgets (``curve_margin`` of
    ``pdf_qa.curve_margins``), in points: the mean paired difference and its 95 % bootstrap
    interval. A cell whose interval lies above 0 is marked ``above``, below 0 ``below``, one
    holding 0 ``either`` (the questions cannot tell the two apart); each carries its figures
    (``data-value``, ``data-low``, ``data-high``: shares, as in ``metrics.json``). Empty where
    no method has margins."""
    rows = []
    for method, m in metrics.items():
        for name, values in m.get("curve_margin", {}).get(metric, {}).items():
            cells = []
            for n, v in zip(CURVE_POINTS, values, strict=True):
                side = "above" if v["low"] > 0 else "below" if v["high"] < 0 else "either"
                cells.append(
                    f'<td class="{side}" data-method="{escape(method)}" '
                    f'data-baseline="{escape(name)}" data-units="{n}" data-value="{v["mean"]}" '
                    f'data-low="{v["low"]}" data-high="{v["high"]}">'
                    f"{margin_text(v)}</td>"
                )
            rows.append(f"<tr><td>{escape(method)} − {escape(name)}</td>{''.join(cells)}</tr>")
    if not rows:
        return ""
    head = "".join(f"<th>{n}</th>" for n in CURVE_POINTS)
    return f"<table><tr><th>method − baseline, at n units</th>{head}</tr>{''.join(rows)}</table>"


def kinds_table(metrics: dict[str, dict]) -> str:
    """Each method's recall per kind of document (``per_kind`` of ``pdf_qa.per_kind``) beside
    each baseline's at the same units; a method's cell is marked ``above`` where it is above
    both baselines, ``below`` where under either; each carries its figure (``data-value``,
    ``data-kind``, ``data-method``, ``data-of``). Empty where no method has kinds."""
    rows = []
    for method, m in metrics.items():
        for kind, entry in m.get("per_kind", {}).items():
            metric = "page_recall" if "page_recall" in entry else "span_recall"
            if metric not in entry:
                continue
            own = entry[metric]
            baselines = [entry.get(f"{b}_{metric}") for b in BASELINES]
            known = [v for v in baselines if v is not None]
            side = (
                "above"
                if all(own > v for v in known)
                else "below"
                if any(own < v for v in known)
                else "either"
            )
            cells = [
                f'<td class="{side}" data-kind="{escape(kind)}" data-method="{escape(method)}" '
                f'data-of="{escape(method)}" data-metric="{metric}" data-value="{own}">'
                f"{100 * own:.1f}</td>"
            ]
            for name, value in zip(BASELINES, baselines, strict=True):
                shown = "–" if value is None else f"{100 * value:.1f}"
                data = "" if value is None else f' data-value="{value}"'
                cells.append(
                    f'<td data-kind="{escape(kind)}" data-method="{escape(name)}" '
                    f'data-of="{escape(method)}" data-metric="{metric}"{data}>{shown}</td>'
                )
            rows.append(
                f"<tr><td>{escape(method)}</td><td>{escape(kind)}</td>"
                f"<td>{entry['documents']}</td><td>{entry['questions']}</td>"
                f"<td>{METRICS[metric]}</td>{''.join(cells)}</tr>"
            )
    if not rows:
        return ""
    head = "".join(f"<th>{escape(b)}</th>" for b in BASELINES)
    return (
        "<table><tr><th>method</th><th>kind</th><th>documents</th><th>questions</th>"
        f"<th>metric</th><th>method's</th>{head}</tr>{''.join(rows)}</table>"
    )


def report_html(metrics: dict[str, dict], kind: str, questions: str) -> str:
    """The report of ``metrics`` (``metrics.json`` as read back) for ``kind`` (PDF or PASSAGE)."""
    if kind == PDF:
        keys = ["questions", "answerable", "n_units", "page_recall"]
        keys += [f"{b}_page_recall" for b in BASELINES]
        keys += ["perfect_recall", "span_recall", *[f"{b}_span_recall" for b in BASELINES]]
        keys += ["seconds_per_query"]
        sections = []
        for metric, name in METRICS.items():
            if any(metric in v.get("curve", {}) for v in metrics.values()):
                sections += [
                    f"<h2>{name.capitalize()} against evidence units</h2>",
                    f'<p class="note">Each method asked at a budget of n units and scored on its '
                    f"first n (solid, at n = {', '.join(map(str, CURVE_POINTS))}) beside the "
                    f"baselines' top n ({', '.join(BASELINES)}); the squares are the method as "
                    "run (units returned on average, its recall) and each baseline asked for as "
                    "many units.</p>",
                    units_panels(metrics, metric),
                ]
                margins = margins_table(metrics, metric)
                if margins:
                    sections += [
                        f'<p class="note">{name.capitalize()}: each method\'s margin over each '
                        "baseline at n units, in points, paired by question: the mean and its "
                        "95 % bootstrap interval (green: the interval above 0; red: below; "
                        "uncoloured: it holds 0, the questions cannot tell them apart).</p>",
                        margins,
                    ]
        sections += [
            "<h2>Answers</h2>",
            '<p class="note">EM/F1 after answer extraction, inclusion accuracy and the '
            "LLM-judged accuracy over the questions each method answered; tokens: the "
            "answering model's, from the endpoint's usage.</p>",
            answers_table(metrics),
            "<h2>Recall per document</h2>",
            '<p class="note">Each method (colour) and the baselines asked for the same number '
            "of units (grey), over the document's questions with that gold.</p>",
            documents_chart(metrics),
        ]
        kinds = kinds_table(metrics)
        if kinds:
            sections += [
                "<h2>Recall per kind of document</h2>",
                '<p class="note">The split file\'s kinds of document: each method at its own '
                "budget beside the baselines asked for the same units (green: above both; red: "
                "under either).</p>",
                kinds,
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
