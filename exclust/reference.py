"""The reference clusterings a tree explains, under one name: k-means and a Gaussian mixture.

Each lives in its own module (``kmeans.py``: ``KMeans`` and its k-means|| seeding;
``gaussian_mixture.py``: ``GaussianMixture`` by EM over parts); this module keeps the names that
callers import from ``exclust.reference``.
"""
from __future__ import annotations

from exclust.gaussian_mixture import GaussianMixture
from exclust.kmeans import KMeans, kmeans_parallel_init

__all__ = ["GaussianMixture", "KMeans", "kmeans_parallel_init"]
