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

from exclust.dataplane import parts
from exclust.algorithms.histogram.binning import DEFAULT_SAMPLE_SIZE, MAX_CODE_BINS, edges_from_sample
from exclust.sources.dataset import as_matrix
from exclust.estimator import RANDOM_STATE, Integral, Interval, StrOptions, TreeExplainer
from exclust.algorithms.histogram.engine import CodeTree, EncodedData, best_mistake_split

OBJECTIVES = ("kmeans", "kmedians")

# The parameters IMM, ExKMC and ExShallow share, declared once for all three.
CENTER_TREE_CONSTRAINTS = {
    "n_clusters": [Interval(Integral, 2, None, closed="left")],  # k >= 2, as the CLI's --k
    "max_bins": [Interval(Integral, 2, MAX_CODE_BINS, closed="both")],
    "objective": [StrOptions(set(OBJECTIVES))],
    "random_state": RANDOM_STATE,
}


# --------------------------------------------------------------------------- shared set-up

def check_centers(centers, n_clusters: int, n_features: int) -> np.ndarray:
    """Validate given reference centers: a finite (n_clusters, n_features) array."""
    c = np.asarray(centers, dtype=np.float64)
    if c.shape != (n_clusters, n_features):
        raise ValueError(
            f"centers must have shape (n_clusters, n_features) = ({n_clusters}, {n_features}), "
            f"got {c.shape}; pass one row per cluster with one value per feature"
        )
    if not np.isfinite(c).all():
        raise ValueError("centers hold NaN or infinite values; pass finite reference centers")
    return c


def fit_reference_centers(X, n_clusters: int, random_state=None, objective: str = "kmeans") -> np.ndarray:
    """Reference centers when none are given: exclust's k-means, or k-medians for that objective."""
    from exclust.reference import KMeans, KMedians

    reference = KMedians if objective == "kmedians" else KMeans
    return np.asarray(reference(n_clusters=n_clusters, random_state=random_state).fit(X).cluster_centers_)


def binning_sample(data, random_state=None) -> tuple[np.ndarray, int]:
    """The rows the bin edges come from: an exact uniform sample of ``DEFAULT_SAMPLE_SIZE`` rows
    (by global row id, so any chunking gives the same edges).

    When the data carry a larger uniform sample already drawn by the run (``run_sample``, set by
    the pipeline), a uniform subsample of it is taken instead: the same distribution, no pass.
    Returns (sample, passes over the data spent drawing it).
    """
    X = getattr(data, "X", data)  # a Dataset or a validated matrix
    n = int(X.shape[0])
    size = min(DEFAULT_SAMPLE_SIZE, n)
    drawn = getattr(data, "run_sample", None)
    if drawn is not None and drawn.X.shape[0] >= size and drawn.n_rows == n:
        return drawn.X[parts.sample_ids(drawn.X.shape[0], size, random_state)], 0
    (sample,) = parts.uniform_sample(X, size=size, random_state=random_state)
    return sample, int(parts.is_lazy(X))


def encode_for_trees(data, centers: np.ndarray, max_bins: int, random_state=None, *, metric=None,
                     between_extra: bool = False) -> EncodedData:
    """Passes 1 and 2: bin edges (centers' coordinates included) and the encoded partitions of
    ``data`` (a Dataset, whose run sample is reused when it has one, or a validated matrix).

    ``metric`` and ``between_extra`` go to EncodedData and edges_from_sample."""
    sample, passes = binning_sample(data, random_state)
    mapper = edges_from_sample(sample, max_bins=max_bins, extra_edges=centers, between_extra=between_extra)
    del sample
    return EncodedData(getattr(data, "X", data), mapper, centers, n_passes=passes, metric=metric)


def prepare_fit(X, n_clusters, centers, max_bins, random_state, objective="kmeans", *,
                distances: bool = False, between_extra: bool = False):
    """Validate the data and centers of IMM / ExKMC / ExShallow (their parameters are checked by
    ``_check_params``) and encode the data; returns (dataset, centers, data). The k-medians
    objective keeps l1 distances to the centers; ``distances`` keeps squared Euclidean distances
    for k-means instead of dot products."""
    k = int(n_clusters)
    ds = as_matrix(X, n_clusters=k)
    if centers is None:
        centers = fit_reference_centers(ds.X, k, random_state, objective)
    centers = check_centers(centers, k, ds.n_features)
    metric = "l1" if objective == "kmedians" else ("sqeuclidean" if distances else None)
    data = encode_for_trees(ds, centers, max_bins, random_state, metric=metric, between_extra=between_extra)
    return ds, centers, data


