"""Category columns as codes: a value's code is its index in the column's vocabulary (the values in code order).

``encode_categories`` is the one encoding of category values into the float64 matrix every tree reads: a null
becomes NaN (a missing value), a value outside the vocabulary ``UNSEEN_CATEGORY``. Pure Python and numpy: one
step a value, so callers pass the distinct values of a column (its dictionary) and map the codes back.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

# The code of a value the vocabulary lacks; the same number as ``exclust.tree.node_kinds.UNSEEN_CATEGORY`` (the
# tree's layer sits above the sources', so it cannot be imported from there; a test checks they agree).
UNSEEN_CATEGORY = -1.0


def _as_kind(value: Any, kind: type) -> Any:
    """``value`` as the vocabulary's type (text, bool or int), or None where it cannot be one of its values."""
    if isinstance(value, np.generic):
        value = value.item()
    if kind is str:
        return value if isinstance(value, str) else str(value)
    if kind is bool:
        return value if isinstance(value, bool) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return None
    return int(value)


def encode_categories(values: Iterable[Any], vocabulary: Sequence[Any]) -> np.ndarray:
    """The float64 codes of ``values`` in ``vocabulary`` (code c is ``vocabulary[c]``).

    Parameters
    ----------
    values : iterable
        One column's values (text, booleans or integers); None and NaN are nulls.
    vocabulary : sequence
        The column's values in code order, all of one type (str, bool or int); values are compared as that type.

    Returns
    -------
    numpy.ndarray of float64
        The code of each value; NaN for a null, ``UNSEEN_CATEGORY`` (-1.0) for a value not in the vocabulary.
    """
    kind = type(vocabulary[0]) if len(vocabulary) else str
    lookup = {v: float(c) for c, v in enumerate(vocabulary)}
    out = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append(math.nan)
            continue
        key = _as_kind(value, kind)
        out.append(lookup.get(key, UNSEEN_CATEGORY) if key is not None else UNSEEN_CATEGORY)
    return np.asarray(out, dtype=np.float64)
