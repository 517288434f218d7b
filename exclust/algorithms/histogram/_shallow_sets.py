"""ExShallow's set cuts on category features (issue 28): the per-node histogram of each category's
rows priced against sets of the node's centers (a numba kernel), and the search of the set cut
of lowest ``_shallow_cut.cut_score`` from it.

A set cut sends the categories in a set left; a center goes with its category (the category
holding most of its cluster's rows, ``cut_search.center_codes``), so the node's centers fall into
*groups*, one per category holding some of them. The cost of a category's rows on a side is their
summed distance to the nearest center of that side, a minimum per row, so the kernel sums, per
(slot, category feature, code), each row's distance to the nearest center of every set of groups
that a cut can leave on a side:

- **masks** (at most ``EXACT_GROUPS`` groups): every set of groups, indexed by its bit mask
  (column ``mask``): every partition of the centers can be priced;
- **prefixes** (more groups): the groups ordered by the projection of their centers on the
  leading principal direction of the node's centers, and the sets left (column ``1 + q``: groups
  0..q) and right (column ``G + q``: groups q+1..G-1) of each prefix split q.

Column 0 counts the rows. The search (``best_set_cut``) then tries, with the feature's missing bin
on each side (``cut_search.side_of_missing`` keeps the lower score):

- with at most ``EXACT_CATEGORIES`` categories, every subset of the categories holding rows or
  centers (exact: ``tests/test_shallow_categories.py`` compares it with a brute force);
- otherwise every partition of the groups (masks) or every prefix split (prefixes), each category
  without a center taking the side where its rows cost less (exact for the cost given the
  centers' partition, the structure of the cost).

Categories without rows at the node go with the child holding more rows.
"""
from __future__ import annotations

import itertools

import numba
import numpy as np

from exclust.algorithms.histogram._code_histograms import rows_by_slot, side_of_missing
from exclust.algorithms.histogram._shallow_cut import MISSING_LEFT, cut_score

EXACT_CATEGORIES = 8  # C <= this: every subset of the categories is tried
EXACT_GROUPS = 8  # center groups <= this: every set of groups is priced (2^G columns)


