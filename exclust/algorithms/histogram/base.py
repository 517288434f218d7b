"""What the trees grown against reference centers share (IMM, ExKMC, ExShallow, ExGreedy, KDTree,
and TreeSearch beyond this family): the estimator base ``CenterTreePredictor``, the parameter
constraints, and the fit preamble: data validated once into a ``Dataset`` (where Dask or memory
is decided: ``Dataset.distributed``), reference centers checked or fitted, bin edges from a
sample and the rows encoded for the engine (``prepare_fit``).
"""
from __future__ import annotations

import numpy as np

from exclust.algorithms.histogram.binning import DEFAULT_SAMPLE_SIZE, MAX_CODE_BINS, edges_from_sample
from exclust.algorithms.histogram.engine import EncodedData
from exclust.dataplane import parts
from exclust.errors import InputError
from exclust.estimator import RANDOM_STATE, Integral, Interval, StrOptions, TreeExplainer
from exclust.sources.dataset import Dataset, as_matrix, as_tree_input

OBJECTIVES = ("kmeans", "kmedians")

# The parameters the center trees share, declared once for all of them.
CENTER_TREE_CONSTRAINTS = {
    "n_clusters": [Interval(Integral, 2, None, closed="left")],  # k >= 2, as the CLI's --k
    "max_bins": [Interval(Integral, 2, MAX_CODE_BINS, closed="both")],
    "objective": [StrOptions(set(OBJECTIVES))],
    "random_state": RANDOM_STATE,
}


def check_centers(centers, n_clusters: int, n_features: int) -> np.ndarray:
    """Validate given reference centers: a finite (n_clusters, n_features) array."""
    c = np.asarray(centers, dtype=np.float64)
    if c.shape != (n_clusters, n_features):
        raise ValueError(
            f"centers must have shape (n_clusters, n_features) = ({n_clusters}, {n_features}), "
            f"got {c.shape}; pass one row per cluster with one value per feature"
        )
    if not np.isfinite(c).all():
        raise ValueError("centers hold NaN or infinite values; pass finite reference centers")
    return c


def fit_reference_centers(X, n_clusters: int, random_state=None, objective: str = "kmeans") -> np.ndarray:
    """Reference centers when none are given: exclust's k-means, or k-medians for that objective."""
    from exclust.reference import KMeans, KMedians

    reference = KMedians if objective == "kmedians" else KMeans
    return np.asarray(reference(n_clusters=n_clusters, random_state=random_state).fit(X).cluster_centers_)


def binning_sample(data, random_state=None) -> tuple[np.ndarray, int]:
    """The rows the bin edges come from: an exact uniform sample of ``DEFAULT_SAMPLE_SIZE`` rows
    (by global row id, so any chunking gives the same edges).

    When the data carry a larger uniform sample already drawn by the run (``run_sample``, set by
    the pipeline), a uniform subsample of it is taken instead: the same distribution, no pass.
    Returns (sample, passes over the data spent drawing it).
    """
    ds = data if isinstance(data, Dataset) else as_matrix(data)
    X = ds.X
    n = int(X.shape[0])
    size = min(DEFAULT_SAMPLE_SIZE, n)
    drawn = getattr(data, "run_sample", None)
    if drawn is not None and drawn.X.shape[0] >= size and drawn.n_rows == n:
        return drawn.X[parts.sample_ids(drawn.X.shape[0], size, random_state)], 0
    (sample,) = parts.uniform_sample(X, size=size, random_state=random_state)
    return sample, int(ds.distributed)


def encode_for_trees(data, centers: np.ndarray, max_bins: int, random_state=None, *, metric=None,
                     between_extra: bool = False, Z=None, values: str | None = None) -> EncodedData:
    """Passes 1 and 2: bin edges (centers' coordinates included when they live in the data's
    space, ``Z`` None) and the encoded partitions of ``data`` (a Dataset, whose run sample is
    reused when it has one, or a validated matrix); its category features
    (``Dataset.categories``) are binned by code.

    ``metric`` and ``between_extra`` go to EncodedData and edges_from_sample; ``Z``, the
    clustering space's rows, and ``values`` to EncodedData."""
    ds = data if isinstance(data, Dataset) else as_matrix(data)
    sample, passes = binning_sample(ds, random_state)
    mapper = edges_from_sample(sample, max_bins=max_bins, extra_edges=centers if Z is None else None,
                               between_extra=between_extra, categories=dataset_categories(ds),
                               missing=known_missing(ds))
    del sample
    return EncodedData(ds, mapper, centers, n_passes=passes, metric=metric, Z=Z, values=values)


def dataset_categories(ds: Dataset) -> dict:
    """The dataset's category features (feature index -> vocabulary; ``{}`` when it has none)."""
    return dict(ds.categories)


def known_missing(ds: Dataset) -> np.ndarray:
    """Per feature, whether the validation pass found missing values in it (``Dataset.missing``,
    by column name), so that its missing bin is there before the sample is read."""
    return np.array([ds.missing.get(name, 0) > 0 for name in ds.feature_names], dtype=bool)


def clustering_space(Z, ds: Dataset) -> Dataset | None:
    """The rows the reference centers live in: ``Z`` validated (complete numeric rows, one per
    row of ``ds``), else the dataset's own clustering columns (``Dataset.cluster_X``, validated
    when loaded), else None (the features themselves)."""
    own = ds.cluster_X
    if Z is None or (own is not None and Z is own):
        return None if own is None else ds.clustering()
    space = as_matrix(Z)
    if space.n_rows != ds.n_rows:
        raise InputError(f"Z has {space.n_rows} rows for {ds.n_rows} rows of X; pass the clustering columns of the "
                         "same rows")
    return space


def prepare_fit(X, n_clusters, centers, max_bins, random_state, objective="kmeans", *,
                distances: bool = False, between_extra: bool = False, Z=None, values: str | None = None):
    """Validate the data and centers of IMM / ExKMC / ExShallow (their parameters are checked by
    ``_check_params``) and encode the data; returns (dataset, centers, data). The k-medians
    objective keeps l1 distances to the centers; ``distances`` keeps squared Euclidean distances
    for k-means instead of dot products. ``Z`` (default None: X, or the dataset's
    ``cluster_X``): the clustering space, where the centers live and the costs are measured.
    ``values``: ``EncodedData``'s ("none" for a builder that reads no per-center values)."""
    k = int(n_clusters)
    ds = as_tree_input(X, n_clusters=k)
    space = clustering_space(Z, ds)
    reference = ds if space is None else space
    if centers is None:  # the Dataset, not its matrix: a refusal of incomplete rows names its columns
        centers = fit_reference_centers(reference, k, random_state, objective)
    centers = check_centers(centers, k, reference.n_features)
    metric = "l1" if objective == "kmedians" else ("sqeuclidean" if distances else None)
    data = encode_for_trees(ds, centers, max_bins, random_state, metric=metric, between_extra=between_extra,
                            Z=None if space is None else space.X, values=values)
    return ds, centers, data


class CenterTreePredictor(TreeExplainer):
    """The trees grown against reference centers (IMM, ExKMC, ExShallow, KDTree): a row's
    cluster is the center of the leaf it reaches."""

    def fit_predict(self, X, centers=None, **fit_params):
        """Fit (``fit_params``: e.g. ``Z``), then return the cluster of every row of X."""
        return self.fit(X, centers, **fit_params).predict(X)
