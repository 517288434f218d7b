"""Concept-MMDT: explain clusters of deep representations with cuts on human concepts.

Paper 000 (Fleissner, Zarvandi, Ghoshdastidar), Section "Explainable Clustering for Deep
Representations" and Algorithm 2. Latent coordinates of a neural network are not features a
person can read, so the tree is grown in another coordinate system: one axis per concept
(loops, stripes, "red", ...), given by a concept activation vector (CAV, Kim et al. 2018):

1. ``fit_cavs`` (``cav_fitting.py``): one unit-length direction c_m per concept, the rows of C
   (M x d) held by ``ConceptActivationVectors`` (``cavs.py``).
2. ``ConceptMMDT``: the base clustering in the embedding is summarized as a ``MixtureSummary``
   (a fitted Gaussian mixture's own parameters, or one statistics pass over given labels); its
   means become mu_bar_k = C mu_k, and the spread on concept axis m becomes
   sigma_bar_m^2 = c_m' Sigma c_m with Sigma the pooled within-component covariance (eq. 5);
   MMDT runs on those, so every cut reads "concept m <= t". A point is routed by projecting it,
   x -> C x (eq. 4). Its explainability-to-noise ratio is eq. 6.
3. ``ConceptCART``: the paper's baseline, CART on the projected points C x and the base labels.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from exclust.algorithms.mmdt.cav_fitting import fit_cavs
from exclust.algorithms.mmdt.cavs import ConceptActivationVectors
from exclust.algorithms.mmdt.mmdt import THRESHOLDS
from exclust.dataplane import arrays
from exclust.errors import InputError, ParameterError
from exclust.estimator import RANDOM_STATE, Interval, StrOptions, TreeExplainer
from exclust.reference.summary import MixtureSummary
from exclust.sources.dataset import Dataset, as_matrix

__all__ = ["ConceptMMDT", "ConceptCART", "concept_summary", "ConceptActivationVectors", "fit_cavs"]


# --------------------------------------------------------------------------- the base clustering
def _check_cavs(cavs: Any) -> ConceptActivationVectors:
    if not isinstance(cavs, ConceptActivationVectors):
        raise InputError(
            f"cavs must be ConceptActivationVectors (from exclust.fit_cavs or ConceptActivationVectors.from_matrix), "
            f"got {type(cavs).__name__}"
        )
    return cavs


def _labels_vector(labels, n: int):
    labels, _ = arrays.entering_array(labels.to_numpy() if hasattr(labels, "to_numpy") else labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise InputError(f"labels must be one cluster number per row ({n}), got shape {labels.shape}")
    return labels


def _fit_base_mixture(X, n_components, covariance_type, n_init, random_state):
    """(MixtureSummary of a Gaussian mixture fitted in the embedding, its labels, a description, the mixture)."""
    from exclust.dataplane.stats import cluster_statistics
    from exclust.reference import GaussianMixture

    if n_components is None:
        raise InputError("give n_components (the number of clusters) or labels of a base clustering")
    gmm = GaussianMixture(
        n_components=n_components, covariance_type=covariance_type, n_init=n_init, random_state=random_state
    ).fit(X)
    labels = gmm.predict(X)
    if gmm.covariance_type == "full":
        # The mixture's own covariances: no pass over the data.
        return MixtureSummary.from_gmm(gmm), labels, "gaussian mixture (full covariances)", gmm
    # A diagonal model ignores within-component correlations, but a CAV mixes latent axes, so
    # c' Sigma c needs them: one statistics pass with full scatter on the mixture's labels.
    stats = cluster_statistics(X, labels, n_components, full_scatter=True)
    covariances = np.array(stats.covariances, dtype=np.float64)
    covariances[np.asarray(stats.counts) == 0] = 0.0  # empty clusters carry zero weight in the pool
    latent = MixtureSummary(
        means=gmm.means_,
        weights=gmm.weights_,
        sigma_per_component=np.sqrt(np.maximum(np.einsum("kjj->kj", covariances), 0.0)),
        covariances=covariances,
        counts=stats.counts,
    )
    return latent, labels, "gaussian mixture (means), covariances from its hard labels", gmm


def _summarize_labels(X, labels, n_components) -> MixtureSummary:
    """MixtureSummary of the given base labels (one statistics pass); they must number the clusters 0..K-1."""
    latent = MixtureSummary.from_labels(Dataset(X=X, feature_names=[f"x{j}" for j in range(X.shape[1])]), labels)
    present = [int(v) for v in latent.meta["labels"]]
    expected = range(max(int(n_components or 0), max(present) + 1))
    empty = sorted(set(expected) - set(present))
    if empty or min(present) < 0:
        raise InputError(
            f"clusters {empty} have no rows; labels must number the clusters 0..K-1 without gaps "
            "(relabel with numpy.unique(labels, return_inverse=True))"
        )
    if latent.n_components < 2:
        raise InputError("the labels hold a single cluster; a tree needs at least two")
    return latent


def concept_summary(cavs: ConceptActivationVectors, latent: MixtureSummary) -> MixtureSummary:
    """The mixture in concept coordinates (paper 000 eqs. 4-5), as a MixtureSummary named by concept.

    ``latent`` is the base mixture in the embedding, with its per-component covariances. Means
    C mu_k; per-axis sigma_bar_m = sqrt(c_m' Sigma c_m) with Sigma = sum_k p_k Sigma_k the pooled
    within-component covariance; per-component sigma_km = sqrt(c_m' Sigma_k c_m) (for the
    ``exact`` threshold of paper 002, which lets each component keep its own spread); and the
    projected covariances C Sigma_k C'.
    """
    if latent.covariances is None:
        raise InputError("the base mixture needs its per-component covariances (covariances=...) to be projected")
    C = cavs.matrix
    projected = np.einsum("md,kde,ne->kmn", C, latent.covariances, C)
    per_component = np.sqrt(np.maximum(np.einsum("kmm->km", projected), 0.0))
    sigma = np.sqrt(np.maximum(np.einsum("md,de,me->m", C, _pooled_covariance(latent), C), 0.0))
    return MixtureSummary(
        means=latent.means @ C.T,
        sigma=sigma,
        weights=latent.weights,
        sigma_per_component=per_component,
        covariances=projected,
        feature_names=list(cavs.names),
        counts=latent.counts,
    )


def _pooled_covariance(latent: MixtureSummary) -> np.ndarray:
    """Sigma = sum_k p_k Sigma_k, the within-component covariance pooled over components."""
    assert latent.covariances is not None  # the base mixture's summary keeps full covariances
    return np.einsum("k,kde->de", latent.weights, latent.covariances)


def _named_tree(tree, names: Sequence[str], meta: Mapping[str, Any]):
    """The same tree with concept names as feature names and extra metadata."""
    from exclust.tree import ThresholdTree

    doc = tree.to_dict()
    doc["feature_names"] = list(names)
    doc["meta"] = {**doc.get("meta", {}), **meta}
    return ThresholdTree.from_dict(doc)


# --------------------------------------------------------------------------- estimators
_COMMON_CONSTRAINTS = {
    "cavs": [ConceptActivationVectors],
    "n_components": [None, Interval(Integral, 1, None, closed="left")],
    "n_clusters": [None, Interval(Integral, 1, None, closed="left")],
    "covariance_type": [StrOptions({"full", "diag"})],
    "n_init": [Interval(Integral, 1, None, closed="left")],
    "random_state": RANDOM_STATE,
}


class _ConceptTree(TreeExplainer):
    """What both concept estimators share: rows are projected onto the CAVs before the tree routes them."""

    _numbers_only = "fits a mixture over numbers"  # an embedding: category features and NaN refused at fit

    def _n_clusters(self) -> int | None:
        """The number of clusters of the base mixture: ``n_clusters`` or its mixture's name ``n_components``
        (either may be given; both only when they agree)."""
        given = {v for v in (self.n_components, self.n_clusters) if v is not None}
        if len(given) > 1:
            raise ParameterError(f"n_clusters={self.n_clusters} and n_components={self.n_components} name the number "
                                 "of clusters twice, differently; give one of them")
        return given.pop() if given else None

    def transform(self, X):
        """Concept coordinates C x of the embeddings X (numpy or dask)."""
        return _check_cavs(self.cavs).project(X)

    def _tree_input(self, X):
        # A row holding inf in the embedding can project to NaN (inf - inf), which the tree would route
        # as a missing value; it stays unroutable (label -1), as a row holding inf is everywhere.
        coords = self.transform(X)
        held_inf = np.isinf(X).any(axis=1)
        return np.where(held_inf[:, None], np.inf, coords)

    def _embedding(self, X):
        """The validated embedding matrix of X, checked against the CAVs' dimension."""
        cavs = _check_cavs(self.cavs)
        data = as_matrix(X, n_clusters=self._n_clusters())
        cavs.check_embedding(data.n_features)
        return cavs, data.X


class ConceptMMDT(_ConceptTree):
    """Concept-MMDT (paper 000, Algorithm 2): MMDT on the mixture projected onto concept activation vectors.

    Parameters
    ----------
    cavs : ConceptActivationVectors
        The concepts (``fit_cavs``); their names become the tree's feature names.
    n_components : int or None, default=None
        Clusters of the base Gaussian mixture fitted in the embedding when ``fit`` gets no labels.
    threshold : {"exact", "gaussian", "chebyshev", "midpoint", "random"}, default="exact"
        MMDT's threshold rule.
    covariance_type : {"full", "diag"}, default="full"
        Passed to the base ``exclust.GaussianMixture``.
    n_init : int, default=1
        Restarts of the base ``exclust.GaussianMixture``.
    random_state : None, int or numpy Generator, default=None
        Seeds the base mixture and MMDT's tie breaks.
    n_clusters : int or None, default=None
        The same as ``n_components`` (exclust's name for a number of clusters); give either.

    Passes over X in ``fit``: with labels, a validation pass (dask input) and one statistics
    pass (per-cluster counts, sums and full scatter, for the means and Sigma); without labels,
    those of the Gaussian mixture's fit, whose own means, weights and covariances are used (a
    ``covariance_type="diag"`` mixture ignores within-component correlations that a CAV mixes
    in, so one statistics pass with full scatter on its labels is added). Growing the tree
    itself touches no data.

    Attributes
    ----------
    tree_ : ThresholdTree over the concept names, K leaves, leaf k = base cluster k.
    summary_ : the MixtureSummary in concept coordinates that MMDT was grown from.
    latent_means_, latent_covariance_ : base means (K x d) and pooled covariance Sigma (d x d).
    enr_ : the concept-space explainability-to-noise ratio, paper 000 eq. 6 (with its factor 2:
        min_{k != l} max_m (c_m'(mu_k - mu_l))^2 / (2 c_m' Sigma c_m)).
    reference_labels_ : the base clustering's label of every row (numpy or dask, as X).
    mixture_ : the fitted base GaussianMixture (None when labels were given).
    mmdt_ : the inner MMDT (``node_diagnostics_`` per cut).
    """

    _parameter_constraints = {**_COMMON_CONSTRAINTS, "threshold": [StrOptions(set(THRESHOLDS))]}

    def __init__(
        self,
        cavs: ConceptActivationVectors,
        n_components: int | None = None,
        threshold: str = "exact",
        covariance_type: str = "full",
        n_init: int = 1,
        random_state: Any = None,
        *,
        n_clusters: int | None = None,
    ) -> None:
        self.cavs = cavs
        self.n_components = n_components
        self.n_clusters = n_clusters
        self.threshold = threshold
        self.covariance_type = covariance_type
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, labels=None) -> ConceptMMDT:
        """Fit (or summarize) the base clustering in the embedding X, project it onto the CAVs, grow MMDT."""
        from exclust.algorithms.mmdt.mmdt import MMDT

        self._check_params()
        X = self._fit_input(X)
        embedding_names = (
            list(X.feature_names) if isinstance(X, Dataset) else [f"x{j}" for j in range(self.cavs.n_features)]
        )
        cavs, X = self._embedding(X)
        if labels is None:
            latent, labels, source, mixture = _fit_base_mixture(
                X, self._n_clusters(), self.covariance_type, self.n_init, self.random_state
            )
        else:
            labels = _labels_vector(labels, X.shape[0])
            latent, source, mixture = _summarize_labels(X, labels, self._n_clusters()), "labels", None
        summary = concept_summary(cavs, latent)
        mmdt = MMDT(threshold=self.threshold, random_state=self.random_state).fit(summary)
        self.enr_ = mmdt.enr_ / 2.0  # MMDT reports paper 002's convention; eq. 6 of paper 000 halves it
        self.enr_convention_ = "paper000"
        self.tree_ = _named_tree(
            mmdt.tree_,
            cavs.names,
            {
                "algorithm": "concept-mmdt",
                "reference": "paper 000 Alg. 2 (MMDT " + mmdt.tree_.meta.get("reference", "") + ")",
                "base_clustering": source,
                "concept_kinds": dict(zip(cavs.names, cavs.kinds, strict=True)),
                "cav_scores": {n: (None if not np.isfinite(s) else float(s))
                               for n, s in zip(cavs.names, cavs.scores, strict=True)},
                "enr_paper000_eq6": self.enr_,
                # Saved so that a tree file alone can label new embeddings (exclust label projects first).
                "concept_activation_vectors": cavs.to_dict(),
                "embedding_features": embedding_names,
            },
        )
        self.summary_ = summary
        self.mmdt_ = mmdt
        self.node_diagnostics_ = mmdt.node_diagnostics_
        self.latent_means_ = latent.means
        self.latent_covariance_ = _pooled_covariance(latent)
        self.reference_labels_ = labels
        self.mixture_ = mixture
        self.n_features_in_ = cavs.n_features
        return self

    def fit_predict(self, X, labels=None):
        """Fit, then the tree's cluster of every row of X."""
        return self.fit(X, labels).predict(X)


