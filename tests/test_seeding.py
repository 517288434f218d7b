"""seeding.parallel_seeding: the one k-means|| oversampling, in squared l2 and in l1."""
from __future__ import annotations

import numpy as np
import pytest

from exclust.reference.seeding import parallel_seeding

CHUNKINGS = (1, 3, 7)


def _chunked(X, n_chunks):
    import dask.array as da

    rows = -(-X.shape[0] // n_chunks)
    return da.from_array(X, chunks=(rows,) + X.shape[1:])


def _blobs(n=2100, k=5, d=3, seed=4):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-20, 20, (k, d))
    return centers[rng.integers(0, k, n)] + rng.normal(size=(n, d))


class _Recorder:
    """A recluster that keeps what it was handed and returns its first k candidates."""

    def __call__(self, candidates, weights, n_clusters, rs):
        self.candidates, self.weights = candidates.copy(), weights.copy()
        return candidates[:n_clusters]


def _seed(X, distance):
    recorder = _Recorder()
    centers, passes = parallel_seeding(X, 5, 11, recluster=recorder, distance=distance, rounds=3)
    return recorder, centers, passes


@pytest.mark.parametrize("distance", ["sqeuclidean", "l1"])
def test_candidates_and_weights_do_not_depend_on_the_chunking(dask_client, distance):
    X = _blobs()
    want, centers, passes = _seed(X, distance)
    assert passes == 3 + 2
    # every row counted once, each kept candidate by the rows nearest to it; none repeated
    assert want.weights.sum() == X.shape[0] and (want.weights > 0).all()
    assert np.unique(want.candidates, axis=0).shape[0] == want.candidates.shape[0] > 5
    for n in CHUNKINGS:
        got, got_centers, got_passes = _seed(_chunked(X, n), distance)
        np.testing.assert_array_equal(got.candidates, want.candidates, err_msg=f"{n} chunks")
        np.testing.assert_array_equal(got.weights, want.weights, err_msg=f"{n} chunks")
        np.testing.assert_array_equal(got_centers, centers)
        assert got_passes == passes


def test_the_distance_changes_the_draws():
    X = _blobs()
    l2, _, _ = _seed(X, "sqeuclidean")
    l1, _, _ = _seed(X, "l1")
    assert l2.candidates.shape != l1.candidates.shape or not np.array_equal(l2.candidates, l1.candidates)
    with pytest.raises(ValueError, match="distance"):
        parallel_seeding(X, 5, 0, recluster=_Recorder(), distance="cosine")