def set_groups(member_codes: np.ndarray, member_centers: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """(group of each member center, number of groups G, masks) along one category feature:
    ``member_codes`` the members' categories, ``member_centers`` their coordinates (clustering
    space). With masks (G <= EXACT_GROUPS) the groups are numbered by category; otherwise by
    the projection of each group's mean center on the leading principal direction of the
    node's centers (ties by category), for the prefix splits."""
    distinct, group = np.unique(member_codes, return_inverse=True)
    n_groups = int(distinct.size)
    if n_groups <= EXACT_GROUPS:
        return group.astype(np.int64), n_groups, True
    centers = np.asarray(member_centers, dtype=np.float64)
    means = np.stack([centers[group == g].mean(axis=0) for g in range(n_groups)])
    centred = centers - centers.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    rank = np.empty(n_groups, dtype=np.int64)
    rank[np.lexsort((distinct, means @ vt[0]))] = np.arange(n_groups)
    return rank[group], n_groups, False


def set_width(n_groups: int, masks: bool) -> int:
    """Columns after the count that a feature with ``n_groups`` groups needs."""
    return (1 << n_groups) - 1 if masks else 2 * n_groups - 1


@numba.njit(cache=True, nogil=True, parallel=True)
def set_histograms(codes, dists, feature, cuts, left, right, resume, remember, slot, n_slots, set_features, group,
                   n_groups, masks, n_codes, width, nt):
    """Per (slot, category feature c, code) the row count (column 0), then each row's distance to
    the nearest center of each priced set of groups (module docstring). ``set_features[c]`` is
    the feature; ``group[s, c, j]`` center j's group at slot s (-1: not a member),
    ``n_groups[s, c]`` and ``masks[s, c]`` how its sets are laid out."""
    k = dists.shape[1]
    n_sets = set_features.shape[0]
    order, row_slot = rows_by_slot(codes, feature, cuts, left, right, slot, n_slots, resume, remember)
    m = order.shape[0]
    parts = np.zeros((nt, n_slots, n_sets, n_codes, width + 1), dtype=np.float64)
    step = (m + nt - 1) // nt
    for t in numba.prange(nt):
        nearest = np.empty(k)  # per group
        subset = np.empty(width + 2)
        for r in range(t * step, min(m, (t + 1) * step)):
            i = order[r]
            s = row_slot[i]
            for c in range(n_sets):
                n_g = n_groups[s, c]
                for g in range(n_g):
                    nearest[g] = np.inf
                for j in range(k):
                    g = group[s, c, j]
                    if g >= 0 and dists[i, j] < nearest[g]:
                        nearest[g] = dists[i, j]
                cell = parts[t, s, c, codes[i, set_features[c]]]
                cell[0] += 1.0
                if masks[s, c]:
                    subset[0] = np.inf
                    for msk in range(1, 1 << n_g):
                        low = msk & -msk
                        g = 0
                        while (low >> g) != 1:
                            g += 1
                        rest = subset[msk ^ low]
                        subset[msk] = nearest[g] if nearest[g] < rest else rest
                        cell[msk] += subset[msk]
                else:
                    run = np.inf
                    for q in range(n_g - 1):  # left of split q: groups 0..q
                        run = min(run, nearest[q])
                        cell[1 + q] += run
                    run = np.inf
                    for g in range(n_g - 1, 0, -1):  # right of split g - 1: groups g..G-1
                        run = min(run, nearest[g])
                        cell[n_g + g - 1] += run
    out = np.zeros((n_slots, n_sets, n_codes, width + 1), dtype=np.float64)
    for t in range(nt):
        out += parts[t]
    return out


def _partitions(held: np.ndarray, member_codes: np.ndarray, group: np.ndarray, n_groups: int, masks: bool,
                n_categories: int):
    """Candidate cuts of one category feature: (left mask over the categories or None, the
    categories whose side is fixed, left column, right column, centers left)."""
    full = (1 << n_groups) - 1
    group_bits = 1 << group
    if n_categories <= EXACT_CATEGORIES:
        candidates = np.union1d(held, member_codes)
        for picks in itertools.product((False, True), repeat=candidates.size):
            left_cats = candidates[np.array(picks, dtype=bool)]
            on_left = np.isin(member_codes, left_cats)
            bits = int(np.bitwise_or.reduce(group_bits[on_left])) if on_left.any() else 0
            if 0 < bits < full:
                yield left_cats, candidates, bits, full ^ bits, int(on_left.sum())
        return
    splits = range(1, full) if masks else range(n_groups - 1)
    for split in splits:
        on_left = ((split >> group) & 1).astype(bool) if masks else group <= split
        columns = (split, full ^ split) if masks else (1 + split, n_groups + split)
        yield np.unique(member_codes[on_left]), np.unique(member_codes), *columns, int(on_left.sum())


def best_set_cut(cells: np.ndarray, feature: int, n_categories: int, member_codes: np.ndarray, group: np.ndarray,
                 n_groups: int, masks: bool, base: float, bounded: np.ndarray, depth_factor: float,
                 require_rows: bool) -> tuple[float, tuple[int, ...], int] | None:
    """The set cut of lowest ``cut_score`` of one category feature at one node: (score, its
    categories sent left, missing side), or None.

    ``cells`` (codes, columns) the node's set histogram of the feature (``set_histograms``),
    its missing bin at code ``n_categories``; ``member_codes`` the node's centers' categories and
    ``group`` their groups (``set_groups``). A cut must leave a center on each side."""
    C = n_categories
    counts = cells[:C, 0]
    miss = cells[C]
    n_missing = int(round(miss[0]))
    held = np.flatnonzero(counts > 0.5)
    k = member_codes.size
    best: tuple[float, np.ndarray, int] | None = None
    for left_cats, fixed, col_l, col_r, k_left in _partitions(held, member_codes, group, n_groups, masks, C):
        left = np.isin(np.arange(C), left_cats)
        free = np.setdiff1d(held, fixed)
        if free.size:  # each category without a center takes its cheaper side
            fixed_left = counts[left].sum() > counts[np.isin(np.arange(C), fixed) & ~left].sum()
            cost_l, cost_r = cells[free, col_l], cells[free, col_r]
            left[free] = (cost_l < cost_r) | ((cost_l == cost_r) & fixed_left)
        cost = cells[:C, col_l][left].sum() + cells[:C, col_r][~left].sum()
        n_left, n_right = int(round(counts[left].sum())), int(round(counts[~left].sum()))
        scores = [cut_score(cost + miss[col], base, n_left + n_missing * (col == col_l),
                            n_right + n_missing * (col == col_r), k_left, k - k_left, bounded[feature, 0],
                            bounded[feature, 1], depth_factor, require_rows) for col in (col_l, col_r)]
        side = int(side_of_missing(scores[0], scores[1], float(n_left), float(n_right)))
        score = scores[0] if side == MISSING_LEFT else scores[1]
        if np.isfinite(score) and (best is None or score < best[0]):
            rowless = counts < 0.5
            left[rowless & ~np.isin(np.arange(C), fixed)] = n_left > n_right  # with the larger child
            best = (score, left, side)
    if best is None:
        return None
    score, left, side = best
    return float(score), tuple(np.flatnonzero(left).tolist()), side