# --------------------------------------------------------------------------- IMM on histograms
def grow_imm(data: EncodedData) -> tuple[CodeTree, int]:
    """Grow IMM's tree on the encoded data; returns (tree, total mistakes of its cuts)."""
    k = data.k
    tree = CodeTree()
    n_bins = data.mapper.n_bins
    center_codes = data.mapper.transform(data.centers).astype(np.int64)
    members = {0: np.arange(k)}
    total_mistakes = 0
    if k == 1:
        tree.value[0] = 0
        return tree, 0

    # Root histogram: every row counts (each root row's center is a root center).
    ok = np.ones((1, k), dtype=np.bool_)
    slot = np.full(tree.n_nodes, -1, dtype=np.int64)
    slot[0] = 0
    hists = {0: data.mistake_histograms(tree, slot, ok)[0]}

    while hists:
        # Split every node of this level; collect the children that need a histogram.
        requests = []  # (child to compute, center mask, parent hist, sibling or -1)
        for node, hist in sorted(hists.items()):
            cut = best_mistake_split(hist, center_codes, members[node], n_bins)
            if cut is None:  # the node's centers coincide on every feature
                tree.value[node] = int(members[node][0])
                continue
            f, b, mistakes = cut
            total_mistakes += mistakes
            left, right = tree.split(node, f, b)
            goes_left = center_codes[members[node], f] <= b
            members[left], members[right] = members[node][goes_left], members[node][~goes_left]
            need = [c for c in (left, right) if members[c].size > 1]
            for c in (left, right):
                if members[c].size == 1:
                    tree.value[c] = int(members[c][0])
            if len(need) == 1:
                requests.append((need[0], members[need[0]], None, -1))
            elif len(need) == 2:
                # Count the parent's alive rows on the smaller side; the sibling is the difference.
                n_left = int(hist[f, : b + 1].sum())
                small, big = (left, right) if 2 * n_left <= int(hist[f].sum()) else (right, left)
                requests.append((small, members[node], hist, big))
        hists = {}
        if not requests:
            break
        slot = np.full(tree.n_nodes, -1, dtype=np.int64)
        ok = np.zeros((len(requests), k), dtype=np.bool_)
        for s, (child, mask_members, _, _) in enumerate(requests):
            slot[child] = s
            ok[s, mask_members] = True
        computed = data.mistake_histograms(tree, slot, ok)
        for s, (child, _, parent_hist, sibling) in enumerate(requests):
            h = computed[s]
            if sibling >= 0:
                other = parent_hist - h
                hists[child] = _keep_clusters(h, members[child])
                hists[sibling] = _keep_clusters(other, members[sibling])
            else:
                hists[child] = h
    return tree, total_mistakes


def _keep_clusters(hist: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Zero the counts of clusters whose center is not at the node (their rows are mistakes)."""
    out = np.zeros_like(hist)
    out[:, :, keep] = hist[:, :, keep]
    return out


class CenterTreePredictor(TreeExplainer):
    """The trees grown against reference centers (IMM, ExKMC, ExShallow, KDTree): a row's
    cluster is the center of the leaf it reaches."""

    def fit_predict(self, X, centers=None):
        """Fit, then return the cluster of every row of X."""
        return self.fit(X, centers).predict(X)


class IMM(CenterTreePredictor):
    """Iterative Mistake Minimization: a threshold tree with one leaf per reference center.

    Parameters
    ----------
    n_clusters : number of reference clusters (and leaves).
    max_bins : bins per feature for the split search (2..65536); features with at most this
        many distinct values are searched exactly (see exclust.algorithms.histogram.binning).
    objective : "kmeans" (points belong to their nearest center in Euclidean distance) or
        "kmedians" (nearest in l1 distance; reference centers from exclust.KMedians when none
        are given).
    random_state : seed of the reference k-means (when no centers are given) and of the
        binning sample. Ties between cuts go to the lowest feature, then the lowest threshold.

    Fitted attributes: ``tree_`` (ThresholdTree, leaf value = center index), ``centers_``,
    ``n_passes_`` (passes over the rows, reference fit excluded), ``n_mistakes_``.
    """

    _parameter_constraints = CENTER_TREE_CONSTRAINTS

    def __init__(self, n_clusters: int, max_bins: int = 256, random_state=None, objective: str = "kmeans") -> None:
        self.n_clusters = n_clusters
        self.max_bins = max_bins
        self.random_state = random_state
        self.objective = objective

    def fit(self, X, centers=None) -> "IMM":
        """Build the IMM tree for X against ``centers`` (k-means on X when None)."""
        self._check_params()
        X = self._fit_input(X)
        ds, centers, data = prepare_fit(
            X, self.n_clusters, centers, self.max_bins, self.random_state, self.objective
        )
        tree, mistakes = grow_imm(data)
        self.centers_ = centers
        self.n_mistakes_ = mistakes
        self.n_passes_ = data.n_passes
        self.tree_ = tree.to_threshold_tree(
            data.mapper, len(centers), ds.feature_names,
            meta={"algorithm": "imm", "max_bins": self.max_bins, "objective": self.objective},
        )
        data.release()
        return self
