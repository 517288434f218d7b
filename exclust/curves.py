"""Cost ratio against the number of leaves: ExKMC, CART and KDTree side by side (paper 003, Figure 2).

For each leaf count L the k-means cost of a tree's clusters, each scored by its own mean, is
divided by the reference cost (every point to its nearest reference center). All three
algorithms grow greedily and a split never changes the choice at another leaf, so one fit at
``max(leaves)`` holds every smaller tree as a prefix (``ExKMC.tree_at``, ``KDTree.tree_at``,
``cart_prefix_trees``): three fits, then all trees are scored in one pass.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from exclust.algorithms.cart import CART
from exclust.algorithms.exkmc import ExKMC
from exclust.algorithms.kdtree import KDTree
from exclust.data import as_matrix, is_dask_array
from exclust.histogram import map_reduce_blocks
from exclust.tree import ThresholdTree


def prune_tree(tree: ThresholdTree, expanded, node_values) -> ThresholdTree:
    """The subtree that keeps only the splits of ``expanded`` nodes; any other node reached
    becomes a leaf of cluster ``node_values[node]``."""
    from exclust.tree import TreeBuilder

    keep = {int(i) for i in expanded}
    b = TreeBuilder(n_features=tree.n_features)
    stack = [(0, b.add_node())]
    while stack:
        node, new = stack.pop()
        if tree.kind[node] == 0 or node not in keep:
            b.make_leaf(new, int(node_values[node]))
            continue
        left, right = b.split(new, int(tree.feature[node]), float(tree.threshold[node]))
        stack.append((int(tree.right[node]), right))
        stack.append((int(tree.left[node]), left))
    return b.build(feature_names=tree.feature_names, n_clusters=tree.n_clusters, meta=dict(tree.meta))


def cart_prefix_trees(X, labels, leaves: Sequence[int], random_state=0) -> list[ThresholdTree]:
    """CART trees for every leaf count from one best-first fit at the largest count.

    scikit-learn grows a tree with ``max_leaf_nodes`` best first and numbers the two children
    of a node when it expands it, so sorting the internal nodes by their left child's id gives
    the expansion order, and the tree with L leaves is the first L - 1 expansions.
    """
    cart = CART(max_leaf_nodes=max(leaves), random_state=random_state).fit(X, labels)
    model = getattr(cart, "model_", None)
    if model is None:
        return [cart.tree_ for _ in leaves]
    t = model.tree_
    internal = np.flatnonzero(t.children_left >= 0)
    order = internal[np.argsort(t.children_left[internal])]
    values = np.asarray(model.classes_)[np.argmax(t.value[:, 0, :], axis=1)]
    return [prune_tree(cart.tree_, order[: L - 1], values) for L in leaves]


def _block_cluster_moments(X, trees: list[ThresholdTree], k: int) -> np.ndarray:
    """Per tree and cluster: count, sum of x, sum of ||x||^2 -> (n_trees, k, d + 2)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    d = X.shape[1]
    out = np.zeros((len(trees), k, d + 2))
    sq = np.einsum("ij,ij->i", X, X)
    for t, tree in enumerate(trees):
        c = tree.predict(X)
        out[t, :, 0] = np.bincount(c, minlength=k)
        for f in range(d):
            out[t, :, 1 + f] = np.bincount(c, weights=X[:, f], minlength=k)
        out[t, :, d + 1] = np.bincount(c, weights=sq, minlength=k)
    return out


def _block_reference_cost(X, centers: np.ndarray) -> np.ndarray:
    X = np.ascontiguousarray(X, dtype=np.float64)
    dist = np.einsum("ij,ij->i", X, X)[:, None] - 2.0 * X @ centers.T + np.einsum("ij,ij->i", centers, centers)
    return np.asarray([np.maximum(dist.min(axis=1), 0.0).sum()])


