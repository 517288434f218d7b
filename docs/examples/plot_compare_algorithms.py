"""
The greedy rules side by side
=============================

IMM, ExGreedy, ExShallow, KDTree and CART build a k-leaf tree from the same k-means clustering;
their prices (tree cost over the reference's) differ, and which is lowest changes with the data
and with k.
"""
import matplotlib.pyplot as plt
import numpy as np

import exclust

rng = np.random.default_rng(3)
centers = rng.normal(scale=4.0, size=(6, 4))
X = centers[rng.integers(0, 6, 3000)] + rng.normal(size=(3000, 4))
kmeans = exclust.KMeans(n_clusters=6, random_state=0).fit(X)
C, labels = kmeans.cluster_centers_, kmeans.labels_

trees = {
    "IMM": exclust.IMM(n_clusters=6, random_state=0).fit(X, C).tree_,
    "ExGreedy": exclust.ExGreedy(n_clusters=6, random_state=0).fit(X, C).tree_,
    "ExShallow": exclust.ExShallow(n_clusters=6, random_state=0).fit(X, C).tree_,
    "KDTree": exclust.KDTree(n_clusters=6, random_state=0).fit(X, C).tree_,
    "CART": exclust.CART(n_clusters=6, random_state=0).fit(X, labels).tree_,
}
prices = {name: exclust.score(tree, X, reference_labels=labels, centers=C, kmedians=False)["price_kmeans"]
          for name, tree in trees.items()}
for name, price in prices.items():
    print(f"{name:10s} price {price:.3f}, depth {trees[name].depth}")

# %%
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(list(prices), list(prices.values()), color="#4b6c9c")
ax.axvline(1.0, color="black", linewidth=0.8)
ax.set_xlim(0.95, max(prices.values()) * 1.02)
ax.set_xlabel("price of explainability (k-means cost over the reference's)")
fig.tight_layout()
