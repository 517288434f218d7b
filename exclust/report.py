"""What a person looks at: the drawn tree, rules per cluster, scatter plots with the cuts,
cost-vs-leaves curves, a metrics table that says what each number means, and the HTML page
that holds them all.

Every function here is pure: it takes a tree and small summaries and returns text (SVG or
HTML). Nothing is fetched from the network when the page is opened: styles are inline,
plots are inline SVG (matplotlib's points rasterized into the SVG to keep it small), so the
report can be mailed, archived or attached to a Prefect run as one file.
"""
from __future__ import annotations

import colorsys
import hashlib
import html
import io
import math
import re
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from exclust._kernels import INTERVAL, LEAF, ONE_SIDED
from exclust.tree import ThresholdTree

__all__ = [
    "cluster_colors",
    "choose_scatter_features",
    "cut_regions",
    "tree_svg",
    "scatter_svg",
    "cost_curve_svg",
    "metrics_table_html",
    "contingency_svg",
    "render_report",
    "summary_markdown",
]

# ---------------------------------------------------------------------------- colours
# Okabe & Ito's palette is distinguishable under the common colour-vision deficiencies; it
# has seven usable colours (its black is kept for text and cuts).
_OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442"]
_TAB10 = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
]
_TAB20 = [
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
    "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
    "#bcbd22", "#dbdb8d", "#17becf", "#9edae5",
]

_FONT_STACK = (
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', 'Noto Sans', "
    "'Liberation Sans', Arial, sans-serif"
)
_MONO_STACK = "ui-monospace, 'SFMono-Regular', Menlo, Consolas, 'DejaVu Sans Mono', monospace"


def cluster_colors(k: int) -> list[str]:
    """One hex colour per cluster: Okabe-Ito up to 7, tab10 up to 10, tab20 up to 20, then evenly spaced hues."""
    k = max(int(k), 0)
    if k <= len(_OKABE_ITO):
        return _OKABE_ITO[:k]
    if k <= 10:
        return _TAB10[:k]
    if k <= 20:
        return _TAB20[:k]
    out = []
    for i in range(k):
        # golden-ratio hue steps keep neighbouring cluster ids apart; two lightness levels double the range
        h = (i * 0.618033988749895) % 1.0
        l = 0.45 if i % 2 == 0 else 0.65
        r, g, b = colorsys.hls_to_rgb(h, l, 0.65)
        out.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return out


def _rgb(color: str) -> tuple[float, float, float]:
    c = color.lstrip("#")
    if len(c) == 3:
        c = "".join(ch * 2 for ch in c)
    return tuple(int(c[i : i + 2], 16) / 255.0 for i in (0, 2, 4))  # type: ignore[return-value]


def _text_color_on(color: str) -> str:
    """Black or white, whichever reads better on ``color`` (WCAG relative luminance)."""
    try:
        rgb = _rgb(color)
    except ValueError:
        return "#111"

    def lin(v: float) -> float:
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
    return "#111111" if lum > 0.23 else "#ffffff"


def _palette_for(tree: ThresholdTree, colors: Sequence[str] | None) -> list[str]:
    k = max(tree.n_clusters, 1)
    if colors is None:
        return cluster_colors(k)
    colors = [str(c) for c in colors]
    if len(colors) < k:
        raise ValueError(f"cluster_colors has {len(colors)} colours for {k} clusters; give one per cluster")
    return colors


# ---------------------------------------------------------------------------- number formatting
def _fmt_num(v: float) -> str:
    """Thresholds as the tree module writes them (6 significant digits), so drawings and rules agree."""
    return f"{v:.6g}"


def _fmt_value(v: Any, *, integer_like: bool = False) -> str:
    """A metric value for people: 4 significant digits, thousands separators for counts, '—' for missing."""
    if v is None:
        return "—"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "—"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        if integer_like and v == round(v):
            return f"{int(round(v)):,}"
        if v == 0:
            return "0"
        a = abs(v)
        if a >= 1e6 or a < 1e-3:
            return f"{v:.3e}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")
        if a >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    return str(v)


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _text_width(s: str, size: float, bold: bool = False) -> float:
    """A generous estimate of rendered text width: sans-serif glyphs average about 0.6 em."""
    return len(s) * size * (0.62 if bold else 0.58)


def _scoped(css: str, scope: str) -> str:
    """Prefix every selector with ``scope``: an inline SVG's <style> applies to the whole page otherwise."""
    rules = []
    for block in css.split("}"):
        if "{" not in block:
            continue
        selectors, body = block.split("{", 1)
        prefixed = ",".join(f"{scope} {sel.strip()}" for sel in selectors.split(","))
        rules.append(f"{prefixed}{{{body}}}")
    return "".join(rules)


def _short(s: str, n: int = 24) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


# ---------------------------------------------------------------------------- tree drawing
def _tree_layout(tree: ThresholdTree) -> tuple[dict[int, float], dict[int, int], list[int]]:
    """Tidy layout: leaves at consecutive slots left to right, every parent centred over its two children."""
    slot: dict[int, float] = {}
    depth: dict[int, int] = {0: 0}
    order: list[int] = []
    next_leaf = 0
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        node, children_done = stack.pop()
        if tree.kind[node] == LEAF:
            slot[node] = float(next_leaf)
            next_leaf += 1
            order.append(node)
            continue
        left, right = int(tree.left[node]), int(tree.right[node])
        if children_done:
            slot[node] = (slot[left] + slot[right]) / 2.0
            order.append(node)
            continue
        depth[left] = depth[right] = depth[node] + 1
        stack.append((node, True))
        stack.append((right, False))
        stack.append((left, False))
    return slot, depth, order


def _node_lines(tree: ThresholdTree, node: int, two_lines: bool) -> list[str]:
    name = _short(tree.feature_names[int(tree.feature[node])])
    t = _fmt_num(float(tree.threshold[node]))
    if tree.kind[node] == ONE_SIDED:
        head, tail = name, f"≤ {t}"
    else:
        head, tail = f"|{name} − {_fmt_num(float(tree.center[node]))}|", f"≤ {t}"
    return [head, tail] if two_lines else [f"{head} {tail}"]


