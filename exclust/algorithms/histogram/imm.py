"""IMM, Iterative Mistake Minimization (paper 003, Section 2; Dasgupta et al. 2020), on histograms.

IMM grows a threshold tree with exactly one reference center per leaf. At a node holding
several centers it takes the cut, among those that leave at least one of the node's centers on
each side, that separates the fewest of the node's points from their own center (mistakes).
Points separated from their center are dropped below that node: they no longer count.

Here a node's points are counted per (feature, bin, reference cluster) in one histogram summed
over all partitions (engine.py); mistakes of every cut come from prefix sums. All nodes of a
level are split in the same pass, and of two children that both need a histogram only one is
computed; the other is the parent's minus it (IMM's counts are integers, so this is exact).

``objective="kmedians"`` (the paper's k-medians case): mistakes are counted the same way, but a
point's reference cluster is its nearest center in l1 distance.
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.histogram.base import (
    CENTER_TREE_CONSTRAINTS,
    CenterTreePredictor,
    dataset_categories,
    prepare_fit,
)
from exclust.algorithms.histogram.criteria import Mistakes
from exclust.algorithms.histogram.cut_search import center_codes
from exclust.algorithms.histogram.engine import CodeTree, EncodedData


# --------------------------------------------------------------------------- IMM on histograms
def grow_imm(data: EncodedData) -> tuple[CodeTree, int]:
    """Grow IMM's tree on the encoded data; returns (tree, total mistakes of its cuts)."""
    k = data.k
    criterion = Mistakes()
    tree = CodeTree()
    mapper = data.mapper
    every_code = np.arange(data.n_bins)
    members = {0: np.arange(k)}
    total_mistakes = 0
    if k == 1:
        tree.value[0] = 0
        return tree, 0

    # Root histogram: every row counts (each root row's center is a root center). A node's
    # histogram has one column per center of the node (``members[node]``, increasing).
    ok = np.ones((1, k), dtype=np.bool_)
    slot = np.full(tree.n_nodes, -1, dtype=np.int64)
    slot[0] = 0
    hists = {0: data.histograms(criterion, tree, slot, ok)[0]}
    # The centers' codes: their coordinates binned where they live in the features' space, and
    # where they do not (category features, a clustering space Z) read off their clusters' rows.
    coordinates = mapper.transform(data.centers).astype(np.int64) if data.centers_in_feature_space else None
    codes = center_codes(hists[0], mapper, coordinates)

    while hists:
        # Split every node of this level; collect the children that need a histogram.
        # (child to compute, the centers counted, parent hist, sibling or -1, the child's columns of the parent's)
        requests: list[tuple[int, np.ndarray, np.ndarray | None, int, np.ndarray | None]] = []
        for node, hist in sorted(hists.items()):
            cut = criterion.best_split(hist, codes, members[node], mapper)
            if cut is None:  # the node's centers coincide on every feature
                tree.value[node] = int(members[node][0])
                continue
            f = cut.feature
            total_mistakes += int(cut.score)
            left, right = cut.apply(tree, node)
            goes_left = cut.goes_left(codes[members[node], f], mapper)
            members[left], members[right] = members[node][goes_left], members[node][~goes_left]
            need = [c for c in (left, right) if members[c].size > 1]
            for c in (left, right):
                if members[c].size == 1:
                    tree.value[c] = int(members[c][0])
            if not need:
                continue
            # Count the parent's alive rows on the smaller side; the other is the difference.
            n_left = int(hist[f, cut.goes_left(every_code, mapper)].sum())
            small, big = (left, right) if 2 * n_left <= int(hist[f].sum()) else (right, left)
            small_cols = goes_left if small == left else ~goes_left
            if big in need:
                # Also when only the larger side needs a histogram (IMM often carves one
                # center off a large node): its rows are not read again, level after level.
                requests.append((small, members[node], hist, big, small_cols))
            else:
                requests.append((small, members[small], None, -1, None))
        hists = {}
        if not requests:
            break
        slot = np.full(tree.n_nodes, -1, dtype=np.int64)
        ok = np.zeros((len(requests), k), dtype=np.bool_)
        for s, (child, mask_members, _, _, _) in enumerate(requests):
            slot[child] = s
            ok[s, mask_members] = True
        computed = data.histograms(criterion, tree, slot, ok)
        for s, (child, _, parent_hist, sibling, child_cols) in enumerate(requests):
            h = computed[s]
            if sibling >= 0:
                assert parent_hist is not None and child_cols is not None  # a pair request carries both
                # Both counted with the parent's centers: keep each child's own columns (rows
                # of the other side's centers are mistakes below this cut).
                hists[sibling] = np.ascontiguousarray((parent_hist - h)[:, :, ~child_cols])
                if members[child].size > 1:  # else a leaf, counted only for its sibling's sake
                    hists[child] = np.ascontiguousarray(h[:, :, child_cols])
            else:
                hists[child] = h
    return tree, total_mistakes


