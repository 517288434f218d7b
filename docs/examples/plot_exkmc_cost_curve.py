"""
ExKMC: more leaves, lower cost
==============================

ExKMC (paper [003] Alg. 1) starts from IMM's k-leaf tree and adds leaves by its surrogate cost.
``exclust.cost_ratio_curve`` prices ExKMC, CART and KDTree at each number of leaves, as in the
paper's Figure 2.
"""
import numpy as np
from _show import show_figure

import exclust

rng = np.random.default_rng(2)
centers = rng.normal(scale=6.0, size=(5, 3))
X = centers[rng.integers(0, 5, 3000)] + rng.normal(scale=1.5, size=(3000, 3))
kmeans = exclust.KMeans(n_clusters=5, random_state=0).fit(X)

curve = exclust.cost_ratio_curve(X, kmeans.cluster_centers_, leaves=[5, 6, 8, 10, 12], sample_rows=3000)
for leaves, exkmc, cart in zip(curve["leaves"], curve["exkmc"], curve["cart"], strict=True):
    print(f"{leaves:3d} leaves: ExKMC {exkmc:.3f}, CART {cart:.3f}")

# %%
# The curve as the report draws it.
show_figure(what="curve", curve=curve)