def tree_svg(
    tree: ThresholdTree,
    cluster_colors: Sequence[str] | None = None,
    leaf_counts: Mapping[int, float] | None = None,
    *,
    cluster_names: Sequence[str] | None = None,
    orientation: str = "auto",
    shares_only: bool = False,
) -> str:
    """The tree as an inline SVG drawing: tests in the internal nodes, yes/no edges, coloured leaves.

    ``leaf_counts`` maps leaf node ids to point counts (shown with their share; only the share
    when ``shares_only``). ``orientation``: "top-down" (a classic tree, for up to ~12 leaves),
    "left-right" (one row per leaf, for wide shallow trees), "outline" (one indented row per
    node, for deep trees) or "auto", which picks the first that fits a page.
    """
    palette = _palette_for(tree, cluster_colors)
    slot, depth, order = _tree_layout(tree)
    n_leaves = tree.n_leaves
    max_depth = max(depth.values())
    total = None
    if leaf_counts:
        total = float(sum(float(v) for v in leaf_counts.values())) or None

    def leaf_label(node: int) -> str:
        c = int(tree.value[node])
        return cluster_names[c] if cluster_names is not None else f"cluster {c}"

    def leaf_count_text(node: int) -> str | None:
        if not leaf_counts or node not in leaf_counts:
            return None
        v = float(leaf_counts[node])
        if shares_only and total:
            return f"≈ {v / total:.1%}"
        share = f" · {v / total:.1%}" if total else ""
        return f"{_fmt_value(v, integer_like=True)}{share}"

    if orientation not in ("auto", "top-down", "left-right", "outline"):
        raise ValueError(f"orientation must be 'auto', 'top-down', 'left-right' or 'outline', got {orientation!r}")

    fs, fs_small = 13.0, 11.0
    pad_x, line_h = 10.0, 16.0
    # Widths in the top-down form, where tests take two lines and leaf counts go under the label.
    int_w2 = max(
        (max(_text_width(s, fs, bold=(i == 0)) for i, s in enumerate(_node_lines(tree, n, True))) + 2 * pad_x
         for n in order if tree.kind[n] != LEAF),
        default=0.0,
    )
    leaf_w2 = max(
        max(_text_width(leaf_label(n), fs, bold=True), _text_width(leaf_count_text(n) or "", fs_small)) + 2 * pad_x
        for n in order if tree.kind[n] == LEAF
    )
    slot_w = max(leaf_w2 + 12.0, (int_w2 + leaf_w2) / 3.0 + 8.0, int_w2 / 2.0 + 6.0, 64.0)
    if orientation == "auto" and n_leaves * slot_w <= 1240:
        orientation = "top-down"
    top_down = orientation == "top-down"

    has_counts = leaf_counts is not None and any(n in leaf_counts for n in order if tree.kind[n] == LEAF)
    margin = 16.0
    boxes: dict[int, tuple[float, float, float, float, list[str]]] = {}  # cx, cy, w, h, lines
    if top_down:
        int_h = 2 * line_h + 8
        leaf_h = (2 * line_h + 8) if has_counts else (line_h + 12)
        level_h = max(int_h, leaf_h) + 46.0
        width = 2 * margin + n_leaves * slot_w
        height = 2 * margin + max_depth * level_h + max(int_h, leaf_h)
        for n in order:
            cx = margin + (slot[n] + 0.5) * slot_w
            top = margin + depth[n] * level_h
            if tree.kind[n] == LEAF:
                lines = [leaf_label(n)] + ([leaf_count_text(n)] if leaf_count_text(n) else [])
                w = max([_text_width(lines[0], fs, True)] + [_text_width(s, fs_small) for s in lines[1:]]) + 2 * pad_x
                boxes[n] = (cx, top + leaf_h / 2, max(w, 56.0), leaf_h, lines)
            else:
                lines = _node_lines(tree, n, True)
                w = max(_text_width(lines[0], fs, True), _text_width(lines[1], fs)) + 2 * pad_x
                boxes[n] = (cx, top + int_h / 2, w, int_h, lines)
    else:
        box_h = line_h + 10
        row_h = box_h + 8.0
        col_lines = {n: (_node_lines(tree, n, False) if tree.kind[n] != LEAF else
                         [leaf_label(n) + (f"  ·  {leaf_count_text(n)}" if leaf_count_text(n) else "")])
                     for n in order}
        widths = {n: _text_width(col_lines[n][0], fs, bold=True) + 2 * pad_x for n in order}
        # one column per depth, as wide as its widest box plus room for the edge labels
        col_w = [0.0] * (max_depth + 1)
        for n in order:
            col_w[depth[n]] = max(col_w[depth[n]], widths[n])
        gap = 46.0
        col_x = [margin]
        for d in range(max_depth):
            col_x.append(col_x[-1] + col_w[d] + gap)
        width = col_x[-1] + col_w[-1] + margin
        height = 2 * margin + n_leaves * row_h
        if orientation == "auto":
            # a deep tree drawn left to right runs off the page: an indented outline always fits
            orientation = "left-right" if width <= 1600 else "outline"
        if orientation == "left-right":
            for n in order:
                cy = margin + (slot[n] + 0.5) * row_h
                w = widths[n]
                boxes[n] = (col_x[depth[n]] + w / 2, cy, w, box_h, col_lines[n])
        else:
            # one row per node in pre-order (yes branch first), indented by depth, like a file tree
            indent, stub = 44.0, 12.0
            preorder: list[int] = []
            stack = [0]
            while stack:
                n = stack.pop()
                preorder.append(n)
                if tree.kind[n] != LEAF:
                    stack.extend((int(tree.right[n]), int(tree.left[n])))
            row_h = box_h + 6.0
            for row, n in enumerate(preorder):
                w = widths[n]
                x0 = margin + depth[n] * indent
                boxes[n] = (x0 + w / 2, margin + (row + 0.5) * row_h, w, box_h, col_lines[n])
            width = max(bx + bw / 2 for bx, _, bw, _, _ in boxes.values()) + margin
            height = 2 * margin + len(preorder) * row_h

    parts: list[str] = []
    edges: list[str] = []
    edge_labels: list[str] = []
    for n in order:
        if tree.kind[n] == LEAF:
            continue
        px, py, pw, ph, _ = boxes[n]
        for child, word in ((int(tree.left[n]), "yes"), (int(tree.right[n]), "no")):
            cx, cy, cw, chh, _ = boxes[child]
            if orientation == "outline":
                x1, y1, x2, y2 = px - pw / 2 + stub, py + ph / 2, cx - cw / 2, cy
                d = f"M{x1:.1f},{y1:.1f} V{y2 - 4:.1f} Q{x1:.1f},{y2:.1f} {x1 + 4:.1f},{y2:.1f} H{x2:.1f}"
                edges.append(f'<path class="edge edge-{word}" d="{d}"/>')
                edge_labels.append(
                    f'<text class="edge-label edge-label-{word}" x="{(x1 + x2) / 2 + 2:.1f}" y="{y2 + 3.5:.1f}" '
                    f'text-anchor="middle">{word}</text>'
                )
                continue
            if top_down:
                x1, y1, x2, y2 = px, py + ph / 2, cx, cy - chh / 2
                ym = (y1 + y2) / 2
                d = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{ym:.1f} {x2:.1f},{ym:.1f} {x2:.1f},{y2:.1f}"
            else:
                x1, y1, x2, y2 = px + pw / 2, py, cx - cw / 2, cy
                xm = (x1 + x2) / 2
                d = f"M{x1:.1f},{y1:.1f} C{xm:.1f},{y1:.1f} {xm:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
            edges.append(f'<path class="edge edge-{word}" d="{d}"/>')
            lx, ly = (x1 + x2) / 2, (y1 + y2) / 2
            edge_labels.append(
                f'<text class="edge-label edge-label-{word}" x="{lx:.1f}" y="{ly + 4:.1f}" '
                f'text-anchor="middle">{word}</text>'
            )
    for n in order:
        cx, cy, w, h, lines = boxes[n]
        x, y = cx - w / 2, cy - h / 2
        if tree.kind[n] == LEAF:
            c = int(tree.value[n])
            fill = palette[c % len(palette)]
            ink = _text_color_on(fill)
            count_text = leaf_count_text(n)
            title = f"leaf {n}: {leaf_label(n)}" + (
                "" if not count_text else f" ({count_text} of the sample)" if shares_only else f" ({count_text} points)"
            )
            texts = []
            if top_down and len(lines) == 2:
                texts.append(f'<text x="{cx:.1f}" y="{cy - 3:.1f}" class="leaf-label" fill="{ink}">{_esc(lines[0])}</text>')
                texts.append(f'<text x="{cx:.1f}" y="{cy + 12:.1f}" class="leaf-count" fill="{ink}">{_esc(lines[1])}</text>')
            else:
                texts.append(f'<text x="{cx:.1f}" y="{cy + 4.5:.1f}" class="leaf-label" fill="{ink}">{_esc(lines[0])}</text>')
            parts.append(
                f'<g class="node leaf" data-node="{n}" data-cluster="{c}"><title>{_esc(title)}</title>'
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="7" fill="{fill}"/>'
                + "".join(texts) + "</g>"
            )
        else:
            kind = "interval" if tree.kind[n] == INTERVAL else "one-sided"
            texts = []
            if len(lines) == 2:
                texts.append(f'<text x="{cx:.1f}" y="{cy - 3:.1f}" class="test-feature">{_esc(lines[0])}</text>')
                texts.append(f'<text x="{cx:.1f}" y="{cy + 13:.1f}" class="test-threshold">{_esc(lines[1])}</text>')
            else:
                texts.append(f'<text x="{cx:.1f}" y="{cy + 4.5:.1f}" class="test-feature">{_esc(lines[0])}</text>')
            parts.append(
                f'<g class="node internal {kind}" data-node="{n}"><title>{_esc(tree.describe_node(n))}</title>'
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="5"/>'
                + "".join(texts) + "</g>"
            )

    style = (
        f"text{{font-family:{_FONT_STACK};font-size:{fs:.0f}px;text-anchor:middle}}"
        ".edge{fill:none;stroke:#9aa3ad;stroke-width:1.6}"
        ".edge-no{stroke-dasharray:5 4}"
        f".edge-label{{font-size:{fs_small:.0f}px;fill:#56606b;paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}}"
        ".node.internal rect{fill:#f4f6f8;stroke:#46505a;stroke-width:1.2}"
        ".node.internal.interval rect{fill:#eef0fb;stroke:#4b4f8c;stroke-dasharray:4 2}"
        ".test-feature{font-weight:600;fill:#1d2630}"
        ".test-threshold{fill:#1d2630}"
        ".leaf-label{font-weight:600}"
        f".leaf-count{{font-size:{fs_small:.0f}px;opacity:.9}}"
        ".node rect{filter:drop-shadow(0 1px 1px rgba(0,0,0,.12))}"
    )
    label = f"Decision tree with {n_leaves} leaves and depth {tree.depth}"
    # small trees may grow a little with the page; big ones never shrink below ~9 px text (they scroll instead)
    min_w = int(min(width, max(width * 0.72, 640)))
    max_w = int(width * 1.3) if width < 700 else int(width)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="tree-svg {orientation}" role="img" '
        f'aria-label="{_esc(label)}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" preserveAspectRatio="xMidYMin meet" '
        f'style="display:block;margin:0 auto;width:100%;min-width:{min_w}px;max-width:{max_w}px;height:auto">'
        f"<title>{_esc(label)}</title><style>{_scoped(style, 'svg.tree-svg')}</style>"
        f'<g class="edges">{"".join(edges)}</g><g class="nodes">{"".join(parts)}</g>'
        f'<g class="edge-labels">{"".join(edge_labels)}</g></svg>'
    )


