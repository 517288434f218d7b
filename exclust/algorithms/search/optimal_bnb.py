"""Branch and bound over binned cuts: the least k-means cost of a tree of at most m leaves, with a
proof (a lower bound) when the search stops early.

The problem. Rows are grouped into *cells* (equal vectors of bin codes, ``optimal_cells.py``);
a tree whose cuts sit at bin edges sends each cell whole to one leaf. ``best(S, m)`` is the
least k-means cost (each leaf's squared distances to its own mean) of a tree of at most ``m``
leaves over the cells of a box ``S``. Since a cut never raises the cost, a tree of fewer leaves
can always be cut further at no extra cost when its leaves hold more than one cell, so the least
cost of exactly ``k`` leaves is ``best(root, k)``.

The recursion, as Quant-BnB's (Mazumder, Meng and Wang, "Quant-BnB: a scalable branch-and-bound
method for optimal decision trees with continuous features", ICML 2022, Sec. 3) for the k-means
cost:

    best(S, 1) = cost(S);  best(S, 2) = min over cuts of cost(L) + cost(R)   (one sweep, exact);
    best(S, m) = min over features f, left shares j in 1..m-1 and cut positions p on f of
                 best(L_p, j) + best(R_p, m - j).

The cut positions of one (f, j) are searched as intervals of positions ``[lo, hi]``, best first:

**Bound 1 (monotonicity; what prunes the intervals).** If ``A`` is a subset of ``B`` then
``best(A, j) <= best(B, j)``. *Proof.* Take B's optimal tree and keep its cuts: its leaves cut A
into at most ``j`` parts (some may be empty). A part's squared distances to its own mean are at
most those to the mean of the B-leaf holding it (the mean minimises them), which are at most the
B-leaf's cost (its other rows add non-negative terms). Summing over leaves proves it. Since
``L_p`` grows and ``R_p`` shrinks with p, every position of ``[lo, hi]`` costs at least
``lb(L_lo, j) + lb(R_hi, m - j)`` for any valid lower bounds ``lb``. Evaluating the middle
position ``mid`` gives a tree (an upper bound) and lower bounds that make the two halves'
bounds ``lb(L_lo) + lb(R_mid)`` and ``lb(L_mid) + lb(R_hi)``; an interval whose bound reaches the
best tree found (or the caller's cutoff) is dropped. Intervals of one position are exact.

**Bound 2 (the node's own bound when it stops).** ``best(S, m) >= min(best tree found, least bound
of the intervals still open)``: every tree of S has a root cut in some interval, either dropped
(bound at least the best found) or open. A search given a cutoff stops once that minimum reaches
it (the caller needs no more), so a side's lower bound is exact or at least the cutoff; a search
that runs out of budget returns this same minimum, still valid, never more than ``best(S, m)``.

**Bound 3 (per coordinate, at the root).** In any partition of the cells into at most ``m``
parts, coordinate ``c``'s share of the cost is at least the within-cell scatter of ``c`` plus the
least weighted one-dimensional ``m``-means cost of the cells' means on ``c`` (weights: counts),
so ``best(S, m) >=`` the sum over coordinates of that. *Proof.* The k-means cost splits over
coordinates; for one coordinate, a part's scatter is the sum of its cells' scatters plus the
weighted scatter of their means around the part's mean (Huygens); the parts of a tree are one
particular partition into at most m parts, no cheaper than the best one, which
``_optimal_bounds.weighted_kmeans_1d`` finds exactly. It ignores that the parts must be boxes
and that the coordinates share one partition, so it is weak where clusters overlap on every axis;
it is reported beside the search's bound and the larger of the two is kept.

**Bounds 4 and 5 (the box's scatter; ``_scatter_bounds.py``, proved there).** For three or more
leaves: the box's one-leaf cost less the ``m - 1`` largest eigenvalues of its cells' scatter
matrix (Bound 4, Ding and He's k-means bound), and its refinement by 1-D ``m``-means along the
eigenvectors (Bound 5). ``solve`` computes Bound 5 before searching a box of ``m >= 3`` leaves
and does not search it when the bound reaches the cutoff (or the incumbent); otherwise the
search's bound is raised to it.

**Bound 6 (every cut position's sides; ``optimal_node.py``).** For the cut positions of one (f, j)
the search keeps a lower bound per position for each side: exact for one or two leaves, else Bound 4 of that side
(computed for every position of f at once from prefix sums of the per-bin moments), lifted by
Bound 1: a running maximum from the left for ``L_p`` (it grows with p), from the right for
``R_p``, and after each probe at ``mid`` the probe's side bounds are carried to every ``L_p``,
``p >= mid`` and every ``R_p``, ``p <= mid``. An interval's bound is the least over its positions of
the two sides' sum (each a valid bound for its side at that position, so their sum bounds every
tree cutting there); positions whose sum reaches the best tree found are never probed. On data of
more than ``SPECTRAL_MAX_FEATURES`` features the spectral part is left out (its cost grows as
d^3 per node) and those sides start from 0, lifted by Bound 1 and the probes as before.

**Bound 7 (nearest cells; ``_neighbour_bound.py``, proved there).** For three or more leaves over
a box of at most ``NEIGHBOUR_MAX_CELLS`` cells: the within-cell scatter plus a Lagrangian
relaxation in which each cell pays, per row, for the nearest rows it must share a part with.
With ``use_neighbour`` set, ``solve`` takes the larger of Bounds 5 and 7 for every box of three or
more leaves (7 only when 5 is below the cutoff); it is off by default (it costs more time than it
saves inside the search), and ``OptimalTree`` computes Bound 7 at the root only.

**Bound 8 (a side's first cut; ``_first_cut_bound.py``, proved there).** In a node searched with
four or more leaves, a side of three or more at every cut position: the least over the side's own
first cuts of their exact two pieces' costs less the spectral sums of boxes around the pieces; it
replaces Bound 4 in Bound 6 where larger, for the features whose Bound 4 sums leave a position open.

**Bound 9 (slabs; ``_slab_bound.py``, proved there).** With ``use_slabs`` (on), Bound 1 becomes
additive: a side's bound carried to a larger side of the same feature (Bound 6's running maxima and
each probe's side bounds) gains the Bound 4 of each bin's slab of cells in between, since the
least cost is superadditive over disjoint sets.

**A probe's own budget (iterative deepening; ``probe_nodes``).** Searched depth first, a probe
runs until its sides reach their cutoffs, and a side of four or five leaves near its cutoff can
take hundreds of nodes while the root's other intervals, at lower bounds, wait (gmm 10^4 x 10,
k = 6: one five-leaf side took 337 of a 400-node budget; bench/README.md, session bound30f). With
``probe_nodes`` set, a probe made at search depth at most ``probe_depth`` may start at most that
many nodes (an enclosing probe's budget still applies). A side stopped by it returns Bound 2 of
its search so far, and a box that cannot start a node returns its scatter bound (Bound 4 or 5):
both at most the side's optimum, so ``lb(L) + lb(R)`` bounds every tree cutting at the position,
which goes back on the heap with that bound, to be probed again when it is the least, with twice
the budget. The memo keeps a stopped side's (bound, best found), the bound at most its optimum; a
later probe that needs more searches that side again (its finished sub-boxes are remembered). So
every value returned is a valid bound, and a search that empties its heap is exact as before.

Exactness: the search is exact over the cuts at the bin edges (every cell partition a tree at
those edges can make is reached). Nothing is sampled: the cells hold every row.
"""
from __future__ import annotations

