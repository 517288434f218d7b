"""The explain job's work as plain library functions: load, fit reference, build tree, score, render, write.

Each function takes small, explicit inputs and holds no orchestration: ``exclust.jobs.explain.steps`` runs
them in order for the CLI, the Python API and the Prefect flow alike. Heavy work happens on the
Dask client that is active when a step runs (``exclust.dataplane.cluster.dask_cluster`` opens one); in-memory
inputs stay numpy and need none.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from exclust.dataplane import parts, residency
from exclust.dataplane.parts import is_lazy
from exclust.errors import InputError
from exclust.jobs import registry
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain.fits_ahead import FitsAhead, FittedAhead, curve_leaves, sample_reference_labels, wants_curve
from exclust.jobs.explain.held_load import load_held
from exclust.outputs.folders import json_text
from exclust.outputs.staging import StagedOutput, staged_output
from exclust.sources.base import DataSource
from exclust.sources.dataset import Dataset, load_dataset
from exclust.tree import ThresholdTree

SAMPLE_ROWS = 4000  # rows drawn for the report's scatter plot
# One exact uniform sample of the rows, drawn once per run: the k-means seeding, the histogram
# engine's bin edges, the cost curve's baselines and the report's scatter plot all use it (each
# takes a uniform subsample of the size it needs).
RUN_SAMPLE_ROWS = 200_000
# k-means on a dask input: scikit-learn's (10 restarts) on this many rows of the run's sample,
# then a few full passes of Lloyd's algorithm refine the centers.
KMEANS_SAMPLE_ROWS = 50_000
KMEANS_REFINE_PASSES = 3


@dataclass
class Reference:
    """The clustering a tree explains: its summary, centers and (lazy) labels of every row."""

    kind: str
    summary: Any  # MixtureSummary
    centers: np.ndarray
    labels: Any  # numpy or dask array of ints
    model: Any = None


@dataclass
class Built:
    """A fitted tree and what its algorithm reports about itself."""

    tree: ThresholdTree
    estimator: Any
    info: dict[str, Any] = field(default_factory=dict)
    space: Any = None  # callable X -> coordinates the tree reads (concept projections), or None
    reference_labels: Any = None  # labels of a base clustering the algorithm fitted itself


@dataclass
class ExplainResult:
    """Everything an explain run produced (the written folder once ``write_outputs`` ran)."""

    tree: ThresholdTree
    metrics: dict[str, Any]
    rules: str
    report_html: str | None = None
    out: Path | str | None = None


# --------------------------------------------------------------------------- steps
def load(config: ExplainConfig, source: DataSource | None = None) -> Dataset:
    """Read and validate the input: features plus the truth, reference and concept columns.
    ``source``: the run's opened input (``RunContext.source``; default: opened from ``config``).

    Read once: a Parquet input is held on the workers right after its one read when it fits
    (``residency.hold``: half of their memory), so that validation and every later step read memory;
    otherwise every pass streams it from the files.
    """
    extra = [c for c in (config.truth, config.reference_column, *(config.concepts or ())) if c]
    extra = list(dict.fromkeys(extra))
    source = source if source is not None else config.source()
    if source.needs_cluster:  # read by the workers: held right after the read, checked and sampled in its pass
        data, held, drawn = load_held(config, extra, source, RUN_SAMPLE_ROWS)
        data = _hold(data, held) if data.n_dropped and held else data
        if drawn is not None:
            data.run_sample = RunSample(drawn[0], dict(zip(extra, drawn[1:], strict=True)), data.n_rows)
    else:
        data = load_dataset(config.input, config.features, extra_columns=extra, nan_policy=config.nan_policy,
                            n_clusters=config.k, categorical=config.categorical or (), cluster_on=config.cluster_on)
        data = _hold(data, config.hold)
    unknown = [f for f in config.plot_features or () if f not in data.feature_names]
    if unknown and registry.algorithm(config.algorithm).space is None:  # a tree over other coordinates names its own
        raise InputError(f"plot feature(s) {unknown} are not among the features {data.feature_names}")
    return data


def _hold(data: Dataset, force: bool | None) -> Dataset:
    space = () if data.cluster_X is None else (data.cluster_X,)  # held too: scoring reads them in its pass
    (X, *columns), _ = residency.hold(data.X, *data.extra.values(), *space, force=force)
    cluster_X = columns.pop() if space else None
    return replace(data, X=X, extra=dict(zip(data.extra, columns, strict=True)), cluster_X=cluster_X)


@dataclass
class RunSample:
    """An exact uniform sample of the run's rows (in row order), their extra columns and clustering columns Z."""

    X: np.ndarray
    extra: dict[str, np.ndarray]
    n_rows: int
    Z: np.ndarray | None = None


