"""Kept parts remember each row's leaf between passes of one growing tree (``criteria.resume_nodes``):
every histogram must equal the one computed by routing from the root, whatever sequence of
trees, trial copies and lineages came before."""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from exclust.algorithms.histogram.binning import edges_from_sample
from exclust.algorithms.histogram.criteria import SurrogateCost
from exclust.algorithms.histogram.engine import CodeTree, EncodedData


def _fresh_surrogate(X, mapper, centers, tree, slot, n_slots):
    """The same pass on freshly encoded in-process data: every row routed from the root. (Not
    on Dask: the same chunks and arguments give the same task keys, hence the same kept parts,
    memory included.)"""
    return EncodedData(np.asarray(X), mapper, centers).histograms(SurrogateCost(), tree, slot, n_slots)


def _slots(tree: CodeTree) -> tuple[np.ndarray, int]:
    leaves = tree.leaves()
    slot = np.full(tree.n_nodes, -1, dtype=np.int64)
    slot[leaves] = np.arange(len(leaves))
    return slot, len(leaves)


def _sequence(X, mapper, centers, data, rtol=1e-12):
    """Grow one tree, with trial copies and a second lineage in between; every pass is checked
    against the same pass on fresh data. Returns the rows counted over all checks."""
    checked = 0

    def check(tree):
        nonlocal checked
        slot, n_slots = _slots(tree)
        got, got_counts = data.histograms(SurrogateCost(), tree, slot, n_slots)
        want, want_counts = _fresh_surrogate(X, mapper, centers, tree, slot, n_slots)
        np.testing.assert_array_equal(got[..., 0], want[..., 0])
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-9 if rtol < 1e-9 else 1e-4)
        np.testing.assert_array_equal(got_counts, want_counts)
        checked += int(want[..., 0].sum())

    grown = CodeTree()
    left, right = grown.split(0, 0, 8)
    check(grown)
    trial = grown.trial_copy()  # reads the leaves the pass above remembered
    trial.split(left, 1, 4)
    trial.split(right, 2, 9)
    check(trial)
    other = CodeTree()
    other.split(0, 2, 5)
    check(other)  # another lineage in between: the memory of ``grown`` is replaced
    grown.split(right, 1, 10)
    check(grown)
    stale = grown.trial_copy()
    stale.split(left, 0, 2)
    grown.split(left, 2, 3)
    check(grown)  # remembers leaves 5 and 6, which in ``stale`` are other nodes
    check(stale)  # so the stale copy must route from the root
    return checked


def test_resumed_routing_equals_routing_from_the_root(rng):
    X = rng.normal(size=(3000, 3))
    centers = rng.normal(size=(4, 3))
    mapper = edges_from_sample(X, max_bins=16, extra_edges=centers)
    data = EncodedData(X, mapper, centers)
    assert _sequence(X, mapper, centers, data) == 6 * 3000 * 3


def test_a_trial_copy_reads_the_memory_but_never_writes_it(rng):
    X = rng.normal(size=(2000, 2))
    centers = rng.normal(size=(3, 2))
    mapper = edges_from_sample(X, max_bins=16, extra_edges=centers)
    data = EncodedData(X, mapper, centers)
    tree = CodeTree()
    left, _ = tree.split(0, 0, 7)
    data.histograms(SurrogateCost(), tree, *_slots(tree))
    part = data._kept.parts[0]
    remembered = part["route_nodes"].copy()
    assert part["route_lineage"] == tree.lineage and set(np.unique(remembered)) == {1, 2}
    trial = tree.trial_copy()
    trial.split(left, 1, 3)
    data.histograms(SurrogateCost(), trial, *_slots(trial))
    np.testing.assert_array_equal(part["route_nodes"], remembered)
    tree.split(left, 1, 3)  # now the real tree grows the same cut: its pass remembers the new leaves
    data.histograms(SurrogateCost(), tree, *_slots(tree))
    assert set(np.unique(part["route_nodes"])) == {2, 3, 4}


def test_a_cut_is_never_replaced():
    tree = CodeTree()
    tree.split(0, 0, 1)
    with pytest.raises(ValueError, match="already split"):
        tree.split(0, 1, 2)


def test_resumed_routing_on_dask_parts(dask_client, rng):
    X = rng.normal(size=(3000, 3))
    centers = rng.normal(size=(4, 3))
    mapper = edges_from_sample(X, max_bins=16, extra_edges=centers)
    data = EncodedData(da.from_array(X, chunks=(1000, 3)), mapper, centers)
    assert data.distributed
    # On the workers the dot products are float32: the sums agree to float32 precision.
    assert _sequence(X, mapper, centers, data, rtol=1e-5) == 6 * 3000 * 3
