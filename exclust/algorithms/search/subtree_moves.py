"""TreeSearch beyond the sample's lookahead (issue 27): the lookahead on the small subtrees of the
cheapest start, each on its own rows of the sample, every proposal priced on all rows.

Beyond ``LOOKAHEAD_MAX_LEAVES`` leaves the lookahead on the whole tree outgrows linear time in
the leaves. Here the start is cut into its maximal subtrees of at most ``max_leaves`` leaves
(every leaf lies in exactly one); each of 3 leaves or more gets its own ``LookaheadSearch`` over
the sample rows that reach it, guided by the centers inside its box, and proposes the local
search from the start's subtree (both runs: plain, top-down, whose first step tries the
lookahead's tree of the subtree's leaves; spread, bottom-up), bounded by
``evaluations_per_leaf`` nodes per leaf: the effort is linear in the leaves.

One pass prices every proposal of every subtree on all rows: the i-th tree priced holds every
subtree's i-th proposal. The subtrees are disjoint and a tree's cost is a sum over its leaves,
so each subtree's cost in each tree is read from its own leaves (the same leaf numbers in every
tree: each proposal has the subtree's leaves); each subtree keeps its cheapest, the start's own
included, so the result never costs more than the start on all rows.
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.search import category_cuts
from exclust.algorithms.search.category_cuts import own_cost
from exclust.algorithms.search.lookahead import SEARCHES, LookaheadSearch
from exclust.algorithms.search.optimal_tree import count_leaves
from exclust.algorithms.search.row_statistics import FlatTree, RowStatistics

# A proposal must save at least this share of the tree's cost on all rows (float sums).
MIN_GAIN = 1e-9


def small_subtrees(nested, max_leaves: int, path: tuple = ()) -> list[tuple]:
    """Paths (0 left, 1 right, from the root) of the maximal subtrees of 3 to ``max_leaves``
    leaves, left to right (a subtree of 2 leaves is a cherry: ``refine`` re-cuts it on all rows)."""
    if nested is None:
        return []
    leaves = count_leaves(nested)
    if leaves <= max_leaves:
        return [path] if leaves >= 3 else []
    return (small_subtrees(nested[2], max_leaves, (*path, 0))
            + small_subtrees(nested[4], max_leaves, (*path, 1)))


def subtree_at(nested, path: tuple):
    for step in path:
        nested = nested[4] if step else nested[2]
    return nested


def replace_at(nested, path: tuple, subtree):
    """``nested`` with the subtree at ``path`` replaced (the leaves above counted again)."""
    if not path:
        return subtree
    f, t, left, _, right = nested
    if path[0]:
        right = replace_at(right, path[1:], subtree)
    else:
        left = replace_at(left, path[1:], subtree)
    return (f, t, left, count_leaves(left), right)


def leaf_offset(nested, path: tuple) -> int:
    """How many leaves lie left of the subtree at ``path`` (its first leaf's number)."""
    offset = 0
    for step in path:
        if step:
            offset += count_leaves(nested[2])
        nested = nested[4] if step else nested[2]
    return offset


def reaching(raw: np.ndarray, nested, path: tuple) -> np.ndarray:
    """Which rows of ``raw`` reach the subtree at ``path``."""
    mask = np.ones(raw.shape[0], dtype=np.bool_)
    for step in path:
        left = category_cuts.goes_left(raw[:, nested[0]], nested[1])
        mask &= ~left if step else left
        nested = nested[4] if step else nested[2]
    return mask


def propose(rows: np.ndarray, guide: np.ndarray, nested, max_leaves: int, evaluations_per_leaf: int,
            n_candidates: int, lookahead: int, Z: np.ndarray | None = None,
            n_categories: np.ndarray | None = None) -> tuple[dict[tuple, list], int]:
    """Per small subtree of ``nested`` (by path), the lookahead's proposals from the sample
    ``rows`` (``Z``: their clustering space) that differ from it; ``guide``: the reference centers.
    Also the nodes the subtrees' lookaheads priced, together."""
    found: dict[tuple, list] = {}
    nodes = 0
    for path in small_subtrees(nested, max_leaves):
        subtree = subtree_at(nested, path)
        leaves = count_leaves(subtree)
        mask = reaching(rows, nested, path)
        if mask.sum() < 2 * leaves:
            continue
        # The guiding centers inside the subtree's box (none guide where they live in Z).
        inside = reaching(guide, nested, path) if Z is None else np.zeros(guide.shape[0], dtype=np.bool_)
        search = LookaheadSearch(rows[mask], None, n_candidates, lookahead, guide=guide[inside],
                                 Z=None if Z is None else Z[mask], n_categories=n_categories)
        everything = np.ones(int(mask.sum()), dtype=np.bool_)
        share = evaluations_per_leaf * leaves // 2
        proposals: list = []
        for spread in SEARCHES.values():
            search.spread = spread
            search.max_evaluations = search.evaluations + share
            improved = search.improve(subtree, everything)
            if improved != subtree and improved not in proposals:
                proposals.append(improved)
        nodes += search.evaluations
        if proposals:
            found[path] = proposals
    return found, nodes


def choose_on_all_rows(stats: RowStatistics, nested, proposals: dict[tuple, list]) -> tuple[object, float, int]:
    """``nested`` with each subtree of ``proposals`` replaced by its cheapest on all rows (one
    pass): (tree, cost saved, subtrees replaced)."""
    if not proposals:
        return nested, 0.0, 0
    paths = list(proposals)
    trees = [nested]
    for i in range(max(len(p) for p in proposals.values())):
        tree = nested
        for path in paths:
            tree = replace_at(tree, path, proposals[path][min(i, len(proposals[path]) - 1)])
        trees.append(tree)
    moments, _ = stats.tree_moments([FlatTree.of(tree) for tree in trees])
    leaf_costs = [own_cost(m) for m in moments]
    tol = MIN_GAIN * max(float(leaf_costs[0].sum()), 1e-300)
    result, saved, replaced = nested, 0.0, 0
    for path in paths:
        low = leaf_offset(nested, path)
        high = low + count_leaves(subtree_at(nested, path))
        costs = [float(c[low:high].sum()) for c in leaf_costs]
        best = int(np.argmin(costs))  # the first of equal costs: the start's own before proposals
        if costs[0] - costs[best] > tol:
            result = replace_at(result, path, subtree_at(trees[best], path))
            saved += costs[0] - costs[best]
            replaced += 1
    return result, saved, replaced