def run_sample(data: Dataset, config: ExplainConfig) -> RunSample:
    """The run's one uniform sample (``RUN_SAMPLE_ROWS`` rows; one pass the first time, then kept
    in ``data.run_sample``): k-means seeding, bin edges, the curve's baselines and the scatter plot share it."""
    if data.run_sample is not None:
        return data.run_sample
    names = list(data.extra)
    space = () if data.cluster_X is None else (data.cluster_X,)
    X, *columns = parts.uniform_sample(data.X, *data.extra.values(), *space, size=RUN_SAMPLE_ROWS,
                                       random_state=config.random_state)
    Z = np.asarray(columns.pop(), dtype=np.float64) if space else None
    sample = RunSample(X, dict(zip(names, columns, strict=True)), data.n_rows, Z)
    data.run_sample = sample
    return sample


def is_held(data: Dataset) -> bool:
    """Whether passes over the data read memory (numpy, or held on the workers) rather than files."""
    return not parts.reads_source(data.X)


def fit_reference(data: Dataset, config: ExplainConfig) -> Reference:
    """Fit the reference clustering the run names (``jobs.references``: gmm, k-means, ...) or take given labels."""
    from exclust.jobs.references import reference

    # On the clustering's own columns (``cluster_on``; the features when none), complete rows only.
    from exclust.sources.dataset import clustering_input

    view = clustering_input(data, f"the {config.reference} reference")
    if view is not data and data.distributed:  # one sample of X and Z (k-means seeds on its Z, the same rows
        drawn = run_sample(data, config)  # as a sample of Z alone), not a sample of each: one pass, not two
        view.run_sample = RunSample(drawn.Z if drawn.Z is not None else drawn.X, drawn.extra, drawn.n_rows)
    return reference(config.reference).fit_run(view, config)


def fit_gmm(data: Dataset, config: ExplainConfig) -> Reference:
    """The ``gmm`` reference: a Gaussian mixture and its summary."""
    from exclust.reference import GaussianMixture, MixtureSummary

    names = data.feature_names
    # Estimators get the validated Dataset, not data.X: a bare array would be checked again (a pass).
    model = GaussianMixture(n_components=config.k, random_state=config.random_state).fit(data)
    summary = MixtureSummary.from_gmm(model, names)
    return Reference("gmm", summary, np.asarray(model.means_), _held(model.predict(data), data, config), model)


def fit_kmeans(data: Dataset, config: ExplainConfig) -> Reference:
    """The ``kmeans`` reference."""
    from exclust.reference import KMeans, MixtureSummary

    names = data.feature_names
    if data.distributed:
        # Seeded on the run's sample, refined by a few full passes (not Lloyd to convergence).
        model = KMeans(n_clusters=config.k, random_state=config.random_state, init="sample",
                       sample_rows=KMEANS_SAMPLE_ROWS, max_iter=KMEANS_REFINE_PASSES)
        model.fit(data, sample=run_sample(data, config).X)
    else:
        model = KMeans(n_clusters=config.k, random_state=config.random_state).fit(data)
    # Full covariances only for algorithms that read them (MMDT's thresholds); the others need
    # the means and spreads, which the k-means kept from its last pass.
    full = registry.algorithm(config.algorithm).needs == registry.SUMMARY
    summary = MixtureSummary.from_kmeans(model, data.X, names, full_covariance=full)
    # Distributed Lloyd kept its last pass's labels on the workers (its predict, one byte a
    # row): no later pass searches the centers again, streamed or held.
    labels = model.labels_ if model.backend_ == "lloyd" else _held(model.predict(data), data, config)
    return Reference("kmeans", summary, np.asarray(model.cluster_centers_), labels, model)


