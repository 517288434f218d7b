"""LabelTree: a tree of at most ``n_leaves`` leaves explaining any clustering from its labels alone.

Given only each row's cluster label (from any clustering: DBSCAN, spectral, a hand labelling),
LabelTree searches for the axis-aligned tree of at most ``n_leaves`` leaves (default: one per
cluster) with the fewest mistakes, where every cluster names at least one leaf and a row is a
mistake when its leaf names another cluster. With one leaf per cluster the leaves and clusters
are matched one-to-one, so the mistakes are the error rate after the best one-to-one match of
clusters to labels; CART, whose leaves take their majority label, can leave a cluster without a
leaf and lose all its rows.

Noise: a label of -1 (or NaN) marks noise. Noise rows are kept out of the search and out of the
leaf count: no leaf is given to noise, and noise rows are not mistakes (as in CART and in
scoring's error rate).

The search. The best tree over rows ``S`` with at most ``m`` leaves in which each cluster of
``C`` (the clusters whose one required leaf lies in ``S``) names a leaf decomposes:

    best(S, m, C) = min( leaf(S, C),
                         min over cuts (L, R), 1 <= j < m, C = C_L + C_R:
                             best(L, j, C_L) + best(R, m - j, C_R) )

where ``leaf(S, C)`` is |S| minus S's rows of the one cluster in C (of its majority when C is
empty; infinite when C has two or more clusters). Each cluster's required leaf lies on one side
of a cut, so the split of C is enumerated; a cluster with rows on one side only is sent there
(where it has no rows its leaf could only add mistakes), unless both sides lack it; outside the
exact search at most ``MAX_FREE_CLUSTERS`` clusters are tried on either side (those with most
rows on their smaller side), the others go where most of their rows are. This is
exact when every cut and every share of the leaves is tried at every depth, which the search
does on at most ``exact_rows`` rows (the test oracle compares it with a brute force over all
trees). On more rows it is a lookahead (Murthy and Salzberg, IJCAI 1995, as in ``tree_search.py``): at each node the
``n_candidates`` cuts of fewest two-leaf majority mistakes are tried ``lookahead`` levels deep,
each with at most ``MAX_BUDGET_SHARES`` ways of sharing the leaf budget between its sides;
below that a side is grown best-first by fewest majority mistakes (each step cuts the leaf and
cut that remove most mistakes), once per row set, and the covering of C is then the best
assignment of the grown leaves to C's clusters (Hungarian; the other leaves keep their
majority). Finally CART's tree of ``n_leaves`` leaves on the same rows, relabelled by the same
best covering assignment, is kept when it makes fewer mistakes, so LabelTree never makes more
mistakes than that relabelled CART tree on the searched rows.

Data: the search runs in memory on an exact uniform sample of at most ``sample_rows`` rows
(``parts.uniform_sample``: the same rows for numpy and Dask input however chunked, so both give
the same tree; one pass on Dask). Candidate thresholds are midpoints between consecutive
distinct sample values.

Issue 28: a category feature (a Dataset's ``categories``) is cut by a set of its categories, at
each node the one of fewest two-leaf majority mistakes (exact over the partitions of up to 8
categories, Fisher-ordered by their shares over the clusters beyond: ``category_cuts.py``), and
a cut on a feature holding missing values sends them to the side of fewer mistakes. With
category features the exact search tries that one set cut per feature and node, not every set.
"""
from __future__ import annotations

import heapq

import numpy as np

from exclust.algorithms.histogram.binning import category_counts
from exclust.algorithms.search.category_cuts import Cut, cut_order, goes_left, mistakes_side_cost, special_cuts
from exclust.algorithms.search.row_statistics import tree_as_nested
from exclust.dataplane.parts import uniform_sample
from exclust.errors import InputError, ParameterError
from exclust.estimator import RANDOM_STATE, Integral, Interval, TreeExplainer
from exclust.scoring.score_pass import prepare_labels
from exclust.sources.dataset import Dataset, as_tree_input
from exclust.tree import LEAF

