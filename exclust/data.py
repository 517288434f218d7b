"""Input: turn what a user holds into one validated float64 matrix plus feature names.

Accepted: numpy arrays, pandas DataFrames, dask arrays, dask DataFrames, and Parquet paths
(a file, a folder of files, or a glob) with a column list. Parquet is read by exclust itself,
one dask chunk per file (or per group of row groups of a large file), so chunk sizes are known
from the file footers without a pass over the data, and a corrupt file is named before any work.

Small in-memory inputs stay numpy: they do not pay for a cluster.
"""
from __future__ import annotations

import glob as _glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from exclust.errors import InputError  # re-exported: exclust.data.InputError is public

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

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def is_distributed(self) -> bool:
        return not isinstance(self.X, np.ndarray)


def is_dask_array(X: Any) -> bool:
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover - dask is a dependency
        return False
    return isinstance(X, da.Array)


# --------------------------------------------------------------------------- Parquet
def parquet_files(source: str | os.PathLike) -> list[Path]:
    """The Parquet files a path, folder or glob names, sorted; error if there are none."""
    text = str(source)
    if any(ch in text for ch in "*?["):
        files = sorted(Path(p) for p in _glob.glob(text, recursive=True))
    else:
        path = Path(text)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in {".parquet", ".parq", ".pq"})
        elif path.is_file():
            files = [path]
        else:
            raise InputError(f"input not found: {text}")
    files = [f for f in files if f.is_file() and not f.name.startswith((".", "_"))]
    if not files:
        raise InputError(f"no Parquet files found at {text}")
    return files


@dataclass(frozen=True)
class _Piece:
    path: str
    row_groups: tuple[int, ...]
    n_rows: int


def _plan_pieces(files: Sequence[Path], piece_rows: int) -> tuple[list[_Piece], Any]:
    """Read every footer once: row counts per piece, and the schema (which must agree)."""
    import pyarrow.parquet as pq

    pieces: list[_Piece] = []
    schema = None
    for f in files:
        try:
            meta = pq.read_metadata(f)
            file_schema = meta.schema.to_arrow_schema()
        except Exception as exc:  # pyarrow raises several types for a damaged footer
            raise InputError(f"cannot read Parquet file {f}: {exc}") from exc
        if schema is None:
            schema = file_schema
        group: list[int] = []
        rows = 0
        for rg in range(meta.num_row_groups):
            n = meta.row_group(rg).num_rows
            if group and rows + n > piece_rows:
                pieces.append(_Piece(str(f), tuple(group), rows))
                group, rows = [], 0
            group.append(rg)
            rows += n
        if group and rows:
            pieces.append(_Piece(str(f), tuple(group), rows))
    return pieces, schema


def _read_piece(piece: _Piece, columns: list[str], categories: dict[str, list[str]]) -> np.ndarray:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(piece.path).read_row_groups(list(piece.row_groups), columns=columns)
    except Exception as exc:
        raise InputError(f"cannot read Parquet file {piece.path}: {exc}") from exc
    out = np.empty((table.num_rows, len(columns)), dtype=np.float64)
    for j, name in enumerate(columns):
        col = table.column(name)
        if name in categories:
            lookup = {v: i for i, v in enumerate(categories[name])}
            values = col.to_pylist()
            out[:, j] = [lookup.get(v, -1) if v is not None else -1 for v in values]
        else:
            out[:, j] = col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return out


def _unique_strings(piece: _Piece, column: str) -> set:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.ParquetFile(piece.path).read_row_groups(list(piece.row_groups), columns=[column])
    return {v for v in pc.unique(table.column(column)).to_pylist() if v is not None}


def _numeric_type(arrow_type) -> bool:
    import pyarrow.types as pat

    return pat.is_integer(arrow_type) or pat.is_floating(arrow_type) or pat.is_boolean(arrow_type) or pat.is_decimal(arrow_type)


def _string_type(arrow_type) -> bool:
    import pyarrow.types as pat

    return pat.is_string(arrow_type) or pat.is_large_string(arrow_type) or pat.is_dictionary(arrow_type)