class IMM(CenterTreePredictor):
    """Iterative Mistake Minimization: a threshold tree with one leaf per reference center.

    Parameters
    ----------
    n_clusters : int
        Number of reference clusters (and leaves), 2 or more.
    max_bins : int, default=256
        Bins per feature for the split search (2..65536); features with at most this many
        distinct values are searched exactly (see ``exclust.algorithms.histogram.binning``).
    objective : {"kmeans", "kmedians"}, default="kmeans"
        ``"kmeans"``: points belong to their nearest center in Euclidean distance;
        ``"kmedians"``: nearest in l1 distance (reference centers from ``exclust.KMedians``
        when none are given).
    random_state : None, int or numpy Generator, default=None
        Seeds the reference k-means (when no centers are given) and the binning sample. Ties
        between cuts go to the lowest feature, then the lowest threshold.

    Fitted attributes: ``tree_`` (ThresholdTree, leaf value = center index), ``centers_``,
    ``n_passes_`` (passes over the rows, reference fit excluded), ``n_mistakes_``.

    Notes
    -----
    IMM's price collapses as the clusters grow many: on 200,000 x 20 rows around k random
    centers (scikit-learn KMeans centers, issue 27) its price on all rows is 1.04 at k = 10,
    1.70 at k = 40 and 6.93 at k = 160, where ExShallow reaches 2.38 and CART 2.68 (the
    authors' IMM gives 6.72: the rule, not this port). Counting mistakes ignores how far the
    separated points land from their new center; at tens of clusters and more prefer
    ExShallow. A node's histogram has one column per center of the node, not per cluster, and
    only the smaller child of a cut is counted (the other is the parent's minus it), so the
    rows are not read again level after level. The time still grows faster than k: IMM
    carves one or a few centers off a large node per cut (109 levels at k = 160 on the data
    above), and each level's cut search reads that node's (d, bins, m) histogram, about
    d x bins x k^2 / 2 in all (issue 27, bench/README.md "Many clusters").
    """

    _parameter_constraints = CENTER_TREE_CONSTRAINTS

    def __init__(self, n_clusters: int, max_bins: int = 256, random_state=None, objective: str = "kmeans") -> None:
        self.n_clusters = n_clusters
        self.max_bins = max_bins
        self.random_state = random_state
        self.objective = objective

    def fit(self, X, centers=None, Z=None) -> IMM:
        """Build the IMM tree for X against ``centers`` (k-means on X, or on Z, when None).

        Parameters
        ----------
        X : array-like, DataFrame, dask array or Dataset of shape (n, d)
            The features the tree cuts; NaN (missing) and category features (a Dataset's
            ``categories``) allowed when the clustering space is given.
        centers : array of shape (n_clusters, d or Z's width), default=None
            Reference centers, in Z's space when Z is given.
        Z : array-like of shape (n, p), default=None
            The clustering space (complete numeric rows, one per row of X): a row's cluster is
            its nearest center in Z; None: X itself (or the Dataset's ``cluster_X``).
        """
        self._check_params()
        X = self._fit_input(X)
        ds, centers, data = prepare_fit(
            X, self.n_clusters, centers, self.max_bins, self.random_state, self.objective, Z=Z
        )
        tree, mistakes = grow_imm(data)
        self.centers_ = centers
        self.n_mistakes_ = mistakes
        self.n_passes_ = data.n_passes
        self.tree_ = tree.to_threshold_tree(
            data.mapper, len(centers), ds.feature_names,
            meta={"algorithm": "imm", "max_bins": self.max_bins, "objective": self.objective},
            categories=dataset_categories(ds),
        )
        data.release()
        return self
