"""The search's view of all rows: per-leaf moments of candidate trees and per-leaf binned moments,
each one pass over rows kept where they live (in this process, or on the Dask workers).

A leaf's moments are (count, summed coordinates, summed squared norm), coordinates moved by a
fixed ``shift`` (the centers' mean) so that costs, differences of large sums, keep their digits.
From them the k-means cost of any union of leaves at its own mean, or at any center, is exact
(``own_cost``, ``center_costs``). Binned moments (per leaf, feature and bin of the histogram
engine's ``BinMapper``) price every cut of a leaf by prefix sums, as the engine prices its cuts
(``engine.py``), but with the own-mean cost instead of a surrogate.

Trees travel as ``FlatTree`` (preorder arrays of nested tuples ``(feature, threshold, left,
left's leaves, right)``, a leaf None, as ``tree_search.py`` writes them).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exclust.algorithms.histogram.engine import with_clustering_space
from exclust.algorithms.search._leaf_statistics import leaf_binned_moments, trees_leaf_moments
from exclust.algorithms.search.category_cuts import Cut, own_cost
from exclust.algorithms.search.optimal_tree import count_leaves
from exclust.dataplane.residency import keep_parts, reduce_kept
from exclust.tree import LEAF
from exclust.tree.node_kinds import CATEGORY_SET, MISSING_NONE, MISSING_RIGHT, ONE_SIDED
from exclust.tree.threshold_tree import _category_bitset

__all__ = ["FlatTree", "RowStatistics", "own_cost", "tree_as_nested"]

# One pass of binned moments returns at most this many bytes; more leaves take more passes.
HISTOGRAM_BYTES = 1 << 26


@dataclass
class FlatTree:
    """A nested tree as preorder arrays; ``leaf_id[node]`` numbers the leaves left to right (-1
    on cuts), ``leaf_node[j]`` is leaf j's node. ``cuts`` keeps each node's cut as the nested tree
    gave it (float or ``Cut``; None on leaves); ``kind``, ``missing`` and ``bits`` route rows as
    the tree layer's kernels do (``tree._routing.routed_leaf_of``): a float cut sends missing
    values right (its feature holds none)."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf_id: np.ndarray
    leaf_node: np.ndarray
    cuts: list
    kind: np.ndarray
    missing: np.ndarray
    bits: np.ndarray

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_node.size)

    @classmethod
    def of(cls, nested) -> FlatTree:
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        cuts: list = []

        def add(node) -> int:
            i = len(feature)
            feature.append(-1)
            threshold.append(np.nan)
            left.append(-1)
            right.append(-1)
            cuts.append(None)
            if node is not None:
                cut = node[1]
                feature[i], cuts[i] = int(node[0]), cut
                threshold[i] = float(cut.threshold) if isinstance(cut, Cut) else float(cut)
                left[i] = add(node[2])
                right[i] = add(node[4])
            return i

        add(nested)
        lefts = np.asarray(left, dtype=np.int64)
        leaf_node = np.flatnonzero(lefts < 0)
        leaf_id = np.full(lefts.size, -1, dtype=np.int64)
        leaf_id[leaf_node] = np.arange(leaf_node.size)
        codes = [c.codes if isinstance(c, Cut) else () for c in cuts]
        kind = np.where(lefts < 0, LEAF, np.where([bool(c) for c in codes], CATEGORY_SET, ONE_SIDED)).astype(np.int8)
        missing = np.array([c.missing_side if isinstance(c, Cut) and c.missing_side != MISSING_NONE
                            else MISSING_RIGHT for c in cuts], dtype=np.int8)
        most = max([max(c) + 1 for c in codes if c], default=1)
        bits = _category_bitset(codes, {0: range(most)})
        return cls(np.asarray(feature, dtype=np.int64), np.asarray(threshold, dtype=np.float64), lefts,
                   np.asarray(right, dtype=np.int64), leaf_id, leaf_node, cuts, kind, missing, bits)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(kind, feature, threshold, left, right, missing, bits): what the kernels route by."""
        return self.kind, self.feature, self.threshold, self.left, self.right, self.missing, self.bits


def tree_as_nested(tree, sides: np.ndarray | None = None):
    """A ThresholdTree of one-sided and category-set cuts as nested tuples: a set cut, and a
    threshold cut on a feature of ``sides`` (bool per feature: those holding missing values),
    keep their missing side in a ``Cut``; other threshold cuts are their float threshold."""
    def build(i):
        if tree.kind[i] == LEAF:
            return None
        left = build(tree.left[i])
        f, side = int(tree.feature[i]), int(tree.missing_side[i])
        side = side if side != MISSING_NONE else MISSING_RIGHT
        cut: float | Cut
        if tree.kind[i] == CATEGORY_SET:
            cut = Cut(0.0, tuple(tree.left_categories[i]), side)
        elif sides is not None and sides[f]:
            cut = Cut(float(tree.threshold[i]), (), side)
        else:
            cut = float(tree.threshold[i])
        return (f, cut, left, count_leaves(left), build(tree.right[i]))

    return build(0)


def center_costs(moments: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """(leaves, centers): the k-means cost of each leaf's rows at each (moved) center."""
    n, sums, sq = moments[:, 0], moments[:, 1:-1], moments[:, -1]
    return np.maximum(sq[:, None] - 2.0 * sums @ centers.T + n[:, None] * (centers ** 2).sum(axis=1)[None], 0.0)


