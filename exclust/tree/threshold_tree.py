"""ThresholdTree: the one axis-aligned tree type that every exclust algorithm returns.

The tree is stored as flat arrays, one entry per node, node 0 being the root:

- ``kind``: LEAF, ONE_SIDED (go left when ``x[f] <= t``) or INTERVAL (go left when
  ``|x[f] - c| <= t``, the two-sided cut of kernel MMDT; left is *inside* the band),
- ``feature``, ``threshold``, ``center`` (INTERVAL only), ``left``, ``right``,
- ``value``: the cluster a leaf stands for (several leaves may share a cluster, as in ExKMC).

A tree is saved as JSON with a schema version (the format lives in ``exclust.tree.file_format``); loading
validates the arrays and never runs code.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from exclust.tree._routing import route_to_clusters, route_to_leaves
from exclust.tree.file_format import (
    KIND_NAMES,
    TreeFormatError,
    document_text,
    parse_tree_bytes,
    read_document,
    tree_arguments,
    tree_to_document,
)
from exclust.tree.node_kinds import INTERVAL, LEAF, ONE_SIDED


def _format_number(v: float) -> str:
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
        lo, hi = _format_number(self.low), _format_number(self.high)
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


class ThresholdTree:
    """An axis-aligned decision tree whose leaves stand for clusters."""

    def __init__(
        self,
        kind: ArrayLike,
        feature: ArrayLike,
        threshold: ArrayLike,
        left: ArrayLike,
        right: ArrayLike,
        value: ArrayLike,
        *,
        n_features: int,
        center: ArrayLike | None = None,
        feature_names: Sequence[str] | None = None,
        n_clusters: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.kind = np.asarray(kind, dtype=np.int8)
        m = self.kind.shape[0]
        self.feature = np.asarray(feature, dtype=np.int64)
        self.threshold = np.asarray(threshold, dtype=np.float64)
        self.left = np.asarray(left, dtype=np.int64)
        self.right = np.asarray(right, dtype=np.int64)
        self.value = np.asarray(value, dtype=np.int64)
        self.center = (
            np.full(m, np.nan) if center is None else np.asarray(center, dtype=np.float64)
        )
        self.n_features = int(n_features)
        self.feature_names = (
            [f"x{j}" for j in range(self.n_features)]
            if feature_names is None
            else [str(s) for s in feature_names]
        )
        leaf_values = self.value[self.kind == LEAF] if m else np.empty(0, np.int64)
        self.n_clusters = int(n_clusters) if n_clusters is not None else int(leaf_values.max(initial=-1) + 1)
        self.meta = dict(meta or {})
        self._validate()

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        m = self.kind.shape[0]
        if m == 0:
            raise TreeFormatError("a tree needs at least one node")
        for name in ("feature", "threshold", "left", "right", "value", "center"):
            if getattr(self, name).shape != (m,):
                raise TreeFormatError(f"array '{name}' has shape {getattr(self, name).shape}, expected ({m},)")
        if len(self.feature_names) != self.n_features:
            raise TreeFormatError(
                f"{len(self.feature_names)} feature names for {self.n_features} features"
            )
        if not np.isin(self.kind, list(KIND_NAMES)).all():
            raise TreeFormatError(f"unknown node kind in {sorted(set(self.kind.tolist()))}")
        internal = self.kind != LEAF
        leaf = ~internal
        if (self.feature[internal] < 0).any() or (self.feature[internal] >= self.n_features).any():
            raise TreeFormatError("an internal node splits on a feature outside [0, n_features)")
        if not np.isfinite(self.threshold[internal]).all():
            raise TreeFormatError("an internal node has a non-finite threshold")
        interval = self.kind == INTERVAL
        if not np.isfinite(self.center[interval]).all() or (self.threshold[interval] < 0).any():
            raise TreeFormatError("an interval node needs a finite center and a half-width >= 0")
        if (self.value[leaf] < 0).any() or (self.value[leaf] >= self.n_clusters).any():
            raise TreeFormatError("a leaf's cluster lies outside [0, n_clusters)")
        children = np.concatenate([self.left[internal], self.right[internal]])
        if ((children <= 0) | (children >= m)).any():
            raise TreeFormatError("a child index points outside the tree or back to the root")
        counts = np.bincount(children, minlength=m)
        if (counts[1:] != 1).any():
            raise TreeFormatError("every node but the root must have exactly one parent")
        # Every node reachable from the root (no cycles, since each has one parent and root has none).
        seen = np.zeros(m, dtype=bool)
        stack = [0]
        while stack:
            node = stack.pop()
            seen[node] = True
            if self.kind[node] != LEAF:
                stack.extend((int(self.left[node]), int(self.right[node])))
        if not seen.all():
            raise TreeFormatError("some nodes are not reachable from the root")

    # ------------------------------------------------------------------ shape
    @property
    def node_count(self) -> int:
        return int(self.kind.shape[0])

    @property
    def n_leaves(self) -> int:
        return int((self.kind == LEAF).sum())

    @property
    def depth(self) -> int:
        return int(self.node_depths()[self.leaves].max())

    def node_depths(self) -> np.ndarray:
        """The depth of every node (the root's is 0)."""
        depths = np.zeros(self.node_count, dtype=np.int64)
        stack = [0]
        while stack:
            node = stack.pop()
            if self.kind[node] != LEAF:
                for child in (int(self.left[node]), int(self.right[node])):
                    depths[child] = depths[node] + 1
                    stack.append(child)
        return depths

    @property
    def features_used(self) -> list[str]:
        used = sorted(set(self.feature[self.kind != LEAF].tolist()))
        return [self.feature_names[j] for j in used]

    @property
    def leaves(self) -> np.ndarray:
        return np.flatnonzero(self.kind == LEAF)

    def prune(self, expanded, node_values) -> ThresholdTree:
        """The subtree that keeps the splits of the ``expanded`` nodes only; every other node it
        reaches becomes a leaf of cluster ``node_values[node]`` (indexed by this tree's node ids).

        A greedy tree grown split by split holds every smaller tree as a prefix: pass the nodes
        split first (ExKMC, KDTree, CART's best-first order). Nodes are numbered afresh, depth
        first with the left child first; feature names, ``n_clusters`` and ``meta`` are kept.
        """
        keep = {int(i) for i in expanded}
        b = TreeBuilder(n_features=self.n_features)
        stack = [(0, b.add_node())]
        while stack:
            node, new = stack.pop()
            if self.kind[node] == LEAF or node not in keep:
                b.make_leaf(new, int(node_values[node]))
                continue
            f, t = int(self.feature[node]), float(self.threshold[node])
            if self.kind[node] == INTERVAL:
                left, right = b.split_interval(new, f, float(self.center[node]), t)
            else:
                left, right = b.split(new, f, t)
            stack.append((int(self.right[node]), right))
            stack.append((int(self.left[node]), left))
        return b.build(feature_names=self.feature_names, n_clusters=self.n_clusters, meta=dict(self.meta))

    # ------------------------------------------------------------------ prediction
    def _check_width(self, X) -> None:
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"the tree was built on {self.n_features} features "
                f"({', '.join(self.feature_names[:6])}{'...' if self.n_features > 6 else ''}); "
                f"got an array of shape {X.shape}"
            )

    def _route(self, X, to_leaves: bool):
        from exclust.dataplane import parts

        if not parts.is_lazy(X):
            X = np.asarray(X, dtype=np.float64)
            if X.ndim == 1:
                X = X.reshape(1, -1)
        self._check_width(X)
        return parts.label_rows(self._route_block, X, to_leaves)

    def _route_block(self, X: np.ndarray, to_leaves: bool) -> np.ndarray:
        X = np.ascontiguousarray(X, dtype=np.float64)
        args = (X, self.kind, self.feature, self.threshold, self.center, self.left, self.right)
        if to_leaves:
            return route_to_leaves(*args)
        return route_to_clusters(*args, self.value)

    def predict(self, X):
        """Cluster of every row, -1 for a row holding NaN or inf (``parts.label_rows``): numpy in,
        numpy out; dask array in, dask array out."""
        return self._route(X, to_leaves=False)

    def apply(self, X):
        """Leaf node id of every row, -1 for a row holding NaN or inf: numpy in, numpy out; dask in, dask out."""
        return self._route(X, to_leaves=True)

    # ------------------------------------------------------------------ words
    def describe_node(self, node: int) -> str:
        """The test of an internal node in words, e.g. ``petal_width <= 1.3``."""
        name = self.feature_names[self.feature[node]]
        t = self.threshold[node]
        if self.kind[node] == ONE_SIDED:
            return f"{name} <= {_format_number(t)}"
        if self.kind[node] == INTERVAL:  # |x - c| <= t, written as the interval it is
            c = self.center[node]
            return f"{_format_number(c - t)} <= {name} <= {_format_number(c + t)}"
        return f"cluster {self.value[node]}"

    def leaf_paths(self) -> dict[int, list[tuple[int, bool]]]:
        """For every leaf, the (node, went_left) steps from the root."""
        paths: dict[int, list[tuple[int, bool]]] = {}
        stack: list[tuple[int, list[tuple[int, bool]]]] = [(0, [])]
        while stack:
            node, path = stack.pop()
            if self.kind[node] == LEAF:
                paths[node] = path
            else:
                stack.append((int(self.right[node]), path + [(node, False)]))
                stack.append((int(self.left[node]), path + [(node, True)]))
        return paths

    def leaf_rule(self, path: list[tuple[int, bool]]) -> str:
        """One leaf's conditions, merged per feature into the set of values that reach the leaf:
        ``1.5 <= x <= 2.5``, or a union such as ``(1.3 < x < 1.5 or x > 2.5)`` after an interval
        cut's outside branch."""
        allowed: dict[int, list[_Span]] = {}  # feature -> disjoint spans of the values reaching the leaf
        for node, went_left in path:
            f, t = int(self.feature[node]), float(self.threshold[node])
            if self.kind[node] == ONE_SIDED:
                cut = [_Span(-math.inf, False, t, True)] if went_left else [_Span(t, False, math.inf, False)]
            else:
                a, b = float(self.center[node]) - t, float(self.center[node]) + t
                cut = ([_Span(a, True, b, True)] if went_left
                       else [_Span(-math.inf, False, a, False), _Span(b, False, math.inf, False)])
            allowed[f] = _intersect(allowed.get(f, [_Span(-math.inf, False, math.inf, False)]), cut)
        parts = []
        for f in sorted(allowed):
            words = [span.text(self.feature_names[f]) for span in allowed[f]]
            words = [w for w in words if w]
            if len(allowed[f]) == 0:
                parts.append(f"{self.feature_names[f]} in no interval (no point reaches this leaf)")
            elif len(words) == 1:
                parts.append(words[0])
            elif words:
                parts.append("(" + " or ".join(words) + ")")
        return " and ".join(parts) if parts else "all points"

    def rules(self) -> dict[int, str]:
        """For every cluster, the condition in words under which a point is assigned to it."""
        by_cluster: dict[int, list[str]] = {c: [] for c in range(self.n_clusters)}
        for leaf, path in sorted(self.leaf_paths().items()):
            by_cluster[int(self.value[leaf])].append(self.leaf_rule(path))
        out = {}
        for c, conds in by_cluster.items():
            if not conds:
                out[c] = "no leaf"
            elif len(conds) == 1:
                out[c] = conds[0]
            else:
                out[c] = " or ".join(f"({s})" for s in conds)
        return out

    def rules_text(self, cluster_names: Sequence[str] | None = None) -> str:
        """All rules, one line per cluster: ``cluster 2: 1.3 < petal_width <= 4.1``."""
        lines = []
        for c, rule in self.rules().items():
            label = cluster_names[c] if cluster_names is not None else f"cluster {c}"
            lines.append(f"{label}: {rule}")
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ JSON (exclust.tree.file_format)
    def to_dict(self) -> dict[str, Any]:
        return tree_to_document(self)

    def to_json(self, path: str | Path | None = None, indent: int | None = 1) -> str:
        """The tree as JSON text; also written to ``path`` (atomically) when given."""
        return document_text(self.to_dict(), path, indent)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ThresholdTree:
        args, kwargs = tree_arguments(doc)
        return cls(*args, **kwargs)

    @classmethod
    def from_file_bytes(cls, data: bytes, name: str) -> ThresholdTree:
        """The tree a file's bytes hold, read as JSON (never as a path) with every entry and the tree's structure
        checked; TreeFormatError, in one line naming ``name`` and the fault, for anything else."""
        doc = parse_tree_bytes(data, name)
        try:
            return cls.from_dict(doc)
        except TreeFormatError as exc:
            reason = str(exc).removeprefix("tree.json: ")
            raise TreeFormatError(f"tree file {name}: {reason}") from None

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> ThresholdTree:
        """Load a tree from JSON text or from a path to a JSON file (no code is ever executed)."""
        return cls.from_dict(read_document(text_or_path))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ThresholdTree):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def _repr_svg_(self) -> str:
        """The tree's drawing in a notebook: the report's own SVG (``exclust.tree.drawing.tree_svg``)."""
        from exclust.tree.drawing import tree_svg

        return tree_svg(self)

    def __repr__(self) -> str:
        return (
            f"ThresholdTree(n_leaves={self.n_leaves}, depth={self.depth}, "
            f"n_clusters={self.n_clusters}, features_used={self.features_used})"
        )