# ---------------------------------------------------------------------------- scatter with cuts
def choose_scatter_features(tree: ThresholdTree, X_sample: np.ndarray | None = None) -> tuple[int, int]:
    """The two features to plot: both when d = 2, else the first two distinct features met from the root."""
    d = tree.n_features
    if d == 1:
        return (0, 0)
    if d == 2:
        return (0, 1)
    seen: list[int] = []
    frontier = [0]
    while frontier and len(seen) < 2:
        nxt = []
        for node in frontier:
            if tree.kind[node] != LEAF:
                f = int(tree.feature[node])
                if f not in seen:
                    seen.append(f)
                nxt.extend((int(tree.left[node]), int(tree.right[node])))
        frontier = nxt
    if len(seen) < 2:
        # fill with the most spread-out remaining feature, so the picture shows the data's shape
        if X_sample is not None and len(X_sample):
            spread = np.nanstd(np.asarray(X_sample, dtype=float), axis=0)
            candidates = [j for j in np.argsort(-spread) if j not in seen]
        else:
            candidates = [j for j in range(d) if j not in seen]
        seen.extend(int(j) for j in candidates[: 2 - len(seen)])
    return (seen[0], seen[1])


Box = tuple[float, float, float, float]  # xmin, xmax, ymin, ymax


def _clip_box(box: Box, axis: int, lo: float, hi: float) -> Box | None:
    b = list(box)
    i = 0 if axis == 0 else 2
    b[i], b[i + 1] = max(b[i], lo), min(b[i + 1], hi)
    return tuple(b) if b[i] < b[i + 1] else None  # type: ignore[return-value]


def cut_regions(tree: ThresholdTree, features: tuple[int, int], limits: Box) -> dict[int, list[Box]]:
    """For every node, the region of the plotted plane that reaches it, as a list of boxes.

    A cut on a feature that is not plotted leaves both children the parent's region (the plane
    is a projection). An interval cut's *outside* branch is the band's complement, which is up to
    two boxes; that is why a region is a list of boxes and not one box.
    """
    fx, fy = features
    regions: dict[int, list[Box]] = {0: [limits]}
    stack = [0]
    while stack:
        node = stack.pop()
        if tree.kind[node] == LEAF:
            continue
        left, right = int(tree.left[node]), int(tree.right[node])
        f, t = int(tree.feature[node]), float(tree.threshold[node])
        axes = [a for a, fa in ((0, fx), (1, fy)) if fa == f]
        if fx == fy:
            axes = [0]
        if not axes:
            regions[left], regions[right] = list(regions[node]), list(regions[node])
        elif tree.kind[node] == ONE_SIDED:
            a = axes[0]
            regions[left] = [b for b in (_clip_box(r, a, -math.inf, t) for r in regions[node]) if b]
            regions[right] = [b for b in (_clip_box(r, a, t, math.inf) for r in regions[node]) if b]
        else:
            a = axes[0]
            c = float(tree.center[node])
            lo, hi = c - t, c + t
            regions[left] = [b for b in (_clip_box(r, a, lo, hi) for r in regions[node]) if b]
            outside = []
            for r in regions[node]:
                for part in (_clip_box(r, a, -math.inf, lo), _clip_box(r, a, hi, math.inf)):
                    if part:
                        outside.append(part)
            regions[right] = outside
        stack.extend((left, right))
    return regions


def _svg_from_figure(fig, salt: str, css_class: str, label: str) -> str:
    """Render a matplotlib figure as an inline, responsive SVG without XML prolog or external references."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight", dpi=144,
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # size comes from the page (width:100%), shape from the viewBox
    head_end = svg.index(">")
    head = svg[:head_end]
    head = re.sub(r'\s(width|height)="[^"]*"', "", head, count=2)
    vb = re.search(r'viewBox="[-0-9.]+ [-0-9.]+ ([0-9.]+)', head)
    # never blow a figure up much beyond its drawn size: its text would grow with it
    cap = f";max-width:{float(vb.group(1)) * 96 / 72 * 1.2:.0f}px;display:block;margin:0 auto" if vb else ""
    head += f' class="{css_class}" role="img" aria-label="{_esc(label)}" style="width:100%;height:auto{cap}"'
    body = re.sub(r"(<style[^>]*>)(.*?)(</style>)", lambda m: m.group(1) + _scoped(m.group(2), f"svg.{css_class}") + m.group(3),
                  svg[head_end:], flags=re.S)
    return head + body


def scatter_svg(
    X_sample,
    labels=None,
    tree: ThresholdTree | None = None,
    features: tuple[int, int] | None = (0, 1),
    feature_names: Sequence[str] | None = None,
    title: str | None = None,
    *,
    cluster_colors: Sequence[str] | None = None,
    max_points: int = 5000,
    random_state: int = 0,
) -> str:
    """A scatter of a sample on two features, coloured by cluster, with the tree's cuts drawn in their regions."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    if tree is None:
        raise ValueError("scatter_svg needs the tree whose cuts it draws (tree=...)")
    X = np.asarray(X_sample, dtype=float)
    if X.ndim != 2 or X.shape[1] != tree.n_features:
        raise ValueError(
            f"X_sample must be a (rows, {tree.n_features}) array like the tree's data; got shape {X.shape}"
        )
    if features is None:
        features = choose_scatter_features(tree, X)
    fx, fy = (int(features[0]), int(features[1]))
    for f in (fx, fy):
        if not 0 <= f < tree.n_features:
            raise ValueError(f"feature index {f} is outside [0, {tree.n_features}); pick two of the tree's features")
    names = list(feature_names) if feature_names is not None else list(tree.feature_names)
    labels = tree.predict(X) if labels is None else np.asarray(labels).astype(np.int64).ravel()
    if labels.shape[0] != X.shape[0]:
        raise ValueError(f"labels has {labels.shape[0]} entries for {X.shape[0]} sample rows")
    keep = np.isfinite(X[:, fx]) & np.isfinite(X[:, fy])
    X, labels = X[keep], labels[keep]
    if X.shape[0] > max_points:
        idx = np.random.default_rng(random_state).choice(X.shape[0], max_points, replace=False)
        X, labels = X[np.sort(idx)], labels[np.sort(idx)]

    one_d = fx == fy
    xs = X[:, fx]
    ys = (np.random.default_rng(random_state).uniform(0, 1, X.shape[0]) if one_d else X[:, fy])

    def lims(v: np.ndarray, cuts: Iterable[float]) -> tuple[float, float]:
        vals = np.concatenate([v, np.asarray(list(cuts), dtype=float)]) if len(v) else np.asarray(list(cuts) or [0.0, 1.0])
        lo, hi = float(np.min(vals)), float(np.max(vals))
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        pad = 0.05 * (hi - lo)
        return lo - pad, hi + pad

    internal = np.flatnonzero(tree.kind != LEAF)

    def cut_positions(feat: int) -> list[float]:
        out: list[float] = []
        for n in internal:
            if int(tree.feature[n]) != feat:
                continue
            if tree.kind[n] == ONE_SIDED:
                out.append(float(tree.threshold[n]))
            else:
                out += [float(tree.center[n] - tree.threshold[n]), float(tree.center[n] + tree.threshold[n])]
        return out

    # cuts far outside the data would squash the points; only include cuts near the sample's range
    def near(v: np.ndarray, cuts: list[float]) -> list[float]:
        if not len(v):
            return cuts
        lo, hi = float(np.min(v)), float(np.max(v))
        span = max(hi - lo, 1e-12)
        return [c for c in cuts if lo - 0.25 * span <= c <= hi + 0.25 * span]

    xlim = lims(xs, near(xs, cut_positions(fx)))
    ylim = (-0.05, 1.05) if one_d else lims(ys, near(ys, cut_positions(fy)))
    regions = cut_regions(tree, (fx, fy), (xlim[0], xlim[1], ylim[0], ylim[1]))

    palette = _palette_for(tree, cluster_colors)
    k = len(palette)
    fig = Figure(figsize=(6.4, 5.0) if not one_d else (6.4, 2.8))
    ax = fig.add_subplot(1, 1, 1)
    depths = _tree_layout(tree)[1]
    max_depth = max(depths.values()) or 1

    for n in internal:
        f = int(tree.feature[n])
        if f not in (fx, fy):
            continue
        axis = 0 if f == fx else 1
        lw = 2.4 - 1.4 * depths[int(n)] / max_depth  # the root's cut is the boldest
        for (x0, x1, y0, y1) in regions[int(n)]:
            if tree.kind[n] == ONE_SIDED:
                t = float(tree.threshold[n])
                if axis == 0 and x0 < t < x1:
                    ax.plot([t, t], [y0, y1], color="#222222", lw=lw, zorder=4, solid_capstyle="butt",
                            gid=f"cut-node-{int(n)}")
                elif axis == 1 and y0 < t < y1:
                    ax.plot([x0, x1], [t, t], color="#222222", lw=lw, zorder=4, solid_capstyle="butt",
                            gid=f"cut-node-{int(n)}")
            else:
                c, t = float(tree.center[n]), float(tree.threshold[n])
                lo, hi = c - t, c + t
                if axis == 0:
                    a, b = max(lo, x0), min(hi, x1)
                    if a >= b:
                        continue
                    rect = Rectangle((a, y0), b - a, y1 - y0)
                    edges = [([lo, lo], [y0, y1]) if x0 < lo < x1 else None, ([hi, hi], [y0, y1]) if x0 < hi < x1 else None]
                else:
                    a, b = max(lo, y0), min(hi, y1)
                    if a >= b:
                        continue
                    rect = Rectangle((x0, a), x1 - x0, b - a)
                    edges = [([x0, x1], [lo, lo]) if y0 < lo < y1 else None, ([x0, x1], [hi, hi]) if y0 < hi < y1 else None]
                rect.set(facecolor="#4b4f8c", alpha=0.12, edgecolor="none", zorder=1, gid=f"interval-band-node-{int(n)}")
                ax.add_patch(rect)
                for e in edges:
                    if e:
                        ax.plot(*e, color="#4b4f8c", lw=lw, ls=(0, (4, 2)), zorder=4, gid=f"cut-node-{int(n)}")

    size = 14.0 if X.shape[0] <= 1000 else (8.0 if X.shape[0] <= 3000 else 5.0)
    present = np.unique(labels)
    for c in present:
        m = labels == c
        color = palette[int(c) % k] if c >= 0 else "#9aa3ad"
        ax.scatter(xs[m], ys[m], s=size, c=color, alpha=0.75, linewidths=0, rasterized=True, zorder=2,
                   label=f"cluster {int(c)}" if c >= 0 else "noise (−1)")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel(names[fx])
    if one_d:
        ax.set_yticks([])
        ax.set_ylabel("(spread out to show density)")
    else:
        ax.set_ylabel(names[fy])
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(colors="#444444", labelsize=9)
    ax.grid(True, color="#e8ebee", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    if title:
        ax.set_title(title, loc="left", fontsize=11)
    if 1 < len(present) <= 12:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8.5,
                  markerscale=1.8 if size < 10 else 1.0, handletextpad=0.3)
    salt = hashlib.sha1(f"scatter{fx},{fy},{X.shape}{title}".encode()).hexdigest()[:10]
    label = f"Scatter of {X.shape[0]:,} sample points on {names[fx]}" + ("" if one_d else f" and {names[fy]}") + " with the tree's cuts"
    return _svg_from_figure(fig, salt, "scatter-svg", label)


