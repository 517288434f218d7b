"""How good a tree is: the fused scoring pass, the typed score, prices, cost curves and drift.

Lives here: ``metrics.py`` (``score``), ``score_pass.py`` (the one pass), ``scorecard.py``
(``Score``, ``RunFacts``, ``MEASURES``), ``kmedians_cost.py`` (the k-medians price by median
bisection), ``curves.py`` and ``curve_pass.py`` (cost against the number of leaves, for trees
the caller fitted), ``drift.py`` (population-stability index per leaf), and the numba kernels
``_score_block.py`` and ``_median_histograms.py``.
May import: the data plane, sources, the tree; never reference clusterings, algorithms or jobs.
"""
