"""DataFrames handed to an estimator: what ``fit`` learns from one and how ``predict`` reads the next.

scikit-learn's convention: every column of a DataFrame is a feature, in its order. A fit's frame
(pandas or Dask) becomes a ``Dataset`` through ``load_dataset``, the path the command line takes:
text, pandas ``category`` and boolean columns are category features (their codes in X, their
vocabularies in ``Dataset.categories``), integer columns are categories when they are a pandas
``category`` (or named in ``load_dataset(..., categorical=[...])``), and a NaN or null stays a
missing value (``nan_policy="keep"``). A later frame is coded with the fitted vocabularies
(``frame_rows``): a category the fit never saw becomes ``UNSEEN_CATEGORY``, and a frame whose
columns differ from the fit's in name, order or kind is refused in one line.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from exclust.errors import InputError
from exclust.sources.dataset import Dataset, load_dataset, require_complete


def is_frame(X: Any) -> bool:
    """Whether X is a pandas or a Dask DataFrame (modules looked up, not imported: numpy input
    does not pay for importing them)."""
    pd, dd = sys.modules.get("pandas"), sys.modules.get("dask.dataframe")
    return (pd is not None and isinstance(X, pd.DataFrame)) or (dd is not None and isinstance(X, dd.DataFrame))


def all_numeric(frame: Any) -> bool:
    """Whether every column of a frame holds numbers (no text, category or boolean column)."""
    import pandas as pd

    return all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in frame.dtypes)


def _named_by_text(frame: Any) -> Any:
    """The frame with its column names as text (feature names are text; a frame of columns 0, 1, ... too)."""
    if all(isinstance(c, str) for c in frame.columns):
        return frame
    return frame.rename(columns=str)


def frame_dataset(frame: Any, *, n_clusters: int | None = None) -> Dataset:
    """A fit's frame as a Dataset of every column (see the module docstring); the rows are
    validated in one pass (a row holding an infinity is refused; NaN stays missing)."""
    frame = _named_by_text(frame)
    return load_dataset(frame, [str(c) for c in frame.columns], nan_policy="keep", n_clusters=n_clusters)


def refuse_category_features(data: Dataset, who: str, why: str) -> None:
    """InputError for an estimator that reads numbers in every cell (``why``: what it fits), when
    ``data`` holds category features or missing values; the same line a run gives."""
    if getattr(data, "categories", None):
        names = [data.feature_names[j] for j in sorted(data.categories)]
        raise InputError(f"{who} {why}, so category features ({names}) cannot be among its features: leave them out, "
                         "or choose a tree that cuts categories (imm, exkmc, cart, ...)")
    if getattr(data, "missing", None):
        require_complete(data, who)


def frame_rows(frame: Any, feature_names: Sequence[str], vocabularies: Mapping[str, Sequence[Any]], owner: str) -> Any:
    """A predict or score frame as the fitted estimator's float64 rows (numpy, or a dask array
    for a Dask frame): its category columns coded with the fit's ``vocabularies`` (by name; a
    value outside them is ``UNSEEN_CATEGORY``), NaN kept. A column that is a category now but
    was numeric at fit, or the reverse, is refused in one line naming it."""
    from exclust.sources.in_memory import InMemorySource

    frame = _named_by_text(frame)
    import pandas as pd

    # A forced integer category (categorical=) is named again; any other kind speaks for itself.
    forced = [c for c, v in vocabularies.items() if v and type(v[0]) is int and c in frame.columns
              and pd.api.types.is_integer_dtype(frame[c].dtype)]
    read = InMemorySource(frame).columns(list(feature_names), categorical=forced,
                                         vocabularies={c: list(v) for c, v in vocabularies.items()})
    now_categories = [c for c in read.categories if c not in vocabularies]
    if now_categories:
        kinds = {c: str(frame[c].dtype) for c in now_categories}
        raise InputError(f"column(s) {kinds} hold categories, but {owner} was fitted on them as numbers; pass the "
                         "columns as they were at fit")
    now_numbers = [c for c in vocabularies if c not in read.categories]
    if now_numbers:
        kinds = {c: str(frame[c].dtype) for c in now_numbers}
        raise InputError(f"column(s) {kinds} were category features when {owner} was fitted but are not now; pass "
                         "them as they were at fit (text, pandas category, boolean, or integer codes)")
    return read.X