class ConceptCART(_ConceptTree):
    """Concept-CART, paper 000's baseline: CART in concept coordinates C x, trained on the base labels.

    ``fit(X, labels)`` uses the given base labels; without labels a Gaussian mixture with
    ``n_components`` is fitted in the embedding first (as ``ConceptMMDT`` does). The tree has
    ``max_leaf_nodes`` leaves (default: the number of clusters, as in the paper's comparison).

    Parameters
    ----------
    cavs : ConceptActivationVectors
        The concepts (``fit_cavs``); their names become the tree's feature names.
    max_leaf_nodes : int or None, default=None
        Leaves of the tree; None: one per cluster.
    n_components : int or None, default=None
        Clusters of the base Gaussian mixture fitted in the embedding when ``fit`` gets no labels.
    covariance_type : {"full", "diag"}, default="full"
        Passed to the base ``exclust.GaussianMixture``.
    n_init : int, default=1
        Restarts of the base ``exclust.GaussianMixture``.
    random_state : None, int or numpy Generator, default=None
        Seeds the base mixture and CART.
    n_clusters : int or None, default=None
        The same as ``n_components`` (exclust's name for a number of clusters); give either.

    Fitted: ``tree_`` (over the concept names), ``reference_labels_``, ``mixture_``, ``cart_``.
    """

    _parameter_constraints = {**_COMMON_CONSTRAINTS,
                              "max_leaf_nodes": [None, Interval(Integral, 2, None, closed="left")]}

    def __init__(
        self,
        cavs: ConceptActivationVectors,
        max_leaf_nodes: int | None = None,
        n_components: int | None = None,
        covariance_type: str = "full",
        n_init: int = 1,
        random_state: Any = None,
        *,
        n_clusters: int | None = None,
    ) -> None:
        self.cavs = cavs
        self.max_leaf_nodes = max_leaf_nodes
        self.n_components = n_components
        self.n_clusters = n_clusters
        self.covariance_type = covariance_type
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, labels=None) -> ConceptCART:
        """Project X onto the CAVs and fit CART to the base labels there."""
        from exclust.algorithms.cart import CART

        self._check_params()
        cavs, X = self._embedding(self._fit_input(X))
        mixture = None
        if labels is None:
            _, labels, _, mixture = _fit_base_mixture(
                X, self._n_clusters(), self.covariance_type, self.n_init, self.random_state
            )
            n_clusters = int(mixture.n_components)  # the mixture fitted with ours
        else:
            labels = _labels_vector(labels, X.shape[0])
            n_clusters = None
        Z = cavs.project(X)
        max_leaves = self.max_leaf_nodes
        if max_leaves is None:
            if n_clusters is None:
                top = labels.max()
                n_clusters = int(arrays.to_memory(top)) + 1
            max_leaves = n_clusters
        cart = CART(max_leaf_nodes=max_leaves, random_state=self.random_state).fit(
            Dataset(X=Z, feature_names=list(cavs.names)), labels
        )
        self.tree_ = _named_tree(
            cart.tree_, cavs.names,
            {"algorithm": "concept-cart", "reference": "paper 000 Table 2 baseline (CART on C x)"}
        )
        self.cart_ = cart
        self.mixture_ = mixture
        self.reference_labels_ = labels
        self.n_features_in_ = cavs.n_features
        return self


def concept_vectors_for_run(data: Dataset, config: Any) -> dict[str, ConceptActivationVectors]:
    """``cavs``, ConceptMMDT's concept activation vectors for an explain run (its registry entry's
    ``prepare``): one per concept label column ``config.concepts`` of ``data`` (paper 000 Alg. 2,
    step 1). A missing string label (coded -1 on load) is unlabelled (NaN)."""
    concepts = {}
    for column in config.concepts:
        labels = data.extra[column]
        if column in data.category_names:
            labels = arrays.array_module(data.distributed).where(labels < 0, np.nan, labels)
        concepts[column] = labels
    return {"cavs": fit_cavs(data, concepts, random_state=config.random_state)}
