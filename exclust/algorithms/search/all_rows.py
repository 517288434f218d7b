"""TreeSearch's decisions on all rows: proposals priced together, the cheapest improved.

1. Starts: the greedy rules' trees built on all rows (IMM, ExGreedy, ExShallow at one leaf per
   cluster; ExKMC beyond), each on the histogram engine's passes, plus the trees proposed from
   the in-memory sample (``tree_search.py``: lookahead and local search, CART).
2. One pass prices every start on all rows (``RowStatistics.tree_moments``: per tree and leaf,
   count, summed coordinates, summed squared norm); the cheapest is the search's start, so the
   result never costs more than any greedy tree on all rows.
3. With one leaf per cluster, beyond the sample's lookahead (12 leaves), the lookahead on each
   small subtree of that start proposes subtrees, each kept where cheaper on all rows
   (``subtree_moves.py``, one pass); then the local search on all rows (``refine.improve``)
   improves it while its budget lasts; every move is priced exactly on all rows.
4. A last pass prices the result, names its leaves and gives the reference's cost, so the
   reported cost and price are on all rows.
"""
from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from exclust.algorithms.search.refine import improve
from exclust.algorithms.search.row_statistics import (
    FlatTree,
    RowStatistics,
    clusters_cost,
    name_leaves,
    own_cost,
)
from exclust.algorithms.search.subtree_moves import choose_on_all_rows

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


def fit_start(name: str, model, data, centers: np.ndarray, Z=None) -> bool:
    """Fit a greedy start on ``data`` (against ``centers``, in the clustering space ``Z`` when
    given); False, with the reason in the log, when the rule refuses what the data hold
    (category features, missing values) or cannot fit centers of another space."""
    from exclust.errors import ParameterError

    if Z is not None and "Z" not in inspect.signature(model.fit).parameters:
        logger.info("TreeSearch: start %s skipped: it measures its cost on the features only, and the reference "
                    "clustering lives in other columns", name)
        return False
    try:
        model.fit(data, centers, **({} if Z is None else {"Z": Z}))
    except ParameterError as exc:
        logger.info("TreeSearch: start %s skipped: %s", name, exc)
        return False
    return True


def greedy_models(rules: dict, starts, k: int, leaves: int, max_bins: int, seed) -> dict:
    """The unfitted greedy rules of ``starts`` (names of ``GREEDY_RULES``; ExKMC with more leaves
    than clusters); ``rules``: name -> estimator class (``tree_search.rule_classes``)."""
    from exclust.errors import ParameterError

    unknown = set(starts) - set(GREEDY_RULES)
    if unknown:
        raise ParameterError(f"The 'starts' parameter takes {', '.join(GREEDY_RULES)}, got {sorted(unknown)}")
    if leaves > k:
        return {"exkmc": rules["exkmc"](k, max_leaves=leaves, max_bins=max_bins, random_state=seed)}
    return {name: rules[name](k, max_bins=max_bins, random_state=seed) for name in starts}


def greedy_starts(data, centers: np.ndarray, models: dict, Z=None) -> tuple[dict, int]:
    """The trees of the greedy ``models`` (name -> unfitted estimator) built on all rows of
    ``data`` (a Dataset), and the passes they took. A tree of other than ``n_leaves`` leaves
    (more than ``n_clusters`` given to ExKMC: 2 to ``n_leaves``) is left out, and so is a rule
    refusing the data (``fit_start``). ``Z``: the clustering space's rows."""
    starts, passes = {}, 0
    for name, model in models.items():
        t0 = time.perf_counter()
        if not fit_start(name, model, data, centers, Z):
            continue
        passes += int(getattr(model, "n_passes_", 0))
        logger.info("TreeSearch: %s on all rows in %.1f s", name, time.perf_counter() - t0)
        tree = model.tree_
        leaves = int(getattr(model, "max_leaves", None) or centers.shape[0])
        if 2 <= tree.n_leaves <= leaves and (leaves > centers.shape[0] or tree.n_leaves == leaves):
            starts[name] = tree
    return starts, passes


def nearest_centers(X: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Each row's nearest center (squared Euclidean)."""
    return ((X[:, None, :] - centers[None]) ** 2).sum(axis=2).argmin(axis=1)


def sample_dataset(rows: np.ndarray, categories: dict | None):
    """The in-memory sample as the greedy rules take it: a Dataset keeping the category features."""
    from exclust.sources.dataset import Dataset

    return Dataset(rows, [f"x{j}" for j in range(rows.shape[1])], categories=dict(categories or {}),
                   missing={f"x{j}": 1 for j in np.flatnonzero(np.isnan(rows).any(axis=0)).tolist()})


def _price(moments: np.ndarray, centers: np.ndarray, one_to_one: bool) -> tuple[float, np.ndarray]:
    """(cost of the tree's clusters on all rows, the center each leaf names)."""
    named = name_leaves(moments, centers, one_to_one)
    if one_to_one:  # one leaf per cluster: the clusters are the leaves
        return float(own_cost(moments).sum()), named
    return clusters_cost(moments, named, centers.shape[0]), named


def search_all_rows(stats: RowStatistics, centers: np.ndarray, n_leaves: int, proposals: dict,
                    max_passes: int | None, max_seconds: float | None, min_share: float = 0.0,
                    subtrees: Callable[[object], dict] | None = None) -> AllRowsResult:
    """Steps 2 to 4 of the module on the rows ``stats`` keeps; ``proposals``: name -> nested tree;
    the budget (``max_passes``, ``max_seconds``, ``min_share``): ``refine.improve``'s.
    ``subtrees``: the cheapest start -> proposals for its small subtrees (``subtree_moves.propose``),
    each subtree's cheapest on all rows kept before the local search (one pass)."""
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
    if one_to_one and subtrees is not None:
        t0 = time.perf_counter()
        found = subtrees(nested)
        nested, saved, replaced = choose_on_all_rows(stats, nested, found)
        logger.info("TreeSearch: %d of %d subtrees replaced from the sample's lookahead in %.1f s, saving %.3g%%",
                    replaced, len(found), time.perf_counter() - t0, 100 * saved / max(start_costs[start], 1e-300))
    if one_to_one:
        nested, sweeps = improve(stats, nested, max_passes, max_seconds, min_share=min_share)
    (final,), reference = stats.tree_moments([FlatTree.of(nested)], moved)
    cost, named = _price(final, moved, one_to_one)
    if cost > start_costs[start]:  # float sums only: the moves' gains are exact
        nested = proposals[start]
        (final,), _ = stats.tree_moments([FlatTree.of(nested)])
        cost, named = _price(final, moved, one_to_one)
    return AllRowsResult(nested, named, cost, float(own_cost(reference).sum()), start_costs, start, sweeps,
                         final[:, 0].astype(np.int64), stats.n_passes)
