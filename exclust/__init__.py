"""exclust: explain clusterings of large datasets with small axis-aligned decision trees, on Dask.

Public names are imported lazily, so ``import exclust`` stays fast and a CLI call pays only for
the parts it uses.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    # the tree type and input
    "ThresholdTree": "exclust.tree",
    "TreeBuilder": "exclust.tree",
    "TreeFormatError": "exclust.tree",
    "Dataset": "exclust.data",
    "InputError": "exclust.data",
    "load_dataset": "exclust.data",
    # reference clusterings and their summaries
    "MixtureSummary": "exclust.mixture",
    "GaussianMixture": "exclust.reference",
    "KMeans": "exclust.reference",
    "KMedians": "exclust.kmedians",
    # tree algorithms
    "MMDT": "exclust.algorithms.mmdt",
    "ConceptMMDT": "exclust.algorithms.concept",
    "ConceptCART": "exclust.algorithms.concept",
    "fit_cavs": "exclust.algorithms.cav_fitting",
    "ConceptActivationVectors": "exclust.algorithms.cavs",
    "KernelMMDT": "exclust.algorithms.kernel_mmdt",
    "IMM": "exclust.algorithms.imm",
    "ExKMC": "exclust.algorithms.exkmc",
    "ExShallow": "exclust.algorithms.exshallow",
    "CART": "exclust.algorithms.cart",
    "KDTree": "exclust.algorithms.kdtree",
    "RandomCutTree": "exclust.algorithms.random_cut",
    # scoring and theory
    "score": "exclust.metrics",
    "explainability_to_noise_ratio": "exclust.bounds",
    "mmdt_bounds": "exclust.bounds",
    "kernel_price": "exclust.kernels",
    "cost_ratio_curve": "exclust.curves",
    # what a person looks at
    "render_report": "exclust.report",
    "save_figure": "exclust.report",
    # what a user can fix: a bad estimator parameter
    "ParameterError": "exclust.errors",
    # synthetic data of the papers
    "make_synthetic_i": "exclust.datasets.synthetic",
    "make_synthetic_ii": "exclust.datasets.synthetic",
    "make_gmm_dataset": "exclust.datasets.synthetic",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'exclust' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
