"""Parallel seeding: the oversampling of k-means|| (Bahmani et al. 2012), for k-means and k-medians.

One random first row; a pass for its cost; then ``rounds`` passes, each drawing every row with
probability ``oversampling * k * dist / cost`` (``dist`` its distance to the nearest candidate:
squared l2 for k-means, l1 for k-medians, the D^2 and D^1 rules of k-means++ and k-medians++;
``cost`` that of the previous round, so that drawing and costing share one pass); a last pass
weights each candidate by the rows nearest to it. The few weighted candidates are then
reclustered in memory into the k centers by the caller's ``recluster`` (the paper's step 8),
which is where k-means|| and k-medians|| differ.

A row's draw is ``parts.row_uniforms`` of (the round's seed, its global row id), so numpy input
and any chunking of the same rows as a dask array draw the same candidates.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from exclust.dataplane import arrays, parts
from exclust.errors import InputError
from exclust.reference.base import draw_seed, random_stream
from exclust.reference.passes import NEAREST, concat_draws, seeding_count_block, seeding_draw_block

# Past the planned rounds, when too few distinct candidates were drawn, at most this many more.
_EXTRA_ROUNDS = 10
# Distinct seeds per round from one drawn seed: any prime above the rounds ever run will do.
_ROUND_STRIDE = 1_000_003


def _n_distinct(points: np.ndarray) -> int:
    return int(np.unique(points, axis=0).shape[0])


def parallel_seeding(
    X,
    n_clusters: int,
    random_state,
    *,
    recluster: Callable[[np.ndarray, np.ndarray, int, np.random.RandomState], np.ndarray],
    distance: str = "sqeuclidean",
    rounds: int = 5,
    oversampling: float = 2.0,
) -> tuple[np.ndarray, int]:
    """k-means|| / k-medians|| seeding in ``rounds + 2`` passes; returns (centers, passes).

    ``recluster(candidates, weights, n_clusters, rs)`` turns the distinct candidates that some row
    is nearest to, weighted by those rows, into ``n_clusters`` centers in memory; ``rs`` is the
    seeding's random stream, for its restarts.
    """
    if distance not in NEAREST:
        raise ValueError(f"distance must be one of {sorted(NEAREST)}, got {distance!r}")
    rs = random_stream(random_state)
    n = X.shape[0]
    first = int(rs.randint(n))
    row = X[first : first + 1]
    candidates = np.ascontiguousarray(arrays.to_memory(row), dtype=np.float64)
    seed = draw_seed(rs)
    ell = oversampling * n_clusters
    scale, passes = 0.0, 0
    for r in range(rounds + 1 + _EXTRA_ROUNDS):
        drawn, cost = parts.map_reduce(seeding_draw_block, X,
                                       args=(candidates, scale, seed * _ROUND_STRIDE + r, distance),
                                       combine=concat_draws, with_offset=True)
        passes += 1
        candidates = np.ascontiguousarray(np.vstack([candidates, drawn]))
        if cost == 0:
            break
        if r >= rounds and _n_distinct(candidates) >= n_clusters:
            break
        # Past the planned rounds only when too few candidates were drawn: draw more boldly.
        scale = ell / cost * (1.0 if r < rounds else 2.0 ** (r - rounds + 1))
    counts = parts.map_reduce(seeding_count_block, X, args=(candidates, distance))
    passes += 1
    # A repeated candidate loses every row to its first copy (ties go to the lowest index), so the
    # kept ones are distinct.
    keep = counts > 0
    if keep.sum() < n_clusters:
        raise InputError(f"the data hold fewer than {n_clusters} distinct points; ask for fewer clusters")
    centers = recluster(candidates[keep], counts[keep].astype(np.float64), n_clusters, rs)
    return np.ascontiguousarray(centers, dtype=np.float64), passes
