"""Concept-MMDT (paper 000, Alg. 2): CAVs, the concept-space tree, numpy/dask agreement, bad input.

The hand-made latent space: d = 5, three Gaussian clusters (identity covariance) whose means
differ only along two known orthonormal directions u1, u2 (coordinates (-4, 0), (4, -3), (4, 3)).
Concept "alpha" is binary, the sign of <x, u1>; concept "beta" is continuous, <x, u2> plus noise.
The right concept tree therefore cuts alpha between cluster 0 and clusters 1-2, then beta
between clusters 1 and 2.
"""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

import exclust
from exclust.algorithms.mmdt.concept import ConceptActivationVectors, concept_summary
from exclust.dataplane.parts import is_lazy
from exclust.errors import InputError
from exclust.reference.summary import MixtureSummary

D = 5
COORDS = np.array([[-4.0, 0.0], [4.0, -3.0], [4.0, 3.0]])


def _latent(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(np.random.default_rng(123).normal(size=(D, D)))
    u1, u2 = Q[:, 0], Q[:, 1]
    means = COORDS @ np.stack([u1, u2])
    y = rng.integers(0, 3, n)
    X = means[y] + rng.normal(size=(n, D))
    concepts = {"alpha": (X @ u1 > 0).astype(float), "beta": X @ u2 + 0.1 * rng.normal(size=n)}
    return X, y, concepts, u1, u2, means


@pytest.fixture(scope="module")
def latent():
    return _latent()


@pytest.fixture(scope="module")
def cavs(latent):
    X, _, concepts, *_ = latent
    return exclust.fit_cavs(X, concepts, random_state=0)


# --------------------------------------------------------------------------- CAVs
def test_cavs_align_with_the_true_directions(latent, cavs):
    _, _, _, u1, u2, _ = latent
    assert cavs.names == ["alpha", "beta"]
    assert cavs.kinds == ["binary", "continuous"]
    assert cavs.score_names == ["accuracy", "r2"]
    np.testing.assert_allclose(np.linalg.norm(cavs.matrix, axis=1), 1.0)
    assert cavs.matrix[0] @ u1 > 0.95  # sign kept: larger coordinate = concept present
    assert cavs.matrix[1] @ u2 > 0.95
    assert abs(cavs.matrix[0] @ u2) < 0.1 and abs(cavs.matrix[1] @ u1) < 0.1
    assert cavs.scores[0] > 0.95 and cavs.scores[1] > 0.95
    assert cavs.n_train.sum() + cavs.n_test.sum() == 2 * 3000
    assert 0.1 < cavs.n_test[0] / 3000 < 0.3


def test_continuous_cav_matches_least_squares_and_held_out_r2(latent, cavs):
    X, _, concepts, *_ = latent
    from exclust.algorithms.mmdt.cav_fitting import held_out_rows

    test = held_out_rows(np.arange(X.shape[0]), 0, 0.2)
    A = np.column_stack([X[~test], np.ones((~test).sum())])
    coef = np.linalg.lstsq(A, concepts["beta"][~test], rcond=None)[0]
    np.testing.assert_allclose(cavs.matrix[1], coef[:D] / np.linalg.norm(coef[:D]), atol=1e-8)
    np.testing.assert_allclose(cavs.scales[1], np.linalg.norm(coef[:D]), rtol=1e-8)
    np.testing.assert_allclose(cavs.intercepts[1], coef[D], atol=1e-8)
    pred = X[test] @ coef[:D] + coef[D]
    y = concepts["beta"][test]
    r2 = 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    np.testing.assert_allclose(cavs.scores[1], r2, rtol=1e-8)


def test_unlabelled_rows_are_ignored(latent):
    X, _, concepts, u1, u2, _ = latent
    alpha = concepts["alpha"].copy()
    alpha[::2] = np.nan
    cavs = exclust.fit_cavs(X, {"alpha": alpha, "beta": concepts["beta"]}, random_state=0)
    assert cavs.n_train[0] + cavs.n_test[0] == 1500
    assert cavs.n_train[1] + cavs.n_test[1] == 3000
    assert cavs.matrix[0] @ u1 > 0.95


def test_projection_numpy_and_dask(latent, cavs):
    import dask.array as da

    X = latent[0]
    Z = cavs.project(X)
    np.testing.assert_allclose(Z, X @ cavs.matrix.T)
    Zd = cavs.project(da.from_array(X, chunks=(512, 2)))
    assert Zd.shape == (3000, 2)
    np.testing.assert_allclose(Zd.compute(), Z)


def test_cavs_round_trip_through_dict(cavs):
    again = ConceptActivationVectors.from_dict(cavs.to_dict())
    np.testing.assert_allclose(again.matrix, cavs.matrix)
    assert again.names == cavs.names and again.kinds == cavs.kinds
    np.testing.assert_allclose(again.scores, cavs.scores)


# --------------------------------------------------------------------------- Concept-MMDT
def test_concept_mmdt_splits_on_the_right_concepts(latent, cavs):
    X, y, *_ = latent
    model = exclust.ConceptMMDT(cavs, threshold="exact", random_state=0).fit(X, labels=y)
    tree = model.tree_
    assert tree.feature_names == ["alpha", "beta"]
    assert tree.n_leaves == 3
    proj = model.summary_.means  # C mu_k
    root = 0
    assert tree.feature_names[tree.feature[root]] == "alpha"
    assert proj[0, 0] < tree.threshold[root] < min(proj[1, 0], proj[2, 0])
    # The other internal node separates clusters 1 and 2 on beta.
    inner = [i for i in range(1, tree.node_count) if tree.kind[i] != 0]
    assert len(inner) == 1
    node = inner[0]
    assert tree.feature_names[tree.feature[node]] == "beta"
    assert proj[1, 1] < tree.threshold[node] < proj[2, 1]
    assert adjusted_rand_score(y, model.predict(X)) > 0.95
    rules = model.rules_text()
    assert "alpha" in rules and "beta" in rules


def test_concept_summary_is_eq_4_and_5(latent, cavs):
    X, y, *_ = latent
    model = exclust.ConceptMMDT(cavs, random_state=0).fit(X, labels=y)
    C = cavs.matrix
    mus = np.stack([X[y == k].mean(axis=0) for k in range(3)])
    w = np.bincount(y) / y.size
    sigma = sum(w[k] * np.cov(X[y == k].T, bias=True) for k in range(3))
    np.testing.assert_allclose(model.latent_means_, mus, atol=1e-10)
    np.testing.assert_allclose(model.latent_covariance_, sigma, atol=1e-10)
    np.testing.assert_allclose(model.summary_.means, mus @ C.T, atol=1e-10)
    np.testing.assert_allclose(model.summary_.sigma, np.sqrt(np.diag(C @ sigma @ C.T)), rtol=1e-10)
    # eq. 6: min over pairs of max over concepts (c'(mu_k - mu_l))^2 / (2 c' Sigma c)
    q = min(
        max(((C[m] @ (mus[k] - mus[other])) ** 2) / (2 * C[m] @ sigma @ C[m]) for m in range(2))
        for k in range(3) for other in range(3) if k != other
    )
    np.testing.assert_allclose(model.enr_, q, rtol=1e-8)


def test_concept_summary_is_scale_free():
    """Scaling a CAV scales its axis (means, sigma, threshold) alike: the same partition, the same q."""
    rng = np.random.default_rng(1)
    means = rng.normal(size=(4, 3)) * 3
    covs = np.stack([np.eye(3) * s for s in (0.5, 1.0, 1.5, 1.0)])
    C = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, -1.0]])
    cavs = ConceptActivationVectors.from_matrix(C, ["a", "b"])
    latent = MixtureSummary(
        means=means, sigma_per_component=np.sqrt(np.einsum("kjj->kj", covs)), covariances=covs
    )
    s = concept_summary(cavs, latent)
    Cn = C / np.linalg.norm(C, axis=1, keepdims=True)
    np.testing.assert_allclose(s.means, means @ Cn.T)
    pooled = covs.mean(axis=0)
    np.testing.assert_allclose(s.sigma, np.sqrt(np.diag(Cn @ pooled @ Cn.T)))
    np.testing.assert_allclose(s.sigma_per_component[2], np.sqrt(np.diag(Cn @ covs[2] @ Cn.T)))


