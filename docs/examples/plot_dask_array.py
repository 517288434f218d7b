"""
The same tree from a Dask array
===============================

A Dask array is read in parts (here by Dask's threads; on a cluster, by its workers): the
estimators build the same tree as from numpy, counting their passes over the data.
"""
import dask.array as da
import numpy as np

import exclust

rng = np.random.default_rng(5)
centers = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [0.0, 5.0, 5.0], [5.0, 0.0, 5.0]])
X = centers[rng.integers(0, 4, 4000)] + rng.normal(size=(4000, 3))
X_dask = da.from_array(X, chunks=(1000, 3))

in_memory = exclust.ExShallow(n_clusters=4, random_state=0).fit(X, centers)
on_dask = exclust.ExShallow(n_clusters=4, random_state=0).fit(X_dask, centers)
print(on_dask.tree_.rules_text())
print("same tree:", in_memory.tree_.to_dict()["nodes"] == on_dask.tree_.to_dict()["nodes"])
print("passes over the Dask array:", on_dask.n_passes_)

# %%
# Labels of a Dask array stay lazy until computed.
labels = on_dask.predict(X_dask)
print(type(labels).__name__, np.bincount(np.asarray(labels.compute())))
