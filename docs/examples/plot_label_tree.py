"""
Any clustering's labels: LabelTree
==================================

LabelTree needs labels only: here DBSCAN's, whose noise (-1) gets no leaf and is not counted. It
searches the tree with the fewest mistakes against the labels, a leaf for every cluster.
"""
import numpy as np
from _show import show_figure
from sklearn.cluster import DBSCAN

import exclust

rng = np.random.default_rng(4)
centers = np.array([[0.0, 0.0], [6.0, 0.0], [3.0, 6.0]])
X = np.vstack([centers[rng.integers(0, 3, 900)] + rng.normal(scale=0.8, size=(900, 2)),
               rng.uniform(-3, 9, size=(60, 2))])
labels = DBSCAN(eps=0.6, min_samples=10).fit_predict(X)
k = int(labels.max()) + 1
print(f"DBSCAN: {k} clusters, {int((labels == -1).sum())} noise rows")

tree = exclust.LabelTree(n_clusters=k, random_state=0).fit(X, labels)
print(tree.tree_.rules_text())
print(f"mistakes on the clustered rows: {tree.mistakes_}")

# %%
show_figure(tree.tree_)