MAX_FREE_CLUSTERS = 4  # clusters on both sides of a cut whose required leaf is tried on either side
# Outside the exact search, the leaves a cut's two sides may take beyond their required ones are
# shared in at most this many ways (spread evenly, plus the share in proportion to the rows):
# trying every share made d31 at 62 leaves run for minutes, since each share recurses.
MAX_BUDGET_SHARES = 8

# A nested tree: a leaf is ("leaf", cluster); a cut is (feature, threshold, left, right).


def count_leaves(tree) -> int:
    return 1 if tree[0] == "leaf" else count_leaves(tree[2]) + count_leaves(tree[3])


def covering_assignment(counts: np.ndarray, required) -> tuple[float, np.ndarray]:
    """(mistakes, each leaf's cluster) of leaves with per-cluster row ``counts`` (leaves x K):
    every cluster of ``required`` names a distinct leaf, the other leaves their majority; the
    fewest mistakes (Hungarian on what each required cluster costs a leaf). Infinite when
    there are fewer leaves than required clusters."""
    from scipy.optimize import linear_sum_assignment

    required = list(required)
    majority = counts.argmax(axis=1)
    chosen = majority.copy()
    if len(required) > counts.shape[0]:
        return np.inf, chosen
    mistakes = float(counts.sum() - counts.max(axis=1).sum())
    if required:
        loss = counts.max(axis=1)[:, None] - counts[:, required]
        rows, cols = linear_sum_assignment(loss)
        chosen[rows] = np.asarray(required)[cols]
        mistakes += float(loss[rows, cols].sum())
    return mistakes, chosen


