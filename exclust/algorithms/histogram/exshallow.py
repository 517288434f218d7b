"""ExShallow: explainable k-means trees with a penalty on depth, on histograms.

Follows Laber, Murtinho and Oliveira, "Shallow decision trees for explainable k-means
clustering", Pattern Recognition 2023, as its authors' public ShallowTree code
(lmurtinho/ShallowTree, ``ShallowTree.py`` and ``best_cut.c``) computes it. Our implementation
is written from that description; it shares no code with it.

The tree is grown top-down from the reference centers, one leaf per center. A node holds the
rows routed to it (none are dropped, unlike IMM) and the centers inside its box. Every cut
(feature, threshold) that leaves at least one center on each side is scored by

    cost after / cost before + depth_factor * projected mean leaf depth,

where the cost sums, over the node's rows, the distance (squared Euclidean for k-means, l1 for
k-medians) to the nearest of the node's centers, before the cut, and after it to the nearest
center on the row's own side. The depth term (``exclust.algorithms.histogram._shallow_cut.depth_penalty``)
projects the summed leaf depth of each side by assuming it is cut again and again in this cut's
proportions of rows and centers, less one level for the rows of a side that an ancestor already
bounded on the same feature from the same direction (the new condition replaces the old one),
divided by the node's rows. ``depth_factor=0`` gives ExGreedy (the cost ratio alone).

Followed from ShallowTree: the score above, the depth projection with its rounding (the
proportions rounded to single precision, shares rounded up and kept in 1 .. size - 1, a
one-row part going left only when more centers do), the feasibility rule that each side keeps
at least as many rows as centers, the candidate set (every threshold between the minimum and
the maximum center coordinate, at data values and center coordinates), ties to the lowest
feature and then the lowest threshold, a leaf's value being its one center.

Departures:
- Statistics come from histograms (engine.py): per level, one pass over the rows sums, per
  node, feature, bin and center split, the distance to the nearest center on each side; prefix
  sums score every threshold. It runs on Dask with per-partition histograms added in a tree
  reduction. With exact bins (a feature with at most ``max_bins`` distinct values) every
  partition ShallowTree can form is a candidate (midpoints between the sorted values and
  center coordinates together); otherwise thresholds are quantile bin edges (binning.py).
  In a node of at least ``BULK_MIN_ROWS`` rows (per partition) and at most 7 centers, a bin
  that holds most of the node's rows on a feature (the zero of a one-hot feature) is filled by
  difference: its rows skip that feature, and its cell is the node's totals less the other
  rows' sums (``_shallow_cut.shallow_histograms``). Same cells up to rounding (about 1e-13
  relative); smaller nodes and continuous features take the row-by-row path, bit for bit as
  before. At 581,012 x 54 (10 continuous, 44 one-hot features) the level passes take about
  half the time.
- ShallowTree counts *distinct* rows in the depth term and the feasibility rule (it collapses
  duplicates first, keeping their counts for the cost); we count rows. On data without
  duplicate rows both are the same.
- A node whose rows cannot feed every center (no cut with enough rows on both sides) becomes a
  leaf with its first center in ShallowTree, losing centers; here it takes the cut of least
  cost ratio among those that part its centers, so the tree keeps one leaf per center (only
  centers equal on every feature share a leaf, as in IMM).
- A node whose rows all sit on their centers (cost before 0) has ratio 0 for every cut
  (ShallowTree divides by zero); the depth term then decides.
- ``objective="kmedians"`` (not in ShallowTree or the paper) scores the same way with l1
  distances to the centers in place of squared Euclidean ones.
- Without given centers the reference is exclust.KMeans (exclust.KMedians for k-medians), as
  for IMM; ShallowTree fits scikit-learn's KMeans with one initialisation and 40 iterations.
- On Dask the per-row distances are kept as float32 on the workers (sums in float64), as the
  engine keeps dot products; near-ties between cuts may then resolve differently than in memory.
- A level whose histograms would exceed ``HISTOGRAM_BYTES`` (many centers and bins) is
  computed in several passes.
- Missing values and category features (issue 28; not in ShallowTree): a feature's missing
  values fall in its missing bin, and every threshold cut is scored with that bin on each side,
  keeping the lower score (``cut_search.side_of_missing``: on a tie, and with no missing rows,
  the side with more rows). A category feature is cut by a set of categories
  (``_shallow_sets``); a center goes with the category holding most of its cluster's rows, and
  after a set cut both children count as bounded on that feature (a second set cut on it
  merges into one condition). The centers may live in a clustering space ``Z`` (``fit(X,
  centers, Z=...)``): the distances come from Z, the cuts from X, and a center's code on a
  numeric feature is then its cluster's median bin (``cut_search.center_codes``, one pass).

With the fixture centers and exact bins, the trees reach ShallowTree's cost ratio and weighted
average depth on iris, wine, breast cancer, R15 and D31 (tests/test_exshallow.py,
bench/paper_shallow.py).
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.histogram._shallow_sets import set_groups, set_width
from exclust.algorithms.histogram.base import (
    CENTER_TREE_CONSTRAINTS,
    CenterTreePredictor,
    dataset_categories,
    prepare_fit,
)
from exclust.algorithms.histogram.criteria import Mistakes, ShallowCost
from exclust.algorithms.histogram.cut_search import center_codes
from exclust.algorithms.histogram.engine import CodeTree, EncodedData
from exclust.algorithms.histogram.shallow_derive import (
    Derivation,
    DerivedShallowCost,
    derive_request,
    derived_histograms,
    derives,
)
from exclust.estimator import Interval, Real

HISTOGRAM_BYTES = 1 << 28  # per pass: nodes beyond it wait for the next pass of the same level
# A node with at least this many rows in a part fills each feature's bulk bin (a one-hot zero)
# by difference instead of row by row (``_shallow_cut.shallow_histograms``); below it the
# saving does not pay for the per-row subset sums.
BULK_MIN_ROWS = 4096
# ExGreedy (no depth penalty): cut scores (cost ratios near 1) within this of the lowest are ties,
# broken to the lowest feature, then bin: a tie of exactly equal costs is not left to rounding.
GREEDY_TIE = 1e-9


def center_groups(center_codes: np.ndarray, members: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per feature, the group (rank of its distinct bin code) of every member center, -1 for
    the others; and the number of groups per feature."""
    d = center_codes.shape[1]
    group = np.full((d, k), -1, dtype=np.int64)
    n_groups = np.zeros(d, dtype=np.int64)
    for f in range(d):
        distinct, rank = np.unique(center_codes[members, f], return_inverse=True)
        group[f, members] = rank
        n_groups[f] = distinct.size
    return group, n_groups


