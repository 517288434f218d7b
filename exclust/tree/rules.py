"""A ThresholdTree in words: the test of a node, the condition of a leaf, the rule of every cluster.

A leaf's conditions are merged per feature into the values that reach it: spans of a numeric feature
(``1.5 <= x <= 2.5``, or a union after an interval cut's outside branch), a set of a category feature
(``country in {de, fr}``, or ``country not in {it}`` when every cut on the path sent the row right), and
``(or missing)`` where a missing value (and, for a category, one the tree never saw) follows every cut
of that feature on the path to the leaf. ``ThresholdTree.describe_node``, ``leaf_rule``, ``rules`` and
``rules_text`` delegate here.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from exclust.tree.node_kinds import (
    CATEGORY_SET,
    INTERVAL,
    MISSING_LEFT,
    MISSING_NONE,
    MISSING_RIGHT,
    ONE_SIDED,
)
from exclust.tree.style import category_set_text

if TYPE_CHECKING:
    from exclust.tree.threshold_tree import ThresholdTree

OR_MISSING = " (or missing)"


def format_number(v: float) -> str:
    return f"{v:.6g}"


@dataclass(frozen=True)
class _Span:
    """An interval of one feature's values, each end open or closed (infinite ends open)."""

    low: float
    low_closed: bool
    high: float
    high_closed: bool

    @property
    def empty(self) -> bool:
        return self.low > self.high or (self.low == self.high and not (self.low_closed and self.high_closed))

    def text(self, name: str) -> str:
        """``a < name <= b``, ``name > a``, ``name = a``; empty for the whole line."""
        lo, hi = format_number(self.low), format_number(self.high)
        below, above = ("<=" if self.low_closed else "<"), ("<=" if self.high_closed else "<")
        if self.low == self.high:
            return f"{name} = {lo}"
        if math.isinf(self.low) and math.isinf(self.high):
            return ""
        if math.isinf(self.low):
            return f"{name} {above} {hi}"
        if math.isinf(self.high):
            return f"{name} {'>=' if self.low_closed else '>'} {lo}"
        return f"{lo} {below} {name} {above} {hi}"


_WHOLE_LINE = _Span(-math.inf, False, math.inf, False)


def _intersect(spans: Sequence[_Span], cut: Sequence[_Span]) -> list[_Span]:
    """The values in both sets of disjoint spans, in increasing order."""
    out = []
    for a in spans:
        for b in cut:
            low, low_closed = max((a.low, not a.low_closed), (b.low, not b.low_closed))
            high, high_closed = min((a.high, a.high_closed), (b.high, b.high_closed))
            span = _Span(low, not low_closed, high, high_closed)
            if not span.empty:
                out.append(span)
    return sorted(out, key=lambda s: (s.low, not s.low_closed))


def missing_words(tree: ThresholdTree, node: int) -> str:
    """Where a node sends missing values, in words (empty when it learned no side, or its feature held none
    at fit)."""
    if not tree.shows_missing(int(tree.feature[node])):
        return ""
    side = int(tree.missing_side[node])
    return {MISSING_LEFT: "missing: left", MISSING_RIGHT: "missing: right"}.get(side, "")


def describe_node(tree: ThresholdTree, node: int) -> str:
    """The test of an internal node in words, e.g. ``petal_width <= 1.3``, ``country in {de, fr}``, with
    ``(missing: left)`` when the node learned a side for missing values; a leaf's cluster."""
    name = tree.feature_names[tree.feature[node]]
    t = tree.threshold[node]
    kind = tree.kind[node]
    if kind == ONE_SIDED:
        test = f"{name} <= {format_number(t)}"
    elif kind == INTERVAL:  # |x - c| <= t, written as the interval it is
        c = tree.center[node]
        test = f"{format_number(c - t)} <= {name} <= {format_number(c + t)}"
    elif kind == CATEGORY_SET:
        test = f"{name} in {category_set_text(tree.category_values(node))}"
    else:
        return f"cluster {tree.value[node]}"
    missing = missing_words(tree, node)
    return f"{test} ({missing})" if missing else test


