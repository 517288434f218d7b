"""ThresholdTree: routing, rules in words, JSON round trip, numpy vs dask prediction."""
from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest

from exclust.tree import ThresholdTree, TreeBuilder, TreeFormatError


def small_tree() -> ThresholdTree:
    # root: petal_width <= 1.3 -> cluster 0; else sepal_length <= 5.0 -> cluster 1; else interval on
    # petal_width around 2.0 half-width 0.5: inside -> cluster 2, outside -> cluster 1
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    left, right = b.split(root, feature=1, threshold=1.3)
    b.make_leaf(left, 0)
    rl, rr = b.split(right, feature=0, threshold=5.0)
    b.make_leaf(rl, 1)
    inside, outside = b.split_interval(rr, feature=1, center=2.0, half_width=0.5)
    b.make_leaf(inside, 2)
    b.make_leaf(outside, 1)
    return b.build(feature_names=["sepal_length", "petal_width"])


def test_routing_follows_cuts():
    tree = small_tree()
    X = np.array([[4.0, 1.0], [4.0, 2.0], [6.0, 2.2], [6.0, 2.6], [6.0, 1.3]])
    assert tree.predict(X).tolist() == [0, 1, 2, 1, 0]
    leaves = tree.apply(X)
    assert (tree.kind[leaves] == 0).all()
    assert tree.n_leaves == 4 and tree.depth == 3
    assert tree.features_used == ["sepal_length", "petal_width"]


def test_rules_merge_bounds_per_feature():
    rules = small_tree().rules()
    assert rules[0] == "petal_width <= 1.3"
    assert rules[2] == "sepal_length > 5 and 1.5 <= petal_width <= 2.5"
    # cluster 1 has two leaves; the outside-the-band leaf's values on petal_width are merged into two intervals
    assert rules[1] == ("(sepal_length <= 5 and petal_width > 1.3) or "
                        "(sepal_length > 5 and (1.3 < petal_width < 1.5 or petal_width > 2.5))")
    assert small_tree().describe_node(4) == "1.5 <= petal_width <= 2.5"  # an interval cut, plain arithmetic
    assert small_tree().rules_text().startswith("cluster 0: petal_width <= 1.3\n")


def test_json_round_trip_is_exact(tmp_path):
    tree = small_tree()
    tree.meta["algorithm"] = "test"
    path = tmp_path / "tree.json"
    tree.to_json(path)
    loaded = ThresholdTree.from_json(path)
    assert loaded == tree
    X = np.random.default_rng(1).normal(2, 2, size=(500, 2))
    assert (loaded.predict(X) == tree.predict(X)).all()
    assert json.loads(path.read_text())["schema_version"] == 2  # issue 28: category sets, missing sides


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(schema_version=99), "schema version 99"),
        (lambda d: d.update(format="pickle"), "not an exclust tree"),
        (lambda d: d["nodes"]["left"].__setitem__(0, 0),
         r"nodes.left\[0\] is 0; it must be a whole number in \[1, 7\)"),
        (lambda d: d["nodes"]["left"].__setitem__(0, 99), r"nodes.left\[0\] is 99"),
        (lambda d: d["nodes"]["feature"].__setitem__(0, 7),
         r"nodes.feature\[0\] is 7; it must be a whole number in \[0, 2\)"),
        (lambda d: d["nodes"]["kind"].__setitem__(0, "exec"), "malformed"),
        # issue 8: each of these was an IndexError, an OverflowError, or silently accepted
        (lambda d: d["nodes"]["left"].pop(), "nodes.left has 6 entries but nodes.kind has 7"),
        (lambda d: d["nodes"]["threshold"].append(1.0), "nodes.threshold has 8 entries"),
        (lambda d: d["nodes"]["feature"].__setitem__(0, 1e30), r"nodes.feature\[0\] is 1e\+30"),
        (lambda d: d["nodes"]["feature"].__setitem__(0, 2.7), r"nodes.feature\[0\] is 2.7; it must be a whole number"),
        (lambda d: d["nodes"]["feature"].__setitem__(0, True), r"nodes.feature\[0\] is True"),
        (lambda d: d["nodes"]["threshold"].__setitem__(0, "7.5"),
         r"nodes.threshold\[0\] is '7.5'; it must be a finite number"),
        (lambda d: d["nodes"]["threshold"].__setitem__(0, True), r"nodes.threshold\[0\] is True"),
        (lambda d: d["nodes"]["threshold"].__setitem__(0, None), r"nodes.threshold\[0\] is None"),
        (lambda d: d["nodes"]["value"].__setitem__(2, 1e30), r"nodes.value\[2\] is 1e\+30"),
        (lambda d: d["nodes"]["right"].__setitem__(0, "2"), r"nodes.right\[0\] is '2'"),
        (lambda d: d.update(n_features=1e300), r"n_features is 1e\+300"),
        (lambda d: d.update(feature_names=["only one"]), "feature_names must be a list of 2 strings"),
        (lambda d: d["nodes"].pop("center"), "nodes must hold the lists"),
    ],
)
def test_bad_tree_files_are_rejected(mutate, message):
    doc = small_tree().to_dict()
    mutate(doc)
    with pytest.raises(TreeFormatError, match=message) as caught:
        ThresholdTree.from_json(json.dumps(doc))
    assert "\n" not in str(caught.value)


