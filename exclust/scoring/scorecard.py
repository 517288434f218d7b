"""The typed score: every measure of a run, with what it means, in ONE catalogue.

``Score`` is what scoring computes (``exclust.scoring.metrics.evaluate``), ``RunFacts`` what the explain
job adds around it (the algorithm, the reference, timings, passes, theory); metrics.json is
``Score.as_dict()`` updated by ``RunFacts.as_dict()``. Each field is a ``measure``: its key is the
field's name (the key of metrics.json), and its metadata holds a short label, a one-line meaning,
which direction is better, its group and whether it is a count. ``MEASURES`` (key -> ``Measure``)
is derived from both classes: the report's table, the Markdown digest, the CLI's summary line and
the flow's artifacts read their labels, meanings and directions from it.

A measure a run cannot compute (no reference, no centers, no truth, the k-medians price off)
keeps its default, None (or 0 for counts of what was not there). Every value is plain Python
(int, float, bool, str, list, dict, None), never a numpy scalar or array: ``__post_init__``
converts them, so ``exclust.score`` and metrics.json hold one kind of value.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

GROUPS = ("faithfulness", "tree", "theory", "cost", "run")
DIRECTIONS = ("lower", "higher", None)


@dataclass(frozen=True)
class Measure:
    """What one key of metrics.json means."""

    key: str
    label: str  # short, for a table's first column
    meaning: str  # one line: what the number is
    better: str | None  # "lower", "higher", or None where neither is better (a count, a reference's own cost)
    group: str  # one of GROUPS
    integer: bool = False  # a count: shown without decimals
    headline: bool = False  # in the short summaries (CLI line, Markdown digest)
    omitted_when_none: bool = False  # metrics.json leaves the key out rather than writing null

    @property
    def explanation(self) -> str:
        """The meaning with the direction spelled out."""
        return f"{self.meaning}; {self.better} is better" if self.better else self.meaning


def measure(label: str, meaning: str, *, group: str, better: str | None = None, integer: bool = False,
            headline: bool = False, default: Any = None, omitted_when_none: bool = False) -> Any:
    """A dataclass field that is a measure (see ``Measure``); the field's name is its key."""
    if group not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, not {group!r}")
    if better not in DIRECTIONS:
        raise ValueError(f"better must be one of {DIRECTIONS}, not {better!r}")
    info = {"label": label, "meaning": meaning, "better": better, "group": group, "integer": integer,
            "headline": headline, "omitted_when_none": omitted_when_none}
    return dataclasses.field(default=default, metadata={"measure": info})


