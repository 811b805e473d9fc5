"""Ruled tables from a page's vector graphics, without ``page.find_tables``.

The algorithm is the one find_tables' "lines" strategy uses (pdfplumber's, after Nurminen's
thesis, with PyMuPDF's additions), redone on plain tuples from ``page.get_cdrawings()`` and the
page's words instead of one Python dict per character and per edge:

1. edges: every axis-parallel line segment, the sides of every rectangle (filled or stroked; a
   rectangle thinner than ``EDGE_MIN`` is one line through its middle), and the frame of every
   cluster of touching drawings that holds text (a table drawn as shaded cells only);
2. merge: edges shorter than a point dropped; edges within ``SNAP`` of one another snapped to
   their mean position, collinear edges with gaps up to ``JOIN`` joined; edges shorter than
   ``EDGE_MIN`` dropped;
3. intersections of vertical and horizontal edges (tolerance ``SNAP``);
4. cells: from each intersection, the first rectangle down and right whose four corners are
   intersections joined by edges, so a missing rule makes a merged cell;
5. tables: groups of cells that share a corner, with at least two columns and some text.

``ruled_tables`` returns each table's cells; ``table_grid`` lays them out in rows and columns
the way ``pymupdf.table.Table.rows`` does, a missing slot (a merged cell) being ``None``.
"""

from __future__ import annotations

from collections import defaultdict

SNAP = 3.0  # find_tables' snap, join and intersection tolerance, points
JOIN = 3.0
EDGE_MIN = 3.0

Rect = tuple[float, float, float, float]


def bounds(cells: list[Rect]) -> Rect:
    """The rectangle enclosing ``cells``."""
    return (
        min(c[0] for c in cells),
        min(c[1] for c in cells),
        max(c[2] for c in cells),
        max(c[3] for c in cells),
    )


def _cluster_bboxes(rects: list[Rect]) -> list[Rect]:
    """Grow each rectangle by every other that comes within ``SNAP`` of it, until none does:
    the enveloping boxes of connected drawings (find_tables' ``clean_graphics``)."""
    prects = sorted(set(rects), key=lambda r: (r[3], r[0]))
    out = []
    while prects:
        x0, y0, x1, y1 = prects[0]
        rest = prects[1:]
        grown = True
        while grown:
            grown = False
            keep = []
            for r in rest:
                rx0, ry0, rx1, ry1 = r
                if (
                    (x0 - SNAP <= rx0 <= x1 + SNAP or x0 - SNAP <= rx1 <= x1 + SNAP)
                    and (y0 - SNAP <= ry0 <= y1 + SNAP or y0 - SNAP <= ry1 <= y1 + SNAP)
                ) or (
                    (rx0 - SNAP <= x0 <= rx1 + SNAP or rx0 - SNAP <= x1 <= rx1 + SNAP)
                    and (ry0 - SNAP <= y0 <= ry1 + SNAP or ry0 - SNAP <= y1 <= ry1 + SNAP)
                ):
                    x0, y0 = min(x0, rx0), min(y0, ry0)
                    x1, y1 = max(x1, rx1), max(y1, ry1)
                    grown = True
                else:
                    keep.append(r)
            rest = keep
        out.append((x0, y0, x1, y1))
        prects = rest
    return out


