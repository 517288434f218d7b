"""TreeSearch's search on in-memory rows (``tree_search.py``, steps 1 and 2 of its module): the
lookahead over the best few cuts, best-first growth below it, and the local search that replaces
a subtree by the lookahead's best of as many leaves; its effort counted in nodes priced, and
bounded by ``max_evaluations``."""
from __future__ import annotations

import heapq

import numpy as np

from exclust.algorithms.search import category_cuts
from exclust.algorithms.search._tree_search import cut_costs, greedy_cut_costs, window_minimum
from exclust.algorithms.search.optimal_tree import count_leaves, nested_from_cuts

# The search's two runs (``tree_search.py``'s module): name -> ``LookaheadSearch.spread``, spread
# candidates and bottom-up local search.
SEARCHES = {"lookahead": False, "lookahead-spread": True}


class LookaheadSearch:
    """The search on in-memory rows; subtrees are nested tuples (feature, threshold, left,
    left's leaves, right), a leaf is None. ``members``: the guiding centers inside a node's box
    (indices into ``guide``), as in ExGreedy."""

    def __init__(self, X: np.ndarray, centers: np.ndarray | None, n_candidates: int, lookahead: int,
                 guide: np.ndarray, Z: np.ndarray | None = None, n_categories: np.ndarray | None = None) -> None:
        self.raw = np.ascontiguousarray(X)  # routing and thresholds
        space = X if Z is None else Z  # the costs (issue 28: the clustering space Z, cut on X)
        shift = space.mean(axis=0)  # costs are differences of large sums: work around the mean
        self.X = np.ascontiguousarray(space - shift)
        self.centers = np.zeros((0, space.shape[1])) if centers is None else np.ascontiguousarray(centers - shift)
        # Features cut by sets of categories or holding missing values: their candidates come from
        # ``category_cuts.special_cuts`` instead of the sorted sweep.
        self.n_categories = np.zeros(X.shape[1], dtype=np.int64) if n_categories is None else n_categories
        self.special = (self.n_categories > 0) | np.isnan(X).any(axis=0)
        self.moments = category_cuts.moments_of(self.X) if self.special.any() else None
        # Below the lookahead, growth (and half the lookahead's candidates) follow ExGreedy's
        # score against the guiding centers: a leaf's best cut toward its own mean alone is
        # short-sighted where the leaf holds several clusters. Not when the centers live in Z.
        if Z is not None:
            guide = guide[:0]
        self.guide_raw = np.ascontiguousarray(guide)
        self.guide = np.ascontiguousarray(guide - shift) if Z is None else self.guide_raw
        self.all_members = np.arange(guide.shape[0])
        # All rows sorted on each feature (stable), and each node's rows so (``sorted_rows``):
        # a child's come from its parent's by a stable partition, as CART builders do, so a
        # node's pricing costs its own rows, not the sample's.
        index = np.int32 if X.shape[0] < 2**31 else np.int64
        self.order = np.ascontiguousarray(np.argsort(X, axis=0, kind="stable").T.astype(index))
        self.node_rows: dict[bytes, np.ndarray] = {}
        self.parents: dict[bytes, np.ndarray] = {}  # a node's key -> its parent's mask (``sides``)
        self.n_candidates = int(n_candidates)
        self.lookahead = int(lookahead)
        self.spread = False  # which of SEARCHES runs: candidates and local search order
        self.cuts: dict[tuple, tuple] = {}
        self.solved: dict[tuple, tuple[np.ndarray, list]] = {}
        # The effort: nodes whose cuts were priced (each one sweep over the node's rows per
        # feature), and the most the lookahead and the local search may price before they stop
        # trying candidates (growth alone then finishes what is started: a whole tree).
        self.evaluations = 0
        self.max_evaluations: int | None = None

    @property
    def exhausted(self) -> bool:
        return self.max_evaluations is not None and self.evaluations >= self.max_evaluations

    # ---------------------------------------------------------------- one node
    def node(self, mask: np.ndarray, members: np.ndarray | None = None) -> tuple:
        """(own cost, cut costs (d, rows - 1), thresholds) of the rows in ``mask``, remembered:
        the tree's cost, or with ``members`` (two or more) ExGreedy's score against them."""
        guided = members is not None and members.size > 1
        key = (mask.tobytes(), members.tobytes() if guided and members is not None else None)
        hit = self.cuts.get(key)
        if hit is None:
            self.evaluations += 1
            rows = np.flatnonzero(mask)
            order = self.sorted_rows(mask, key[0])
            if guided:
                costs, thresholds, own = greedy_cut_costs(self.X, self.raw, rows, order, self.guide, members)
            else:
                costs, thresholds, own = cut_costs(self.X, self.raw, rows, order, self.centers)
            extra: list = []
            if self.moments is not None:
                costs[self.special] = np.inf
                side_cost = category_cuts.kmeans_side_cost(None if guided else self.centers)
                for f in np.flatnonzero(self.special).tolist():
                    found = category_cuts.special_cuts(self.raw[mask, f], self.moments[mask],
                                                       int(self.n_categories[f]), side_cost, self.n_candidates,
                                                       kmeans=True)
                    extra += [(cost, f, cut) for cost, cut in found]
            hit = self.cuts[key] = (own, costs, thresholds, extra)
        return hit

    def sorted_rows(self, mask: np.ndarray, key: bytes) -> np.ndarray:
        """Per feature, the node's rows in the order of ``self.order`` ((d, rows)): its parent's
        (``sides`` names it) kept where in the node, O(d * parent's rows); the sample's order
        filtered where the parent is unknown (the root)."""
        hit = self.node_rows.get(key)
        if hit is None:
            parent = self.parents.get(key)
            source = self.order if parent is None else self.sorted_rows(parent, parent.tobytes())
            hit = self.node_rows[key] = source[mask[source]].reshape(source.shape[0], -1)
        return hit

    def best_cuts(self, mask: np.ndarray, how_many: int, members=None,
                  window: int = 0) -> list[tuple[float, int, float]]:
        """The ``how_many`` cuts of least cost: (cost, feature, threshold). With ``window``, only
        cuts of least cost among the ``window`` positions either side on their feature count: one
        per valley of the cost, where the plain least costs crowd into one gap between clusters."""
        _, costs, thresholds, extra = self.node(mask, members)
        if window > 0 and costs.shape[1] > 1:
            costs = np.where(costs == window_minimum(costs, window), costs, np.inf)
        flat = costs.ravel()
        found: list = []
        if flat.size:
            if how_many == 1:
                pick = np.array([np.argmin(flat)])  # the first of equal least costs
                pick = pick[np.isfinite(flat[pick])]
            else:
                finite = np.flatnonzero(np.isfinite(flat))
                if finite.size > how_many:
                    finite = finite[np.argpartition(flat[finite], how_many - 1)[:how_many]]
                pick = finite[np.lexsort((finite, flat[finite]))]
            p = costs.shape[1]
            found = [(float(flat[i]), int(i // p), float(thresholds.ravel()[i])) for i in pick]
        if extra:  # set cuts and cuts learning a missing side, merged by cost (stable: sweep cuts first)
            found = sorted(found + extra, key=lambda c: c[0])[:how_many]
        return found

    def sides(self, mask: np.ndarray, f: int, t) -> tuple[np.ndarray, np.ndarray]:
        left = category_cuts.goes_left(self.raw[:, f], t)
        pair = mask & left, mask & ~left
        key = mask.tobytes()
        for side in pair:  # the parent that ``sorted_rows`` partitions (a side of all rows is the node itself)
            side_key = side.tobytes()
            if side_key != key:
                self.parents.setdefault(side_key, mask)
        return pair

    def split_members(self, members: np.ndarray, f: int, t) -> tuple[np.ndarray, np.ndarray]:
        left = category_cuts.goes_left(self.guide_raw[members, f], t)
        return members[left], members[~left]

    # ---------------------------------------------------------------- best-first growth
    def grow(self, mask: np.ndarray, members: np.ndarray, budget: int) -> tuple[np.ndarray, list]:
        """Best-first growth to ``budget`` leaves (the leaf whose guided cut gains most is cut
        next): cost curve (index = leaves) and, per budget, the tree."""
        curve = np.full(budget + 1, np.inf)
        curve[1] = self.node(mask)[0]
        masks, groups = [mask], [members]
        splits: list[tuple[int, int, float, int, int]] = []
        heap: list[tuple] = []  # (change of the cost, leaf, feature, threshold): most saved first
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
        trees: list[_ApplySplits | None] = [None] * (budget + 1)
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
        if depth > 0 and budget > 2 and not self.exhausted:
            # Candidates: the best cuts by the node's own two-leaf cost and by ExGreedy's score
            # (the latter fall between clusters, which the former can miss).
            # Spread: one candidate per valley of the cost (half a leaf's share of the rows
            # either side); on d31 this alone takes the lookahead's tree from 1.0811 to 1.0714.
            window = int(mask.sum()) // (2 * budget) if self.spread else 0
            tried = {(f, t) for _, f, t in self.best_cuts(mask, self.n_candidates, window=window)}
            if members.size > 1:
                tried.update((f, t) for _, f, t in self.best_cuts(mask, self.n_candidates, members, window=window))
            for f, t in sorted(tried, key=lambda c: (c[0], category_cuts.cut_order(c[1]))):
                if self.exhausted:
                    break
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
        while changed and not self.exhausted:
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
        """The lookahead's best subtree of as many leaves, when it costs less; else None (and
        always None once the effort is spent, so a sweep under way ends at no further cost)."""
        if self.exhausted:
            return None
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
        return nested_from_cuts({leaf: (f, t, lo, hi) for leaf, f, t, lo, hi in self.splits})
