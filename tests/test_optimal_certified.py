"""OptimalTree (issue 30): the certified k-leaf tree, its lower bounds, and the same result on Dask."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from exclust.algorithms.search._optimal_bounds import weighted_kmeans_1d
from exclust.algorithms.search.optimal import OptimalTree
from exclust.algorithms.search.optimal_bnb import BranchAndBound
from exclust.algorithms.search.optimal_cells import block_cells
from exclust.algorithms.search.optimal_tree import leaf_cost, optimal_tree


def _instances(count, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(7, 16))
        d = int(rng.integers(1, 3))
        k = int(rng.integers(2, 5))
        yield np.round(rng.normal(size=(n, d)) * 3, 1), k


def brute_force(X, k):
    """Least cost of a tree of at most k leaves by plain recursion over every cut (no memo, no bound)."""
    def best(rows, m):
        value = leaf_cost(X[rows])
        if m == 1:
            return value
        for f in range(X.shape[1]):
            for t in np.unique(X[rows, f])[:-1]:
                left, right = rows[X[rows, f] <= t], rows[X[rows, f] > t]
                for j in range(1, m):
                    value = min(value, best(left, j) + best(right, m - j))
        return value

    return best(np.arange(X.shape[0]), k)


def _cost(tree, X):
    leaves = tree.apply(X)
    return sum(leaf_cost(X[leaves == leaf]) for leaf in np.unique(leaves))


@pytest.mark.parametrize("X, k", list(_instances(8)))
def test_equals_the_midpoint_oracle_and_brute_force(X, k):
    model = OptimalTree(k, max_bins=256).fit(X)
    oracle_tree, oracle_cost = optimal_tree(X, k)
    assert model.cost_ == pytest.approx(oracle_cost, rel=1e-9, abs=1e-9)
    assert model.cost_ == pytest.approx(brute_force(X, k), rel=1e-9, abs=1e-9)
    assert _cost(model.tree_, X) == pytest.approx(model.cost_, rel=1e-9, abs=1e-9)  # the tree costs what it says
    assert model.proven_optimal_ and model.lower_bound_ == model.cost_ and model.gap_ == 0.0
    assert model.tree_.n_leaves == k


def test_weighted_one_dimensional_kmeans_is_exact():
    rng = np.random.default_rng(1)
    for _ in range(20):
        n = int(rng.integers(1, 8))
        values, weights = rng.normal(size=n), rng.integers(1, 4, size=n).astype(float)
        for m in range(1, 4):
            best = np.inf
            for labels in itertools.product(range(m), repeat=n):
                labels = np.asarray(labels)
                best = min(best, sum(
                    float((weights[labels == g] * (values[labels == g]
                           - np.average(values[labels == g], weights=weights[labels == g])) ** 2).sum())
                    for g in np.unique(labels)))
            assert weighted_kmeans_1d(values, weights, m) == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("X, k", list(_instances(6, seed=3)))
def test_each_bound_is_at_most_the_optimum(X, k):
    optimum = brute_force(X, k)
    model = OptimalTree(k, max_bins=256).fit(X)
    assert model.bounds_["coordinate"] <= optimum + 1e-9  # Bound 3
    assert model.bounds_["scatter"] <= optimum + 1e-9  # Bound 5 at the root
    # Bound 2 when stopped at once: a search with no time left still returns a valid bound.
    cells = block_cells(X, _mapper(X), X.mean(axis=0))
    search = BranchAndBound(cells.codes, cells.stats, _mapper(X).max_n_bins, deadline=-np.inf)
    lower, cost, _ = search.solve(np.arange(cells.n_cells), k)
    assert lower <= optimum + 1e-9 <= cost + 2e-9
    # Bound 1 (monotonicity): a sub-box never needs more than the box.
    everything = np.arange(cells.n_cells)
    exact = BranchAndBound(cells.codes, cells.stats, _mapper(X).max_n_bins)
    whole = exact.solve(everything, k)[1]
    part = exact.solve(everything[cells.codes[:, 0] <= np.median(cells.codes[:, 0])], k)[1]
    assert part <= whole + 1e-9


def _mapper(X):
    from exclust.algorithms.histogram.binning import edges_from_sample

    return edges_from_sample(X, 256)


def _root_and_a_sub_box(X, feature):
    """The cells of ``X``, its codes, and two node selections: (cells, rows) of the root and of the
    box at or below ``feature``'s median cell code."""
    from exclust.algorithms.search._optimal_bounds import split_cells

    mapper = _mapper(X)
    cells = block_cells(X, mapper, X.mean(axis=0))
    codes = mapper.transform(X)
    split = int(np.median(cells.codes[:, feature]))
    box, _ = split_cells(cells.codes, np.arange(cells.n_cells), feature, split)
    nodes = ((np.arange(cells.n_cells), np.ones(X.shape[0], bool)), (box, codes[:, feature] <= split))
    return mapper, cells, codes, nodes


