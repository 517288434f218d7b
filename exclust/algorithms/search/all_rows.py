"""TreeSearch's decisions on all rows: proposals priced together, the cheapest improved.

1. Starts: the greedy rules' trees built on all rows (IMM, ExGreedy, ExShallow at one leaf per
   cluster; ExKMC beyond), each on the histogram engine's passes, plus the trees proposed from
   the in-memory sample (``tree_search.py``: lookahead and local search, CART).
2. One pass prices every start on all rows (``RowStatistics.tree_moments``: per tree and leaf,
   count, summed coordinates, summed squared norm); the cheapest is the search's start, so the
   result never costs more than any greedy tree on all rows.
3. With one leaf per cluster, the local search on all rows (``refine.improve``) improves that
   start while its budget lasts; every move is priced exactly on all rows.
4. A last pass prices the result, names its leaves and gives the reference's cost, so the
   reported cost and price are on all rows.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from exclust.algorithms.search.refine import improve
from exclust.algorithms.search.row_statistics import (
    FlatTree,
    RowStatistics,
    clusters_cost,
    name_leaves,
    own_cost,
    tree_as_nested,
)

logger = logging.getLogger("exclust")


@dataclass
class AllRowsResult:
    """The chosen tree (nested), what each start and the result cost on all rows, and the rest
    of the fitted facts."""

    nested: object
    named: np.ndarray  # reference center of each leaf, left to right
    cost: float
    reference_cost: float
    start_costs: dict
    start: str
    sweep_costs: list
    leaf_rows: np.ndarray
    n_passes: int


# The greedy rules that may start the search on all rows, by the name ``starts`` uses.
GREEDY_RULES = ("imm", "exgreedy", "exshallow")


def greedy_starts(data, centers: np.ndarray, models: dict) -> tuple[dict, int]:
    """The trees of the greedy ``models`` (name -> unfitted estimator) built on all rows of
    ``data`` (a Dataset), as nested tuples, and the passes they took. A tree of other than
    ``n_leaves`` leaves (more than ``n_clusters`` given to ExKMC: 2 to ``n_leaves``) is left out."""
    starts, passes = {}, 0
    for name, model in models.items():
        t0 = time.perf_counter()
        model.fit(data, centers)
        passes += int(getattr(model, "n_passes_", 0))
        logger.info("TreeSearch: %s on all rows in %.1f s", name, time.perf_counter() - t0)
        tree = model.tree_
        leaves = int(getattr(model, "max_leaves", None) or centers.shape[0])
        if 2 <= tree.n_leaves <= leaves and (leaves > centers.shape[0] or tree.n_leaves == leaves):
            starts[name] = tree_as_nested(tree)
    return starts, passes


def _price(moments: np.ndarray, centers: np.ndarray, one_to_one: bool) -> tuple[float, np.ndarray]:
    """(cost of the tree's clusters on all rows, the center each leaf names)."""
    named = name_leaves(moments, centers, one_to_one)
    if one_to_one:  # one leaf per cluster: the clusters are the leaves
        return float(own_cost(moments).sum()), named
    return clusters_cost(moments, named, centers.shape[0]), named


def search_all_rows(stats: RowStatistics, centers: np.ndarray, n_leaves: int, proposals: dict,
                    max_passes: int | None, max_seconds: float | None) -> AllRowsResult:
    """Steps 2 to 4 of the module on the rows ``stats`` keeps; ``proposals``: name -> nested tree."""
    k = int(centers.shape[0])
    one_to_one = n_leaves == k
    moved = np.ascontiguousarray(centers - stats.shift)
    names = list(proposals)
    moments, _ = stats.tree_moments([FlatTree.of(proposals[n]) for n in names])
    start_costs = {n: _price(m, moved, one_to_one)[0] for n, m in zip(names, moments, strict=True)}
    start = min(names, key=lambda n: (start_costs[n], names.index(n)))
    logger.info("TreeSearch: %d starts priced on all rows, the cheapest %s (%.6g)", len(names), start,
                start_costs[start])
    nested, sweeps = proposals[start], list[float]()
    if one_to_one:
        nested, sweeps = improve(stats, nested, max_passes, max_seconds)
    (final,), reference = stats.tree_moments([FlatTree.of(nested)], moved)
    cost, named = _price(final, moved, one_to_one)
    if cost > start_costs[start]:  # float sums only: the moves' gains are exact
        nested = proposals[start]
        (final,), _ = stats.tree_moments([FlatTree.of(nested)])
        cost, named = _price(final, moved, one_to_one)
    return AllRowsResult(nested, named, cost, float(own_cost(reference).sum()), start_costs, start, sweeps,
                         final[:, 0].astype(np.int64), stats.n_passes)
