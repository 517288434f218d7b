"""ExShallow: equal to a brute-force ExShallow, ShallowTree's figures on the fixtures, Dask, errors."""
from __future__ import annotations

import json
import math

import dask.array as da
import numpy as np
import pytest
from conftest import SHARED_FIXTURES, shared_dataset
from sklearn import datasets

from exclust.algorithms.histogram.binning import edges_from_sample
from exclust.algorithms.histogram.exshallow import ExShallow
from exclust.errors import InputError


def distances(X, centers, objective):
    diff = X[:, None, :] - centers[None]
    return np.abs(diff).sum(-1) if objective == "kmedians" else (diff ** 2).sum(-1)


def projected_depth(height, n, k, alpha, beta):
    """The paper's depth projection, written recursively (the kernel keeps a stack)."""
    if k == 1:
        return n * height
    k_left = min(max(math.ceil(k * beta), 1), k - 1)
    if n == 1:
        n_left = 1 if k_left > k - k_left else 0
    else:
        n_left = min(max(math.ceil(n * alpha), 1), n - 1)
    return (projected_depth(height + 1, n_left, k_left, alpha, beta)
            + projected_depth(height + 1, n - n_left, k - k_left, alpha, beta))


def brute_force_shallow(X, centers, depth_factor, objective):
    """ExShallow by enumeration: at every node every feature and every threshold at a data value
    or a center coordinate, scored directly on the node's rows; ties to the lowest feature, then
    the lowest threshold. Returns a nested tuple tree."""
    dist = distances(X, centers, objective)
    d = X.shape[1]
    cands = [np.union1d(X[:, f], centers[:, f]) for f in range(d)]

    def build(rows, members, bounded, depth):
        if members.size == 1:
            return ("leaf", int(members[0]), depth)
        before = dist[np.ix_(rows, members)].min(1).sum()
        best = None
        for f in range(d):
            for t in cands[f]:
                cl = centers[members, f] <= t
                if cl.all() or not cl.any():
                    continue
                pl = X[rows, f] <= t
                nl, nr, kl, kr = int(pl.sum()), int((~pl).sum()), int(cl.sum()), int((~cl).sum())
                if nl < kl or nr < kr:
                    continue
                after = (dist[np.ix_(rows[pl], members[cl])].min(1).sum()
                         + dist[np.ix_(rows[~pl], members[~cl])].min(1).sum())
                alpha = float(np.float32(nl / rows.size))
                beta = float(np.float32(kl / members.size))
                left = projected_depth(1, nl, kl, alpha, beta) - (nl if bounded[f][0] else 0)
                right = projected_depth(1, nr, kr, alpha, beta) - (nr if bounded[f][1] else 0)
                score = after / before + depth_factor * (left + right) / rows.size
                if best is None or score < best[0]:
                    best = (score, f, t)
        assert best is not None, "the test data must always allow a feasible cut"
        _, f, t = best
        pl = X[rows, f] <= t
        cl = centers[members, f] <= t
        bl = [list(b) for b in bounded]
        br = [list(b) for b in bounded]
        bl[f][0] = True
        br[f][1] = True
        return ("split", f, t, build(rows[pl], members[cl], bl, depth + 1),
                build(rows[~pl], members[~cl], br, depth + 1))

    return build(np.arange(X.shape[0]), np.arange(centers.shape[0]), [[False, False]] * d, 0)


def predict_nested(node, x):
    while node[0] == "split":
        node = node[3] if x[node[1]] <= node[2] else node[4]
    return node[1], node[2]


def leaf_depths(tree):
    depth = np.zeros(tree.node_count, dtype=int)
    for node in range(tree.node_count):  # children come after their parent
        if node not in tree.leaves:
            depth[tree.left[node]] = depth[tree.right[node]] = depth[node] + 1
    return depth


@pytest.mark.parametrize("seed,depth_factor,objective", [
    (0, 0.03, "kmeans"), (1, 0.03, "kmeans"), (2, 0.0, "kmeans"), (3, 0.5, "kmeans"),
    (4, 0.03, "kmedians"), (5, 0.2, "kmedians"),
])
def test_equals_brute_force(seed, depth_factor, objective):
    rng = np.random.default_rng(seed)
    k = 6
    C = rng.uniform(-6, 6, size=(k, 3))
    X = C[rng.integers(0, k, 240)] + 1.5 * rng.normal(size=(240, 3))
    centers = C + rng.normal(scale=0.5, size=C.shape)
    model = ExShallow(k, depth_factor=depth_factor, objective=objective).fit(X, centers)
    nested = brute_force_shallow(X, centers, depth_factor, objective)
    expected = np.array([predict_nested(nested, x) for x in X])
    np.testing.assert_array_equal(model.predict(X), expected[:, 0])
    assert model.weighted_avg_depth_ == pytest.approx(expected[:, 1].mean())
    assert model.tree_.n_leaves == k
    assert sorted(model.tree_.value[model.tree_.leaves].tolist()) == list(range(k))
    # The reported depth is the tree's: the mean over rows of their leaf's depth.
    assert model.weighted_avg_depth_ == pytest.approx(leaf_depths(model.tree_)[model.tree_.apply(X)].mean())


