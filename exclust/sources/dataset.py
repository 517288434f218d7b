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
    # Category features: feature index -> its values in code order (code c is categories[j][c]);
    # features absent are numeric (exclust.sources.categories).
    categories: dict[int, list[Any]] = field(default_factory=dict)
    # The columns the reference clustering is fitted on (option ``cluster_on``), row-aligned with
    # X; None: X itself.
    cluster_X: Any = None
    cluster_names: list[str] | None = None
    # Missing values (NaN, nulls) kept by nan_policy="keep": column name -> count, over the
    # features and the clustering columns (absent: none); found by the validation pass.
    missing: dict[str, int] = field(default_factory=dict)

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

    def clustering(self) -> Dataset:
        """The data the reference clustering is fitted on: the ``cluster_X`` columns (with the
        same rows, extra columns and sample drawn of them) or, without them, this Dataset."""
        if self.cluster_X is None:
            return self
        assert self.cluster_names is not None  # set with cluster_X
        missing = {c: n for c, n in self.missing.items() if c in self.cluster_names}
        return Dataset(self.cluster_X, list(self.cluster_names), self.extra, self.source, self.n_dropped,
                       self.category_names, notes=self.notes, missing=missing)


# --------------------------------------------------------------------------- validation
def _check_block(block: np.ndarray) -> np.ndarray:
    """Per chunk, one float row: [rows with a non-finite value, non-finite count per column...,
    largest finite magnitude per column...] (counts are exact in float64 up to 2**53)."""
    from exclust.sources._finite_check import finite_summary

    return finite_summary(np.ascontiguousarray(block, dtype=np.float64)).reshape(1, -1)


def check_rows(X):
    """The validation's work on a dask matrix, lazy: one _check_block row per chunk (computed by
    ``validate_matrix``, or by a caller in the same graph as the read: ``load_dataset``'s ``prepare``)."""
    return X.map_blocks(_check_block, dtype=np.float64, chunks=((1,) * X.numblocks[0], (3 * X.shape[1] + 2,)))


def _check_pass(X) -> np.ndarray:
    """One _check_block row per chunk (dask) or one for the whole matrix (numpy): one pass, nothing
    row-sized returned."""
    return check_rows(X).compute() if is_lazy(X) else _check_block(X)


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


NAN_POLICIES = ("keep", "drop", "raise")


def validate_matrix(
    X,
    feature_names: Sequence[str],
    *,
    nan_policy: str = "keep",
    n_clusters: int | None = None,
    extra: dict[str, Any] | None = None,
    source: str = "array",
    checks: np.ndarray | None = None,
) -> tuple[Any, dict[str, Any], int, dict[str, int]]:
    """Check shape and finiteness in one pass. Returns (X, extra, n_dropped, missing).
    ``checks``: ``check_rows(X)`` computed already (then no pass here).

    ``nan_policy``: "keep" (default) keeps NaN (a missing value, which the trees route) and
    refuses infinities; "drop" drops every row holding NaN or an infinity; "raise" refuses both.
    ``missing``: column name -> NaN count, for the columns that hold any (kept rows only).
    """
    extra = dict(extra or {})
    if nan_policy not in NAN_POLICIES:
        raise InputError(f"nan_policy must be one of {', '.join(map(repr, NAN_POLICIES))}, not {nan_policy!r}")
    if X.ndim != 2:
        raise InputError(f"expected a 2-D matrix (rows x features) from {source}, got shape {X.shape}")
    if X.shape[1] == 0:
        raise InputError(f"no feature columns in {source}")
    if X.shape[0] == 0:
        raise InputError(f"no rows in {source}")
    d = X.shape[1]
    checks = _check_pass(X) if checks is None else np.asarray(checks, dtype=np.float64)
    counts = checks[:, : 2 + 2 * d].astype(np.int64)
    total = counts.sum(axis=0)
    bad_rows, inf_rows, nonfinite, infinite = int(total[0]), int(total[1]), total[2:2 + d], total[2 + d:2 + 2 * d]
    n_dropped = 0
    missing: dict[str, int] = {}
    if bad_rows and nan_policy == "drop":
        n_dropped = bad_rows
        kept = [int(c) for c in (np.asarray(X.chunks[0]) - counts[:, 0])] if is_lazy(X) else None
        X, extra = _drop_rows(X, extra, kept)
    elif bad_rows and (nan_policy == "raise" or inf_rows):
        rows, what, per = ((bad_rows, "NaN or infinite values", nonfinite) if nan_policy == "raise"
                           else (inf_rows, "infinite values", infinite))
        per_col = {feature_names[j]: int(c) for j, c in enumerate(per) if c}
        raise InputError(f"{rows} row(s) of {source} hold {what} (per column: {per_col}); clean them or use "
                         "{fix}", option="nan_policy", value="drop")
    elif bad_rows:  # kept: NaN only
        missing = {feature_names[j]: int(c) for j, c in enumerate(nonfinite) if c}
    n = X.shape[0]
    if n == 0:
        raise InputError(f"no rows left in {source} after dropping rows with NaN or infinite values")
    check_scale(checks[:, 2 + 2 * d:].max(axis=0), list(feature_names), n, source)
    if n_clusters is not None and n < n_clusters:
        raise InputError(f"{source} has {n} row(s), fewer than the {n_clusters} clusters asked for")
    return X, extra, n_dropped, missing


