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

from exclust.algorithms.search._leaf_statistics import leaf_binned_moments, trees_leaf_moments
from exclust.algorithms.search.optimal_tree import count_leaves
from exclust.dataplane.residency import keep_parts, reduce_kept
from exclust.tree import LEAF

# One pass of binned moments returns at most this many bytes; more leaves take more passes.
HISTOGRAM_BYTES = 1 << 26


@dataclass
class FlatTree:
    """A nested tree as preorder arrays; ``leaf_id[node]`` numbers the leaves left to right (-1
    on cuts), ``leaf_node[j]`` is leaf j's node."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf_id: np.ndarray
    leaf_node: np.ndarray

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_node.size)

    @classmethod
    def of(cls, nested) -> FlatTree:
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []

        def add(node) -> int:
            i = len(feature)
            feature.append(-1)
            threshold.append(np.nan)
            left.append(-1)
            right.append(-1)
            if node is not None:
                feature[i], threshold[i] = int(node[0]), float(node[1])
                left[i] = add(node[2])
                right[i] = add(node[4])
            return i

        add(nested)
        lefts = np.asarray(left, dtype=np.int64)
        leaf_node = np.flatnonzero(lefts < 0)
        leaf_id = np.full(lefts.size, -1, dtype=np.int64)
        leaf_id[leaf_node] = np.arange(leaf_node.size)
        return cls(np.asarray(feature, dtype=np.int64), np.asarray(threshold, dtype=np.float64), lefts,
                   np.asarray(right, dtype=np.int64), leaf_id, leaf_node)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.feature, self.threshold, self.left, self.right


def tree_as_nested(tree):
    """A ThresholdTree of one-sided cuts as nested tuples."""
    def build(i):
        if tree.kind[i] == LEAF:
            return None
        left = build(tree.left[i])
        return (int(tree.feature[i]), float(tree.threshold[i]), left, count_leaves(left), build(tree.right[i]))

    return build(0)


def own_cost(moments: np.ndarray) -> np.ndarray:
    """k-means cost at their own mean of the rows whose moments (..., d + 2) are given."""
    n = moments[..., 0]
    sums = moments[..., 1:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        cost = moments[..., -1] - np.einsum("...i,...i->...", sums, sums) / n
    return np.where(n > 0, np.maximum(cost, 0.0), 0.0)


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


def _keep_block(X, mapper) -> dict:
    X = np.ascontiguousarray(X, dtype=np.float64)
    return {"x": X, "codes": mapper.transform(X)}


def _block_tree_moments(part, shift, arrays, leaf_id, roots, n_leaves_max, centers):
    return trees_leaf_moments(part["x"], shift, *arrays, leaf_id, roots, n_leaves_max, centers)


def _block_binned(part, shift, arrays, slot, n_slots, n_bins):
    return leaf_binned_moments(part["x"], part["codes"], shift, *arrays, slot, n_slots, n_bins)


class RowStatistics:
    """The rows (and their bin codes) kept where they live, and the passes the search prices with.

    ``mapper``: the histogram engine's ``BinMapper`` whose edges are the search's thresholds;
    ``shift``: what every coordinate is moved by. ``n_passes`` counts the passes (the keeping
    one included).
    """

    def __init__(self, X, mapper, shift: np.ndarray) -> None:
        self.mapper = mapper
        self.shift = np.ascontiguousarray(shift, dtype=np.float64)
        self.d = int(mapper.n_features)
        self.n_bins = int(mapper.max_n_bins)
        self._kept = keep_parts(_keep_block, X, mapper)
        self.n_passes = 1

    def tree_moments(self, trees: list[FlatTree],
                     centers: np.ndarray | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Per tree, its leaves' moments on all rows (one pass for all the trees); and, with
        ``centers`` (moved by ``shift``), the moments of the rows nearest to each center (the
        reference clusters of a k-means reference)."""
        offsets = np.cumsum([0] + [t.feature.size for t in trees])
        feature = np.concatenate([t.feature for t in trees])
        threshold = np.concatenate([t.threshold for t in trees])
        starts = list(zip(trees, offsets[:-1], strict=True))
        left = np.concatenate([np.where(t.left >= 0, t.left + o, -1) for t, o in starts])
        right = np.concatenate([np.where(t.right >= 0, t.right + o, -1) for t, o in starts])
        leaf_id = np.concatenate([t.leaf_id for t in trees])
        most = max(t.n_leaves for t in trees)
        moved = np.zeros((0, self.d)) if centers is None else np.ascontiguousarray(centers, dtype=np.float64)
        self.n_passes += 1
        out, nearest = reduce_kept(self._kept, _block_tree_moments, self.shift, (feature, threshold, left, right),
                                   leaf_id, offsets[:-1].astype(np.int64), most, moved)
        return [out[i, : t.n_leaves] for i, t in enumerate(trees)], nearest

    def binned_batches(self, tree: FlatTree, leaves: np.ndarray, together: int = 2):
        """Yield (leaves, moments (leaves, d, bins, d + 2)): the binned moments of the given leaves
        of ``tree`` on all rows, one pass per batch of as many leaves as ``HISTOGRAM_BYTES``
        allows, rounded down to a multiple of ``together`` (so pairs listed side by side share
        a batch)."""
        per_leaf = self.d * self.n_bins * (self.d + 2) * 8
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
        per_leaf = self.d * self.n_bins * (self.d + 2) * 8
        batch = max(together, (HISTOGRAM_BYTES // per_leaf) // together * together)
        return -(-int(n_leaves) // batch)

    def release(self) -> None:
        self._kept.release()
