"""Every exclust estimator follows scikit-learn's conventions (issue 10, item 3).

``ESTIMATORS`` lists (estimator with one parameter set away from its default, that parameter,
a bad value for one parameter, minimal fit arguments). To cover a new estimator, add a row.
"""
from __future__ import annotations

import warnings

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
    from exclust.algorithms.mmdt.cavs import ConceptActivationVectors

    return ConceptActivationVectors.from_matrix(np.eye(2), ["across", "up"])


def _mmdt():
    from exclust.algorithms.mmdt.mmdt import MMDT

    return MMDT(threshold="midpoint", random_state=0)


def _concept_mmdt():
    from exclust.algorithms.mmdt.concept import ConceptMMDT

    return ConceptMMDT(_cavs(), threshold="gaussian", random_state=0)


def _concept_cart():
    from exclust.algorithms.mmdt.concept import ConceptCART

    return ConceptCART(_cavs(), max_leaf_nodes=3, random_state=0)


def _kernel_mmdt():
    from exclust.algorithms.mmdt.kernel_mmdt import KernelMMDT

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


def _best_tree():
    from exclust.algorithms.search.tree_search import BestTree

    return BestTree(3, n_candidates=2, random_state=0)


def _kdtree():
    from exclust.algorithms.histogram.kdtree import KDTree

    return KDTree(4, max_bins=64, random_state=0)


def _cart():
    from exclust.algorithms.cart import CART

    return CART(max_leaf_nodes=3, random_state=0)


def _label_tree():
    from exclust.algorithms.search.label_tree import LabelTree

    return LabelTree(3, n_candidates=2, random_state=0)


def _optimal():
    from exclust.algorithms.search.optimal import OptimalTree

    return OptimalTree(3, max_seconds=5.0, max_bins=32, random_state=0)


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
    (_best_tree, "n_candidates", ("max_passes", -1), _rows_and_centers),
    (_kdtree, "max_bins", ("max_leaves", True), _rows_and_centers),
    (_cart, "max_leaf_nodes", ("max_sample_rows", 0), lambda: _blobs()),
    (_label_tree, "n_candidates", ("lookahead", -1), lambda: _blobs()),
    (_optimal, "max_seconds", ("max_seconds", -1.0), _rows_and_centers),
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


# --------------------------------------------------------------------------- scikit-learn's input contract (issue 19)
NAMES = ["across", "up"]


def test_every_registered_algorithm_and_reference_clustering_is_covered():
    from exclust.jobs import registry

    covered = {type(row[0]()).__name__ for row in ESTIMATORS}
    registered = {entry.estimator.partition(":")[2] for entry in registry.ALGORITHMS.values()}
    assert registered | {"ConceptCART", "KMeans", "GaussianMixture", "KMedians"} <= covered