def fit_kmedians(data: Dataset, config: ExplainConfig) -> Reference:
    """The ``kmedians`` reference."""
    from exclust.reference import KMedians, MixtureSummary

    names = data.feature_names
    model = KMedians(n_clusters=config.k, random_state=config.random_state).fit(data)
    labels = _held(model.predict(data), data, config)
    full = registry.algorithm(config.algorithm).needs == registry.SUMMARY
    summary = MixtureSummary.from_labels(data.X, labels, names, full_covariance=full)
    return Reference("kmedians", summary, np.asarray(model.cluster_centers_), labels, model)


def fit_labels(data: Dataset, config: ExplainConfig) -> Reference:
    """The ``labels:COLUMN`` reference: the column's labels, summarized."""
    from exclust.reference import MixtureSummary

    names = data.feature_names
    assert config.reference_column is not None  # ExplainConfig.check: labels come from a named column
    labels = data.extra[config.reference_column]
    summary = MixtureSummary.from_labels(data.X, labels, names)
    values = list(summary.meta.get("labels") or range(summary.n_components))
    if summary.n_components < 2:
        raise InputError(
            f"column '{config.reference_column}' holds a single cluster (label {values[0]!r}); a tree needs at least "
            "2 clusters to tell apart: name a label column with 2 or more labels, or fit a reference with {fix}",
            option="reference", value="gmm",
        )
    if summary.n_components != config.k:
        raise InputError(
            f"column '{config.reference_column}' holds {summary.n_components} clusters but k is {config.k}; "
            "pass {fix}", option="k", value=summary.n_components,
        )
    if values != list(range(len(values))):  # labels such as 0, 5, 10, 15: cluster i is the i-th label value
        from exclust.sources.dataset import recode_labels

        labels = recode_labels(labels, values)
    return Reference(f"labels:{config.reference_column}", summary, np.asarray(summary.means), labels)


def build_tree(data: Dataset, ref: Reference | None, config: ExplainConfig) -> Built:
    """Build the explaining tree with the run's algorithm: its registry entry says how it is made
    and what it reads from the run; what it reports about itself, it reports through its attributes."""
    entry = registry.algorithm(config.algorithm)
    est = entry.fit_in_run(entry.make(config, data), data, ref)
    info: dict[str, Any] = {"n_passes": getattr(est, "n_passes_", None),
                            "diagnostics": getattr(est, "node_diagnostics_", None)}
    if hasattr(est, "enr_"):  # mixture-based trees: the explainability-to-noise ratio they saw
        info.update(enr=_maybe_float(est.enr_), enr_convention=getattr(est, "enr_convention_", "paper002"))
    if getattr(est, "bound_", None) is not None:
        info["guaranteed_price"] = _maybe_float(est.bound_)
    if getattr(est, "kernel_price_", None) is not None:
        info["kernel_price"] = _maybe_float(est.kernel_price_)
    reference_labels = None
    if entry.needs == registry.OWN:  # a base clustering it fitted itself, unless the run gave one
        info["reference"] = entry.own_reference
        reference_labels = getattr(est, "reference_labels_", None)
        if reference_labels is None:
            reference_labels = ref.labels if ref is not None else getattr(est, "labels_", None)
    space = entry.space(est) if entry.space is not None else None
    return Built(est.tree_, est, info, space=space, reference_labels=reference_labels)


def needs_reference_step(config: ExplainConfig) -> bool:
    """False when the algorithm fits its own base clustering (concept and kernel MMDT with the default gmm)."""
    return not (registry.algorithm(config.algorithm).needs == registry.OWN and config.reference == "gmm")