def test_depth_factor_trades_cost_for_depth():
    rng = np.random.default_rng(7)
    C = rng.uniform(-10, 10, size=(12, 2))
    X = C[rng.integers(0, 12, 3000)] + 2.0 * rng.normal(size=(3000, 2))
    greedy = ExShallow(12, depth_factor=0.0).fit(X, C)
    shallow = ExShallow(12, depth_factor=1.0).fit(X, C)
    assert shallow.weighted_avg_depth_ < greedy.weighted_avg_depth_
    def cost(m):
        return distances(X, C, "kmeans")[np.arange(len(X)), m.predict(X)].sum()

    assert cost(greedy) <= cost(shallow)


def _fixture_data(name):
    loaders = {"iris": datasets.load_iris, "wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer}
    if name in loaders:
        return loaders[name]().data.astype(np.float64)
    return shared_dataset(name)[0]


def _fixtures():
    paths = [SHARED_FIXTURES / "exkmc_reference.json", SHARED_FIXTURES / "shallow_reference.json"]
    if not all(p.exists() for p in paths):
        pytest.skip("../shared/fixtures/{exkmc,shallow}_reference.json are absent (needs ../shared beside the "
                    "checkout)")
    return [json.loads(p.read_text()) for p in paths]


@pytest.mark.parametrize("name", ["iris", "wine", "breast_cancer", "r15", "d31"])
def test_reaches_shallowtree_figures(name):
    exkmc, shallow = _fixtures()
    ref, expected = exkmc[name], shallow["results"][name]
    X = _fixture_data(name)
    model = ExShallow(ref["k"], max_bins=65536).fit(X, np.asarray(ref["centers"]))  # exact bins
    labels = model.predict(X)
    cost = sum(((X[labels == c] - X[labels == c].mean(0)) ** 2).sum() for c in np.unique(labels))
    assert cost / ref["reference_cost"] <= expected["cost_ratio"] + 1e-4
    assert model.weighted_avg_depth_ <= expected["weighted_avg_depth"] + 1e-3
    assert model.tree_.depth <= expected["max_depth"]


def test_exact_bins_hold_every_partition_of_values_and_centers():
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    C = np.array([[1.2], [1.9]])  # between 1 and 2, below the midpoint 1.5 and above it
    m = edges_from_sample(X, extra_edges=C, between_extra=True)
    codes_x = m.transform(X)[:, 0]
    codes_c = m.transform(C)[:, 0]
    # A cut between the value 1 and the center 1.2 (data <= 1, no center left) is a bin.
    assert any((codes_x <= b).sum() == 2 and not (codes_c <= b).any() for b in range(m.n_bins[0]))
    plain = edges_from_sample(X, extra_edges=C)
    assert plain.n_bins[0] < m.n_bins[0]


def test_dask_input_gives_the_same_tree(dask_client):
    rng = np.random.default_rng(11)
    C = rng.uniform(-10, 10, (5, 3))
    X = C[rng.integers(0, 5, 3000)] + rng.normal(size=(3000, 3))
    for objective in ("kmeans", "kmedians"):
        local = ExShallow(5, objective=objective, max_bins=64).fit(X, C)
        dist = ExShallow(5, objective=objective, max_bins=64).fit(da.from_array(X, chunks=(700, 3)), C)
        assert dist.tree_ == local.tree_
        assert dist.weighted_avg_depth_ == pytest.approx(local.weighted_avg_depth_)
        assert dist.n_passes_ == local.n_passes_ + 1  # the binning sample is a pass on Dask


def test_passes_one_per_level():
    C = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    rng = np.random.default_rng(2)
    X = C[rng.integers(0, 4, 2000)] + rng.normal(size=(2000, 2))
    model = ExShallow(4).fit(X, C)
    assert model.tree_.depth == 2
    assert model.n_passes_ == 3  # encoding, root level, second level
    assert model.weighted_avg_depth_ == pytest.approx(2.0)


def test_starved_node_still_gives_every_center_a_leaf():
    # Three centers, but only two rows near them: ShallowTree would stop with a shared leaf.
    X = np.array([[0.0, 0.0], [0.1, 0.0], [50.0, 50.0], [50.1, 50.0], [50.2, 50.0]])
    C = np.array([[0.0, 0.0], [0.05, 0.0], [0.1, 0.0], [50.1, 50.0]])
    model = ExShallow(4).fit(X, C)
    assert sorted(model.tree_.value[model.tree_.leaves].tolist()) == [0, 1, 2, 3]


def test_fits_its_own_reference_without_centers():
    rng = np.random.default_rng(5)
    C = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    X = C[rng.integers(0, 3, 600)] + rng.normal(size=(600, 2))
    model = ExShallow(3, random_state=0).fit(X)
    assert model.centers_.shape == (3, 2) and model.tree_.n_leaves == 3
    assert np.array_equal(model.fit_predict(X), model.predict(X))


def test_bad_parameters_are_named():
    X = np.random.default_rng(0).normal(size=(50, 2))
    C = np.zeros((3, 2))
    for bad in (-0.1, float("nan"), "deep", True):
        with pytest.raises(InputError, match="depth_factor"):
            ExShallow(3, depth_factor=bad).fit(X, C)
    with pytest.raises(InputError, match="objective"):
        ExShallow(3, objective="kmedoids").fit(X, C)
    with pytest.raises(ValueError, match="centers"):
        ExShallow(3).fit(X, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="n_clusters"):
        ExShallow(0).fit(X, C)


# --------------------------------------------------------------------------- bulk bins
def _sparse_mixture(n, k, seed):
    """Two continuous features and four sparse indicators (mostly 0, so bin 0 is a bulk bin)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    C = rng.uniform(-6, 6, size=(k, 2))
    p = rng.uniform(0.05, 0.4, size=(k, 4))
    X = np.hstack([C[y] + 1.5 * rng.normal(size=(n, 2)), (rng.random((n, 4)) < p[y]).astype(float)])
    centers = np.array([X[y == j].mean(0) for j in range(k)])
    return X, centers


@pytest.mark.parametrize("seed,objective", [(0, "kmeans"), (1, "kmedians")])
def test_bulk_bins_equal_brute_force(monkeypatch, seed, objective):
    """With bulk bins forced on every node, the tree still equals the brute force."""
    import exclust.algorithms.histogram.exshallow as exshallow_module

    monkeypatch.setattr(exshallow_module, "BULK_MIN_ROWS", 1)
    X, centers = _sparse_mixture(200, 5, seed)
    model = ExShallow(5, objective=objective).fit(X, centers)
    nested = brute_force_shallow(X, centers, 0.03, objective)
    expected = np.array([predict_nested(nested, x) for x in X])
    np.testing.assert_array_equal(model.predict(X), expected[:, 0])
    assert model.weighted_avg_depth_ == pytest.approx(expected[:, 1].mean())


def test_bulk_bin_cells_equal_the_row_by_row_sums():
    """The kernel's bulk path (cells by difference) against its row-by-row path, on every slot of
    a grown level: same counts, same sums up to rounding, and the bulk path really taken."""
    from exclust.algorithms.histogram._shallow_cut import _bulk_codes, shallow_histograms
    from exclust.algorithms.histogram.engine import CodeTree
    from exclust.algorithms.histogram.exshallow import center_groups
    from exclust.algorithms.histogram.imm import prepare_fit

    X, centers = _sparse_mixture(6000, 6, 3)
    _, _, data = prepare_fit(X, 6, centers, 256, None, "kmeans", distances=True, between_extra=True)
    part = data._kept.parts[0]
    codes = data.mapper.transform(data.centers).astype(np.int64)
    tree = CodeTree()
    left, right = tree.split(0, 0, int(np.median(codes[:, 0])))
    groups, n_groups, spans = [], [], []
    for members in (np.flatnonzero(codes[:, 0] <= tree.split_bin[0]), np.flatnonzero(codes[:, 0] > tree.split_bin[0])):
        g, n = center_groups(codes, members, 6)
        groups.append(g)
        n_groups.append(n)
        spans.append(np.stack([codes[members].min(0), codes[members].max(0)], axis=1))
    slot = np.array([-1, 0, 1])
    args = (part["codes"], part["dots"], *tree.arrays(), np.zeros(X.shape[0], dtype=np.int32), False, slot, 2,
            np.stack(groups), np.stack(n_groups), np.stack(spans), data.n_bins, 5, 2)
    plain_cells, plain_base = shallow_histograms(*args, 1 << 62)
    bulk_cells, bulk_base = shallow_histograms(*args, 1)
    order = np.argsort(tree.route(part["codes"]), kind="stable")
    start = np.array([0, (tree.route(part["codes"]) == left).sum(), X.shape[0]])
    bulk = _bulk_codes(part["codes"], order, start, np.array([len(g[0][g[0] >= 0]) for g in groups]), 2, 1)
    assert (bulk[:, 2:] == 0).all()  # the indicators' zero bin is the bulk bin of both slots
    np.testing.assert_array_equal(bulk_cells[..., 0], plain_cells[..., 0])
    np.testing.assert_allclose(np.cumsum(bulk_cells, axis=3), np.cumsum(plain_cells, axis=3), rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(bulk_base, plain_base)


def test_bulk_bins_on_dask_give_the_same_tree(dask_client, monkeypatch):
    """Each partition picks its own bulk bins; the summed histograms still give the local tree."""
    import exclust.algorithms.histogram.exshallow as exshallow_module

    monkeypatch.setattr(exshallow_module, "BULK_MIN_ROWS", 1)
    X, centers = _sparse_mixture(3000, 5, 7)
    local = ExShallow(5, max_bins=64).fit(X, centers)
    dist = ExShallow(5, max_bins=64).fit(da.from_array(X, chunks=(700, 6)), centers)
    assert dist.tree_ == local.tree_
    assert dist.weighted_avg_depth_ == pytest.approx(local.weighted_avg_depth_)