def _numeric_condition(name: str, spans: list[_Span]) -> str:
    words = [w for w in (span.text(name) for span in spans) if w]
    if not spans:
        return f"{name} in no interval (no point reaches this leaf)"
    if len(words) == 1:
        return words[0]
    return "(" + " or ".join(words) + ")" if words else ""


def leaf_rule(tree: ThresholdTree, path: list[tuple[int, bool]]) -> str:
    """One leaf's conditions, merged per feature into the values that reach the leaf: ``1.5 <= x <= 2.5``,
    a union such as ``(1.3 < x < 1.5 or x > 2.5)`` after an interval cut's outside branch, ``country in {de}``
    or ``country not in {de, fr}``, each with ``(or missing)`` where missing values reach the leaf."""
    spans: dict[int, list[_Span]] = {}  # numeric feature -> disjoint spans of the values reaching the leaf
    codes: dict[int, set[int]] = {}  # category feature -> the codes reaching the leaf
    went_in: set[int] = set()  # category features with a left turn (written ``in {...}``, else ``not in``)
    missing_reaches: dict[int, bool] = {}
    for node, went_left in path:
        f, t = int(tree.feature[node]), float(tree.threshold[node])
        side = int(tree.missing_side[node])
        follows = side != MISSING_NONE and (side == MISSING_LEFT) == went_left
        missing_reaches[f] = missing_reaches.get(f, True) and follows
        kind = tree.kind[node]
        if kind == CATEGORY_SET:
            chosen = set(tree.left_categories[node])
            every = codes.get(f, set(range(len(tree.categories[f]))))
            codes[f] = every & chosen if went_left else every - chosen
            if went_left:
                went_in.add(f)
            continue
        if kind == ONE_SIDED:
            cut = [_Span(-math.inf, False, t, True)] if went_left else [_Span(t, False, math.inf, False)]
        else:
            a, b = float(tree.center[node]) - t, float(tree.center[node]) + t
            cut = ([_Span(a, True, b, True)] if went_left
                   else [_Span(-math.inf, False, a, False), _Span(b, False, math.inf, False)])
        spans[f] = _intersect(spans.get(f, [_WHOLE_LINE]), cut)
    parts = []
    for f in sorted(missing_reaches):
        name = tree.feature_names[f]
        if f in codes:
            vocabulary = tree.categories[f]
            if f in went_in:
                text = f"{name} in {category_set_text([vocabulary[c] for c in sorted(codes[f])])}"
            else:
                excluded = sorted(set(range(len(vocabulary))) - codes[f])
                text = f"{name} not in {category_set_text([vocabulary[c] for c in excluded])}"
        else:
            text = _numeric_condition(name, spans[f])
        if text:
            parts.append(text + (OR_MISSING if missing_reaches[f] and tree.shows_missing(f) else ""))
    return " and ".join(parts) if parts else "all points"


def rules(tree: ThresholdTree) -> dict[int, str]:
    """For every cluster, the condition in words under which a point is assigned to it."""
    by_cluster: dict[int, list[str]] = {c: [] for c in range(tree.n_clusters)}
    for leaf, path in sorted(tree.leaf_paths().items()):
        by_cluster[int(tree.value[leaf])].append(leaf_rule(tree, path))
    out = {}
    for c, conds in by_cluster.items():
        if not conds:
            out[c] = "no leaf"
        elif len(conds) == 1:
            out[c] = conds[0]
        else:
            out[c] = " or ".join(f"({s})" for s in conds)
    return out


def rules_text(tree: ThresholdTree, cluster_names: Sequence[str] | None = None) -> str:
    """All rules, one line per cluster: ``cluster 2: 1.3 < petal_width <= 4.1``."""
    lines = []
    for c, rule in rules(tree).items():
        label = cluster_names[c] if cluster_names is not None else f"cluster {c}"
        lines.append(f"{label}: {rule}")
    return "\n".join(lines) + "\n"