def test_whole_floats_in_index_fields_are_accepted():
    doc = small_tree().to_dict()
    doc["nodes"]["feature"] = [float(v) for v in doc["nodes"]["feature"]]  # 1.0 from another JSON writer
    assert ThresholdTree.from_dict(doc) == small_tree()


def test_numpy_and_dask_predictions_agree():
    tree = small_tree()
    X = np.random.default_rng(2).normal(3, 2, size=(10_000, 2))
    Xd = da.from_array(X, chunks=(1_000, 1))  # column-chunked on purpose: predict must rechunk
    pred = tree.predict(Xd)
    assert isinstance(pred, da.Array)
    assert (pred.compute() == tree.predict(X)).all()
    assert (tree.apply(Xd).compute() == tree.apply(X)).all()


def test_wrong_width_is_a_clear_error():
    with pytest.raises(ValueError, match="built on 2 features"):
        small_tree().predict(np.zeros((3, 5)))


def test_prune_keeps_the_expanded_splits_and_makes_the_rest_leaves():
    tree = small_tree()  # nodes 0..6 in depth-first order; 0, 2 and 4 are internal
    tree.meta["algorithm"] = "test"
    node_values = [1, 0, 2, 1, 0, 2, 1]  # per node of `tree`, internal nodes too
    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), feature=1, threshold=1.3)
    b.make_leaf(left, 0)
    rl, rr = b.split(right, feature=0, threshold=5.0)
    b.make_leaf(rl, 1)
    b.make_leaf(rr, 0)  # node 4 (the interval cut) is not expanded: a leaf of node_values[4]
    expected = b.build(feature_names=["sepal_length", "petal_width"], n_clusters=3, meta={"algorithm": "test"})
    assert tree.prune([0, 2], node_values) == expected
    assert tree.prune({0, 2, 4}, node_values) == tree  # every split kept: the interval cut too
    # The root not expanded: one leaf of node_values[0], whatever else is listed.
    one_leaf = tree.prune(np.array([4, 2]), [2, 0, 0, 0, 0, 0, 0])
    assert one_leaf == ThresholdTree([0], [-1], [np.nan], [-1], [-1], [2], n_features=2, n_clusters=3,
                                     feature_names=["sepal_length", "petal_width"], meta={"algorithm": "test"})


def test_prune_numbers_nodes_depth_first_and_reads_values_by_old_id():
    # Grown breadth first: 0 -> (1, 2); 2 -> (3, 4); then 1 -> (5, 6).
    b = TreeBuilder(n_features=1)
    one, two = b.split(b.add_node(), 0, 0.0)
    three, four = b.split(two, 0, 5.0)
    five, six = b.split(one, 0, -5.0)
    for node, cluster in ((three, 2), (four, 3), (five, 0), (six, 1)):
        b.make_leaf(node, cluster)
    grown = b.build()
    values = np.array([-1, -1, -1, 2, 3, 0, 1])
    # Depth first, left child first: old 0, 1, 5, 6, 2, 3, 4.
    d = TreeBuilder(n_features=1)
    left, right = d.split(d.add_node(), 0, 0.0)
    ll, lr = d.split(left, 0, -5.0)
    rl, rr = d.split(right, 0, 5.0)
    for node, cluster in ((ll, 0), (lr, 1), (rl, 2), (rr, 3)):
        d.make_leaf(node, cluster)
    assert grown.prune([0, 1, 2], values) == d.build()
    X = np.linspace(-10, 10, 41)[:, None]
    assert np.array_equal(grown.prune([0, 1, 2], values).predict(X), grown.predict(X))
    # Only node 2 expanded under the root: node 1 becomes a leaf of values[1] (here set to 1).
    half = grown.prune([0, 2], np.array([-1, 1, -1, 2, 3, 0, 1]))
    assert half.n_leaves == 3 and half.predict(np.array([[-7.0], [3.0], [7.0]])).tolist() == [1, 2, 3]
