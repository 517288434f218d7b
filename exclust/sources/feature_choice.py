"""Which columns a run takes as features when none are named: numeric columns that are not labels.

A label among the features explains a clustering by its own answer: on the demo's data a tree
cut on ``truth`` (``cluster 0: truth > 3.5``, error 0). So without a feature list, a column is
left out when the run names it as a label (the truth, the reference labels, the concepts: the
callers pass those as ``labels``), or when it looks like one: an integer or boolean column whose
values span at most ``LABEL_LIKE_VALUES`` consecutive whole numbers (a cluster id, a class, a
flag). Such a column is left out with a note naming it, not refused: naming the features keeps
it. The value range comes without a pass over the data: from the Parquet footers' min/max
statistics, or from an in-memory frame. A column without statistics is kept (it cannot be told).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from exclust.errors import InputError

# Whole-number columns spanning at most this many values look like labels (k is rarely above 30;
# a real count or measure of so few values is rare, and naming the features keeps it).
LABEL_LIKE_VALUES = 32


@dataclass(frozen=True)
class Column:
    """What the choice needs to know of one column: numeric at all, whole numbers, and their range."""

    name: str
    numeric: bool
    whole: bool = False  # integer or boolean type
    low: float | None = None  # smallest and largest value, when known without reading the data
    high: float | None = None

    @property
    def looks_like_label(self) -> bool:
        return (self.numeric and self.whole and self.low is not None and self.high is not None
                and self.high - self.low + 1 <= LABEL_LIKE_VALUES)


@dataclass(frozen=True)
class FeatureChoice:
    """The default features, and the numeric columns left out because they look like labels."""

    features: list[str]
    left_out: list[Column]

    def note(self) -> str | None:
        """One line naming the left-out columns and how to keep them; None when none was left out."""
        if not self.left_out:
            return None
        described = ", ".join(f"'{c.name}' ({c.low:g}..{c.high:g})" for c in self.left_out)
        return (f"left out of the features: {described}: whole numbers of at most {LABEL_LIKE_VALUES} values look "
                "like a label; name the features (--features, or features=[...] in Python) to use them")


    def require(self, where: str, names: Sequence[str]) -> list[str]:
        """The features; InputError naming the columns when none is left."""
        if self.features:
            return self.features
        if self.left_out:
            raise InputError(f"no feature columns in {where}: the only numeric ones, "
                             f"{[c.name for c in self.left_out]}, hold few whole numbers like a label; "
                             "name the features to use them (--features, or features=[...] in Python)")
        raise InputError(f"no numeric feature columns in {where}; columns are {list(names)}")


def choose_features(columns: Iterable[Column], labels: Sequence[str]) -> FeatureChoice:
    """Every numeric column that is neither named in ``labels`` nor looks like a label, in column order."""
    named = set(labels)
    candidates = [c for c in columns if c.numeric and c.name not in named]
    return FeatureChoice([c.name for c in candidates if not c.looks_like_label],
                         [c for c in candidates if c.looks_like_label])


def footer_columns(schema: Any, footers: Sequence[Any], numeric_type) -> list[Column]:
    """``Column`` per field of the arrow ``schema``, ranges of whole-number columns from every file's
    row-group statistics (``footers``: pyarrow FileMetaData); ``numeric_type`` judges an arrow type."""
    import pyarrow.types as pat

    columns = []
    for field in schema:
        whole = pat.is_integer(field.type) or pat.is_boolean(field.type)
        numeric = bool(numeric_type(field.type))
        low = high = None
        if numeric and whole:
            low, high = _footer_range(field.name, footers)
        columns.append(Column(field.name, numeric, whole, low, high))
    return columns


def _footer_range(name: str, footers: Sequence[Any]) -> tuple[float | None, float | None]:
    """(min, max) of column ``name`` over every row group of every file; (None, None) when any
    row group lacks the statistics (then nothing can be said without reading)."""
    low, high = float("inf"), float("-inf")
    for meta in footers:
        names = meta.schema.names
        if name not in names:
            continue
        j = names.index(name)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows == 0:
                continue
            stats = group.column(j).statistics
            if stats is None or not stats.has_min_max:
                return None, None
            low, high = min(low, float(stats.min)), max(high, float(stats.max))
    return (low, high) if low <= high else (None, None)


def frame_columns(frame: Any) -> list[Column]:
    """``Column`` per column of a pandas DataFrame, ranges of whole-number columns from the data in memory."""
    import pandas as pd

    columns = []
    for name in frame.columns:
        dtype = frame[name].dtype
        numeric = bool(pd.api.types.is_numeric_dtype(dtype))
        whole = numeric and (pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))
        low = high = None
        if whole and len(frame):
            values = frame[name].dropna()
            if len(values):
                low, high = float(values.min()), float(values.max())
        columns.append(Column(name, numeric, whole, low, high))
    return columns