class _Search:
    def __init__(self, X: np.ndarray, y: np.ndarray, n_clusters: int, n_candidates: int | None,
                 lookahead: int | None, n_categories: np.ndarray | None = None) -> None:
        self.X = np.ascontiguousarray(X)
        self.y = y
        self.k = n_clusters
        # Category features and features holding missing values: their cuts come from
        # ``category_cuts.special_cuts`` (a set cut; thresholds learning a missing side).
        self.n_categories = np.zeros(X.shape[1], dtype=np.int64) if n_categories is None else n_categories
        self.special = (self.n_categories > 0) | np.isnan(self.X).any(axis=0)
        self.one_hot = np.eye(self.k)[y] if self.special.any() else None
        self.order = np.argsort(self.X, axis=0, kind="stable").T
        self.n_candidates = n_candidates  # None: every cut
        self.lookahead = lookahead  # None: no depth limit (exact)
        self.cut_memo: dict[bytes, tuple[list, list]] = {}  # rows -> cuts (see ``cuts``)
        self.grown: dict[bytes, tuple[list, list, bool]] = {}  # rows -> (splits, node counts, no cut left)
        self.memo: dict[tuple, tuple] = {}

    def counts(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.y[mask], minlength=self.k)

    def cuts(self, mask: np.ndarray) -> tuple[list, list]:
        """The cuts of the rows in ``mask``: every cut as (two-leaf majority mistakes, feature,
        threshold), fewest first (ties by feature, then threshold); and per cluster c the cut
        of fewest mistakes when one side is given to c (the other to its majority), or None.
        The latter find a leaf for a cluster that is nowhere a majority."""
        key = mask.tobytes()
        hit = self.cut_memo.get(key)
        if hit is not None:
            return hit
        found: list[tuple] = []
        for_cluster: list[tuple[float, int, float] | None] = [None] * self.k
        for f in range(self.X.shape[1]):
            if self.special[f]:
                assert self.one_hot is not None
                how_many = int(mask.sum()) if self.n_candidates is None else self.n_candidates
                found += [(cost, f, cut) for cost, cut in special_cuts(
                    self.X[mask, f], self.one_hot[mask], int(self.n_categories[f]), mistakes_side_cost, how_many,
                    kmeans=False)]
                continue
            idx = self.order[f][mask[self.order[f]]]
            values = self.X[idx, f]
            between = np.flatnonzero(values[1:] != values[:-1])
            if between.size == 0:
                continue
            left = np.cumsum(np.eye(self.k, dtype=np.int64)[self.y[idx]], axis=0)[between]
            right = np.bincount(self.y[idx], minlength=self.k) - left
            n_left = (between + 1)[:, None]
            left_wrong, right_wrong = n_left - left, idx.size - n_left - right  # (cuts, K): side given to c
            score = left_wrong.min(axis=1) + right_wrong.min(axis=1)
            thresholds = (values[between] + values[between + 1]) / 2.0
            found += [(float(v), f, float(t)) for v, t in zip(score, thresholds, strict=True)]
            one_side = np.minimum(left_wrong + right_wrong.min(axis=1)[:, None],
                                  right_wrong + left_wrong.min(axis=1)[:, None])
            for c in range(self.k):
                i = int(one_side[:, c].argmin())
                held = for_cluster[c]
                if held is None or one_side[i, c] < held[0]:
                    for_cluster[c] = (float(one_side[i, c]), f, float(thresholds[i]))
        found.sort(key=_cut_key)
        self.cut_memo[key] = (found, for_cluster)
        return found, for_cluster

    def sides(self, mask, f, t):
        left = goes_left(self.X[:, f], t)
        return mask & left, mask & ~left

    # ------------------------------------------------------------------ search
    def best(self, mask: np.ndarray, m: int, required: tuple, depth: int | None) -> tuple[float, tuple | None]:
        key = (mask.tobytes(), m, required, depth)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        counts = self.counts(mask)
        out: tuple[float, tuple | None]
        if len(required) > 1:
            out = (np.inf, None)
        else:
            c = required[0] if required else int(counts.argmax())
            out = (float(counts.sum() - counts[c]), ("leaf", c))
        if m > 1 and out[0] > 0:
            if depth == 0:
                grown = self.grow(mask, m, required)
                if grown[0] < out[0]:
                    out = grown
            else:
                out = self._split(mask, m, required, None if depth is None else depth - 1, out)
        self.memo[key] = out
        return out

    def _split(self, mask, m, required, below, out):
        candidates, for_cluster = self.cuts(mask)
        if self.n_candidates is not None:
            # Each required cluster's own best cut finds a leaf for a cluster that is nowhere a
            # majority; with many clusters only the n_candidates cheapest of them are tried, as
            # every candidate multiplies the search below it (d31 at 62 leaves ran for minutes).
            extra = sorted({for_cluster[c] for c in required if for_cluster[c] is not None})
            candidates = sorted(set(candidates[: self.n_candidates] + extra[: self.n_candidates]), key=_cut_key)
        for _, f, t in candidates:
            left, right = self.sides(mask, f, t)
            in_left, in_right = self.counts(left) > 0, self.counts(right) > 0
            forced_left = tuple(c for c in required if in_left[c] and not in_right[c])
            forced_right = tuple(c for c in required if in_right[c] and not in_left[c])
            free = [c for c in required if in_left[c] == in_right[c]]
            if len(free) > MAX_FREE_CLUSTERS and self.n_candidates is not None:
                # Beyond a few, a cluster on both sides goes where most of its rows are (the
                # ways of sharing grow as 2 ** len(free)); the exact search shares them all.
                counts_left, counts_right = self.counts(left), self.counts(right)
                free.sort(key=lambda c: -min(counts_left[c], counts_right[c]))
                forced_left += tuple(c for c in free[MAX_FREE_CLUSTERS:] if counts_left[c] >= counts_right[c])
                forced_right += tuple(c for c in free[MAX_FREE_CLUSTERS:] if counts_left[c] < counts_right[c])
                free = free[:MAX_FREE_CLUSTERS]
            for bits in range(1 << len(free)):
                to_left = tuple(sorted(forced_left + tuple(c for i, c in enumerate(free) if bits >> i & 1)))
                to_right = tuple(sorted(forced_right + tuple(c for i, c in enumerate(free) if not bits >> i & 1)))
                for j in self._left_budgets(m, to_left, to_right, left, right):
                    cost_left, tree_left = self.best(left, j, to_left, below)
                    if cost_left >= out[0]:
                        continue
                    cost_right, tree_right = self.best(right, m - j, to_right, below)
                    if cost_left + cost_right < out[0]:
                        out = (cost_left + cost_right, (f, t, tree_left, tree_right))
        return out

    def _left_budgets(self, m: int, to_left: tuple, to_right: tuple, left: np.ndarray, right: np.ndarray) -> list[int]:
        """The left side's leaf budgets to try (the right side takes the rest of ``m``): every one in
        the exact search or when few; else MAX_BUDGET_SHARES spread over the range, plus the one in
        proportion to the sides' rows."""
        low, high = max(1, len(to_left)), m - max(1, len(to_right))
        if self.n_candidates is None or high - low + 1 <= MAX_BUDGET_SHARES:
            return list(range(low, high + 1))
        n_left, n_right = int(left.sum()), int(right.sum())
        by_rows = int(round(m * n_left / max(n_left + n_right, 1)))
        spread = np.linspace(low, high, MAX_BUDGET_SHARES - 1).round().astype(int).tolist()
        return sorted({*spread, min(max(by_rows, low), high)})

    def grow(self, mask: np.ndarray, m: int, required: tuple) -> tuple[float, tuple | None]:
        """Best-first growth by majority mistakes (once per row set), labelled by the best covering
        assignment: the prefix of the growth with fewest mistakes and, among those, fewest leaves.

        A longer prefix never makes more mistakes (a split leaf's cluster can stay on its child
        with more of that cluster's rows, the other child taking its majority), so the fewest
        mistakes are the longest prefix's, and the shortest prefix reaching them is found by
        bisection: a few assignments instead of one per prefix (which made d31 at 62 leaves slow)."""
        splits, node_counts = self._growth(mask, m)

        def labelled(n_splits: int) -> tuple[float, list, np.ndarray]:
            leaves = [0]
            for leaf, _, _, lo, hi in splits[:n_splits]:
                leaves = [node for node in leaves if node != leaf] + [lo, hi]
            leaves.sort()
            mistakes, chosen = covering_assignment(np.stack([node_counts[i] for i in leaves]), required)
            return mistakes, leaves, chosen

        longest = min(len(splits), m - 1)
        fewest = labelled(longest)
        if not np.isfinite(fewest[0]):
            return np.inf, None
        low, high = 0, longest  # labelled(high) reaches the fewest mistakes
        while low < high:
            middle = (low + high) // 2
            if labelled(middle)[0] <= fewest[0]:
                high = middle
            else:
                low = middle + 1
        mistakes, leaves, chosen = labelled(high)
        return mistakes, _nest(splits[:high], dict(zip(leaves, chosen.tolist(), strict=True)))

    def _growth(self, mask: np.ndarray, m: int) -> tuple[list, list]:
        """The best-first splits of ``mask`` (at least ``m - 1`` of them unless no cut is left) and
        the per-cluster row counts of every node they make (node ids index that list): each
        prefix of the growth is then labelled from counts alone, with no pass over its rows."""
        key = mask.tobytes()
        hit = self.grown.get(key)
        if hit is not None and (len(hit[0]) >= m - 1 or hit[2]):
            return hit[0], hit[1]
        splits: list[tuple[int, int, float, int, int]] = []
        masks = [mask]
        heap: list[tuple] = []  # (change of the mistakes, leaf, feature, threshold): most removed first
        self._push(heap, masks, 0)
        while len(splits) < m - 1 and heap:
            _, leaf, f, t = heapq.heappop(heap)
            masks += list(self.sides(masks[leaf], f, t))
            splits.append((leaf, f, t, len(masks) - 2, len(masks) - 1))
            self._push(heap, masks, len(masks) - 2)
            self._push(heap, masks, len(masks) - 1)
        node_counts = [self.counts(node) for node in masks]
        self.grown[key] = (splits, node_counts, len(splits) < m - 1)  # the last: no cut was left
        return splits, node_counts

    def _push(self, heap, masks, leaf) -> None:
        found = self.cuts(masks[leaf])[0]
        if found:
            counts = self.counts(masks[leaf])
            gain = found[0][0] - (counts.sum() - counts.max())  # <= 0: mistakes removed
            heapq.heappush(heap, (gain, leaf, found[0][1], found[0][2]))


