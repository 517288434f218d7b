"""ExGreedy's large children derived from their parents' histograms (issue 27 item 3).

Without a depth penalty the greedy cut mostly carves one or two centers off a large node, so the
tree is about k levels deep and a direct pass (``_shallow_cut.shallow_histograms``) re-reads the
large node's rows at every level, at a cost per row that grows with its m centers: about
n d k^2 in all. Here the large child's side-cost sums are its parent's, kept on the driver, with
the changes a pass collects (``_shallow_derive.derived_deltas``): the small sibling's rows taken
off, and the few (row, feature, side) whose nearest center on a side was one of those carved off
walked again. A level then costs about n d log m, so the tree about n d k log k.

The derived sums equal the direct ones up to rounding (not to the bit), so ExShallow, whose
depth penalty keeps its trees balanced, keeps the direct pass; ``grow_shallow`` derives only
with ``depth_factor=0`` (ExGreedy), and only without category features (their set histograms are
per node, ``_shallow_sets``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from exclust.algorithms.histogram.criteria import ShallowCost
from exclust.algorithms.histogram.kept_values import needed_rows, over_value_chunks
from exclust.dataplane.parts import kernel_threads

DERIVE_MIN_CENTERS = 16  # a large child with fewer centers is computed directly: its pass is cheap
DERIVE_SHARE = 4  # derive when the small child holds at most a quarter of the large one's centers


@dataclass
class Derivation:
    """A large child to derive: ``node`` (its centers ``members``) and its small sibling
    ``small_node``, from the parent's centers ``parent_members`` and reduced histograms
    (``sums`` (d, bins, splits, 2), ``counts`` (d, bins), ``base``)."""

    node: int
    small_node: int
    parent_members: np.ndarray
    members: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    base: float
    columns: np.ndarray | None = None  # (d, splits): the parent's split at each of the child's (derive_request)
    n_columns: np.ndarray | None = None  # (d,): the child's splits per feature

    @property
    def nbytes(self) -> int:
        return int(self.sums.nbytes + self.counts.nbytes)


def derives(n_small: int, n_large: int) -> bool:
    """Whether a large child of ``n_large`` centers beside one of ``n_small`` is derived."""
    return n_large >= DERIVE_MIN_CENTERS and n_small * DERIVE_SHARE <= n_large


def _groups(codes: np.ndarray, parent: np.ndarray, members: np.ndarray):
    """Along one feature: the parent's centers' groups, the parent's centers in group order (ties
    by center), whether each is the large child's, and the large child's distinct groups."""
    _, group = np.unique(codes[parent], return_inverse=True)
    order = np.lexsort((parent, group))
    kept = np.isin(parent, members)
    return group, order, kept, np.unique(group[kept])


def derive_request(derived: list[Derivation], codes: np.ndarray, n_nodes: int, k: int, missing_bin: np.ndarray
                   ) -> tuple:
    """The kernel's arguments after the routing ones (``derived_deltas``) for one pass, from the
    centers' threshold codes (k, d), then the mask (k,) of the derivations' parents' centers (the
    only centers the kernel reads)."""
    d = codes.shape[1]
    n = len(derived)
    slot = np.full(n_nodes, -1, dtype=np.int64)
    m_max = max(int(der.parent_members.size) for der in derived)
    s_max = max(int(der.parent_members.size - der.members.size) for der in derived)
    parent_order = np.zeros((n, d, m_max), dtype=np.int64)
    parent_grp = np.zeros((n, d, m_max), dtype=np.int64)
    large_order = np.zeros((n, d, m_max), dtype=np.int64)
    new_split = np.full((n, d, m_max), -1, dtype=np.int64)
    check_left = np.full((n, s_max, d), -1, dtype=np.int64)
    check_right = np.full((n, s_max, d), -1, dtype=np.int64)
    center_grp = np.full((n, k, d), -1, dtype=np.int32)  # (e, center, feature): contiguous per center
    carved_span = np.zeros((n, d, 2), dtype=np.int64)
    left_group = np.full((n, s_max, d), -1, dtype=np.int64)
    right_group = np.full((n, s_max, d), -1, dtype=np.int64)
    small_list = np.zeros((n, s_max), dtype=np.int64)
    small = np.zeros((n, k), dtype=np.bool_)
    span_old = np.zeros((n, d, 2), dtype=np.int64)
    span_new = np.zeros((n, d, 2), dtype=np.int64)
    n_parent = np.array([der.parent_members.size for der in derived], dtype=np.int64)
    n_large = np.array([der.members.size for der in derived], dtype=np.int64)
    parent_centers = np.zeros(k, dtype=np.bool_)
    n_small = n_parent - n_large
    for e, der in enumerate(derived):
        slot[der.small_node], slot[der.node] = 2 * e, 2 * e + 1
        parent, members = der.parent_members, der.members
        parent_centers[parent] = True
        der.columns = np.zeros((d, max(members.size - 1, 1)), dtype=np.int64)
        der.n_columns = np.zeros(d, dtype=np.int64)
        carved_at = np.flatnonzero(~np.isin(parent, members))
        carved = parent[carved_at]
        small[e, carved] = True
        small_list[e, :carved.size] = carved
        for f in range(d):
            group, order, kept, large_groups = _groups(codes[:, f], parent, members)
            parent_order[e, f, :parent.size] = parent[order]
            parent_grp[e, f, :parent.size] = group[order]
            center_grp[e, parent, f] = group
            # The carved-off centers' block in P's order: the first position of the lowest carved
            # group, the last of the highest (the walks write nothing outside it).
            sorted_grp = group[order]
            carved_grp = group[carved_at]
            carved_span[e, f] = (np.searchsorted(sorted_grp, carved_grp.min(), "left"),
                                 np.searchsorted(sorted_grp, carved_grp.max(), "right") - 1)
            by_group = order[kept[order]]
            large_order[e, f, :members.size] = parent[by_group]
            large_grp = group[by_group]
            new_split[e, f, large_groups[:-1]] = np.arange(large_groups.size - 1)
            der.columns[f, :large_groups.size - 1] = large_groups[:-1]
            der.n_columns[f] = large_groups.size - 1
            span_old[e, f] = codes[parent, f].min(), codes[parent, f].max()
            span_new[e, f] = codes[members, f].min(), codes[members, f].max()
            top = large_groups[-1]
            for c, g in enumerate(group[carved_at].tolist()):
                at = int(np.searchsorted(large_groups, g, "left"))
                # Left: the first kept split at or above c's group, if there is one below L's top.
                if at < large_groups.size and large_groups[at] != top:
                    check_left[e, c, f] = np.searchsorted(large_grp, large_groups[at], "right")
                    left_group[e, c, f] = large_groups[at]
                # Right: the last kept split below c's group (L's top group is no split).
                below = min(at, large_groups.size - 1)
                if below >= 1:
                    check_right[e, c, f] = np.searchsorted(large_grp, large_groups[below - 1], "right")
                    right_group[e, c, f] = large_groups[below - 1]
    n_splits = int(n_large.max()) - 1
    return (slot, n, parent_order, parent_grp, n_parent, small, large_order, n_large, small_list, n_small,
            new_split, check_left, check_right, center_grp, left_group, right_group, span_old, span_new, carved_span,
            missing_bin.astype(np.int64), n_splits, parent_centers)


def derived_histograms(der: Derivation, sums: np.ndarray, counts: np.ndarray, base: float
                       ) -> tuple[np.ndarray, np.ndarray, float]:
    """The large child's (sums, counts, base): the parent's at the splits the child keeps, plus
    the pass's changes (``sums`` (d, bins, splits, 2), ``counts`` (d, bins), ``base``), after
    ``derive_request`` set ``der.columns``."""
    from exclust.algorithms.histogram._shallow_derive import keep_columns

    n_splits = der.members.size - 1  # the pass's ``sums`` may have more (another derivation's)
    kept = der.sums  # the parent's, changed in place (nothing else reads them)
    keep_columns(kept, der.columns, der.n_columns, sums, n_splits)
    return kept[:, :, :n_splits], der.counts + np.rint(counts).astype(np.int64), der.base + base


def _block_derived(part, tree_arrays, routing, shallow_args, derive):
    from exclust.algorithms.histogram._shallow_derive import derived_deltas
    from exclust.algorithms.histogram.criteria import resume_nodes, shallow_rows, slots_centers

    resume, remember = resume_nodes(part, routing)
    n_bins = shallow_args[4]

    def rows(start, stop, dots):
        codes, own_resume = part["codes"][start:stop], resume[start:stop]
        direct = shallow_rows(codes, dots, tree_arrays, own_resume, remember, *shallow_args)
        return direct, derived_deltas(codes, dots, *tree_arrays, own_resume, remember, *derive[:-2], n_bins,
                                      derive[-2], kernel_threads())

    # The direct slots' rows and the derivations' (its small and large children's), with the
    # direct slots' centers and the derivations' parents' (the kernel reads no other).
    centers = slots_centers(shallow_args[1]) | derive[-1]
    return over_value_chunks(part, rows, needed_rows(part, tree_arrays, resume, shallow_args[0], derive[0]), centers)


class DerivedShallowCost(ShallowCost):
    """``ShallowCost`` whose pass also collects the changes that derive large children from their
    parents (request: ShallowCost's, then ``derive``, ``derive_request``'s tuple). Its histograms:
    ShallowCost's, then the changes (sums, counts, base) per derivation."""

    block: Callable[..., Any] = staticmethod(_block_derived)

    def pass_args(self, data, slot, member_group, n_groups, center_span, n_splits, bulk_min_rows=1 << 62,
                  sets=None, derive=None):
        return super().pass_args(data, slot, member_group, n_groups, center_span, n_splits, bulk_min_rows,
                                 sets), derive

    def unpack(self, data, reduced, args):
        return super().unpack(data, reduced[0], args[0]), reduced[1]
