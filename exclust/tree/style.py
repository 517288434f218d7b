"""Colours, numbers and text for the report: one cluster palette, one way to print a number.

Thresholds print as the tree module writes them (6 significant digits) so drawings and rules
agree; metric values for people (4 significant digits, thousands separators, '—' when missing).
"""
from __future__ import annotations

import colorsys
import html
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

# No import of exclust.tree at run time: a tree draws itself with tree_drawing
# (ThresholdTree._repr_svg_, a lazy import), so the drawing's modules name ThresholdTree in
# annotations only, imported for the type checker alone.
if TYPE_CHECKING:
    from exclust.tree.threshold_tree import ThresholdTree

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

FONT_STACK = (
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', 'Noto Sans', "
    "'Liberation Sans', Arial, sans-serif"
)
MONO_STACK = "ui-monospace, 'SFMono-Regular', Menlo, Consolas, 'DejaVu Sans Mono', monospace"


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
        lightness = 0.45 if i % 2 == 0 else 0.65
        r, g, b = colorsys.hls_to_rgb(h, lightness, 0.65)
        out.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return out


def _rgb(color: str) -> tuple[float, float, float]:
    c = color.lstrip("#")
    if len(c) == 3:
        c = "".join(ch * 2 for ch in c)
    return tuple(int(c[i : i + 2], 16) / 255.0 for i in (0, 2, 4))  # type: ignore[return-value]


def text_color_on(color: str) -> str:
    """Black or white, whichever reads better on ``color`` (WCAG relative luminance)."""
    try:
        rgb = _rgb(color)
    except ValueError:
        return "#111"

    def lin(v: float) -> float:
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
    return "#111111" if lum > 0.23 else "#ffffff"


def palette_for(tree: ThresholdTree, colors: Sequence[str] | None) -> list[str]:
    k = max(tree.n_clusters, 1)
    if colors is None:
        return cluster_colors(k)
    colors = [str(c) for c in colors]
    if len(colors) < k:
        raise ValueError(f"cluster_colors has {len(colors)} colours for {k} clusters; give one per cluster")
    return colors


# ---------------------------------------------------------------------------- number formatting
def fmt_num(v: float) -> str:
    """Thresholds as the tree module writes them (6 significant digits), so drawings and rules agree."""
    return f"{v:.6g}"


def fmt_value(v: Any, *, integer_like: bool = False) -> str:
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


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def text_width(s: str, size: float, bold: bool = False) -> float:
    """A generous estimate of rendered text width: sans-serif glyphs average about 0.6 em."""
    return len(s) * size * (0.62 if bold else 0.58)


def scoped_css(css: str, scope: str) -> str:
    """Prefix every selector with ``scope``: an inline SVG's <style> applies to the whole page otherwise."""
    rules = []
    for block in css.split("}"):
        if "{" not in block:
            continue
        selectors, body = block.split("{", 1)
        prefixed = ",".join(f"{scope} {sel.strip()}" for sel in selectors.split(","))
        rules.append(f"{prefixed}{{{body}}}")
    return "".join(rules)


def short(s: str, n: int = 24) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def list_text(values: Sequence[Any], integer_like: bool = False, head: int = 8) -> str:
    """A list in one short line: all of it when short, else its start and its length."""
    if values and isinstance(values[0], (list, tuple)):
        return f"{len(values)} × {len(values[0])} table"
    shown = ", ".join(fmt_value(v, integer_like=integer_like) for v in values[:head])
    return shown if len(values) <= head else f"{shown}, … ({len(values)} values)"


def columns_text(names: Sequence[str], head: int = 8) -> str:
    """Column names in one line: a numbered run as ``emb0..emb7``, else listed (at most ``head``, then
    ``… (N columns)``)."""
    names = [str(n) for n in names]
    if len(names) >= 3:
        parts = [re.fullmatch(r"(.*?)(\d+)", n) for n in names]
        if all(parts) and len({m.group(1) for m in parts if m}) == 1:
            numbers = [int(m.group(2)) for m in parts if m]
            if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
                return f"{names[0]}..{names[-1]}"
    shown = ", ".join(names[:head])
    return shown if len(names) <= head else f"{shown}, … ({len(names)} columns)"


def category_text(value: Any) -> str:
    """One category value as rules and drawings write it: text bare, booleans and integers as Python writes them."""
    return str(value.item() if isinstance(value, np.generic) else value)


def category_set_text(values: Sequence[Any], head: int | None = None) -> str:
    """A set of category values, ``{de, fr, at}``; with ``head``, at most that many then ``… (+N)`` (drawings;
    rules write every value)."""
    words = [category_text(v) for v in values]
    if head is not None and len(words) > head:
        words = words[:head] + [f"… (+{len(words) - head})"]
    return "{" + ", ".join(words) + "}"