def _cut_key(candidate: tuple) -> tuple:
    """Candidates (mistakes, feature, cut) in order: fewest mistakes, then feature, then cut."""
    return candidate[0], candidate[1], cut_order(candidate[2])


def _nest(splits: list, value: dict):
    children = {leaf: (f, t, lo, hi) for leaf, f, t, lo, hi in splits}

    def build(node):
        if node not in children:
            return ("leaf", int(value[node]))
        f, t, lo, hi = children[node]
        return (f, t, build(lo), build(hi))

    return build(0)


def relabel(tree, X: np.ndarray, y: np.ndarray, n_clusters: int) -> tuple[float, tuple]:
    """A ThresholdTree's cuts as a nested tree, its leaves labelled by the best covering
    assignment of all clusters on (X, y)."""
    leaf_of = tree.apply(X)
    leaves = np.flatnonzero(tree.kind == LEAF)
    counts = np.stack([np.bincount(y[leaf_of == leaf], minlength=n_clusters) for leaf in leaves])
    mistakes, chosen = covering_assignment(counts, range(n_clusters))
    value = dict(zip(leaves.tolist(), chosen.tolist(), strict=True))

    as_nested = tree_as_nested(tree, np.isnan(X).any(axis=0))

    def build(i, node):
        if node is None:
            return ("leaf", int(value[i]))
        return (node[0], node[1], build(tree.left[i], node[2]), build(tree.right[i], node[4]))

    return mistakes, build(0, as_nested)


