"""The tree as an inline SVG drawing: tests in the internal nodes, yes/no edges, coloured leaves.

``draw_tree`` returns the drawing with its own size and orientation (``TreeDrawing``), so the
page lays it out from numbers, not by reading its SVG back; ``tree_svg`` is the SVG alone.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exclust.tree.node_kinds import CATEGORY_SET, INTERVAL, LEAF, MISSING_LEFT, MISSING_RIGHT, ONE_SIDED
from exclust.tree.style import (
    FONT_STACK,
    category_set_text,
    esc,
    fmt_num,
    fmt_value,
    palette_for,
    scoped_css,
    short,
    text_color_on,
    text_width,
)

# ThresholdTree in annotations only: exclust.tree draws itself with this module (a lazy import in
# ThresholdTree._repr_svg_), so this module imports it for the type checker alone.
if TYPE_CHECKING:
    from exclust.tree.threshold_tree import ThresholdTree

# ---------------------------------------------------------------------------- tree drawing
def tree_layout(tree: ThresholdTree) -> tuple[dict[int, float], dict[int, int], list[int]]:
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


SET_HEAD = 6  # a set cut's drawing shows at most this many values, then "… (+N)"


def _edge_word(tree: ThresholdTree, node: int, word: str) -> str:
    """An edge's label: yes / no, with ", or missing" on the side the node sends missing values."""
    side = MISSING_LEFT if word == "yes" else MISSING_RIGHT
    shown = tree.missing_side[node] == side and tree.shows_missing(int(tree.feature[node]))
    return f"{word}, or missing" if shown else word


def _node_lines(tree: ThresholdTree, node: int, two_lines: bool) -> list[str]:
    name = short(tree.feature_names[int(tree.feature[node])])
    if tree.kind[node] == ONE_SIDED:
        t = fmt_num(float(tree.threshold[node]))
        return [name, f"≤ {t}"] if two_lines else [f"{name} ≤ {t}"]
    if tree.kind[node] == CATEGORY_SET:  # a long set shows its first values and how many more
        values = category_set_text(tree.category_values(node), head=SET_HEAD)
        return [name, f"in {values}"] if two_lines else [f"{name} in {values}"]
    # an interval cut |x - c| <= t is drawn as the interval it keeps (yes: inside)
    c, half = float(tree.center[node]), float(tree.threshold[node])
    low, high = fmt_num(c - half), fmt_num(c + half)
    return [name, f"in [{low}, {high}]"] if two_lines else [f"{low} ≤ {name} ≤ {high}"]


@dataclass(frozen=True)
class TreeDrawing:
    """An SVG tree drawing with the size it was laid out at (px) and its orientation."""

    svg: str
    width: float
    height: float
    orientation: str  # "top-down", "left-right" or "outline"


def tree_svg(tree: ThresholdTree, *args: Any, **kwargs: Any) -> str:
    """The SVG of ``draw_tree`` (same arguments)."""
    return draw_tree(tree, *args, **kwargs).svg