def score_and_curve(data: Dataset, ref: Reference | None, built: Built, config: ExplainConfig, *,
                    with_curve: bool | None = None, planned_standing: Any = None, ahead: FitsAhead | None = None,
                    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict | None]:
    """Scores, the cost curve and the standing table from ONE pass over the data (plus the
    k-medians passes when ``config.wants_kmedians_price``).

    The curve's and the standing table's trees are built on the run's sample first
    (``plan_cost_curve``, ``plan_standing``); their scoring rides on the scores' pass.
    ``with_curve=None`` follows the config. ``planned_standing``: a standing plan the caller made
    already (``plan_standing``), scored as it is: OptimalTree's tree in it is found within a time
    budget, so planning again may give another tree. ``ahead``: the fits ``fits_ahead.start`` began
    during the build (waited for here; what they made is taken, the rest fitted here).
    """
    from exclust.scoring.metrics import score_with

    early = ahead.result() if ahead is not None else None
    plan = plan_cost_curve(data, ref, config, built, early) if with_curve is not False else None
    standing = (plan_standing(data, ref, built, config, plan, early) if planned_standing is None
                else planned_standing)
    X = built.space(data.X) if built.space is not None else data.X
    y_true = data.extra.get(config.truth) if config.truth else None
    labels = built.reference_labels if built.reference_labels is not None else (None if ref is None else ref.labels)
    # Centers live in the clustering's space, the features or its own columns (cluster_X: the costs are then measured
    # there, the tree routing rows on its features, in the same pass); not a tree over concept coordinates'.
    centers = None if ref is None or built.space is not None else ref.centers
    Z = data.cluster_X if built.space is None else None
    # A k-means reference's labels are every row's nearest center: the curve's reference cost
    # reads them (computed once for both) instead of searching the centers again.
    nearest = labels if ref is not None and ref.kind == "kmeans" and built.reference_labels is None else None
    table = standing if standing is not None and not isinstance(standing, dict) else None
    riders = table.ride_on(plan) if table is not None else None  # the table's trees in the curve's sweep
    also = [plan.reduction(nearest, space=Z, riders=riders or ())] if plan is not None else []
    table_pass = table.reduction(nearest, space=Z) if table is not None else None  # the trees that did not ride
    also += [table_pass] if table_pass is not None else []
    scores, fused = score_with(built.tree, X, reference_labels=labels, centers=centers, y_true=y_true, Z=Z, also=also,
                               kmedians=config.wants_kmedians_price)
    curve_result = fused.pop(0) if plan is not None else None
    curve = plan.finish(curve_result) if plan is not None else None
    if table is not None:
        standing = table.finish(curve_result, fused.pop(0) if table_pass is not None else None, scores)
    # tree.json keeps the built-on share of rows per leaf: labelling runs compare theirs with it
    # (exclust.scoring.drift).
    sizes = scores.get("leaf_sizes") or {}
    total = float(sum(sizes.values())) or 1.0
    built.tree.meta["leaf_shares"] = {leaf: n / total for leaf, n in sizes.items()}
    return dict(scores), curve, standing


def plan_cost_curve(data: Dataset, ref: Reference | None, config: ExplainConfig, built: Built | None = None,
                    early: FittedAhead | None = None):
    """The cost curve's trees, built on the run's sample (no pass once the sample is drawn);
    ``early``: series fitted during the build (``fits_ahead``)."""
    if not wants_curve(config) or ref is None:
        return None
    from exclust.jobs.explain.cost_curve import plan_curve

    sample = run_sample(data, config)
    # The run's own estimator may already hold a series' prefix trees (ExKMC: every one of them).
    return plan_curve(sample.X, sample_reference_labels(sample, ref, config), ref.centers, curve_leaves(config),
                      series=registry.algorithm(config.algorithm).curve,
                      fitted=built.estimator if built is not None else None, feature_names=data.feature_names,
                      random_state=config.random_state, n_rows=sample.n_rows, objective=config.objective,
                      space=sample.Z, like=data, prefitted=early.curve if early is not None else None)