def test_bound_is_below_every_greedy_tree_and_a_stopped_search_is_honest():
    from exclust.algorithms.cart import CART
    from exclust.algorithms.histogram.exshallow import ExShallow
    from exclust.algorithms.histogram.imm import IMM
    from exclust.algorithms.search.tree_search import TreeSearch

    rng = np.random.default_rng(5)
    centers = np.array([[0.0, 0.0], [4.0, 1.0], [1.0, 5.0], [6.0, 6.0]])
    X = np.concatenate([c + rng.normal(size=(60, 2)) for c in centers])
    labels = np.repeat(np.arange(4), 60)
    k = 4
    # 240 distinct values per feature <= max_bins: every cut is a candidate, so the bound holds for any tree.
    full = OptimalTree(k, max_bins=256).fit(X, centers)
    stopped = OptimalTree(k, max_seconds=0.0, max_bins=256).fit(X, centers)
    trees = [IMM(k).fit(X, centers).tree_, ExShallow(k).fit(X, centers).tree_,
             TreeSearch(k, max_bins=64).fit(X, centers).tree_, CART(max_leaf_nodes=k).fit(X, labels).tree_]
    for model in (full, stopped):
        for tree in trees:
            assert model.lower_bound_ <= _cost(tree, X) + 1e-9
        assert model.lower_bound_ <= full.cost_ + 1e-9
        assert model.proven_optimal_ == (model.lower_bound_ == model.cost_)
    assert full.proven_optimal_
    assert stopped.timed_out_ and stopped.cost_ >= full.cost_ - 1e-9
    assert sorted(np.unique(full.predict(X))) == [0, 1, 2, 3]  # leaves name the centers one-to-one


def test_the_same_node_budget_gives_the_same_tree_and_bound():
    """The budget counts branch-and-bound nodes, not seconds: a search stopped by it is repeatable."""
    rng = np.random.default_rng(11)
    X = np.concatenate([c + rng.normal(size=(40, 3)) for c in rng.uniform(-5, 5, size=(6, 3))])
    fits = [OptimalTree(5, max_nodes=12, max_bins=64).fit(X) for _ in range(2)]
    assert fits[0].timed_out_ and not fits[0].proven_optimal_  # the budget, not the proof, ended it
    assert fits[0].nodes_searched_ >= 12
    assert fits[0].tree_ == fits[1].tree_
    assert (fits[0].cost_, fits[0].lower_bound_, fits[0].bounds_, fits[0].nodes_searched_, fits[0].sweeps_) == (
        fits[1].cost_, fits[1].lower_bound_, fits[1].bounds_, fits[1].nodes_searched_, fits[1].sweeps_)
    more = OptimalTree(5, max_nodes=400, max_bins=64).fit(X)
    assert fits[0].lower_bound_ <= more.cost_ + 1e-9  # a stopped search's bound stays valid


