"""
A first tree: k-means explained by IMM
======================================

Fit k-means on three blobs, then explain its clusters with IMM's threshold tree (one leaf per
cluster; paper [003]), print the rules and score the tree against the reference clustering.
"""
import numpy as np
from _show import show_figure

import exclust

rng = np.random.default_rng(0)
centers = np.array([[0.0, 0.0], [8.0, 1.0], [1.0, 8.0]])
X = centers[rng.integers(0, 3, 2000)] + rng.normal(size=(2000, 2))

kmeans = exclust.KMeans(n_clusters=3, random_state=0).fit(X)
imm = exclust.IMM(n_clusters=3, random_state=0).fit(X, kmeans.cluster_centers_)
print(imm.tree_.rules_text())

# %%
# The price of explainability is the tree's k-means cost over the reference's: close to 1 here,
# as the blobs are well apart.
scores = exclust.score(imm.tree_, X, reference_labels=kmeans.labels_, centers=kmeans.cluster_centers_)
print({key: scores[key] for key in ("price_kmeans", "error_rate") if key in scores})

# %%
# The tree, as ``exclust.save_figure("tree.png", tree)`` draws it.
show_figure(imm.tree_)