def read_parquet(
    source: str | os.PathLike,
    features: Sequence[str] | None,
    extra_columns: Sequence[str] = (),
    piece_rows: int = DEFAULT_PIECE_ROWS,
):
    """Lazy dask arrays (X, extras) for the Parquet input, chunked by file, chunk sizes known."""
    import dask
    import dask.array as da

    files = parquet_files(source)
    pieces, schema = _plan_pieces(files, piece_rows)
    names = list(schema.names)
    extra_columns = [c for c in extra_columns if c]
    if features is None:
        features = [n for n in names if n not in extra_columns and _numeric_type(schema.field(n).type)]
    features = list(features)
    if not features:
        raise InputError(f"no numeric feature columns in {source}; columns are {names}")
    unknown = [c for c in [*features, *extra_columns] if c not in names]
    if unknown:
        raise InputError(f"unknown column(s) {unknown} in {source}; available columns: {names}")
    bad = [c for c in features if not _numeric_type(schema.field(c).type)]
    if bad:
        kinds = {c: str(schema.field(c).type) for c in bad}
        raise InputError(f"non-numeric feature column(s) {kinds} in {source}; choose numeric columns")
    categories: dict[str, list[str]] = {}
    for c in extra_columns:
        t = schema.field(c).type
        if _string_type(t):
            # One small pass: the distinct labels of a string column, merged across pieces.
            found = dask.compute(*[dask.delayed(_unique_strings)(p, c) for p in pieces])
            categories[c] = sorted(set().union(*found))
        elif not _numeric_type(t):
            raise InputError(f"column '{c}' has type {t}; use integer or string labels")
    columns = [*features, *extra_columns]
    blocks = [
        da.from_delayed(
            dask.delayed(_read_piece)(p, columns, categories), shape=(p.n_rows, len(columns)), dtype=np.float64
        )
        for p in pieces
    ]
    if not blocks:
        raise InputError(f"no rows in {source}")
    full = da.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]
    d = len(features)
    X = full[:, :d]
    extras = {c: full[:, d + i] for i, c in enumerate(extra_columns)}
    return X, features, extras, categories


# --------------------------------------------------------------------------- validation
def _nonfinite_block(block: np.ndarray) -> np.ndarray:
    """Per chunk: [rows with any non-finite value, non-finite count per column...]."""
    bad = ~np.isfinite(block)
    return np.concatenate([[bad.any(axis=1).sum()], bad.sum(axis=0)]).reshape(1, -1).astype(np.int64)


_CHECK_SLICE_ROWS = 65_536


def _count_nonfinite(X) -> np.ndarray:
    """Per chunk row of counts (see _nonfinite_block): one pass, nothing row-sized returned."""
    if is_dask_array(X):
        counts = X.map_blocks(
            _nonfinite_block, dtype=np.int64, chunks=((1,) * X.numblocks[0], (X.shape[1] + 1,))
        )
        return counts.compute()
    # Row slices keep the boolean temporaries small next to a large in-memory matrix.
    return sum(
        (_nonfinite_block(X[i : i + _CHECK_SLICE_ROWS]) for i in range(0, X.shape[0], _CHECK_SLICE_ROWS)),
        np.zeros((1, X.shape[1] + 1), dtype=np.int64),
    )


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
    counts = _count_nonfinite(X)
    total = counts.sum(axis=0)
    n_dropped = 0
    if total[0]:
        if nan_policy == "raise":
            per_col = {feature_names[j]: int(c) for j, c in enumerate(total[1:]) if c}
            raise InputError(
                f"{int(total[0])} row(s) of {source} hold NaN or infinite values "
                f"(per column: {per_col}); clean them or pass nan_policy='drop'"
            )
        n_dropped = int(total[0])
        kept = [int(c) for c in (np.asarray([b.shape[0] for b in _row_chunks(X)]) - counts[:, 0])]
        X, extra = _drop_rows(X, extra, kept)
    n = X.shape[0]
    if n == 0:
        raise InputError(f"no rows left in {source} after dropping rows with NaN or infinite values")
    if n_clusters is not None and n < n_clusters:
        raise InputError(f"{source} has {n} row(s), fewer than the {n_clusters} clusters asked for")
    return X, extra, n_dropped


def _row_chunks(X):
    if is_dask_array(X):
        return [np.empty((c, 0)) for c in X.chunks[0]]
    return [X]


