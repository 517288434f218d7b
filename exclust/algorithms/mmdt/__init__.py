"""The MMDT family: trees from a mixture's means and spreads (papers 000 and 002).

Lives here: ``mmdt.py`` (MMDT, every threshold variant), ``bounds.py`` (explainability-to-noise
ratio and the papers' bounds), ``cavs.py`` and ``cav_fitting.py`` (concept activation vectors),
``concept.py`` (Concept-MMDT, Concept-CART), ``similarity.py`` (product kernels, random Fourier
features, the kernel price), ``kernel_mmdt.py`` (interval cuts, paper 002 Sec. 5), and the numba
kernels ``_threshold_search.py``, ``_concept_grams.py`` and ``_kernel_moments.py``.
"""
