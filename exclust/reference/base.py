"""What the reference clusterings share: data validated and held once per fit, checked predict
input, seeds drawn from one random stream, progress lines, and their parameter constraints.

``KMeans`` (``kmeans.py``), ``GaussianMixture`` (``gaussian_mixture.py``) and ``KMedians``
(``kmedians.py``) all start a fit with ``prepare`` (after the estimator's ``_fit_input``) and
check what they label with the estimator's ``_predict_input``, so the three treat a ``Dataset``,
a numpy array and a dask array alike.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from exclust.dataplane import arrays, residency
from exclust.errors import InputError
from exclust.estimator import Integral, Interval, Real
from exclust.sources.dataset import Dataset, as_matrix, clustering_input

logger = logging.getLogger("exclust")

# The accepted values of the parameters the reference estimators share.
AT_LEAST_ONE = [Interval(Integral, 1, None, closed="left")]
NON_NEGATIVE = [Interval(Real, 0, None, closed="left")]


def prepare(X: Any, n_clusters: int) -> tuple[Dataset, Any, int]:
    """(validated data, the matrix to label afterwards, passes spent validating).

    A dask array is persisted first (when it fits), so that validation and every later pass read
    memory; the second item is the unpersisted matrix, so that lazy ``labels_`` do not pin the
    data in the cluster's memory for as long as the model lives.
    """
    if isinstance(X, Dataset):
        X = clustering_input(X, "the reference clustering")
        if X.n_rows < n_clusters:
            raise InputError(f"the data have {X.n_rows} row(s), fewer than the {n_clusters} clusters asked for")
        source = X.X
        if X.distributed:
            X = Dataset(residency.hold(X.X)[0][0], X.feature_names, X.extra, X.source, X.n_dropped)
        return X, source, 0
    source, persisted = X, False
    X, distributed = arrays.entering(X)
    if distributed:
        source = X
        if X.ndim == 2 and not any(math.isnan(c) for c in X.chunks[0]):
            X, persisted = residency.hold(X)[0][0], True
    data = clustering_input(as_matrix(X, n_clusters=n_clusters), "the reference clustering")
    if not data.distributed:
        return data, data.X, 1
    if not persisted:  # row chunk sizes were unknown until validation measured them
        source = data.X
        data = Dataset(residency.hold(data.X)[0][0], data.feature_names, data.extra, data.source, data.n_dropped)
    return data, source, 1


def refuse_nonfinite(n_rows: float) -> None:
    """A score's one line when its pass met rows holding NaN or inf (predict labels them -1 instead)."""
    if n_rows:
        raise InputError(f"X holds {int(n_rows)} row(s) with NaN or infinite values, which have no cost; "
                         "score finite rows (predict labels such rows -1)")


def random_stream(random_state) -> np.random.RandomState:
    """The fit's one random stream: the caller's ``RandomState`` itself, or a new one from a seed."""
    if isinstance(random_state, np.random.RandomState):
        return random_state
    return np.random.RandomState(random_state)


def draw_seed(rs: np.random.RandomState) -> int:
    """A seed for a sub-step (a restart, a round of draws), taken from the fit's stream."""
    return int(rs.randint(np.iinfo(np.int32).max))


def report(verbose: bool, message: str, *args) -> None:
    """A progress line to the ``"exclust"`` logger at INFO, and to stdout with ``verbose``."""
    logger.info(message, *args)
    if verbose:
        print(message % args, flush=True)
