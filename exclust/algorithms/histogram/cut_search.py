"""The cut search on a node's reduced histograms (numpy): threshold cuts with a learned side for
the missing bin, and set cuts on category features (issue 28), for ExKMC's surrogate cost and
IMM's mistakes.

IMM's threshold cuts are scored from ``MistakeCounts``: per (feature, bin) the rows per
min(row bin, center bin) and per max, and the missing rows per center bin, so a node's search is
O(d B) on numeric features whatever its number of centers (issue 27).

A node's histograms are (d, B, ...) over the codes of ``binning.BinMapper``: a numeric feature's
value bins, a category feature's one bin per category, and each feature's missing bin
(``mapper.missing_bin``). Every cut is scored with the missing bin on each side and keeps the
cheaper; on a tie (in particular when the node holds no missing row) the missing bin goes to the
child holding more rows, as scikit-learn's trees send missing values (right on equal rows).

Set cuts (category features):

- **surrogate cost** (``best_surrogate_cut``), exact: with the two sides' centers (a, b)
  fixed, the cost is a sum over the categories, so each category (and the missing bin) takes
  its cheaper side independently; every ordered pair a != b is tried, O(k^2 C) per feature.
  When every category would take one side, the one that costs least to move crosses over
  (the best cut with both sides holding rows). The partition found is then priced with each
  side's own cheapest center. This equals the best over all subsets (tests compare it with a
  brute force): if a pair a != b reaches the optimum the partition is priced at most that;
  if only a == b does, every partition costs the same (any split of a node whose best single
  center serves both sides equally).
- **mistakes** (``best_mistake_cut``): a reference center's category is the category holding
  most of its cluster's rows (``center_codes``, taken over all rows at the root); a cut
  must part the categories holding the node's centers. With at most ``EXACT_CENTER_CATEGORIES``
  (10) such categories every partition of them is tried; beyond, they are ordered Fisher-style
  and only the prefixes of that order are tried: each category's rows give a vector of shares
  over the node's clusters, and the categories are sorted by their projection on the leading
  principal direction of those vectors (weighted by rows), so categories whose rows split
  alike among the clusters sit together. Every other category, and the missing bin, takes the
  side where it makes fewer mistakes.

Categories without rows at the node go, like a tie, to the child holding more rows.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from exclust.algorithms.histogram._code_histograms import side_of_missing
from exclust.algorithms.histogram.binning import BinMapper
from exclust.algorithms.histogram.code_tree import MISSING_LEFT, MISSING_RIGHT, CodeTree

EXACT_CENTER_CATEGORIES = 10


@dataclass(frozen=True)
class BinCut:
    """One node's chosen cut on codes.

    ``split_bin``: a threshold cut ``code <= split_bin`` (-1 on a set cut); ``left_codes``: a
    set cut's codes going left (empty on a threshold cut); ``missing_side``: ``MISSING_LEFT`` or
    ``MISSING_RIGHT``; ``score``: its cost (surrogate cost less the rows' sum of ||x||^2) or
    mistakes; ``left_center`` / ``right_center``: each side's cheapest center (-1 where the
    criterion has none).
    """

    feature: int
    split_bin: int
    left_codes: tuple[int, ...]
    missing_side: int
    score: float
    left_center: int = -1
    right_center: int = -1

    @property
    def is_set(self) -> bool:
        return bool(self.left_codes)

    def apply(self, tree: CodeTree, node: int) -> tuple[int, int]:
        """Split ``node`` of ``tree`` by this cut; returns (left, right)."""
        if self.is_set:
            return tree.split_set(node, self.feature, self.left_codes, self.missing_side)
        return tree.split(node, self.feature, self.split_bin, self.missing_side)

    def goes_left(self, codes: np.ndarray, mapper: BinMapper) -> np.ndarray:
        """Whether each of ``codes`` (of this cut's feature) goes left."""
        codes = np.asarray(codes)
        left = np.isin(codes, self.left_codes) if self.is_set else codes <= self.split_bin
        missing = codes == mapper.missing_bin[self.feature]
        return np.where(missing, self.missing_side == MISSING_LEFT, left)


def _split_missing(hist: np.ndarray, mapper: BinMapper) -> tuple[np.ndarray, np.ndarray]:
    """(the histogram with every missing bin emptied, the missing bins' rows (d, ...))."""
    values = np.array(hist, copy=True)
    missing = np.zeros((hist.shape[0], *hist.shape[2:]), dtype=hist.dtype)
    for f, m in enumerate(mapper.missing_bin.tolist()):
        if m >= 0:
            missing[f] = hist[f, m]
            values[f, m] = 0
    return values, missing


# --------------------------------------------------------------------------- surrogate cost
def side_costs(n: np.ndarray, dots: np.ndarray, center_sq: np.ndarray | None) -> np.ndarray:
    """Surrogate cost of a set of rows with each center: from sums of dot products, less the
    shared sum of ||x||^2; or, when ``center_sq`` is None, the sums are distances already."""
    if center_sq is None:
        return dots
    return n[..., None] * center_sq - 2.0 * dots


def _cheapest(stats: np.ndarray, center_sq) -> tuple[np.ndarray, np.ndarray]:
    """(cost, center) of the cheapest center for (..., k + 1) count-and-sums statistics."""
    costs = side_costs(stats[..., 0], stats[..., 1:], center_sq)
    j = costs.argmin(axis=-1)
    return np.take_along_axis(costs, j[..., None], -1)[..., 0], j


def _set_cut_surrogate(cat: np.ndarray, miss: np.ndarray, center_sq) -> tuple[np.ndarray, bool] | None:
    """The best set cut of one category feature: (left mask over its C categories, missing left).

    ``cat`` (C, k + 1) count and sums per category, ``miss`` (k + 1,) the missing bin's.
    None when fewer than two categories hold rows.
    """
    rows = cat[:, 0] > 0.5
    held = np.flatnonzero(rows)
    if held.size < 2:
        return None
    costs = side_costs(cat[held, 0], cat[held, 1:], center_sq)  # (e, k)
    miss_cost = side_costs(np.asarray(miss[0]), miss[1:], center_sq)  # (k,)
    k = costs.shape[1]
    best, best_pair = np.inf, (0, 1)
    for a in range(k):
        to_left = costs[:, a:a + 1] <= costs  # (e, k): category goes to a's side against each b
        total = np.minimum(costs[:, a:a + 1], costs).sum(axis=0) + np.minimum(miss_cost[a], miss_cost)
        n_left = to_left.sum(axis=0)
        one_sided = (n_left == 0) | (n_left == held.size)
        total = total + np.where(one_sided, np.abs(costs[:, a:a + 1] - costs).min(axis=0), 0.0)
        total[a] = np.inf
        b = int(np.argmin(total))
        if total[b] < best:
            best, best_pair = float(total[b]), (a, b)
    a, b = best_pair
    left_held = costs[:, a] <= costs[:, b]
    if left_held.all() or not left_held.any():
        moved = int(np.argmin(np.abs(costs[:, a] - costs[:, b])))
        left_held[moved] = not left_held[moved]
    left = np.zeros(cat.shape[0], dtype=bool)
    left[held] = left_held
    rows_left, rows_right = cat[left, 0].sum(), cat[~left, 0].sum()
    missing_left = side_of_missing(miss_cost[a], miss_cost[b], rows_left, rows_right) == MISSING_LEFT
    left[~rows] = rows_left > rows_right  # no rows here: with the larger child
    return left, bool(missing_left)


def best_surrogate_cut(hist: np.ndarray, labels: np.ndarray, center_sq: np.ndarray | None, mapper: BinMapper,
                       tol: float = 0.0) -> BinCut | None:
    """ExKMC at one leaf: the cut of least surrogate cost (less the rows' sum of ||x||^2).

    ``hist`` (d, B, k + 1): per code the row count and the sums of <x, mu_j> (or of distances,
    ``center_sq`` None); ``labels`` (d, B, k) rows per reference cluster. Each side takes its
    cheapest center. Threshold cuts come from prefix sums over the value bins, each priced with
    the missing bin on either side (module docstring); a category feature gives its one best
    set cut. Only cuts with rows on both sides count (a threshold cut: value rows on both sides;
    of several edges giving the same partition only the last). Cuts within ``tol`` of the
    cheapest are equally good; among them the one that leaves the fewest rows on a side other
    than their own center's wins, then the one that carves off the largest side holding only its
    own center's rows (so a zero-gain cut still isolates the points that a later cut can fix),
    then the lowest feature and bin. Returns None when no cut leaves rows on both sides.
    """
    d, B, _ = hist.shape
    values, miss = _split_missing(hist, mapper)
    lab_values, lab_miss = _split_missing(labels, mapper)
    pref = np.cumsum(values, axis=1)
    tot = pref[:, -1:, :]
    left, right = pref, tot - pref
    with_miss = miss[:, None, :]
    cost_ml = sum(_cheapest(s, center_sq)[0] for s in (left + with_miss, right))
    cost_mr = sum(_cheapest(s, center_sq)[0] for s in (left, right + with_miss))
    side = side_of_missing(cost_ml, cost_mr, left[..., 0], right[..., 0])
    miss_left = side == MISSING_LEFT
    left = left + np.where(miss_left[..., None], with_miss, 0.0)
    right = right + np.where(miss_left[..., None], 0.0, with_miss)
    cl, jl = _cheapest(left, center_sq)
    cr, jr = _cheapest(right, center_sq)
    cost = cl + cr
    lab_l = np.cumsum(lab_values, axis=1)
    lab_r = lab_l[:, -1:, :] - lab_l
    lab_l = lab_l + np.where(miss_left[..., None], lab_miss[:, None, :], 0)
    lab_r = lab_r + np.where(miss_left[..., None], 0, lab_miss[:, None, :])
    nl, nr = left[..., 0], right[..., 0]
    bins = np.arange(B)
    # A cut must leave value rows on both sides; of several edges giving the same partition
    # (empty bins between two values, e.g. an edge at a center coordinate) only the last one counts.
    next_bin_rows = np.concatenate([values[:, 1:, 0], np.zeros((d, 1))], axis=1)
    valid = ((pref[..., 0] > 0.5) & (tot[..., 0] - pref[..., 0] > 0.5) & (bins[None, :] < (mapper.n_bins[:, None] - 1))
             & (next_bin_rows > 0.5) & ~mapper.is_category[:, None])
    sets: dict[int, tuple[int, ...]] = {}
    for f in np.flatnonzero(mapper.is_category).tolist():
        C = int(mapper.n_bins[f])
        found = _set_cut_surrogate(values[f, :C], miss[f], center_sq)
        if found is None:
            continue
        mask, missing_left = found
        sets[f] = tuple(np.flatnonzero(mask).tolist())
        pick = np.concatenate([mask, np.zeros(B - C, dtype=bool)])
        for s, stats in ((0, values[f]), (1, lab_values[f])):
            out_l = stats[pick].sum(axis=0) + (miss[f] if s == 0 else lab_miss[f]) * missing_left
            out_r = stats[~pick].sum(axis=0) + (miss[f] if s == 0 else lab_miss[f]) * (not missing_left)
            if s == 0:
                (cl_f, jl_f), (cr_f, jr_f) = _cheapest(out_l, center_sq), _cheapest(out_r, center_sq)
                cost[f, 0], jl[f, 0], jr[f, 0] = cl_f + cr_f, jl_f, jr_f
                nl[f, 0], nr[f, 0] = out_l[0], out_r[0]
            else:
                lab_l[f, 0], lab_r[f, 0] = out_l, out_r
        side[f, 0] = MISSING_LEFT if missing_left else MISSING_RIGHT
        valid[f, 0] = True
    if not valid.any():
        return None
    cost = np.where(valid, cost, np.inf)
    near = cost <= cost.min() + tol
    own_l = np.take_along_axis(lab_l, jl[..., None], 2)[..., 0]
    own_r = np.take_along_axis(lab_r, jr[..., None], 2)[..., 0]
    wrong = (nl - own_l) + (nr - own_r)
    pure = np.maximum(np.where(own_l == nl, nl, 0.0), np.where(own_r == nr, nr, 0.0))
    wrong = np.where(near, wrong, np.inf)
    pure = np.where(near & (wrong <= wrong.min()), pure, -1.0)
    f, b = divmod(int(np.argmax(pure)), B)
    return BinCut(f, -1 if f in sets else b, sets.get(f, ()), int(side[f, b]), float(cost[f, b]), int(jl[f, b]),
                  int(jr[f, b]))


# --------------------------------------------------------------------------- mistakes
def center_codes(hist: np.ndarray, mapper: BinMapper, coordinate_codes: np.ndarray | None = None) -> np.ndarray:
    """(k, d) each reference center's code on every feature, for IMM: on a category feature
    the category holding most of its cluster's rows (a cluster without a category value there
    takes code 0); on a numeric feature its coordinate's code (``coordinate_codes``, the
    centers binned) or, when the centers do not live in the features' space (None: fitted on
    Z), the value bin holding its cluster's median row. ``hist`` (d, B, k): rows per cluster
    over all rows (the root's mistake histogram)."""
    k, d = hist.shape[2], hist.shape[0]
    out = np.zeros((k, d), dtype=np.int64) if coordinate_codes is None else np.array(coordinate_codes, dtype=np.int64)
    for f in range(d):
        value_rows = hist[f, : int(mapper.n_bins[f])]  # (C or bins, k): the missing bin left out
        if mapper.is_category[f]:
            out[:, f] = np.argmax(value_rows, axis=0)
        elif coordinate_codes is None:
            below = np.cumsum(value_rows, axis=0)
            out[:, f] = np.argmax(2 * below >= below[-1], axis=0)
    return out


def _fisher_order(h: np.ndarray, held: np.ndarray) -> np.ndarray:
    """``held`` categories sorted by the projection of their rows' shares over the clusters on
    the leading principal direction of those shares (weighted by rows); ties by code."""
    rows = h[held].sum(axis=1).astype(np.float64)
    return leading_direction_order(h[held] / np.maximum(rows, 1.0)[:, None], rows, held)


def _set_cut_mistakes(h: np.ndarray, miss: np.ndarray, cats: np.ndarray) -> tuple[int, np.ndarray, bool] | None:
    """The set cut of fewest mistakes of one category feature: (mistakes, left mask over its
    categories, missing left). ``h`` (C, m) rows per member cluster, ``miss`` (m,), ``cats``
    (m,) each member center's category. None when the centers share one category."""
    held = np.unique(cats)
    if held.size < 2:
        return None
    if held.size <= EXACT_CENTER_CATEGORIES:
        # Every partition once: the first category stays left (mirrors make the same mistakes).
        parts = [np.array((True, *p)) for p in itertools.product((True, False), repeat=held.size - 1) if not all(p)]
        order = held
    else:
        order = _fisher_order(h, held)
        parts = [np.arange(held.size) < i for i in range(1, held.size)]
    position = {int(c): i for i, c in enumerate(order.tolist())}
    center_pos = np.array([position[int(c)] for c in cats])
    best = None
    for part in parts:
        center_left = part[center_pos]  # (m,)
        wrong_if_left = h[:, ~center_left].sum(axis=1)  # rows of right centers sent left
        wrong_if_right = h[:, center_left].sum(axis=1)
        forced = np.full(h.shape[0], -1)
        forced[order] = part
        go_left = np.where(forced >= 0, forced == 1, wrong_if_left < wrong_if_right)
        tie = (forced < 0) & (wrong_if_left == wrong_if_right)
        rows = h.sum(axis=1)
        larger_left = rows[go_left & ~tie].sum() > rows[~go_left & ~tie].sum()
        go_left = np.where(tie, larger_left, go_left)
        mistakes = int(np.where(go_left, wrong_if_left, wrong_if_right).sum())
        miss_l, miss_r = int(miss[~center_left].sum()), int(miss[center_left].sum())
        missing_left = side_of_missing(miss_l, miss_r, rows[go_left].sum(), rows[~go_left].sum()) == MISSING_LEFT
        mistakes += min(miss_l, miss_r)
        if best is None or mistakes < best[0]:
            best = (mistakes, go_left, bool(missing_left))
    return best


@dataclass(frozen=True)
class MistakeCounts:
    """A node's IMM statistics, with the per-center axis only on category features.

    ``planes`` (4, d, B) int64 over the codes: 0, the node's alive rows per code; on numeric
    features, with r a row's code and c its center's (``center_codes``), 1, value rows per
    min(r, c); 2, value rows per max(r, c); 3, the missing bin's rows per c. A value row is a
    mistake at cut b exactly when min(r, c) <= b < max(r, c), so a feature's mistakes at every
    cut are two prefix sums, O(d B) per node whatever its centers. ``categories``
    (category features, B, m) rows per code and member center (column c: ``members[c]``), what
    the set cuts need. Sums over rows: counts of two row sets add and subtract.
    """

    planes: np.ndarray
    categories: np.ndarray

    @classmethod
    def from_histogram(cls, hist: np.ndarray, member_codes: np.ndarray, mapper: BinMapper) -> MistakeCounts:
        """The counts of a (d, B, m) per-member-center histogram; ``member_codes`` (m, d) its
        centers' codes (what ``_code_histograms.mistake_counts`` counts from the rows)."""
        hist = np.asarray(hist, dtype=np.int64)
        d, B, _ = hist.shape
        planes = np.zeros((4, d, B), dtype=np.int64)
        planes[0] = hist.sum(axis=2)
        bins = np.arange(B)[:, None]
        for f, missing in enumerate(mapper.missing_bin.tolist()):
            h, c = hist[f].copy(), member_codes[:, f]
            if missing >= 0:
                np.add.at(planes[3, f], c, h[missing])
                h[missing] = 0
            below, above = np.where(bins < c, h, 0), np.where(bins > c, h, 0)
            planes[1, f] = below.sum(axis=1)
            np.add.at(planes[1, f], c, h.sum(axis=0) - below.sum(axis=0))
            planes[2, f] = above.sum(axis=1)
            np.add.at(planes[2, f], c, h.sum(axis=0) - above.sum(axis=0))
        return cls(planes, hist[np.flatnonzero(mapper.is_category)])


def best_mistake_cut(hist: np.ndarray | MistakeCounts, center_codes: np.ndarray, members: np.ndarray,
                     mapper: BinMapper) -> BinCut | None:
    """IMM at one node: the cut of fewest mistakes among those that part its centers.

    ``hist``: the node's ``MistakeCounts``, or (d, B, m) counts of its alive rows per member
    center (column c: center ``members[c]``) over the codes, missing bins included;
    ``center_codes`` (k, d) are the centers' own bin codes on numeric features and their
    categories on category features (``center_codes``); ``members`` the node's centers in
    increasing order. A row is a mistake when it falls on the other side from its center; the
    missing bin goes to the side where its rows make fewer mistakes (a tie: the side with more
    rows). Ties between cuts go to the lowest feature, then the lowest bin (the order of a
    sorting implementation scanning features then thresholds); a category feature's one best
    set cut stands at its bin 0. O(d B) on numeric features, plus the member centers' codes.
    Returns None when no cut separates the centers (identical centers).
    """
    cc = center_codes[members].T  # (d, m)
    counts = hist if isinstance(hist, MistakeCounts) else MistakeCounts.from_histogram(hist, cc.T, mapper)
    rows, low, high, missing_by_center = counts.planes
    values = rows.copy()
    has_missing = np.flatnonzero(mapper.missing_bin >= 0)
    values[has_missing, mapper.missing_bin[has_missing]] = 0
    B = rows.shape[1]
    rows_left = np.cumsum(values, axis=1)
    rows_right = rows_left[:, -1:] - rows_left
    mistakes = np.cumsum(low, axis=1) - np.cumsum(high, axis=1)  # value rows with min(r, c) <= b < max(r, c)
    miss_r = np.cumsum(missing_by_center, axis=1)  # missing rows whose center goes left: mistakes sent right
    miss_l = miss_r[:, -1:] - miss_r
    side = side_of_missing(miss_l, miss_r, rows_left, rows_right)
    mistakes = mistakes + np.minimum(miss_l, miss_r)
    bins = np.arange(B)
    lo, hi = cc.min(axis=1), cc.max(axis=1)
    valid = (bins[None, :] >= lo[:, None]) & (bins[None, :] < hi[:, None])
    valid &= (bins[None, :] < (mapper.n_bins[:, None] - 1)) & ~mapper.is_category[:, None]
    sets: dict[int, tuple[int, ...]] = {}
    for q, f in enumerate(np.flatnonzero(mapper.is_category).tolist()):
        C, missing = int(mapper.n_bins[f]), int(mapper.missing_bin[f])
        h = counts.categories[q]
        found = _set_cut_mistakes(h[:C], h[missing] if missing >= 0 else np.zeros(h.shape[1], np.int64), cc[f])
        if found is None:
            continue
        mistakes[f, 0], mask, missing_left = found
        sets[f] = tuple(np.flatnonzero(mask).tolist())
        side[f, 0] = MISSING_LEFT if missing_left else MISSING_RIGHT
        valid[f, 0] = True
    if not valid.any():
        return None
    mistakes = np.where(valid, mistakes, np.iinfo(np.int64).max)
    f, b = divmod(int(np.argmin(mistakes)), B)
    return BinCut(f, -1 if f in sets else b, sets.get(f, ()), int(side[f, b]), float(mistakes[f, b]))


def leading_direction_order(points: np.ndarray, rows: np.ndarray, held: np.ndarray) -> np.ndarray:
    """``held`` categories sorted by the projection of their ``points`` (one row per held category:
    its rows' shares over the clusters, or its rows' mean) on the leading principal direction of
    those points weighted by ``rows``; ties by code. The Fisher-style order whose prefixes are the
    set cuts tried when a category feature holds too many categories for every subset."""
    rows = np.asarray(rows, dtype=np.float64)
    weights = rows / max(rows.sum(), 1.0)
    centred = points - weights @ points
    _, _, vt = np.linalg.svd(centred * np.sqrt(weights)[:, None], full_matrices=False)
    return held[np.lexsort((held, centred @ vt[0]))]
