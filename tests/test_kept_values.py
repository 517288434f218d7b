"""The engine's per-center values held or recomputed in every pass (kept_values.py): the same
values, the same trees, in memory and on a LocalCluster; IMM keeps none."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram import engine, kept_values
from exclust.algorithms.histogram.base import encode_for_trees
from exclust.algorithms.histogram.criteria import SurrogateCost
from exclust.algorithms.histogram.exgreedy import ExGreedy
from exclust.algorithms.histogram.exkmc import ExKMC
from exclust.algorithms.histogram.exshallow import ExShallow
from exclust.algorithms.histogram.imm import IMM


def _blobs(rng, n: int = 6000, d: int = 4, k: int = 6):
    centers = rng.normal(scale=6.0, size=(k, d))
    X = centers[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    return X, centers


@pytest.fixture
def small_chunks(monkeypatch):
    """Recompute 1,024 rows at a time (the floor), so a part of a few thousand rows takes several chunks."""
    monkeypatch.setattr(kept_values, "RECOMPUTED_CHUNK_BYTES", 1)


@pytest.mark.parametrize("metric", [None, "sqeuclidean", "l1"])
def test_recomputed_values_equal_the_held_ones(rng, small_chunks, metric):
    X, centers = _blobs(rng, n=3500)
    held = encode_for_trees(X, centers, 32, 0, metric=metric, values="held")
    again = encode_for_trees(X, centers, 32, 0, metric=metric, values="recomputed")
    (held_part,), (again_part,) = held._kept.parts, again._kept.parts
    assert "dots" not in again_part and again_part["rows"].shape == X.shape
    np.testing.assert_array_equal(again_part["codes"], held_part["codes"])
    np.testing.assert_array_equal(again_part["labels"], held_part["labels"])
    seen = []
    for start, stop, values in kept_values.value_chunks(again_part):  # one buffer, overwritten chunk by chunk
        np.testing.assert_array_equal(values, held_part["dots"][start:stop])
        seen.append((start, stop))
    assert seen == [(0, 1024), (1024, 2048), (2048, 3072), (3072, 3500)]
    # Only the rows a pass reads are made; the others are NaN, never stale values of another chunk.
    needed = rng.random(3500) < 0.3
    for start, stop, values in kept_values.value_chunks(again_part, needed):
        mine = needed[start:stop]
        np.testing.assert_array_equal(values[mine], held_part["dots"][start:stop][mine])
        assert np.isnan(values[~mine]).all()
    # Only the centers a pass reads are made: those columns equal the held ones, the rest NaN.
    asked = np.zeros(centers.shape[0], dtype=bool)
    asked[[1, 4]] = True
    for start, stop, values in kept_values.value_chunks(again_part, needed, asked):
        mine = needed[start:stop]
        np.testing.assert_array_equal(values[mine][:, asked], held_part["dots"][start:stop][mine][:, asked])
        assert np.isnan(values[~mine]).all() and np.isnan(values[:, ~asked]).all()
    assert again.sum_sq == pytest.approx(held.sum_sq, rel=1e-12)


def test_a_part_holding_its_first_rows_values_gives_the_held_values(rng, small_chunks):
    """A share held: the first rows' values in one piece, the rest recomputed from row ``held`` on."""
    X, centers = _blobs(rng, n=3500)
    held = encode_for_trees(X, centers, 32, 0, metric="sqeuclidean", values="held")
    (held_part,) = held._kept.parts
    part = engine._encode_block(X, held.mapper, held.centers, np.float64, "sqeuclidean", "recomputed", 0.4)
    assert part["dots"].shape == (1400, 6) and part["rows"].shape == (2100, 4)
    np.testing.assert_array_equal(part["codes"], held_part["codes"])
    np.testing.assert_array_equal(part["labels"], held_part["labels"])
    needed = rng.random(3500) < 0.5
    asked = np.array([True, False, True, True, False, False])
    seen = []
    for start, stop, values in kept_values.value_chunks(part, needed, asked):
        mine = needed[start:stop] if start else np.ones(stop, dtype=bool)  # held rows come whole
        np.testing.assert_array_equal(values[mine][:, asked], held_part["dots"][start:stop][mine][:, asked])
        seen.append((start, stop))
    assert seen == [(0, 1400), (1400, 2424), (2424, 3448), (3448, 3500)]