def draw_tree(
    tree: ThresholdTree,
    cluster_colors: Sequence[str] | None = None,
    leaf_counts: Mapping[int, float] | None = None,
    *,
    cluster_names: Sequence[str] | None = None,
    orientation: str = "auto",
    shares_only: bool = False,
) -> TreeDrawing:
    """The tree as an inline SVG drawing: tests in the internal nodes, yes/no edges, coloured leaves.

    ``leaf_counts`` maps leaf node ids to point counts (shown with their share; only the share
    when ``shares_only``). ``orientation``: "top-down" (a classic tree, for up to ~12 leaves),
    "left-right" (one row per leaf, for wide shallow trees), "outline" (one indented row per
    node, for deep trees) or "auto", which picks the first that fits a page.
    """
    palette = palette_for(tree, cluster_colors)
    slot, depth, order = tree_layout(tree)
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
        return f"{fmt_value(v, integer_like=True)}{share}"

    if orientation not in ("auto", "top-down", "left-right", "outline"):
        raise ValueError(f"orientation must be 'auto', 'top-down', 'left-right' or 'outline', got {orientation!r}")

    fs, fs_small = 13.0, 11.0
    pad_x, line_h = 10.0, 16.0
    # Widths in the top-down form, where tests take two lines and leaf counts go under the label.
    int_w2 = max(
        (max(text_width(s, fs, bold=(i == 0)) for i, s in enumerate(_node_lines(tree, n, True))) + 2 * pad_x
         for n in order if tree.kind[n] != LEAF),
        default=0.0,
    )
    leaf_w2 = max(
        max(text_width(leaf_label(n), fs, bold=True), text_width(leaf_count_text(n) or "", fs_small)) + 2 * pad_x
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
                count = leaf_count_text(n)
                lines = [leaf_label(n)] + ([count] if count else [])
                w = max([text_width(lines[0], fs, True)] + [text_width(s, fs_small) for s in lines[1:]]) + 2 * pad_x
                boxes[n] = (cx, top + leaf_h / 2, max(w, 56.0), leaf_h, lines)
            else:
                lines = _node_lines(tree, n, True)
                w = max(text_width(lines[0], fs, True), text_width(lines[1], fs)) + 2 * pad_x
                boxes[n] = (cx, top + int_h / 2, w, int_h, lines)
    else:
        box_h = line_h + 10
        row_h = box_h + 8.0
        # rows start with the node's id, the one the per-node diagnostics name (top-down: a tag above)
        col_lines = {n: ([f"#{n}  " + _node_lines(tree, n, False)[0]] if tree.kind[n] != LEAF else
                         [f"#{n}  " + leaf_label(n) + (f"  ·  {leaf_count_text(n)}" if leaf_count_text(n) else "")])
                     for n in order}
        widths = {n: text_width(col_lines[n][0], fs, bold=True) + 2 * pad_x for n in order}
        # one column per depth, as wide as its widest box plus room for the edge labels
        col_w = [0.0] * (max_depth + 1)
        for n in order:
            col_w[depth[n]] = max(col_w[depth[n]], widths[n])
        gap = 46.0
        col_x = [margin]
        for level in range(max_depth):
            col_x.append(col_x[-1] + col_w[level] + gap)
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
                    f'text-anchor="middle">{esc(_edge_word(tree, n, word))}</text>'
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
                f'text-anchor="middle">{esc(_edge_word(tree, n, word))}</text>'
            )
    for n in order:
        cx, cy, w, h, lines = boxes[n]
        x, y = cx - w / 2, cy - h / 2
        if top_down:  # the node's id, as the per-node diagnostics name it
            parts.append(f'<text class="node-id" x="{x + 2:.1f}" y="{y - 4:.1f}">#{n}</text>')
        if tree.kind[n] == LEAF:
            c = int(tree.value[n])
            fill = palette[c % len(palette)]
            ink = text_color_on(fill)
            count_text = leaf_count_text(n)
            title = f"leaf {n}: {leaf_label(n)}" + (
                "" if not count_text else f" ({count_text} of the sample)" if shares_only else f" ({count_text} points)"
            )
            texts = []
            if top_down and len(lines) == 2:
                texts.append(f'<text x="{cx:.1f}" y="{cy - 3:.1f}" class="leaf-label" '
                             f'fill="{ink}">{esc(lines[0])}</text>')
                texts.append(f'<text x="{cx:.1f}" y="{cy + 12:.1f}" class="leaf-count" '
                             f'fill="{ink}">{esc(lines[1])}</text>')
            else:
                texts.append(f'<text x="{cx:.1f}" y="{cy + 4.5:.1f}" class="leaf-label" '
                             f'fill="{ink}">{esc(lines[0])}</text>')
            parts.append(
                f'<g class="node leaf" data-node="{n}" data-cluster="{c}"><title>{esc(title)}</title>'
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="7" fill="{fill}"/>'
                + "".join(texts) + "</g>"
            )
        else:
            kind = {INTERVAL: "interval", CATEGORY_SET: "category-set"}.get(int(tree.kind[n]), "one-sided")
            texts = []
            if len(lines) == 2:
                texts.append(f'<text x="{cx:.1f}" y="{cy - 3:.1f}" class="test-feature">{esc(lines[0])}</text>')
                texts.append(f'<text x="{cx:.1f}" y="{cy + 13:.1f}" class="test-threshold">{esc(lines[1])}</text>')
            else:
                texts.append(f'<text x="{cx:.1f}" y="{cy + 4.5:.1f}" class="test-feature">{esc(lines[0])}</text>')
            parts.append(
                f'<g class="node internal {kind}" data-node="{n}"><title>{esc(tree.describe_node(n))}</title>'
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="5"/>'
                + "".join(texts) + "</g>"
            )

    style = (
        f"text{{font-family:{FONT_STACK};font-size:{fs:.0f}px;text-anchor:middle}}"
        ".edge{fill:none;stroke:#9aa3ad;stroke-width:1.6}"
        ".edge-no{stroke-dasharray:5 4}"
        f".edge-label{{font-size:{fs_small:.0f}px;fill:#56606b;paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}}"
        ".node.internal rect{fill:#f4f6f8;stroke:#46505a;stroke-width:1.2}"
        ".node.internal.interval rect{fill:#eef0fb;stroke:#4b4f8c;stroke-dasharray:4 2}"
        ".test-feature{font-weight:600;fill:#1d2630}"
        ".test-threshold{fill:#1d2630}"
        ".leaf-label{font-weight:600}"
        f".node-id{{font-size:{fs_small - 1:.0f}px;fill:#6b7580;text-anchor:start}}"
        f".leaf-count{{font-size:{fs_small:.0f}px;opacity:.9}}"
        ".node rect{filter:drop-shadow(0 1px 1px rgba(0,0,0,.12))}"
    )
    label = f"Decision tree with {n_leaves} leaves and depth {tree.depth}"
    # small trees may grow a little with the page; big ones never shrink below ~9 px text (they scroll instead)
    min_w = int(min(width, max(width * 0.72, 640)))
    max_w = int(width * 1.3) if width < 700 else int(width)
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="tree-svg {orientation}" role="img" '
        f'aria-label="{esc(label)}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" preserveAspectRatio="xMidYMin meet" '
        f'style="display:block;margin:0 auto;width:100%;min-width:{min_w}px;max-width:{max_w}px;height:auto">'
        f"<title>{esc(label)}</title><style>{scoped_css(style, 'svg.tree-svg')}</style>"
        f'<g class="edges">{"".join(edges)}</g><g class="nodes">{"".join(parts)}</g>'
        f'<g class="edge-labels">{"".join(edge_labels)}</g></svg>'
    )
    # the size as the viewBox states it
    return TreeDrawing(svg=svg, width=float(round(width)), height=float(round(height)), orientation=orientation)