# ---------------------------------------------------------------------------- cost curve
_CURVE_STYLE = {
    "exkmc": dict(label="ExKMC", color="#111111", marker="o", ls="-", lw=2.2, zorder=5),
    "imm": dict(label="IMM", color="#CC79A7", marker="*", ls="none", ms=13, zorder=6),
    "cart": dict(label="CART", color="#E69F00", marker="s", ls="--", lw=1.6, zorder=4),
    "kdtree": dict(label="KDTree", color="#0072B2", marker="^", ls=":", lw=1.8, zorder=3),
}


def _series_points(leaves: np.ndarray, series: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(series, Mapping):
        pairs = sorted((float(a), float("nan") if b is None else float(b)) for a, b in series.items())
        x = np.array([p[0] for p in pairs])
        y = np.array([p[1] for p in pairs])
    elif np.ndim(series) == 0:
        # one number: the tree exists at one size only (IMM has exactly k leaves)
        x = leaves[:1].astype(float)
        y = np.array([float("nan") if series is None else float(series)])
    else:
        y = np.array([float("nan") if v is None else float(v) for v in series])
        if y.shape[0] != leaves.shape[0]:
            raise ValueError(f"a curve series has {y.shape[0]} values for {leaves.shape[0]} leaf counts")
        x = leaves.astype(float)
    ok = np.isfinite(y)
    return x[ok], y[ok]


def cost_curve_svg(curve: Mapping[str, Any], *, title: str | None = None) -> str:
    """Cost ratio (tree / reference) against the number of leaves, one line per method, a dashed line at 1."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    if "leaves" not in curve:
        raise ValueError("the curve needs a 'leaves' list (number of leaves of each tree) besides its series")
    leaves = np.asarray(curve["leaves"], dtype=float)
    fig = Figure(figsize=(6.4, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    ymax = 1.0
    plotted = 0
    skip = {"leaves", "k", "title", "dataset", "baselines"}
    for name in list(_CURVE_STYLE) + [n for n in curve if n not in _CURVE_STYLE and n not in skip]:
        if name not in curve or curve[name] is None:
            continue
        x, y = _series_points(leaves, curve[name])
        if not len(y):
            continue
        style = dict(_CURVE_STYLE.get(name, dict(label=str(name), marker="d", ls="-.", lw=1.4)))
        style.setdefault("ms", 5)
        ax.plot(x, y, gid=f"series-{name}", **style)
        ymax = max(ymax, float(np.max(y)))
        plotted += 1
    ax.axhline(1.0, color="#666666", ls="--", lw=1.1, zorder=1, gid="reference-line")
    ax.text(0.01, 1.0, "reference = 1", transform=ax.get_yaxis_transform(), va="bottom", ha="left",
            fontsize=8.5, color="#555555")
    if curve.get("k") is not None:
        ax.axvline(float(curve["k"]), color="#bbbbbb", ls=":", lw=1, zorder=0)
        ax.text(float(curve["k"]), 1.0, " k", transform=ax.get_xaxis_transform(), va="top", fontsize=8.5,
                color="#777777")
    top = ymax + 0.08 * max(ymax - 1.0, 0.1)
    ax.set_ylim(min(0.97, ax.get_ylim()[0]), top)
    ax.set_xlabel("number of leaves")
    ax.set_ylabel("cost ratio (tree / reference)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(True, color="#e8ebee", lw=0.6)
    ax.set_axisbelow(True)
    if leaves.size and np.all(leaves == np.round(leaves)):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if title or curve.get("title"):
        ax.set_title(str(title or curve.get("title")), loc="left", fontsize=11)
    if plotted:
        ax.legend(frameon=False, fontsize=9)
    salt = hashlib.sha1(f"curve{sorted(map(str, curve))}{leaves.tolist()}".encode()).hexdigest()[:10]
    return _svg_from_figure(fig, salt, "curve-svg", "Cost ratio against number of leaves")


# ---------------------------------------------------------------------------- metrics
_ENR_DEFAULT = (
    "explainability-to-noise ratio of the fitted mixture: over pairs of components, the smallest "
    "largest per-axis squared gap between their means in units of the noise; large means "
    "well separated along some axis, so a small tree can be faithful"
)

# key -> (label, explanation, group)
_METRIC_INFO: dict[str, tuple[str, str, str]] = {
    "algorithm": ("algorithm", "how the tree was built", "run"),
    "reference": ("reference clustering", "the clustering the tree explains", "run"),
    "threshold": ("threshold rule", "how MMDT places a cut between the means of a node (midpoint, Gaussian or Chebyshev bound, exact tail, random)", "run"),
    "k": ("clusters k", "number of clusters of the reference clustering", "run"),
    "d": ("features d", "number of features the tree may test", "run"),
    "n": ("points n", "points scored (rows after dropping unusable ones)", "run"),
    "n_leaves": ("leaves", "leaves of the tree; each leaf sends its points to one cluster", "tree"),
    "depth": ("depth", "longest root-to-leaf path: the most tests a point's explanation needs", "tree"),
    "price_kmeans": ("price of explainability (k-means)", "k-means cost of the tree's clusters divided by the reference clustering's; 1 means explaining costs nothing, lower is better", "faithfulness"),
    "surrogate_price": ("surrogate price", "cost when each leaf's points are charged to the leaf's reference center (ExKMC's surrogate cost, paper 003 Def. 1), divided by the reference cost", "faithfulness"),
    "price_kmedians": ("price of explainability (k-medians)", "ℓ1 cost to each tree cluster's median divided by the same for the reference clusters (paper 002 Def. 1)", "faithfulness"),
    "error_rate": ("error rate", "share of points the tree puts in a different cluster than the reference does; lower is better", "faithfulness"),
    "ari_reference": ("ARI vs reference", "adjusted Rand index of tree clusters against reference clusters (1 identical, 0 chance level)", "faithfulness"),
    "ari_truth": ("ARI vs truth", "adjusted Rand index of tree clusters against the ground-truth labels, when the data has them", "faithfulness"),
    "kmeans_cost_tree": ("k-means cost, tree", "sum of squared distances of the points to their tree cluster's mean", "cost"),
    "kmeans_cost_reference": ("k-means cost, reference", "sum of squared distances of the points to their reference cluster's mean", "cost"),
    "passes": ("passes over the data", "full reads of the data to build and score the tree; at scale each pass costs I/O", "cost"),
    "seconds": ("seconds per step", "wall-clock time of each step of the run", "cost"),
    "enr": ("ENR q", _ENR_DEFAULT, "theory"),
    "n_features": ("features d", "number of features the tree may test", "run"),
    "n_clusters_tree": ("tree clusters", "distinct clusters the tree's leaves can name", "tree"),
    "n_reference_clusters": ("reference clusters", "clusters in the reference clustering", "run"),
    "n_scored": ("points scored", "points with a reference label (noise points are left out of reference-relative numbers)", "run"),
    "n_reference_noise": ("noise points", "points the reference marks as noise (label −1), left out of prices, error rate and ARI vs reference", "run"),
    "n_truth_labelled": ("points with ground truth", "points whose ground-truth label is known", "run"),
    "cluster_sizes_tree": ("cluster sizes, tree", "points per tree cluster", "tree"),
    "cluster_sizes_reference": ("cluster sizes, reference", "points per reference cluster", "run"),
    "surrogate_cost_tree": ("surrogate cost, tree", "each leaf's points charged to its best reference center (paper 003 Def. 1)", "cost"),
    "surrogate_cost_tree_by_label": ("surrogate cost, by leaf label", "each leaf's points charged to the center its label names", "cost"),
    "surrogate_cost_reference": ("surrogate cost, reference", "each point charged to its own reference center", "cost"),
    "ari_reference_truth": ("ARI reference vs truth", "how well the reference clustering itself matches the ground truth: the ceiling for the tree's ARI vs truth", "faithfulness"),
    "kmedians_cost_tree": ("k-medians cost, tree", "ℓ1 distance of the points to their tree cluster's median (an achievable value)", "cost"),
    "kmedians_cost_tree_lower": ("k-medians cost, tree (lower)", "certified lower bound of the same", "cost"),
    "kmedians_cost_reference": ("k-medians cost, reference", "ℓ1 distance of the points to their reference cluster's median", "cost"),
    "kmedians_cost_reference_lower": ("k-medians cost, reference (lower)", "certified lower bound of the same", "cost"),
    "kmedians_relative_gap": ("k-medians relative gap", "how far the reported k-medians costs may be above the true ones, relatively", "cost"),
    "kmedians_passes": ("k-medians passes", "extra histogram passes spent finding the medians", "cost"),
    "contingency_tree_reference": ("tree × reference table", "points per (tree cluster, reference cluster) pair: drawn below", "faithfulness"),
    "bounds": ("bounds of paper 002", "what the theorems guarantee for a mixture with this ENR", "theory"),
}
_GROUP_TITLES = {
    "faithfulness": "How faithful the tree is",
    "tree": "How small the tree is",
    "theory": "What theory promises",
    "cost": "What it cost",
    "run": "The run",
    "other": "Other values",
}
_INTEGER_KEYS = {"n", "n_leaves", "depth", "k", "d", "passes", "n_features", "n_clusters_tree", "n_reference_clusters",
                 "n_scored", "n_reference_noise", "n_truth_labelled", "kmedians_passes"}


def _list_text(values: Sequence[Any], integer_like: bool = False, head: int = 8) -> str:
    """A list in one short line: all of it when short, else its start and its length."""
    if values and isinstance(values[0], (list, tuple)):
        return f"{len(values)} × {len(values[0])} table"
    shown = ", ".join(_fmt_value(v, integer_like=integer_like) for v in values[:head])
    return shown if len(values) <= head else f"{shown}, … ({len(values)} values)"


def _bound_explanation(key: str) -> str:
    k = key.lower()
    upper = "upper" in k or k.endswith("_ub") or "max" in k
    lower = "lower" in k or k.endswith("_lb") or "min" in k
    if "price" in k and upper:
        return "paper 002 Theorem 4: some tree has price ≤ 1 + (4 + 2π²/3)·α·β·K(K−1)/√q"
    if "price" in k and lower:
        return "paper 002 Theorem 5: worst-case mixtures force price ≥ Ω(α·β·log K/√q)"
    if "error" in k and upper:
        return "paper 002 Theorem 8: the MMDT tree misassigns at most (4 + 2π²/3)·α·K(K−1)/q of the mass"
    if "error" in k and lower:
        return "paper 002 Theorem 9: some mixtures force an error rate ≥ (K − 1)/(4q) for any K-leaf tree"
    if k in ("alpha", "α"):
        return "largest mixing weight times K (α ≥ 1; 1 for equal weights)"
    if k in ("beta", "β"):
        return "Assumption 3 constant linking the k-medians cost to the noise scales (1 for Gaussians)"
    if k in ("q", "enr"):
        return "the explainability-to-noise ratio the bounds were evaluated at"
    if "vacuous" in k or "note" in k:
        return "whether the bound says anything at this ENR"
    return ""


_BOUND_LABELS = {
    "K": "components K",
    "q": "ENR q used by the bounds",
    "q_paper000": "ENR q, paper 000 convention",
    "closest_pair": "closest pair of components",
    "alpha": "α (weight imbalance)",
    "beta": "β (Assumption 3)",
    "price_upper_theorem4": "price upper bound (Thm 4)",
    "price_upper_theorem4_gaussian": "price upper bound, Gaussian β (Thm 4)",
    "error_upper_theorem8": "error-rate upper bound (Thm 8)",
    "error_lower_theorem9": "error-rate lower bound (Thm 9)",
    "error_lower_paper000_theorem3": "error-rate lower bound (paper 000 Thm 3)",
    "not_evaluated": "not evaluated",
}


def _bounds_rows(bounds: Mapping[str, Any]) -> list[str]:
    """Rows for paper 002's bounds: each bound's value, its theorem, and whether it says anything here."""
    notes = {k: bounds[k] for k in ("q_convention", "alpha_source") if k in bounds}
    rows = []
    for bk, bv in bounds.items():
        if bk in notes:
            continue
        label = _BOUND_LABELS.get(str(bk), str(bk).replace("_", " "))
        expl = _bound_explanation(str(bk))
        if isinstance(bv, Mapping):
            value = bv.get("value")
            tags = []
            if bv.get("applies") is False:
                tags.append("condition not met" + (f": {bv['requires']}" if bv.get("requires") else ""))
            if bv.get("vacuous"):
                tags.append("vacuous here")
            shown = _esc(_fmt_value(value)) + "".join(f' <span class="tag">{_esc(t)}</span>' for t in tags)
            expl = str(bv.get("name") or expl)
            if bv.get("requires") and bv.get("applies") is not False:
                expl += f" (requires {bv['requires']})"
        elif isinstance(bv, str):
            shown, expl = "", bv
        else:
            shown = _metric_value_html(str(bk), bv)
            if bk == "q" and "q_convention" in notes:
                expl = f"explainability-to-noise ratio, {notes['q_convention']}"
            elif bk == "alpha" and "alpha_source" in notes:
                expl = f"p_k ≤ α/K for every component; here {notes['alpha_source']}"
            elif bk == "K":
                expl = "mixture components the tree separates"
            elif bk == "q_paper000":
                expl = "the same ratio with paper 000's 2σ² denominator (half of q)"
            elif bk == "closest_pair":
                expl = "the two components that set q: hardest to tell apart along any single axis"
        rows.append(
            f'<tr data-key="bounds.{_esc(bk)}"><th scope="row">{_esc(label)}</th>'
            f'<td class="num">{shown}</td><td class="why">{_esc(expl)}</td></tr>'
        )
    return rows


def _metric_value_html(key: str, value: Any) -> str:
    if isinstance(value, Mapping):
        if key == "seconds":
            items = [(str(a), b) for a, b in value.items()]
            total = sum(float(b) for _, b in items if isinstance(b, (int, float, np.integer, np.floating)))
            rows = "".join(
                f'<span class="kv"><span class="k">{_esc(a)}</span> {_esc(_fmt_value(b))} s</span>' for a, b in items
            )
            return f'{rows}<span class="kv total"><span class="k">total</span> {_esc(_fmt_value(total))} s</span>'
        return "".join(
            f'<span class="kv"><span class="k">{_esc(a)}</span> {_esc(_fmt_value(b))}</span>' for a, b in value.items()
        )
    if isinstance(value, (list, tuple, np.ndarray)):
        return _esc(_list_text(list(np.asarray(value).tolist()) if isinstance(value, np.ndarray) else list(value),
                               integer_like=key.startswith(("cluster_sizes", "closest"))))
    if key == "error_rate" and isinstance(value, (float, np.floating)) and np.isfinite(value):
        return f"{_esc(_fmt_value(value))} <span class='aside'>({float(value):.2%})</span>"
    return _esc(_fmt_value(value, integer_like=key in _INTEGER_KEYS))


def metrics_table_html(metrics: Mapping[str, Any]) -> str:
    """The metrics as an HTML table, grouped, each with a one-line explanation; unknown keys shown plainly."""
    rows_by_group: dict[str, list[str]] = {g: [] for g in _GROUP_TITLES}
    metrics = dict(metrics or {})
    convention = metrics.pop("enr_convention", None)
    # the scoring function and the flow both report some numbers; show each once
    if "d" in metrics and metrics.get("n_features") == metrics["d"]:
        metrics.pop("n_features")
    if metrics.get("n_scored") is not None and metrics.get("n_scored") == metrics.get("n"):
        metrics.pop("n_scored")
    if metrics.get("n_reference_noise") == 0:
        metrics.pop("n_reference_noise")
    for key, value in metrics.items():
        if key == "bounds" and isinstance(value, Mapping):
            rows_by_group["theory"].extend(_bounds_rows(value))
            continue
        label, expl, group = _METRIC_INFO.get(key, (key.replace("_", " "), "", "other"))
        if key == "enr":
            if isinstance(value, Mapping):
                convention = value.get("convention", convention)
                value = value.get("value", value.get("q"))
            if convention:
                expl += f". Convention used here: {convention}"
            else:
                expl += (". Paper 000 divides the squared gap by 2σ²; paper 002 by σ² (twice the value)")
        if value is None:
            expl = (expl + " — not computed for this run") if expl else "not computed for this run"
        rows_by_group[group].append(
            f'<tr data-key="{_esc(key)}"><th scope="row">{_esc(label)}</th>'
            f'<td class="num">{_metric_value_html(key, value)}</td><td class="why">{_esc(expl)}</td></tr>'
        )
    body = []
    for group, rows in rows_by_group.items():
        if rows:
            body.append(f'<tbody class="group-{group}"><tr class="group"><th colspan="3">{_esc(_GROUP_TITLES[group])}</th></tr>{"".join(rows)}</tbody>')
    return (
        '<table class="metrics"><colgroup><col class="c1"/><col class="c2"/><col/></colgroup><thead><tr><th scope="col">measure</th><th scope="col">value</th>'
        '<th scope="col">what it means</th></tr></thead>' + "".join(body) + "</table>"
    )


# ---------------------------------------------------------------------------- the page
_CSS = """
:root{--ink:#1d2630;--muted:#5d6873;--line:#e3e7eb;--bg:#f6f7f9;--card:#fff;--accent:#0072B2}
*{box-sizing:border-box}
html{font-family:__FONT__;color:var(--ink);background:var(--bg);line-height:1.5;-webkit-text-size-adjust:100%}
body{margin:0}
header.top{background:linear-gradient(120deg,#12324a,#0b5d7e);color:#fff;padding:28px 24px 26px}
header.top .wrap{max-width:1180px;margin:0 auto}
header.top h1{margin:0 0 6px;font-size:28px;font-weight:650;letter-spacing:-.01em}
header.top p.summary{margin:6px 0 14px;font-size:16.5px;max-width:900px;color:#e6f0f6}
.chips{display:flex;flex-wrap:wrap;gap:8px;margin:0;padding:0;list-style:none}
.chips li{background:rgba(255,255,255,.13);border:1px solid rgba(255,255,255,.22);border-radius:999px;padding:3px 12px;font-size:13.5px}
.chips li b{font-weight:650}
main{max-width:1180px;margin:0 auto;padding:20px 16px 40px}
section.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:18px 20px;margin:18px 0;box-shadow:0 1px 2px rgba(16,24,32,.04)}
section.card h2{margin:0 0 4px;font-size:19px;font-weight:650}
section.card p.lead{margin:0 0 12px;color:var(--muted);font-size:14.5px}
.grid2{display:grid;grid-template-columns:minmax(0,1.25fr) minmax(0,1fr);gap:18px}
.grid2>section.card{margin:0}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
.tree-box{padding:6px 0}
section.card.bleed{position:relative;left:50%;transform:translateX(-50%)}
table.metrics{table-layout:fixed}
table.metrics col.c1{width:27%}table.metrics col.c2{width:21%}
table.metrics td.num{white-space:normal}
figure{margin:0}
figcaption{color:var(--muted);font-size:13px;margin-top:6px}
.kpis{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:12px;margin:18px 0 4px}
.kpi{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:12px 14px}
.kpi .v{font-size:26px;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.2}
.kpi .l{font-size:13px;color:var(--muted)}
.kpi .bar{height:5px;border-radius:3px;background:#e8ecef;margin-top:8px;overflow:hidden}
.kpi .bar span{display:block;height:100%;background:var(--accent)}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{text-align:left;vertical-align:top;padding:7px 10px;border-bottom:1px solid var(--line)}
thead th{font-size:12.5px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);font-weight:600}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap;font-weight:600}
td.why{color:var(--muted)}
tr.group th{background:#f3f6f8;font-size:13px;color:#34414d;font-weight:650;padding-top:9px}
table.metrics th[scope=row]{font-weight:500;white-space:nowrap}
.kv{display:inline-block;margin:0 12px 2px 0;font-weight:600}
.kv .k{font-weight:400;color:var(--muted)}
.kv.total{color:var(--ink)}
.aside{font-weight:400;color:var(--muted)}
.tag{display:inline-block;font-size:11.5px;font-weight:500;color:#8a4b00;background:#fff3e0;border-radius:4px;padding:0 6px;margin-left:4px}
.swatch{display:inline-block;width:14px;height:14px;border-radius:4px;vertical-align:-2px;margin-right:8px;border:1px solid rgba(0,0,0,.15)}
table.rules td.cluster{white-space:nowrap;font-weight:650}
table.rules td.share{white-space:nowrap;font-variant-numeric:tabular-nums;color:var(--muted)}
.cond{display:inline-block;font-family:__MONO__;font-size:12.8px;background:#f1f4f7;border:1px solid #e1e6eb;border-radius:6px;padding:1px 7px;margin:2px 4px 2px 0;white-space:nowrap}
.and{color:var(--muted);font-size:12px;margin-right:4px}
.alt{display:block}
.alt+.alt:before{content:"or ";color:var(--muted);font-size:12px;font-weight:600}
details{margin-top:10px}
summary{cursor:pointer;color:var(--accent);font-size:14px}
pre{background:#f1f4f7;border-radius:8px;padding:10px 12px;overflow-x:auto;font-family:__MONO__;font-size:12.5px}
footer{color:var(--muted);font-size:12.5px;text-align:center;padding:8px 0 24px}
.empty{color:var(--muted);font-style:italic}
@media print{body{background:#fff}header.top{background:#12324a;-webkit-print-color-adjust:exact;print-color-adjust:exact}section.card{break-inside:avoid}}
""".replace("__FONT__", _FONT_STACK).replace("__MONO__", _MONO_STACK)


def _rule_conditions_html(rule: str) -> str:
    if rule in ("all points", "no leaf"):
        return f'<span class="empty">{_esc(rule)}</span>'
    pretty = rule.replace("<=", "≤").replace(">=", "≥")
    conds = pretty.split(" and ")
    return '<span class="and">and</span>'.join(f'<span class="cond">{_esc(c)}</span>' for c in conds)


def _rules_table_html(tree: ThresholdTree, palette: Sequence[str], leaf_counts: Mapping[int, float] | None,
                      cluster_names: Sequence[str] | None, cluster_sizes: Sequence[float] | None = None) -> str:
    by_cluster: dict[int, list[int]] = {c: [] for c in range(tree.n_clusters)}
    paths = tree.leaf_paths()
    for leaf in sorted(paths):
        by_cluster[int(tree.value[leaf])].append(leaf)
    if cluster_sizes is not None and len(cluster_sizes) >= tree.n_clusters:
        sizes = [float(v) for v in cluster_sizes]
    elif leaf_counts:
        sizes = [sum(float(leaf_counts.get(leaf, 0.0)) for leaf in by_cluster[c]) for c in range(tree.n_clusters)]
    else:
        sizes = None
    total = float(sum(sizes)) if sizes else 0.0
    rows = []
    for c, leaves in by_cluster.items():
        name = cluster_names[c] if cluster_names is not None else f"cluster {c}"
        if leaves:
            alts = "".join(
                f'<span class="alt">{_rule_conditions_html(tree.leaf_rule(paths[leaf]))}</span>' for leaf in leaves
            )
        else:
            alts = '<span class="empty">no leaf: the tree never assigns this cluster</span>'
        share = ""
        if sizes:
            cnt = sizes[c]
            share = f"{_fmt_value(cnt, integer_like=True)}" + (f" · {cnt / total:.1%}" if total else "")
        rows.append(
            f'<tr data-cluster="{c}"><td class="cluster"><span class="swatch" style="background:{palette[c % len(palette)]}"></span>'
            f"{_esc(name)}</td><td>{alts}</td>" + (f'<td class="share">{_esc(share)}</td>' if sizes else "") + "</tr>"
        )
    head = "<th scope='col'>cluster</th><th scope='col'>a point belongs to it when</th>" + (
        "<th scope='col'>points</th>" if sizes else ""
    )
    return f'<table class="rules"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


_DIAG_HEADERS = {
    "node": "node",
    "axis": "axis",
    "feature": "feature",
    "threshold": "threshold",
    "normalized_separation": "normalized separation",
    "separation": "normalized separation",
    "cutoff_share": "cut-off share",
    "cut_off_share": "cut-off share",
    "n_means": "means at node",
    "feature_name": "feature",
    "components": "components at node",
    "objective": "objective",
    "at_edge": "cut at search edge",
}


def _diagnostics_html(diagnostics: Sequence[Mapping[str, Any]], tree: ThresholdTree) -> str:
    cols: list[str] = []
    for row in diagnostics:
        for key in row:
            if key not in cols:
                cols.append(str(key))
    if "feature_name" in cols and "feature" in cols:
        cols.remove("feature_name")  # the name says what the index says, readably
        cols[cols.index("feature")] = "feature_name"
    head = "".join(f"<th scope='col'>{_esc(_DIAG_HEADERS.get(c, c.replace('_', ' ')))}</th>" for c in cols)
    if all(isinstance(row.get("node"), (int, np.integer)) for row in diagnostics):
        diagnostics = sorted(diagnostics, key=lambda row: int(row["node"]))
    body = []
    for row in diagnostics:
        cells = []
        for c in cols:
            v = row.get(c)
            if c == "axis" and isinstance(v, (int, np.integer)) and 0 <= int(v) < tree.n_features:
                text = tree.feature_names[int(v)]
            elif isinstance(v, (list, tuple)):
                text = _list_text(list(v), integer_like=True, head=6)
            elif c in ("threshold", "center") and isinstance(v, (float, np.floating)):
                text = _fmt_num(float(v))  # as the tree drawing writes it
            else:
                text = _fmt_value(v, integer_like=c in ("node", "n_means"))
            cells.append(f'<td class="{"num" if isinstance(v, (int, float, np.number)) else ""}">{_esc(text)}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<div class="scroll"><table class="diagnostics"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def contingency_svg(table, palette: Sequence[str], *, row_label: str = "tree cluster",
                    col_label: str = "reference cluster") -> str:
    """A heat map of a contingency table: one row per tree cluster, shaded by the share of that row."""
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.size == 0:
        raise ValueError(f"a contingency table must be a non-empty 2-D array, got shape {t.shape}")
    r, c = t.shape
    cell = 34.0 if max(r, c) <= 12 else (22.0 if max(r, c) <= 25 else 14.0)
    show_numbers = max(r, c) <= 12
    left, top = 70.0, 46.0
    width, height = left + c * cell + 10, top + r * cell + 10
    row_sums = t.sum(axis=1, keepdims=True)
    grid = "".join(
        f'<rect x="{left + j * cell:.1f}" y="{top + i * cell:.1f}" width="{cell - 2:.1f}" height="{cell - 2:.1f}" rx="3"/>'
        for i in range(r) for j in range(c)
    ) if r * c <= 400 else ""
    parts_bg = (f'<g fill="#f1f3f5">{grid}</g>' if grid else
                f'<rect x="{left:.1f}" y="{top:.1f}" width="{c * cell - 2:.1f}" height="{r * cell - 2:.1f}" fill="#f6f7f9"/>')
    share = np.divide(t, row_sums, out=np.zeros_like(t), where=row_sums > 0)
    parts = [
        parts_bg,
        f'<text x="{left + c * cell / 2:.1f}" y="14" class="axis">{_esc(col_label)} →</text>',
        f'<text x="12" y="{top + r * cell / 2:.1f}" class="axis" transform="rotate(-90 12 {top + r * cell / 2:.1f})">'
        f"← {_esc(row_label)}</text>",
    ]
    every = 1 if cell >= 20 else 5  # two-digit ids do not fit over narrow cells
    for j in range(0, c, every):
        parts.append(f'<text x="{left + (j + 0.5) * cell:.1f}" y="{top - 8:.1f}" class="tick">{j}</text>')
    for i in range(r):
        y = top + i * cell
        parts.append(f'<rect x="{left - 26:.1f}" y="{y + cell / 2 - 6:.1f}" width="12" height="12" rx="3" '
                     f'fill="{palette[i % len(palette)]}"/>')
        if i % every == 0:
            parts.append(f'<text x="{left - 6:.1f}" y="{y + cell / 2 + 4:.1f}" class="tick" text-anchor="end">{i}</text>')
        for j in range(c):
            v = share[i, j]
            if t[i, j] <= 0:
                continue  # the grid behind shows through: big tables stay small files
            parts.append(
                f'<rect class="cell" x="{left + j * cell:.1f}" y="{y:.1f}" width="{cell - 2:.1f}" height="{cell - 2:.1f}" '
                f'rx="3" fill="rgba(0,114,178,{0.06 + 0.94 * v:.3f})"><title>tree {i} · ref {j}: {int(t[i, j]):,} ({v:.1%})</title></rect>'
            )
            if show_numbers and t[i, j] > 0:
                ink = "#fff" if v > 0.55 else "#1d2630"
                parts.append(f'<text x="{left + j * cell + cell / 2 - 1:.1f}" y="{y + cell / 2 + 3:.1f}" class="num" '
                             f'fill="{ink}">{_esc(_compact_count(t[i, j]))}</text>')
    style = (f"text{{font-family:{_FONT_STACK};text-anchor:middle}}.axis{{font-size:12px;fill:#5d6873}}"
             ".tick{font-size:11px;fill:#5d6873}.num{font-size:10px}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="contingency-svg" role="img" '
        f'aria-label="tree clusters against reference clusters" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'style="display:block;width:100%;max-width:{width * 1.15:.0f}px;height:auto">'
        f"<style>{_scoped(style, 'svg.contingency-svg')}</style>"
        + "".join(parts) + "</svg>"
    )


def _compact_count(v: float) -> str:
    v = float(v)
    if v >= 1e6:
        return f"{v / 1e6:.3g}M"
    if v >= 1e4:
        return f"{v / 1e3:.3g}k"
    return f"{int(v)}"


def _kpis_html(metrics: Mapping[str, Any]) -> str:
    cards = []

    def add(key: str, label: str, bar: float | None = None) -> None:
        v = metrics.get(key)
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return
        bar_html = ""
        if bar is not None and math.isfinite(bar):
            bar_html = f'<div class="bar"><span style="width:{max(0.0, min(1.0, bar)) * 100:.1f}%"></span></div>'
        cards.append(f'<div class="kpi" data-key="{key}"><div class="v">{_esc(_fmt_value(v, integer_like=key in _INTEGER_KEYS))}</div>'
                     f'<div class="l">{_esc(label)}</div>{bar_html}</div>')

    def num(key: str) -> float | None:
        v = metrics.get(key)
        return float(v) if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else None

    add("price_kmeans", "price of explainability (1 is perfect)")
    err = num("error_rate")
    if err is not None:
        cards.append(f'<div class="kpi" data-key="agreement"><div class="v">{1 - err:.1%}</div>'
                     f'<div class="l">points placed as the reference does</div>'
                     f'<div class="bar"><span style="width:{max(0.0, min(1.0, 1 - err)) * 100:.1f}%"></span></div></div>')
    ari = num("ari_reference")
    add("ari_reference", "ARI vs reference", ari)
    ari_t = num("ari_truth")
    add("ari_truth", "ARI vs ground truth", ari_t)
    add("n_leaves", "leaves")
    add("depth", "depth")
    return f'<div class="kpis">{"".join(cards)}</div>' if cards else ""


_ALGORITHM_NAMES = {
    "mmdt": "MMDT", "imm": "IMM", "exkmc": "ExKMC", "cart": "CART", "kdtree": "KDTree",
    "kernel_mmdt": "kernel MMDT", "kernelmmdt": "kernel MMDT", "concept_mmdt": "Concept-MMDT",
    "conceptmmdt": "Concept-MMDT", "concept_cart": "Concept-CART", "conceptcart": "Concept-CART",
}


def _algorithm_name(name: Any) -> str | None:
    """The papers' spelling of an algorithm name given in any case (``mmdt`` -> ``MMDT``)."""
    if name is None:
        return None
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    return _ALGORITHM_NAMES.get(key, str(name))


def _article(word: str) -> str:
    """'a' or 'an' by sound: acronyms by their first letter's name (an MMDT, an IMM, a CART)."""
    w = str(word).strip()
    if not w:
        return "a"
    first = w.split()[0]
    if first.isupper() and len(first) > 1:
        return "an" if first[0] in "AEFHILMNORSX" else "a"
    return "an" if first[0].lower() in "aeiou" else "a"


def _summary_sentence(tree: ThresholdTree, metrics: Mapping[str, Any], dataset_info: Mapping[str, Any] | None) -> str:
    algo = _algorithm_name(metrics.get("algorithm") or tree.meta.get("algorithm")) or "decision"
    k = metrics.get("k") or tree.n_clusters
    n = metrics.get("n") or (dataset_info or {}).get("n")
    d = metrics.get("d") or tree.n_features
    def count(v: Any, word: str) -> str:
        return f"{_fmt_value(v, integer_like=True)} {word}{'' if v == 1 else 's'}"

    used = len(tree.features_used)
    s = (f"{_article(algo).capitalize()} {algo} tree with {count(tree.n_leaves, 'leaf').replace('leafs', 'leaves')} "
         f"and depth {tree.depth} explains {count(k, 'cluster')}"
         + (f" of {count(n, 'point')}" if n else "")
         + f" in {count(d, 'feature')}"
         + (f", using {used} of them." if d != 1 and used else "."))
    extras = []
    err = metrics.get("error_rate")
    if isinstance(err, (int, float, np.number)) and math.isfinite(float(err)):
        extras.append(f"it places {1 - float(err):.1%} of the points as the reference clustering does")
    price = metrics.get("price_kmeans")
    if isinstance(price, (int, float, np.number)) and math.isfinite(float(price)):
        extras.append(f"its k-means cost is {float(price):.3f}× the reference's")
    if extras:
        s += " " + " and ".join(extras).capitalize() + "."
    return s


_MAX_SAMPLE_ROWS = 200_000


def render_report(
    *,
    tree: ThresholdTree,
    metrics: Mapping[str, Any] | None,
    title: str = "exclust report",
    sample=None,
    sample_labels=None,
    scatter_features: tuple[int, int] | None = None,
    curve: Mapping[str, Any] | None = None,
    diagnostics: Sequence[Mapping[str, Any]] | None = None,
    dataset_info: Mapping[str, Any] | None = None,
    leaf_counts: Mapping[int, float] | None = None,
    cluster_names: Sequence[str] | None = None,
) -> str:
    """The whole report as one self-contained HTML page (inline CSS and SVG, nothing fetched)."""
    from exclust import __version__

    metrics = dict(metrics or {})
    palette = cluster_colors(tree.n_clusters)
    if sample is not None and hasattr(sample, "dask") and len(sample) > _MAX_SAMPLE_ROWS:
        # a report is drawn on the driver: never pull a whole distributed dataset there
        raise ValueError(
            f"sample has {len(sample):,} rows; the report plots a sample of at most {_MAX_SAMPLE_ROWS:,} "
            "(take one first, e.g. X[::step].compute() or a random subset)"
        )
    sample_arr = None if sample is None else np.asarray(sample, dtype=float)
    counts_note = ""
    counts_from_user = leaf_counts is not None
    shares_only = False
    sizes = metrics.get("cluster_sizes_tree")
    one_leaf_each = np.bincount(tree.value[tree.leaves], minlength=tree.n_clusters).max(initial=0) <= 1
    if leaf_counts is not None:
        counts_note = " Each leaf shows its number of points and their share."
    elif sizes is not None and len(sizes) >= tree.n_clusters and one_leaf_each:
        # one leaf per cluster: the scored cluster sizes are the exact leaf counts over all the data
        leaf_counts = {int(leaf): float(sizes[int(tree.value[leaf])]) for leaf in tree.leaves}
        counts_note = " Each leaf shows its number of points and their share."
    elif sample_arr is not None and len(sample_arr):
        per_node = np.bincount(tree.apply(sample_arr), minlength=tree.node_count)
        leaf_counts = {int(leaf): int(per_node[leaf]) for leaf in tree.leaves}  # empty leaves show 0%
        shares_only = True
        counts_note = " Leaf shares are estimated from the plotted sample."
    leaf_counts = {int(a): float(b) for a, b in leaf_counts.items()} if leaf_counts else None

    algo = _algorithm_name(metrics.get("algorithm") or tree.meta.get("algorithm"))
    chips = []
    for label, value in (
        ("algorithm", algo),
        ("reference", metrics.get("reference")),
        ("k", metrics.get("k") or tree.n_clusters),
        ("n", metrics.get("n") or (dataset_info or {}).get("n")),
        ("d", metrics.get("d") or tree.n_features),
        ("leaves", tree.n_leaves),
        ("depth", tree.depth),
    ):
        if value is not None:
            chips.append(f"<li>{_esc(label)} <b>{_esc(_fmt_value(value, integer_like=True))}</b></li>")
    if dataset_info and dataset_info.get("source"):
        chips.append(f"<li>data <b>{_esc(_short(str(dataset_info['source']), 60))}</b></li>")

    tree_drawing = tree_svg(tree, palette, leaf_counts, cluster_names=cluster_names, shares_only=shares_only)
    natural = float(re.search(r'viewBox="0 0 ([0-9.]+)', tree_drawing).group(1))
    # a wide tree gets the whole window (still scrolling if even that is too narrow)
    bleed = (f' bleed" style="width:min(calc(100vw - 24px), {natural + 44:.0f}px)' if natural > 1140 else "")
    start = "left" if "left-right" in tree_drawing[:200] else "top"
    sections = [
        f'<section class="card{bleed}" id="tree"><h2>The tree</h2><p class="lead">Start at the {start}; at each test go '
        f'<b>yes</b> (solid edge) when the point satisfies it, <b>no</b> (dashed) otherwise. Every leaf names a cluster.'
        f'{_esc(counts_note)}</p><div class="scroll tree-box">{tree_drawing}</div></section>'
    ]
    if counts_from_user:
        sizes = None  # the caller's leaf counts are the numbers to show
    rules_html = _rules_table_html(tree, palette, leaf_counts, cluster_names, sizes)
    sections.append(
        f'<section class="card" id="rules"><h2>Rules per cluster</h2><p class="lead">The same tree read leaf by leaf: '
        f'the conditions on each path, merged per feature.</p>{rules_html}'
        f'<details><summary>rules as plain text</summary><pre>{_esc(tree.rules_text(cluster_names))}</pre></details></section>'
    )

    pictures = []
    if sample_arr is not None and len(sample_arr):
        feats = scatter_features if scatter_features is not None else choose_scatter_features(tree, sample_arr)
        labels = tree.predict(sample_arr) if sample_labels is None else sample_labels
        svg = scatter_svg(sample_arr, labels, tree, features=feats, cluster_colors=palette)
        nm = tree.feature_names
        what = "the tree's clusters" if sample_labels is None else "the given labels"
        pictures.append(
            f'<section class="card" id="scatter"><h2>The cuts in the data</h2><p class="lead">{len(sample_arr):,} sampled '
            f'points on <b>{_esc(nm[feats[0]])}</b>' + ("" if feats[0] == feats[1] else f' and <b>{_esc(nm[feats[1]])}</b>')
            + f', coloured by {what}. Black lines are the tree\'s cuts, drawn only inside the region that reaches '
            f'their node (bolder nearer the root); shaded bands are interval cuts. Cuts on other features are not shown.'
            f'</p><figure>{svg}</figure></section>'
        )
    if curve:
        pictures.append(
            f'<section class="card" id="curve"><h2>Cost as the tree grows</h2><p class="lead">k-means cost of each '
            f'method\'s tree divided by the reference cost, by number of leaves (as in ExKMC, paper 003 Figure 2). '
            f'Lower is better; 1 matches the reference.</p><figure>{cost_curve_svg(curve)}</figure></section>'
        )
    if len(pictures) == 2:
        sections.append(f'<div class="grid2">{"".join(pictures)}</div>')
    else:
        sections.extend(pictures)

    sections.append(
        f'<section class="card" id="metrics"><h2>Measures</h2><p class="lead">What the numbers say, and what each one means.</p>'
        f'<div class="scroll">{metrics_table_html(metrics)}</div></section>'
    )
    table = metrics.get("contingency_tree_reference")
    if table is not None and np.asarray(table).ndim == 2 and np.asarray(table).size:
        sections.append(
            f'<section class="card" id="contingency"><h2>Tree clusters against reference clusters</h2><p class="lead">'
            f'Each row is a tree cluster, shaded by where its points sit in the reference clustering; a faithful tree '
            f'puts the dark cells on one cell per row.</p><div class="scroll">{contingency_svg(table, palette)}</div></section>'
        )
    if diagnostics:
        sections.append(
            f'<section class="card" id="diagnostics"><h2>Per-node diagnostics</h2><p class="lead">For every cut: the axis, '
            f'the threshold, how far apart the node\'s means are on that axis in noise units, and the estimated share of '
            f'the node\'s mass cut off from its own mean.</p>{_diagnostics_html(diagnostics, tree)}</section>'
        )
    if dataset_info:
        rows = "".join(
            f"<tr><th scope='row'>{_esc(str(a).replace('_', ' '))}</th><td>{_esc(_fmt_value(b, integer_like=True))}</td></tr>"
            for a, b in dataset_info.items()
        )
        sections.append(f'<section class="card" id="data"><h2>Data</h2><table class="info">{rows}</table></section>')

    summary = _summary_sentence(tree, metrics, dataset_info)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<meta name=\"generator\" content=\"exclust {__version__}\">"
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
        f'<header class="top"><div class="wrap"><h1>{_esc(title)}</h1><p class="summary">{_esc(summary)}</p>'
        f'<ul class="chips">{"".join(chips)}</ul></div></header>'
        f"<main>{_kpis_html(metrics)}{''.join(sections)}</main>"
        f"<footer>made by exclust {__version__} · one self-contained file: no scripts, no fonts or images fetched</footer>"
        "</body></html>\n"
    )


_MARKDOWN_KEYS = ("price_kmeans", "surrogate_price", "price_kmedians", "error_rate", "ari_reference", "ari_truth",
                  "enr", "n", "n_leaves", "depth", "passes")


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_markdown(tree: ThresholdTree, metrics: Mapping[str, Any] | None = None,
                     title: str = "exclust report") -> str:
    """A short Markdown digest (summary, rules per cluster, headline metrics), e.g. for a Prefect artifact."""
    metrics = dict(metrics or {})
    lines = [f"# {title}", "", _summary_sentence(tree, metrics, None), "", "| cluster | rule |", "| --- | --- |"]
    for c, rule in tree.rules().items():
        lines.append(f"| {c} | {_md_cell(rule)} |")
    rows = []
    for key in _MARKDOWN_KEYS:
        if key in metrics and not isinstance(metrics[key], (Mapping, list, tuple)):
            label, expl, _ = _METRIC_INFO.get(key, (key, "", ""))
            rows.append(f"| {_md_cell(label)} | {_md_cell(_fmt_value(metrics[key], integer_like=key in _INTEGER_KEYS))} "
                        f"| {_md_cell(expl)} |")
    if rows:
        lines += ["", "| measure | value | what it means |", "| --- | --- | --- |", *rows]
    return "\n".join(lines) + "\n"
