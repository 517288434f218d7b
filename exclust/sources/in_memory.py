"""Inputs already in memory or already Dask collections: numpy arrays, pandas and Dask DataFrames,
Dask arrays. Small in-memory inputs stay numpy: they do not pay for a cluster."""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from exclust.dataplane.parts import is_lazy
from exclust.errors import InputError
from exclust.sources.base import Columns, DataSource
from exclust.sources.categories import (
    BOOLEAN_VOCABULARY,
    collect_vocabulary,
    distinct_values,
    encode_categories,
    pandas_category_dtype,
)
from exclust.sources.feature_choice import Column, choose_features, frame_columns


class InMemorySource(DataSource):
    """Anything that is not a path: the catch-all of objects, asked after every other source."""

    kind = "array"

    @classmethod
    def recognises(cls, spec: Any, storage_options: Mapping[str, Any] | None = None) -> bool:
        import os

        return not isinstance(spec, (str, os.PathLike))

    needs_cluster = False  # a Dask collection computes on the active client; numpy needs none

    def columns(self, features: Sequence[str] | None, extra_columns: Sequence[str] = (), *,
                piece_rows: int = 1_000_000, categorical: Sequence[str] = (),
                vocabularies: Mapping[str, Sequence[Any]] | None = None) -> Columns:
        X, names, extras, categories, _, notes = _columns_of(self.spec, features, list(extra_columns),
                                                             list(categorical), dict(vocabularies or {}))
        return Columns(X, names, extras, categories, notes)

    def describe(self) -> str:
        pd, dd = sys.modules.get("pandas"), sys.modules.get("dask.dataframe")
        if pd is not None and isinstance(self.spec, pd.DataFrame):
            return "pandas DataFrame"
        if dd is not None and isinstance(self.spec, dd.DataFrame):
            return "dask DataFrame"
        return "dask array" if is_lazy(self.spec) else "array"


def _columns_of(source: Any, features, extra_columns, categorical=(), vocabularies=None):
    # Modules looked up, not imported: an object of their types exists only once they are
    # imported, and importing dask costs a numpy input's first fit 1-2 s (bench_first_fit).
    pd, dd = sys.modules.get("pandas"), sys.modules.get("dask.dataframe")
    if (pd is not None and isinstance(source, pd.DataFrame)) or (dd is not None and isinstance(source, dd.DataFrame)):
        assert pd is not None  # a dask DataFrame exists only once pandas is imported
        kind = "pandas DataFrame" if isinstance(source, pd.DataFrame) else "dask DataFrame"
        columns = list(source.columns)
        notes = []
        if features is None:  # a dask frame's ranges would cost a pass: its columns are judged by type only
            described = frame_columns(source) if isinstance(source, pd.DataFrame) else [
                Column(c, pd.api.types.is_numeric_dtype(source[c].dtype)) for c in columns]
            choice = choose_features(described, extra_columns)
            features, notes = choice.require(f"the {kind}", columns), [choice.note()] if choice.note() else []
        features = list(features)
        unknown = [c for c in [*features, *extra_columns, *categorical] if c not in columns]
        if unknown:
            raise InputError(f"unknown column(s) {unknown} in the {kind}; available columns: {columns}")
        kinds = {c: _frame_kind(source, c, categorical) for c in features}
        bad = {c: str(source[c].dtype) for c, k in kinds.items() if k is None}
        if bad:
            raise InputError(f"non-numeric feature column(s) {bad} in the {kind}; choose numeric, text, category or "
                             "boolean columns")
        if not features:
            raise InputError(f"no numeric feature columns in the {kind}")
        coded = [c for c in features if kinds[c] != "number"]
        categories = _frame_vocabularies(source, coded, {c: str(kinds[c]) for c in coded}, dict(vocabularies or {}),
                                         f"the {kind}")
        if isinstance(source, pd.DataFrame):
            X = np.empty((len(source), len(features)), dtype=np.float64)
            for j, c in enumerate(features):
                X[:, j] = (encode_categories(source[c], categories[c]) if c in categories
                           else source[c].to_numpy(dtype=np.float64, na_value=np.nan))
            extras = {}
            for c in extra_columns:
                extras[c], cats = _codes(source[c])
                if cats is not None:
                    categories[c] = cats
        else:
            sub = source[list(dict.fromkeys([*features, *extra_columns]))]
            for c in coded:
                sub[c] = sub[c].map_partitions(_encoded, categories[c], meta=(c, "float64"))
            for c in extra_columns:
                if c not in coded and not pd.api.types.is_numeric_dtype(sub[c].dtype):
                    cats = sorted(str(v) for v in sub[c].dropna().unique().compute())
                    categories[c] = cats
                    sub[c] = sub[c].map({v: i for i, v in enumerate(cats)}, meta=(c, "float64"))
            arr = sub[[*features, *extra_columns]].astype("float64").to_dask_array(lengths=True)
            X = arr[:, : len(features)]
            extras = {c: arr[:, len(features) + i] for i, c in enumerate(extra_columns)}
        return X, features, extras, categories, kind, notes
    if extra_columns:
        raise InputError("extra columns can only be named for tabular inputs (DataFrame or Parquet)")
    if is_lazy(source):
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
    return X, features, {}, {}, kind, []


