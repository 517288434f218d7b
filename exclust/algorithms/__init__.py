"""Tree algorithms: each builds a ``ThresholdTree`` on ``exclust.estimator.TreeExplainer``.

Grouped by family: ``histogram/`` (IMM, ExKMC, ExShallow, KDTree on one split-search engine),
``mmdt/`` (MMDT, Concept-MMDT, kernel MMDT and their bounds), ``search/`` (lookahead and local
search, the exact optimum on small instances, trees from labels alone), ``random_cut.py`` (random
threshold cuts with a guaranteed expected price) and ``cart.py`` (scikit-learn's decision tree, a
baseline).
Each is reached by the jobs through one entry of ``exclust.jobs.registry``.
May import: the data plane, sources, the tree and estimator base, scoring and the reference
clusterings; never the jobs, the report or the CLI.
"""