def name_leaves(moments: np.ndarray, centers: np.ndarray, one_to_one: bool) -> np.ndarray:
    """The reference center each leaf names: one-to-one by least summed cost (Hungarian) with one
    leaf per center, else each leaf its cheapest center."""
    cost = center_costs(moments, centers)
    if not one_to_one:
        return cost.argmin(axis=1)
    from scipy.optimize import linear_sum_assignment

    chosen = np.empty(cost.shape[0], dtype=np.int64)
    rows, cols = linear_sum_assignment(cost)
    chosen[rows] = cols
    return chosen


def clusters_cost(moments: np.ndarray, named: np.ndarray, k: int) -> float:
    """k-means cost of the tree's clusters (leaves merged by the center they name) at their own means."""
    merged = np.zeros((k, moments.shape[1]))
    np.add.at(merged, named, moments)
    return float(own_cost(merged).sum())


def _keep_block(block, mapper) -> dict:
    """A row part's features (routing, codes) and clustering-space rows (the moments): X and Z
    side by side (``engine.with_clustering_space``), or X alone when it is its own space."""
    block = np.ascontiguousarray(block, dtype=np.float64)
    d = mapper.n_features
    X = np.ascontiguousarray(block[:, :d])
    return {"x": X, "z": np.ascontiguousarray(block[:, d:]) if block.shape[1] > d else X,
            "codes": mapper.transform(X)}


def _block_tree_moments(part, shift, arrays, leaf_id, roots, n_leaves_max, centers):
    return trees_leaf_moments(part["x"], part["z"], shift, *arrays, leaf_id, roots, n_leaves_max, centers)


def _block_binned(part, shift, arrays, slot, n_slots, n_bins):
    return leaf_binned_moments(part["x"], part["z"], part["codes"], shift, *arrays, slot, n_slots, n_bins)


class RowStatistics:
    """The rows (and their bin codes) kept where they live, and the passes the search prices with.

    ``mapper``: the histogram engine's ``BinMapper`` whose edges are the search's thresholds (its
    category features binned by code, a missing bin where a feature holds missing values);
    ``shift``: what every coordinate of the clustering space is moved by; ``Z`` (default None:
    X): the clustering space's rows, row-aligned with X, whose moments price the trees (issue
    28: the cuts on X, the cost in Z). ``n_passes`` counts the passes (the keeping one included).
    """

    def __init__(self, X, mapper, shift: np.ndarray, Z=None) -> None:
        self.mapper = mapper
        self.shift = np.ascontiguousarray(shift, dtype=np.float64)
        self.d = int(mapper.n_features)
        self.p = int(self.shift.shape[0])
        self.n_bins = int(mapper.max_n_bins)
        self._kept = keep_parts(_keep_block, with_clustering_space(X, Z), mapper)
        self.n_passes = 1

    def tree_moments(self, trees: list[FlatTree],
                     centers: np.ndarray | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Per tree, its leaves' moments on all rows (one pass for all the trees); and, with
        ``centers`` (moved by ``shift``), the moments of the rows nearest to each center (the
        reference clusters of a k-means reference)."""
        offsets = np.cumsum([0] + [t.feature.size for t in trees])
        starts = list(zip(trees, offsets[:-1], strict=True))
        left = np.concatenate([np.where(t.left >= 0, t.left + o, -1) for t, o in starts])
        right = np.concatenate([np.where(t.right >= 0, t.right + o, -1) for t, o in starts])
        words = max(t.bits.shape[1] for t in trees)
        bits = np.concatenate([np.pad(t.bits, ((0, 0), (0, words - t.bits.shape[1]))) for t in trees])
        arrays = (np.concatenate([t.kind for t in trees]), np.concatenate([t.feature for t in trees]),
                  np.concatenate([t.threshold for t in trees]), left, right,
                  np.concatenate([t.missing for t in trees]), bits)
        leaf_id = np.concatenate([t.leaf_id for t in trees])
        most = max(t.n_leaves for t in trees)
        moved = np.zeros((0, self.p)) if centers is None else np.ascontiguousarray(centers, dtype=np.float64)
        self.n_passes += 1
        out, nearest = reduce_kept(self._kept, _block_tree_moments, self.shift, arrays,
                                   leaf_id, offsets[:-1].astype(np.int64), most, moved)
        return [out[i, : t.n_leaves] for i, t in enumerate(trees)], nearest

    def binned_batches(self, tree: FlatTree, leaves: np.ndarray, together: int = 2):
        """Yield (leaves, moments (leaves, d, bins, d + 2)): the binned moments of the given leaves
        of ``tree`` on all rows, one pass per batch of as many leaves as ``HISTOGRAM_BYTES``
        allows, rounded down to a multiple of ``together`` (so pairs listed side by side share
        a batch)."""
        per_leaf = self.d * self.n_bins * (self.p + 2) * 8
        batch = max(together, (HISTOGRAM_BYTES // per_leaf) // together * together)
        for start in range(0, leaves.size, batch):
            chosen = leaves[start:start + batch]
            slot = np.full(tree.feature.size, -1, dtype=np.int64)
            slot[tree.leaf_node[chosen]] = np.arange(chosen.size)
            self.n_passes += 1
            yield chosen, reduce_kept(self._kept, _block_binned, self.shift, tree.arrays(), slot, int(chosen.size),
                                      self.n_bins)

    def passes_per_sweep(self, n_leaves: int, together: int = 2) -> int:
        """Passes ``binned_batches`` takes for ``n_leaves`` leaves."""
        per_leaf = self.d * self.n_bins * (self.p + 2) * 8
        batch = max(together, (HISTOGRAM_BYTES // per_leaf) // together * together)
        return -(-int(n_leaves) // batch)

    def release(self) -> None:
        self._kept.release()