def _edges(paths: list[dict], clip: Rect, word_boxes: list[Rect]) -> tuple[list, list]:
    """Raw vertical and horizontal edges [x0, top, x1, bottom] inside ``clip``."""
    cx0, cy0, cx1, cy1 = clip
    vert: list[list[float]] = []
    horiz: list[list[float]] = []

    def line(ax: float, ay: float, bx: float, by: float) -> None:
        if abs(ax - bx) > SNAP and abs(ay - by) > SNAP:
            return  # not axis-parallel
        x0, x1 = (ax, bx) if ax <= bx else (bx, ax)
        y0, y1 = (ay, by) if ay <= by else (by, ay)
        if x0 > cx1 or x1 < cx0 or y0 > cy1 or y1 < cy0:
            return
        x0, y0, x1, y1 = max(x0, cx0), max(y0, cy0), min(x1, cx1), min(y1, cy1)
        if x0 == x1 and y0 == y1:
            return
        (horiz if y0 == y1 else vert).append([x0, y0, x1, y1])

    def box(x0: float, y0: float, x1: float, y1: float) -> None:
        line(x0, y0, x0, y1)
        line(x0, y1, x1, y1)
        line(x1, y1, x1, y0)
        line(x1, y0, x0, y0)

    rects = []
    for path in paths:
        items = path.get("items")
        if not items:
            continue
        rects.append(tuple(path["rect"]))
        if path.get("closePath") and items[0][0] == "l" and items[-1][0] == "l":
            items = [*items, ("l", items[-1][2], items[0][1])]
        for item in items:
            op = item[0]
            if op == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                line(ax, ay, bx, by)
            elif op == "re":
                ax, ay, bx, by = item[1]
                x0, x1 = (ax, bx) if ax <= bx else (bx, ax)
                y0, y1 = (ay, by) if ay <= by else (by, ay)
                w, h = x1 - x0, y1 - y0
                if w <= EDGE_MIN and w < h:  # a vertical rule drawn as a thin rectangle
                    x = (x0 + x1) / 2
                    line(x, y0, x, y1)
                elif h <= EDGE_MIN and h < w:
                    y = (y0 + y1) / 2
                    line(x0, y, x1, y)
                else:
                    box(x0, y0, x1, y1)
            elif op == "qu":
                ul, ur, ll, lr = item[1]
                line(*ul, *ll)
                line(*ll, *lr)
                line(*lr, *ur)
                line(*ur, *ul)
    for x0, y0, x1, y1 in _cluster_bboxes(rects):
        if any(x0 <= a and c <= x1 and y0 <= b and d <= y1 for a, b, c, d in word_boxes):
            box(x0, y0, x1, y1)
    return vert, horiz


def _snap(edges: list[list[float]], pos: int) -> None:
    """Move edges whose position (index ``pos``: 0 = x0, 1 = top) lies within ``SNAP`` of
    the next to their cluster's mean position, in place."""
    if not edges:
        return
    values = sorted({e[pos] for e in edges})
    cluster_of: dict[float, int] = {}
    cluster, last = 0, values[0]
    for v in values:
        if v > last + SNAP:
            cluster += 1
        cluster_of[v] = cluster
        last = v
    sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in edges:
        s = sums[cluster_of[e[pos]]]
        s[0] += e[pos]
        s[1] += 1
    for e in edges:
        total, n = sums[cluster_of[e[pos]]]
        shift = total / n - e[pos]
        e[pos] += shift
        e[pos + 2] += shift


def _join(edges: list[list[float]], pos: int) -> list[list[float]]:
    """Join collinear edges (same position at index ``pos``) whose extents come within
    ``JOIN`` of each other; drop those shorter than ``EDGE_MIN``."""
    lo = 1 - pos  # extent along the edge: top for vertical (pos 0), x0 for horizontal
    groups: dict[float, list[list[float]]] = defaultdict(list)
    for e in edges:
        groups[e[pos]].append(e)
    out = []
    for key in sorted(groups):
        joined: list[list[float]] = []
        for e in sorted(groups[key], key=lambda e: e[lo]):
            if joined and e[lo] <= joined[-1][lo + 2] + JOIN:
                if e[lo + 2] > joined[-1][lo + 2]:
                    joined[-1] = [*joined[-1]]
                    joined[-1][lo + 2] = e[lo + 2]
            else:
                joined.append(e)
        out += [e for e in joined if e[lo + 2] - e[lo] >= EDGE_MIN]
    return out


