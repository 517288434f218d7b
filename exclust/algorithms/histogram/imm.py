"""IMM, Iterative Mistake Minimization (paper 003, Section 2; Dasgupta et al. 2020), on histograms.

IMM grows a threshold tree with exactly one reference center per leaf. At a node holding
several centers it takes the cut, among those that leave at least one of the node's centers on
each side, that separates the fewest of the node's points from their own center (mistakes).
Points separated from their center are dropped below that node: they no longer count.

At the root the rows are counted per (feature, bin, reference cluster), which gives the
centers' codes (``cut_search.center_codes``). Below it a node's counts carry no per-center axis
on numeric features (``cut_search.MistakeCounts``): a row of bin r whose center has bin c is a
mistake at cut b exactly when min(r, c) <= b < max(r, c), so per (feature, bin) the rows per
min(r, c) and per max(r, c) give every cut's mistakes by prefix sums, O(d x bins) per node
whatever its number of centers (category features keep their per-center counts for set cuts).
All counts are summed over all partitions (engine.py). All nodes of a level are split in the
same pass, and of two children that both need counts only one is counted, with the cut's
mistakes; the other is the parent's less both (integers, so this is exact).

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
from exclust.algorithms.histogram.criteria import CompactMistakes, Mistakes
from exclust.algorithms.histogram.cut_search import MistakeCounts, center_codes
from exclust.algorithms.histogram.engine import CodeTree, EncodedData


# --------------------------------------------------------------------------- IMM on histograms
def grow_imm(data: EncodedData) -> tuple[CodeTree, int]:
    """Grow IMM's tree on the encoded data; returns (tree, total mistakes of its cuts)."""
    k = data.k
    criterion = CompactMistakes()
    tree = CodeTree()
    mapper = data.mapper
    every_code = np.arange(data.n_bins)
    members = {0: np.arange(k)}
    total_mistakes = 0
    if k == 1:
        tree.value[0] = 0
        return tree, 0

    # Root histogram per center (every row counts), which gives the centers' codes: their
    # coordinates binned where they live in the features' space, and where they do not
    # (category features, a clustering space Z) read off their clusters' rows.
    ok = np.ones((1, k), dtype=np.bool_)
    slot = np.full(tree.n_nodes, -1, dtype=np.int64)
    slot[0] = 0
    root = data.histograms(Mistakes(), tree, slot, ok)[0]
    coordinates = mapper.transform(data.centers).astype(np.int64) if data.centers_in_feature_space else None
    codes = center_codes(root, mapper, coordinates)
    # Below, a node's counts (``MistakeCounts``) have one column per center of the node
    # (``members[node]``, increasing) on category features only.
    hists = {0: MistakeCounts.from_histogram(root, codes, mapper)}

    while hists:
        # Split every node of this level; collect the children that need counts:
        # (child to count, its sibling to take as the parent's rest or -1, the parent's centers, parent counts)
        requests: list[tuple[int, int, np.ndarray, MistakeCounts | None]] = []
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
            rows = hist.planes[0, f]
            n_left = int(rows[cut.goes_left(every_code, mapper)].sum())
            small, big = (left, right) if 2 * n_left <= int(rows.sum()) else (right, left)
            if big in need:
                # Also when only the larger side needs counts (IMM often carves one center off
                # a large node): its rows are not read again, level after level.
                requests.append((small, big, members[node], hist))
            else:
                requests.append((small, -1, members[small], None))
        hists = {}
        if not requests:
            break
        # Per request, histogram 2 r counts the small child's own rows; with a sibling, 2 r + 1
        # the cut's mistakes (rows of either child whose center went to the other), so the
        # sibling's counts are the parent's less both. Each child read has a slot of its own.
        n_slots = sum(1 if sibling < 0 else 2 for _, sibling, _, _ in requests)
        slot = np.full(tree.n_nodes, -1, dtype=np.int64)
        target = np.full((n_slots, k), -1, dtype=np.int64)
        column = np.full((n_slots, k), -1, dtype=np.int64)
        widths = np.zeros(2 * len(requests), dtype=np.int64)
        s = 0
        for r, (child, sibling, _, _) in enumerate(requests):
            own, other = members[child], members[sibling] if sibling >= 0 else members[child][:0]
            slot[child] = s
            target[s, own], column[s, own] = 2 * r, np.arange(own.size)
            widths[2 * r] = own.size
            if sibling >= 0:
                slot[sibling] = s + 1
                target[s, other], column[s, other] = 2 * r + 1, np.arange(other.size)
                target[s + 1, own] = 2 * r + 1
                widths[2 * r + 1] = other.size
            s += 1 if sibling < 0 else 2
        computed = data.histograms(criterion, tree, slot, target, column, widths, codes)
        for r, (child, sibling, counted, parent) in enumerate(requests):
            own = computed[2 * r]
            if members[child].size > 1:  # else a leaf, counted only for its sibling's sake
                hists[child] = own
            if sibling >= 0:
                assert parent is not None  # a pair request carries the parent's counts
                mistakes = computed[2 * r + 1]
                sibling_cols = np.isin(counted, members[sibling])
                hists[sibling] = MistakeCounts(parent.planes - own.planes - mistakes.planes,
                                               parent.categories[:, :, sibling_cols] - mistakes.categories)
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
    ExShallow. A node's cut search reads O(d x bins) counts on numeric features, not
    (d, bins, centers), and only the smaller child of a cut is counted (the other is the
    parent's less it and the cut's mistakes), so a level costs one pass over the rows and
    O(d x bins) per node whatever its centers: the time grows with the tree's depth, one pass a
    level. IMM carves one or a few centers off a large node per cut, so the depth grows with k,
    here a little faster (50,000 x 20: 25 passes at k = 40, 110 at k = 160, 601 at k = 640; one
    thread, 0.11, 0.32 and 1.85 CPU s; issue 27, bench/README.md "Many clusters").
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
        # IMM counts mistakes from codes and labels alone: no per-center values kept.
        ds, centers, data = prepare_fit(
            X, self.n_clusters, centers, self.max_bins, self.random_state, self.objective, Z=Z, values="none"
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
