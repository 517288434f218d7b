"""The search family: trees found by searching beyond one greedy cut per node, and the optimum.

Lives here: ``tree_search.py`` (``TreeSearch``: lookahead over the best few cuts, then local search
from the greedy trees, on a uniform sample of the rows in memory), ``optimal_tree.py`` (the exact
best k-leaf tree by k-means cost on small instances: the yardstick of the tests and benchmarks),
``label_tree.py`` (``LabelTree``: a small tree explaining any clustering from its labels alone),
and the numba kernel ``_tree_search.py`` (every cut's cost at one node).
"""
