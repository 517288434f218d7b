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
                piece_rows: int = 1_000_000) -> Columns:
        X, names, extras, categories, _, notes = _columns_of(self.spec, features, list(extra_columns))
        return Columns(X, names, extras, categories, notes)

    def describe(self) -> str:
        pd, dd = sys.modules.get("pandas"), sys.modules.get("dask.dataframe")
        if pd is not None and isinstance(self.spec, pd.DataFrame):
            return "pandas DataFrame"
        if dd is not None and isinstance(self.spec, dd.DataFrame):
            return "dask DataFrame"
        return "dask array" if is_lazy(self.spec) else "array"


def _columns_of(source: Any, features, extra_columns):
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