def _drop_rows(X, extra: dict[str, Any], kept: list[int]):
    d = X.shape[1]
    if not is_dask_array(X):
        mask = np.isfinite(X).all(axis=1)
        return X[mask], {k: np.asarray(v)[mask] for k, v in extra.items()}
    import dask.array as da

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
    bad = [feature_names[j] for j in np.flatnonzero(~(np.isfinite(spread) & (spread > 0)))]
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
) -> Dataset:
    """Load and validate any supported input into a Dataset.

    ``features`` picks and orders the columns of tabular inputs (all numeric columns when
    omitted, extra columns excluded); ``extra_columns`` are kept aside as 1-D arrays (ground
    truth, precomputed labels); string labels are coded as integers in sorted order.
    """
    extra_columns = [c for c in extra_columns if c]
    extras: dict[str, Any] = {}
    categories: dict[str, list[str]] = {}
    label = "array"
    if isinstance(source, (str, os.PathLike)):
        label = str(source)
        X, names, extras, categories = read_parquet(source, features, extra_columns, piece_rows)
    else:
        X, names, extras, categories, label = _from_object(source, features, extra_columns)
    X, extras, n_dropped = validate_matrix(
        X, names, nan_policy=nan_policy, n_clusters=n_clusters, extra=extras, source=label
    )
    return Dataset(X, list(names), extras, label, n_dropped, categories)


def _from_object(source: Any, features, extra_columns):
    import pandas as pd

    try:
        import dask.dataframe as dd
    except ImportError:  # pragma: no cover
        dd = None
    if isinstance(source, pd.DataFrame) or (dd is not None and isinstance(source, dd.DataFrame)):
        kind = "pandas DataFrame" if isinstance(source, pd.DataFrame) else "dask DataFrame"
        columns = list(source.columns)
        if features is None:
            features = [
                c for c in columns if c not in extra_columns and pd.api.types.is_numeric_dtype(source[c].dtype)
            ]
        features = list(features)
        unknown = [c for c in [*features, *extra_columns] if c not in columns]
        if unknown:
            raise InputError(f"unknown column(s) {unknown} in the {kind}; available columns: {columns}")
        bad = {c: str(source[c].dtype) for c in features if not pd.api.types.is_numeric_dtype(source[c].dtype)}
        if bad:
            raise InputError(f"non-numeric feature column(s) {bad} in the {kind}; choose numeric columns")
        if not features:
            raise InputError(f"no numeric feature columns in the {kind}")
        categories: dict[str, list[str]] = {}
        if isinstance(source, pd.DataFrame):
            X = source[features].to_numpy(dtype=np.float64)
            extras = {}
            for c in extra_columns:
                extras[c], cats = _codes(source[c])
                if cats is not None:
                    categories[c] = cats
        else:
            sub = source[[*features, *extra_columns]]
            for c in extra_columns:
                if not pd.api.types.is_numeric_dtype(sub[c].dtype):
                    cats = sorted(str(v) for v in sub[c].dropna().unique().compute())
                    categories[c] = cats
                    sub[c] = sub[c].map({v: i for i, v in enumerate(cats)}, meta=(c, "float64"))
            arr = sub.astype("float64").to_dask_array(lengths=True)
            X = arr[:, : len(features)]
            extras = {c: arr[:, len(features) + i] for i, c in enumerate(extra_columns)}
        return X, features, extras, categories, kind
    if extra_columns:
        raise InputError("extra columns can only be named for tabular inputs (DataFrame or Parquet)")
    if is_dask_array(source):
        X = source.astype(np.float64)
        if X.ndim == 2 and X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        if X.ndim == 2 and any(np.isnan(c) for c in X.chunks[0]):
            X = X.compute_chunk_sizes()
        kind = "dask array"
    else:
        try:
            X = np.asarray(source, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"input is not a numeric matrix: {exc}") from exc
        kind = "array"
    if X.ndim == 1:
        raise InputError(f"expected a 2-D matrix (rows x features), got a 1-D {kind} of length {X.shape[0]}")
    d = X.shape[1] if X.ndim == 2 else 0
    if features is not None:
        features = list(features)
        if len(features) != d:
            raise InputError(f"{len(features)} feature names for a {kind} with {d} columns")
    else:
        features = [f"x{j}" for j in range(d)]
    return X, features, {}, {}, kind


def _codes(series) -> tuple[np.ndarray, list[str] | None]:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64), None
    cats = sorted(str(v) for v in series.dropna().unique())
    lookup = {v: i for i, v in enumerate(cats)}
    return np.array([lookup.get(str(v), -1) if v == v else -1 for v in series], dtype=np.float64), cats


def as_matrix(X: Any, *, n_clusters: int | None = None, nan_policy: str = "raise") -> Dataset:
    """Validate an estimator's ``X`` argument (array, DataFrame, dask array, or Dataset)."""
    if isinstance(X, Dataset):
        return X
    return load_dataset(X, nan_policy=nan_policy, n_clusters=n_clusters)
