"""Concept activation vectors (CAVs): M directions in an embedding, one per human concept.

Paper 000 (Fleissner, Zarvandi, Ghoshdastidar), Section "Explainable Clustering for Deep
Representations", after Kim et al. 2018: concept m is a direction c_m in the embedding, the
weight vector of a linear model that separates rows showing the concept from rows that do not
(``exclust.algorithms.mmdt.cav_fitting.fit_cavs``), or given directly (``from_matrix``). The CAVs are
the rows of C (M x d); a point's concept coordinates are C x (eq. 4), the axes Concept-MMDT cuts.

Unit length. Paper 000 does not scale its CAVs. The trees do not depend on the scale: a row of
C scaled by s scales that axis's means, spread and threshold by s, so the cuts, the partition
and q (eq. 6) are unchanged. Unit rows make a threshold a distance in the embedding, measured
along the concept's direction, and keep concepts with strong and weak classifiers comparable.
The sign is kept: larger coordinates mean "more of the concept" (the binary class with the
larger label value, or a larger continuous value). ``scales`` and ``intercepts`` recover each
linear model: its logit (binary) or prediction (continuous) at x is
``scales[m] * <c_m, x> + intercepts[m]``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from exclust.dataplane import arrays, parts
from exclust.errors import InputError
from exclust.sources.dataset import Dataset

KINDS = ("binary", "continuous")
SCORE_NAMES = {"binary": "accuracy", "continuous": "r2"}
# C is rejected as linearly dependent above this condition number (s_max / s_min). Exact
# duplicates or combinations reach 1e12 and more; M independent directions in d >= M dimensions
# stay far below, even at M = d in the hundreds.
DEFAULT_MAX_CONDITION = 1e6


# --------------------------------------------------------------------------- the CAV matrix
@dataclass(init=False)
class ConceptActivationVectors:
    """M concept activation vectors (rows of ``matrix``, unit length) with their names and scores.

    ``kinds[m]`` is "binary" or "continuous"; ``scores[m]`` is the held-out accuracy (binary)
    or R^2 (continuous) of concept m's linear model, named in ``score_names[m]``. ``scales``
    and ``intercepts`` give the linear model back (see the module docstring); ``n_train`` and
    ``n_test`` count the rows each model was fitted and scored on; ``solver`` says how.
    """

    matrix: np.ndarray
    names: list[str]
    kinds: list[str]
    scores: np.ndarray
    score_names: list[str]
    scales: np.ndarray
    intercepts: np.ndarray
    n_train: np.ndarray
    n_test: np.ndarray
    solver: dict[str, str]

    def __init__(self, matrix: ArrayLike, names: Sequence[str], kinds: Sequence[str], scores: ArrayLike,
                 score_names: Sequence[str], scales: ArrayLike | None = None, intercepts: ArrayLike | None = None,
                 n_train: ArrayLike | None = None, n_test: ArrayLike | None = None,
                 solver: dict[str, str] | None = None) -> None:
        # The values as given (scales, intercepts, n_train, n_test may be None: defaults);
        # __post_init__ checks them into the attributes' types.
        vars(self).update(matrix=matrix, names=names, kinds=kinds, scores=scores, score_names=score_names,
                          scales=scales, intercepts=intercepts, n_train=n_train, n_test=n_test,
                          solver={} if solver is None else solver)
        self.__post_init__()

    def __post_init__(self) -> None:
        self.matrix = np.atleast_2d(np.asarray(self.matrix, dtype=np.float64))
        M, d = self.matrix.shape
        self.names = [str(n) for n in self.names]
        if M == 0 or d == 0:
            raise InputError("a CAV matrix needs at least one concept and one dimension, got shape "
                             f"{self.matrix.shape}")
        if len(self.names) != M or len(set(self.names)) != M:
            raise InputError(f"need {M} distinct concept names for {M} CAVs, got {self.names}")
        if not np.isfinite(self.matrix).all():
            raise InputError("the CAV matrix holds NaN or infinite values")
        norms = np.linalg.norm(self.matrix, axis=1)
        zero = [self.names[m] for m in np.flatnonzero(norms == 0)]
        if zero:
            raise InputError(f"the CAVs of {zero} are zero vectors: those concepts have no direction in the embedding")
        self.matrix = self.matrix / norms[:, None]
        self.kinds = list(self.kinds)
        bad = [k for k in self.kinds if k not in KINDS]
        if len(self.kinds) != M or bad:
            raise InputError(f"kinds must be {M} values out of {KINDS}, got {self.kinds}")
        self.scores = np.asarray(self.scores, dtype=np.float64).reshape(M)
        self.score_names = list(self.score_names)
        for name in ("scales", "intercepts", "n_train", "n_test"):
            value = getattr(self, name)
            if value is None:
                value = np.ones(M) if name == "scales" else np.zeros(M)
            setattr(self, name,
                    np.asarray(value, dtype=np.float64 if name in ("scales", "intercepts") else np.int64).reshape(M))

    @classmethod
    def from_matrix(
        cls,
        matrix,
        names: Sequence[str],
        kinds: Sequence[str] | None = None,
        *,
        max_condition: float = DEFAULT_MAX_CONDITION,
    ) -> ConceptActivationVectors:
        """CAVs fitted elsewhere (rows of ``matrix``); rows are scaled to unit length, scores unknown (NaN)."""
        matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
        M = matrix.shape[0]
        kinds = list(kinds) if kinds is not None else ["continuous"] * M
        cavs = cls(
            matrix=matrix,
            names=list(names),
            kinds=kinds,
            scores=np.full(M, np.nan),
            score_names=[SCORE_NAMES.get(k, "score") for k in kinds],
            scales=np.linalg.norm(matrix, axis=1),
            solver={n: "given" for n in names},
        )
        cavs.check_independent(max_condition)
        return cavs

    @property
    def n_concepts(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def n_features(self) -> int:
        """Dimension of the embedding the CAVs live in."""
        return int(self.matrix.shape[1])

    def singular_values(self) -> np.ndarray:
        """Singular values of C, largest first."""
        return np.linalg.svd(self.matrix, compute_uv=False)

    def condition_number(self) -> float:
        """s_max / s_min of C; infinite when there are more concepts than embedding dimensions."""
        if self.n_concepts > self.n_features:
            return float("inf")
        s = self.singular_values()
        return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")

    def check_independent(self, max_condition: float = DEFAULT_MAX_CONDITION) -> None:
        """Raise InputError, naming the concepts involved, when the CAVs are (nearly) linearly dependent."""
        M, d = self.matrix.shape
        if M > d:
            raise InputError(
                f"{M} concepts {self.names} in a {d}-dimensional embedding: their CAVs are necessarily linearly "
                f"dependent, so some concept's cuts are combinations of others; use at most {d} concepts, or pass "
                "max_condition=numpy.inf to accept dependent concepts"
            )
        u, s, _ = np.linalg.svd(self.matrix, full_matrices=False)
        cond = float(s[0] / s[-1]) if s[-1] > 0 else float("inf")
        if cond > max_condition:
            # The left singular vector of the smallest singular value weighs the concepts whose
            # CAVs (nearly) cancel: sum_m u_m c_m ~ 0.
            weight = np.abs(u[:, -1])
            involved = [self.names[m] for m in np.argsort(-weight) if weight[m] >= 0.1]
            raise InputError(
                f"the CAVs of concepts {involved} are (nearly) linearly dependent (condition number of C "
                f"{cond:.3g} > max_condition {max_condition:.3g}; singular values {np.round(s, 6).tolist()}): "
                "one is a combination of the others, so their cuts would say the same thing; drop one of them "
                "or pass max_condition=numpy.inf to keep them"
            )

    def check_embedding(self, n_features: int, what: str = "X") -> None:
        """Raise InputError when data of ``n_features`` columns is not the embedding the CAVs live in."""
        if int(n_features) != self.n_features:
            raise InputError(
                f"the concept activation vectors live in a {self.n_features}-dimensional embedding but {what} has "
                f"{int(n_features)} columns; fit the CAVs on the same embedding as the data"
            )

    def project(self, X):
        """Concept coordinates C x of every row (eq. 4 of paper 000): numpy in, numpy out; dask in, dask out."""
        if isinstance(X, Dataset):
            X = X.X
        X, distributed = arrays.entering_array(X)
        if not distributed:
            X = X.astype(np.float64, copy=False)
        if X.ndim != 2:
            raise InputError(f"expected a 2-D matrix of embeddings, got shape {X.shape}")
        self.check_embedding(X.shape[1])
        Ct = np.ascontiguousarray(self.matrix.T)
        if not distributed:
            # A row holding NaN or inf projects to NaN, which predict labels -1 (the project's policy for
            # non-finite rows); numpy's "invalid value in matmul" warning would only repeat that.
            with np.errstate(invalid="ignore", over="ignore"):
                return X @ Ct
        return parts.map_rows(_project_block, X, Ct, width=self.n_concepts)

    def to_dict(self) -> dict[str, Any]:
        """Plain lists, for metrics.json, reports and model files."""
        return {
            "names": list(self.names),
            "kinds": list(self.kinds),
            "matrix": self.matrix.tolist(),
            "scores": [None if not np.isfinite(s) else float(s) for s in self.scores],
            "score_names": list(self.score_names),
            "scales": self.scales.tolist(),
            "intercepts": self.intercepts.tolist(),
            "n_train": self.n_train.tolist(),
            "n_test": self.n_test.tolist(),
            "solver": dict(self.solver),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ConceptActivationVectors:
        """Inverse of ``to_dict``."""
        scores = [np.nan if s is None else s for s in doc["scores"]]
        return cls(
            matrix=np.asarray(doc["matrix"], dtype=np.float64),
            names=list(doc["names"]),
            kinds=list(doc["kinds"]),
            scores=np.asarray(scores, dtype=np.float64),
            score_names=list(doc["score_names"]),
            scales=doc.get("scales"),
            intercepts=doc.get("intercepts"),
            n_train=doc.get("n_train"),
            n_test=doc.get("n_test"),
            solver=dict(doc.get("solver", {})),
        )

    def summary_text(self) -> str:
        """One line per concept: name, kind, held-out score, rows used."""
        lines = []
        for m, name in enumerate(self.names):
            score = "n/a" if not np.isfinite(self.scores[m]) else f"{self.scores[m]:.3f}"
            lines.append(
                f"{name}: {self.kinds[m]}, held-out {self.score_names[m]} {score} "
                f"({self.n_train[m]} rows to fit, {self.n_test[m]} to score; {self.solver.get(name, '?')})"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"ConceptActivationVectors(names={self.names}, n_features={self.n_features})"


def _project_block(block: np.ndarray, Ct: np.ndarray) -> np.ndarray:
    return block @ Ct
