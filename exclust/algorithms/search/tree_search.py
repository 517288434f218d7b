"""TreeSearch: a k-leaf explanation tree found by search instead of one greedy cut per node.

Every greedy rule (IMM, ExGreedy, ExShallow, CART) commits to one cut per node and never looks
back; none is best on every data set (bench/README.md, issue 21). TreeSearch searches:

1. Lookahead over the best few cuts (the "limited discrepancy"/lookahead trees of Murthy and
   Salzberg, "Lookahead and pathology in decision tree induction", IJCAI 1995, for the k-means
   cost). At a node holding ``m`` leaves, the ``n_candidates`` cuts of least two-leaf cost are
   each tried with every share ``j`` / ``m - j`` of the leaves between the two sides; each side
   is solved the same way ``lookahead`` levels down and, below that, grown best-first (the leaf
   whose best cut lowers the cost most is cut next). Solving a side once gives its best cost
   for every leaf budget at once (a cost curve), so the shares cost no extra work; row sets
   already solved are remembered.
2. Local search (re-choose a node's cut and regrow its subtree while the cost falls): starting
   from the two cheapest on the searched rows of the lookahead tree, the greedy starts' trees
   built on all rows (``starts``: IMM and ExShallow by default at k leaves, ExKMC beyond) and
   CART's tree on the searched rows, every node's subtree is replaced by the lookahead's best
   subtree of the same number of leaves whenever that costs less, until no node improves. The
   result is therefore never worse on the rows it searched than any of those trees (the
   cheapest start is among those improved). The greedy rules are not fitted again on the
   searched rows: ExShallow and ExGreedy on a 1,000-row sample cost more than the lookahead.
3. Both steps run twice, and the cheapest tree of the two runs is kept ("plain" and "spread",
   ``SEARCHES``). Plain: the candidates are the cuts of least cost and the local search goes
   top-down. Spread: a candidate must be the cheapest cut within half a leaf's share of the
   node's rows (rows / (2 * leaves)) either side on its feature, so the few candidates fall in
   distinct gaps between clusters instead of crowding into one, and the local search goes
   bottom-up (a node once its subtrees no longer improve), so a start keeps its upper cuts.
   Neither wins everywhere (bench/README.md, issue 21): at k leaves spread takes d31 from 1.0768
   to 1.0673, plain keeps digits at 1.1625 where spread gives 1.1726.

The cost: with ``n_leaves == n_clusters`` each leaf is its own cluster and pays the squared
distances of its rows to its own mean (the k-means cost behind the price of explainability,
Dasgupta et al. ICML 2020 Sec. 2; paper 003; Laber and Murtinho 2021); leaves are then matched
one-to-one to the reference centers (least summed squared distance). With more leaves than
clusters each leaf pays its distance to the best reference center (ExKMC's surrogate cost,
paper 003 Alg. 1) and names that center, so the tree still has ``n_clusters`` clusters; the
final tree is then the one whose clusters (leaves merged by center) cost least at their own
means, among the improved trees and the starts.

Data (issue 27): the lookahead and local search above run in memory on an exact uniform sample
of at most ``sample_rows`` rows (one pass on Dask, the same rows however chunked), up to
``LOOKAHEAD_MAX_LEAVES`` leaves, and only propose trees; with the greedy rules' trees built on
all rows (``starts``) they are priced together on all rows, and the cheapest is improved by
moves priced on all rows while the budget lasts (``all_rows.py``, ``refine.py``). Beyond
``LOOKAHEAD_MAX_LEAVES`` leaves at one leaf per cluster the sample holds
``SUBTREE_SAMPLE_ROWS_PER_LEAF`` rows per leaf (at least ``sample_rows``) and the lookahead and
local search run on each subtree of at most ``LOOKAHEAD_MAX_LEAVES`` leaves of the cheapest
start, on its own rows of the sample, before the moves; each subtree keeps its proposal where
that is cheaper on all rows (``subtree_moves.py``): effort linear in the leaves.

Issue 28: the cost is measured in the clustering space ``Z``, the cuts on X; category features
are cut by sets and cuts learn where missing values go, in the lookahead and the moves on all
rows (``category_cuts.py``); a greedy start refusing such features is skipped, the reason logged.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from exclust.algorithms.histogram.base import (
    CENTER_TREE_CONSTRAINTS,
    CenterTreePredictor,
    binning_sample,
    check_centers,
    fit_reference_centers,
)
from exclust.algorithms.histogram.binning import category_counts
from exclust.algorithms.search import category_cuts
from exclust.algorithms.search.all_rows import (
    GREEDY_RULES,
    greedy_models,
    greedy_starts,
    nearest_centers,
    sample_dataset,
    search_all_rows,
)
from exclust.algorithms.search.lookahead import SEARCHES, LookaheadSearch
from exclust.algorithms.search.row_statistics import RowStatistics, tree_as_nested
from exclust.algorithms.search.subtree_moves import propose
from exclust.dataplane.parts import uniform_sample
from exclust.estimator import Integral, Interval, Real, StrOptions
from exclust.sources.dataset import as_tree_input

logger = logging.getLogger("exclust")

LOCAL_SEARCH_STARTS = 2
# The sample's lookahead runs up to this many leaves; beyond, its effort outgrows linear time in the leaves.
LOOKAHEAD_MAX_LEAVES = 12
# The sample's lookahead and local search price at most this many nodes per leaf of the tree
# (split between the two runs of SEARCHES): effort linear in the leaves, and independent of the
# data's rows (the sample's are bounded). Unbounded, k = 10 on 1,000 rows priced 20,141 nodes
# (200 s on a shared machine) for proposals that lost to ExShallow's tree on all rows; the small
# instances of tests/test_tree_search.py reach their optimum within 72 per leaf.
LOOKAHEAD_EVALUATIONS_PER_LEAF = 100
# With max_passes="auto", the search on all rows also stops after a sweep saving less than this
# share of the cost: at 50,000 x 20, k = 40 the sweeps saved 1.23%, 0.29%, 0.058%, 0.047%,
# 0.012%, and each later sweep costs a pass as dear as the first.
AUTO_MIN_SWEEP_GAIN = 1e-3
# starts="auto": IMM and ExShallow up to this many clusters, ExShallow alone beyond. At k >= 40
# IMM was never the cheapest start (200,000 x 20: 1.9043 against ExShallow's 1.5910 at k = 40,
# 2.1077 against 1.7426 at k = 160; the data 6.93 against 2.38 at k = 160) and its time
# grows faster than ExShallow's in k (294 s on 20,000 x 20 at k = 640, shared machine).
AUTO_IMM_MAX_CLUSTERS = 12
# Beyond LOOKAHEAD_MAX_LEAVES leaves at one leaf per cluster, the lookahead runs on the cheapest
# start's subtrees of at most LOOKAHEAD_MAX_LEAVES leaves, each on its own rows of a sample of
# this many rows per leaf (``subtree_moves.py``): at 1,000 rows the lookahead's trees lost on all
# rows to ExShallow's even at k = 10 (100 rows a leaf).
SUBTREE_SAMPLE_ROWS_PER_LEAF = 250
# The subtrees' lookahead prices at most (rows of the data) / SUBTREE_ROWS_PER_EVALUATION nodes per
# leaf, from SUBTREE_EVALUATIONS[0] to SUBTREE_EVALUATIONS[1]: its cost does not grow with the rows
# while the starts' (ExShallow's) does, so it gets a share of the time they take. At 200,000 x 20,
# k = 40 (bench/README.md, session search27c): 30, 100 and 300 per leaf saved 0.19%, 0.27% and
# 0.72% of the cost in 1.6, 4.3 and 12.8 s (ExShallow: 7.4 s).
SUBTREE_ROWS_PER_EVALUATION = 2_000
SUBTREE_EVALUATIONS = (30, 300)


def sample_proposals(rows: np.ndarray, centers: np.ndarray, n_leaves: int, n_candidates: int, lookahead: int,
                     starts: dict, Z: np.ndarray | None = None, categories: dict | None = None,
                     sides: np.ndarray | None = None) -> tuple[dict, int]:
    """The trees the search proposes from the sample ``rows`` (steps 1 to 3), by name, and the
    nodes its lookahead priced; beyond ``LOOKAHEAD_MAX_LEAVES`` leaves, CART's tree on the sample
    alone. ``starts``: the greedy rules' trees built on all rows (name -> ThresholdTree), which
    with CART's tree on the sample start the local search: the rules are not fitted again on the
    sample (refitting ExShallow and ExGreedy there cost more than the lookahead itself, and their
    trees on all rows are proposed anyway). ``Z``: the sample's rows in the clustering space
    (None: ``rows``); ``categories``: the category features; ``sides``: the features whose cuts
    keep a missing side (default: those holding NaN in ``rows``)."""
    data = sample_dataset(rows, categories)
    sides = np.isnan(rows).any(axis=0) if sides is None else sides
    proposals = cart_on_sample(data, rows if Z is None else Z, centers, n_leaves, sides)
    if n_leaves > LOOKAHEAD_MAX_LEAVES:
        return proposals, 0
    k = centers.shape[0]
    search = LookaheadSearch(rows, None if n_leaves == k else centers, n_candidates, lookahead, guide=centers, Z=Z,
                             n_categories=category_counts(categories, rows.shape[1]))
    everything = np.ones(rows.shape[0], dtype=np.bool_)
    seeds = {**{name: tree_as_nested(tree, sides) for name, tree in starts.items()}, **proposals}
    share = LOOKAHEAD_EVALUATIONS_PER_LEAF * n_leaves // len(SEARCHES)
    for name, spread in SEARCHES.items():
        search.spread = spread
        search.max_evaluations = search.evaluations + share
        curve, plans = search.solve(everything, search.all_members, n_leaves, lookahead)
        if not np.isfinite(curve[n_leaves]):
            from exclust.errors import InputError

            raise InputError(f"the rows cannot be cut into {n_leaves} leaves: fewer distinct rows than leaves")
        proposals[name] = search.nested(plans[n_leaves], everything)
        candidates = {name: proposals[name], **seeds}
        costs = {start: search.cost(tree, everything) for start, tree in candidates.items()}
        # Local search from the two cheapest starts (each start costs a lookahead per node).
        for i, start in enumerate(sorted(candidates, key=lambda s: costs[s])[:LOCAL_SEARCH_STARTS]):
            proposals[f"{name} search {i + 1}"] = search.improve(candidates[start], everything)
        logger.info("TreeSearch: %s on the sample priced %d nodes (at most %d)", name, search.evaluations,
                    search.max_evaluations)
    return proposals, search.evaluations


def subtree_evaluations(n_rows: int) -> int:
    """Nodes per leaf the subtrees' lookahead may price on data of ``n_rows`` rows."""
    low, high = SUBTREE_EVALUATIONS
    return int(min(max(int(n_rows) // SUBTREE_ROWS_PER_EVALUATION, low), high))


def cart_on_sample(data, space: np.ndarray, centers: np.ndarray, n_leaves: int, sides: np.ndarray) -> dict:
    """CART's tree on the sample (``data``) against each row's nearest center in ``space``, as
    {"cart": nested tree}: with ``n_leaves`` leaves at one leaf per cluster, 2 to ``n_leaves``
    beyond (CART stops at pure leaves); {} where it has no such tree."""
    labels = nearest_centers(space, centers)
    if np.unique(labels).size < 2:
        return {}
    tree = rule_classes()["cart"](max_leaf_nodes=n_leaves, random_state=0).fit(data, labels).tree_
    fits = tree.n_leaves == n_leaves or (n_leaves > centers.shape[0] and tree.n_leaves >= 2)
    return {"cart": tree_as_nested(tree, sides)} if fits else {}


def rule_classes() -> dict:
    """The greedy rules that start the search, by name (imported here, on use)."""
    from exclust.algorithms.cart import CART
    from exclust.algorithms.histogram.exgreedy import ExGreedy
    from exclust.algorithms.histogram.exkmc import ExKMC
    from exclust.algorithms.histogram.exshallow import ExShallow
    from exclust.algorithms.histogram.imm import IMM

    return {"imm": IMM, "exgreedy": ExGreedy, "exshallow": ExShallow, "exkmc": ExKMC, "cart": CART}


class TreeSearch(CenterTreePredictor):
    """A k-means explanation tree found by search, decided on all rows (see the module).

    Parameters
    ----------
    n_clusters : number of reference clusters.
    n_leaves : leaves of the tree (None: ``n_clusters``); more leaves than clusters use the
        reference centers' cost (ExKMC's surrogate), several leaves may name one cluster, and
        the tree has at most ``n_leaves`` leaves (a start with fewer may cost least).
    n_candidates : cuts tried at a node of the sample's lookahead (the best by two-leaf cost).
    lookahead : levels below a node that the sample's lookahead searches before growing best-first.
    sample_rows : the lookahead runs in memory on an exact uniform sample of at most this many rows
        (beyond 12 clusters, 250 rows per cluster when that is more: the subtrees' lookahead).
    max_bins : bins per feature of the greedy starts and of the cuts priced on all rows.
    starts : tuple of str or "auto", default "auto"
        Greedy rules built on all rows as starts ("imm", "exgreedy", "exshallow"; ExKMC beyond one
        leaf per cluster). "auto": IMM and ExShallow up to ``AUTO_IMM_MAX_CLUSTERS`` (12) clusters,
        ExShallow alone beyond (IMM is dearer there and never the cheapest start, issue 27). Not
        ExGreedy by default: 292 s at k = 160 on 200,000 rows (issue 27).
    max_passes : int, "auto" or None, default "auto"
        Budget of the search on all rows in passes over the rows (a sweep over every leaf is one,
        one per 74 leaves at 20 features and 256 bins). "auto": as many passes as the greedy
        starts' trees built on all rows have levels (at least one sweep), so the search costs about what its starts
        cost and its time grows as theirs in rows and leaves; the same tree on every machine;
        and it stops after a sweep saving less than ``AUTO_MIN_SWEEP_GAIN`` (0.1%) of the cost.
        None: no limit (until no move improves).
    max_seconds : float or None, default None
        Budget of the search on all rows in seconds; None: no limit. A sweep begun is finished.

    The sample's lookahead and local search are bounded by construction: they price at most
    ``LOOKAHEAD_EVALUATIONS_PER_LEAF`` (100) nodes per leaf (one sweep over the node's rows per
    feature each), then finish what they started by best-first growth; beyond
    ``LOOKAHEAD_MAX_LEAVES`` leaves (at one leaf per cluster) they run on each subtree of at most
    ``LOOKAHEAD_MAX_LEAVES`` leaves of the cheapest start instead, on a sample of
    ``SUBTREE_SAMPLE_ROWS_PER_LEAF`` (250) rows per leaf, at most ``subtree_evaluations`` (30 to
    300, by the data's rows) nodes per leaf, and CART proposes a whole tree from ``sample_rows``
    of those rows.
    Progress (each start's seconds, the sample's nodes, each sweep's cost and gain) goes to the
    ``exclust`` logger at INFO.
    random_state : seed of the reference k-means (when no centers are given), of the sample and
        of the bin edges.

    Fitted attributes: ``tree_``, ``centers_``, ``cost_`` (k-means cost on all rows of the tree's
    clusters at their own means), ``reference_cost_`` (the same of the reference clusters, each row
    with its nearest center), ``price_`` (their ratio, a run's headline price), ``start_costs_``
    (each start's cost on all rows), ``start_`` (the cheapest, which the search improved),
    ``sweep_costs_`` (the cost before each sweep), ``weighted_avg_depth_`` (over all rows),
    ``n_search_rows_`` (the sample's rows), ``n_sample_nodes_`` (nodes the sample's lookahead
    priced, the small subtrees' included), ``max_passes_`` (the search's budget on all rows,
    "auto" resolved), ``n_passes_`` (passes over the rows).
    """

    _parameter_constraints = {
        **{k: v for k, v in CENTER_TREE_CONSTRAINTS.items() if k != "objective"},
        "n_leaves": [None, Interval(Integral, 1, None, closed="left")],
        "n_candidates": [Interval(Integral, 1, None, closed="left")],
        "lookahead": [Interval(Integral, 0, None, closed="left")],
        "sample_rows": [Interval(Integral, 2, None, closed="left")],
        "starts": [tuple, list, StrOptions({"auto"})],
        "max_passes": [None, StrOptions({"auto"}), Interval(Integral, 0, None, closed="left")],
        "max_seconds": [None, Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, n_clusters: int, n_leaves: int | None = None, n_candidates: int = 4, lookahead: int = 2,
                 sample_rows: int = 1_000, max_bins: int = 256, starts: tuple[str, ...] | str = "auto",
                 max_passes: int | str | None = "auto", max_seconds: float | None = None, random_state=None) -> None:
        self.n_clusters = n_clusters
        self.n_leaves = n_leaves
        self.n_candidates = n_candidates
        self.lookahead = lookahead
        self.sample_rows = sample_rows
        self.max_bins = max_bins
        self.starts = starts
        self.max_passes = max_passes
        self.max_seconds = max_seconds
        self.random_state = random_state

    def fit(self, X, centers=None, Z=None) -> TreeSearch:
        """Search the tree for X (numeric features, NaN allowed when Z is given, and a Dataset's
        category features) against ``centers`` (k-means when None), the cost measured in ``Z``
        (complete rows of the clustering space, one per row of X; None: the Dataset's
        ``cluster_X``, else X itself, which must then be complete)."""
        from exclust.algorithms.histogram.base import clustering_space, dataset_categories, known_missing
        from exclust.algorithms.histogram.binning import edges_from_sample
        from exclust.errors import ParameterError
        from exclust.sources.dataset import require_complete

        self._check_params()
        k = int(self.n_clusters)
        leaves = k if self.n_leaves is None else int(self.n_leaves)
        if leaves < k:
            raise ParameterError(f"The 'n_leaves' parameter must be at least n_clusters ({k}), got {leaves}")
        ds = as_tree_input(self._fit_input(X), n_clusters=k)
        space = clustering_space(Z, ds)
        if space is None:
            require_complete(ds, "TreeSearch measuring its k-means cost on the features")
        reference = ds if space is None else space
        if centers is None:
            centers = fit_reference_centers(reference.X, k, self.random_state)
        centers = check_centers(centers, k, reference.n_features)
        Zx = None if space is None else space.X
        categories = {f: list(range(v)) if isinstance(v, (int, np.integer)) else list(v)
                      for f, v in dataset_categories(ds).items()}
        by_subtrees = leaves == k > LOOKAHEAD_MAX_LEAVES
        size = max(int(self.sample_rows), SUBTREE_SAMPLE_ROWS_PER_LEAF * leaves if by_subtrees else 0)
        drawn_rows = uniform_sample(ds.X, *([] if Zx is None else [Zx]), size=size, random_state=self.random_state)
        big_rows = np.asarray(drawn_rows[0], dtype=np.float64)
        big_z = None if Zx is None else np.asarray(drawn_rows[1], dtype=np.float64)
        # The whole tree's proposals (CART beyond 12 leaves) from ``sample_rows`` of them, taken at
        # evenly spaced ranks: a uniform sample still, the same on every input.
        kept = np.unique(np.linspace(0, big_rows.shape[0] - 1, min(int(self.sample_rows), big_rows.shape[0]))
                         .round().astype(np.int64))
        rows = big_rows[kept]
        z_rows = None if big_z is None else big_z[kept]
        passes = int(ds.distributed)
        starts = self.starts
        if starts == "auto":  # IMM beyond AUTO_IMM_MAX_CLUSTERS: dearer than ExShallow and never the cheapest
            starts = ("imm", "exshallow") if k <= AUTO_IMM_MAX_CLUSTERS else ("exshallow",)
        models = greedy_models(rule_classes(), starts, k, leaves, int(self.max_bins), self.random_state)
        greedy, greedy_passes = greedy_starts(ds, centers, models, Zx)
        t0 = time.perf_counter()
        proposals, sample_nodes = sample_proposals(
            rows, centers, leaves, self.n_candidates, self.lookahead, greedy, Z=z_rows, categories=categories,
            sides=known_missing(ds) | np.isnan(rows).any(axis=0))
        logger.info("TreeSearch: %d trees from the sample in %.1f s", len(proposals), time.perf_counter() - t0)
        sample, drawn = binning_sample(ds, self.random_state)
        mapper = edges_from_sample(sample, max_bins=int(self.max_bins), categories=categories,
                                   missing=known_missing(ds))
        sides = mapper.missing & ~mapper.is_category  # numeric features whose cuts learn a missing side
        proposals = {**{name: tree_as_nested(tree, sides) for name, tree in greedy.items()}, **proposals}
        if not proposals:
            raise ParameterError(f"no tree of {leaves} leaves to start from: give 'starts' a greedy rule")
        stats = RowStatistics(ds.X, mapper, centers.mean(axis=0), Z=Zx)
        try:
            max_passes: int | None = None if self.max_passes in (None, "auto") else int(self.max_passes)
            min_share = 0.0
            if self.max_passes == "auto":
                min_share = AUTO_MIN_SWEEP_GAIN
                # As many passes as the greedy starts' trees have levels (a level-wise builder's
                # passes, less its sampling ones, which differ between numpy, Dask and a run's
                # sample): the search costs about what its starts cost, the same tree everywhere.
                levels = sum(int(tree.node_depths().max()) for tree in greedy.values())
                max_passes = max(levels, stats.passes_per_sweep(leaves))
            n_categories = category_counts(categories, rows.shape[1])

            def subtrees(nested) -> dict:
                nonlocal sample_nodes
                found, nodes = propose(big_rows, centers, nested, LOOKAHEAD_MAX_LEAVES,
                                       subtree_evaluations(ds.X.shape[0]), int(self.n_candidates),
                                       int(self.lookahead), Z=big_z, n_categories=n_categories)
                sample_nodes += nodes
                return found

            found = search_all_rows(stats, centers, leaves, proposals, max_passes, self.max_seconds, min_share,
                                    subtrees if by_subtrees else None)
        finally:
            stats.release()
        meta = {"algorithm": "tree-search", "n_candidates": int(self.n_candidates), "lookahead": int(self.lookahead),
                "n_search_rows": int(big_rows.shape[0]), "start": found.start, "max_bins": int(self.max_bins)}
        self.tree_ = category_cuts.nested_to_threshold_tree(
            found.nested, found.named, found.leaf_rows, sides, n_features=ds.n_features,
            feature_names=ds.feature_names, n_clusters=k, categories=categories, meta=meta)
        self.centers_ = centers
        self.cost_ = found.cost
        self.reference_cost_ = found.reference_cost
        self.price_ = found.cost / found.reference_cost if found.reference_cost else float("nan")
        self.start_costs_ = found.start_costs
        self.start_ = found.start
        self.sweep_costs_ = found.sweep_costs
        self.n_search_rows_ = int(big_rows.shape[0])
        self.n_sample_nodes_ = sample_nodes
        self.max_passes_ = max_passes
        depths = self.tree_.node_depths()[self.tree_.leaves]
        self.weighted_avg_depth_ = float((found.leaf_rows * depths).sum() / max(found.leaf_rows.sum(), 1))
        self.n_passes_ = passes + greedy_passes + drawn + found.n_passes
        return self


class BestTree(TreeSearch):
    """The ``best`` algorithm (issue 27 item 4): the cheapest k-leaf tree on all rows. Which greedy
    rule is cheapest changes with the data and k, so TreeSearch starts from all of them (IMM,
    ExGreedy, ExShallow on all rows; CART and the lookahead on the sample), priced together on
    all rows, the cheapest improved; ``start_`` names it. Parameters are TreeSearch's."""

    def __init__(self, n_clusters: int, n_leaves: int | None = None, n_candidates: int = 4, lookahead: int = 2,
                 sample_rows: int = 1_000, max_bins: int = 256, starts: tuple[str, ...] = GREEDY_RULES,
                 max_passes: int | str | None = "auto", max_seconds: float | None = None, random_state=None) -> None:
        super().__init__(n_clusters, n_leaves, n_candidates, lookahead, sample_rows, max_bins, starts, max_passes,
                         max_seconds, random_state)