def plain(value: Any) -> Any:
    """``value`` with every numpy scalar or array, at any depth of lists and dicts, as plain Python."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def _make_plain(record: Any) -> None:
    for f in dataclasses.fields(record):
        object.__setattr__(record, f.name, plain(getattr(record, f.name)))


def _as_dict(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)
            if not (f.metadata["measure"]["omitted_when_none"] and getattr(record, f.name) is None)}


@dataclass(frozen=True)
class Score:
    """How well a tree explains a reference clustering of the data (``exclust.scoring.metrics.evaluate``).

    Field order is the key order of metrics.json. Definitions: ``exclust.scoring.metrics``.
    """

    # counts and sizes
    n: int = measure("points n", "points scored (rows after dropping unusable ones)", group="run", integer=True,
                     headline=True)
    n_features: int = measure("features d", "number of features the tree may test", group="run", integer=True)
    n_leaves: int = measure("leaves", "leaves of the tree; each leaf sends its points to one cluster", group="tree",
                            integer=True, headline=True)
    depth: int = measure("depth", "longest root-to-leaf path: the most tests a point's explanation needs",
                         group="tree", better="lower", integer=True, headline=True)
    n_clusters_tree: int = measure("tree clusters", "distinct clusters the tree's leaves can name", group="tree",
                                   integer=True)
    reference: str | None = measure("reference clustering", "the clustering the tree explains", group="run",
                                    headline=True)
    n_reference_clusters: int | None = measure("reference clusters", "clusters in the reference clustering",
                                               group="run", integer=True)
    n_scored: int = measure("points scored", "points with a reference label (noise points are left out of "
                            "reference-relative numbers)", group="run", integer=True)
    n_reference_noise: int = measure("noise points", "points the reference marks as noise (label −1), left out of "
                                     "prices, error rate and ARI vs reference", group="run", integer=True, default=0)
    cluster_sizes_tree: list | None = measure("cluster sizes, tree", "points per tree cluster", group="tree")
    cluster_sizes_reference: list | None = measure("cluster sizes, reference", "points per reference cluster",
                                                   group="run")
    leaf_sizes: dict | None = measure("points per leaf", "scored points in each leaf (by leaf id): the shares a "
                                      "labelling run checks for drift", group="tree")
    weighted_avg_depth: float | None = measure(
        "weighted average depth", "mean over points of their leaf's depth: the tests a typical point's explanation "
        "needs (ExShallow's measure)", group="tree", better="lower")
    # k-means cost and price (the design's "Metrics", ../shared/DESIGN.md)
    kmeans_cost_tree: float | None = measure("k-means cost, tree", "sum of squared distances of the points to their "
                                             "tree cluster's mean", group="cost", better="lower")
    kmeans_cost_reference: float | None = measure("k-means cost, reference", "sum of squared distances of the points "
                                                  "to their reference cluster's mean", group="cost")
    price_kmeans: float | None = measure(
        "price of explainability (k-means)", "k-means cost of the tree's clusters divided by the reference "
        "clustering's; 1 means explaining costs nothing", group="faithfulness", better="lower", headline=True)
    # surrogate cost (paper 003, Definition 1)
    surrogate_cost_tree: float | None = measure("surrogate cost, tree", "each leaf's points charged to its best "
                                                "reference center (paper 003 Def. 1)", group="cost", better="lower")
    surrogate_cost_tree_by_label: float | None = measure("surrogate cost, by leaf label", "each leaf's points charged "
                                                         "to the center its label names", group="cost", better="lower")
    surrogate_cost_reference: float | None = measure("surrogate cost, reference", "each point charged to its own "
                                                     "reference center", group="cost")
    surrogate_price: float | None = measure(
        "surrogate price", "cost when each leaf's points are charged to the leaf's reference center (ExKMC's "
        "surrogate cost, paper 003 Def. 1), divided by the reference cost", group="faithfulness", better="lower",
        headline=True)
    # agreement with the reference and the truth
    error_rate: float | None = measure("error rate", "share of points the tree puts in a different cluster than the "
                                       "reference does", group="faithfulness", better="lower", headline=True)
    ari_reference: float | None = measure("ARI vs reference", "adjusted Rand index of tree clusters against reference "
                                          "clusters (1 identical, 0 chance level)", group="faithfulness",
                                          better="higher", headline=True)
    contingency_tree_reference: list | None = measure("tree × reference table", "points per (tree cluster, reference "
                                                      "cluster) pair: drawn below", group="faithfulness")
    n_truth_labelled: int = measure("points with ground truth", "points whose ground-truth label is known",
                                    group="run", integer=True, default=0)
    ari_truth: float | None = measure("ARI vs truth", "adjusted Rand index of tree clusters against the ground-truth "
                                      "labels, when the data has them", group="faithfulness", better="higher",
                                      headline=True)
    ari_reference_truth: float | None = measure(
        "ARI reference vs truth", "how well the reference clustering itself matches the ground truth: the ceiling "
        "for the tree's ARI vs truth", group="faithfulness", better="higher")
    # k-medians cost and price (paper 002, Definition 1): extra passes, on request
    kmedians_cost_tree: float | None = measure("k-medians cost, tree", "ℓ1 distance of the points to their tree "
                                               "cluster's median (an achievable value)", group="cost", better="lower")
    kmedians_cost_tree_lower: float | None = measure("k-medians cost, tree (lower)", "certified lower bound of the "
                                                     "same", group="cost", better="lower")
    kmedians_cost_reference: float | None = measure("k-medians cost, reference", "ℓ1 distance of the points to their "
                                                    "reference cluster's median", group="cost")
    kmedians_cost_reference_lower: float | None = measure("k-medians cost, reference (lower)", "certified lower bound "
                                                          "of the same", group="cost")
    price_kmedians: float | None = measure(
        "price of explainability (k-medians)", "ℓ1 cost to each tree cluster's median divided by the same for the "
        "reference clusters (paper 002 Def. 1)", group="faithfulness", better="lower", headline=True)
    kmedians_relative_gap: float | None = measure("k-medians relative gap", "how far the reported k-medians costs "
                                                  "may be above the true ones, relatively", group="cost",
                                                  better="lower")
    kmedians_passes: int = measure("k-medians passes", "extra histogram passes spent finding the medians",
                                   group="cost", better="lower", integer=True, default=0)
    passes: Any = measure("passes over the data", "full reads of the data to build and score the tree (per step in "
                          "a run); at scale each pass costs I/O", group="cost", better="lower", integer=True)

    def __post_init__(self) -> None:
        _make_plain(self)

    def as_dict(self) -> dict[str, Any]:
        """The score as metrics.json writes it (every field, in order)."""
        return _as_dict(self)


def _same_as_score(key: str) -> Any:
    """A run fact that replaces a Score field (the run knows better): the same measure, one text."""
    return dataclasses.field(default=None, metadata=Score.__dataclass_fields__[key].metadata)


_ENR_MEANING = (
    "explainability-to-noise ratio of the fitted mixture: over pairs of components, the smallest "
    "largest per-axis squared gap between their means in units of the noise; large means "
    "well separated along some axis, so a small tree can be faithful"
)


@dataclass(frozen=True)
class RunFacts:
    """What the explain job adds to the score (``pipeline.assemble_metrics``): what ran, on what, at what cost.

    The fields shared with ``Score`` replace its values in metrics.json, in place; the others follow
    it in this order.
    """

    algorithm: str | None = measure("algorithm", "how the tree was built", group="run", headline=True)
    reference: str | None = _same_as_score("reference")
    k: int | None = measure("clusters k", "number of clusters of the reference clustering", group="run",
                            integer=True, headline=True)
    d: int | None = measure("features d", "number of features the tree may test", group="run", integer=True,
                            headline=True)
    n: int | None = _same_as_score("n")
    n_dropped: int | None = measure("dropped rows", "rows left out for NaN or infinite features (nan policy drop)",
                                    group="run", integer=True)
    enr: float | None = measure("ENR q", _ENR_MEANING, group="theory", headline=True)
    enr_convention: str | None = measure("ENR convention", "whose definition the ENR follows: paper 002 divides the "
                                         "squared gap by σ², paper 000 by 2σ²", group="theory")
    threshold: str | None = measure("threshold rule", "how MMDT places a cut between the means of a node (midpoint, "
                                    "Gaussian or Chebyshev bound, exact tail, random)", group="run")
    objective: str | None = measure("objective", "the reference cost the tree was built to keep low: k-means "
                                    "(squared distances) or k-medians (ℓ1)", group="run")
    n_leaves: int | None = _same_as_score("n_leaves")
    depth: int | None = _same_as_score("depth")
    features_used: list | None = measure("features used", "the features the tree's cuts test", group="tree")
    features: list | None = measure("features", "the columns the tree may cut, in order (category columns among "
                                    "them cut by sets of values)", group="run", omitted_when_none=True)
    cluster_on: list | None = measure("clustering columns", "the columns the reference clustering was fitted on, "
                                      "where they are not the features (cluster_on; or the numeric features when "
                                      "some features are categories)", group="run", omitted_when_none=True)
    n_passes: int | None = measure("passes of the algorithm", "passes over the data the tree algorithm made while "
                                   "building", group="cost", better="lower", integer=True)
    seconds: dict | None = measure("seconds per step", "wall-clock time of each step of the run", group="cost",
                                   better="lower")
    held: bool | None = measure("data held", "whether the validated data stayed in the workers' memory (read once) "
                                "rather than streamed from the files in every pass", group="run")
    passes: dict | None = _same_as_score("passes")
    parquet_reads: dict | None = measure("Parquet reads per step", "reads of the source files in each step (0 where "
                                         "the data are held)", group="cost", better="lower", integer=True)
    kernel_price: float | None = measure(
        "kernel price of explainability", "kernel k-means cost of the tree's clusters divided by the reference "
        "kernel clustering's (kernel MMDT, paper 002 Sec. 5)", group="faithfulness", better="lower", headline=True,
        omitted_when_none=True)
    guaranteed_price: float | None = measure(
        "guaranteed expected price", "upper bound on the expected price of explainability of the random-cut "
        "algorithm, from its paper (1 + H_(k-1) for k-medians)", group="faithfulness", omitted_when_none=True)
    standing: dict | None = measure(
        "standing", "the tree's price beside the trees of the other greedy algorithms on the same centers, scored "
        "in the same pass (rows: algorithm, title, n_leaves, cost, price, weighted_avg_depth, own, best, gap), and "
        "the exact optimum where the instance is small (optimum; optimum_note says why not); cost names the cost "
        "(kmeans, or kmedians-surrogate), reference_cost its denominator; note alone when the run gets no table",
        group="faithfulness", omitted_when_none=True)
    bounds: dict | None = measure("bounds of paper 002", "what the theorems guarantee for a mixture with this ENR",
                                  group="theory", omitted_when_none=True)

    def __post_init__(self) -> None:
        _make_plain(self)

    def as_dict(self) -> dict[str, Any]:
        """The run's facts as metrics.json writes them (omitted: kernel price, guaranteed price, bounds when None)."""
        return _as_dict(self)


def _catalogue() -> dict[str, Measure]:
    out: dict[str, Measure] = {}
    for cls in (RunFacts, Score):  # the run's facts first: the order of the short summaries
        for f in dataclasses.fields(cls):
            out.setdefault(f.name, Measure(key=f.name, **f.metadata["measure"]))
    return out


MEASURES: dict[str, Measure] = _catalogue()
HEADLINE: tuple[str, ...] = tuple(key for key, m in MEASURES.items() if m.headline)
INTEGER_KEYS: frozenset[str] = frozenset(key for key, m in MEASURES.items() if m.integer)