def test_concept_mmdt_fits_its_own_mixture(latent, cavs):
    X, y, *_ = latent
    model = exclust.ConceptMMDT(cavs, n_components=3, random_state=0).fit(X)
    assert adjusted_rand_score(y, model.reference_labels_) > 0.95
    assert adjusted_rand_score(y, model.predict(X)) > 0.95
    assert model.mixture_ is not None and model.tree_.meta["algorithm"] == "concept-mmdt"
    # A diagonal mixture: Sigma comes from a full-scatter pass on its labels, off-diagonals included.
    diag = exclust.ConceptMMDT(cavs, n_components=3, covariance_type="diag", random_state=0).fit(X)
    labels = diag.reference_labels_
    w = diag.mixture_.weights_  # the mixture's weights pool its components' hard-label covariances
    pooled = sum(w[k] * np.cov(X[labels == k].T, bias=True) for k in range(3) if w[k] > 0)
    np.testing.assert_allclose(diag.latent_covariance_, pooled, atol=1e-8)
    assert adjusted_rand_score(y, diag.predict(X)) > 0.95


def test_concept_cart_baseline(latent, cavs):
    pytest.importorskip("exclust.algorithms.cart")
    X, y, *_ = latent
    model = exclust.ConceptCART(cavs).fit(X, y)
    assert model.tree_.feature_names == ["alpha", "beta"]
    assert model.tree_.n_leaves == 3
    assert adjusted_rand_score(y, model.predict(X)) > 0.95
    own = exclust.ConceptCART(cavs, n_components=3, random_state=0).fit(X)
    assert own.tree_.n_leaves == 3 and own.mixture_ is not None
    assert adjusted_rand_score(y, own.predict(X)) > 0.95


