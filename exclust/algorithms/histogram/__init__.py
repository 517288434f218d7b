"""The histogram family: trees grown from binned histograms merged over parts (IMM, ExKMC,
ExShallow, ExGreedy, KDTree), on one split-search engine.

Lives here: ``base.py`` (what the center trees share: ``CenterTreePredictor``, the constraints,
the fit preamble ``prepare_fit``), ``binning.py`` (bin edges and codes, category and missing
bins), ``code_tree.py`` (the tree on codes: threshold and set cuts, missing sides, routing
memory), ``engine.py`` (encoded parts, the one histogram pass), ``kept_values.py`` (the parts'
per-center values, held or recomputed in every pass), ``criteria.py`` (split criteria
as objects the engine takes: what a pass sums and how cuts are scored), ``cut_search.py`` (the
cut search on a node's histograms: set cuts, missing sides), ``imm.py`` (paper 003 Sec. 2),
``exkmc.py`` (paper 003 Alg. 1-2), ``exshallow.py`` (Laber, Murtinho and Oliveira 2023),
``exgreedy.py`` (Laber and Murtinho 2021, ExGreedy), ``shallow_derive.py`` (ExGreedy's large
children derived from their parents' histograms), ``kdtree.py`` (paper 003 App. B.1), and the
numba kernels ``_bin_coding.py``, ``_code_histograms.py``, ``_shallow_cut.py``, ``_shallow_derive.py``
(the derivation's changes) and ``_shallow_sets.py`` (ExShallow's set cuts on category features).
"""
