"""The algorithm registry: every tree algorithm and MMDT threshold variant, named once.

The CLI's choices, the flow's parameter enumerations, the explain job (``pipeline.build_tree``,
the cost curve, the run's facts) and the report's names all read this table; none of them names
an algorithm. Adding an algorithm is its own module plus one ``register(Algorithm(...))``: the
entry says what the algorithm reads from a run (``needs``), how the run's options map onto its
parameters (``options``), whether it draws a cost curve and against which algorithms
(``curve``), and, for the few that fit their own base clustering, what else they need.

Algorithms outside exclust register the same way from a module named in the ``EXCLUST_PLUGINS``
environment variable (comma-separated module names), imported when this registry is first
imported: the CLI, the flows' forms and the workers then all see them.
"""
from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exclust.errors import InputError
from exclust.jobs.option_spec import CHOICE, NAMES, NUMBER, WHOLE, Option, by_name

PLUGINS_ENV = "EXCLUST_PLUGINS"

# What an algorithm reads from the reference clustering of a run.
SUMMARY = "summary"  # the mixture's means and variances (MMDT): no pass over the data
CENTERS = "centers"  # the reference centers plus passes over the data (IMM, ExKMC, ...)
LABELS = "labels"  # the reference labels of every row (CART)
OWN = "own"  # fits its own base clustering unless a reference is given (Concept-MMDT, kernel MMDT)


def _fit_on_summary(est, data, ref) -> None:
    est.fit(ref.summary)


def _fit_on_centers(est, data, ref) -> None:
    # Estimators take the Dataset itself, so their trees carry the input's feature names. Centers
    # fitted on other columns (``cluster_on``) live in those columns' space: Z carries them.
    if getattr(data, "cluster_X", None) is not None:
        if "Z" not in inspect.signature(est.fit).parameters:
            raise InputError(f"{type(est).__name__} cuts the columns its centers live in, but this run's clustering "
                             f"is fitted on {data.cluster_names}, not on the features {data.feature_names}: choose an "
                             "algorithm that prices cuts in the clustering's columns (fit(..., Z=...)), or cluster on "
                             "numeric features only")
        est.fit(data, ref.centers, Z=data.cluster_X)
    else:
        est.fit(data, ref.centers)


def _fit_on_labels(est, data, ref) -> None:
    est.fit(data, ref.labels)


def _fit_own(est, data, ref) -> None:
    est.fit(data, None if ref is None else ref.labels)


# How an estimator is fitted in a run, by what it reads (a table, not a chain of ifs).
FIT_BY_NEED: dict[str, Callable[[Any, Any, Any], None]] = {
    SUMMARY: _fit_on_summary, CENTERS: _fit_on_centers, LABELS: _fit_on_labels, OWN: _fit_own,
}


