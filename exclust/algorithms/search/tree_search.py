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
   from the two cheapest of the lookahead tree and the greedy rules' trees on the same rows
   (ExGreedy, ExShallow, IMM and CART at k leaves; ExKMC and CART beyond), every node's subtree is
   replaced by the lookahead's best subtree of the same number of leaves whenever that costs
   less, until no node improves. The result is therefore never worse than any of those greedy
   trees on the rows it searched (the cheapest start is among those improved).
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

Data: the search runs in memory on an exact uniform sample of at most ``sample_rows`` rows
(``parts.uniform_sample``: one pass on Dask, the same rows for numpy and Dask input however
chunked; every row when there are fewer). Candidate thresholds are midpoints between
consecutive distinct sample values. The cut costs of one node are one numba sweep per feature
(``_tree_search.cut_costs``). Departure from the issue's wish: the search is not scored on the
histogram engine's per-level passes, whose one tree per pass could not evaluate the many
candidate subtrees of a lookahead; the sample is what reaches the driver instead.
"""
from __future__ import annotations

import heapq

import numpy as np

from exclust.algorithms.search._tree_search import cut_costs, greedy_cut_costs
from exclust.algorithms.histogram.base import CENTER_TREE_CONSTRAINTS, CenterTreePredictor, check_centers, fit_reference_centers
from exclust.algorithms.search.optimal_tree import leaf_cost, nested_to_tree
from exclust.sources.dataset import as_matrix
from exclust.estimator import Integral, Interval
from exclust.dataplane.parts import is_lazy, uniform_sample
from exclust.tree import LEAF

LOCAL_SEARCH_STARTS = 2
# The two runs of the search (see the module): name -> spread candidates and bottom-up local
# search; the lookahead tree of each is a start named after it.
SEARCHES = {"lookahead": False, "lookahead-spread": True}


class _Search:
    """The search on in-memory rows; subtrees are nested tuples (feature, threshold, left,
    left's leaves, right), a leaf is None. ``members``: the guiding centers inside a node's box
    (indices into ``guide``), as in ExGreedy."""

    def __init__(self, X: np.ndarray, centers: np.ndarray | None, n_candidates: int, lookahead: int,
                 guide: np.ndarray) -> None:
        self.raw = np.ascontiguousarray(X)  # routing and thresholds
        shift = X.mean(axis=0)  # costs are differences of large sums: work around the mean
        self.X = np.ascontiguousarray(X - shift)
        self.centers = np.zeros((0, X.shape[1])) if centers is None else np.ascontiguousarray(centers - shift)
        # Below the lookahead, growth (and half the lookahead's candidates) follow ExGreedy's
        # score against the guiding centers: a leaf's best cut toward its own mean alone is
        # short-sighted where the leaf holds several clusters.
        self.guide_raw = np.ascontiguousarray(guide)
        self.guide = np.ascontiguousarray(guide - shift)
        self.all_members = np.arange(guide.shape[0])
        self.order = np.ascontiguousarray(np.argsort(self.X, axis=0, kind="stable").T)
        self.n_candidates = int(n_candidates)
        self.lookahead = int(lookahead)
        self.spread = False  # which of SEARCHES runs: candidates and local search order
        self.cuts: dict[tuple, tuple] = {}
        self.solved: dict[tuple, tuple[np.ndarray, list]] = {}

    # ---------------------------------------------------------------- one node
    def node(self, mask: np.ndarray, members: np.ndarray | None = None) -> tuple:
        """(own cost, cut costs (d, rows - 1), thresholds) of the rows in ``mask``, remembered:
        the tree's cost, or with ``members`` (two or more) ExGreedy's score against them."""
        guided = members is not None and members.size > 1
        key = (mask.tobytes(), members.tobytes() if guided else None)
        hit = self.cuts.get(key)
        if hit is None:
            if guided:
                costs, thresholds, own = greedy_cut_costs(self.X, self.raw, self.order, mask, self.guide, members)
            else:
                costs, thresholds, own = cut_costs(self.X, self.raw, self.order, mask, self.centers)
            hit = self.cuts[key] = (own, costs, thresholds)
        return hit

    def best_cuts(self, mask: np.ndarray, how_many: int, members=None, window: int = 0) -> list[tuple[float, int, float]]:
        """The ``how_many`` cuts of least cost: (cost, feature, threshold). With ``window``, only
        cuts of least cost among the ``window`` positions either side on their feature count: one
        per valley of the cost, where the plain least costs crowd into one gap between clusters."""
        _, costs, thresholds = self.node(mask, members)
        if window > 0 and costs.shape[1] > 1:
            costs = np.where(costs == window_minimum(costs, window), costs, np.inf)
        flat = costs.ravel()
        if flat.size == 0:
            return []
        if how_many == 1:
            pick = np.array([np.argmin(flat)])  # the first of equal least costs
            if not np.isfinite(flat[pick[0]]):
                return []
        else:
            finite = np.flatnonzero(np.isfinite(flat))
            if finite.size > how_many:
                finite = finite[np.argpartition(flat[finite], how_many - 1)[:how_many]]
            pick = finite[np.lexsort((finite, flat[finite]))]
        p = costs.shape[1]
        return [(float(flat[i]), int(i // p), float(thresholds.ravel()[i])) for i in pick]

    def sides(self, mask: np.ndarray, f: int, t: float) -> tuple[np.ndarray, np.ndarray]:
        goes_left = self.raw[:, f] <= t
        return mask & goes_left, mask & ~goes_left

    def split_members(self, members: np.ndarray, f: int, t: float) -> tuple[np.ndarray, np.ndarray]:
        left = self.guide_raw[members, f] <= t
        return members[left], members[~left]

    # ---------------------------------------------------------------- best-first growth
    def grow(self, mask: np.ndarray, members: np.ndarray, budget: int) -> tuple[np.ndarray, list]:
        """Best-first growth to ``budget`` leaves (the leaf whose guided cut gains most is cut
        next): cost curve (index = leaves) and, per budget, the tree."""
        curve = np.full(budget + 1, np.inf)
        curve[1] = self.node(mask)[0]
        masks, groups, splits, heap = [mask], [members], [], []
        self._push(heap, masks, groups, 0)
        while len(splits) + 1 < budget and heap:
            _, leaf, f, t = heapq.heappop(heap)
            left, right = self.sides(masks[leaf], f, t)
            masks += [left, right]
            groups += list(self.split_members(groups[leaf], f, t))
            splits.append((leaf, f, t, len(masks) - 2, len(masks) - 1))
            change = self.node(left)[0] + self.node(right)[0] - self.node(masks[leaf])[0]
            curve[len(splits) + 1] = curve[len(splits)] + change
            self._push(heap, masks, groups, len(masks) - 2)
            self._push(heap, masks, groups, len(masks) - 1)
        trees = [None] * (budget + 1)
        for leaves in range(1, len(splits) + 2):
            trees[leaves] = _ApplySplits(splits[: leaves - 1])
        return curve, trees

    def _push(self, heap, masks, groups, leaf) -> None:
        if masks[leaf].sum() < 2:
            return
        members = groups[leaf] if groups[leaf].size > 1 else None
        found = self.best_cuts(masks[leaf], 1, members)
        if not found and members is not None:  # no cut between its centers has rows on both sides
            members = None
            found = self.best_cuts(masks[leaf], 1)
        if found:
            # The cut is chosen by the guided score; the leaves compete by what it saves of
            # the tree's own cost.
            _, f, t = found[0]
            left, right = self.sides(masks[leaf], f, t)
            change = self.node(left)[0] + self.node(right)[0] - self.node(masks[leaf])[0]
            heapq.heappush(heap, (change, leaf, f, t))

    # ---------------------------------------------------------------- lookahead
    def solve(self, mask: np.ndarray, members: np.ndarray, budget: int, depth: int) -> tuple[np.ndarray, list]:
        """Best cost found for every leaf budget up to ``budget`` and the matching trees."""
        key = (mask.tobytes(), members.tobytes(), depth, self.spread)
        hit = self.solved.get(key)
        if hit is not None and hit[0].size > budget:
            return hit
        curve, trees = self.grow(mask, members, budget)
        if depth > 0 and budget > 2:
            # Candidates: the best cuts by the node's own two-leaf cost and by ExGreedy's score
            # (the latter fall between clusters, which the former can miss).
            # Spread: one candidate per valley of the cost (half a leaf's share of the rows
            # either side); on d31 this alone takes the lookahead's tree from 1.0811 to 1.0714.
            window = int(mask.sum()) // (2 * budget) if self.spread else 0
            tried = {(f, t) for _, f, t in self.best_cuts(mask, self.n_candidates, window=window)}
            if members.size > 1:
                tried.update((f, t) for _, f, t in self.best_cuts(mask, self.n_candidates, members, window=window))
            for f, t in sorted(tried):
                left, right = self.sides(mask, f, t)
                left_members, right_members = self.split_members(members, f, t)
                lc, lt = self.solve(left, left_members, budget - 1, depth - 1)
                rc, rt = self.solve(right, right_members, budget - 1, depth - 1)
                for m in range(2, budget + 1):
                    for j in range(1, m):
                        cost = lc[j] + rc[m - j]
                        if cost < curve[m] * (1 - 1e-12):  # costs are >= 0; inf: no tree yet
                            curve[m] = cost
                            trees[m] = (f, t, lt[j], j, rt[m - j])
        self.solved[key] = (curve, trees)
        return curve, trees

    def nested(self, plan, mask: np.ndarray):
        """A plan (nested tuples whose subtrees may be _ApplySplits) as plain nested tuples."""
        if plan is None:
            return None
        if isinstance(plan, _ApplySplits):
            return plan.nested()
        f, t, left, j, right = plan
        lm, rm = self.sides(mask, f, t)
        return (f, t, self.nested(left, lm), j, self.nested(right, rm))

    # ---------------------------------------------------------------- local search
    def cost(self, tree, mask: np.ndarray) -> float:
        if tree is None:
            return self.node(mask)[0]
        lm, rm = self.sides(mask, tree[0], tree[1])
        return self.cost(tree[2], lm) + self.cost(tree[4], rm)

    def improve(self, tree, mask: np.ndarray):
        """Each subtree replaced by the lookahead's best of as many leaves when that costs less
        (top-down, or bottom-up when spread); repeated until no node improves."""
        changed = True
        while changed:
            tree, changed = self._improve_once(tree, mask, self.all_members)
        return tree

    def _improve_once(self, tree, mask, members):
        """One sweep of replacements. Top-down, the root's lookahead tree tends to replace every
        start at once, so all starts end in one tree (d31: 1.0706 with spread candidates);
        bottom-up (spread), a node is replaced only once neither subtree improves and a start
        keeps its upper cuts while its subtrees improve (d31: 1.0673)."""
        if tree is None:
            return None, False
        if not self.spread:
            replaced = self._replace_node(tree, mask, members)
            if replaced is not None:
                return replaced, True
        f, t, left, _, right = tree
        lm, rm = self.sides(mask, f, t)
        left_members, right_members = self.split_members(members, f, t)
        new_left, changed_left = self._improve_once(left, lm, left_members)
        new_right, changed_right = self._improve_once(right, rm, right_members)
        if changed_left or changed_right:
            return (f, t, new_left, count_leaves(new_left), new_right), True
        if self.spread:
            replaced = self._replace_node(tree, mask, members)
            if replaced is not None:
                return replaced, True
        return tree, False

    def _replace_node(self, tree, mask, members):
        """The lookahead's best subtree of as many leaves, when it costs less; else None."""
        leaves = count_leaves(tree)
        curve, trees = self.solve(mask, members, leaves, self.lookahead)
        if curve[leaves] < self.cost(tree, mask) - 1e-9 * max(curve[leaves], 1e-300):
            return self.nested(trees[leaves], mask)
        return None


class _ApplySplits:
    """A best-first growth's first splits, turned into nested tuples on demand."""

    def __init__(self, splits: list) -> None:
        self.splits = splits

    def nested(self):
        children = {leaf: (f, t, lo, hi) for leaf, f, t, lo, hi in self.splits}

        def build(node):
            if node not in children:
                return None
            f, t, lo, hi = children[node]
            left = build(lo)
            return (f, t, left, count_leaves(left), build(hi))

        return build(0)


def window_minimum(values: np.ndarray, half: int) -> np.ndarray:
    """Per row, the least of ``values[:, i - half : i + half + 1]`` at every i (edges repeated):
    spans doubled, O(size * log half)."""
    size, n = 2 * half + 1, values.shape[1]
    least = np.pad(values, ((0, 0), (half, half)), mode="edge")  # least[:, i]: min over [i, i + span)
    span = 1
    while 2 * span <= size:
        least[:, :-span] = np.minimum(least[:, :-span], least[:, span:])
        span *= 2
    rest = size - span
    return np.minimum(least[:, :n], least[:, rest:rest + n])


def count_leaves(tree) -> int:
    return 1 if tree is None else count_leaves(tree[2]) + count_leaves(tree[4])


def tree_as_nested(tree):
    """A ThresholdTree of one-sided cuts as nested tuples."""
    def build(i):
        if tree.kind[i] == LEAF:
            return None
        left = build(tree.left[i])
        return (int(tree.feature[i]), float(tree.threshold[i]), left, count_leaves(left), build(tree.right[i]))

    return build(0)


def greedy_seeds(X: np.ndarray, centers: np.ndarray, n_leaves: int, max_bins: int) -> dict:
    """The greedy rules' trees on the searched rows, as nested tuples: the local search's starts."""
    from exclust.algorithms.cart import CART
    from exclust.algorithms.histogram.exgreedy import ExGreedy
    from exclust.algorithms.histogram.exkmc import ExKMC
    from exclust.algorithms.histogram.exshallow import ExShallow
    from exclust.algorithms.histogram.imm import IMM

    k = centers.shape[0]
    labels = ((X[:, None, :] - centers[None]) ** 2).sum(axis=2).argmin(axis=1)
    if n_leaves == k:
        models = {"exgreedy": ExGreedy(k, max_bins=max_bins), "exshallow": ExShallow(k, max_bins=max_bins),
                  "imm": IMM(k, max_bins=max_bins)}
    else:
        models = {"exkmc": ExKMC(k, max_leaves=n_leaves, max_bins=max_bins)}
    trees = {name: m.fit(X, centers).tree_ for name, m in models.items()}
    if np.unique(labels).size > 1:
        trees["cart"] = CART(max_leaf_nodes=n_leaves, random_state=0).fit(X, labels).tree_
    # Beyond one leaf per cluster a start may have fewer leaves (CART stops at pure leaves).
    fits = (lambda t: t.n_leaves == n_leaves) if n_leaves == k else (lambda t: 2 <= t.n_leaves <= n_leaves)
    return {name: tree_as_nested(t) for name, t in trees.items() if fits(t)}


class TreeSearch(CenterTreePredictor):
    """A k-means explanation tree found by lookahead and local search (see the module).

    Parameters
    ----------
    n_clusters : number of reference clusters.
    n_leaves : leaves of the tree (None: ``n_clusters``); more leaves than clusters use the
        reference centers' cost (ExKMC's surrogate), several leaves may name one cluster, and
        the tree has at most ``n_leaves`` leaves (a start with fewer may cost least).
    n_candidates : cuts tried at a node of the lookahead (the best by two-leaf cost).
    lookahead : levels below a node that are searched before growing best-first.
    sample_rows : the search runs on an exact uniform sample of at most this many rows.
    max_bins : bins of the greedy seeds' split search (their exact bins by default).
    random_state : seed of the reference k-means (when no centers are given) and of the sample.

    Fitted attributes: ``tree_``, ``centers_``, ``cost_`` (the k-means cost on the searched rows
    of the tree's clusters, leaves merged by the center they name, at their own means),
    ``seed_costs_`` (each greedy seed's cost there, by name), ``weighted_avg_depth_`` (mean over
    the searched rows of their leaf's depth), ``n_search_rows_``, ``n_passes_`` (1 on Dask: the
    sample; 0 in memory).
    """

    _parameter_constraints = {
        **{k: v for k, v in CENTER_TREE_CONSTRAINTS.items() if k != "objective"},
        "n_leaves": [None, Interval(Integral, 1, None, closed="left")],
        "n_candidates": [Interval(Integral, 1, None, closed="left")],
        "lookahead": [Interval(Integral, 0, None, closed="left")],
        "sample_rows": [Interval(Integral, 2, None, closed="left")],
    }

    def __init__(self, n_clusters: int, n_leaves: int | None = None, n_candidates: int = 4, lookahead: int = 2,
                 sample_rows: int = 5_000, max_bins: int = 65536, random_state=None) -> None:
        self.n_clusters = n_clusters
        self.n_leaves = n_leaves
        self.n_candidates = n_candidates
        self.lookahead = lookahead
        self.sample_rows = sample_rows
        self.max_bins = max_bins
        self.random_state = random_state

    def fit(self, X, centers=None) -> "TreeSearch":
        """Search the tree for X against ``centers`` (k-means on X when None)."""
        from exclust.errors import ParameterError

        self._check_params()
        k = int(self.n_clusters)
        leaves = k if self.n_leaves is None else int(self.n_leaves)
        if leaves < k:
            raise ParameterError(f"The 'n_leaves' parameter must be at least n_clusters ({k}), got {leaves}")
        ds = as_matrix(self._fit_input(X), n_clusters=k)
        if centers is None:
            centers = fit_reference_centers(ds.X, k, self.random_state)
        centers = check_centers(centers, k, ds.n_features)
        (rows,) = uniform_sample(ds.X, size=int(self.sample_rows), random_state=self.random_state)
        rows = np.asarray(rows, dtype=np.float64)
        search = _Search(rows, None if leaves == k else centers, self.n_candidates, self.lookahead, guide=centers)
        everything = np.ones(rows.shape[0], dtype=np.bool_)
        greedy = greedy_seeds(rows, centers, leaves, int(self.max_bins))
        lookaheads, finalists = {}, []
        for name, spread in SEARCHES.items():
            search.spread = spread
            curve, plans = search.solve(everything, search.all_members, leaves, self.lookahead)
            if not np.isfinite(curve[leaves]):
                from exclust.errors import InputError

                raise InputError(f"the rows cannot be cut into {leaves} leaves: fewer distinct rows than leaves")
            lookaheads[name] = search.nested(plans[leaves], everything)
            starts = {name: lookaheads[name], **greedy}
            costs = {start: search.cost(tree, everything) for start, tree in starts.items()}
            # Local search from the two cheapest starts (each start costs a lookahead per node).
            cheapest = sorted(starts, key=costs.get)[:LOCAL_SEARCH_STARTS]
            finalists += [search.improve(starts[start], everything) for start in cheapest]
        starts = {**lookaheads, **greedy}
        self.seed_costs_ = {name: float(search.cost(t, everything)) for name, t in starts.items()}
        if leaves > k:  # several leaves per cluster: the starts may score better once merged
            finalists += list(starts.values())
        meta = {"algorithm": "tree-search", "n_candidates": int(self.n_candidates), "lookahead": int(self.lookahead),
                "n_search_rows": int(rows.shape[0])}
        best, best_cost = None, np.inf
        for nested in finalists:
            tree = name_leaves(nested_to_tree(nested, ds.n_features, ds.feature_names, count_leaves(nested), meta=meta),
                               rows, centers, one_to_one=leaves == k)
            # The price's cost: the tree's clusters (leaves merged by the center they name) at
            # their own means; with one leaf per cluster, the searched cost itself.
            named = tree.predict(rows)
            cost = sum(leaf_cost(rows[named == c]) for c in np.unique(named))
            if cost < best_cost:
                best, best_cost = tree, cost
        self.tree_ = best
        self.centers_ = centers
        self.cost_ = float(best_cost)
        self.n_search_rows_ = int(rows.shape[0])
        self.weighted_avg_depth_ = float(self.tree_.node_depths()[self.tree_.apply(rows)].mean())
        self.n_passes_ = int(rows.shape[0] < ds.n_rows or is_lazy(ds.X))
        return self


def name_leaves(tree, rows: np.ndarray, centers: np.ndarray, one_to_one: bool):
    """The tree with each leaf naming a reference center: one-to-one by least summed squared
    distance of the leaves' rows (Hungarian matching) when it has one leaf per center, else
    each leaf its own best center."""
    from scipy.optimize import linear_sum_assignment

    from exclust.tree import ThresholdTree

    leaf_of = tree.apply(rows)
    leaves = np.flatnonzero(tree.kind == LEAF)
    dist = ((rows[:, None, :] - centers[None]) ** 2).sum(axis=2)
    cost = np.stack([dist[leaf_of == leaf].sum(axis=0) for leaf in leaves])
    if one_to_one:
        chosen = np.empty(leaves.size, dtype=np.int64)
        r, c = linear_sum_assignment(cost)
        chosen[r] = c
    else:
        chosen = cost.argmin(axis=1)
    value = np.asarray(tree.value).copy()
    value[leaves] = chosen
    return ThresholdTree(tree.kind, tree.feature, tree.threshold, tree.left, tree.right, value,
                         n_features=tree.n_features, feature_names=tree.feature_names, n_clusters=centers.shape[0],
                         meta=tree.meta)
