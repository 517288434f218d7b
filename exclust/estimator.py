"""The base of exclust's estimators: scikit-learn's conventions, declared once.

Every estimator inherits ``ExclustEstimator`` (itself ``sklearn.base.BaseEstimator``), so
``get_params``, ``set_params``, ``sklearn.base.clone`` and the repr work; it declares its
parameters' accepted values once, in scikit-learn's ``_parameter_constraints`` (``Interval``,
``StrOptions``, types), and calls ``self._check_params()`` first thing in ``fit``: a value outside
them raises ``exclust.errors.ParameterError`` (a ValueError; the CLI maps it to exit code 2)
whose message names the parameter. Methods that need a fitted estimator call
``self._check_fitted()``, which raises ``sklearn.exceptions.NotFittedError`` before ``fit``.

Build state (the arrays and random generator a fit works with) lives in a builder object that
``fit`` creates and drops; only the fitted attributes (names ending in ``_``) stay on the
estimator, so a fitted estimator holds its results and its parameters, nothing else.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import InvalidParameterError, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from exclust.errors import ParameterError

__all__ = ["ExclustEstimator", "TreeExplainer", "Interval", "StrOptions", "Integral", "Real", "RANDOM_STATE"]

# What a ``random_state`` may be across exclust: None, a seed, or a numpy generator.
RANDOM_STATE = [None, Integral, np.random.Generator, np.random.RandomState, np.random.SeedSequence]


class ExclustEstimator(BaseEstimator):
    """Parameters declared once (``_parameter_constraints``), NotFittedError before fit."""

    _parameter_constraints: dict[str, list[Any]] = {}

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
        """The tree's cluster of every row: numpy in, numpy out; dask array in, dask array out."""
        self._check_fitted()
        return self.tree_.predict(self._tree_input(X))

    def rules_text(self) -> str:
        """The fitted tree's rules, one line per cluster."""
        self._check_fitted()
        return self.tree_.rules_text()