def plan_standing(data: Dataset, ref: Reference | None, built: Built, config: ExplainConfig, curve=None,
                  early: FittedAhead | None = None):
    """The standing table's trees (``jobs.explain.standing``) on the run's sample; a dict with the
    sentence the report shows when the run gets none; None when the run asks for none. ``early``:
    trees fitted during the build (``fits_ahead``)."""
    from exclust.jobs.explain import standing

    if not config.standing:
        return None
    entry = registry.algorithm(config.algorithm)
    if entry.needs == registry.OWN or ref is None or built.space is not None:
        return standing.skipped(standing.NO_CENTERS.format(
            what=f"the base clustering {entry.title} fits itself ({entry.own_reference or 'its own'})"))
    if ref.kind.startswith("labels:"):
        return standing.skipped(standing.NO_CENTERS.format(what="the given labels of column "
                                                                f"'{config.reference_column}'"))
    # Drawn already by k-means seeding or the curve, or drawn here: the report's scatter plot
    # draws the run's sample in any case, so drawing it now moves that pass earlier, adds none.
    sample = run_sample(data, config)
    return standing.plan_standing(config, built.tree, ref.centers, sample.X,
                                  sample_reference_labels(sample, ref, config),
                                  sample.n_rows, data.feature_names, curve, space=sample.Z, like=data,
                                  prefitted=early.standing if early is not None else None)


def sample_rows(X, max_rows: int = SAMPLE_ROWS, random_state: int = 0) -> np.ndarray:
    """An exact uniform sample of rows for plots, the same however X is chunked."""
    return parts.uniform_sample(X, size=max_rows, random_state=random_state)[0]


def enr_of(ref: Reference | None, built: Built) -> float | None:
    """The explainability-to-noise ratio of the reference mixture (paper 002 convention unless the algorithm says)."""
    if built.info.get("enr") is not None:
        return built.info["enr"]
    if ref is None:
        return None
    from exclust.algorithms.mmdt.bounds import explainability_to_noise_ratio

    return _maybe_float(explainability_to_noise_ratio(ref.summary, convention="paper002"))


# -------------------------------------------------- metrics and report (exclust.jobs.explain.steps runs the job)
def assemble_metrics(scores, data: Dataset, ref, built: Built, config: ExplainConfig, seconds,
                     standing: dict | None = None, pass_counter: parts.PassCounter | None = None) -> dict[str, Any]:
    """metrics.json: the score dict updated by the run's facts (``scorecard.RunFacts``: what was run,
    how long each step took, the passes and reads per step). ``pass_counter``: the run's pass counter
    (default: the one active here; none counted outside a run)."""
    from exclust.scoring.scorecard import RunFacts

    tree = built.tree
    counter = pass_counter if pass_counter is not None else (parts.active_passes() or parts.PassCounter())
    passes, reads = dict(counter.passes), dict(counter.reads)
    if built.info.get("n_passes") is not None and "build tree" in passes:
        # Estimators whose passes do not all run on exclust.dataplane.parts yet (kernel MMDT, Concept-MMDT's
        # CAV fits) count them themselves; the histogram engine's are counted already (extra 0).
        extra = max(0, int(built.info["n_passes"]) - passes["build tree"])
        passes["build tree"] += extra
        if not is_held(data):
            # IMM / ExKMC: binning's sample and the encoding read the files; their histogram
            # passes read the encoded rows they keep on the workers.
            reads["build tree"] = reads.get("build tree", 0) + min(extra, 2)
    facts = RunFacts(
        algorithm=config.algorithm, reference=built.info.get("reference") if ref is None else ref.kind,
        k=int(config.k), d=int(data.n_features), n=int(data.n_rows), n_dropped=int(data.n_dropped),
        enr=enr_of(ref, built), enr_convention=built.info.get("enr_convention", "paper002"),
        threshold=config.threshold if registry.algorithm(config.algorithm).threshold else None,
        objective=config.objective,
        n_leaves=int(tree.n_leaves), depth=int(tree.depth), features_used=tree.features_used,
        features=list(data.feature_names), cluster_on=data.cluster_names,
        n_passes=built.info.get("n_passes"), seconds=dict(seconds), held=is_held(data), passes=passes,
        parquet_reads=reads, kernel_price=built.info.get("kernel_price"),
        guaranteed_price=built.info.get("guaranteed_price"), standing=standing,
    )
    metrics = dict(scores)
    metrics.update(facts.as_dict())
    return metrics