def test_numpy_and_dask_parquet_give_the_same_tree_and_bound(dask_client, tmp_path):
    import dask.dataframe as dd
    import pandas as pd

    from exclust.sources.dataset import load_dataset

    rng = np.random.default_rng(2)
    X = np.concatenate([c + rng.normal(size=(50, 3)) for c in ([0, 0, 0], [5, 0, 1], [0, 5, 2])])
    pd.DataFrame(X, columns=["a", "b", "c"]).to_parquet(tmp_path / "rows.parquet")
    dd.read_parquet(tmp_path / "rows.parquet").repartition(npartitions=3).to_parquet(tmp_path / "parts")
    local = OptimalTree(3, max_bins=32).fit(pd.DataFrame(X, columns=["a", "b", "c"]))
    data = load_dataset(str(tmp_path / "parts"), features=["a", "b", "c"], piece_rows=40)
    assert len(data.X.chunks[0]) > 1
    remote = OptimalTree(3, max_bins=32).fit(data)
    assert remote.n_passes_ == 2 and local.n_passes_ == 0
    assert remote.cost_ == pytest.approx(local.cost_, rel=1e-9)
    assert remote.lower_bound_ == pytest.approx(local.lower_bound_, rel=1e-9)
    assert remote.tree_.rules_text() == local.tree_.rules_text()


def test_the_standing_table_gives_the_proven_bound_and_each_trees_gap():
    from exclust.datasets.synthetic import make_gmm_dataset
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain

    X, _, _ = make_gmm_dataset(80, n_components=3, n_features=2, random_state=1, noise_scale=2.0)
    result = explain(ExplainConfig(input=X, k=3, algorithm="imm", reference="kmeans"))
    standing = result.metrics["standing"]
    bound, optimum = standing["bound"], optimal_tree(X, 3)[1]
    assert bound["any_tree"] and bound["proven_optimal"]  # 80 distinct values per feature: every cut searched
    assert bound["cost"] == pytest.approx(optimum, rel=1e-9)
    assert bound["price"] == pytest.approx(optimum / result.metrics["kmeans_cost_reference"], rel=1e-9)
    rows = {r["algorithm"]: r for r in standing["rows"]}
    assert rows["optimal"]["proven_gap"] == pytest.approx(0.0, abs=1e-9)
    for r in standing["rows"]:
        assert r["proven_gap"] == pytest.approx(max(r["cost"] / bound["cost"] - 1.0, 0.0), rel=1e-9, abs=1e-12)
        assert r["proven_gap"] >= 0.0
    html = result.report_html
    assert "proven gap" in html and "lower bound (proven)" in html and "Proven bound: no any k-leaf" not in html
    assert "of the best possible k-leaf tree" in html or "optimal: no k-leaf tree costs less" in html


def test_a_run_on_a_sample_says_why_it_has_no_bound():
    from exclust.jobs.explain.standing import _bound

    class Config:
        objective, k = "kmeans", 3

    assert _bound(None, Config(), ["a"])[2].startswith("No proven bound: the run's sample")
    Config.objective = "kmedians"
    assert "k-means cost only" in _bound(np.zeros((5, 1)), Config(), ["a"])[2]


def _random_cells(rng, n_cells, d):
    """Cells of a few rows each: (stats rows (count, squared norm, sums), the rows of each cell)."""
    stats, members = [], []
    centers = rng.normal(size=(n_cells, d)) * rng.uniform(0.5, 3.0, d)
    for g in range(n_cells):
        rows = centers[g] + rng.normal(size=(int(rng.integers(1, 4)), d)) * rng.uniform(0.0, 1.0)
        stats.append([rows.shape[0], float((rows * rows).sum()), *rows.sum(axis=0)])
        members.append(rows)
    return np.asarray(stats), members