# --------------------------------------------------------------------------- numpy vs dask
def test_numpy_and_dask_give_the_same_cavs_and_tree(latent, cavs, dask_client):
    import dask.array as da

    X, y, concepts, u1, u2, _ = latent
    Xd = da.from_array(X, chunks=(700, D))
    # Labels chunked differently from the embeddings, one of them numpy: both are aligned.
    lazy = {"alpha": da.from_array(concepts["alpha"], chunks=450), "beta": concepts["beta"]}
    cavs_d = exclust.fit_cavs(Xd, lazy, random_state=0)
    np.testing.assert_allclose(cavs_d.matrix, cavs.matrix, atol=1e-9)
    np.testing.assert_allclose(cavs_d.scores, cavs.scores, atol=1e-12)
    assert (cavs_d.n_train == cavs.n_train).all()

    tree_np = exclust.ConceptMMDT(cavs, random_state=0).fit(X, y).tree_
    model_d = exclust.ConceptMMDT(cavs_d, random_state=0).fit(Xd, da.from_array(y, chunks=700))
    assert model_d.tree_.feature_names == tree_np.feature_names
    np.testing.assert_array_equal(model_d.tree_.feature, tree_np.feature)
    np.testing.assert_array_equal(model_d.tree_.value, tree_np.value)
    np.testing.assert_allclose(model_d.tree_.threshold, tree_np.threshold, atol=1e-7)
    pred = model_d.predict(Xd)
    assert isinstance(pred, da.Array)
    assert adjusted_rand_score(y, pred.compute()) > 0.95



