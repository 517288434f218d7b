"""The search family: trees found by searching beyond one greedy cut per node, and the optimum.

Lives here: ``tree_search.py`` (``TreeSearch``: lookahead over the best few cuts, then local search
from the greedy trees, on a uniform sample of the rows in memory, proposing trees; ``BestTree``, the
``best`` algorithm) with ``lookahead.py`` (that search on the sample, its effort bounded),
``all_rows.py`` (every choice between the proposals and the greedy trees made on all rows),
``refine.py`` (the local search on all rows), ``subtree_moves.py`` (the lookahead on the small
subtrees of the cheapest start beyond 12 leaves, priced on all rows), ``row_statistics.py`` (the
rows kept where they live and the passes that price trees and cuts on them), ``category_cuts.py`` (set cuts on category
features and cuts learning where missing values go), ``optimal_tree.py`` (the exact best k-leaf tree
by k-means cost on small instances: the yardstick of the tests and benchmarks), ``label_tree.py``
(``LabelTree``: a small tree explaining any clustering from its labels alone), ``optimal.py``
(``OptimalTree``: the proven optimum at the bin edges, or a proven lower bound) with
``optimal_bnb.py`` (its branch and bound and the bounds, each proved), ``optimal_node.py`` (one box
of that search: its cut positions' exact small sides and their bounds) and
``optimal_cells.py`` (the rows' cell statistics it searches), and the numba kernels
``_tree_search.py`` (every cut's cost at one node), ``_leaf_statistics.py`` (per-leaf moments,
plain and binned) and ``_optimal_bounds.py`` (the branch and bound's sweeps and 1-D bounds), with ``_scatter_bounds.py``
(its bounds from a box's scatter matrix, for sides of three or more leaves) and
``_neighbour_bound.py`` (its bound from each cell's nearest cells, where features are few and
leaves many) and ``_first_cut_bound.py`` (its bound over a side's first cut, for every cut
position's sides of three or more leaves) and ``_slab_bound.py`` (a side's bound carried along a
feature's positions with the slabs of cells in between), and ``optimal_incumbent.py`` (its
center-guided first tree).
"""
