"""Reference clusterings, the clusterings a tree explains, fitted on Dask: k-means, a Gaussian
mixture by EM, k-medians with exact medians; and ``MixtureSummary``, all MMDT reads of one.

Lives here: ``kmeans.py``, ``gaussian_mixture.py``, ``kmedians.py``, ``seeding.py`` (k-means||),
``base.py`` (what the three share), ``summary.py`` (``MixtureSummary``), ``passes.py`` (each fit's
per-block work, shipped to the workers), and their numba kernels ``_lloyd.py`` and ``_gaussian_estep.py``.
The workers import ``passes.py`` and the kernels only: never the estimators' modules, which pull in
scikit-learn (about 1.2 s per worker process). That is why the names below are imported lazily.
May import: the data plane, sources, the tree and estimator base, scoring; never algorithms or jobs.
"""
from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "KMeans": "exclust.reference.kmeans",
    "kmeans_parallel_init": "exclust.reference.kmeans",
    "GaussianMixture": "exclust.reference.gaussian_mixture",
    "KMedians": "exclust.reference.kmedians",
    "MixtureSummary": "exclust.reference.summary",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'exclust.reference' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups find it without this function
    return value