def kmeans_costs(X, trees: Sequence[ThresholdTree], n_clusters: int) -> np.ndarray:
    """k-means cost of each tree's clusters (each scored by its own mean), all in one pass."""
    mom = map_reduce_blocks(X, _block_cluster_moments, list(trees), int(n_clusters))
    n, sums, sq = mom[..., 0], mom[..., 1:-1], mom[..., -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        between = np.where(n > 0, np.einsum("tkd,tkd->tk", sums, sums) / np.maximum(n, 1), 0.0)
    return (sq - between).sum(axis=1)


def reference_cost(X, centers: np.ndarray) -> float:
    """Sum of squared distances of every point to its nearest reference center (one pass)."""
    return float(map_reduce_blocks(X, _block_reference_cost, np.asarray(centers, dtype=np.float64))[0])


def _nearest_center_block(X, centers):
    X = np.asarray(X, dtype=np.float64)
    return np.argmin(np.einsum("ij,ij->i", centers, centers) - 2.0 * X @ centers.T, axis=1)


def nearest_center_labels(X, centers: np.ndarray):
    """Reference labels: the nearest center of every row (lazy on Dask)."""
    centers = np.asarray(centers, dtype=np.float64)
    if is_dask_array(X):
        return X.map_blocks(_nearest_center_block, centers, dtype=np.int64, drop_axis=1)
    return _nearest_center_block(X, centers)


def cost_ratio_curve(
    X, centers, leaves: Sequence[int], reference_labels=None, max_bins: int = 256, random_state=0, exkmc=None
) -> dict:
    """k-means cost ratio (tree cost / reference cost) of ExKMC, CART and KDTree at each leaf count.

    ``centers`` are the reference k-means centers; ``reference_labels`` (default: nearest
    center) are what CART learns. Returns ``{"leaves", "exkmc", "cart", "kdtree"}`` with one
    ratio per leaf count, plus ``"exkmc_surrogate"`` (ExKMC's surrogate cost ratio) and
    ``"reference_cost"``. Leaf counts below k are not possible for ExKMC's IMM base and are
    rejected. ``exkmc``: an ExKMC already fitted from these centers to at least ``max(leaves)``
    leaves; its prefix trees are used instead of fitting another (ExKMC is greedy, so they are
    the same trees).
    """
    ds = as_matrix(X)
    centers = np.asarray(centers, dtype=np.float64)
    k = int(centers.shape[0])
    leaves = sorted({int(L) for L in leaves})
    if not leaves or leaves[0] < k:
        raise ValueError(f"leaves must be leaf counts >= n_clusters={k}, got {leaves}")
    if reference_labels is None:
        reference_labels = nearest_center_labels(ds.X, centers)
    reusable = (
        exkmc is not None
        and exkmc.max_leaves >= leaves[-1]
        and exkmc.centers_.shape == centers.shape
        and np.array_equal(exkmc.centers_, centers)
    )
    ex = exkmc if reusable else ExKMC(k, leaves[-1], max_bins=max_bins, random_state=random_state).fit(ds.X, centers)
    trees = [ex.tree_at(L) for L in leaves]
    trees += cart_prefix_trees(ds.X, reference_labels, leaves, random_state)
    kd = KDTree(leaves[-1], max_bins=max_bins, random_state=random_state).fit(ds.X, centers)
    trees += [kd.tree_at(L) for L in leaves]
    n_out = max(k, max(t.n_clusters for t in trees))
    costs = kmeans_costs(ds.X, trees, n_out)
    ref = reference_cost(ds.X, centers)
    m = len(leaves)
    surrogate = [
        ex.surrogate_costs_[min(L, ex.leaf_counts_[-1]) - ex.leaf_counts_[0]] / ref for L in leaves
    ]
    return {
        "leaves": leaves,
        "exkmc": (costs[:m] / ref).tolist(),
        "cart": (costs[m : 2 * m] / ref).tolist(),
        "kdtree": (costs[2 * m :] / ref).tolist(),
        "exkmc_surrogate": surrogate,
        "reference_cost": ref,
    }