def _cells(vert: list[list[float]], horiz: list[list[float]]) -> list[Rect]:
    """Intersections of the edges, then from each the first cell down and right."""
    inter: dict[tuple[float, float], tuple[set, set]] = {}
    for vi, (vx, vtop, _, vbottom) in enumerate(vert):
        for hi, (hx0, hy, hx1, _) in enumerate(horiz):
            if vtop <= hy + SNAP and vbottom >= hy - SNAP and hx0 - SNAP <= vx <= hx1 + SNAP:
                point = inter.get((vx, hy))
                if point is None:
                    point = inter[(vx, hy)] = (set(), set())
                point[0].add(vi)
                point[1].add(hi)
    column: dict[float, list[float]] = defaultdict(list)  # x → ys of its points, ascending
    row: dict[float, list[float]] = defaultdict(list)  # y → xs of its points, ascending
    for x, y in sorted(inter):
        column[x].append(y)
        row[y].append(x)
    cells = []
    for (x, y), (vs, hs) in sorted(inter.items()):
        found = None
        for by in column[x]:
            if by <= y or not vs & inter[(x, by)][0]:
                continue
            below_h = inter[(x, by)][1]
            for rx in row[y]:
                if rx <= x or not hs & inter[(rx, y)][1]:
                    continue
                corner = inter.get((rx, by))
                if corner and corner[0] & inter[(rx, y)][0] and corner[1] & below_h:
                    found = (x, y, rx, by)
                    break
            if found:
                break
        if found:
            cells.append(found)
    return cells


def _group(cells: list[Rect]) -> list[list[Rect]]:
    """Cells that share a corner, transitively, form one table."""
    parent = list(range(len(cells)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[float, float], int] = {}
    for i, (x0, y0, x1, y1) in enumerate(cells):
        for corner in ((x0, y0), (x0, y1), (x1, y0), (x1, y1)):
            j = owner.setdefault(corner, i)
            parent[find(j)] = find(i)
    groups: dict[int, list[Rect]] = defaultdict(list)
    for i, cell in enumerate(cells):
        groups[find(i)].append(cell)
    return list(groups.values())


def ruled_tables(paths: list[dict], words: list[tuple], clip: Rect) -> list[list[Rect]]:
    """The cells of each ruled table inside ``clip``, tables top to bottom.

    ``paths`` is ``page.get_cdrawings()``, ``words`` is ``page.get_text("words")``: text
    decides which clusters of drawings get a frame and which grids are tables.
    """
    cx0, cy0, cx1, cy1 = clip
    word_boxes = [
        (w[0], w[1], w[2], w[3])
        for w in words
        if cx0 <= w[0] and w[2] <= cx1 and cy0 <= w[1] and w[3] <= cy1 and w[4].strip()
    ]
    vert, horiz = _edges(paths, clip, word_boxes)
    # Edges shorter than a point (the polygon segments of curves, glyphs drawn as paths) are
    # dropped before snapping: a run of them would chain distant rules into one cluster.
    vert = [e for e in vert if e[3] - e[1] >= 1]
    horiz = [e for e in horiz if e[2] - e[0] >= 1]
    _snap(vert, 0)
    _snap(horiz, 1)
    vert, horiz = _join(vert, 0), _join(horiz, 1)
    tables = []
    for group in _group(_cells(vert, horiz)):
        if len({c[0] for c in group}) < 2 or len({c[2] for c in group}) < 2:
            continue
        x0, y0, x1, y1 = bounds(group)
        if any(a < x1 and c > x0 and b < y1 and d > y0 for a, b, c, d in word_boxes):
            tables.append(group)
    tables.sort(key=lambda t: min((c[1], c[0]) for c in t))
    return tables


def table_grid(cells: list[Rect]) -> list[tuple[Rect, list[Rect | None]]]:
    """Rows of a table's cells: (row bbox, one slot per distinct cell left edge), top to
    bottom; a slot no cell starts in (it lies under a merged cell) is ``None``."""
    xs = sorted({c[0] for c in cells})
    rows: dict[float, dict[float, Rect]] = defaultdict(dict)
    for cell in sorted(cells, key=lambda c: (c[1], c[0])):
        rows[cell[1]][cell[0]] = cell
    grid = []
    for top in sorted(rows):
        row = rows[top]
        grid.append((bounds(list(row.values())), [row.get(x) for x in xs]))
    return grid
