"""Issue 28 on the tree: category-set cuts and learned missing sides, routed, written in words, kept by
tree.json (schema 2) and by prune; a tree.json of schema 1 written before the issue still loads."""
from __future__ import annotations

import json
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

from exclust.tree import (
    CATEGORY_SET,
    MISSING_LEFT,
    MISSING_NONE,
    MISSING_RIGHT,
    ONE_SIDED,
    UNSEEN_CATEGORY,
    ThresholdTree,
    TreeBuilder,
    TreeFormatError,
)

FIXTURES = Path(__file__).parent / "fixtures"
COUNTRIES = ["at", "be", "ch", "de", "es", "fr", "it", "nl"]


def customer_tree() -> ThresholdTree:
    """country in {at, de, fr} (missing -> right), then age <= 41 (missing -> left) on the left, and on the right
    premium in {True} (missing: none) then an interval on age (missing -> right)."""
    b = TreeBuilder(n_features=3)
    root = b.add_node()
    left, right = b.split_categories(root, feature=1, left_codes=[5, 0, 3], missing_side=MISSING_RIGHT)
    young, old = b.split(left, feature=0, threshold=41.0, missing_side=MISSING_LEFT)
    b.make_leaf(young, 0)
    b.make_leaf(old, 1)
    premium, basic = b.split_categories(right, feature=2, left_codes=[1], missing_side=MISSING_NONE)
    b.make_leaf(premium, 2)
    inside, outside = b.split_interval(basic, feature=0, center=30.0, half_width=10.0, missing_side=MISSING_RIGHT)
    b.make_leaf(inside, 3)
    b.make_leaf(outside, 1)
    return b.build(feature_names=["age", "country", "premium"], categories={1: COUNTRIES, 2: [False, True]})


def route_by_hand(tree: ThresholdTree, x: np.ndarray) -> int:
    """The leaf of one row, walked in plain Python from the contract (issue 28's spec), -1 when not routed."""
    node = 0
    while tree.kind[node] != 0:
        v, side = x[tree.feature[node]], tree.missing_side[node]
        if np.isinf(x).any():
            return -1
        missing = np.isnan(v) or (tree.kind[node] == CATEGORY_SET and v == UNSEEN_CATEGORY)
        if missing:
            if side == MISSING_NONE:
                return -1
            go_left = side == MISSING_LEFT
        elif tree.kind[node] == CATEGORY_SET:
            go_left = int(v) in tree.left_categories[node]
        elif tree.kind[node] == ONE_SIDED:
            go_left = v <= tree.threshold[node]
        else:
            go_left = abs(v - tree.center[node]) <= tree.threshold[node]
        node = int(tree.left[node] if go_left else tree.right[node])
    return node


def random_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    X = np.column_stack([rng.uniform(10, 70, n), rng.integers(0, len(COUNTRIES), n), rng.integers(0, 2, n)])
    X = X.astype(np.float64)
    X[rng.random((n, 3)) < 0.15] = np.nan
    X[rng.random(n) < 0.1, 1] = UNSEEN_CATEGORY
    X[rng.random(n) < 0.03, rng.integers(0, 3)] = np.inf
    return X


def test_routing_of_missing_values_unseen_categories_and_sets_matches_a_plain_walk(rng):
    tree = customer_tree()
    X = random_rows(rng, 3000)
    expected = np.array([route_by_hand(tree, x) for x in X])
    leaves = tree.apply(X)
    np.testing.assert_array_equal(leaves, expected)
    clusters = tree.predict(X)
    np.testing.assert_array_equal(clusters, np.where(expected >= 0, tree.value[np.maximum(expected, 0)], -1))
    # every outcome happened: NaN and unseen codes routed, some rows unroutable, every leaf reached
    assert set(leaves.tolist()) == set(tree.leaves.tolist()) | {-1}
    nan_rows = np.isnan(X).any(axis=1) & ~np.isinf(X).any(axis=1)
    assert (leaves[nan_rows] >= 0).sum() > 100
    # the same on a dask array, chunked unevenly
    lazy = tree.predict(da.from_array(X, chunks=(777, 3)))
    np.testing.assert_array_equal(lazy.compute(), clusters)


def test_a_tree_without_missing_sides_keeps_giving_minus_one_to_nan_rows():
    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    tree = b.build()
    X = np.array([[-1.0, np.nan], [np.nan, 0.0], [1.0, 0.0], [np.inf, 0.0], [-np.inf, np.nan]])
    assert not tree.routes_missing
    assert tree.predict(X).tolist() == [-1, -1, 1, -1, -1]  # any NaN: -1, as before issue 28
    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), feature=0, threshold=0.0, missing_side=MISSING_RIGHT)
    b.make_leaf(left, 0)
    low, high = b.split(right, feature=1, threshold=0.0)  # learned no side
    b.make_leaf(low, 1)
    b.make_leaf(high, 2)
    mixed = b.build()
    assert mixed.routes_missing
    X = np.array([[-1.0, np.nan], [np.nan, 1.0], [np.nan, np.nan], [1.0, np.inf]])
    assert mixed.predict(X).tolist() == [0, 2, -1, -1]  # a NaN the path never reads, or at a cut with a side