@pytest.mark.parametrize("directions", [16, 1])
def test_scatter_bounds_are_at_most_every_partition(directions, monkeypatch):
    """Bounds 4 and 5 hold for every partition of the cells into at most m parts (trees or not),
    also with the 1-D programme along fewer eigenvectors than features (wide data)."""
    from exclust.algorithms.search import _scatter_bounds
    from exclust.algorithms.search._scatter_bounds import _spectral, box_bound

    monkeypatch.setattr(_scatter_bounds, "MAX_DIRECTIONS", directions)

    rng = np.random.default_rng(7)
    for _ in range(60):
        n_cells, d, m = int(rng.integers(2, 8)), int(rng.integers(1, 4)), int(rng.integers(2, 4))
        stats, members = _random_cells(rng, n_cells, d)
        least = min(sum(leaf_cost(np.concatenate([members[g] for g in np.flatnonzero(np.asarray(labels) == p)]))
                        for p in set(labels)) for labels in itertools.product(range(m), repeat=n_cells))
        five = box_bound(stats, np.arange(n_cells), m)
        outer = sum(np.outer(row[2:], row[2:]) / row[0] for row in stats)
        four = _spectral(stats.sum(axis=0)[None], outer[None], m)[0, m]
        assert four <= five + 1e-9 <= least + 2e-9
        assert box_bound(stats, np.arange(n_cells), m, cutoff=-1.0) <= five + 1e-9  # Bound 4 alone
        # Given a cutoff the programmes may stop once Bound 5 cannot reach it: never above Bound 5,
        # and it reaches every cutoff that Bound 5 reaches.
        for cutoff in (four, 0.5 * (four + five), five, 0.5 * (five + least), least):
            early = box_bound(stats, np.arange(n_cells), m, cutoff=cutoff)
            assert four - 1e-9 <= early <= five + 1e-9
            assert early >= cutoff or five < cutoff


def test_every_cut_positions_side_bound_is_at_most_that_sides_optimum():
    """Bound 6's per-position spectral bounds never exceed the side's best tree (brute force)."""
    from exclust.algorithms.search._scatter_bounds import position_spectral_bounds

    rng = np.random.default_rng(9)
    for _ in range(6):
        X = np.round(rng.normal(size=(int(rng.integers(8, 13)), 2)) * 3, 1)
        mapper = _mapper(X)
        cells = block_cells(X, mapper, X.mean(axis=0))
        everything = np.arange(cells.n_cells)
        codes = mapper.transform(X)
        for f in range(X.shape[1]):
            occupied = np.unique(cells.codes[:, f])[:-1]
            left, right = position_spectral_bounds(cells.codes, cells.stats, everything, f, occupied,
                                                   mapper.max_n_bins, 3)
            for p, b in enumerate(occupied):
                for side, rows in ((left, codes[:, f] <= b), (right, codes[:, f] > b)):
                    for m in (1, 2, 3):
                        assert side[p, m] <= brute_force(X[rows], m) + 1e-9


def test_every_cut_positions_exact_two_leaf_sides_from_the_nodes_histograms():
    """``best_two_by_position`` given the node's histograms (made once per node): every prefix's and
    suffix's best cost of at most two leaves, against brute force, for the root and a sub-box."""
    from exclust.algorithms.search._optimal_bounds import best_two_by_position, node_histograms

    rng = np.random.default_rng(12)
    for _ in range(5):
        X = np.round(rng.normal(size=(int(rng.integers(9, 15)), 3)) * 3, 1)
        mapper, cells, codes, nodes = _root_and_a_sub_box(X, 0)
        for chosen, rows_in in nodes:
            hist = node_histograms(cells.codes, cells.stats, chosen, mapper.max_n_bins)
            for f in range(X.shape[1]):
                left, _, right, _ = best_two_by_position(cells.codes, cells.stats, chosen, f, hist)
                occupied = np.unique(cells.codes[chosen, f])
                for b in occupied:
                    assert left[b] == pytest.approx(brute_force(X[rows_in & (codes[:, f] <= b)], 2), abs=1e-7)
                    if b < occupied[-1]:
                        assert right[b] == pytest.approx(brute_force(X[rows_in & (codes[:, f] > b)], 2), abs=1e-7)