def shallow_center_codes(data: EncodedData, tree: CodeTree) -> np.ndarray:
    """(k, d) every reference center's code per feature: its coordinates binned when the centers
    live in the features' space and every feature is numeric (no pass); else IMM's reading
    (``cut_search.center_codes``) of the root's rows per cluster, one pass: a category feature's
    code is the category holding most of the cluster's rows, and without coordinates (centers
    fitted on Z) a numeric one's is the bin of its cluster's median row."""
    mapper = data.mapper
    coordinates = mapper.transform(data.centers).astype(np.int64) if data.centers_in_feature_space else None
    if coordinates is not None and not mapper.is_category.any():
        return coordinates
    slot = np.zeros(tree.n_nodes, dtype=np.int64)
    hist = data.histograms(Mistakes(), tree, slot, np.ones((1, data.k), dtype=np.bool_))[0]
    return center_codes(hist, mapper, coordinates)


def _set_layout(data: EncodedData, batch: list[int], members: dict, codes: np.ndarray, set_features: np.ndarray):
    """The category features' request for one pass (``ShallowCost``'s ``sets``), or None."""
    if not set_features.size:
        return None
    k = data.k
    group = np.full((len(batch), set_features.size, k), -1, dtype=np.int64)
    n_groups = np.zeros((len(batch), set_features.size), dtype=np.int64)
    masks = np.zeros((len(batch), set_features.size), dtype=np.bool_)
    width = 1
    for s, node in enumerate(batch):
        own = members[node]
        for c, f in enumerate(set_features.tolist()):
            group[s, c, own], n_groups[s, c], masks[s, c] = set_groups(codes[own, f], data.centers[own])
            width = max(width, set_width(int(n_groups[s, c]), bool(masks[s, c])))
    return set_features, group, n_groups, masks, width