def nested_as_tree(nested, n_features: int, feature_names, n_clusters: int, meta: dict, X: np.ndarray,
                   categories: dict | None = None):
    """A nested tree as a ThresholdTree: a ``Cut`` keeps its missing side (and set); a float cut
    sends missing values to its child holding more of the rows ``X`` (a default: its feature held
    none, and ``MISSING_AT_FIT`` lists those that did)."""
    from exclust.tree import TreeBuilder
    from exclust.tree.node_kinds import MISSING_AT_FIT, MISSING_LEFT, MISSING_RIGHT

    builder = TreeBuilder(n_features=n_features)

    def add(node_id, node, rows) -> None:
        if node[0] == "leaf":
            builder.make_leaf(node_id, node[1])
            return
        f, cut = node[0], node[1]
        left = goes_left(X[:, f], cut)
        if isinstance(cut, Cut) and cut.is_set:
            lo, hi = builder.split_categories(node_id, f, cut.codes, cut.missing_side)
        elif isinstance(cut, Cut):
            lo, hi = builder.split(node_id, f, cut.threshold, missing_side=cut.missing_side)
        else:
            larger = MISSING_LEFT if (rows & left).sum() > (rows & ~left).sum() else MISSING_RIGHT
            lo, hi = builder.split(node_id, f, cut, missing_side=larger)
        add(lo, node[2], rows & left)
        add(hi, node[3], rows & ~left)

    add(builder.add_node(), nested, np.ones(X.shape[0], dtype=bool))
    tree = builder.build(feature_names=feature_names, n_clusters=n_clusters, meta=meta, categories=categories)
    tree.meta[MISSING_AT_FIT] = [tree.feature_names[f] for f in np.flatnonzero(np.isnan(X).any(axis=0)).tolist()]
    return tree


