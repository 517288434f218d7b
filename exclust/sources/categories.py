"""Category features: which columns are categories, their vocabulary, and their codes.

A category column (text, dictionary-encoded text, a pandas ``category``, a boolean, or an integer
column the run names in ``categorical``) reaches the algorithms as its **codes**: code ``c`` is
the ``c``-th value of the column's vocabulary, the distinct values in sorted order (booleans:
False, True), so any chunking of the data gives the same codes. A null is NaN (a missing value,
as in a numeric column); a value outside the vocabulary (at label time, a value the tree never
saw) is ``UNSEEN_CATEGORY``.

Detection follows scikit-learn's ``categorical_features="from_dtype"`` (a column is a category
by its type, never by its values), widened to text and booleans, which exclust reads from
Parquet, Delta and Iceberg schemas and from pandas and Dask frames alike.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from exclust.errors import InputError

# The most categories one column may hold: a set cut's search and its drawing stay small, and a
# column of more distinct values (an id, a free-text field) is rarely a category.
MAX_CATEGORIES = 256

# The code of a value the vocabulary lacks. exclust/tree/node_kinds.py repeats it (the sources,
# layer 2, may not import the tree, layer 3); tests/test_categories.py checks that they agree.
UNSEEN_CATEGORY = -1.0

BOOLEAN_VOCABULARY: list[Any] = [False, True]


# --------------------------------------------------------------------------- detection
def arrow_category_type(arrow_type: Any) -> bool:
    """Whether a column of this Arrow type is a category feature by its type alone: text
    (string, large_string), dictionary-encoded text, or boolean."""
    import pyarrow.types as pat

    if pat.is_dictionary(arrow_type):
        return pat.is_string(arrow_type.value_type) or pat.is_large_string(arrow_type.value_type)
    return pat.is_string(arrow_type) or pat.is_large_string(arrow_type) or pat.is_boolean(arrow_type)


def arrow_forcible_type(arrow_type: Any) -> bool:
    """Whether ``categorical`` may force a column of this Arrow type to a category: integers
    (codes kept as integers; the vocabulary is their sorted distinct values)."""
    import pyarrow.types as pat

    return pat.is_integer(arrow_type) or arrow_category_type(arrow_type)


def pandas_category_dtype(dtype: Any, values: Any = None) -> bool:
    """Whether a pandas (or Dask) column of ``dtype`` is a category feature: ``category``, the
    string dtypes, booleans (``bool`` and nullable ``boolean``), or ``object`` holding text.
    ``values`` (a pandas Series) tells an object column's content; without it (a Dask frame,
    whose values would cost a pass) an object column is taken as text, as Dask itself does."""
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(dtype):
        return True
    if pd.api.types.is_string_dtype(dtype) and not pd.api.types.is_object_dtype(dtype):
        return True
    if pd.api.types.is_object_dtype(dtype):
        if values is None:
            return True
        return pd.api.types.infer_dtype(values, skipna=True) in {"string", "empty", "boolean"}
    return False


def boolean_column(values: Any) -> bool:
    """Whether a column (pandas, Arrow or numpy) holds booleans: its vocabulary is then
    ``BOOLEAN_VOCABULARY`` without a pass."""
    arrow_type = getattr(values, "type", None)
    if arrow_type is not None:  # an Arrow array
        import pyarrow.types as pat

        return bool(pat.is_boolean(arrow_type))
    import pandas as pd

    dtype = getattr(values, "dtype", None)
    return dtype is not None and bool(pd.api.types.is_bool_dtype(dtype))


# --------------------------------------------------------------------------- vocabulary
def _plain(value: Any) -> Any:
    """A value as the vocabulary keeps it: str, bool or int (numpy scalars made plain)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and value.is_integer():  # an integer column read through a float (pandas, nulls)
        return int(value)
    return str(value)