def grow_shallow(data: EncodedData, depth_factor: float) -> tuple[CodeTree, float]:
    """Grow ExShallow's tree level by level; returns (tree, mean leaf depth over the rows).

    With ``depth_factor=0`` (ExGreedy) and no category feature, a large child beside a small one
    is derived from its parent's histograms (``shallow_derive``) instead of read again."""
    k, d = data.k, data.d
    mapper = data.mapper
    # ExGreedy's cut scores within GREEDY_TIE of the best are ties, so that histograms equal up
    # to rounding (derived, or summed in another order on Dask) choose the same cut.
    criterion = ShallowCost(depth_factor, GREEDY_TIE if depth_factor == 0.0 else 0.0)
    tree = CodeTree()
    center_codes = shallow_center_codes(data, tree)
    set_features = np.flatnonzero(mapper.is_category)
    # Threshold cuts see a category feature as one group of centers (none to part): sets cut it.
    threshold_codes = center_codes.copy()
    threshold_codes[:, set_features] = 0
    can_derive = depth_factor == 0.0 and not set_features.size
    pending: dict[int, Derivation] = {}  # large children to derive at the next level
    every_code = np.arange(data.n_bins)
    members = {0: np.arange(k)}
    bounded = {0: np.zeros((d, 2), dtype=np.bool_)}  # per feature: an ancestor sent it left / right
    depth = {0: 0}
    rows = {0: data.n_rows}
    depth_total = 0.0
    level = [0]
    while level:
        to_split = []
        for node in level:
            if members[node].size > 1:
                to_split.append(node)
            else:
                tree.value[node] = int(members[node][0])
                depth_total += rows[node] * depth[node]
        derived = {node: pending.pop(node) for node in to_split if node in pending}
        level = []
        for batch, derive in _passes(to_split, derived, members, d, data.n_bins):
            nodes = _pass_histograms(data, criterion, tree, batch, derive, members, threshold_codes, center_codes,
                                     set_features)
            order = {node: i for i, node in enumerate(to_split)}
            for node, sums, counts, base, set_cuts in sorted(nodes, key=lambda item: order[item[0]]):
                own = np.ascontiguousarray(threshold_codes[members[node]])
                cut = criterion.best_split(sums, counts, base, own, bounded[node], mapper.missing_bin, set_cuts)
                if cut is None:  # the node's centers coincide on every feature
                    tree.value[node] = int(members[node][0])
                    depth_total += rows[node] * depth[node]
                    continue
                f = cut.feature
                left, right = cut.apply(tree, node)
                goes_left = cut.goes_left(center_codes[members[node], f], mapper)
                members[left], members[right] = members[node][goes_left], members[node][~goes_left]
                n_left = int(counts[f][cut.goes_left(every_code, mapper)].sum())
                rows[left], rows[right] = n_left, rows[node] - n_left
                for child, side in ((left, 0), (right, 1)):
                    bounded[child] = bounded[node].copy()
                    bounded[child][f, side] = True
                    if cut.is_set:  # conditions on one category feature merge into one set: both bounded
                        bounded[child][f, :] = True
                    depth[child] = depth[node] + 1
                level += [left, right]
                small, large = sorted((left, right), key=lambda child: members[child].size)
                if can_derive and derives(members[small].size, members[large].size) and \
                        sum(der.nbytes for der in pending.values()) + sums.nbytes <= HISTOGRAM_BYTES:
                    pending[large] = Derivation(large, small, members[node], members[large], sums,
                                                counts, float(base))
    return tree, depth_total / max(data.n_rows, 1)


def _pass_histograms(data: EncodedData, criterion: ShallowCost, tree: CodeTree, batch: list[int], derive: list,
                     members: dict, threshold_codes: np.ndarray, center_codes: np.ndarray, set_features: np.ndarray):
    """One pass: per node of ``batch`` (computed) and of ``derive`` (derived), its (node, sums,
    counts, base, set cuts)."""
    k, d, mapper = data.k, data.d, data.mapper
    n_splits = max([members[node].size for node in batch], default=2) - 1
    slot = np.full(tree.n_nodes, -1, dtype=np.int64)
    member_group = np.full((len(batch), d, k), -1, dtype=np.int64)
    n_groups = np.zeros((len(batch), d), dtype=np.int64)
    span = np.zeros((len(batch), d, 2), dtype=np.int64)
    for s, node in enumerate(batch):
        slot[node] = s
        member_group[s], n_groups[s] = center_groups(threshold_codes, members[node], k)
        own = threshold_codes[members[node]]
        span[s, :, 0], span[s, :, 1] = own.min(axis=0), own.max(axis=0)
    sets = _set_layout(data, batch, members, center_codes, set_features)
    request = (slot, member_group, n_groups, span, n_splits, BULK_MIN_ROWS, sets)
    if derive:
        pass_criterion = DerivedShallowCost(criterion.depth_factor, criterion.tie)
        layout = derive_request(derive, threshold_codes, tree.n_nodes, k, mapper.missing_bin)
        (sums, counts, base, set_cells), changes = data.histograms(pass_criterion, tree, *request, layout)
    else:
        sums, counts, base, set_cells = data.histograms(criterion, tree, *request)
    out = []
    for s, node in enumerate(batch):
        set_cuts = [] if sets is None else [
            (set_cells[s, c], f, int(mapper.n_bins[f]), center_codes[members[node], f],
             sets[1][s, c, members[node]], int(sets[2][s, c]), bool(sets[3][s, c]))
            for c, f in enumerate(set_features.tolist())]
        out.append((node, sums[s], counts[s], base[s], set_cuts))
    for e, der in enumerate(derive):
        out.append((der.node, *derived_histograms(der, changes[0][e], changes[1][e], float(changes[2][e])), []))
    return out


