"""The sample's lookahead prices a node over its own rows: each node's rows sorted per feature by
a stable partition of its parent's equal the whole order filtered by the node, and so do the
cut costs (issue 27, session search27b)."""
from __future__ import annotations

import numpy as np

from exclust.algorithms.search._tree_search import cut_costs
from exclust.algorithms.search.lookahead import LookaheadSearch


def test_a_nodes_rows_come_from_its_parents_in_the_whole_orders_sequence():
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(300, 3)), 1)  # ties: the stable order decides
    centers = rng.normal(size=(4, 3))
    search = LookaheadSearch(X, None, 4, 2, guide=centers)
    everything = np.ones(300, dtype=np.bool_)
    left, right = search.sides(everything, 0, 0.05)
    deeper, _ = search.sides(right, 2, -0.35)
    for mask in (everything, left, right, deeper, ~deeper & right):
        rows = search.sorted_rows(mask, mask.tobytes())
        whole = np.stack([order[mask[order]] for order in search.order])
        assert rows.shape == (3, int(mask.sum())) and np.array_equal(rows, whole)
    # The kernel on those rows prices every cut as a sweep over them: the cost of a cut is the
    # two sides' squared distances to their own means.
    node_rows = search.sorted_rows(deeper, deeper.tobytes())
    costs, _, own = cut_costs(search.X, search.raw, np.flatnonzero(deeper), node_rows, search.centers)
    part = X[deeper]
    assert abs(own - ((part - part.mean(axis=0)) ** 2).sum()) < 1e-9 * max(own, 1.0)
    first = np.sort(part[:, 1])
    p = int(np.flatnonzero(first[1:] != first[:-1])[0])  # first gap on feature 1
    below = part[part[:, 1] <= first[p]]
    above = part[part[:, 1] > first[p]]
    expected = ((below - below.mean(axis=0)) ** 2).sum() + ((above - above.mean(axis=0)) ** 2).sum()
    assert abs(costs[1, p] - expected) < 1e-9 * expected