class LabelTree(TreeExplainer):
    """A tree of at most ``n_leaves`` leaves with the fewest mistakes against any clustering's
    labels, every cluster naming at least one leaf (see the module).

    Parameters
    ----------
    n_clusters : int
        Number of clusters; labels are ids 0..n_clusters-1, -1 (or NaN) for noise.
    n_leaves : int or None, default=None
        Most leaves of the tree (None: ``n_clusters``); at least ``n_clusters``.
    n_candidates : int, default=6
        Cuts tried at a node of the lookahead (fewest two-leaf majority mistakes).
    lookahead : int, default=2
        Levels searched below a node before growing best-first.
    exact_rows : int, default=20
        On at most this many searched rows every cut is tried at every depth (exact).
    sample_rows : int, default=5000
        The search runs on an exact uniform sample of at most this many rows.
    random_state : None, int or numpy Generator, default=None
        Seed of the sample (and of the CART tree compared against).

    Fitted attributes: ``tree_``, ``mistakes_`` (on the searched rows, noise left out),
    ``cart_mistakes_`` (CART's tree relabelled the same way), ``exact_`` (whether the search was
    exhaustive), ``n_search_rows_``, ``n_clusters_``.
    """

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "n_leaves": [None, Interval(Integral, 1, None, closed="left")],
        "n_candidates": [Interval(Integral, 1, None, closed="left")],
        "lookahead": [Interval(Integral, 0, None, closed="left")],
        "exact_rows": [Interval(Integral, 0, None, closed="left")],
        "sample_rows": [Interval(Integral, 2, None, closed="left")],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_clusters: int, n_leaves: int | None = None, n_candidates: int = 6, lookahead: int = 2,
                 exact_rows: int = 20, sample_rows: int = 5_000, random_state=None) -> None:
        self.n_clusters = n_clusters
        self.n_leaves = n_leaves
        self.n_candidates = n_candidates
        self.lookahead = lookahead
        self.exact_rows = exact_rows
        self.sample_rows = sample_rows
        self.random_state = random_state

    def fit(self, X, labels) -> LabelTree:
        """Search the tree for X against ``labels`` (numpy or Dask, row-aligned with X)."""
        from exclust.algorithms.cart import CART, cluster_ids

        self._check_params()
        k = int(self.n_clusters)
        leaves = k if self.n_leaves is None else int(self.n_leaves)
        if leaves < k:
            raise ParameterError(f"The 'n_leaves' parameter must be at least n_clusters ({k}), got {leaves}")
        if labels is None:
            raise InputError("LabelTree needs the cluster labels: fit(X, labels)")
        ds = as_tree_input(self._fit_input(X))
        categories = {f: list(v) for f, v in ds.categories.items()}
        labels = prepare_labels(labels, ds.X, "labels")
        rows, ys = uniform_sample(ds.X, labels, size=int(self.sample_rows), random_state=self.random_state)
        rows, ys = np.asarray(rows, dtype=np.float64), cluster_ids(np.asarray(ys))
        keep = ys >= 0  # noise: no leaf, no mistake
        rows, ys = rows[keep], ys[keep]
        if ys.size and ys.max() >= k:
            raise InputError(f"labels hold cluster id {int(ys.max())} but n_clusters is {k}: ids must be 0..{k - 1}")
        if np.unique(rows, axis=0).shape[0] < k:
            raise InputError(f"the labelled rows cannot be cut into {k} leaves: fewer distinct rows than clusters")
        exact = rows.shape[0] <= int(self.exact_rows)
        search = _Search(rows, ys, k, None if exact else int(self.n_candidates), None if exact else int(self.lookahead),
                         category_counts(categories, rows.shape[1]))
        everything = np.ones(rows.shape[0], dtype=np.bool_)
        mistakes, nested = search.best(everything, leaves, tuple(range(k)), search.lookahead)
        self.cart_mistakes_ = None
        if not exact and np.unique(ys).size > 1:
            sample = Dataset(rows, list(ds.feature_names), categories=categories)
            cart = CART(max_leaf_nodes=leaves, random_state=self.random_state).fit(sample, ys).tree_
            self.cart_mistakes_, cart_nested = relabel(cart, rows, ys, k)
            if self.cart_mistakes_ < mistakes:
                mistakes, nested = self.cart_mistakes_, cart_nested
        meta = {"algorithm": "label-tree", "n_leaves": int(leaves), "exact": bool(exact),
                "n_search_rows": int(rows.shape[0]), "noise": "left out (no leaf, not counted)"}
        self.tree_ = nested_as_tree(nested, ds.n_features, ds.feature_names, k, meta, rows, categories)
        self.mistakes_ = int(mistakes)
        self.exact_ = bool(exact)
        self.n_search_rows_ = int(rows.shape[0])
        self.n_clusters_ = k
        return self