def render(result: ExplainResult, data: Dataset, built: Built, curve, config: ExplainConfig,
           source: DataSource | None = None) -> str:
    """The HTML report: metrics, rules, the tree drawn, a scatter plot with cuts, the curve."""
    from exclust.report.page import render_report

    drawn = run_sample(data, config).X
    keep = np.sort(np.random.default_rng(config.random_state).permutation(drawn.shape[0])[:SAMPLE_ROWS])
    sample = drawn[keep]  # a uniform subsample of a uniform sample: uniform
    coords = built.space(sample) if built.space is not None else sample
    names = built.tree.feature_names
    scatter = None  # the report picks the features of the tree's first cuts
    if config.plot_features and all(f in names for f in config.plot_features):
        scatter = (names.index(config.plot_features[0]), names.index(config.plot_features[1]))
    source_name = (source if source is not None else config.source()).describe()
    return render_report(
        tree=built.tree,
        metrics=result.metrics,
        title=config.title or f"exclust: {config.algorithm} explaining {result.metrics.get('reference') or 'the data'}",
        sample=np.asarray(coords),
        sample_labels=np.asarray(built.tree.predict(np.asarray(coords))),
        scatter_features=scatter,
        curve=curve,
        diagnostics=built.info.get("diagnostics"),
        dataset_info={"source": str(source_name), "rows": data.n_rows, "features": names,
                      "dropped_rows": data.n_dropped, **({"clustered_on": data.cluster_names} if data.cluster_names
                                                         else {})},
        titles=registry.titles(),
    )


def write_outputs(result: ExplainResult, out: str | os.PathLike, base: str | os.PathLike | None = None, *,
                  stage: StagedOutput | None = None, storage_options: dict | None = None) -> Path | str:
    """Write tree.json, metrics.json, rules.txt and report.html into ``out``, whole or not at all.

    With ``stage`` (opened by the caller before computing) the files go there and the caller's
    ``staged_output`` commits them.
    """
    if stage is None:
        info = {"algorithm": result.metrics.get("algorithm")}
        with staged_output(out, "explain", base=base, info=info, storage_options=storage_options) as stage:
            return write_outputs(result, out, base, stage=stage)
    stage.write_text("tree.json", result.tree.to_json())
    stage.write_text("metrics.json", json_text(result.metrics))
    stage.write_text("rules.txt", result.rules)
    if result.report_html is not None:
        stage.write_text("report.html", result.report_html)
    result.out = shown = stage.target.shown
    return shown


def _held(labels, data: Dataset, config: ExplainConfig):
    """Reference labels kept on the workers (int32) when the data are and more than one later
    pass reads them: recomputing a mixture's predict in each of those passes costs more than
    holding 4 bytes a row. Read once (scoring alone), they are predicted inside that pass
    instead: holding them would be a pass of its own. Streamed data do not hold them (that
    would be a read of its own): each pass predicts them from the rows it reads anyway."""
    if is_lazy(labels) and is_held(data) and _later_label_reads(config) > 1:
        return residency.hold(labels.astype(np.int32), force=True)[0][0]
    return labels


def _later_label_reads(config: ExplainConfig) -> int:
    """Passes after the reference's fit that read its labels: scoring; the k-medians price (two
    or more); a tree that learns them (CART); a summary made from them (k-medians reference)."""
    learns = registry.algorithm(config.algorithm).needs == registry.LABELS
    return 1 + 2 * bool(config.wants_kmedians_price) + int(learns) + int(config.reference == "kmedians")


def _maybe_float(v) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None
