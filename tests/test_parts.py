"""The partitioned-data layer: same answers for numpy and dask chunked 1, 3 or 7 ways; read counting."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest

from exclust.dataplane import parts, residency

CHUNKINGS = (1, 3, 7)


def _chunked(X, n_chunks):
    import dask.array as da

    rows = -(-X.shape[0] // n_chunks)
    return da.from_array(X, chunks=(rows,) + X.shape[1:])


def _sums(block, labels):
    return np.array([block.sum(), float(labels.sum()), block.shape[0]])


def _first_row_ids(offset, block):
    return np.array([offset])


def test_map_reduce_same_for_numpy_and_every_chunking(dask_client):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5003, 4))
    y = rng.integers(0, 5, size=5003)
    want = parts.map_reduce(_sums, X, y)
    assert want[2] == 5003
    for n in CHUNKINGS:
        got = parts.map_reduce(_sums, _chunked(X, n), y)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        offsets = parts.map_reduce(_first_row_ids, _chunked(X, n), with_offset=True, combine=parts.concat_parts)
        np.testing.assert_array_equal(offsets, parts.row_offsets(_chunked(X, n))[:-1])


def test_uniform_sample_does_not_depend_on_chunking(dask_client):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4001, 3))
    y = np.arange(4001)
    Xs, ys = parts.uniform_sample(X, y, size=500, random_state=7)
    assert Xs.shape == (500, 3) and np.all(np.diff(ys) > 0)
    np.testing.assert_array_equal(Xs, X[ys])
    for n in CHUNKINGS:
        import dask.array as da

        Xd, yd = parts.uniform_sample(_chunked(X, n), da.from_array(y, chunks=1000), size=500, random_state=7)
        np.testing.assert_array_equal(Xd, Xs)
        np.testing.assert_array_equal(yd, ys)
    # A different seed draws different rows; asking for more rows than there are returns all.
    assert not np.array_equal(parts.uniform_sample(X, size=500, random_state=8)[0], Xs)
    assert parts.uniform_sample(X, size=10**6, random_state=0)[0].shape == (4001, 3)


def test_row_uniforms_follow_the_row_not_the_part():
    whole = parts.row_uniforms(3, 0, 1000)
    pieces = np.concatenate([parts.row_uniforms(3, a, b) for a, b in ((0, 10), (10, 777), (777, 1000))])
    np.testing.assert_array_equal(whole, pieces)
    assert 0 <= whole.min() and whole.max() < 1 and abs(whole.mean() - 0.5) < 0.05
    assert not np.array_equal(whole, parts.row_uniforms(4, 0, 1000))


def test_align_rejects_wrong_length_and_chunks_like_x(dask_client):
    X = _chunked(np.zeros((100, 2)), 3)
    lab = parts.align(np.arange(100), X)
    assert lab.chunks[0] == X.chunks[0]
    with pytest.raises(ValueError, match="99 entries for 100 rows"):
        parts.align(np.arange(99), X)


def test_numpy_input_is_split_for_threads():
    X = np.zeros((parts.THREAD_MIN_ROWS * 4, 1))
    bounds = parts.row_offsets(X)
    assert bounds[0] == 0 and bounds[-1] == X.shape[0]
    assert len(bounds) - 1 == min(4, __import__("os").cpu_count())


def _square_sum(block):
    return {"sq": np.asarray(block) ** 2}


def _sum_of(part, column):
    return part["sq"][:, column].sum(keepdims=True)


def test_kept_parts_stay_where_made_and_each_reduction_is_one_counted_pass(dask_client):
    X = np.arange(3000.0).reshape(1000, 3)
    expected = (X ** 2).sum(axis=0)
    for data in (X, da.from_array(X, chunks=(333, 3))):
        counter = parts.PassCounter()
        with parts.counting_passes(counter), counter.step("keep"):
            kept = residency.keep_parts(_square_sum, data, summarize=_sum_of, summarize_args=(2,))
        with parts.counting_passes(counter), counter.step("reduce"):
            got = [residency.reduce_kept(kept, _sum_of, j)[0] for j in range(3)]
        assert kept.distributed == (data is not X) and len(kept.parts) == (1 if data is X else 4)
        np.testing.assert_allclose(got, expected)
        np.testing.assert_allclose(kept.summary, expected[2:])  # made in the keeping pass itself
        assert counter.passes == {"keep": 1, "reduce": 3} and counter.reads == {"keep": 0, "reduce": 0}


def test_kernels_run_single_threaded_inside_workers_and_in_our_threads(dask_client):
    import numba

    def threads(block):
        return np.array([numba.get_num_threads()])

    inside = parts.map_reduce(threads, da.from_array(np.zeros((40, 1)), chunks=(10, 1)), combine=np.maximum)
    assert inside[0] == 1
    many = np.zeros((parts.THREAD_MIN_ROWS * 2, 1))
    if len(parts.row_offsets(many)) > 2:  # several numpy parts: each of our threads gets one core
        assert parts.map_reduce(threads, many, combine=np.maximum)[0] == 1
    assert parts.map_reduce(threads, np.zeros((10, 1)))[0] == numba.get_num_threads()


def counting_reads(monkeypatch, log):
    """Make every Parquet piece read (on any worker) append a line to ``log``: the real reads."""
    import sys

    import cloudpickle

    import exclust.sources.parquet

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    original = exclust.sources.parquet.read_piece

    def read_piece(*args, **kwargs):
        with open(log, "a") as f:
            f.write("read\n")
        return original(*args, **kwargs)

    # Same name (the read layers keep theirs) but this module's: pickled by value to the workers.
    read_piece.__name__ = original.__name__

    monkeypatch.setattr(exclust.sources.parquet, "read_piece", read_piece)


def real_reads(log, n_pieces: int) -> float:
    return (len(log.read_text().splitlines()) if log.exists() else 0) / n_pieces


@pytest.mark.parametrize("held", [True, False])
def test_counter_reads_equal_the_real_reads(tmp_path, dask_client, monkeypatch, held):
    from exclust.sources.dataset import load_dataset

    rng = np.random.default_rng(2)
    for i in range(3):
        frame = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
        frame["t"] = rng.integers(0, 3, size=400)
        frame.to_parquet(tmp_path / f"p{i}.parquet")
    log = tmp_path / "reads.log"
    counting_reads(monkeypatch, log)
    data = load_dataset(tmp_path, ["a", "b", "c"], extra_columns=["t"])
    pieces = data.X.numblocks[0]  # small files are packed: a read of the data reads every piece once
    assert real_reads(log, pieces) == 1  # validation
    log.unlink()
    counter = parts.PassCounter()
    with parts.counting_passes(counter), counter.step("hold"):
        (X, t), is_held = residency.hold(data.X, data.extra["t"], force=held)
    with parts.counting_passes(counter), counter.step("work"):
        parts.map_reduce(_sums, X, t)
        parts.uniform_sample(X, t, size=50, random_state=0)
    assert is_held == held
    assert real_reads(log, pieces) == sum(counter.reads.values())
    assert counter.reads == ({"hold": 1, "work": 0} if held else {"hold": 0, "work": 2})
    assert counter.passes == ({"hold": 1, "work": 2} if held else {"hold": 0, "work": 2})


@pytest.fixture(scope="module")
def mixture():
    from sklearn.cluster import KMeans as SKKMeans

    from exclust.datasets.synthetic import make_gmm_dataset

    X, y, _ = make_gmm_dataset(3000, n_components=4, n_features=3, random_state=3)
    centers = SKKMeans(4, n_init=3, random_state=0).fit(X).cluster_centers_
    labels = SKKMeans(4, n_init=1, random_state=1).fit(X).labels_
    return X, y, centers, labels


def _trees_and_scores(X, y, centers, labels):
    from exclust.algorithms.cart import CART
    from exclust.algorithms.histogram.exkmc import ExKMC
    from exclust.algorithms.histogram.imm import IMM
    from exclust.algorithms.histogram.kdtree import KDTree
    from exclust.reference import kmeans_parallel_init
    from exclust.scoring.metrics import score

    trees = {
        "imm": IMM(4, random_state=0).fit(X, centers).tree_,
        "exkmc": ExKMC(4, 8, random_state=0).fit(X, centers).tree_,
        "kdtree": KDTree(6, random_state=0).fit(X, centers).tree_,
        "cart": CART(6, max_sample_rows=1000, random_state=0).fit(X, labels).tree_,
    }
    scores = score(trees["exkmc"], X, reference_labels=labels, centers=centers, y_true=y)
    seeds, _ = kmeans_parallel_init(X, 4, 0, rounds=2)
    return trees, scores, seeds


def test_numpy_and_dask_give_the_same_trees_scores_and_seeds(dask_client, mixture):
    X, y, centers, labels = mixture
    trees, scores, seeds = _trees_and_scores(X, y, centers, labels)
    for n in CHUNKINGS:
        import dask.array as da

        got_trees, got_scores, got_seeds = _trees_and_scores(
            _chunked(X, n), da.from_array(y, chunks=700), centers, da.from_array(labels, chunks=1100)
        )
        for name, tree in trees.items():
            assert got_trees[name] == tree, f"{name} differs with {n} chunks"
        for key, value in scores.items():
            if isinstance(value, float):
                assert got_scores[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
            else:
                assert got_scores[key] == value, key
        np.testing.assert_allclose(got_seeds, seeds, rtol=1e-9)


def _sign_of_first(block):
    return (block[:, 0] > 0).astype(np.int64)


def test_label_rows_labels_rows_holding_nan_or_inf_minus_one(dask_client):
    X = np.array([[1.0, 2.0], [np.nan, 1.0], [-1.0, np.inf], [1e308, 1e308], [-2.0, -np.inf], [-3.0, 0.0]])
    # 1e308 + 1e308 overflows: still finite
    expected = np.array([1, parts.UNLABELLED, parts.UNLABELLED, 1, parts.UNLABELLED, 0])
    assert np.array_equal(parts.label_rows(_sign_of_first, X), expected)
    lazy = parts.label_rows(_sign_of_first, da.from_array(X, chunks=(2, 2)))
    assert isinstance(lazy, da.Array)
    assert np.array_equal(lazy.compute(), expected)
    assert np.array_equal(parts.label_rows(_sign_of_first, X[[0, 3, 5]]), [1, 1, 0])
    assert np.array_equal(parts.label_rows(_sign_of_first, X[[1, 2]]), [-1, -1])