@pytest.mark.parametrize("budget", [1, 2, 5, 20])
def test_a_search_stopped_by_its_node_budget_keeps_a_valid_bound_at_four_and_five_leaves(budget):
    rng = np.random.default_rng(13)
    for _ in range(3):
        X = np.round(rng.normal(size=(int(rng.integers(9, 12)), 2)) * 3, 1)
        for k in (4, 5):
            optimum = brute_force(X, k)
            model = OptimalTree(k, max_nodes=budget, max_bins=256).fit(X)
            assert model.lower_bound_ <= optimum + 1e-9 <= model.cost_ + 2e-9
            assert model.proven_optimal_ == (model.lower_bound_ == model.cost_)


@pytest.mark.parametrize("neighbours", [256, 2])
def test_neighbour_bound_is_at_most_every_partition(neighbours, monkeypatch):
    """Bound 7 holds for every partition of the cells into at most m parts (trees or not), also
    with each cell keeping fewer nearest cells than the box holds (farther rows at the last distance)."""
    from exclust.algorithms.search import _neighbour_bound
    from exclust.algorithms.search._neighbour_bound import neighbour_bound

    monkeypatch.setattr(_neighbour_bound, "NEIGHBOURS", neighbours)
    rng = np.random.default_rng(17)
    above_zero = 0
    for _ in range(60):
        n_cells, d, m = int(rng.integers(2, 8)), int(rng.integers(1, 4)), int(rng.integers(2, 5))
        stats, members = _random_cells(rng, n_cells, d)
        least = min(sum(leaf_cost(np.concatenate([members[g] for g in np.flatnonzero(np.asarray(labels) == p)]))
                        for p in set(labels)) for labels in itertools.product(range(m), repeat=n_cells))
        within = sum(leaf_cost(rows) for rows in members)
        bound = neighbour_bound(stats, np.arange(n_cells), m)
        assert bound <= least + 1e-9
        above_zero += bound > within + 1e-9  # it adds to the within-cell scatter, not only equals it
    assert above_zero >= 20


def test_neighbour_bound_beats_the_others_on_few_features_and_keeps_every_search_honest():
    """On two features and many leaves Bound 7 beats Bounds 3-5 at the root and is the fit's
    bound; inside the search (``use_neighbour``) a search stopped by its budget keeps a bound at
    most the brute-force optimum, and a complete one still finds it."""
    rng = np.random.default_rng(21)
    centres = rng.uniform(-20, 20, size=(5, 2))
    X = np.round(np.concatenate([c + rng.normal(size=(2, 2)) for c in centres]), 1)
    optimum = brute_force(X, 5)
    model = OptimalTree(5, max_nodes=1, max_bins=256).fit(X)
    b = model.bounds_
    assert b["neighbour"] > max(b["scatter"], b["coordinate"])
    assert b["neighbour"] <= model.lower_bound_ <= optimum + 1e-9 <= model.cost_ + 2e-9
    assert model.proven_optimal_ == (model.lower_bound_ == model.cost_)
    cells = block_cells(X, _mapper(X), X.mean(axis=0))
    for budget in (1, 3, np.inf):
        search = BranchAndBound(cells.codes, cells.stats, _mapper(X).max_n_bins, max_nodes=budget)
        search.use_neighbour = True
        lower, cost, _ = search.solve(np.arange(cells.n_cells), 5)
        assert search.neighbour_bounds >= 1
        assert lower <= optimum + 1e-9 <= cost + 2e-9
    assert cost == pytest.approx(optimum, rel=1e-9)


