"""ExGreedy: the explainable k-means tree of Laber and Murtinho, "On the price of explainability
for some clustering problems", ICML 2021 (Sec. 4, the greedy algorithm "ExGreedy").

The tree is grown top-down from the reference centers, one leaf per center. At every node the
cut (feature, threshold) that leaves at least one center on each side is chosen to minimise the
node's cost after the cut, where each row pays its distance (squared Euclidean for k-means, l1
for k-medians) to the nearest center on its own side. This is ExShallow's score with no penalty
on depth (Laber, Murtinho and Oliveira 2023 introduce ExShallow as ExGreedy plus that penalty),
so ExGreedy runs on ExShallow's engine (``exshallow.grow_shallow`` with ``depth_factor=0``): the
same histograms, candidate thresholds, feasibility rule and Dask passes; see
``exclust/algorithms/histogram/exshallow.py`` for the departures from the authors' code.

On scikit-learn's digits with scikit-learn KMeans centers (k = 10, n_init=10, random_state=0)
the tree's price (its clusters scored by their own means over the reference cost) is 1.2121,
the published figure being 1.212 (quoted in issue 21; tests/test_exgreedy.py).
"""
from __future__ import annotations

from exclust.algorithms.histogram.base import CENTER_TREE_CONSTRAINTS, CenterTreePredictor
from exclust.algorithms.histogram.exshallow import fit_shallow


class ExGreedy(CenterTreePredictor):
    """Explainable k-means (or k-medians) tree with one leaf per center, each cut the one of
    least cost after it (Laber and Murtinho, ICML 2021).

    Parameters
    ----------
    n_clusters : int
        Number of reference clusters (and leaves), 2 or more.
    objective : {"kmeans", "kmedians"}, default="kmeans"
        Squared Euclidean or l1 distances (reference centers from ``exclust.KMedians`` when
        none are given).
    max_bins : int, default=256
        Bins per feature for the split search (2..65536); features with at most this many
        distinct values are searched exactly (see ``exclust.algorithms.histogram.binning``).
    random_state : None, int or numpy Generator, default=None
        Seeds the reference k-means (when no centers are given) and the binning sample.

    Fitted attributes: ``tree_`` (ThresholdTree, leaf value = center index), ``centers_``,
    ``weighted_avg_depth_`` (mean over rows of their leaf's depth), ``n_passes_``.

    Notes
    -----
    Without the depth penalty the greedy cut often carves one center off a large node, so the
    tree grows deep and its price drifts up with k: on 200,000 x 20 rows around k random
    centers (scikit-learn KMeans centers, issue 27) 1.04 at k = 10, 1.62 at k = 40 and 5.41 at
    k = 160, where ExShallow reaches 2.38. At many clusters prefer ExShallow. A deep tree takes
    one pass per level; a large child beside a small one is derived from its parent's histograms
    (``shallow_derive``: only the rows whose nearest center on a side left are read again), so
    the time grows about as k log k, not k^2. The derived histograms equal direct ones up to
    rounding, so cut scores within ``exshallow.GREEDY_TIE`` (1e-9) of the best are ties, broken to
    the lowest feature, then the lowest bin.
    """

    _parameter_constraints = dict(CENTER_TREE_CONSTRAINTS)

    def __init__(self, n_clusters: int, objective: str = "kmeans", max_bins: int = 256, random_state=None) -> None:
        self.n_clusters = n_clusters
        self.objective = objective
        self.max_bins = max_bins
        self.random_state = random_state

    def fit(self, X, centers=None, Z=None) -> ExGreedy:
        """Build the tree for X against ``centers`` (k-means, or k-medians, on X, or on Z, when
        None); category features, missing values and ``Z`` as ``ExShallow.fit`` says."""
        self._check_params()
        return fit_shallow(self, X, centers, 0.0, "exgreedy", Z)