def _codes(series) -> tuple[np.ndarray, list[str] | None]:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64), None
    cats = sorted(str(v) for v in series.dropna().unique())
    lookup = {v: i for i, v in enumerate(cats)}
    return np.array([lookup.get(str(v), -1) if v == v else -1 for v in series], dtype=np.float64), cats




def _frame_kind(frame: Any, column: str, categorical: Sequence[str]) -> str | None:
    """A frame feature's kind as ``parquet.feature_kind`` names them: "number", "category",
    "boolean", or None (it cannot be a feature)."""
    import pandas as pd

    dtype = frame[column].dtype
    series = frame[column] if isinstance(frame, pd.DataFrame) else None
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if column in categorical:
        if not (pd.api.types.is_integer_dtype(dtype) or pandas_category_dtype(dtype, series)):
            raise InputError(f"column '{column}' is named as categorical but holds {dtype} values; integer, text and "
                             "boolean columns can be categories: leave it out of categorical")
        return "category"
    if pandas_category_dtype(dtype, series):
        return "category"
    return "number" if pd.api.types.is_numeric_dtype(dtype) else None


def _frame_vocabularies(frame: Any, coded: Sequence[str], kinds: Mapping[str, str],
                        given: Mapping[str, Sequence[Any]], where: str) -> dict[str, list[Any]]:
    """The vocabulary of each category feature: given, fixed (booleans), or gathered; a Dask
    frame's in one pass over its partitions (each sends back at most ``MAX_CATEGORIES + 1`` values)."""
    out = {c: list(given[c]) for c in coded if c in given}
    out.update({c: list(BOOLEAN_VOCABULARY) for c in coded if c not in out and kinds[c] == "boolean"})
    gathered = [c for c in coded if c not in out]
    if not gathered:
        return out
    if is_lazy(frame):
        import dask

        found = dask.compute(*[dask.delayed(_partition_values)(part, gathered) for part in
                               frame[gathered].to_delayed()])
    else:
        found = [_partition_values(frame[gathered], gathered)]
    for i, c in enumerate(gathered):
        out[c] = collect_vocabulary(c, [per_part[i] for per_part in found], where)
    return out


def _partition_values(part: Any, columns: Sequence[str]) -> list[tuple[list, int]]:
    return [distinct_values(part[c]) for c in columns]


def _encoded(series: Any, vocabulary: Sequence[Any]) -> Any:
    import pandas as pd

    return pd.Series(encode_categories(series, vocabulary), index=series.index, name=series.name)