def test_codes_outside_the_set_go_right_and_the_bitset_spans_many_words():
    names = [f"v{i:03d}" for i in range(200)]
    b = TreeBuilder(n_features=1)
    left, right = b.split_categories(b.add_node(), 0, [3, 64, 130, 199], MISSING_LEFT)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    tree = b.build(categories={0: names})
    assert tree.category_bits.shape == (3, 4)
    codes = np.arange(200, dtype=np.float64)
    expect = np.where(np.isin(codes, [3, 64, 130, 199]), 0, 1)
    np.testing.assert_array_equal(tree.predict(codes[:, None]), expect)
    odd = np.array([[250.0], [3.5], [-2.0], [UNSEEN_CATEGORY], [np.nan]])
    assert tree.predict(odd).tolist() == [1, 1, 1, 0, 0]  # not a code of the set: right; unseen, NaN: missing side


def test_rules_and_node_tests_in_words():
    tree = customer_tree()
    assert tree.rules() == {
        0: "age <= 41 (or missing) and country in {at, de, fr}",
        1: "(age > 41 and country in {at, de, fr}) or "
           "((age < 20 or age > 40) (or missing) and country not in {at, de, fr} (or missing) and "
           "premium not in {True})",
        2: "country not in {at, de, fr} (or missing) and premium in {True}",
        3: "20 <= age <= 40 and country not in {at, de, fr} (or missing) and premium not in {True}",
    }
    assert tree.describe_node(0) == "country in {at, de, fr} (missing: right)"
    assert tree.describe_node(1) == "age <= 41 (missing: left)"
    assert tree.describe_node(2) == "premium in {True}"
    long_set = [f"country{i}" for i in range(20)]
    b = TreeBuilder(n_features=1)
    left, right = b.split_categories(b.add_node(), 0, range(12), MISSING_RIGHT)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    text = b.build(feature_names=["c"], categories={0: long_set}).rules_text()
    assert text.splitlines()[0] == "cluster 0: c in {" + ", ".join(long_set[:12]) + "}"  # rules show every value
    assert text.splitlines()[1] == "cluster 1: c not in {" + ", ".join(long_set[:12]) + "} (or missing)"


def test_json_round_trip_keeps_sets_sides_and_vocabularies_and_prune_keeps_them(tmp_path):
    tree = customer_tree()
    path = tmp_path / "tree.json"
    tree.to_json(path)
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 2
    assert doc["categories"] == {"country": COUNTRIES, "premium": [False, True]}
    assert doc["nodes"]["missing"][:3] == ["right", "left", None] and doc["nodes"]["left_categories"][0] == [0, 3, 5]
    loaded = ThresholdTree.from_file_bytes(path.read_bytes(), str(path))
    assert loaded == tree and loaded.categories == tree.categories
    np.testing.assert_array_equal(loaded.missing_side, tree.missing_side)
    assert loaded.left_categories == tree.left_categories
    X = random_rows(np.random.default_rng(3), 500)
    np.testing.assert_array_equal(loaded.predict(X), tree.predict(X))
    moved = customer_tree()
    moved.missing_side[1] = MISSING_RIGHT
    assert moved != tree  # equality compares the new fields too
    pruned = tree.prune([0, 1, 2], np.arange(tree.node_count) % tree.n_clusters)
    assert pruned.left_categories[0] == (0, 3, 5) and pruned.missing_side[:2].tolist() == [MISSING_RIGHT, MISSING_LEFT]
    assert pruned.categories == tree.categories
    assert pruned == ThresholdTree.from_json(pruned.to_json())


def test_a_schema_1_file_written_before_issue_28_still_loads():
    path = FIXTURES / "tree_schema_v1.json"
    assert json.loads(path.read_text())["schema_version"] == 1
    tree = ThresholdTree.from_file_bytes(path.read_bytes(), str(path))
    # the rules main printed when it wrote the file
    assert tree.rules_text() == (
        "cluster 0: (age <= 41 and -0.5 <= income <= 1.5) or (age > 41 and score > -1.5)\n"
        "cluster 1: age <= 41 and (income < -0.5 or income > 1.5)\n"
        "cluster 2: age > 41 and score <= -1.5\n")
    assert (tree.missing_side == MISSING_NONE).all() and tree.categories == {}
    assert tree.meta["leaf_shares"] == {"2": 0.25, "3": 0.25, "5": 0.3, "6": 0.2}
    X = np.array([[30.0, 0.0, 0.0], [50.0, 0.0, -2.0], [np.nan, 0.0, 0.0], [50.0, np.nan, 0.0]])
    assert tree.predict(X).tolist() == [0, 2, -1, -1]  # any missing value: -1, as before
    assert json.loads(tree.to_json())["schema_version"] == 2  # written again in the new version


