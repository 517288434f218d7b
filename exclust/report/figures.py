"""The report's pictures as files, for people who script figures: ``save_figure``.

The tree drawing, the scatter with the cuts and the cost curve are written to ``.svg`` (the
report's own SVG, made standalone) or ``.png``. The scatter and the curve are matplotlib
figures and are rendered by matplotlib itself. The tree drawing is exclust's own SVG; for PNG
its shapes (rounded boxes, edge curves, text) are redrawn with matplotlib, from that same SVG,
so the picture has one layout whatever the format (no SVG rasterizer is a dependency).
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FORMATS = (".svg", ".png")
_SVG = "{http://www.w3.org/2000/svg}"


def save_figure(path: str | os.PathLike, tree: Any = None, *, what: str = "tree", sample: Any = None,
                curve: Mapping[str, Any] | None = None, dpi: int = 144, **options: Any) -> Path:
    """Write one picture of the report to ``path`` (``.svg`` or ``.png``, by its suffix); returns the path.

    ``what``: ``"tree"`` (``draw_tree(tree, **options)``), ``"scatter"`` (``scatter_svg(sample,
    tree=tree, **options)``: ``sample`` is a (rows, d) array) or ``"curve"`` (``cost_curve_svg(curve,
    **options)``, e.g. ``fit.curve_`` or a run's curve). The file is written whole (a temporary
    name, then a rename).
    """
    from exclust.errors import InputError
    from exclust.report.plots import cost_curve_svg, scatter_svg
    from exclust.tree.drawing import draw_tree

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"cannot write a figure as {path.name}: name the file .svg or .png")
    if what == "tree":
        if tree is None:
            raise InputError("save_figure(what='tree') needs the tree")
        drawing = draw_tree(tree, **options)
        content: Any = _standalone(drawing.svg, drawing.width, drawing.height) if suffix == ".svg" \
            else _tree_figure(drawing.svg, drawing.width, drawing.height)
    elif what == "scatter":
        if tree is None or sample is None:
            raise InputError("save_figure(what='scatter') needs the tree and a sample of rows")
        content = scatter_svg(sample, tree=tree, as_figure=suffix == ".png", **options)
    elif what == "curve":
        if curve is None:
            raise InputError("save_figure(what='curve') needs the curve (a mapping with 'leaves' and one series each)")
        content = cost_curve_svg(curve, as_figure=suffix == ".png", **options)
    else:
        raise InputError(f"what must be 'tree', 'scatter' or 'curve', not {what!r}")
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if isinstance(content, str):
            text = content if content.lstrip().startswith("<?xml") else _standalone(content, None, None)
            temporary.write_text(text, encoding="utf-8")
        else:
            content.savefig(temporary, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def _standalone(svg: str, width: float | None, height: float | None) -> str:
    """An inline SVG as a file of its own: XML prolog, and a size when the page gave it one."""
    head_end = svg.index(">")
    head = svg[:head_end]
    if width is not None and height is not None:
        head = re.sub(r'\sstyle="[^"]*"', "", head)  # the page's responsive sizing
        head = re.sub(r'\s(width|height)="[^"]*"', "", head) + f' width="{width:.0f}" height="{height:.0f}"'
    return '<?xml version="1.0" encoding="utf-8"?>\n' + head + svg[head_end:] + "\n"


# --------------------------------------------------------------------------- the tree as PNG
# The drawing's styles (tree_drawing's CSS), as matplotlib arguments.
_BOX = {"internal": dict(facecolor="#f4f6f8", edgecolor="#46505a", linewidth=1.2),
        "interval": dict(facecolor="#eef0fb", edgecolor="#4b4f8c", linewidth=1.2, linestyle=(0, (4, 2)))}
_TEXT: dict[str, dict[str, Any]] = {
         "test-feature": dict(weight="bold", color="#1d2630"), "test-threshold": dict(color="#1d2630"),
         "leaf-label": dict(weight="bold"), "leaf-count": dict(size=11),
         "edge-label": dict(size=11, color="#56606b"), "node-id": dict(size=10, color="#6b7580", ha="left")}


def _tree_figure(svg: str, width: float, height: float):
    """A matplotlib Figure drawing the shapes of ``draw_tree``'s SVG at its own size (1 px = 1 pt)."""
    from exclust.report.plots import import_plotting

    import_plotting()
    from matplotlib import patheffects
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch, PathPatch
    from matplotlib.path import Path as MplPath

    root = ET.fromstring(svg)
    fig = Figure(figsize=(width / 72.0, height / 72.0))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # SVG's y grows downwards
    ax.axis("off")
    for path in root.iter(f"{_SVG}path"):
        dashed = "edge-no" in path.get("class", "")
        ax.add_patch(PathPatch(MplPath(*_path_points(path.get("d", ""))), fill=False, edgecolor="#9aa3ad",
                               linewidth=1.6, linestyle=(0, (5, 4)) if dashed else "-"))
    for group in root.iter(f"{_SVG}g"):
        rect = group.find(f"{_SVG}rect")
        if rect is None or "node" not in group.get("class", ""):
            continue
        x, y, w, h = (float(rect.attrib[a]) for a in ("x", "y", "width", "height"))
        style: dict[str, Any] = (
            dict(facecolor=rect.get("fill"), edgecolor="none", linewidth=0) if "leaf" in group.get("class", "")
            else _BOX["interval" if "interval" in group.get("class", "") else "internal"])
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=f"round,pad=0,rounding_size={float(rect.get('rx', 5))}",
                                    **style))
    for text in root.iter(f"{_SVG}text"):
        if not (text.text or "").strip():
            continue
        style = dict(size=13, color="#1d2630", ha="center")
        style.update(_TEXT.get(text.get("class", "").split()[0] if text.get("class") else "", {}))
        if text.get("fill"):
            style["color"] = text.get("fill")
        halo = ([patheffects.withStroke(linewidth=4, foreground="white")] if "edge-label" in text.get("class", "")
                else None)
        ax.text(float(text.attrib["x"]), float(text.attrib["y"]), text.text or "", va="baseline", family="sans-serif",
                path_effects=halo, **style)
    return fig


def _path_points(d: str) -> tuple[list[tuple[float, float]], list[int]]:
    """Vertices and codes of an SVG path made of M, C, Q, V and H commands (what draw_tree writes)."""
    from matplotlib.path import Path as MplPath

    verts: list[tuple[float, float]] = []
    codes: list[int] = []
    for command, args in re.findall(r"([MCQVH])([^MCQVH]*)", d):
        numbers = [float(v) for v in re.findall(r"-?[0-9.]+(?:e-?[0-9]+)?", args)]
        x, y = verts[-1] if verts else (0.0, 0.0)
        if command == "M":
            verts.append((numbers[0], numbers[1]))
            codes.append(int(MplPath.MOVETO))
        elif command == "C":
            verts += [(numbers[i], numbers[i + 1]) for i in range(0, 6, 2)]
            codes += [int(MplPath.CURVE4)] * 3
        elif command == "Q":
            verts += [(numbers[i], numbers[i + 1]) for i in range(0, 4, 2)]
            codes += [int(MplPath.CURVE3)] * 2
        elif command == "V":
            verts.append((x, numbers[0]))
            codes.append(int(MplPath.LINETO))
        else:  # H
            verts.append((numbers[0], y))
            codes.append(int(MplPath.LINETO))
    return verts, codes