def test_the_share_of_values_that_fits_on_the_workers_beside_the_rows_builds_the_held_tree(rng, dask_client,
                                                                                         monkeypatch):
    """Values that do not all fit: the rows take their place in the share first, and half the values
    fit beside them on each worker's parts, the rest recomputed: the same trees as with every value held."""
    from exclust.dataplane.residency import cluster_memory

    k = 20
    X, centers = _blobs(rng, k=k)
    lazy = da.from_array(X, chunks=(2500, -1))
    builders = [("ExKMC", lambda: ExKMC(n_clusters=k, max_leaves=k + 4, random_state=0)),
                ("ExShallow", lambda: ExShallow(n_clusters=k, random_state=0)),
                ("ExGreedy", lambda: ExGreedy(n_clusters=k, random_state=0))]
    held = {name: make().fit(lazy, centers).tree_.to_dict()["nodes"] for name, make in builders}
    values_bytes, rows_bytes = X.shape[0] * k * 4, X.nbytes  # float32 values on the workers
    monkeypatch.setattr(engine, "HELD_VALUES_SHARE", (rows_bytes + 0.5 * values_bytes) / cluster_memory())
    data = encode_for_trees(lazy, centers, 32, 0, metric="sqeuclidean")
    assert data.values == "recomputed" and data.held_share == pytest.approx(0.5)
    import dask

    assert sorted(part["dots"].shape[0] for part in dask.compute(*data._kept.parts)) == [500, 1250, 1250]
    data.release()
    for name, make in builders:
        assert make().fit(lazy, centers).tree_.to_dict()["nodes"] == held[name], name


def test_values_held_when_they_fit_else_recomputed_and_the_log_says_so(rng, monkeypatch, caplog):
    X, centers = _blobs(rng, n=2000)
    with caplog.at_level("INFO", logger="exclust"):
        assert encode_for_trees(X, centers, 32, 0).values == "held"
        assert not [r for r in caplog.records if "recomputed" in r.getMessage()]
        monkeypatch.setattr(engine, "HELD_VALUES_SHARE", 0.0)
        assert encode_for_trees(X, centers, 32, 0).values == "recomputed"
    said = [r.getMessage() for r in caplog.records if "recomputed in every pass" in r.getMessage()]
    assert len(said) == 1 and "6 centers" in said[0] and "0% of the free memory" in said[0], said


def test_values_none_keeps_nothing_and_refuses_a_pass_that_reads_them(rng):
    X, centers = _blobs(rng, n=2000)
    data = encode_for_trees(X, centers, 32, 0, values="none")
    (part,) = data._kept.parts
    assert "dots" not in part and "rows" not in part
    assert np.bincount(part["labels"], minlength=6).sum() == 2000
    from exclust.algorithms.histogram.code_tree import CodeTree

    with pytest.raises(ValueError, match="per-center values"):
        data.histograms(SurrogateCost(), CodeTree(), np.zeros(1, dtype=np.int64), 1)


BUILDERS = [
    pytest.param(lambda: ExKMC(n_clusters=6, max_leaves=10, random_state=0), id="ExKMC"),
    pytest.param(lambda: ExShallow(n_clusters=6, random_state=0), id="ExShallow"),
    pytest.param(lambda: ExGreedy(n_clusters=6, random_state=0), id="ExGreedy"),
]


@pytest.mark.parametrize("make", BUILDERS)
def test_recomputed_values_build_the_held_tree_in_memory(rng, small_chunks, monkeypatch, make):
    X, centers = _blobs(rng)
    held = make().fit(X, centers)
    monkeypatch.setattr(engine, "HELD_VALUES_SHARE", 0.0)
    recomputed = make().fit(X, centers)
    assert recomputed.tree_.to_dict()["nodes"] == held.tree_.to_dict()["nodes"]
    assert recomputed.n_passes_ == held.n_passes_


