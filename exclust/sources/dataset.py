"""Input: turn what a user holds into one validated float64 matrix plus feature names.

Accepted: numpy arrays, pandas DataFrames, dask arrays, dask DataFrames, and Parquet sources
(a file, a folder of files, a glob, or a ``file://`` / ``s3://`` URL) with a column list.
Parquet is read by exclust itself (``exclust.sources.parquet``): chunk sizes come from the file footers
without a pass over the data, every file's schema is checked before any work, and a corrupt
file is named.

Small in-memory inputs stay numpy: they do not pay for a cluster.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exclust.dataplane.parts import is_lazy
from exclust.errors import InputError

DEFAULT_PIECE_ROWS = 1_000_000


@dataclass
class Dataset:
    """A validated feature matrix with its names and any extra 1-D columns (truth, labels)."""

    X: Any  # numpy.ndarray or dask.array.Array, float64, n x d, one chunk along columns
    feature_names: list[str]
    extra: dict[str, Any] = field(default_factory=dict)
    source: str = "array"
    n_dropped: int = 0  # rows removed by nan_policy="drop"
    category_names: dict[str, list[str]] = field(default_factory=dict)  # codes of string columns
    # The run's one exact uniform sample of these rows (pipeline.RunSample: rows, extra columns,
    # n_rows), drawn once and reused by every consumer: k-means seeding, bin edges, curve, plot.
    run_sample: Any = field(default=None, repr=False, compare=False)
    # What loading decided that the user should hear: columns the default features left out as
    # label-like (exclust.sources.feature_choice); a run logs them.
    notes: list[str] = field(default_factory=list)

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def distributed(self) -> bool:
        """Whether the rows are a Dask array (parts on the workers) rather than one numpy
        matrix: decided here, where the data enter, so the algorithms need not ask again."""
        return is_lazy(self.X)



# --------------------------------------------------------------------------- validation
def _check_block(block: np.ndarray) -> np.ndarray:
    """Per chunk, one float row: [rows with a non-finite value, non-finite count per column...,
    largest finite magnitude per column...] (counts are exact in float64 up to 2**53)."""
    from exclust.sources._finite_check import finite_summary

    return finite_summary(np.ascontiguousarray(block, dtype=np.float64)).reshape(1, -1)


def _check_pass(X) -> np.ndarray:
    """One _check_block row per chunk (dask) or one for the whole matrix (numpy): one pass, nothing
    row-sized returned."""
    if is_lazy(X):
        return X.map_blocks(_check_block, dtype=np.float64,
                            chunks=((1,) * X.numblocks[0], (2 * X.shape[1] + 1,))).compute()
    return _check_block(X)


def check_scale(magnitude: np.ndarray, feature_names: Sequence[str], n_rows: int, source: str) -> None:
    """Name a scale problem when squared distances would overflow or underflow float64.

    Every algorithm and score sums squared differences over rows and features: past
    sqrt(max / (4 n d)) in magnitude those sums overflow to inf; below about 1e-150 the squares
    underflow to zero and every point looks like every other.
    """
    magnitude = np.asarray(magnitude, dtype=np.float64)
    info = np.finfo(np.float64)
    big = np.sqrt(info.max / (4.0 * max(n_rows, 1) * max(len(magnitude), 1)))
    small = np.sqrt(info.tiny) * 1e4
    huge = [feature_names[j] for j in np.flatnonzero(magnitude > big).tolist()]
    tiny = [feature_names[j] for j in np.flatnonzero((magnitude > 0) & (magnitude < small)).tolist()]
    fix = ("this is a scale problem, not a lack of distinct points: standardize the features (subtract the mean, "
           "divide by the standard deviation) or rescale them to ordinary magnitudes before clustering")
    if huge:
        raise InputError(f"feature(s) {huge} of {source} reach {magnitude.max():.3g} in magnitude, where squared "
                         f"distances overflow float64; {fix}")
    if tiny:
        top = max(magnitude[feature_names.index(f)] for f in tiny)
        raise InputError(f"feature(s) {tiny} of {source} are no larger than {top:.3g} in magnitude, where squared "
                         f"distances underflow to zero; {fix}")


def _drop_nonfinite_rows(block: np.ndarray, d: int) -> np.ndarray:
    return block[np.isfinite(block[:, :d]).all(axis=1)]


def validate_matrix(
    X,
    feature_names: Sequence[str],
    *,
    nan_policy: str = "raise",
    n_clusters: int | None = None,
    extra: dict[str, Any] | None = None,
    source: str = "array",
) -> tuple[Any, dict[str, Any], int]:
    """Check shape and finiteness; drop non-finite rows when asked. Returns (X, extra, n_dropped)."""
    extra = dict(extra or {})
    if nan_policy not in {"raise", "drop"}:
        raise InputError(f"nan_policy must be 'raise' or 'drop', not {nan_policy!r}")
    if X.ndim != 2:
        raise InputError(f"expected a 2-D matrix (rows x features) from {source}, got shape {X.shape}")
    if X.shape[1] == 0:
        raise InputError(f"no feature columns in {source}")
    if X.shape[0] == 0:
        raise InputError(f"no rows in {source}")
    d = X.shape[1]
    checks = _check_pass(X)
    counts = checks[:, : d + 1].astype(np.int64)
    total = counts.sum(axis=0)
    n_dropped = 0
    if total[0]:
        if nan_policy == "raise":
            per_col = {feature_names[j]: int(c) for j, c in enumerate(total[1:]) if c}
            raise InputError(
                f"{int(total[0])} row(s) of {source} hold NaN or infinite values "
                f"(per column: {per_col}); clean them or use {{fix}}", option="nan_policy", value="drop",
            )
        n_dropped = int(total[0])
        kept = [int(c) for c in (np.asarray(X.chunks[0]) - counts[:, 0])] if is_lazy(X) else None
        X, extra = _drop_rows(X, extra, kept)
    n = X.shape[0]
    if n == 0:
        raise InputError(f"no rows left in {source} after dropping rows with NaN or infinite values")
    check_scale(checks[:, d + 1 :].max(axis=0), list(feature_names), n, source)
    if n_clusters is not None and n < n_clusters:
        raise InputError(f"{source} has {n} row(s), fewer than the {n_clusters} clusters asked for")
    return X, extra, n_dropped


def _drop_rows(X, extra: dict[str, Any], kept: list[int] | None):
    """The finite rows of X and the extra columns; ``kept`` (dask only) the rows each chunk keeps."""
    d = X.shape[1]
    if not is_lazy(X):
        mask = np.isfinite(X).all(axis=1)
        return X[mask], {k: np.asarray(v)[mask] for k, v in extra.items()}
    import dask.array as da

    assert kept is not None  # a dask X: the caller counted the rows each chunk keeps
    names = list(extra)
    stacked = da.concatenate([X, *[v.reshape(-1, 1) for v in extra.values()]], axis=1) if names else X
    stacked = stacked.rechunk({1: -1})
    filtered = stacked.map_blocks(
        _drop_nonfinite_rows, d, dtype=np.float64, chunks=(tuple(kept), (stacked.shape[1],))
    )
    return filtered[:, :d], {k: filtered[:, d + i] for i, k in enumerate(names)}


def check_spread(spread: np.ndarray, feature_names: Sequence[str], what: str = "standard deviation") -> None:
    """Raise when a feature has zero (or non-finite) spread where an algorithm divides by it."""
    spread = np.asarray(spread, dtype=np.float64)
    bad = [feature_names[j] for j in np.flatnonzero(~(np.isfinite(spread) & (spread > 0))).tolist()]
    if bad:
        raise InputError(
            f"feature(s) {bad} are constant (zero {what}) and cannot be normalized; drop them from the feature list"
        )


# --------------------------------------------------------------------------- entry points
def load_dataset(
    source: Any,
    features: Sequence[str] | None = None,
    *,
    extra_columns: Sequence[str] = (),
    nan_policy: str = "raise",
    n_clusters: int | None = None,
    piece_rows: int = DEFAULT_PIECE_ROWS,
    storage_options: Mapping[str, Any] | None = None,
    prepare: Callable[[Any, dict[str, Any]], tuple[Any, dict[str, Any]]] | None = None,
) -> Dataset:
    """Load and validate any supported input into a Dataset.

    ``features`` picks and orders the columns of tabular inputs (when omitted: the numeric
    columns but the extra columns and whole-number columns that look like labels, which
    ``Dataset.notes`` names; see ``exclust.sources.feature_choice``); ``extra_columns`` are kept
    aside as 1-D arrays (ground truth, precomputed labels); string labels are coded as integers in sorted order.
    ``storage_options`` go to the fsspec filesystem of a URL (``s3://...``: key, secret,
    endpoint_url, ...); the standard AWS_* environment variables are read too. ``prepare``
    sees the matrix and extra columns between reading and validation (the pipeline holds them
    on the workers there, so that validation already reads memory).
    """
    from exclust.sources.base import open_source

    extra_columns = [c for c in extra_columns if c]
    reader = open_source(source, storage_options)
    label = reader.describe()
    read = reader.columns(features, extra_columns, piece_rows=piece_rows)
    X, names, extras, categories, notes = read.X, read.feature_names, read.extras, read.categories, read.notes
    if prepare is not None:
        X, extras = prepare(X, extras)
    X, extras, n_dropped = validate_matrix(
        X, names, nan_policy=nan_policy, n_clusters=n_clusters, extra=extras, source=label
    )
    return Dataset(X, list(names), extras, label, n_dropped, categories, notes=notes)


def _recode_block(labels: np.ndarray, values: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    pos = np.clip(np.searchsorted(values, labels), 0, len(values) - 1)
    return np.where(values[pos] == labels, pos, -1).astype(np.int64)


def recode_labels(labels: Any, values: Sequence[Any]):
    """Labels holding ``values`` (e.g. 0, 5, 10, 15) as their positions 0..len-1 in sorted ``values``;
    any other value (-1 for noise included) becomes -1. Lazy for dask labels."""
    in_order = np.sort(np.asarray(values))
    if is_lazy(labels):
        return labels.map_blocks(_recode_block, in_order, dtype=np.int64)
    return _recode_block(labels, in_order)


def as_matrix(X: Any, *, n_clusters: int | None = None, nan_policy: str = "raise") -> Dataset:
    """Validate an estimator's ``X`` argument (array, DataFrame, dask array, or Dataset)."""
    if isinstance(X, Dataset):
        return X
    return load_dataset(X, nan_policy=nan_policy, n_clusters=n_clusters)