def test_the_center_guided_first_tree_is_a_tree_of_one_center_a_leaf_and_never_below_the_best():
    """The first tree (optimal_incumbent) cuts until each leaf holds one center, costs what the
    search says, and the search's tree is never above it nor above the greedy tree."""
    from exclust.algorithms.search.optimal_incumbent import cell_centers, center_tree, tree_cells
    from exclust.algorithms.search.optimal_node import leaf_costs
    from exclust.algorithms.search.optimal_tree import count_leaves

    rng = np.random.default_rng(5)
    centres = rng.uniform(-30, 30, size=(8, 2))
    X = np.round(np.concatenate([c + rng.normal(size=(6, 2)) for c in centres]), 2)
    mapper = _mapper(X)
    shift = X.mean(axis=0)
    cells = block_cells(X, mapper, shift)
    everything = np.arange(cells.n_cells)
    centers = cell_centers(cells.stats, 8)[0]
    nested = center_tree(cells.codes, cells.stats, everything, centers, mapper.transform(centers + shift))
    assert count_leaves(nested) == 8
    search = BranchAndBound(cells.codes, cells.stats, mapper.max_n_bins)
    leaves = tree_cells(search, nested, everything)
    assert sum(c.size for c in leaves) == cells.n_cells
    first = float(sum(leaf_costs(cells.stats[c].sum(axis=0)) for c in leaves))
    twins = np.concatenate([centres[:7], centres[6:7] + 1e-9])  # two centers in one bin everywhere
    assert count_leaves(center_tree(cells.codes, cells.stats, everything, twins - shift,
                                    mapper.transform(twins))) == 7
    for given in (None, centres):
        model = OptimalTree(8, max_nodes=5, max_bins=256).fit(X, centers=given)
        b = model.bounds_
        assert model.cost_ <= b["incumbent"] + 1e-9 <= b["greedy"] + 2e-9
        assert b["incumbent"] <= first + 1e-9
        assert _cost(model.tree_, X) == pytest.approx(model.cost_, rel=1e-9)
        assert model.lower_bound_ <= model.cost_