def _imported(target: str) -> Any:
    """The object a "module:name" string names, imported now."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


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
    # The algorithms whose trees the report's cost curve (cost against the number of leaves)
    # shows for a run of this one; empty: no curve. Each named estimator gives its prefix trees
    # through its ``prefix_trees`` class method.
    curve: tuple[str, ...] = ()
    # In the report's standing table (``exclust.jobs.explain.standing``): a greedy tree built from the run's
    # centers (or their labels) that every center-based run is set beside, fitted on the run's sample.
    standing: bool = False
    objectives: tuple[str, ...] = ("kmeans",)  # reference costs it can minimise
    threshold: bool = False  # reads --threshold (the run's facts report it)
    options: Callable[[Any], dict[str, Any]] = field(default=lambda config: {}, compare=False)
    # Constructor arguments computed from the run's data (Concept-MMDT's concept vectors: a pass or
    # more): "module:function" taking (data, config), imported only when used, like the estimator.
    prepare: str | None = None
    # Options of the run this algorithm cannot do without: (ExplainConfig field, what it holds).
    requires: tuple[tuple[str, str], ...] = ()
    # OWN algorithms: what the report calls the base clustering they fit themselves.
    own_reference: str | None = None
    # The coordinates the tree reads, when not the features (Concept-MMDT: concept coordinates).
    space: Callable[[Any], Callable[[Any], Any]] | None = field(default=None, compare=False)
    # The run options only this algorithm (and others naming the same Option) reads: they join the explain
    # schema (exclust.jobs.options), so the config, --help and the flow form show them.
    own_options: tuple[Option, ...] = ()

    @property
    def cost_curve(self) -> bool:
        return bool(self.curve)

    def estimator_class(self) -> type[Any]:
        return _imported(self.estimator)

    def make(self, config: Any, data: Any = None) -> Any:
        """A new, unfitted estimator for the run ``config`` (an ExplainConfig) on ``data``."""
        extra = _imported(self.prepare)(data, config) if self.prepare is not None else {}
        return self.estimator_class()(**self.options(config), **extra)

    def check_required(self, config: Any) -> None:
        """InputError naming the first option this algorithm needs that the run leaves empty."""
        for option, what in self.requires:
            if not getattr(config, option, None):
                raise InputError(f"{self.name} needs {what}: pass {{fix}}", option=option, value="COL1,COL2")

    def fit_in_run(self, est: Any, data: Any, ref: Any) -> Any:
        """Fit ``est`` on what it reads from the run (the reference's summary, centers or labels).
        A mixture's algorithms (a summary, or a base clustering of their own) read numbers in
        every cell: category features and missing values are refused first, in one line."""
        if self.needs in (SUMMARY, OWN):
            from exclust.sources.frames import refuse_category_features

            refuse_category_features(data, self.title, "fits a mixture over numbers")
        FIT_BY_NEED[self.needs](est, data, ref)
        return est


@dataclass(frozen=True)
class Threshold:
    """One MMDT threshold variant (paper 000 Alg. 1 and App. B; paper 002 eq. 4-6)."""

    name: str
    summary: str


THRESHOLDS: dict[str, Threshold] = {t.name: t for t in (
    Threshold("midpoint", "halfway between the two means the cut separates"),
    Threshold("gaussian", "minimises the Gaussian tail bound (paper 002, eq. 6)"),
    Threshold("chebyshev", "minimises the Chebyshev tail bound (paper 002, eq. 5)"),
    Threshold("exact",
              "minimises the exact Gaussian mis-assignment probability, each component with its own sigma (eq. 4)"),
    Threshold("random", "uniform between the two means (paper 000, App. B)"),
)}


# The options some algorithms read (each named on the entries that read it, in ``own_options``).
KERNELS = ("gaussian", "laplace")  # kernel MMDT's per-axis kernels (exclust.algorithms.mmdt.similarity.KERNELS)
THRESHOLD = Option("threshold", CHOICE, "exact", "MMDT threshold variant", choices=lambda: tuple(THRESHOLDS),
                   describe_choices=lambda: {t.name: t.summary for t in THRESHOLDS.values()},
                   flow_type="ThresholdVariant")
LEAVES = Option("leaves", WHOLE, None, "leaf budget", unset_means="n_clusters", minimum=1, maximum=100_000,
                flow_unset=0)
DEPTH_FACTOR = Option("depth_factor", NUMBER, 0.03, "penalty on depth (0: ExGreedy)", minimum=0)
TRIALS = Option("trials", WHOLE, 1, "trees drawn; the cheapest on the data is kept", minimum=1, maximum=10_000)
CONCEPTS = Option("concepts", NAMES, None, "concept label columns, one per concept, comma-separated")
KERNEL = Option("kernel", CHOICE, "gaussian", "per-axis kernel", choices=lambda: KERNELS, flow_type="Kernel")
BANDWIDTH = Option("bandwidth", NUMBER, None, "kernel bandwidth", unset_means="chosen from the data", minimum=0,
                   flow_unset=0.0)

DEFAULT_ALGORITHM = "mmdt"  # what a run builds when it names none
OBJECTIVES = ("kmeans", "kmedians")  # the reference cost a tree is built to keep low
PAPER_003_CURVE = ("exkmc", "cart", "kdtree")  # paper 003, Figure 2: ExKMC against its baselines


def _leaves(config: Any) -> int:
    return int(config.leaves or config.k)


def _objective(config: Any) -> dict[str, Any]:
    return {"objective": config.objective}


ALGORITHMS: dict[str, Algorithm] = {}


def register(entry: Algorithm) -> Algorithm:
    """Add ``entry`` to the registry (its name must be new, its ``needs`` one of the four kinds)."""
    if entry.name in ALGORITHMS:
        raise ValueError(f"an algorithm named {entry.name!r} is registered already")
    if entry.needs not in FIT_BY_NEED:
        raise ValueError(f"needs must be one of {', '.join(FIT_BY_NEED)}, not {entry.needs!r}")
    by_name([*own_options(), *entry.own_options])  # one name, one meaning, across entries
    late = [o.name for o in entry.own_options if _SCHEMA_BUILT and o.name not in _SCHEMA_BUILT]
    if late:
        raise ValueError(f"{entry.name}'s own option(s) {late} come after the explain options were built: register it "
                         f"before exclust.jobs.config is imported (a plugin named in {PLUGINS_ENV} is)")
    ALGORITHMS[entry.name] = entry
    return entry


def own_options() -> tuple[Option, ...]:
    """Every registered algorithm's own options, each once, in registration order."""
    return tuple(by_name([o for entry in ALGORITHMS.values() for o in entry.own_options]).values())


def used_by() -> dict[str, list[str]]:
    """Each algorithm option's name -> the algorithms that read it (what --help says beside it)."""
    users: dict[str, list[str]] = {}
    for entry in ALGORITHMS.values():
        for option in entry.own_options:
            users.setdefault(option.name, []).append(entry.name)
    return users


# The option names the explain schema was built with (exclust.jobs.options), once it is built.
_SCHEMA_BUILT: set[str] = set()


def unregister(name: str) -> None:
    """Remove an entry (tests that register one of their own clean up with it)."""
    ALGORITHMS.pop(name, None)


for _entry in (
    Algorithm("mmdt", "MMDT", "exclust.algorithms.mmdt.mmdt:MMDT",
              "cuts between the mixture's means, from its means and variances alone", SUMMARY, "000 Alg. 1; 002 Alg. 1",
              threshold=True, options=lambda c: {"threshold": c.threshold, "random_state": c.random_state},
              own_options=(THRESHOLD,)),
    Algorithm("imm", "IMM", "exclust.algorithms.histogram.imm:IMM",
              "fewest points separated from their center at each cut, k leaves", CENTERS, "003 (IMM base tree)",
              curve=PAPER_003_CURVE, objectives=OBJECTIVES, standing=True,
              options=lambda c: {"n_clusters": c.k, "random_state": c.random_state, **_objective(c)}),
    Algorithm("exkmc", "ExKMC", "exclust.algorithms.histogram.exkmc:ExKMC",
              "IMM, then leaves added by the surrogate cost until the leaf budget", CENTERS, "003 Alg. 1",
              leaf_budget=True, curve=PAPER_003_CURVE, objectives=OBJECTIVES, standing=True, own_options=(LEAVES,),
              options=lambda c: {"n_clusters": c.k, "max_leaves": _leaves(c), "random_state": c.random_state,
                                 **_objective(c)}),
    Algorithm("exshallow", "ExShallow", "exclust.algorithms.histogram.exshallow:ExShallow",
              "IMM-like k-leaf tree whose cuts also pay for depth (shallower rules)", CENTERS,
              "Laber, Murtinho and Oliveira, Pattern Recognition 2023", objectives=OBJECTIVES, standing=True,
              own_options=(DEPTH_FACTOR,),
              options=lambda c: {"n_clusters": c.k, "depth_factor": c.depth_factor, "random_state": c.random_state,
                                 **_objective(c)}),
    Algorithm("exgreedy", "ExGreedy", "exclust.algorithms.histogram.exgreedy:ExGreedy",
              "k-leaf tree, each cut the one of least k-means (or k-medians) cost after it", CENTERS,
              "Laber and Murtinho, ICML 2021", objectives=OBJECTIVES, standing=True,
              options=lambda c: {"n_clusters": c.k, "random_state": c.random_state, **_objective(c)}),
    Algorithm("tree-search", "TreeSearch", "exclust.algorithms.search.tree_search:TreeSearch",
              "k-leaf tree searched by lookahead and local search from the greedy trees (least k-means cost)",
              CENTERS, "issue 21; Murthy and Salzberg, IJCAI 1995 (lookahead)", leaf_budget=True, own_options=(LEAVES,),
              options=lambda c: {"n_clusters": c.k, "n_leaves": _leaves(c), "random_state": c.random_state}),
    Algorithm("optimal", "OptimalTree", "exclust.algorithms.search.optimal:OptimalTree",
              "least k-means cost of any k-leaf tree at the bin edges, by branch and bound, with a proven lower bound",
              CENTERS, "issue 30; Mazumder, Meng and Wang, ICML 2022 (Quant-BnB)",
              options=lambda c: {"n_clusters": c.k, "random_state": c.random_state}),
    Algorithm("best", "best tree", "exclust.algorithms.search.tree_search:BestTree",
              "the cheapest k-leaf tree on all rows: every greedy rule priced on all rows, the cheapest improved "
              "by search (k-means)", CENTERS, "issue 27",
              options=lambda c: {"n_clusters": c.k, "random_state": c.random_state}),
    Algorithm("random-cut", "RandomCutTree", "exclust.algorithms.random_cut:RandomCutTree",
              "random threshold cuts from the centers alone, with a guaranteed expected price", CENTERS,
              "Gupta, Pittu, Svensson and Yuan, FOCS 2023; Makarychev and Shan, ICML 2021", objectives=OBJECTIVES,
              own_options=(TRIALS,),
              options=lambda c: {"n_clusters": c.k, "n_trials": c.trials, "random_state": c.random_state,
                                 **_objective(c)}),
    Algorithm("kdtree", "KDTree", "exclust.algorithms.histogram.kdtree:KDTree",
              "median cuts of the widest feature (a baseline)", CENTERS, "003 App. B.1",
              leaf_budget=True, curve=PAPER_003_CURVE, standing=True, own_options=(LEAVES,),
              options=lambda c: {"n_clusters": c.k, "max_leaves": _leaves(c), "random_state": c.random_state}),
    Algorithm("cart", "CART", "exclust.algorithms.cart:CART",
              "scikit-learn's decision tree on the reference labels (a baseline)", LABELS, "000, 003 (baseline)",
              leaf_budget=True, curve=PAPER_003_CURVE, standing=True, own_options=(LEAVES,),
              options=lambda c: {"max_leaf_nodes": _leaves(c), "random_state": c.random_state}),
    Algorithm("label-tree", "LabelTree", "exclust.algorithms.search.label_tree:LabelTree",
              "fewest mistakes against any clustering's labels, at least one leaf per cluster (noise left out)",
              LABELS, "issue 21; Murthy and Salzberg, IJCAI 1995 (lookahead)", leaf_budget=True, own_options=(LEAVES,),
              options=lambda c: {"n_clusters": c.k, "n_leaves": _leaves(c), "random_state": c.random_state}),
    Algorithm("concept-mmdt", "Concept-MMDT", "exclust.algorithms.mmdt.concept:ConceptMMDT",
              "MMDT over concept activation vectors of an embedding", OWN, "000 Alg. 2", threshold=True,
              options=lambda c: {"n_components": c.k, "threshold": c.threshold, "random_state": c.random_state},
              prepare="exclust.algorithms.mmdt.concept:concept_vectors_for_run",
              requires=(("concepts", "concept label columns, one per concept"),),
              own_reference="gmm", space=lambda est: est.cavs.project, own_options=(THRESHOLD, CONCEPTS)),
    Algorithm("kernel-mmdt", "kernel MMDT", "exclust.algorithms.mmdt.kernel_mmdt:KernelMMDT",
              "interval cuts explaining kernel k-means", OWN, "002 Sec. 5", threshold=True,
              options=lambda c: {"n_clusters": c.k, "kernel": c.kernel, "random_state": c.random_state,
                                 **({} if c.bandwidth is None else {"bandwidth": c.bandwidth})},
              own_reference="kernel k-means (random Fourier features)", own_options=(THRESHOLD, KERNEL, BANDWIDTH)),
):
    register(_entry)


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


def standing() -> tuple[str, ...]:
    """The algorithms a center-based run's tree is set beside in the report (``Algorithm.standing``)."""
    return tuple(name for name, entry in ALGORITHMS.items() if entry.standing)


def titles() -> dict[str, str]:
    """Every registered name with its papers' spelling (what the report shows)."""
    return {**OTHER_TITLES, **{name: entry.title for name, entry in ALGORITHMS.items()}}


def _load_plugins() -> None:
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise InputError(f"{PLUGINS_ENV} names {module!r}, which cannot be imported: {exc}") from None


_load_plugins()
