"""
MMDT: a Gaussian mixture explained from its means and variances
===============================================================

MMDT (paper [000] Alg. 1; paper [002] Alg. 1 with the exact threshold rule) grows its tree from the
mixture's summary alone, without another pass over the data. The scatter plot shows a sample of
rows with the tree's cuts.
"""
import numpy as np
from _show import show_figure

import exclust

X, truth, _ = exclust.make_gmm_dataset(n_samples=3000, n_components=4, n_features=2, random_state=1)
gmm = exclust.GaussianMixture(n_components=4, random_state=0).fit(X)
summary = exclust.MixtureSummary.from_gmm(gmm, feature_names=["x0", "x1"])
mmdt = exclust.MMDT(threshold="exact", n_clusters=4, random_state=0).fit(summary)
print(mmdt.tree_.rules_text())
print(f"explainability-to-noise ratio: {mmdt.enr_:.2f}")

# %%
# A sample of the rows, coloured by the tree's cluster, with its cuts.
sample = X[np.random.default_rng(0).choice(len(X), 600, replace=False)]
show_figure(mmdt.tree_, what="scatter", sample=sample)
