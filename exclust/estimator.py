"""The base of exclust's estimators: scikit-learn's conventions, declared once.

Every estimator inherits ``ExclustEstimator`` (itself ``sklearn.base.BaseEstimator``), so
``get_params``, ``set_params``, ``sklearn.base.clone`` and the repr work; it declares its
parameters' accepted values once, in scikit-learn's ``_parameter_constraints`` (``Interval``,
``StrOptions``, types), and calls ``self._check_params()`` first thing in ``fit``: a value outside
them raises ``exclust.errors.ParameterError`` (a ValueError; the CLI maps it to exit code 2)
whose message names the parameter. Methods that need a fitted estimator call
``self._check_fitted()``, which raises ``sklearn.exceptions.NotFittedError`` before ``fit``.

Input follows scikit-learn's ``validate_data``: ``fit`` calls ``self._fit_input(X)``, which records
``n_features_in_`` (and ``feature_names_in_`` when X names its columns: a DataFrame, a Dataset
from a table); ``predict`` and ``score`` call ``self._predict_input(X)``, which refuses, with
one line, a 1-D row (with the reshape hint), complex, object and string data, sparse matrices,
the wrong width, and a DataFrame whose columns differ from fit's in name or order. A dask array
is checked from its metadata (no pass). Rows holding NaN or inf are not refused: predict labels a
row with inf -1 and routes a NaN to each cut's missing side (-1 at a cut that learned none;
``exclust.dataplane.parts.label_rows``, the policy ``exclust label`` shares); ``fit`` and ``score``
refuse them.

Build state (the arrays and random generator a fit works with) lives in a builder object that
``fit`` creates and drops; only the fitted attributes (names ending in ``_``) stay on the
estimator, so a fitted estimator holds its results and its parameters, nothing else.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions
from sklearn.utils.validation import check_is_fitted

from exclust.dataplane.parts import is_lazy
from exclust.errors import InputError, InputTypeError, ParameterError
from exclust.sources.dataset import Dataset

__all__ = ["ExclustEstimator", "TreeExplainer", "Interval", "StrOptions", "Integral", "Real", "RANDOM_STATE"]

# What a ``random_state`` may be across exclust: None, a seed, or a numpy generator.
RANDOM_STATE = [None, Integral, np.random.Generator, np.random.RandomState, np.random.SeedSequence]


def _one_line(err: Exception) -> str:
    """scikit-learn's message on one line, without the rows it prints (``array=[...]``)."""
    lines = [line for line in str(err).splitlines() if not line.startswith("array=")]
    return " ".join(" ".join(lines).split())


def given_names(names: Any, n_features: int) -> np.ndarray | None:
    """Feature names as ``feature_names_in_`` holds them, or None for the names exclust makes up
    for an unnamed matrix (``x0``, ``x1``, ...: ``data.load_dataset``)."""
    if names is None:
        return None
    names = [str(n) for n in names]
    if names == [f"x{j}" for j in range(n_features)]:
        return None
    return np.asarray(names, dtype=object)


def _check_width(width: int, expected: int | None, owner: str) -> None:
    if expected is not None and width != expected:  # scikit-learn's words
        raise InputError(f"X has {width} features, but {owner} is expecting {expected} features as input.")


def _check_lazy(X, expected: int | None, owner: str) -> Any:
    """A dask array's shape and dtype checked from its metadata (no pass); float64, one column chunk."""
    if X.ndim == 1:
        raise InputError(f"Expected 2D array, got a 1-D dask array of length {X.shape[0]} instead; reshape your "
                         "data with X.reshape(-1, 1) if it has a single feature or X.reshape(1, -1) if it is one row")
    if X.ndim != 2:
        raise InputError(f"Expected 2D array, got a {X.ndim}-D dask array of shape {X.shape} instead")
    if X.dtype.kind not in "biuf":
        kind = "Complex data" if X.dtype.kind == "c" else f"data of dtype {X.dtype}"
        raise InputTypeError(f"{kind} not supported: exclust needs real numbers (a dask array of dtype {X.dtype})")
    _check_width(X.shape[1], expected, owner)
    X = X.astype(np.float64)
    return X.rechunk({1: -1}) if X.numblocks[1] != 1 else X