def test_flow_path_from_parquet_concept_columns(latent, cavs, dask_client, tmp_path):
    """The flow's path: concept labels are Parquet columns (NaN = unlabelled), X a dask array."""
    import pandas as pd

    X, y, concepts, *_ = latent
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(D)])
    frame["alpha"], frame["beta"] = concepts["alpha"], concepts["beta"]
    frame.loc[::3, "beta"] = np.nan
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[part].to_parquet(tmp_path / f"part{i}.parquet")
    ds = exclust.load_dataset(str(tmp_path), features=[f"x{j}" for j in range(D)], extra_columns=["alpha", "beta"])
    assert is_lazy(ds.X)
    cavs_d = exclust.fit_cavs(ds.X, {name: ds.extra[name] for name in ("alpha", "beta")}, random_state=0)
    assert cavs_d.n_train[1] + cavs_d.n_test[1] == 2000
    np.testing.assert_allclose(cavs_d.matrix[0], cavs.matrix[0], atol=1e-9)  # alpha: the same rows
    assert cavs_d.matrix[1] @ cavs.matrix[1] > 0.999
    fitted = exclust.ConceptMMDT(cavs_d, n_components=3, random_state=0).fit(ds.X)
    leaves = fitted.tree_.predict(cavs_d.project(ds.X)).compute()
    assert adjusted_rand_score(y, leaves) > 0.95
    assert adjusted_rand_score(y, fitted.reference_labels_.compute()) > 0.95


def test_sampled_logistic_cavs_agree_between_numpy_and_dask(latent, dask_client):
    import dask.array as da

    X, _, concepts, u1, _, _ = latent
    a = exclust.fit_cavs(X, concepts, max_sample_rows=600, random_state=3)
    b = exclust.fit_cavs(da.from_array(X, chunks=(333, D)), concepts, max_sample_rows=600, random_state=3)
    assert "sample" in a.solver["alpha"]
    assert 400 < a.n_train[0] + a.n_test[0] < 800  # about 600 of 3000 rows
    np.testing.assert_allclose(a.matrix, b.matrix, atol=1e-9)
    assert a.matrix[0] @ u1 > 0.95


# --------------------------------------------------------------------------- bad input
def test_one_class_concept_is_rejected(latent):
    X = latent[0]
    with pytest.raises(InputError, match=r"'flat'.*one class only"):
        exclust.fit_cavs(X, {"flat": np.ones(X.shape[0])})


def test_linearly_dependent_cavs_are_named(latent):
    X, _, concepts, *_ = latent
    rng = np.random.default_rng(5)
    a, b = X @ rng.normal(size=D), X @ rng.normal(size=D)
    dependent = {"a": a, "b": b, "a_plus_b": a + b, "beta": concepts["beta"]}
    with pytest.raises(InputError, match=r"linearly dependent") as err:
        exclust.fit_cavs(X, dependent)
    message = str(err.value)
    assert "'a'" in message and "'b'" in message and "'a_plus_b'" in message
    with pytest.raises(InputError, match=r"'alpha'.*'alpha_again'|'alpha_again'.*'alpha'"):
        exclust.fit_cavs(X, {"alpha": concepts["alpha"], "alpha_again": concepts["alpha"]})
    # The escape hatch keeps them.
    kept = exclust.fit_cavs(X, dependent, max_condition=np.inf)
    assert kept.condition_number() > 1e6


def test_more_concepts_than_dimensions_is_rejected():
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match=r"3 concepts .* 2-dimensional"):
        ConceptActivationVectors.from_matrix(rng.normal(size=(3, 2)), ["a", "b", "c"])


def test_embedding_dimension_mismatch(latent, cavs):
    X, y, *_ = latent
    with pytest.raises(InputError, match=r"5-dimensional embedding but X has 4 columns"):
        exclust.ConceptMMDT(cavs, n_components=3).fit(X[:, :4])
    with pytest.raises(InputError, match=r"5-dimensional embedding"):
        cavs.project(np.zeros((3, 6)))
    model = exclust.ConceptMMDT(cavs).fit(X, y)
    with pytest.raises(InputError, match=r"X has 3 features, but ConceptMMDT is expecting 5 features"):
        model.predict(X[:, :3])


@pytest.mark.parametrize(
    "concepts, pattern",
    [
        ({}, r"no concepts given"),
        ([1, 2], r"must map concept names"),
        ({"alpha": np.zeros(10)}, r"one label per row \(3000\)"),
        ({"words": np.array(["yes"] * 3000)}, r"dtype"),
        ({"nothing": np.full(3000, np.nan)}, r"no labelled rows"),
        ({"inf": np.where(np.arange(3000) % 2, 1.0, np.inf)}, r"infinite"),
    ],
)
def test_bad_concept_dicts(latent, concepts, pattern):
    with pytest.raises(InputError, match=pattern):
        exclust.fit_cavs(latent[0], concepts)