@dataclass
class TreeBuilder:
    """Grows a ThresholdTree node by node; algorithms use it instead of filling arrays by hand.

    >>> b = TreeBuilder(n_features=2)
    >>> root = b.add_node()
    >>> left, right = b.split(root, feature=0, threshold=0.5)
    >>> b.make_leaf(left, cluster=0); b.make_leaf(right, cluster=1)
    >>> tree = b.build()
    """

    n_features: int
    kind: list[int] = field(default_factory=list)
    feature: list[int] = field(default_factory=list)
    threshold: list[float] = field(default_factory=list)
    center: list[float] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    value: list[int] = field(default_factory=list)

    def add_node(self) -> int:
        """A new, still undecided node (a leaf of cluster -1 until made a leaf or split)."""
        self.kind.append(LEAF)
        self.feature.append(-1)
        self.threshold.append(math.nan)
        self.center.append(math.nan)
        self.left.append(-1)
        self.right.append(-1)
        self.value.append(-1)
        return len(self.kind) - 1

    def split(self, node: int, feature: int, threshold: float) -> tuple[int, int]:
        """Make ``node`` the one-sided cut ``x[feature] <= threshold``; returns (left, right)."""
        self.kind[node] = ONE_SIDED
        self.feature[node] = int(feature)
        self.threshold[node] = float(threshold)
        self.left[node], self.right[node] = self.add_node(), self.add_node()
        return self.left[node], self.right[node]

    def split_interval(self, node: int, feature: int, center: float, half_width: float) -> tuple[int, int]:
        """Make ``node`` the interval cut ``|x[feature] - center| <= half_width``; (inside, outside)."""
        self.kind[node] = INTERVAL
        self.feature[node] = int(feature)
        self.center[node] = float(center)
        self.threshold[node] = float(half_width)
        self.left[node], self.right[node] = self.add_node(), self.add_node()
        return self.left[node], self.right[node]

    def make_leaf(self, node: int, cluster: int) -> None:
        self.kind[node] = LEAF
        self.value[node] = int(cluster)

    def build(
        self,
        feature_names: Sequence[str] | None = None,
        n_clusters: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> ThresholdTree:
        return ThresholdTree(
            self.kind,
            self.feature,
            self.threshold,
            self.left,
            self.right,
            self.value,
            center=self.center,
            n_features=self.n_features,
            feature_names=feature_names,
            n_clusters=n_clusters,
            meta=meta,
        )