class ExclustEstimator(BaseEstimator):
    """Parameters declared once (``_parameter_constraints``), NotFittedError before fit, input
    checked as scikit-learn checks it (``_fit_input``, ``_predict_input``)."""

    _parameter_constraints: dict[str, list[Any]] = {}

    def _validate(self, X, reset: bool):
        """scikit-learn's ``validate_data`` on in-memory input, its errors as exclust's one-line ones."""
        from sklearn.utils.validation import validate_data

        try:
            # "numeric": strings are refused even when they spell numbers; objects holding numbers pass.
            checked = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=False)
            return np.asarray(checked, dtype=np.float64)
        except TypeError as err:
            raise InputTypeError(_one_line(err)) from None
        except ValueError as err:
            raise InputError(_one_line(err)) from None

    def _fit_input(self, X):
        """X for fit to load, with ``n_features_in_`` and ``feature_names_in_`` recorded.

        In-memory input goes through scikit-learn's checks (shape, dtype, sparse, empty); a
        DataFrame comes back as it is (exclust keeps its column names), anything else as a
        float64 array. A Dataset or a dask array comes back as it is, its width recorded.
        """
        if isinstance(X, Dataset):
            self._record_features(X.n_features, X.feature_names)
            return X
        if is_lazy(X):
            X = _check_lazy(X, None, type(self).__name__)
            self._record_features(X.shape[1])
            return X
        if hasattr(X, "dask"):  # a dask DataFrame: its columns are checked where fit loads it
            self._record_features(len(X.columns), X.columns)
            return X
        checked = self._validate(X, reset=True)
        return X if hasattr(X, "columns") else checked

    def _record_features(self, n_features: int, names: Any = None) -> None:
        """Set ``n_features_in_``, and ``feature_names_in_`` when the names were given (see ``given_names``)."""
        self.n_features_in_ = int(n_features)
        given = given_names(names, int(n_features))
        if given is not None:
            self.feature_names_in_ = given
        elif "feature_names_in_" in self.__dict__:
            del self.feature_names_in_

    def _predict_input(self, X):
        """X checked against fit's input (see the module docstring): float64 numpy, or a lazy dask
        array with one column chunk."""
        self._check_fitted()
        if isinstance(X, Dataset):
            fitted = getattr(self, "feature_names_in_", None)
            given = given_names(X.feature_names, X.n_features)
            if fitted is not None and given is not None and list(given) != list(fitted):
                raise InputError(f"The feature names should match those that were passed during fit: fitted on "
                                 f"{list(fitted)}, got {list(given)}")
            if not X.distributed:  # validated when it was loaded: only its width is left to check
                _check_width(X.n_features, self.n_features_in_, type(self).__name__)
                return X.X
            X = X.X
        if is_lazy(X):
            return _check_lazy(X, self.n_features_in_, type(self).__name__)
        return self._validate(X, reset=False)

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        # Every parameter, defaults included: MMDT(threshold='exact') must say which threshold it uses.
        from sklearn import config_context

        with config_context(print_changed_only=False):
            return super().__repr__(N_CHAR_MAX)

    def _check_params(self) -> None:
        """Raise ParameterError, naming the parameter, when one lies outside ``_parameter_constraints``."""
        for name, accepted in self._parameter_constraints.items():
            value = getattr(self, name, None)
            # scikit-learn's Interval takes True for 1: a flag where a number belongs is a mistake.
            takes_flags = any(c is bool or c in ("boolean", "verbose") for c in accepted)
            if isinstance(value, (bool, np.bool_)) and not takes_flags:
                raise ParameterError(
                    f"The {name!r} parameter of {type(self).__name__} must be a number, not a boolean; "
                    f"got {value!r} instead."
                )
        try:
            self._validate_params()
        except InvalidParameterError as err:
            raise ParameterError(str(err)) from None

    def _check_fitted(self) -> None:
        check_is_fitted(self)


class TreeExplainer(ExclustEstimator):
    """An estimator whose result is a ThresholdTree ``tree_``: predicting and reading rules come with it.

    ``_tree_input(X)`` maps the rows given to ``predict`` onto the tree's features (the identity
    here; the concept estimators project onto their concept activation vectors).
    """

    def _tree_input(self, X: Any) -> Any:
        return X

    def predict(self, X: Any):
        """The tree's cluster of every row (``ThresholdTree.predict``: a NaN goes to each cut's missing side; -1
        for a row holding inf, or a NaN at a cut with no missing side): numpy in, numpy out; dask array in, dask
        array out."""
        rows = self._tree_input(self._predict_input(X))  # NotFittedError before tree_ is read
        return self.tree_.predict(rows)

    def score(self, X: Any, y: Any = None) -> float:
        """The negative cost of the tree's clusters on X, as ``KMeans.score`` (higher is better): the
        k-means cost (squared distances to each tree cluster's mean), or the k-medians cost
        (l1 distances to each tree cluster's median, more passes) when ``objective="kmedians"``,
        measured in the coordinates the tree cuts (concept coordinates for the concept estimators).
        One pass (k-means); X holding NaN or inf is refused."""
        from exclust.scoring.metrics import evaluate

        rows = self._tree_input(self._predict_input(X))
        kmedians = getattr(self, "objective", "kmeans") == "kmedians"
        result = evaluate(self.tree_, rows, kmedians=kmedians)[0]
        cost = result.kmedians_cost_tree if kmedians else result.kmeans_cost_tree
        assert cost is not None  # evaluate prices the tree under the objective it is asked for
        return -float(cost)

    def rules_text(self) -> str:
        """The fitted tree's rules, one line per cluster."""
        self._check_fitted()
        return self.tree_.rules_text()
