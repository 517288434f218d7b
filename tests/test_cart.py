"""CART baseline: conversion of scikit-learn's tree, sampling of large inputs, noise labels."""
from __future__ import annotations

import logging

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.tree import DecisionTreeClassifier

from exclust.algorithms.cart import CART, sklearn_threshold_as_float64, sklearn_tree_to_threshold_tree
from exclust.errors import InputError, ParameterError
from exclust.tree import ThresholdTree


def _blobs(rng, n_per=400, k=5, d=3):
    means = rng.uniform(-8, 8, size=(k, d))
    X = np.concatenate([m + 1.5 * rng.standard_normal((n_per, d)) for m in means])
    return X, np.repeat(np.arange(k), n_per)


def test_conversion_routes_like_sklearn(rng):
    X, y = _blobs(rng)
    model = DecisionTreeClassifier(max_leaf_nodes=9, random_state=0).fit(X, y)
    tree = sklearn_tree_to_threshold_tree(model, n_features=3, n_clusters=5)
    np.testing.assert_array_equal(tree.predict(X), model.predict(X))
    np.testing.assert_array_equal(tree.apply(X), model.apply(X))
    # Points right at (and one float64 step around) every threshold: scikit-learn compares in
    # float32, the converted tree must agree exactly.
    internal = np.flatnonzero(model.tree_.children_left != -1)
    probes = []
    for node in internal:
        f, t = model.tree_.feature[node], model.tree_.threshold[node]
        for v in (t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf), float(np.float32(t)),
                  tree.threshold[node], np.nextafter(tree.threshold[node], np.inf)):
            row = X[rng.integers(X.shape[0])].copy()
            row[f] = v
            probes.append(row)
    probes = np.array(probes)
    np.testing.assert_array_equal(tree.predict(probes), model.predict(probes))


def test_float32_threshold_rule(rng):
    for t in rng.standard_normal(200) * 10.0 ** rng.integers(-3, 4, size=200):
        cut = sklearn_threshold_as_float64(float(t))
        for x in (cut, np.nextafter(cut, np.inf), np.nextafter(cut, -np.inf), t):
            assert (x <= cut) == (np.float32(x) <= t)


def test_cart_estimator(rng):
    X, y = _blobs(rng)
    cart = CART(random_state=0).fit(X, y)
    assert isinstance(cart.tree_, ThresholdTree)
    assert cart.tree_.n_leaves == 5 and cart.tree_.meta["algorithm"] == "cart"
    assert cart.sampled_ is False and cart.n_fit_rows_ == X.shape[0]
    model = DecisionTreeClassifier(max_leaf_nodes=5, random_state=0).fit(X, y)
    np.testing.assert_array_equal(cart.predict(X), model.predict(X))
    assert (cart.fit_predict(X, y) == y).mean() > 0.9
    # Growth stops at pure leaves, so 8 is an upper bound; the count is scikit-learn's.
    big = CART(max_leaf_nodes=8, random_state=0).fit(X, y).tree_.n_leaves
    assert big == DecisionTreeClassifier(max_leaf_nodes=8, random_state=0).fit(X, y).get_n_leaves() <= 8


def test_noise_labels_are_left_out(rng):
    X, y = _blobs(rng)
    noisy = y.copy()
    noisy[::4] = -1
    cart = CART(random_state=0).fit(X, noisy)
    keep = noisy >= 0
    model = DecisionTreeClassifier(max_leaf_nodes=5, random_state=0).fit(X[keep], noisy[keep])
    np.testing.assert_array_equal(cart.predict(X), model.predict(X))
    assert cart.n_fit_rows_ == int(keep.sum())


def test_large_input_is_sampled_and_says_so(rng, caplog):
    X, y = _blobs(rng)
    with caplog.at_level(logging.INFO, logger="exclust.algorithms.cart"):
        cart = CART(max_sample_rows=500, random_state=1).fit(X, y)
    assert cart.sampled_ is True and cart.n_fit_rows_ == 500
    assert cart.tree_.meta["sampled"] is True and cart.tree_.meta["n_fit_rows"] == 500
    assert "uniform random sample of 500 rows" in caplog.text


def test_sampling_on_dask_draws_on_workers(rng, dask_client):
    import dask.array as da

    X, y = _blobs(rng)
    Xd = da.from_array(X, chunks=(300, 3))
    cart = CART(max_sample_rows=700, random_state=2).fit(Xd, da.from_array(y, chunks=300))
    assert cart.sampled_ and cart.n_fit_rows_ == 700
    # A uniform sample keeps the cluster shares: 5 equal clusters, 140 rows expected each.
    model = cart.model_
    counts = model.tree_.value[0, 0] * model.tree_.weighted_n_node_samples[0]
    assert counts.sum() == pytest.approx(700)
    assert counts.min() > 90 and counts.max() < 190
    pred = cart.predict(Xd)
    assert pred.compute().shape == (X.shape[0],)
    # Without sampling the dask path fits the same tree as numpy.
    full = CART(random_state=0).fit(Xd, y)
    np.testing.assert_array_equal(full.predict(X), CART(random_state=0).fit(X, y).predict(X))


def test_bad_inputs(rng):
    X, y = _blobs(rng)
    with pytest.raises(InputError):
        CART().fit(X, None)
    with pytest.raises(InputError):
        CART().fit(X, y[:-3])
    with pytest.raises(ParameterError, match="'max_leaf_nodes' parameter"):
        CART(max_leaf_nodes=0).fit(X, y)
    with pytest.raises(NotFittedError):
        CART().predict(X)
    one = CART().fit(X, np.zeros(X.shape[0], int))
    assert one.tree_.n_leaves == 1 and (one.predict(X) == 0).all()