import heapq
import time

import numpy as np

from exclust.algorithms.search._neighbour_bound import neighbour_bound
from exclust.algorithms.search._optimal_bounds import split_cells, tight_box, weighted_kmeans_1d
from exclust.algorithms.search._scatter_bounds import box_bound
from exclust.algorithms.search.optimal_node import SPECTRAL_MAX_FEATURES, SearchNode
from exclust.algorithms.search.optimal_tree import nested_from_cuts

# Bound 7 (``_neighbour_bound``) costs O(cells^2 d) per box: boxes of more cells go without it.
NEIGHBOUR_MAX_CELLS = 5_000

# The probes given their own budget by default: 4 nodes, then 8, 16, ... (``probe_nodes``), for
# the root's probes with a side of at least 5 leaves in a tree of at most 6, that is k = 6's
# (1, 5) and (5, 1) shapes: measured there, the root's bound rose (bench/README.md, session
# bound30f). A side of 3 or 4 leaves rarely needs more than 25 nodes and a cut-short probe loses
# the positions its finished bound would have closed (gmm 10^4 x 10, k = 5: 592 nodes to the proof
# with 4-node budgets on every probe against 527 without); at 7 to 31 leaves (the shared sets, 100
# nodes) no bound moved and digits took 2.2 times the sweeps.
PROBE_NODES = 4
PROBE_MIN_LEAVES = 5
PROBE_MAX_LEAVES = 6

