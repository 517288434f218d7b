"""Synthetic datasets of the papers, in memory or written as Parquet partitions.

- ``make_gmm_dataset``: paper 000, Appendix G: K means drawn in a ball of radius 50 with pairwise
  distance at least 20, random positive-definite covariances.
- ``make_synthetic_i`` / ``make_synthetic_ii``: paper 003, Appendix B.2 and Section 3.4.
- ``write_gmm_parquet``: the Appendix G mixture, streamed to Parquet one partition at a time, so
  datasets far larger than memory can be made (each partition has its own seeded stream).
"""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class GaussianMixtureSpec:
    """The ground-truth mixture behind a synthetic dataset."""

    means: np.ndarray  # K x d
    covariances: np.ndarray  # K x d x d
    weights: np.ndarray  # K

    @property
    def n_components(self) -> int:
        return int(self.means.shape[0])

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n points and their component labels."""
        y = rng.choice(self.n_components, size=n, p=self.weights)
        X = np.empty((n, self.means.shape[1]))
        for k in range(self.n_components):
            idx = np.flatnonzero(y == k)
            if idx.size:
                chol = np.linalg.cholesky(self.covariances[k])
                X[idx] = self.means[k] + rng.standard_normal((idx.size, self.means.shape[1])) @ chol.T
        return X, y


def appendix_g_mixture(
    n_components: int = 5,
    n_features: int = 2,
    radius: float = 50.0,
    min_distance: float = 20.0,
    noise_scale: float = 8.0,
    random_state: int | None = 0,
) -> GaussianMixtureSpec:
    """Paper 000, Appendix G: means uniform in a ball of ``radius`` at least ``min_distance`` apart.

    The paper says only that covariances are "generated randomly, ensuring positive
    definiteness"; here each is ``A A^T / d + 0.5 I`` with ``A`` standard normal times
    ``noise_scale``, so typical per-axis standard deviations are about ``noise_scale``.
    Weights are proportional to sizes drawn uniformly in [50 000, 100 000], as in the paper.
    """
    rng = np.random.default_rng(random_state)
    means: list[np.ndarray] = []
    for _ in range(100_000):
        direction = rng.standard_normal(n_features)
        direction /= np.linalg.norm(direction)
        candidate = direction * radius * rng.uniform() ** (1.0 / n_features)
        if all(np.linalg.norm(candidate - m) >= min_distance for m in means):
            means.append(candidate)
            if len(means) == n_components:
                break
    else:
        raise ValueError(
            f"could not place {n_components} means at distance >= {min_distance} in a ball of radius {radius}"
        )
    covariances = np.empty((n_components, n_features, n_features))
    for k in range(n_components):
        A = noise_scale * rng.standard_normal((n_features, n_features))
        covariances[k] = A @ A.T / n_features + 0.5 * np.eye(n_features)
    sizes = rng.uniform(50_000, 100_000, size=n_components)
    return GaussianMixtureSpec(np.array(means), covariances, sizes / sizes.sum())


def make_gmm_dataset(
    n_samples: int = 100_000,
    n_components: int = 5,
    n_features: int = 2,
    random_state: int | None = 0,
    **mixture_options,
) -> tuple[np.ndarray, np.ndarray, GaussianMixtureSpec]:
    """(X, y, spec): a sample of the Appendix G mixture, in memory."""
    spec = appendix_g_mixture(n_components, n_features, random_state=random_state, **mixture_options)
    X, y = spec.sample(n_samples, np.random.default_rng(None if random_state is None else random_state + 1))
    return X, y, spec


def write_gmm_parquet(
    folder: str | Path,
    n_samples: int,
    n_components: int = 5,
    n_features: int = 2,
    rows_per_file: int = 250_000,
    random_state: int | None = 0,
    truth_column: str = "truth",
    extra_files: Mapping[str, str] | None = None,
    **mixture_options,
) -> GaussianMixtureSpec:
    """Write the Appendix G mixture as Parquet partitions ``part-00000.parquet`` ... in ``folder``.

    Columns ``x0 .. x{d-1}`` and ``truth_column``; ``extra_files`` (name -> text, such as the demo's stamp) are
    written beside them. Written under a temporary name and renamed, so an interrupted call leaves no
    half-written dataset behind, and no dataset without its extra files.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    if folder.exists():
        raise FileExistsError(f"{folder} exists; remove it or choose another folder")
    spec = appendix_g_mixture(n_components, n_features, random_state=random_state, **mixture_options)
    tmp = folder.with_name(f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        seeds = np.random.SeedSequence(random_state).spawn(-(-n_samples // rows_per_file))
        start = 0
        for i, seed in enumerate(seeds):
            rows = min(rows_per_file, n_samples - start)
            X, y = spec.sample(rows, np.random.default_rng(seed))
            columns = {f"x{j}": X[:, j] for j in range(n_features)}
            columns[truth_column] = y.astype(np.int32)
            pq.write_table(pa.table(columns), tmp / f"part-{i:05d}.parquet", row_group_size=min(rows, 1_000_000))
            start += rows
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return spec


def make_synthetic_i(
    n: int = 5000,
    d: int = 1000,
    n_flipped: int = 100,
    outlier: float = 1000.0,
    random_state: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Paper 003, Appendix B.2, "Synthetic I": two far outliers that make CART's clusters costly.

    Two points ``(outlier, 1, ..., 1)`` and ``(outlier, 0, ..., 0)`` (label 2); half of the
    others have 0 in the first feature and in ``n_flipped`` random further features and 1
    elsewhere (label 0); the rest have 0 in the first feature, 1 in ``n_flipped`` random
    further features and 0 elsewhere (label 1). Returns (X, y) with n rows and d columns.
    """
    if n < 4 or d < 2:
        raise ValueError(f"make_synthetic_i needs n >= 4 and d >= 2, got n={n}, d={d}")
    if not 0 <= n_flipped <= d - 1:
        raise ValueError(f"n_flipped must lie in [0, d - 1] = [0, {d - 1}], got {n_flipped}")
    rng = np.random.default_rng(random_state)
    rest = n - 2
    n_ones = rest // 2
    X = np.zeros((n, d))
    y = np.empty(n, dtype=np.int64)
    X[0, 0], X[0, 1:] = outlier, 1.0
    X[1, 0] = outlier
    y[:2] = 2
    # Each row flips its own random set of n_flipped features (columns 1..d-1).
    flips = np.argsort(rng.random((rest, d - 1)), axis=1)[:, :n_flipped] + 1
    body = np.zeros((rest, d))
    body[:n_ones, 1:] = 1.0
    rows = np.repeat(np.arange(rest), n_flipped)
    body[rows, flips.ravel()] = np.where(rows < n_ones, 0.0, 1.0)
    X[2:] = body
    y[2 : 2 + n_ones] = 0
    y[2 + n_ones :] = 1
    order = rng.permutation(n)
    return X[order], y[order]


def make_synthetic_ii(
    n: int = 30000,
    d: int = 1000,
    n_clusters: int = 30,
    random_state: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Paper 003, Section 3.4, "Synthetic II": the hard case for trees with exactly k leaves.

    ``n_clusters`` random codewords in {-1, 1}^d; each cluster holds copies of its codeword
    with one coordinate set to 0, a different coordinate per point while there are fewer
    points than coordinates (the paper takes n = k * d: every coordinate once). Returns (X, y)
    with y the codeword each point comes from; the codewords are the optimal k-means centers.
    """
    if n_clusters < 1 or d < 1 or n < n_clusters:
        raise ValueError(f"make_synthetic_ii needs n >= n_clusters >= 1 and d >= 1, got n={n}, d={d}, "
                         f"n_clusters={n_clusters}")
    rng = np.random.default_rng(random_state)
    codewords = rng.choice(np.array([-1.0, 1.0]), size=(n_clusters, d))
    y = np.repeat(np.arange(n_clusters), [len(a) for a in np.array_split(np.arange(n), n_clusters)])
    X = codewords[y]
    for c in range(n_clusters):
        rows = np.flatnonzero(y == c)
        # A fresh permutation of the coordinates for every d points of the cluster.
        zeroed = np.concatenate([rng.permutation(d) for _ in range(-(-rows.size // d))])[: rows.size]
        X[rows, zeroed] = 0.0
    return X, y