@pytest.mark.parametrize("make", BUILDERS)
def test_recomputed_values_build_the_held_tree_on_a_cluster(rng, dask_client, small_chunks, monkeypatch, make):
    X, centers = _blobs(rng)
    lazy = da.from_array(X, chunks=(2500, -1))
    held = make().fit(lazy, centers)
    # The driver decides what the parts keep; the workers recompute with the default chunk
    # (RECOMPUTED_CHUNK_BYTES is theirs): 2,500-row parts in one chunk each at k = 6.
    monkeypatch.setattr(engine, "HELD_VALUES_SHARE", 0.0)
    recomputed = make().fit(lazy, centers)
    assert recomputed.tree_.to_dict()["nodes"] == held.tree_.to_dict()["nodes"]
    in_memory = make().fit(X, centers)
    assert recomputed.predict(X).tolist() == in_memory.predict(X).tolist()


def test_imm_keeps_no_values_and_builds_the_tree_it_built_with_them(rng):
    from exclust.algorithms.histogram.imm import grow_imm

    X, centers = _blobs(rng)
    with_values = encode_for_trees(X, centers, 256, 0, values="held")
    tree, mistakes = grow_imm(with_values)
    fitted = IMM(n_clusters=6, random_state=0).fit(X, centers)
    assert fitted.n_mistakes_ == mistakes
    assert fitted.tree_.to_dict()["nodes"] == tree.to_threshold_tree(
        with_values.mapper, 6, fitted.tree_.feature_names).to_dict()["nodes"]


@pytest.mark.parametrize("make", [
    pytest.param(lambda: ExShallow(n_clusters=4, random_state=0), id="ExShallow"),
    pytest.param(lambda: ExGreedy(n_clusters=4, random_state=0), id="ExGreedy"),
])
def test_recomputed_values_cut_a_category_with_missing_values_as_held(rng, small_chunks, monkeypatch, make):
    """Set cuts (``_shallow_sets``) and missing sides from recomputed distances, in a clustering space Z."""
    from exclust.sources.dataset import Dataset

    centers = np.array([[-4.0, 0.0], [0.0, 4.0], [4.0, 0.0], [0.0, -4.0]])
    n = 5000
    cluster = rng.integers(0, 4, n)
    Z = centers[cluster] + rng.normal(size=(n, 2)) * 0.8
    segment = np.where(rng.random(n) < 0.15, rng.integers(0, 6, n), cluster + 2 * rng.integers(0, 2, n) % 6)
    segment = segment.astype(float)
    segment[rng.random(n) < 0.06] = np.nan
    x0 = Z[:, 0] + rng.normal(size=n) * 0.5
    x0[rng.random(n) < 0.1] = np.nan
    table = Dataset(np.stack([segment, x0], 1), ["segment", "x0"], categories={0: list("abcdef")})
    held = make().fit(table, centers, Z=Z)
    monkeypatch.setattr(engine, "HELD_VALUES_SHARE", 0.0)
    recomputed = make().fit(table, centers, Z=Z)
    assert recomputed.tree_.to_dict()["nodes"] == held.tree_.to_dict()["nodes"]
    assert "category_set" in recomputed.tree_.to_dict()["nodes"]["kind"]


def test_an_empty_part_gives_empty_histograms_from_recomputed_values(rng):
    """A part of no rows (an empty file's) gives one empty chunk, so its block returns zeros to the
    reduction as a part holding its values does."""
    X, centers = _blobs(rng, n=2000)
    data = encode_for_trees(X, centers, 32, 0, values="recomputed")
    (part,) = data._kept.parts
    empty = {"codes": part["codes"][:0], "labels": part["labels"][:0], "n": 0, "rows": part["rows"][:0],
             "recipe": part["recipe"]}
    assert [(a, b, v.shape) for a, b, v in kept_values.value_chunks(empty)] == [(0, 0, (0, 6))]
