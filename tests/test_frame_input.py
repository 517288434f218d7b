"""Issue 28 through the Python API: estimators fitted on pandas and Dask DataFrames of mixed
dtypes (numbers with NaN, text, pandas category, bool), predicting later frames with the fitted
vocabulary; the builders and estimators that read numbers only refuse in one line."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import exclust
from exclust.errors import InputError, ParameterError
from exclust.sources.dataset import load_dataset
from exclust.tree.node_kinds import CATEGORY_SET, MISSING_NONE

COUNTRIES = ["at", "de", "es", "fr", "it", "nl"]


def _customers(n: int = 900, seed: int = 0):
    """A frame whose clusters (in the numeric space Z) follow the country, with a numeric
    feature holding NaN, a pandas category and a bool; Z as a second frame."""
    rng = np.random.default_rng(seed)
    country = rng.choice(COUNTRIES, n)
    group = np.select([np.isin(country, ["at", "de"]), np.isin(country, ["es", "it"])], [0, 1], 2)
    z = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]])[group] + rng.normal(size=(n, 2))
    frame = pd.DataFrame({
        "age": rng.normal(40, 10, n).round(),
        "country": country,
        "plan": pd.Categorical(rng.choice(["basic", "pro"], n)),
        "vip": rng.random(n) < 0.2,
    })
    frame.loc[rng.random(n) < 0.08, "age"] = np.nan
    return frame, pd.DataFrame({"z0": z[:, 0], "z1": z[:, 1]})


@pytest.mark.parametrize("make", [lambda: exclust.IMM(3, random_state=0), lambda: exclust.ExKMC(3, random_state=0)],
                         ids=["IMM", "ExKMC"])
def test_tree_fitted_on_a_mixed_frame_cuts_countries_and_predicts_frames(make):
    frame, Z = _customers()
    est = make().fit(frame, Z=Z)
    tree = est.tree_
    assert list(est.feature_names_in_) == ["age", "country", "plan", "vip"]
    by_name = {tree.feature_names[f]: v for f, v in tree.categories.items()}
    assert by_name == {"country": COUNTRIES, "plan": ["basic", "pro"], "vip": [False, True]}
    assert (tree.kind == CATEGORY_SET).any() and "country in {" in est.rules_text()

    labels = est.predict(frame)
    assert labels.min() >= 0  # every row routed, those with a missing age too
    assert np.array_equal(labels, est.predict(load_dataset(frame, list(frame.columns))))
    expected = np.select([np.isin(frame.country, ["at", "de"]), np.isin(frame.country, ["es", "it"])], [0, 1], 2)
    assert (pd.crosstab(labels, expected).to_numpy().max(axis=0).sum()) == len(frame)  # the country explains it

    # An unseen category takes the missing side of the set cut, as a null country does.
    unseen, null = frame.head(4).copy(), frame.head(4).copy()
    unseen["country"], null["country"] = "pl", None
    cut = int(np.flatnonzero(tree.kind == CATEGORY_SET)[0])
    assert tree.missing_side[cut] != MISSING_NONE
    assert np.array_equal(est.predict(unseen), est.predict(null)) and est.predict(unseen).min() >= 0
    # The country as a pandas category, the plan as text: the same values, the same labels.
    recast = frame.astype({"country": "category", "plan": str})
    assert np.array_equal(est.predict(recast), labels)


def test_predict_refuses_a_frame_whose_columns_differ():
    frame, Z = _customers(n=300)
    est = exclust.IMM(3, random_state=0).fit(frame, Z=Z)
    refused = {
        "same order": frame[["country", "age", "plan", "vip"]],
        "should match": frame.rename(columns={"plan": "tier"}),
        "fitted on them as numbers": frame.assign(age=frame.age.astype(str)),
        "category features when IMM was fitted": frame.assign(vip=frame.vip.astype(int)),
    }
    for message, bad in refused.items():
        with pytest.raises(InputError, match=message) as err:
            est.predict(bad)
        assert "\n" not in str(err.value)


def test_integer_codes_forced_to_categories():
    frame, Z = _customers(n=600)
    frame["region"] = frame.country.map({c: i * 10 for i, c in enumerate(COUNTRIES)}).astype("int64")
    frame = frame.drop(columns="country")
    for data in (frame.astype({"region": "category"}), load_dataset(frame, list(frame.columns),
                                                                     categorical=["region"])):
        est = exclust.IMM(3, random_state=0).fit(data, Z=Z)
        by_name = {est.tree_.feature_names[f]: v for f, v in est.tree_.categories.items()}
        assert by_name["region"] == [0, 10, 20, 30, 40, 50]
        assert "region in {" in est.rules_text()
        assert est.predict(frame).min() >= 0  # the plain integer column, coded with the fitted vocabulary


def test_estimators_that_read_numbers_refuse_in_one_line():
    frame, Z = _customers(n=300)
    centers = np.array([[30.0, 0.0], [40.0, 6.0], [50.0, 0.0]])
    cases = [
        (lambda: exclust.OptimalTree(3).fit(frame), ParameterError, "OptimalTree cuts numeric features"),
        # ExShallow takes categories and missing values; the k-means it fits on the ages holding NaN does not.
        (lambda: exclust.ExShallow(3).fit(frame), InputError, "needs complete rows.*'age'"),
        (lambda: exclust.KMeans(3).fit(frame), InputError, r"KMeans clusters numbers, so category features"),
        (lambda: exclust.KernelMMDT(3).fit(frame), InputError, "KernelMMDT fits a mixture over numbers"),
        (lambda: exclust.GaussianMixture(3).fit(frame[["age"]]), InputError, "needs complete rows"),
        # The reference clustering is fitted on the numeric features (age, holding NaN): refused, as in a run.
        (lambda: exclust.IMM(3).fit(frame), InputError, "needs complete rows.*'age'"),
        (lambda: exclust.IMM(3).fit(frame, centers[:, :1]), InputError, "clustering space needs complete rows"),
        # Categories only: the clustering's columns are named with load_dataset(..., cluster_on=[...]).
        (lambda: exclust.IMM(3).fit(frame.drop(columns="age"), Z=Z), InputError, "every feature .* is a category"),
    ]
    for fit, error, message in cases:
        with pytest.raises(error, match=message) as err:
            fit()
        assert "\n" not in str(err.value) and "could not convert" not in str(err.value)
    complete = frame.assign(age=frame.age.fillna(40.0))  # the reference k-means then fits the ages
    assert exclust.IMM(3, random_state=0).fit(complete).predict(frame).min() >= 0
    assert exclust.ExGreedy(3, random_state=0).fit(frame, Z=Z).predict(frame).min() >= 0


def test_dask_frame_gives_the_pandas_tree(dask_client):
    import dask.dataframe as dd

    frame, Z = _customers(n=1200)
    both = pd.concat([frame, Z], axis=1)
    lazy = dd.from_pandas(both, npartitions=3)
    features = ["age", "country", "plan", "vip"]
    centers = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]])  # given: k-means' seeding differs on Dask
    in_memory = exclust.IMM(3, random_state=0).fit(frame, centers, Z=Z)
    on_dask = exclust.IMM(3, random_state=0).fit(lazy[features], centers, Z=lazy[["z0", "z1"]])
    assert on_dask.rules_text() == in_memory.rules_text()
    assert on_dask.tree_.categories == in_memory.tree_.categories
    assert np.array_equal(np.asarray(on_dask.predict(lazy[features])), in_memory.predict(frame))


def test_a_bare_array_holding_nan_is_fitted_by_the_builders_that_route_it():
    """A numpy array's NaN is a missing value for every builder that learns missing sides (as a
    frame's is). The rows' clusters come from complete columns: ``Z`` for the center trees (their
    distances to the centers need complete rows, and fit says so without it), the labels for
    CART and LabelTree; KDTree halves the rows it is given. Every row is routed. The reference
    clustering a builder fits without centers needs complete rows, and says so naming the column."""
    rng = np.random.default_rng(5)
    centers = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]])
    group = rng.integers(0, 3, 600)
    Z = centers[group] + rng.normal(size=(600, 2))
    X = Z.copy()
    X[rng.random(600) < 0.1, 0] = np.nan
    fitted = [make().fit(X, centers, Z=Z) for make in (lambda: exclust.IMM(3), lambda: exclust.ExKMC(3),
                                                       lambda: exclust.ExShallow(3), lambda: exclust.ExGreedy(3))]
    fitted += [exclust.KDTree().fit(X, centers), exclust.CART(3).fit(X, group), exclust.LabelTree(3).fit(X, group)]
    for est in fitted:
        assert (est.predict(X) >= 0).all(), type(est).__name__
        assert est.tree_.meta.get("missing_at_fit") == ["x0"], type(est).__name__
    with pytest.raises(InputError, match="complete rows; pass Z"):
        exclust.IMM(3).fit(X, centers)
    with pytest.raises(InputError, match="'x0'") as refused:
        exclust.IMM(3, random_state=0).fit(X)
    assert "\n" not in str(refused.value) and "complete rows" in str(refused.value)