def _fitted_on_names(make, fit_args):
    """The estimator fitted on a DataFrame with columns NAMES (MMDT: on a summary with those names)."""
    import pandas as pd

    from exclust.reference.summary import MixtureSummary

    args = list(fit_args())
    if isinstance(args[0], MixtureSummary):
        args[0] = MixtureSummary(means=args[0].means, sigma=args[0].sigma, feature_names=NAMES)
    else:
        args[0] = pd.DataFrame(args[0], columns=NAMES)
    return make().fit(*args)


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_predict_checks_its_input_as_scikit_learn_does(make, changed, bad, fit_args):
    import pandas as pd

    from exclust.errors import InputError

    est = _fitted_on_names(make, fit_args)
    assert est.n_features_in_ == 2 and list(est.feature_names_in_) == NAMES
    X = _blobs(n_per=5, seed=3)[0]
    labels = est.predict(pd.DataFrame(X, columns=NAMES))
    assert labels.dtype == np.int64 and labels.min() >= 0
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        assert np.array_equal(est.predict(X), labels)  # positional, with scikit-learn's warning

    refused = {
        "reordered": (pd.DataFrame(X[:, ::-1], columns=NAMES[::-1]), "same order"),
        "renamed": (pd.DataFrame(X, columns=["across", "down"]), "feature names should match"),
        "wrong width": (np.zeros((3, 3)), "X has 3 features, but .* is expecting 2"),
        "1-D": (X[0], "reshape"),
        "complex": (X.astype(complex), "[Cc]omplex"),
        "strings": (X.astype(str), "strings"),
        "sparse": (__import__("scipy.sparse").sparse.csr_matrix(X), "[Ss]parse"),
    }
    with warnings.catch_warnings():  # the arrays below have no names: scikit-learn's warning, asserted above
        warnings.filterwarnings("ignore", "X does not have valid feature names")
        for what, (bad_input, message) in refused.items():
            with pytest.raises(InputError, match=message) as err:
                est.predict(bad_input)
            assert "\n" not in str(err.value), what
        objects = X.astype(object)
        assert np.array_equal(est.predict(objects), labels)  # objects holding numbers are numbers
        objects[0, 0] = {"not": "a number"}
        with pytest.raises(TypeError, match="number"):
            est.predict(objects)

    # Rows holding inf: label -1 (parts.label_rows); a NaN follows each cut's learned missing side
    # (issue 28: IMM, ExKMC), else -1 as well; every other row as before.
    holes = X.copy()
    holes[1, 0], holes[4, 1], holes[6, :] = np.nan, np.inf, -np.inf
    got = est.predict(pd.DataFrame(holes, columns=NAMES))
    expected = labels.copy()
    expected[[4, 6]] = -1
    routed = getattr(est, "tree_", None) is not None and est.tree_.routes_missing
    expected[1] = got[1] if routed else -1
    assert np.array_equal(got, expected) and (got[1] >= 0) == routed


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_predict_on_dask_is_lazy_and_labels_nonfinite_rows_minus_one(make, changed, bad, fit_args, dask_client):
    import dask.array as da

    from exclust.errors import InputError

    est = make().fit(*fit_args())
    X = _blobs(n_per=5, seed=3)[0]
    X[2, 1], X[5, 0] = np.nan, np.inf
    expected = est.predict(X)
    # inf: -1; a NaN follows the cuts' learned missing sides where the tree has them (issue 28), else -1.
    routed = getattr(est, "tree_", None) is not None and est.tree_.routes_missing
    assert expected[5] == -1 and (expected[2] >= 0) == routed and (np.delete(expected, [2, 5]) >= 0).all()
    lazy = est.predict(da.from_array(X, chunks=(4, 2)))
    assert isinstance(lazy, da.Array)
    assert np.array_equal(lazy.compute(), expected)
    for bad_input, message in ((da.zeros((4, 3), chunks=2), "X has 3 features"), (da.zeros(2, chunks=1), "reshape"),
                               (da.zeros((4, 2), chunks=2, dtype=complex), "Complex")):
        with pytest.raises(InputError, match=message):
            est.predict(bad_input)  # refused from the array's metadata, before any pass


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_score_is_the_negative_cost_and_refuses_nonfinite_rows(make, changed, bad, fit_args):
    from exclust.errors import InputError

    est = make().fit(*fit_args())
    X = _blobs(n_per=20, seed=4)[0]
    value = est.score(X)
    assert isinstance(value, float) and np.isfinite(value)
    if not hasattr(est, "bic"):  # every score but the mixture's log-likelihood is a negative cost
        assert value < 0
        assert est.score(X[:30]) > value  # fewer rows, less cost
    X[3, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        est.score(X)


def test_tree_score_is_minus_the_kmeans_cost_of_its_clusters():
    from exclust.algorithms.histogram.imm import IMM

    X = _blobs()[0]
    est = IMM(3, random_state=0).fit(X, CENTERS)
    labels = est.predict(X)
    cost = sum(((X[labels == c] - X[labels == c].mean(axis=0)) ** 2).sum() for c in np.unique(labels))
    assert est.score(X) == pytest.approx(-cost, rel=1e-9)


def test_kmeans_score_is_scikit_learns():
    from sklearn.cluster import KMeans as SKKMeans

    from exclust.reference import KMeans

    X = _blobs()[0]
    ours = KMeans(3, random_state=0).fit(X)
    theirs = SKKMeans(3, n_init=1, random_state=0).fit(X)
    theirs.cluster_centers_ = ours.cluster_centers_
    assert ours.score(X) == pytest.approx(theirs.score(X), rel=1e-12)


@pytest.mark.parametrize("make", [_kmeans, _gaussian_mixture, _kmedians],
                         ids=["kmeans", "gaussian_mixture", "kmedians"])
def test_reference_clusterings_pass_check_estimator(make):
    from sklearn.utils.estimator_checks import check_estimator

    # The one check left out: predict labels rows holding NaN or inf -1 (exclust's documented
    # policy, shared with `exclust label`) where the check wants a ValueError. Its other half,
    # fit refusing such rows, is asserted below.
    expected = {"check_estimators_nan_inf": "predict labels rows holding NaN or inf -1 (README, From Python)"}
    results = check_estimator(make(), expected_failed_checks=expected, on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed == set()
    outcome = {r["check_name"]: r["status"] for r in results}
    assert outcome["check_estimators_nan_inf"] == "xfail"
    assert len(outcome) >= 40
    X = _blobs()[0]
    for value in (np.nan, np.inf):
        X[5, 0] = value
        # NaN: a missing value the reference refuses (it needs complete rows); inf: refused when read (issue 28).
        with pytest.raises(ValueError, match="complete rows.*NaN|infinite values"):
            make().fit(X)


@pytest.mark.parametrize("make, changed, bad, fit_args", ESTIMATORS, ids=IDS)
def test_repr_shows_every_parameter_and_html_repr_is_clean(make, changed, bad, fit_args):
    est = make()
    text = repr(est)
    for name, value in est.get_params(deep=False).items():
        if not hasattr(value, "__array__") and not hasattr(value, "matrix"):
            assert f"{name}={value!r}" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert type(est).__name__ in est._repr_html_()


def test_mmdt_repr_names_its_default_threshold():
    from exclust.algorithms.mmdt.mmdt import MMDT

    assert "threshold='exact'" in repr(MMDT(threshold="exact"))


def test_number_of_clusters_is_n_clusters_and_at_least_two():
    from exclust.algorithms.cart import CART
    from exclust.algorithms.histogram.exkmc import ExKMC
    from exclust.algorithms.histogram.imm import IMM
    from exclust.algorithms.histogram.kdtree import KDTree
    from exclust.errors import InputError

    X, y = _blobs()
    noise = np.random.default_rng(1).normal(size=(300, 2))  # overlapping clusters: ExKMC uses its whole budget
    assert ExKMC(3).fit(noise, CENTERS / 8).tree_.n_leaves == 3  # the leaf budget defaults to n_clusters
    assert ExKMC(3, 5).fit(noise, CENTERS / 8).tree_.n_leaves == 5  # the old positional spelling
    assert KDTree(n_clusters=3).fit(X, CENTERS).tree_.n_leaves == 3
    assert KDTree(5).fit(X, CENTERS).tree_.n_leaves == 5
    with pytest.raises(InputError, match="n_clusters=4"):
        KDTree(n_clusters=4).fit(X, CENTERS)
    assert CART(n_clusters=4, random_state=0).fit(X, y).tree_.n_clusters == 4  # a cluster the labels lack
    assert CART(n_clusters=3, random_state=0).fit(X, y).tree_.n_leaves == 3
    with pytest.raises(InputError, match="n_clusters=2"):
        CART(n_clusters=2).fit(X, y)
    for est in (IMM(1), ExKMC(1), KDTree(n_clusters=1), CART(n_clusters=1)):
        with pytest.raises(ParameterError, match="'n_clusters' parameter"):
            est.fit(X, CENTERS[:1] if not isinstance(est, CART) else y * 0)


FITTED_ON_ROWS = [row for row in ESTIMATORS if row[0] is not _mmdt]  # MMDT fits a mixture summary


@pytest.mark.parametrize("make, changed, bad, fit_args", FITTED_ON_ROWS,
                         ids=[row[0].__name__.strip("_") for row in FITTED_ON_ROWS])
def test_named_input_gives_no_feature_name_warning(make, changed, bad, fit_args):
    import pandas as pd

    from exclust.sources.dataset import load_dataset

    args = list(fit_args())
    frame = pd.DataFrame(args[0], columns=NAMES)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="X (does not have valid|has) feature names")
        if hasattr(make(), "fit_predict"):
            assert make().fit_predict(frame, *args[1:]).shape == (len(frame),)
        data = load_dataset(frame)
        est = make().fit(data, *args[1:])
        assert list(est.feature_names_in_) == NAMES
        assert np.array_equal(est.predict(data), est.predict(frame))
