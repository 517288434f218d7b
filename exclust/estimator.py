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
the wrong width, and a DataFrame whose columns differ from fit's in name, order or kind. A dask
array is checked from its metadata (no pass). Rows holding NaN or inf are not refused: predict
labels a row with inf -1 and routes a NaN to each cut's missing side (-1 at a cut that learned
none; ``exclust.dataplane.parts.label_rows``, the policy ``exclust label`` shares); ``score``
refuses them.

A pandas or Dask DataFrame is read as ``exclust explain`` reads a table (``sources.frames``):
every column a feature; text, ``category`` and boolean columns are category features (their
vocabulary goes into the tree, ``tree_.categories``, and codes later frames: a value the fit
never saw takes the cut's missing side); a NaN or null stays missing. At fit, the tree builders
that learn missing sides (the histogram family, TreeSearch, LabelTree, CART) take both, a bare
array's NaN included (``sources.dataset.as_tree_input``); the others refuse them in one line of
their own (OptimalTree), and the estimators that read numbers in every cell (``_numbers_only``:
the reference clusterings, kernel and concept MMDT) refuse category columns and missing values
(a bare array holding NaN: ``sources.dataset.ESTIMATOR_NAN_POLICY``). The reference clustering a
tree fits when given no centers needs complete rows, as in a run: fit refuses (never drops) rows
with NaN in its columns (the frame's numeric columns, or ``Z``); so do the center trees' distances
to given centers, which come from ``Z`` when X holds NaN.

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
from exclust.sources.frames import all_numeric, frame_dataset, frame_rows, is_frame, refuse_category_features

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

    # What an estimator fits when it reads numbers in every cell (a reference clustering, a
    # mixture): its line refusing category features and missing values; None for a tree builder,
    # which takes them (``TreeExplainer``) or gives its own line.
    _numbers_only: str | None = "clusters numbers"

    def _fit_input(self, X):
        """X for fit to load, with ``n_features_in_`` and ``feature_names_in_`` recorded.

        A pandas or Dask DataFrame becomes a Dataset of every column (``sources.frames.frame_dataset``:
        text, category and boolean columns as category features, NaN kept as missing), refused in
        one line by an estimator that reads numbers only (``_numbers_only``). Other in-memory
        input goes through scikit-learn's checks (shape, dtype, sparse, empty) into a float64
        array. A Dataset or a dask array comes back as it is, its width recorded.
        """
        # A reference clustering given a Dataset fits its clustering columns (``Dataset.clustering``);
        # a frame's columns are all its features.
        checks_cells = is_frame(X) or (isinstance(X, Dataset) and isinstance(self, TreeExplainer))
        if is_frame(X):
            X = frame_dataset(X)
        if checks_cells and self._numbers_only is not None:
            refuse_category_features(X, type(self).__name__, self._numbers_only)
        if isinstance(X, Dataset):
            self._record_features(X.n_features, X.feature_names)
            return X
        if is_lazy(X):
            X = _check_lazy(X, None, type(self).__name__)
            self._record_features(X.shape[1])
            return X
        return self._validate(X, reset=True)

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
        if is_frame(X):
            rows = self._frame_rows(X)
            if rows is not X:  # coded with the fit's vocabularies: float64 rows of the right width
                return _check_lazy(rows, self.n_features_in_, type(self).__name__) if is_lazy(rows) else rows
        if is_lazy(X):
            return _check_lazy(X, self.n_features_in_, type(self).__name__)
        return self._validate(X, reset=False)

    def _fitted_vocabularies(self) -> dict[str, list[Any]]:
        """The fit's category features by name (the tree's vocabularies, ``tree_.categories``)."""
        tree = getattr(self, "tree_", None)
        if tree is None:
            return {}
        return {str(tree.feature_names[f]): list(v) for f, v in (getattr(tree, "categories", None) or {}).items()}

    def _frame_rows(self, X) -> Any:
        """A predict frame as rows: its names checked as scikit-learn checks them, then a numeric
        frame of a numeric fit as it is (scikit-learn's checks follow), any other coded with the
        fit's vocabularies (``sources.frames.frame_rows``: unseen values -> ``UNSEEN_CATEGORY``)."""
        from sklearn.utils.validation import _check_feature_names

        vocabularies = self._fitted_vocabularies()
        lazy = hasattr(X, "dask")
        if not lazy:
            try:
                _check_feature_names(self, X, reset=False)
            except ValueError as err:
                raise InputError(_one_line(err)) from None
            if not vocabularies and all_numeric(X):
                return X
        fitted = getattr(self, "feature_names_in_", None)
        names = [str(c) for c in X.columns]
        if fitted is not None and names != list(fitted):
            raise InputError(f"The feature names should match those that were passed during fit: fitted on "
                             f"{list(fitted)}, got {names}")
        _check_width(len(names), self.n_features_in_, type(self).__name__)
        return frame_rows(X, names, vocabularies, type(self).__name__)

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

    # A tree builder takes category features and missing values, or refuses them itself.
    _numbers_only: str | None = None

    def _tree_input(self, X: Any) -> Any:
        return X

    def predict(self, X: Any):
        """The tree's cluster of every row (``ThresholdTree.predict``: a NaN goes to each cut's missing side; -1
        for a row holding inf, or a NaN at a cut with no missing side): numpy in, numpy out; dask array in, dask
        array out."""
        rows = self._tree_input(self._predict_input(X))  # NotFittedError before tree_ is read
        return self.tree_.predict(rows)

    def score(self, X: Any, y: Any = None, Z: Any = None) -> float:
        """The negative cost of the tree's clusters, as ``KMeans.score`` (higher is better): the
        k-means cost (squared distances to each tree cluster's mean), or the k-medians cost
        (l1 distances to each tree cluster's median, more passes) when ``objective="kmedians"``.
        Rows are routed on X; the cost is measured on ``Z`` (the clustering columns, row-aligned
        with X, as given to ``fit(..., Z=)``) when given, else in the coordinates the tree cuts
        (concept coordinates for the concept estimators). One pass (k-means); a cost column
        holding NaN or inf is refused."""
        from exclust.scoring.metrics import evaluate

        rows = self._tree_input(self._predict_input(X))
        kmedians = getattr(self, "objective", "kmeans") == "kmedians"
        result = evaluate(self.tree_, rows, kmedians=kmedians, Z=Z)[0]
        cost = result.kmedians_cost_tree if kmedians else result.kmeans_cost_tree
        assert cost is not None  # evaluate prices the tree under the objective it is asked for
        return -float(cost)

    def rules_text(self) -> str:
        """The fitted tree's rules, one line per cluster."""
        self._check_fitted()
        return self.tree_.rules_text()
