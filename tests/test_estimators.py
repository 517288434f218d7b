"""Every exclust estimator follows scikit-learn's conventions (issue 10, item 3).

``ESTIMATORS`` lists (estimator with one parameter set away from its default, that parameter,
a bad value for one parameter, minimal fit arguments). To cover a new estimator, add a row.
"""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from exclust.errors import ParameterError
from exclust.estimator import TreeExplainer

CENTERS = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])


def _mixture():
    from exclust.reference.summary import MixtureSummary

    return MixtureSummary(means=[[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]], sigma=[1.0, 1.0])


def _blobs(n_per: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.concatenate([c + rng.normal(size=(n_per, 2)) for c in CENTERS])
    return X, np.repeat(np.arange(3), n_per)


def _cavs():
    from exclust.algorithms.mmdt.mmdt.cavs import ConceptActivationVectors

    return ConceptActivationVectors.from_matrix(np.eye(2), ["across", "up"])


def _mmdt():
    from exclust.algorithms.mmdt.mmdt.mmdt import MMDT

    return MMDT(threshold="midpoint", random_state=0)


def _concept_mmdt():
    from exclust.algorithms.mmdt.mmdt.concept import ConceptMMDT

    return ConceptMMDT(_cavs(), threshold="gaussian", random_state=0)


def _concept_cart():
    from exclust.algorithms.mmdt.mmdt.concept import ConceptCART

    return ConceptCART(_cavs(), max_leaf_nodes=3, random_state=0)


def _kernel_mmdt():
    from exclust.algorithms.mmdt.mmdt.kernel_mmdt import KernelMMDT

    return KernelMMDT(3, bandwidth=2.0, samples_per_cluster=20, compute_price=False, random_state=0)


def _imm():
    from exclust.algorithms.histogram.imm import IMM

    return IMM(3, objective="kmedians", random_state=0)


def _exkmc():
    from exclust.algorithms.histogram.exkmc import ExKMC

    return ExKMC(3, max_leaves=5, random_state=0)


def _exshallow():
    from exclust.algorithms.histogram.exshallow import ExShallow

    return ExShallow(3, depth_factor=0.1, random_state=0)


def _exgreedy():
    from exclust.algorithms.histogram.exgreedy import ExGreedy

    return ExGreedy(3, objective="kmedians", random_state=0)


def _tree_search():
    from exclust.algorithms.search.tree_search import TreeSearch

    return TreeSearch(3, n_candidates=2, random_state=0)


def _kdtree():
    from exclust.algorithms.histogram.kdtree import KDTree

    return KDTree(4, max_bins=64, random_state=0)


def _cart():
    from exclust.algorithms.cart import CART

    return CART(max_leaf_nodes=3, random_state=0)


def _label_tree():
    from exclust.algorithms.search.label_tree import LabelTree

    return LabelTree(3, n_candidates=2, random_state=0)


def _random_cut():
    from exclust.algorithms.random_cut import RandomCutTree

    return RandomCutTree(3, n_trials=2, random_state=0)


def _kmeans():
    from exclust.reference import KMeans

    return KMeans(3, max_iter=50, random_state=0)


def _gaussian_mixture():
    from exclust.reference import GaussianMixture

    return GaussianMixture(3, covariance_type="diag", random_state=0)


def _kmedians():
    from exclust.reference.kmedians import KMedians

    return KMedians(3, max_iter=20, random_state=0)


def _rows():
    return (_blobs()[0],)


def _rows_and_centers():
    return (_blobs()[0], CENTERS)


# (make the estimator, a parameter set away from its default, (parameter, bad value), fit arguments)
ESTIMATORS = [
    (_mmdt, "threshold", ("threshold", "median"), lambda: (_mixture(),)),
    (_concept_mmdt, "threshold", ("n_init", 0), lambda: _blobs()),
    (_concept_cart, "max_leaf_nodes", ("max_leaf_nodes", 1), lambda: _blobs()),
    (_kernel_mmdt, "samples_per_cluster", ("samples_per_cluster", 1), lambda: _blobs()),
    (_imm, "objective", ("max_bins", 1), _rows),
    (_exkmc, "max_leaves", ("base_tree", "kd"), _rows),
    (_exshallow, "depth_factor", ("depth_factor", -1.0), _rows_and_centers),
    (_exgreedy, "objective", ("max_bins", 1), _rows_and_centers),
    (_tree_search, "n_candidates", ("lookahead", -1), _rows_and_centers),
    (_kdtree, "max_bins", ("max_leaves", True), _rows_and_centers),
    (_cart, "max_leaf_nodes", ("max_sample_rows", 0), lambda: _blobs()),
    (_label_tree, "n_candidates", ("lookahead", -1), lambda: _blobs()),
    (_random_cut, "n_trials", ("objective", "kmedoids"), _rows_and_centers),
    (_kmeans, "max_iter", ("n_init", 0), _rows),
    (_gaussian_mixture, "covariance_type", ("covariance_type", "spherical-ish"), _rows),
    (_kmedians, "max_iter", ("init", "random"), _rows),
]
IDS = [row[0].__name__.strip("_") for row in ESTIMATORS]


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_clones_with_its_parameters(make, changed, bad, fit_args):
    est = make()
    assert isinstance(est, BaseEstimator)
    copy = clone(est)
    assert copy is not est and type(copy) is type(est)
    assert copy.get_params(deep=False).keys() == est.get_params(deep=False).keys()
    assert copy.get_params()[changed] == est.get_params()[changed]
    assert copy.set_params(random_state=7).random_state == 7


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_repr_shows_its_parameters(make, changed, bad, fit_args):
    est = make()
    text = repr(est)
    assert text.startswith(type(est).__name__ + "(")
    assert f"{changed}={getattr(est, changed)!r}" in text


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_not_fitted_before_fit_then_fitted(make, changed, bad, fit_args):
    est = make()
    args = fit_args()
    explains = isinstance(est, TreeExplainer)  # the reference clusterings have no tree
    with pytest.raises(NotFittedError):
        est.predict(np.zeros((2, 2)))
    if explains:
        with pytest.raises(NotFittedError):
            est.rules_text()
    est.fit(*args)
    if explains:
        assert est.tree_.n_leaves >= 2
    assert est.predict(np.zeros((2, 2))).shape == (2,)
    # Only parameters and fitted attributes (trailing underscore) stay on a fitted estimator.
    params = set(est.get_params(deep=False))
    build_state = [a for a in vars(est) if a not in params and not a.endswith("_") and a != "_enr"]
    assert build_state == []


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_bad_parameter_is_rejected_by_name(make, changed, bad, fit_args):
    name, value = bad
    est = make().set_params(**{name: value})
    with pytest.raises(ParameterError, match=f"'{name}' parameter") as err:
        est.fit(*fit_args())
    assert isinstance(err.value, ValueError)
    assert [a for a in vars(est) if a.endswith("_")] == []  # nothing fitted
