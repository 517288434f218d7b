"""exclust: explain clusterings of large datasets with small axis-aligned decision trees, on Dask.

Public names are imported lazily, so ``import exclust`` stays fast and a CLI call pays only for
the parts it uses. Every algorithm of the registry (``exclust.jobs.registry``) has its class here
(``tests/test_public_api.py`` checks it).

Lives here: ``errors.py`` (the errors raised on purpose), ``estimator.py`` (the estimators' base),
``cli.py`` (the ``exclust`` command), and the packages by layer (ARCHITECTURE.md): ``dataplane/``,
``sources/``, ``tree/``, ``outputs/``, ``scoring/``, ``reference/``, ``algorithms/``, ``report/``,
``jobs/``, and ``datasets/`` (data exclust makes, beside the core).
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
    "Dataset": "exclust.sources.dataset",
    "InputError": "exclust.errors",
    "load_dataset": "exclust.sources.dataset",
    # reference clusterings and their summaries
    "MixtureSummary": "exclust.reference.summary",
    "GaussianMixture": "exclust.reference",
    "KMeans": "exclust.reference",
    "KMedians": "exclust.reference.kmedians",
    # tree algorithms
    "MMDT": "exclust.algorithms.mmdt.mmdt",
    "ConceptMMDT": "exclust.algorithms.mmdt.concept",
    "ConceptCART": "exclust.algorithms.mmdt.concept",
    "fit_cavs": "exclust.algorithms.mmdt.cav_fitting",
    "ConceptActivationVectors": "exclust.algorithms.mmdt.cavs",
    "KernelMMDT": "exclust.algorithms.mmdt.kernel_mmdt",
    "IMM": "exclust.algorithms.histogram.imm",
    "ExKMC": "exclust.algorithms.histogram.exkmc",
    "ExShallow": "exclust.algorithms.histogram.exshallow",
    "ExGreedy": "exclust.algorithms.histogram.exgreedy",
    "TreeSearch": "exclust.algorithms.search.tree_search",
    "LabelTree": "exclust.algorithms.search.label_tree",
    "OptimalTree": "exclust.algorithms.search.optimal",
    "BestTree": "exclust.algorithms.search.tree_search",
    "CART": "exclust.algorithms.cart",
    "KDTree": "exclust.algorithms.histogram.kdtree",
    "RandomCutTree": "exclust.algorithms.random_cut",
    # scoring and theory
    "score": "exclust.scoring.metrics",
    "explainability_to_noise_ratio": "exclust.algorithms.mmdt.bounds",
    "mmdt_bounds": "exclust.algorithms.mmdt.bounds",
    "kernel_price": "exclust.algorithms.mmdt.similarity",
    "cost_ratio_curve": "exclust.jobs.explain.cost_curve",
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
    # The public names and the version, each once: not the module's own imports or the subpackages
    # that importing a public name loads.
    return sorted({*__all__, "__version__"})