def require_complete(data: Any, who: str, columns: Sequence[str] | None = None) -> None:
    """Refuse, in one line, data whose rows are not complete where ``who`` (a reference
    clustering, an algorithm that needs numbers in every cell) must read them all.

    ``data``: a Dataset (its validation counted the missing values: no pass), or a numpy matrix
    (checked here). ``columns``: the Dataset's columns that matter (default: its features).
    The fix named: drop such rows (``--drop-nan``, ``nan_policy='drop'``), or cluster on complete
    columns (``--cluster-on``).
    """
    if isinstance(data, Dataset):
        names = list(columns) if columns is not None else list(data.feature_names)
        holes = {c: data.missing[c] for c in names if data.missing.get(c)}
    elif is_lazy(data):
        return  # a dask matrix is checked by its own validation pass (as_matrix)
    else:
        matrix = np.asarray(data, dtype=np.float64)
        counts = np.isnan(matrix).sum(axis=0) if matrix.ndim == 2 else np.zeros(0)
        holes = {f"x{j}": int(c) for j, c in enumerate(counts) if c}
    if holes:
        raise InputError(f"{who} needs complete rows, but column(s) hold missing values (NaN or null; per column: "
                         f"{holes}); drop those rows with {{fix}}, or fit it on complete columns (--cluster-on)",
                         option="nan_policy", value="drop")


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
    nan_policy: str = "keep",
    n_clusters: int | None = None,
    piece_rows: int = DEFAULT_PIECE_ROWS,
    storage_options: Mapping[str, Any] | None = None,
    prepare: Callable[[Any, dict[str, Any], Callable[[Any, dict[str, Any]], Any]],
                      tuple[Any, dict[str, Any], np.ndarray | None]] | None = None,
    categorical: Sequence[str] = (),
    cluster_on: Sequence[str] | None = None,
    vocabularies: Mapping[str, Sequence[Any]] | None = None,
) -> Dataset:
    """Load and validate any supported input into a Dataset.

    ``features`` picks and orders the columns of tabular inputs (when omitted: the numeric
    columns but the extra columns and whole-number columns that look like labels, which
    ``Dataset.notes`` names; see ``exclust.sources.feature_choice``); ``extra_columns`` are kept
    aside as 1-D arrays (ground truth, precomputed labels); string labels are coded as integers in sorted order.
    Text, dictionary, pandas ``category`` and boolean features, and integer features named in
    ``categorical``, are category features: their codes in X, their vocabularies in
    ``Dataset.categories`` (``exclust.sources.categories``; ``vocabularies``, by column name,
    codes them with given vocabularies instead of their own: a fitted tree's, say).
    ``cluster_on`` names the numeric columns the reference clustering is fitted on
    (``Dataset.cluster_X``, read in the same pass); when omitted and the features hold category
    columns, the numeric features (a note says so).
    ``nan_policy``: "keep" (default: NaN and nulls are missing values), "drop" or "raise"; see
    ``validate_matrix``.
    ``storage_options`` go to the fsspec filesystem of a URL (``s3://...``: key, secret,
    endpoint_url, ...); the standard AWS_* environment variables are read too. ``prepare``
    sees the matrix and extra columns between reading and validation (the pipeline holds them
    on the workers there, so that validation already reads memory): ``prepare(X, extras, checks_of)``
    returns ``(X, extras, checks)``, where ``checks`` is ``checks_of(X, extras)`` (the validation's
    lazy work, ``check_rows`` of the matrix it checks) computed, say in the same graph as the read,
    or None for a pass of its own here.
    """
    from exclust.sources.base import open_source
    from exclust.sources.categories import feature_categories

    extra_columns = [c for c in extra_columns if c]
    reader = open_source(source, storage_options)
    label = reader.describe()
    wanted = [c for c in (cluster_on or ()) if c not in extra_columns and (features is None or c not in features)]
    options: dict[str, Any] = {}
    if categorical:
        options["categorical"] = list(categorical)
    if vocabularies:
        options["vocabularies"] = dict(vocabularies)
    read = reader.columns(features, [*extra_columns, *wanted], piece_rows=piece_rows, **options)
    X, names, extras, by_name, notes = read.X, read.feature_names, read.extras, read.categories, read.notes
    cluster_names = _cluster_columns(cluster_on, names, by_name, label, notes)
    aside = [c for c in (cluster_names or ()) if c not in names]  # read as extra columns, checked with X

    def matrix(X, extras):  # what the validation checks: X, and the clustering's columns read aside
        return _beside(X, [extras[c] for c in aside]) if aside else X

    checks = None
    if prepare is not None:
        X, extras, checks = prepare(X, extras, lambda X, extras: check_rows(matrix(X, extras)))
    d = len(names)
    checked = matrix(X, extras)
    checked, extras, n_dropped, missing = validate_matrix(
        checked, [*names, *aside], nan_policy=nan_policy, n_clusters=n_clusters, extra=extras, source=label,
        checks=checks,
    )
    X = checked[:, :d] if aside else checked
    cluster_X = None
    if cluster_names is not None:
        at = {c: j for j, c in enumerate([*names, *aside])}
        cluster_X = checked[:, [at[c] for c in cluster_names]]
    for c in wanted:
        extras.pop(c, None)
    return Dataset(X, list(names), extras, label, n_dropped, by_name, notes=notes,
                   categories=feature_categories(names, by_name), cluster_X=cluster_X, cluster_names=cluster_names,
                   missing=missing)