def test_declared_kinds_are_checked(latent):
    X, _, concepts, *_ = latent
    with pytest.raises(InputError, match=r"declared binary"):
        exclust.fit_cavs(X, {"beta": concepts["beta"]}, kinds={"beta": "binary"})
    with pytest.raises(InputError, match=r"unknown concept"):
        exclust.fit_cavs(X, {"beta": concepts["beta"]}, kinds={"gamma": "binary"})
    forced = exclust.fit_cavs(X, {"alpha": concepts["alpha"]}, kinds={"alpha": "continuous"})
    assert forced.kinds == ["continuous"] and forced.score_names == ["r2"]


def test_too_few_labelled_rows(latent):
    X, _, concepts, *_ = latent
    alpha = np.full(X.shape[0], np.nan)
    alpha[:4] = [0, 1, 0, 1]
    with pytest.raises(InputError, match=r"too few labelled rows"):
        exclust.fit_cavs(X, {"alpha": alpha})


def test_estimator_parameters_are_checked(latent, cavs):
    X, y, *_ = latent
    with pytest.raises(InputError, match=r"n_components"):
        exclust.ConceptMMDT(cavs).fit(X)
    with pytest.raises(InputError, match=r"ConceptActivationVectors"):
        exclust.ConceptMMDT(np.eye(5)).fit(X, y)
    with pytest.raises(InputError, match=r"threshold"):
        exclust.ConceptMMDT(cavs, threshold="median").fit(X, y)
    with pytest.raises(InputError, match=r"clusters \[1\] have no rows"):
        exclust.ConceptMMDT(cavs).fit(X, np.where(y == 1, 2, y))


# --------------------------------------------------------------------------- digit concepts
def _circle():
    yy, xx = np.mgrid[0:8, 0:8]
    r = np.hypot(yy - 3.5, xx - 3.5)
    return np.clip(16 * (1 - np.abs(r - 2.6) / 0.9), 0, 16)


def test_digit_concepts_on_drawn_shapes():
    from exclust.datasets.concepts_digits import count_loops, curvature, digit_concepts, line_lengths

    ring = np.zeros((8, 8))
    ring[1:7, 2] = ring[1:7, 5] = 16
    ring[1, 2:6] = ring[6, 2:6] = 16
    bar = np.zeros((8, 8))
    bar[0:8, 3:5] = 16
    eight = np.zeros((8, 8))
    eight[0, 2:6] = eight[3, 2:6] = eight[7, 2:6] = 16
    eight[0:8, 2] = eight[0:8, 5] = 16
    dash = np.zeros((8, 8))
    dash[4, 1:7] = 16
    images = np.stack([ring, bar, eight, dash])
    np.testing.assert_array_equal(count_loops(images), [1, 0, 2, 0])
    horizontal, vertical = line_lengths(images)
    assert vertical[1] == 1.0 and horizontal[3] == 0.75 and vertical[3] == 0.125
    c = digit_concepts(images)
    np.testing.assert_array_equal(c["loop"], [1, 0, 1, 0])
    np.testing.assert_array_equal(c["vertical_line"], [1, 1, 1, 0])
    np.testing.assert_array_equal(c["horizontal_line"], [0, 0, 0, 1])
    np.testing.assert_allclose(c["ink"], images.mean(axis=(1, 2)) / 16)
    np.testing.assert_allclose(c["width"], [0.5, 0.25, 0.5, 0.75])

    diagonal = np.eye(8) * 16
    thick_dash = np.zeros((8, 8))
    thick_dash[3:5, 1:7] = 16
    curv = curvature(np.stack([_circle(), bar, thick_dash, diagonal]))
    assert curv[1] < 1e-9  # a straight bar across the image never turns
    assert curv[0] > curv[2] and curv[0] > curv[3]  # a circle turns more than straight strokes
    with pytest.raises(InputError, match=r"unknown digit concept"):
        digit_concepts(images, names=("loop", "serif"))
    with pytest.raises(InputError, match=r"stack of images"):
        digit_concepts(np.zeros((8, 8)))
