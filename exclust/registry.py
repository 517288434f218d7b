"""The algorithm registry: every tree algorithm and MMDT threshold variant, named once.

The CLI's choices, the flow's parameter enumerations, ``pipeline.build_tree`` and the report's
names all read this table. Adding an algorithm touches its own module and one entry here: the
entry says what the algorithm needs from a run (the mixture summary, the reference centers, the
reference labels, or nothing: it fits its own base clustering) and how the run's options map
onto the estimator's parameters.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from exclust.errors import InputError

# What an algorithm reads from the reference clustering of a run.
SUMMARY = "summary"  # the mixture's means and variances (MMDT): no pass over the data
CENTERS = "centers"  # the reference centers plus passes over the data (IMM, ExKMC, ...)
LABELS = "labels"  # the reference labels of every row (CART)
OWN = "own"  # fits its own base clustering unless a reference is given (Concept-MMDT, kernel MMDT)


@dataclass(frozen=True)
class Algorithm:
    """One tree algorithm as a run sees it."""

    name: str  # the value of --algorithm and of the flow's `algorithm` parameter
    title: str  # the papers' spelling, used in reports
    estimator: str  # "module:Class", imported only when used
    summary: str  # one line for --help, the flow form and the report
    needs: str  # SUMMARY | CENTERS | LABELS | OWN
    paper: str  # where it comes from
    leaf_budget: bool = False  # takes --leaves (more leaves than clusters)
    cost_curve: bool = False  # data-driven: the report shows its cost against the number of leaves
    objectives: tuple[str, ...] = ("kmeans",)  # reference costs it can minimise
    options: Callable[[Any], dict[str, Any]] = field(default=lambda config: {}, compare=False)

    def estimator_class(self) -> type:
        module, _, name = self.estimator.partition(":")
        return getattr(importlib.import_module(module), name)

    def make(self, config: Any) -> Any:
        """A new, unfitted estimator for the run ``config`` (an ExplainConfig)."""
        return self.estimator_class()(**self.options(config))


@dataclass(frozen=True)
class Threshold:
    """One MMDT threshold variant (paper 000 Alg. 1 and App. B; paper 002 eq. 4-6)."""

    name: str
    summary: str


THRESHOLDS: dict[str, Threshold] = {t.name: t for t in (
    Threshold("midpoint", "halfway between the two means the cut separates"),
    Threshold("gaussian", "minimises the Gaussian tail bound (paper 002, eq. 6)"),
    Threshold("chebyshev", "minimises the Chebyshev tail bound (paper 002, eq. 5)"),
    Threshold("exact", "minimises the exact Gaussian mis-assignment probability, each component with its own sigma (eq. 4)"),
    Threshold("random", "uniform between the two means (paper 000, App. B)"),
)}


OBJECTIVES = ("kmeans", "kmedians")  # the reference cost a tree is built to keep low


def _leaves(config: Any) -> int:
    return int(config.leaves or config.k)


def _objective(config: Any) -> dict[str, Any]:
    return {"objective": config.objective}


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("mmdt", "MMDT", "exclust.algorithms.mmdt:MMDT",
              "cuts between the mixture's means, from its means and variances alone", SUMMARY, "000 Alg. 1; 002 Alg. 1",
              options=lambda c: {"threshold": c.threshold, "random_state": c.random_state}),
    Algorithm("imm", "IMM", "exclust.algorithms.imm:IMM",
              "fewest points separated from their center at each cut, k leaves", CENTERS, "003 (IMM base tree)",
              cost_curve=True, objectives=OBJECTIVES,
              options=lambda c: {"n_clusters": c.k, "random_state": c.random_state, **_objective(c)}),
    Algorithm("exkmc", "ExKMC", "exclust.algorithms.exkmc:ExKMC",
              "IMM, then leaves added by the surrogate cost until the leaf budget", CENTERS, "003 Alg. 1",
              leaf_budget=True, cost_curve=True, objectives=OBJECTIVES,
              options=lambda c: {"n_clusters": c.k, "max_leaves": _leaves(c), "random_state": c.random_state,
                                 **_objective(c)}),
    Algorithm("exshallow", "ExShallow", "exclust.algorithms.exshallow:ExShallow",
              "IMM-like k-leaf tree whose cuts also pay for depth (shallower rules)", CENTERS,
              "Laber, Murtinho and Oliveira, Pattern Recognition 2023", objectives=OBJECTIVES,
              options=lambda c: {"n_clusters": c.k, "depth_factor": c.depth_factor, "random_state": c.random_state,
                                 **_objective(c)}),
    Algorithm("random-cut", "RandomCutTree", "exclust.algorithms.random_cut:RandomCutTree",
              "random threshold cuts from the centers alone, with a guaranteed expected price", CENTERS,
              "Gupta, Pittu, Svensson and Yuan, FOCS 2023; Makarychev and Shan, ICML 2021", objectives=OBJECTIVES,
              options=lambda c: {"n_clusters": c.k, "n_trials": c.trials, "random_state": c.random_state,
                                 **_objective(c)}),
    Algorithm("kdtree", "KDTree", "exclust.algorithms.kdtree:KDTree",
              "median cuts of the widest feature (a baseline)", CENTERS, "003 App. B.1",
              leaf_budget=True, cost_curve=True,
              options=lambda c: {"n_clusters": c.k, "max_leaves": _leaves(c), "random_state": c.random_state}),
    Algorithm("cart", "CART", "exclust.algorithms.cart:CART",
              "scikit-learn's decision tree on the reference labels (a baseline)", LABELS, "000, 003 (baseline)",
              leaf_budget=True, cost_curve=True,
              options=lambda c: {"max_leaf_nodes": _leaves(c), "random_state": c.random_state}),
    Algorithm("concept-mmdt", "Concept-MMDT", "exclust.algorithms.concept:ConceptMMDT",
              "MMDT over concept activation vectors of an embedding", OWN, "000 Alg. 2"),
    Algorithm("kernel-mmdt", "kernel MMDT", "exclust.algorithms.kernel_mmdt:KernelMMDT",
              "interval cuts explaining kernel k-means", OWN, "002 Sec. 5",
              options=lambda c: {"n_clusters": c.k, "kernel": c.kernel, "random_state": c.random_state,
                                 **({} if c.bandwidth is None else {"bandwidth": c.bandwidth})}),
)}


def algorithm(name: str) -> Algorithm:
    """The registry entry of ``name``; InputError listing the choices when unknown."""
    try:
        return ALGORITHMS[str(name)]
    except KeyError:
        raise InputError(f"unknown algorithm {name!r}; choose one of {', '.join(ALGORITHMS)}") from None


def threshold(name: str) -> Threshold:
    try:
        return THRESHOLDS[str(name)]
    except KeyError:
        raise InputError(f"unknown MMDT threshold {name!r}; choose one of {', '.join(THRESHOLDS)}") from None


# Estimators that trees can come from without being a run's --algorithm (baselines of the papers' tables).
OTHER_TITLES = {"concept-cart": "Concept-CART"}


def title(name: str) -> str:
    """The papers' spelling of an algorithm name in any case (``exkmc`` -> ``ExKMC``); unknown names as given."""
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    entry = ALGORITHMS.get(key)
    return entry.title if entry is not None else OTHER_TITLES.get(key, str(name))