def _passes(to_split: list[int], derived: dict, members: dict, d: int, n_bins: int):
    """The passes of a level, in ``to_split``'s order: (nodes computed, derivations), the nodes
    computed in groups whose histograms fit in HISTOGRAM_BYTES, each derived node in the pass of
    the nodes computed before it."""
    batch: list[int] = []
    derive: list = []
    for node in to_split:
        if node in derived:
            derive.append(derived[node])
            continue
        grown = batch + [node]
        n_splits = max(members[m].size for m in grown) - 1
        if batch and len(grown) * d * n_bins * n_splits * 2 * 8 > HISTOGRAM_BYTES:
            yield batch, derive
            grown, derive = [node], []
        batch = grown
    if batch or derive:
        yield batch, derive


class ExShallow(CenterTreePredictor):
    """Explainable k-means (or k-medians) tree with one leaf per center and a penalty on depth.

    Parameters
    ----------
    n_clusters : int
        Number of reference clusters (and leaves), 2 or more.
    depth_factor : float, default=0.03
        Weight of the projected mean leaf depth against the cost ratio (0.03 is the paper's and
        ShallowTree's default; 0 gives ExGreedy).
    objective : {"kmeans", "kmedians"}, default="kmeans"
        Squared Euclidean or l1 distances (reference centers from ``exclust.KMedians`` when
        none are given).
    max_bins : int, default=256
        Bins per feature for the split search (2..65536); features with at most this many
        distinct values are searched exactly (see ``exclust.algorithms.histogram.binning``).
    random_state : None, int or numpy Generator, default=None
        Seeds the reference k-means (when no centers are given) and the binning sample.

    Fitted attributes: ``tree_`` (ThresholdTree, leaf value = center index), ``centers_``,
    ``weighted_avg_depth_`` (mean over rows of their leaf's depth), ``n_passes_`` (passes over
    the rows, reference fit excluded: sample, encoding, then one per level).
    """

    # depth_factor: a finite number >= 0 (0 gives ExGreedy).
    _parameter_constraints = {**CENTER_TREE_CONSTRAINTS, "depth_factor": [Interval(Real, 0, None, closed="left")]}

    def __init__(self, n_clusters: int, depth_factor: float = 0.03, objective: str = "kmeans",
                 max_bins: int = 256, random_state=None) -> None:
        self.n_clusters = n_clusters
        self.depth_factor = depth_factor
        self.objective = objective
        self.max_bins = max_bins
        self.random_state = random_state

    def fit(self, X, centers=None, Z=None) -> ExShallow:
        """Build the tree for X against ``centers`` (k-means, or k-medians, on X, or on Z, when None).

        ``X``, ``centers`` and ``Z`` as ``IMM.fit``: the tree's features may hold missing values
        (each cut learns where they go) and category features (a Dataset's ``categories``: cut
        by sets, ``_shallow_sets``); the distances to the centers need complete rows, so with
        NaN in X pass Z, the clustering space (complete numeric rows aligned with X), or a
        Dataset with ``cluster_X``."""
        self._check_params()
        return fit_shallow(self, X, centers, float(self.depth_factor), "exshallow", Z)


def fit_shallow(est, X, centers, depth_factor: float, algorithm: str, Z=None):
    """Fit ExShallow's tree with ``depth_factor`` onto ``est`` (an ExShallow or ExGreedy whose
    parameters are checked): ``tree_``, ``centers_``, ``weighted_avg_depth_``, ``n_passes_``."""
    ds, centers, data = prepare_fit(
        est._fit_input(X), est.n_clusters, centers, est.max_bins, est.random_state, est.objective,
        distances=True, between_extra=True, Z=Z,
    )
    tree, weighted_depth = grow_shallow(data, depth_factor)
    est.centers_ = centers
    est.weighted_avg_depth_ = float(weighted_depth)
    est.n_passes_ = data.n_passes
    meta = {"algorithm": algorithm, "depth_factor": depth_factor, "objective": est.objective,
            "max_bins": est.max_bins}
    est.tree_ = tree.to_threshold_tree(data.mapper, len(centers), ds.feature_names, meta=meta,
                                       categories=dataset_categories(ds))
    data.release()
    return est