@pytest.mark.parametrize("change, fault", [
    (lambda t: t.update(categories={1: ["a"]}), "that feature is numeric"),
    (lambda t: t.update(categories={0: ["a", "b"]}, left_categories=[(0, 2), (), ()]), "are not distinct codes"),
    (lambda t: t.update(missing_side=[5, -1, -1]), "unknown missing side"),
    (lambda t: t.update(categories={0: ["a", "a"]}), "must be distinct values"),
    (lambda t: t.update(categories={0: ["a"]}, left_categories=[(0,), (0,), ()]), "lists left categories"),
])
def test_the_constructor_refuses_broken_sets_and_sides(change, fault):
    args = dict(missing_side=None, left_categories=[(0,), (), ()], categories={0: ["a", "b"]})
    change(args)
    with pytest.raises(TreeFormatError, match=fault):
        ThresholdTree([CATEGORY_SET, 0, 0], [0, -1, -1], [np.nan] * 3, [1, -1, -1], [2, -1, -1], [-1, 0, 1],
                      n_features=2, **args)


def test_drawings_show_sets_shortened_and_missing_sides_and_the_scatter_draws_no_line_for_a_set(rng):
    from exclust.report.plots import scatter_svg
    from exclust.tree.drawing import draw_tree

    tree = customer_tree()
    for orientation in ("top-down", "left-right", "outline"):
        svg = draw_tree(tree, orientation=orientation).svg
        assert "country in {at, de, fr}" in svg or "in {at, de, fr}" in svg, orientation
        assert 'class="node internal category-set"' in svg
        assert "no, or missing" in svg and "yes, or missing" in svg  # node 0 sends missing right, node 1 left
    many = [f"v{i}" for i in range(20)]
    b = TreeBuilder(n_features=2)
    left, right = b.split_categories(b.add_node(), 1, range(10), MISSING_LEFT)
    low, high = b.split(right, 0, 0.5, missing_side=MISSING_RIGHT)
    b.make_leaf(left, 0)
    b.make_leaf(low, 1)
    b.make_leaf(high, 2)
    wide = b.build(feature_names=["x", "kind"], categories={1: many})
    svg = draw_tree(wide, orientation="top-down").svg
    assert "in {v0, v1, v2, v3, v4, v5, … (+4)}" in svg
    assert "kind in {" + ", ".join(many[:10]) + "} (missing: left)" in svg  # the node's title: every value
    X = np.column_stack([rng.normal(size=300), rng.integers(0, 20, 300).astype(float)])
    X[:20, 0] = np.nan
    picture = scatter_svg(X, tree=wide, features=(0, 1))
    assert 'id="cut-node-2"' in picture and 'id="cut-node-0"' not in picture  # the numeric cut only
    assert ">v19<" not in picture  # 20 values: the axis shows codes
    ages = random_rows(rng, 400)
    picture = scatter_svg(ages, tree=tree, features=(0, 1))
    assert ">fr<" in picture and ">nl<" in picture  # 8 values: the axis names them


def test_a_tree_with_set_cuts_is_scored_by_its_own_routing(rng):
    """The scoring kernels route through set cuts as predict does: the tree's k-means and k-medians costs equal
    a numpy recomputation over predict's clusters."""
    import exclust

    b = TreeBuilder(n_features=2)
    left, right = b.split_categories(b.add_node(), 1, [0, 2], MISSING_RIGHT)
    low, high = b.split(right, 0, 0.3, missing_side=MISSING_LEFT)
    for leaf, cluster in ((left, 0), (low, 1), (high, 2)):
        b.make_leaf(leaf, cluster)
    tree = b.build(feature_names=["x", "kind"], categories={1: ["a", "b", "c", "d"]})
    X = np.column_stack([rng.normal(size=600), rng.integers(0, 4, 600)]).astype(np.float64)
    labels = tree.predict(X)
    assert set(labels.tolist()) == {0, 1, 2}
    scores = exclust.score(tree, X, centers=np.array([[0.0, 1.0], [-1.0, 2.0], [1.0, 2.0]]))
    kmeans = sum(((X[labels == c] - X[labels == c].mean(axis=0)) ** 2).sum() for c in range(3))
    kmedians = sum(np.abs(X[labels == c] - np.median(X[labels == c], axis=0)).sum() for c in range(3))
    assert scores["kmeans_cost_tree"] == pytest.approx(kmeans, rel=1e-9)
    assert scores["kmedians_cost_tree"] == pytest.approx(kmedians, rel=1e-6)


def test_label_rows_routing_nan_leaves_only_infinite_rows_unlabelled():
    from exclust.dataplane import parts

    X = np.array([[1.0, np.nan], [np.nan, np.nan], [-1.0, np.inf], [1e308, 1e308], [-np.inf, 0.0], [-2.0, 0.0]])
    seen_nan = []

    def first_positive(block):
        seen_nan.append(int(np.isnan(block).any(axis=1).sum()))
        return (block[:, 0] > 0).astype(np.int64)

    assert parts.label_rows(first_positive, X, route_nan=True).tolist() == [1, 0, -1, 1, -1, 0]
    assert seen_nan == [2]  # the NaN rows reached the labeller; the infinite ones did not
    assert parts.label_rows(first_positive, X).tolist() == [-1, -1, -1, 1, -1, 0]  # the reference policy