# Positions are evaluated at once at this many evenly spaced points of a fresh (f, j) range, so
# that the first trees found are spread over the features' range before bisection takes over.
FIRST_PROBES = 4


class BranchAndBound:
    """The search over one set of cells (see the module). Trees are nested tuples
    ``(feature, split_bin, left, left's leaves, right)``; a leaf is None.

    ``codes`` (G, d) and ``stats`` (G, d + 2) are the cells (``optimal_cells.Cells``). The budget:
    once ``max_nodes`` searches of a (box, leaves) pair have run, every open search returns its
    bounds so far (Bound 2). The count depends on the cells alone, so the same cells and budget
    give the same tree and bound on any machine at any load. ``deadline``, a ``time.monotonic()``
    value, stops the search the same way when it comes first; the result then depends on the
    machine's speed.
    """

    def __init__(self, codes: np.ndarray, stats: np.ndarray, n_bins: int, deadline: float = np.inf,
                 max_nodes: float = np.inf, use_first_cut: bool = True, probe_nodes: int | None = None,
                 probe_depth: int = 1, probe_min_leaves: int = PROBE_MIN_LEAVES,
                 probe_max_leaves: int = PROBE_MAX_LEAVES, use_slabs: bool = True) -> None:
        self.codes = np.ascontiguousarray(codes)
        self.stats = np.ascontiguousarray(stats, dtype=np.float64)
        self.n_bins = int(n_bins)
        self.deadline = deadline
        self.max_nodes = max_nodes
        # Bound 8 (``_first_cut_bound``) for the sides of three or more leaves; off only to compare
        # (tests, bench_optimal.py's ``--without-first-cut``).
        self.use_first_cut = bool(use_first_cut)
        # Bound 9 (``_slab_bound``): Bound 1's carried bounds gain the slabs in between; off only to
        # compare (bench_optimal.py's ``--without-slabs``).
        self.use_slabs = bool(use_slabs)
        self.timed_out = False  # the budget (nodes or deadline) ran out: the bound is Bound 2's
        # Iterative deepening of the probes (see "A probe's own budget" in the module): a probe
        # made at search depth <= ``probe_depth``, in a search of at most ``probe_max_leaves`` leaves,
        # with a side of at least ``probe_min_leaves`` gets ``probe_nodes`` nodes, then twice as many
        # each time its position comes back off the heap; None: every probe runs to its cutoff.
        self.probe_nodes = probe_nodes
        self.probe_depth = int(probe_depth)
        self.probe_min_leaves = int(probe_min_leaves)
        self.probe_max_leaves = int(probe_max_leaves)
        self.stop_at: float = np.inf  # node count at which the probe under way stops (its own budget)
        self.nodes = 0  # searches of a (box, leaves) pair actually run
        self.sweeps = 0  # sweeps over a node's cells (histograms)
        self.box_bounds = 0  # Bound 5 computed at the start of a search of three or more leaves
        self.memo: dict[tuple[bytes, int], tuple[float, float, object]] = {}
        self.scatter_memo: dict[tuple[bytes, int], tuple[float, float]] = {}
        self.neighbour_memo: dict[tuple[bytes, int], float] = {}
        self.neighbour_bounds = 0  # Bound 7 computed (boxes of at most NEIGHBOUR_MAX_CELLS cells)
        # Bound 7 inside the search (``solve``), off by default: measured on aggregation, r15 and
        # digits it raised no bound above the root's and cost more time than the nodes it saved
        # (bench/README.md, session bound30); OptimalTree computes it at the root only.
        self.use_neighbour = False
        # How deep the search is (1 inside the root's ``_search``), and a record of the root's
        # shares and probes for diagnostics (``bench_optimal.py --trace-root``).
        self.depth = 0
        self.root_probes: list[dict] = []
        self.root_shares: list[dict] = []  # each (feature, left share) of the root: its positions' first bounds

    # ------------------------------------------------------------------ small pieces
    def node(self, cells: np.ndarray) -> SearchNode:
        self.sweeps += 1
        return SearchNode(self.codes, self.stats, cells, self.n_bins)

    def key(self, cells: np.ndarray, m: int) -> tuple[bytes, int]:
        return tight_box(self.codes, cells).tobytes(), m

    def best_two(self, node: SearchNode, force: bool = False) -> tuple[float, object]:
        """The exact best tree of at most two leaves: one sweep's prefix sums (with ``force``,
        the best cut even when it saves nothing)."""
        best, tree = (np.inf if force else float(node.cost)), None
        for f, positions in enumerate(node.positions):
            if positions.size == 0:
                continue
            left, right = node.side_costs(f)
            total = left + right
            p = int(np.argmin(total))
            if total[p] < best:
                best, tree = float(total[p]), (f, int(positions[p]), None, 1, None)
        return best, tree

    def scatter_bound(self, cells: np.ndarray, m: int, cutoff: float = np.inf, key=None) -> float:
        """Bound 5 of the box holding ``cells`` for ``m`` leaves (Bound 4 alone when that reaches
        ``cutoff``; below it when Bound 5 cannot reach ``cutoff``, ``box_bound``), remembered per box
        with the cutoff it was made for: the 1-D programmes over many cells are redone only for a
        lower cutoff that the value remembered does not reach."""
        key = self.key(cells, m) if key is None else key
        known = self.scatter_memo.get(key)
        if known is not None:
            value, made_for = known
            # Reached, or made without a cutoff, or its programmes showed Bound 5 below a cutoff
            # at most this one.
            if value >= cutoff or made_for == np.inf or value < made_for <= cutoff < np.inf:
                return value
        self.box_bounds += 1
        bound = float(box_bound(self.stats, cells, m, cutoff))
        if known is not None:
            bound = max(bound, known[0])  # both valid
        self.scatter_memo[key] = (bound, cutoff)
        return bound

    def neighbour_bound(self, cells: np.ndarray, m: int, key=None) -> float:
        """Bound 7 of the box holding ``cells`` for ``m`` leaves, remembered per box; 0 for boxes
        of more than ``NEIGHBOUR_MAX_CELLS`` cells (its cost grows as their square)."""
        if cells.shape[0] > NEIGHBOUR_MAX_CELLS:
            return 0.0
        key = self.key(cells, m) if key is None else key
        known = self.neighbour_memo.get(key)
        if known is None:
            self.neighbour_bounds += 1
            known = self.neighbour_memo[key] = float(neighbour_bound(self.stats, cells, m))
        return known

    def out_of_budget(self) -> bool:
        if not self.timed_out and (self.nodes >= self.max_nodes or time.monotonic() > self.deadline):
            self.timed_out = True
        return self.timed_out

    # ------------------------------------------------------------------ the search
    def solve(self, cells: np.ndarray, m: int, cutoff: float = np.inf, incumbent: tuple[float, object] | None = None
              ) -> tuple[float, float, object]:
        """(lower bound, cost of the best tree found, that tree) for at most ``m`` leaves over
        ``cells``. The bound is exact (equal to the cost) unless the search stopped at ``cutoff``
        (then it is at least the cutoff) or ran out of budget (then it is Bound 2)."""
        key = self.key(cells, m)
        hit = self.memo.get(key)
        if hit is not None and (hit[0] >= hit[1] or hit[0] >= cutoff):
            return hit
        if m >= 3 and cells.shape[0] > 1 and self.nodes >= self.stop_at:
            # The probe's own budget is spent: no new node; the box's scatter bound (valid for it).
            bound = self.scatter_bound(cells, m, cutoff, key)
            return (bound, np.inf, None) if hit is None else (max(bound, hit[0]), hit[1], hit[2])
        self.nodes += 1
        if m >= 3 and cells.shape[0] > 1:
            # Bounds 4-5 first: a side whose scatter already proves it reaches the cutoff (or the
            # incumbent) is not searched at all.
            upper, known = (np.inf, None) if incumbent is None else (float(incumbent[0]), incumbent[1])
            limit = min(cutoff, upper)
            bound = self.scatter_bound(cells, m, limit, key)
            if bound < limit and self.use_neighbour:
                bound = max(bound, self.neighbour_bound(cells, m, key))
            if bound >= limit:
                out: tuple[float, float, object] = (min(bound, upper), upper, known)
            else:
                self.depth += 1
                try:
                    lower, cost, tree = self._search(self.node(cells), m, cutoff, incumbent)
                finally:
                    self.depth -= 1
                out = (max(lower, min(bound, cost)), cost, tree)
        else:
            node = self.node(cells)
            if m == 1 or cells.shape[0] <= 1:
                out = (float(node.cost), float(node.cost), None)
            else:
                best, tree = self.best_two(node)
                out = (best, best, tree)
        if hit is not None:  # a search stopped earlier at a lower cutoff: keep the best of both
            tree = out[2] if out[1] <= hit[1] else hit[2]
            out = (max(out[0], hit[0]), min(out[1], hit[1]), tree)
        self.memo[key] = out
        return out

    def _side(self, node: SearchNode, f: int, p: int, side: int, leaves: int, exact, cutoff: float):
        """(lb, ub, tree) of one side of cut position p on f with at most ``leaves`` leaves;
        ``exact`` holds every position's one-leaf and two-leaf sides."""
        if leaves <= 2:
            value = float(exact[leaves - 1][side][p])
            if leaves == 1:
                return value, value, None
            g, b = exact[2][side][p]
            return value, value, (None if g < 0 else (int(g), int(b), None, 1, None))
        left, right = split_cells(self.codes, node.cells, f, int(node.positions[f][p]))
        return self.solve(left if side == 0 else right, leaves, cutoff)

    def _search(self, node: SearchNode, m: int, cutoff: float, incumbent) -> tuple[float, float, object]:
        best, tree = (np.inf, None) if incumbent is None else (float(incumbent[0]), incumbent[1])
        best_two, two_tree = self.best_two(node)  # at most two leaves is at most m leaves
        if best_two < best:
            best, tree = best_two, two_tree
        heap: list[tuple] = []
        costs = {}
        # Per (feature, left share): a valid lower bound at every cut position for each side (Bound 6).
        lows: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        if m >= 4 and len(node.positions) <= SPECTRAL_MAX_FEATURES and self.use_first_cut:
            node.prepare_first_cut()
        for f, positions in enumerate(node.positions):
            if positions.size == 0:
                continue
            if self.out_of_budget():  # features not yet scanned: no bound but 0 for this node
                return 0.0, float(best), tree
            one = node.side_costs(f)
            self.sweeps += 1
            lb2, la2, rb2, ra2, segments = node.two_leaf_sides(f)
            costs[f] = (one, (lb2, rb2), (la2, ra2))
            for j in range(1, m):
                if j <= 2 and m - j <= 2:  # both sides exact at every position: no search
                    total = costs[f][j - 1][0] + costs[f][m - j - 1][1]
                    p = int(np.argmin(total))
                    if total[p] < best:
                        best = float(total[p])
                        tree = (f, int(positions[p]), self._side(node, f, p, 0, j, costs[f], np.inf)[2], j,
                                self._side(node, f, p, 1, m - j, costs[f], np.inf)[2])
            for j, (low_left, low_right) in node.position_bounds(f, m, costs[f], segments, min(best, cutoff),
                                                                            self.use_slabs).items():
                lows[(f, j)] = (low_left, low_right)
                heapq.heappush(heap, (float((low_left + low_right).min()), f, j, 0, positions.size - 1, True,
                                      self.probe_nodes or 0))
                if self.depth == 1:
                    self.root_shares.append({"feature": f, "left_leaves": j, "positions": positions.size,
                                             "least": float((low_left + low_right).min()),
                                             "sums": low_left + low_right, "best": best})
        while heap:
            bound = heap[0][0]
            if bound >= min(best, cutoff) or self.out_of_budget() or self.nodes >= self.stop_at:
                break
            _, f, j, lo, hi, fresh, budget = heapq.heappop(heap)
            own_budget = budget > 0 and self.depth <= self.probe_depth and m <= self.probe_max_leaves and \
                max(j, m - j) >= self.probe_min_leaves
            low_left, low_right = lows[(f, j)]
            limit = min(best, cutoff)
            alive = lo + np.flatnonzero(low_left[lo:hi + 1] + low_right[lo:hi + 1] < limit)
            if alive.size == 0:
                continue
            if fresh and alive.size > FIRST_PROBES:
                spread = np.unique(np.linspace(0, alive.size - 1, FIRST_PROBES).round().astype(np.int64))
                probes = alive[spread].tolist()
            else:
                probes = [int(alive[alive.size // 2])]
            for mid in probes:
                if low_left[mid] + low_right[mid] >= limit:  # raised by an earlier probe of this batch
                    continue
                nodes_before, position_bound = self.nodes, float(low_left[mid] + low_right[mid])
                outer_stop = self.stop_at
                if own_budget:
                    self.stop_at = min(outer_stop, self.nodes + budget)
                try:
                    lb_left, ub_left, tree_left = self._side(node, f, mid, 0, j, costs[f], limit - low_right[mid])
                    lb_left = max(lb_left, float(low_left[mid]))
                    lb_right, ub_right, tree_right = self._side(node, f, mid, 1, m - j, costs[f], limit - lb_left)
                    lb_right = max(lb_right, float(low_right[mid]))
                    # Stopped by a probe's budget (this one's or an enclosing one's): a side may be unfinished.
                    stopped = self.nodes >= self.stop_at
                finally:
                    self.stop_at = outer_stop
                if self.depth == 1:
                    self.root_probes.append({
                        "feature": f, "left_leaves": j, "position": mid, "interval": (lo, hi), "interval_bound": bound,
                        "position_bound": position_bound, "left": (lb_left, ub_left), "right": (lb_right, ub_right),
                        "nodes": self.nodes - nodes_before, "nodes_after": self.nodes,
                        "budget": budget if own_budget else 0})
                if ub_left + ub_right < best:
                    best = ub_left + ub_right
                    tree = (f, int(node.positions[f][mid]), tree_left, j, tree_right)
                    limit = min(best, cutoff)
                # Bound 1: L_p holds L_mid for p >= mid, R_p holds R_mid for p <= mid (Bound 9: plus the slabs).
                node.carry(f, j, m, mid, (lb_left, lb_right), (low_left, low_right))
                unfinished = lb_left < ub_left or lb_right < ub_right
                if (self.timed_out or stopped) and unfinished and lb_left + lb_right < min(best, cutoff):
                    # The budget ran out inside a side: the position itself stays open with its bounds,
                    # to be probed again with twice the nodes when its own budget stopped it.
                    again = 2 * budget if own_budget else budget
                    heapq.heappush(heap, (lb_left + lb_right, f, j, mid, mid, False, again))
            # The gaps between probes (and before the first, after the last) with their bounds.
            edges = [int(alive[0]) - 1, *probes, int(alive[-1]) + 1]
            for a in range(len(edges) - 1):
                start, stop = edges[a] + 1, edges[a + 1] - 1
                if start <= stop:
                    bound = float((low_left[start:stop + 1] + low_right[start:stop + 1]).min())
                    if bound < min(best, cutoff):
                        heapq.heappush(heap, (bound, f, j, start, stop, False, budget))
        lower = min(best, heap[0][0]) if heap else best
        return float(lower), float(best), tree

    # ------------------------------------------------------------------ greedy incumbent
    def greedy(self, cells: np.ndarray, m: int) -> tuple[float, object]:
        """Best-first growth (the leaf whose best cut saves most is cut next; exact two-leaf
        cuts): a tree of at most m leaves and its cost, the search's first incumbent."""
        leaves = {0: cells}
        cuts: dict[int, tuple[int, int, int, int]] = {}
        heap: list[tuple[float, int, int, int]] = []
        fresh = [0]
        next_id = 1
        for _ in range(m - 1):
            for leaf in fresh:
                node = self.node(leaves[leaf])
                cost, two = self.best_two(node)
                if isinstance(two, tuple):
                    heapq.heappush(heap, (cost - float(node.cost), leaf, two[0], two[1]))
            if not heap:
                break
            _, leaf, f, b = heapq.heappop(heap)
            left, right = split_cells(self.codes, leaves.pop(leaf), f, b)
            leaves[next_id], leaves[next_id + 1] = left, right
            cuts[leaf] = (f, b, next_id, next_id + 1)
            fresh = [next_id, next_id + 1]
            next_id += 2

        total = float(sum(float(self.node(c).cost) for c in leaves.values()))
        return total, nested_from_cuts(cuts)

    def coordinate_bound(self, squares: np.ndarray, m: int) -> float:
        """Bound 3 over all cells: per coordinate, within-cell scatter plus the weighted 1-D
        m-means cost of the cells' means."""
        count = self.stats[:, 0]
        total = 0.0
        for c in range(squares.shape[1]):
            sums = self.stats[:, 2 + c]
            total += float(np.maximum(squares[:, c] - sums * sums / count, 0.0).sum())
            total += float(weighted_kmeans_1d(sums / count, count, int(m)))
        return total