def distinct_values(values: Any, limit: int = MAX_CATEGORIES) -> tuple[list[Any], int]:
    """The distinct non-null values of one chunk of a column (at most ``limit + 1`` of them, sorted)
    and how many there are: what a chunk's task sends back to gather the vocabulary."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = _as_arrow(values)
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    unique = pc.drop_null(pc.unique(array))
    found = sorted(_plain(v) for v in unique.to_pylist() if v == v)  # v == v: a float NaN is no category
    return found[: limit + 1], len(found)


def collect_vocabulary(column: str, chunks: Iterable[tuple[Sequence[Any], int]], where: str,
                       boolean: bool = False) -> list[Any]:
    """The vocabulary of ``column`` from its chunks' ``distinct_values``: the union, sorted (a
    boolean column: ``BOOLEAN_VOCABULARY``). More than ``MAX_CATEGORIES`` values: InputError
    naming the column and its count."""
    if boolean:
        return list(BOOLEAN_VOCABULARY)
    union: set[Any] = set()
    largest = 0
    for found, count in chunks:
        union.update(found)
        largest = max(largest, int(count))
    return checked_vocabulary(column, union, where, at_least=max(largest, len(union)))


def checked_vocabulary(column: str, values: Iterable[Any], where: str, at_least: int = 0) -> list[Any]:
    """``values`` as a vocabulary (distinct, sorted), refused above ``MAX_CATEGORIES``."""
    vocabulary = sorted(set(values))
    count = max(at_least, len(vocabulary))
    if count > MAX_CATEGORIES:
        shown = ", ".join(repr(v) for v in vocabulary[:3])
        raise InputError(f"column '{column}' of {where} holds {count} distinct values (such as {shown}), more than "
                         f"the {MAX_CATEGORIES} a category feature may hold: leave it out of the features, or "
                         "group its values into fewer categories")
    kinds = {type(v) for v in vocabulary}
    if len(kinds) > 1:
        raise InputError(f"column '{column}' of {where} mixes {sorted(k.__name__ for k in kinds)} values; "
                         "write it with one type")
    return vocabulary


# --------------------------------------------------------------------------- codes
def _as_arrow(values: Any):
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    if hasattr(values, "to_numpy") and hasattr(values, "dtype"):  # a pandas Series or Index
        import pandas as pd

        if isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype(object)
        return pa.array(values.to_numpy(dtype=object), from_pandas=True)
    return pa.array(np.asarray(values, dtype=object), from_pandas=True)


def encode_categories(values: Any, vocabulary: Sequence[Any]) -> np.ndarray:
    """The float64 codes of ``values`` in ``vocabulary`` (code c is ``vocabulary[c]``).

    Parameters
    ----------
    values : pyarrow Array or ChunkedArray, pandas Series, numpy array, or any iterable
        One column's values (text, booleans or integers); None, NaN and pandas' NA are nulls.
        Arrays are coded in one vectorised step; a plain iterable (a dictionary's few values,
        say) value by value, each compared as the vocabulary's type.
    vocabulary : sequence
        The column's values in code order, all of one type (str, bool or int).

    Returns
    -------
    numpy.ndarray of float64
        The code of each value; NaN for a null, ``UNSEEN_CATEGORY`` (-1.0) for a value the
        vocabulary lacks.
    """
    import pyarrow as pa

    if not (isinstance(values, (pa.Array, pa.ChunkedArray)) or hasattr(values, "dtype")):
        return _encode_each(values, vocabulary)
    try:
        return _encode_array(values, vocabulary)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):  # values of mixed types: one by one
        listed = values.to_pylist() if hasattr(values, "to_pylist") else list(values)
        return _encode_each(listed, vocabulary)


def _comparable(value: Any, kind: type) -> Any:
    """``value`` as a value of the vocabulary's ``kind`` (str, bool, int), or None when it cannot be one."""
    if isinstance(value, np.generic):
        value = value.item()
    if kind is str:
        return value if isinstance(value, str) else str(value)
    if kind is bool:
        return value if isinstance(value, bool) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return None
    return int(value)


def _null(value: Any) -> bool:
    if value is None or (isinstance(value, float) and value != value):
        return True
    import pandas as pd

    return value is pd.NA or value is pd.NaT


def _encode_each(values: Iterable[Any], vocabulary: Sequence[Any]) -> np.ndarray:
    kind = type(vocabulary[0]) if len(vocabulary) else str
    position = {v: float(c) for c, v in enumerate(vocabulary)}
    codes = []
    for value in values:
        if _null(value):
            codes.append(np.nan)
            continue
        key = _comparable(value, kind)
        codes.append(position.get(key, UNSEEN_CATEGORY) if key is not None else UNSEEN_CATEGORY)
    return np.asarray(codes, dtype=np.float64)


def _encode_array(values: Any, vocabulary: Sequence[Any]) -> np.ndarray:
    """The vectorised coding of an array (Arrow's ``index_in``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = _as_arrow(values)
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    n = len(array)
    if n == 0:
        return np.empty(0, dtype=np.float64)
    missing = pc.is_null(array, nan_is_null=True).to_numpy(zero_copy_only=False)
    if not vocabulary or pa.types.is_null(array.type):
        return np.where(missing, np.nan, UNSEEN_CATEGORY)
    if pa.types.is_integer(array.type) and not pa.types.is_int64(array.type):
        array = array.cast(pa.int64(), safe=False)  # every integer vocabulary meets int64 values
    value_set = _value_set(vocabulary, array.type)
    if value_set is None:  # values of another kind than the vocabulary's: none of them is in it
        return np.where(missing, np.nan, UNSEEN_CATEGORY)
    codes = pc.index_in(array, value_set=value_set)
    out = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False).astype(np.float64)
    out[out < 0] = UNSEEN_CATEGORY
    out[missing] = np.nan
    return out


def _value_set(vocabulary: Sequence[Any], arrow_type: Any):
    """The vocabulary as an Arrow array of the values' type, or None when they cannot meet."""
    import pyarrow as pa

    first = vocabulary[0]
    try:
        if isinstance(first, bool):
            return pa.array(vocabulary, type=pa.bool_()) if pa.types.is_boolean(arrow_type) else None
        if isinstance(first, int):
            if pa.types.is_integer(arrow_type):
                return pa.array(vocabulary, type=pa.int64())
            if pa.types.is_floating(arrow_type):
                return pa.array([float(v) for v in vocabulary], type=arrow_type)
            return None
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            return pa.array([str(v) for v in vocabulary], type=arrow_type)
    except (pa.ArrowInvalid, OverflowError):
        return None
    return None


def feature_categories(feature_names: Sequence[str], by_name: Mapping[str, list[Any]]) -> dict[int, list[Any]]:
    """``Dataset.categories`` (feature index -> vocabulary) from vocabularies by column name."""
    return {j: list(by_name[name]) for j, name in enumerate(feature_names) if name in by_name}
