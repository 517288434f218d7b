"""ThresholdTree: the one axis-aligned tree type that every exclust algorithm returns.

The tree is stored as flat arrays, one entry per node, node 0 being the root:

- ``kind``: LEAF, ONE_SIDED (go left when ``x[f] <= t``) or INTERVAL (go left when
  ``|x[f] - c| <= t``, the two-sided cut of kernel MMDT; left is *inside* the band),
- ``feature``, ``threshold``, ``center`` (INTERVAL only), ``left``, ``right``,
- ``value``: the cluster a leaf stands for (several leaves may share a cluster, as in ExKMC),
- ``missing_side``: where a missing value goes at an internal node (``MISSING_LEFT``, ``MISSING_RIGHT``, or
  ``MISSING_NONE``: not learned, such a row is not routed),
- ``left_categories``: a CATEGORY_SET node's codes that go left (a sorted tuple; empty on other nodes), over
  ``categories``, the vocabulary of each category feature (code c of feature f is ``categories[f][c]``).

A tree is saved as JSON with a schema version (the format lives in ``exclust.tree.file_format``); loading
validates the arrays and never runs code.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from exclust.tree import rules as rules_module
from exclust.tree.file_format import (
    KIND_NAMES,
    TreeFormatError,
    document_text,
    parse_tree_bytes,
    read_document,
    tree_arguments,
    tree_to_document,
)
from exclust.tree.node_kinds import (
    CATEGORY_SET,
    INTERVAL,
    LEAF,
    MISSING_AT_FIT,
    MISSING_LEFT,
    MISSING_NONE,
    MISSING_RIGHT,
    ONE_SIDED,
)


def _category_bitset(left_categories: Sequence[tuple[int, ...]], categories: Mapping[int, Sequence[Any]]) -> np.ndarray:
    """The set cuts as the routing kernels read them: one row of 64-bit words per node, bit c set when code c goes
    left (at least one word, so that a tree without set cuts passes an array of the same type)."""
    longest = max((len(v) for v in categories.values()), default=0)
    bits = np.zeros((len(left_categories), max(1, -(-longest // 64))), dtype=np.uint64)
    for node, codes in enumerate(left_categories):
        for c in codes:
            bits[node, c >> 6] |= np.uint64(1) << np.uint64(c & 63)
    return bits


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
        missing_side: ArrayLike | None = None,
        left_categories: Sequence[Sequence[int]] | None = None,
        categories: Mapping[int, Sequence[Any]] | None = None,
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
        self.missing_side = (np.full(m, MISSING_NONE, dtype=np.int8) if missing_side is None
                             else np.asarray(missing_side, dtype=np.int8))
        self.left_categories: list[tuple[int, ...]] = (
            [()] * m if left_categories is None else [tuple(sorted(int(c) for c in s)) for s in left_categories])
        self.categories: dict[int, list[Any]] = {int(f): list(v) for f, v in (categories or {}).items()}
        self._validate()
        self._validate_categories()
        self.category_bits = _category_bitset(self.left_categories, self.categories)

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
        numeric = internal & (self.kind != CATEGORY_SET)
        if not np.isfinite(self.threshold[numeric]).all():
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

    def _validate_categories(self) -> None:
        """The missing sides, the set cuts and the vocabularies: a set cut's feature is a category feature and its
        codes lie within that feature's vocabulary."""
        m = self.node_count
        if self.missing_side.shape != (m,) or len(self.left_categories) != m:
            raise TreeFormatError(f"missing_side and left_categories need one entry per node ({m})")
        if not np.isin(self.missing_side, (MISSING_LEFT, MISSING_RIGHT, MISSING_NONE)).all():
            raise TreeFormatError(f"unknown missing side in {sorted(set(self.missing_side.tolist()))}; "
                                  f"expected {MISSING_LEFT} (left), {MISSING_RIGHT} (right) or {MISSING_NONE} (none)")
        for f, vocabulary in self.categories.items():
            if not 0 <= f < self.n_features:
                raise TreeFormatError(f"categories name feature {f}, outside [0, {self.n_features})")
            if not vocabulary or len(set(map(repr, vocabulary))) != len(vocabulary):
                raise TreeFormatError(f"the categories of feature '{self.feature_names[f]}' must be distinct values, "
                                      f"at least one")
        for node in range(m):
            codes = self.left_categories[node]
            if self.kind[node] != CATEGORY_SET:
                if codes:
                    raise TreeFormatError(f"node {node} is not a category set cut but lists left categories")
                continue
            f = int(self.feature[node])
            if f not in self.categories:
                raise TreeFormatError(f"node {node} cuts feature '{self.feature_names[f]}' by a set of categories, "
                                      f"but that feature is numeric (it has no categories)")
            if len(set(codes)) != len(codes) or any(not 0 <= c < len(self.categories[f]) for c in codes):
                raise TreeFormatError(f"node {node}'s left categories {list(codes)} are not distinct codes of "
                                      f"feature '{self.feature_names[f]}' (0..{len(self.categories[f]) - 1})")

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
        first with the left child first; feature names, ``n_clusters``, ``meta``, the categories and every
        kept node's missing side and set are kept.
        """
        keep = {int(i) for i in expanded}
        b = TreeBuilder(n_features=self.n_features)
        stack = [(0, b.add_node())]
        while stack:
            node, new = stack.pop()
            if self.kind[node] == LEAF or node not in keep:
                b.make_leaf(new, int(node_values[node]))
                continue
            f, t, side = int(self.feature[node]), float(self.threshold[node]), int(self.missing_side[node])
            if self.kind[node] == INTERVAL:
                left, right = b.split_interval(new, f, float(self.center[node]), t, missing_side=side)
            elif self.kind[node] == CATEGORY_SET:
                left, right = b.split_categories(new, f, self.left_categories[node], side)
            else:
                left, right = b.split(new, f, t, missing_side=side)
            stack.append((int(self.right[node]), right))
            stack.append((int(self.left[node]), left))
        return b.build(feature_names=self.feature_names, n_clusters=self.n_clusters, meta=dict(self.meta),
                       categories=self.categories)

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
        return parts.label_rows(self._route_block, X, to_leaves, route_nan=self.routes_missing)

    def _route_block(self, X: np.ndarray, to_leaves: bool) -> np.ndarray:
        # numba on first routing, not on import: a command's driver imports the tree before it
        # starts the workers' read, and numba then (about 0.35 s) while they read (issue 29 item 4).
        from exclust.tree._routing import route_to_clusters, route_to_leaves

        X = np.ascontiguousarray(X, dtype=np.float64)
        args = (X, self.kind, self.feature, self.threshold, self.center, self.left, self.right, self.missing_side,
                self.category_bits)
        if to_leaves:
            return route_to_leaves(*args)
        return route_to_clusters(*args, self.value)

    def predict(self, X):
        """Cluster of every row: numpy in, numpy out; dask array in, dask array out.

        A NaN (a missing value) goes to each cut's missing side, and so does a category code the tree never saw
        (``UNSEEN_CATEGORY``, -1.0) at a set cut. A row gets -1 when it holds +-inf (``parts.label_rows``) or when
        a missing value meets a cut that learned no side (``MISSING_NONE``); in a tree where no cut learned one
        (``routes_missing`` False: written before issue 28), every row holding a NaN gets -1, as before."""
        return self._route(X, to_leaves=False)

    def apply(self, X):
        """Leaf node id of every row, routed as ``predict`` routes it (-1 for a row with +-inf, or a missing value
        at a cut with no missing side): numpy in, numpy out; dask in, dask out."""
        return self._route(X, to_leaves=True)

    @property
    def routes_missing(self) -> bool:
        """Whether some cut learned a side for missing values; a tree where none did (written before issue 28, or
        by a builder that learns none) labels every row holding a NaN -1, as trees always did."""
        return bool((self.missing_side[self.kind != LEAF] != MISSING_NONE).any())

    def shows_missing(self, feature: int) -> bool:
        """Whether words and drawings name the missing side of cuts on ``feature``: unless the tree lists the
        features that could hold missing values at fit (``MISSING_AT_FIT`` in its meta) and this is not one."""
        listed = self.meta.get(MISSING_AT_FIT)
        return listed is None or self.feature_names[feature] in listed

    def category_values(self, node: int) -> list[Any]:
        """The category values a CATEGORY_SET node sends left, in code order."""
        vocabulary = self.categories[int(self.feature[node])]
        return [vocabulary[c] for c in self.left_categories[node]]

    # ------------------------------------------------------------------ words (exclust.tree.rules)
    def describe_node(self, node: int) -> str:
        """The test of an internal node in words, e.g. ``petal_width <= 1.3`` or ``country in {de, fr}``, with
        ``(missing: left)`` where the node sends missing values."""
        return rules_module.describe_node(self, node)

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
        """One leaf's conditions, merged per feature into the values that reach the leaf: ``1.5 <= x <= 2.5``,
        ``(1.3 < x < 1.5 or x > 2.5)`` after an interval cut's outside branch, ``country in {de, fr}`` or
        ``country not in {de, fr}``, each with ``(or missing)`` where missing values reach the leaf."""
        return rules_module.leaf_rule(self, path)

    def rules(self) -> dict[int, str]:
        """For every cluster, the condition in words under which a point is assigned to it."""
        return rules_module.rules(self)

    def rules_text(self, cluster_names: Sequence[str] | None = None) -> str:
        """All rules, one line per cluster: ``cluster 2: 1.3 < petal_width <= 4.1``."""
        return rules_module.rules_text(self, cluster_names)

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
    missing_side: list[int] = field(default_factory=list)
    left_categories: list[tuple[int, ...]] = field(default_factory=list)

    def add_node(self) -> int:
        """A new, still undecided node (a leaf of cluster -1 until made a leaf or split)."""
        self.kind.append(LEAF)
        self.feature.append(-1)
        self.threshold.append(math.nan)
        self.center.append(math.nan)
        self.left.append(-1)
        self.right.append(-1)
        self.value.append(-1)
        self.missing_side.append(MISSING_NONE)
        self.left_categories.append(())
        return len(self.kind) - 1

    def _children(self, node: int, kind: int, feature: int, missing_side: int) -> tuple[int, int]:
        self.kind[node] = kind
        self.feature[node] = int(feature)
        self.missing_side[node] = int(missing_side)
        self.left[node], self.right[node] = self.add_node(), self.add_node()
        return self.left[node], self.right[node]

    def split(self, node: int, feature: int, threshold: float, missing_side: int = MISSING_NONE) -> tuple[int, int]:
        """Make ``node`` the one-sided cut ``x[feature] <= threshold``; returns (left, right).

        Parameters
        ----------
        node, feature : int
            The node to split and the feature it cuts.
        threshold : float
            Rows with ``x[feature] <= threshold`` go left.
        missing_side : int, default MISSING_NONE
            Where a missing value (NaN) goes: ``MISSING_LEFT``, ``MISSING_RIGHT``, or ``MISSING_NONE`` (not routed).
        """
        self.threshold[node] = float(threshold)
        return self._children(node, ONE_SIDED, feature, missing_side)

    def split_interval(self, node: int, feature: int, center: float, half_width: float,
                       missing_side: int = MISSING_NONE) -> tuple[int, int]:
        """Make ``node`` the interval cut ``|x[feature] - center| <= half_width``; (inside, outside)."""
        self.center[node] = float(center)
        self.threshold[node] = float(half_width)
        return self._children(node, INTERVAL, feature, missing_side)

    def split_categories(self, node: int, feature: int, left_codes: Sequence[int],
                         missing_side: int = MISSING_NONE) -> tuple[int, int]:
        """Make ``node`` the set cut ``x[feature] in left_codes``; returns (left, right).

        Parameters
        ----------
        node, feature : int
            The node to split and the category feature it cuts (give its vocabulary to ``build``).
        left_codes : sequence of int
            The category codes that go left; every other code goes right.
        missing_side : int, default MISSING_NONE
            Where a missing value (NaN) and a category the tree never saw (``UNSEEN_CATEGORY``) go.
        """
        self.left_categories[node] = tuple(sorted(int(c) for c in left_codes))
        return self._children(node, CATEGORY_SET, feature, missing_side)

    def make_leaf(self, node: int, cluster: int) -> None:
        self.kind[node] = LEAF
        self.value[node] = int(cluster)

    def build(
        self,
        feature_names: Sequence[str] | None = None,
        n_clusters: int | None = None,
        meta: dict[str, Any] | None = None,
        categories: Mapping[int, Sequence[Any]] | None = None,
    ) -> ThresholdTree:
        """The tree grown so far; ``categories`` gives each category feature's vocabulary (feature -> values in
        code order), needed by every set cut."""
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
            missing_side=self.missing_side,
            left_categories=self.left_categories,
            categories=categories,
        )
