"""The public face of ``exclust``: every registered algorithm importable from it, ``n_clusters`` accepted
wherever a number of clusters is meant, and ``dir(exclust)`` listing the public names once."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import exclust
from exclust.errors import InputError, ParameterError
from exclust.jobs import registry


def test_every_registered_algorithm_is_a_public_name():
    for name, entry in registry.ALGORITHMS.items():
        class_name = entry.estimator.rpartition(":")[2]
        assert class_name in exclust.__all__, f"{name}'s estimator {class_name} is not in exclust.__all__"
        assert getattr(exclust, class_name) is entry.estimator_class()


def test_dir_lists_the_public_names_once():
    names = dir(exclust)
    assert len(names) == len(set(names))
    assert set(names) == {*exclust.__all__, "__version__"}
    for private in ("Any", "annotations", "importlib", "_PUBLIC"):
        assert private not in names
    exclust.IMM  # noqa: B018  (loading a public name loads subpackages: they stay out of dir)
    assert "algorithms" not in dir(exclust)


def test_every_public_name_resolves():
    for name in exclust.__all__:
        assert getattr(exclust, name) is not None


def test_every_tree_estimator_takes_n_clusters():
    """Every tree estimator of the registry, and the reference clusterings but the mixture (scikit-learn's
    ``n_components``), take ``n_clusters``."""
    classes = [entry.estimator_class() for entry in registry.ALGORITHMS.values()]
    classes += [exclust.KMeans, exclust.KMedians, exclust.ConceptCART]
    for cls in classes:
        assert "n_clusters" in inspect.signature(cls).parameters, cls.__name__


def _summary(k: int):
    rng = np.random.default_rng(0)
    return exclust.MixtureSummary(means=rng.normal(size=(k, 2)) * 10, sigma=np.ones(2), weights=np.full(k, 1 / k))


def test_mmdt_takes_n_clusters_and_checks_it_against_the_summary():
    tree = exclust.MMDT(n_clusters=3, random_state=0).fit(_summary(3)).tree_
    assert tree.n_leaves == 3
    assert exclust.MMDT(n_clusters=3).get_params()["n_clusters"] == 3
    with pytest.raises(InputError, match="n_clusters=4, but the mixture summary has 3 components"):
        exclust.MMDT(n_clusters=4).fit(_summary(3))
    with pytest.raises(ParameterError):
        exclust.MMDT(n_clusters=1).fit(_summary(3))


def test_concept_estimators_take_n_clusters_or_n_components():
    rng = np.random.default_rng(1)
    centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    truth = rng.integers(0, 3, 300)
    X = centers[truth] + rng.normal(size=(300, 2))
    cavs = exclust.ConceptActivationVectors(matrix=np.eye(2), names=["a", "b"], kinds=["continuous"] * 2,
                                            scores=np.ones(2), score_names=["R^2"] * 2)
    by_clusters = exclust.ConceptMMDT(cavs, n_clusters=3, random_state=0).fit(X)
    by_components = exclust.ConceptMMDT(cavs, n_components=3, random_state=0).fit(X)
    assert by_clusters.tree_.n_leaves == by_components.tree_.n_leaves == 3
    assert exclust.ConceptCART(cavs, n_clusters=3, random_state=0).fit(X).tree_.n_leaves == 3
    with pytest.raises(ParameterError, match="name the number of clusters twice"):
        exclust.ConceptMMDT(cavs, n_clusters=3, n_components=2).fit(X)