@pytest.mark.parametrize("n_segments", [1, 2, 3, 64])
def test_first_cut_bound_is_at_most_every_sides_optimum(n_segments):
    """Bound 8 at every cut position's sides (three and four leaves), the root's cells and a sub-box's,
    against brute force; with every bin its own segment (64) it is the plain one-level recursion."""
    from exclust.algorithms.search._first_cut_bound import (
        box_eigen_sums,
        first_cut_bounds,
        margin_of,
        pair_tables,
        segment_map,
    )
    from exclust.algorithms.search._optimal_bounds import best_two_by_segments, node_histograms
    from exclust.algorithms.search.optimal_node import leaf_costs

    rng = np.random.default_rng(21)
    largest = 0.0
    for trial in range(3):
        X = np.round(rng.normal(size=(int(rng.integers(9, 12)), 2 + trial % 2)) * 3, 1)
        X[: X.shape[0] // 2, 0] += 8.0  # two groups, so that the sides have structure to bound
        mapper, cells, codes, nodes = _root_and_a_sub_box(X, 1)
        for chosen, rows_in in nodes:
            hist = node_histograms(cells.codes, cells.stats, chosen, mapper.max_n_bins)
            seg_of = segment_map(hist, n_segments)
            table = pair_tables(cells.codes, cells.stats, chosen, seg_of, n_segments)
            known: dict = {}  # a node's boxes shared by the two features of each pair
            for f in range(X.shape[1]):
                np.testing.assert_allclose(box_eigen_sums(table, f, 2, known), box_eigen_sums(table, f)[..., :3],
                                           rtol=1e-12, atol=1e-9)
                *_, left_seg, right_seg = best_two_by_segments(cells.codes, cells.stats, chosen, f, hist, seg_of,
                                                               n_segments)
                occupied = np.unique(cells.codes[chosen, f])[:-1]
                prefix = np.cumsum(hist[f], axis=0)[occupied]
                one = (leaf_costs(prefix), leaf_costs(hist[f].sum(axis=0) - prefix))
                left, right = first_cut_bounds(f, occupied, seg_of, box_eigen_sums(table, f), left_seg[occupied],
                                               right_seg[occupied], one, 4, margin_of(cells.stats, chosen))
                for p, b in enumerate(occupied):
                    for side, rows in ((left, rows_in & (codes[:, f] <= b)), (right, rows_in & (codes[:, f] > b))):
                        for m in (3, 4):
                            optimum = brute_force(X[rows], m)
                            assert side[p, m] <= optimum + 1e-9
                            largest = max(largest, side[p, m] / max(optimum, 1e-12))
    # Not vacuous with every bin its own segment: somewhere it is most of the side's optimum (one
    # segment is the node's own box, whose spectral sums leave next to nothing).
    assert largest > 0.5 or n_segments < 64


def test_first_cut_bound_changes_no_optimum_and_proves_four_leaves_in_fewer_nodes():
    """Bound 8 on and off: the same least cost at four and five leaves (brute force), never more nodes."""
    rng = np.random.default_rng(22)
    for _ in range(3):
        X = np.round(rng.normal(size=(int(rng.integers(9, 12)), 2)) * 3, 1)
        for k in (4, 5):
            results = []
            for on in (True, False):
                results.append(OptimalTree(k, max_bins=256, use_first_cut=on).fit(X))
            assert results[0].cost_ == pytest.approx(brute_force(X, k), rel=1e-9, abs=1e-9)
            assert results[0].cost_ == pytest.approx(results[1].cost_, rel=1e-9, abs=1e-9)
            assert results[0].proven_optimal_ and results[1].proven_optimal_
            assert results[0].nodes_searched_ <= results[1].nodes_searched_


def test_a_nodes_pair_tables_are_made_only_when_a_position_is_open_and_change_no_bound():
    """Bound 8's pair tables (one pass over the node's cells) wait for the first feature whose Bound 4
    sums leave a position open; made then, the bounds are those of tables made up front, and a
    search's switch is its own (no process-wide flag)."""
    from exclust.algorithms.search.optimal_node import SearchNode

    rng = np.random.default_rng(23)
    X = np.round(np.concatenate([c + rng.normal(size=(8, 3)) for c in rng.uniform(-9, 9, size=(5, 3))]), 1)
    mapper, cells, _, nodes = _root_and_a_sub_box(X, 0)
    for chosen, _ in nodes:
        closed, lazy, eager = (SearchNode(cells.codes, cells.stats, chosen, mapper.max_n_bins) for _ in range(3))
        for node in (closed, lazy, eager):
            node.prepare_first_cut()
        for f in range(X.shape[1]):
            exact = [(*closed.side_costs(f),)]
            lb, la, rb, ra, segments = closed.two_leaf_sides(f)
            exact += [(lb, rb), (la, ra)]
            assert closed.position_bounds(f, 5, exact, segments, limit=-np.inf) is not None
            assert closed._pairs is None  # nothing open below a limit of -inf: no tables
            eager.first_cut_bounds(f, segments, 4)  # tables made before any position asked
            got, want = lazy.position_bounds(f, 5, exact, segments, np.inf), eager.position_bounds(f, 5, exact,
                                                                                                   segments, np.inf)
            assert lazy._pairs is not None and got.keys() == want.keys()
            for j in got:
                np.testing.assert_array_equal(got[j][0], want[j][0])
                np.testing.assert_array_equal(got[j][1], want[j][1])
    assert not hasattr(BranchAndBound, "use_first_cut")
    assert BranchAndBound(cells.codes, cells.stats, mapper.max_n_bins, use_first_cut=False).use_first_cut is False
    assert OptimalTree(4, use_first_cut=False).get_params()["use_first_cut"] is False