def _cluster_columns(cluster_on: Sequence[str] | None, names: Sequence[str], by_name: Mapping[str, Any],
                     source: str, notes: list[str]) -> list[str] | None:
    """The reference clustering's columns: ``cluster_on`` checked numeric; else, when some features
    are categories, the numeric features (said in ``notes``); else None (the features themselves)."""
    if cluster_on:
        text = [c for c in cluster_on if c in by_name]
        if text:
            raise InputError(f"cluster_on column(s) {text} of {source} are categories; a clustering is fitted on "
                             "numbers: name numeric columns in {fix}", option="cluster_on", value="COL1,COL2")
        return list(dict.fromkeys(cluster_on))
    categories = [c for c in names if c in by_name]
    if not categories:
        return None
    numeric = [c for c in names if c not in by_name]
    if not numeric:
        raise InputError(f"every feature of {source} is a category ({categories}); the reference clustering is "
                         "fitted on numbers: name numeric columns to cluster on with {fix}", option="cluster_on",
                         value="COL1,COL2")
    notes.append(f"the reference clustering is fitted on the numeric features {numeric} only: the category "
                 f"feature(s) {categories} are cut by the tree, not clustered on; name the clustering's columns "
                 "with --cluster-on (cluster_on=[...] in Python) to choose")
    return numeric


def _beside(X: Any, columns: list[Any]) -> Any:
    """X with 1-D ``columns`` (row-aligned) appended: one matrix for one validation pass."""
    if is_lazy(X):
        import dask.array as da

        stacked = da.concatenate([X, *[da.asarray(c).reshape(-1, 1).rechunk((X.chunks[0], 1)) for c in columns]],
                                 axis=1)
        return stacked.rechunk({1: -1})
    return np.column_stack([X, *[np.asarray(c, dtype=np.float64) for c in columns]])


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


# The estimators' policy for NaN in a bare X (a Dataset keeps the policy it was loaded with).
# "raise" until every tree builder routes missing values (issue 28: the histogram family, the
# tree's missing sides); then "keep", as load_dataset and the jobs already do.
ESTIMATOR_NAN_POLICY = "raise"


def as_matrix(X: Any, *, n_clusters: int | None = None, nan_policy: str | None = None,
              categorical: Sequence[str] = ()) -> Dataset:
    """Validate an estimator's ``X`` argument (array, DataFrame, dask array, or Dataset): text,
    category and boolean columns of a frame (and integer ones named in ``categorical``) become
    codes with their vocabularies in ``Dataset.categories``. ``nan_policy`` (default
    ``ESTIMATOR_NAN_POLICY``): see ``validate_matrix``."""
    if isinstance(X, Dataset):
        return X
    return load_dataset(X, nan_policy=nan_policy or ESTIMATOR_NAN_POLICY, n_clusters=n_clusters,
                        categorical=categorical)


def as_tree_input(X: Any, *, n_clusters: int | None = None) -> Dataset:
    """``as_matrix`` for a tree builder that learns where missing values go at every cut (the
    histogram family, TreeSearch, LabelTree, CART): a bare array's NaN is kept as a missing
    value, as a frame's or a table's is, instead of refused (``ESTIMATOR_NAN_POLICY``); inf is
    still refused. A reference clustering fitted on those rows still needs them complete
    (``clustering_input``)."""
    return as_matrix(X, n_clusters=n_clusters, nan_policy="keep")


def clustering_input(data: Dataset, who: str) -> Dataset:
    """What a reference clustering ``who`` is fitted on: ``data.clustering()`` (the ``cluster_X``
    columns, else the features), refused in one line when its rows are not complete
    (``require_complete``)."""
    view = data.clustering()
    require_complete(view, who)
    return view
