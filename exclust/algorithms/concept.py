"""Concept-MMDT: explain clusters of deep representations with cuts on human concepts.

Paper 000 (Fleissner, Zarvandi, Ghoshdastidar), Section "Explainable Clustering for Deep
Representations" and Algorithm 2. Latent coordinates of a neural network are not features a
person can read, so the tree is grown in another coordinate system: one axis per concept
(loops, stripes, "red", ...), given by a concept activation vector (CAV, Kim et al. 2018):

1. ``fit_cavs``: for each concept, a linear model on the embeddings separates rows that show
   the concept from rows that do not (binary concept: logistic regression) or predicts its
   strength (continuous concept: least squares). Its weight vector, scaled to unit length, is
   the CAV c_m; the CAVs are the rows of C (M x d).
2. ``ConceptMMDT``: the mixture's means become mu_bar_k = C mu_k, and the spread on concept
   axis m becomes sigma_bar_m^2 = c_m' Sigma c_m with Sigma the pooled within-component
   covariance (eq. 5); MMDT runs on those, so every cut reads "concept m <= t". A point is
   routed by projecting it, x -> C x (eq. 4). Its explainability-to-noise ratio is eq. 6.
3. ``ConceptCART``: the paper's baseline, CART on the projected points C x and the base labels.

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

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from exclust._kernels_concept import accumulate_concept_grams
from exclust.data import Dataset, InputError, as_matrix, is_dask_array
from exclust.stats import map_reduce

KINDS = ("binary", "continuous")
SCORE_NAMES = {"binary": "accuracy", "continuous": "r2"}

# Rows held out for each CAV's score, and the most rows (per binary concept) that are sampled
# to fit a logistic regression on the driver: a CAV is a d-vector, and a few hundred thousand
# rows fix its direction far beyond what the concept labels themselves are worth.
DEFAULT_TEST_FRACTION = 0.2
DEFAULT_MAX_SAMPLE_ROWS = 200_000
# C is rejected as linearly dependent above this condition number (s_max / s_min). Exact
# duplicates or combinations reach 1e12 and more; M independent directions in d >= M dimensions
# stay far below, even at M = d in the hundreds.
DEFAULT_MAX_CONDITION = 1e6


# --------------------------------------------------------------------------- the CAV matrix
@dataclass
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
    scales: np.ndarray | None = None
    intercepts: np.ndarray | None = None
    n_train: np.ndarray | None = None
    n_test: np.ndarray | None = None
    solver: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.matrix = np.atleast_2d(np.asarray(self.matrix, dtype=np.float64))
        M, d = self.matrix.shape
        self.names = [str(n) for n in self.names]
        if M == 0 or d == 0:
            raise InputError(f"a CAV matrix needs at least one concept and one dimension, got shape {self.matrix.shape}")
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
            setattr(self, name, np.asarray(value, dtype=np.float64 if name in ("scales", "intercepts") else np.int64).reshape(M))

    @classmethod
    def from_matrix(
        cls,
        matrix,
        names: Sequence[str],
        kinds: Sequence[str] | None = None,
        *,
        max_condition: float = DEFAULT_MAX_CONDITION,
    ) -> "ConceptActivationVectors":
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
        if not is_dask_array(X):
            X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise InputError(f"expected a 2-D matrix of embeddings, got shape {X.shape}")
        self.check_embedding(X.shape[1])
        Ct = np.ascontiguousarray(self.matrix.T)
        if not is_dask_array(X):
            return X @ Ct
        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        return X.map_blocks(_project_block, Ct, dtype=np.float64, chunks=(X.chunks[0], (self.n_concepts,)))

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
    def from_dict(cls, doc: Mapping[str, Any]) -> "ConceptActivationVectors":
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


# --------------------------------------------------------------------------- row hashing
_MASK53 = float(2**-53)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _row_uniform(rows: np.ndarray, seed: int, stream: int) -> np.ndarray:
    """A uniform number in [0, 1) per global row index, the same however the rows are chunked.

    Held-out rows and sampled rows are decided by these, so numpy and dask inputs (with any
    partitioning) fit the same CAVs.
    """
    key = _splitmix64(np.array([seed * 4 + stream], dtype=np.uint64))[0]
    z = _splitmix64(np.asarray(rows, dtype=np.uint64) ^ key)
    return (z >> np.uint64(11)).astype(np.float64) * _MASK53


def _seed_from(random_state: Any) -> int:
    if isinstance(random_state, (int, np.integer)):
        return int(random_state) & 0x7FFFFFFFFFFFFFFF
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    return int(rng.integers(0, 2**62))


# --------------------------------------------------------------------------- pass 1: the labels
@dataclass
class _LabelScan:
    """Per concept: labelled rows, infinite values, and up to three distinct values (sorted)."""

    n_valid: np.ndarray
    n_infinite: np.ndarray
    distinct: list[np.ndarray]

    def __add__(self, other: "_LabelScan") -> "_LabelScan":
        return _LabelScan(
            self.n_valid + other.n_valid,
            self.n_infinite + other.n_infinite,
            [np.union1d(a, b)[:3] for a, b in zip(self.distinct, other.distinct)],
        )


def _first_distinct(values: np.ndarray, limit: int = 3) -> np.ndarray:
    """Up to ``limit`` distinct values (sorted), in linear time: enough to tell binary from continuous."""
    found = []
    while values.size and len(found) < limit:
        found.append(values[0])
        values = values[values != values[0]]
    return np.sort(np.asarray(found, dtype=np.float64))


def _label_scan_block(Y: np.ndarray) -> _LabelScan:
    Y = np.asarray(Y, dtype=np.float64)
    finite = np.isfinite(Y)
    infinite = np.isinf(Y)
    distinct = [_first_distinct(Y[finite[:, m], m]) for m in range(Y.shape[1])]
    return _LabelScan(finite.sum(axis=0), infinite.sum(axis=0), distinct)


# --------------------------------------------------------------------------- pass 2: the embeddings
@dataclass
class _ConceptPass:
    """Gram matrices of [x, 1, y] per continuous concept and fold, and the sample for binary ones."""

    grams: np.ndarray  # (n_continuous, 2, d + 2, d + 2), upper triangles; fold 0 = fit, 1 = held out
    sample_X: np.ndarray  # (s, d)
    sample_Y: np.ndarray  # (s, n_binary), NaN where the row is not in that concept's sample
    sample_test: np.ndarray  # (s,) bool

    def __add__(self, other: "_ConceptPass") -> "_ConceptPass":
        return _ConceptPass(
            self.grams + other.grams,
            np.concatenate([self.sample_X, other.sample_X]),
            np.concatenate([self.sample_Y, other.sample_Y]),
            np.concatenate([self.sample_test, other.sample_test]),
        )


def _concept_pass_block(
    X: np.ndarray,
    Y: np.ndarray,
    rows: np.ndarray,
    continuous: np.ndarray,
    binary: np.ndarray,
    rates: np.ndarray,
    seed: int,
    test_fraction: float,
) -> _ConceptPass:
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    n, d = X.shape
    test = _row_uniform(rows, seed, 0) < test_fraction
    grams = accumulate_concept_grams(np.ascontiguousarray(X), np.ascontiguousarray(Y), test, continuous)
    if binary.size:
        u = _row_uniform(rows, seed, 1)
        Yb = Y[:, binary]
        keep = np.isfinite(Yb) & (u[:, None] < rates[None, :])
        rows_kept = keep.any(axis=1)
        sample_Y = np.where(keep, Yb, np.nan)[rows_kept]
        return _ConceptPass(grams, X[rows_kept], sample_Y, test[rows_kept])
    return _ConceptPass(grams, np.empty((0, d)), np.empty((0, 0)), np.empty(0, dtype=bool))


# --------------------------------------------------------------------------- fitting the CAVs
def _concept_columns(concepts: Mapping[str, Any], n: int, X) -> tuple[list[str], Any]:
    """The concept labels as one (n x M) float matrix, numpy or dask aligned with X's rows."""
    names = [str(k) for k in concepts]
    if len(set(names)) != len(names):
        raise InputError(f"concept names must be distinct, got {names}")
    lazy = is_dask_array(X)
    columns = []
    for name, values in zip(names, concepts.values()):
        if is_dask_array(values):
            col = values
        else:
            col = np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)
        if col.dtype.kind not in "biuf":
            raise InputError(
                f"concept {name!r} has labels of dtype {col.dtype}; give 0/1 (binary) or numbers (continuous), "
                "NaN where a row is unlabelled"
            )
        if col.ndim != 1 or col.shape[0] != n:
            raise InputError(f"concept {name!r} needs one label per row ({n}), got shape {tuple(col.shape)}")
        if is_dask_array(col) and not lazy:
            col = col.compute()  # one value per row, the size of a single embedding column
        columns.append(col.astype(np.float64))
    if not lazy:
        return names, np.column_stack(columns)
    import dask.array as da

    rows = X.chunks[0]
    lazy_cols = [c.rechunk(rows) if is_dask_array(c) else da.from_array(c, chunks=rows) for c in columns]
    return names, da.stack(lazy_cols, axis=1).rechunk({0: rows, 1: -1})


def _resolve_kinds(names: list[str], kinds: Mapping[str, str] | None, scan: _LabelScan) -> list[str]:
    kinds = dict(kinds or {})
    unknown = sorted(set(kinds) - set(names))
    if unknown:
        raise InputError(f"kinds given for unknown concept(s) {unknown}; concepts are {names}")
    out = []
    for m, name in enumerate(names):
        kind = kinds.get(name, "auto")
        if kind not in KINDS + ("auto",):
            raise InputError(f"kind of concept {name!r} must be 'binary', 'continuous' or 'auto', not {kind!r}")
        if scan.n_infinite[m]:
            raise InputError(f"concept {name!r} has {int(scan.n_infinite[m])} infinite label(s); use NaN for unlabelled rows")
        values = scan.distinct[m]
        if scan.n_valid[m] == 0:
            raise InputError(f"concept {name!r} has no labelled rows (all NaN)")
        if values.size == 1:
            raise InputError(
                f"concept {name!r} has one class only (every labelled row is {values[0]:g}); a CAV needs rows with "
                "and without the concept (or varying values), so add counter-examples or drop the concept"
            )
        if kind == "auto":
            kind = "binary" if values.size == 2 else "continuous"
        elif kind == "binary" and values.size > 2:
            raise InputError(
                f"concept {name!r} is declared binary but has more than two distinct labels ({values.tolist()}...); "
                "give two classes (e.g. 0/1) or declare it continuous"
            )
        out.append(kind)
    return out


def _fit_continuous(name: str, grams: np.ndarray, d: int, min_rows: int) -> tuple[np.ndarray, float, float, int, int]:
    """Least squares from the Gram matrices of [x, 1, y]; returns (w, b, held-out R^2, n fit, n held out)."""
    fit, held = grams
    n_fit, n_held = int(round(fit[d, d])), int(round(held[d, d]))
    if n_fit < max(min_rows, 2) or n_held < 2:
        raise InputError(
            f"concept {name!r} has too few labelled rows ({n_fit} to fit, {n_held} held out) for a CAV with a "
            "held-out score; label more rows or change test_fraction"
        )
    mean_x = fit[:d, d] / n_fit
    mean_y = fit[d, d + 1] / n_fit
    cxx = fit[:d, :d] - n_fit * np.outer(mean_x, mean_x)
    cxy = fit[:d, d + 1] - n_fit * mean_x * mean_y
    w = np.linalg.lstsq(cxx, cxy, rcond=None)[0]
    b = mean_y - mean_x @ w
    # Held-out residuals from the held-out Gram: ||y - Xw - b||^2 expanded.
    sxx, sx, sxy = held[:d, :d], held[:d, d], held[:d, d + 1]
    sy, syy = held[d, d + 1], held[d + 1, d + 1]
    sse = syy - 2 * (w @ sxy) - 2 * b * sy + w @ sxx @ w + 2 * b * (w @ sx) + n_held * b * b
    sst = syy - sy * sy / n_held
    r2 = float(1.0 - sse / sst) if sst > 0 else float("nan")
    return w, float(b), r2, n_fit, n_held


def _fit_binary(
    name: str, X: np.ndarray, y: np.ndarray, test: np.ndarray, logistic_C: float, min_rows: int
) -> tuple[np.ndarray, float, float, int, int]:
    """Logistic regression on the sampled rows; returns (w, b, held-out accuracy, n fit, n held out)."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    classes = np.unique(y)
    positive = y == classes[-1]  # the larger label means "concept present"
    fit, held = ~test, test
    n_fit, n_held = int(fit.sum()), int(held.sum())
    fit_classes = np.unique(positive[fit])
    if n_fit < min_rows or n_held < 1 or fit_classes.size < 2:
        raise InputError(
            f"concept {name!r} has too few labelled rows of each class ({n_fit} to fit, with classes "
            f"{[classes[int(c)] for c in fit_classes]}; {n_held} held out) for a CAV with a held-out score; "
            "label more rows of the rarer class or change test_fraction"
        )
    model = LogisticRegression(C=logistic_C, max_iter=2000)
    # The sample is small and each lbfgs step is a memory-bound matrix-vector product: BLAS
    # threads cost more than they save there (4x slower on a busy 2-core driver).
    with threadpool_limits(limits=1, user_api="blas"):
        model.fit(X[fit], positive[fit])
    accuracy = float((model.predict(X[held]) == positive[held]).mean())
    return model.coef_[0].astype(np.float64), float(model.intercept_[0]), accuracy, n_fit, n_held


def fit_cavs(
    embeddings,
    concepts: Mapping[str, Any],
    *,
    kinds: Mapping[str, str] | None = None,
    test_fraction: float = DEFAULT_TEST_FRACTION,
    max_sample_rows: int = DEFAULT_MAX_SAMPLE_ROWS,
    logistic_C: float = 1.0,
    min_rows: int = 10,
    max_condition: float = DEFAULT_MAX_CONDITION,
    random_state: Any = 0,
) -> ConceptActivationVectors:
    """Fit one concept activation vector per concept on the embeddings (numpy or dask).

    ``concepts`` maps a concept name to one label per row of ``embeddings`` (numpy, pandas or
    dask, aligned with the rows); NaN marks a row unlabelled for that concept, and such rows are
    ignored for it. A concept with two distinct labels is binary (the larger label means "present",
    so 0/1, -1/+1 and False/True all work) and gets a logistic regression (inverse regularization
    ``logistic_C``); one with more values is continuous and gets least squares. ``kinds`` can
    force "binary" or "continuous" per concept.

    A fraction ``test_fraction`` of the rows, drawn by hashing each row's index with
    ``random_state`` (so any chunking of the same rows gives the same split), is held out; the
    CAV is the model fitted on the rest, and ``scores`` holds its held-out accuracy or R^2.

    Passes over the data: two. The first reads the concept labels only (labelled rows and
    distinct values per concept). The second reads embeddings and labels together, chunk by
    chunk: a continuous concept's least squares is solved exactly from the summed Gram matrices
    of [x, 1, y] (the normal equations, one (d+2) x (d+2) matrix per concept and fold; the
    held-out R^2 comes from the held-out fold's Gram matrix); for a binary concept each chunk
    keeps a random sample of its labelled rows (at most ``max_sample_rows`` per concept in all,
    chosen by row hash on the workers), and the logistic regression is fitted on that bounded
    sample on the driver (scikit-learn, lbfgs). Below ``max_sample_rows`` labelled rows the sample
    is every labelled row, so numpy and dask give the same CAVs.

    Raises InputError for no concepts, a concept with one class only, labels not aligned with the
    rows, too few labelled rows, and (nearly) linearly dependent CAVs (condition number of C above
    ``max_condition``, naming the concepts; pass ``numpy.inf`` to accept them).
    """
    if not 0.0 < float(test_fraction) < 1.0:
        raise InputError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    if int(max_sample_rows) < 2 * int(min_rows):
        raise InputError(f"max_sample_rows ({max_sample_rows}) must be at least twice min_rows ({min_rows})")
    if not logistic_C > 0:
        raise InputError(f"logistic_C must be positive, got {logistic_C}")
    # Checked before as_matrix, which costs a pass over a dask array.
    if not isinstance(concepts, Mapping):
        raise InputError(f"concepts must map concept names to one label per row, got {type(concepts).__name__}")
    if len(concepts) == 0:
        raise InputError("no concepts given: pass a dict {concept name: one label per row (0/1 or a number, NaN = unlabelled)}")
    data = as_matrix(embeddings)
    X = data.X
    n, d = X.shape
    names, Y = _concept_columns(concepts, n, X)
    seed = _seed_from(random_state)

    scan = map_reduce(_label_scan_block, [Y])
    resolved = _resolve_kinds(names, kinds, scan)
    continuous = np.array([m for m, k in enumerate(resolved) if k == "continuous"], dtype=np.int64)
    binary = np.array([m for m, k in enumerate(resolved) if k == "binary"], dtype=np.int64)
    rates = np.minimum(1.0, int(max_sample_rows) / np.maximum(scan.n_valid[binary], 1)).astype(np.float64)

    if is_dask_array(X):
        import dask.array as da

        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        rows = da.arange(n, chunks=X.chunks[0], dtype=np.int64)
    else:
        rows = np.arange(n, dtype=np.int64)
    result = map_reduce(
        _concept_pass_block, [X, Y, rows], (continuous, binary, rates, seed, float(test_fraction))
    )

    M = len(names)
    W = np.zeros((M, d))
    intercepts = np.zeros(M)
    scores = np.zeros(M)
    n_train = np.zeros(M, dtype=np.int64)
    n_test = np.zeros(M, dtype=np.int64)
    solver: dict[str, str] = {}
    grams = result.grams + np.swapaxes(np.triu(result.grams, 1), -1, -2)  # mirror the upper triangles
    for i, m in enumerate(continuous):
        W[m], intercepts[m], scores[m], n_train[m], n_test[m] = _fit_continuous(names[m], grams[i], d, min_rows)
        solver[names[m]] = "least squares, normal equations summed over all chunks (exact)"
    for i, m in enumerate(binary):
        labelled = np.isfinite(result.sample_Y[:, i])
        W[m], intercepts[m], scores[m], n_train[m], n_test[m] = _fit_binary(
            names[m], result.sample_X[labelled], result.sample_Y[labelled, i], result.sample_test[labelled],
            float(logistic_C), int(min_rows),
        )
        every = rates[i] >= 1.0
        solver[names[m]] = (
            "logistic regression on every labelled row" if every
            else f"logistic regression on a {rates[i]:.3g} row sample drawn on the workers"
        )
    norms = np.linalg.norm(W, axis=1)
    flat = [names[m] for m in np.flatnonzero(~(norms > 0))]
    if flat:
        raise InputError(
            f"the linear models of concept(s) {flat} have zero weight on every embedding dimension: the embedding "
            "does not encode them linearly (or regularization removed them); drop them or lower the regularization"
        )
    cavs = ConceptActivationVectors(
        matrix=W / norms[:, None],
        names=names,
        kinds=resolved,
        scores=scores,
        score_names=[SCORE_NAMES[k] for k in resolved],
        scales=norms,
        intercepts=intercepts,
        n_train=n_train,
        n_test=n_test,
        solver=solver,
    )
    cavs.check_independent(max_condition)
    return cavs


# --------------------------------------------------------------------------- the base clustering
def _check_cavs(cavs: Any) -> ConceptActivationVectors:
    if not isinstance(cavs, ConceptActivationVectors):
        raise InputError(
            f"cavs must be ConceptActivationVectors (from exclust.fit_cavs or ConceptActivationVectors.from_matrix), "
            f"got {type(cavs).__name__}"
        )
    return cavs


def _embedding_matrix(X, cavs: ConceptActivationVectors, n_components: int | None):
    data = as_matrix(X, n_clusters=n_components)
    cavs.check_embedding(data.n_features)
    return data.X


def _labels_vector(labels, n: int):
    if is_dask_array(labels):
        if labels.ndim != 1 or labels.shape[0] != n:
            raise InputError(f"labels must be one cluster number per row ({n}), got shape {labels.shape}")
        return labels
    if hasattr(labels, "to_numpy"):
        labels = labels.to_numpy()
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise InputError(f"labels must be one cluster number per row ({n}), got shape {labels.shape}")
    return labels


@dataclass
class _LatentMixture:
    """The base clustering in the embedding: weights, means, per-component covariances (K x d x d)."""

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray
    counts: np.ndarray | None
    labels: Any  # one cluster per row (numpy or dask)
    source: str
    model: Any = None


def _latent_mixture(X, labels, n_components, covariance_type, n_init, random_state) -> _LatentMixture:
    """Fit a Gaussian mixture (labels None) or summarize the given labels in one statistics pass."""
    from exclust.stats import cluster_statistics

    n = X.shape[0]
    if labels is None:
        from exclust.reference import GaussianMixture

        if n_components is None:
            raise InputError("give n_components (the number of clusters) or labels of a base clustering")
        gmm = GaussianMixture(
            n_components=n_components, covariance_type=covariance_type, n_init=n_init, random_state=random_state
        ).fit(X)
        labels = gmm.predict(X)
        if gmm.covariance_type == "full":
            # The mixture's own covariances: no pass over the data.
            return _LatentMixture(
                gmm.weights_, gmm.means_, gmm.covariances_, None, labels, "gaussian mixture (full covariances)", gmm
            )
        # A diagonal model ignores within-component correlations, but a CAV mixes latent axes, so
        # c' Sigma c needs them: one statistics pass with full scatter on the mixture's labels.
        stats = cluster_statistics(X, labels, n_components, full_scatter=True)
        return _LatentMixture(
            gmm.weights_, gmm.means_, _empty_safe(stats.covariances, stats.counts), stats.counts, labels,
            "gaussian mixture (means), covariances from its hard labels", gmm,
        )
    labels = _labels_vector(labels, n)
    stats = cluster_statistics(X, labels, n_components, full_scatter=True)
    empty = np.flatnonzero(stats.counts == 0).tolist()
    if empty:
        raise InputError(
            f"clusters {empty} have no rows; labels must number the clusters 0..K-1 without gaps "
            "(relabel with numpy.unique(labels, return_inverse=True))"
        )
    if stats.n_clusters < 2:
        raise InputError("the labels hold a single cluster; a tree needs at least two")
    return _LatentMixture(stats.weights, stats.means, stats.covariances, stats.counts, labels, "labels")


def _empty_safe(covariances: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Covariances with those of empty clusters set to zero (they carry zero weight in the pool)."""
    out = np.array(covariances, dtype=np.float64)
    out[np.asarray(counts) == 0] = 0.0
    return out


def concept_summary(
    cavs: ConceptActivationVectors,
    weights: np.ndarray,
    means: np.ndarray,
    covariances: np.ndarray,
    counts: np.ndarray | None = None,
):
    """The mixture in concept coordinates (paper 000 eqs. 4-5), as a MixtureSummary named by concept.

    Means C mu_k; per-axis sigma_bar_m = sqrt(c_m' Sigma c_m) with Sigma = sum_k p_k Sigma_k the
    pooled within-component covariance; per-component sigma_km = sqrt(c_m' Sigma_k c_m) (for the
    ``exact`` threshold of paper 002, which lets each component keep its own spread); and the
    projected covariances C Sigma_k C'.
    """
    from exclust.mixture import MixtureSummary

    C = cavs.matrix
    weights = np.asarray(weights, dtype=np.float64)
    covariances = np.asarray(covariances, dtype=np.float64)
    projected = np.einsum("md,kde,ne->kmn", C, covariances, C)
    per_component = np.sqrt(np.maximum(np.einsum("kmm->km", projected), 0.0))
    pooled = np.einsum("k,kde->de", weights / weights.sum(), covariances)
    sigma = np.sqrt(np.maximum(np.einsum("md,de,me->m", C, pooled, C), 0.0))
    return MixtureSummary(
        means=np.asarray(means, dtype=np.float64) @ C.T,
        sigma=sigma,
        weights=weights,
        sigma_per_component=per_component,
        covariances=projected,
        feature_names=list(cavs.names),
        counts=counts,
    )


def _named_tree(tree, names: Sequence[str], meta: Mapping[str, Any]):
    """The same tree with concept names as feature names and extra metadata."""
    from exclust.tree import ThresholdTree

    doc = tree.to_dict()
    doc["feature_names"] = list(names)
    doc["meta"] = {**doc.get("meta", {}), **meta}
    return ThresholdTree.from_dict(doc)


# --------------------------------------------------------------------------- estimators
class ConceptMMDT:
    """Concept-MMDT (paper 000, Algorithm 2): MMDT on the mixture projected onto concept activation vectors.

    Parameters
    ----------
    cavs : ConceptActivationVectors
        The concepts (``fit_cavs``); their names become the tree's feature names.
    n_components : int or None
        Clusters of the base Gaussian mixture fitted in the embedding when ``fit`` gets no labels.
    threshold : MMDT's threshold rule ("exact", "gaussian", "chebyshev", "midpoint", "random").
    covariance_type, n_init : passed to the base ``exclust.GaussianMixture``.
    random_state : seeds the base mixture and MMDT's tie breaks.

    Passes over X in ``fit``: with labels, a validation pass (dask input) and one statistics
    pass (per-cluster counts, sums and full scatter, for the means and Sigma); without labels,
    those of the Gaussian mixture's fit, whose own means, weights and covariances are used (a
    ``covariance_type="diag"`` mixture ignores within-component correlations that a CAV mixes
    in, so one statistics pass with full scatter on its labels is added). Growing the tree
    itself touches no data.

    Fitted attributes
    -----------------
    tree_ : ThresholdTree over the concept names, K leaves, leaf k = base cluster k.
    summary_ : the MixtureSummary in concept coordinates that MMDT was grown from.
    latent_means_, latent_covariance_ : base means (K x d) and pooled covariance Sigma (d x d).
    enr_ : the concept-space explainability-to-noise ratio, paper 000 eq. 6 (with its factor 2:
        min_{k != l} max_m (c_m'(mu_k - mu_l))^2 / (2 c_m' Sigma c_m)).
    reference_labels_ : the base clustering's label of every row (numpy or dask, as X).
    mixture_ : the fitted base GaussianMixture (None when labels were given).
    mmdt_ : the inner MMDT (``node_diagnostics_`` per cut).
    """

    def __init__(
        self,
        cavs: ConceptActivationVectors,
        n_components: int | None = None,
        threshold: str = "exact",
        covariance_type: str = "full",
        n_init: int = 1,
        random_state: Any = None,
    ) -> None:
        self.cavs = cavs
        self.n_components = n_components
        self.threshold = threshold
        self.covariance_type = covariance_type
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, labels=None) -> "ConceptMMDT":
        """Fit (or summarize) the base clustering in the embedding X, project it onto the CAVs, grow MMDT."""
        from exclust.algorithms.mmdt import MMDT, THRESHOLDS

        cavs = _check_cavs(self.cavs)
        if self.threshold not in THRESHOLDS:
            raise InputError(f"threshold={self.threshold!r} is not known; choose one of {', '.join(THRESHOLDS)}")
        embedding_names = (
            list(X.feature_names) if isinstance(X, Dataset) else [f"x{j}" for j in range(cavs.n_features)]
        )
        X = _embedding_matrix(X, cavs, self.n_components)
        base = _latent_mixture(X, labels, self.n_components, self.covariance_type, self.n_init, self.random_state)
        summary = concept_summary(cavs, base.weights, base.means, base.covariances, base.counts)
        mmdt = MMDT(threshold=self.threshold, random_state=self.random_state).fit(summary)
        self.enr_ = mmdt.enr_ / 2.0  # MMDT reports paper 002's convention; eq. 6 of paper 000 halves it
        self.tree_ = _named_tree(
            mmdt.tree_,
            cavs.names,
            {
                "algorithm": "concept-mmdt",
                "reference": "paper 000 Alg. 2 (MMDT " + mmdt.tree_.meta.get("reference", "") + ")",
                "base_clustering": base.source,
                "concept_kinds": dict(zip(cavs.names, cavs.kinds)),
                "cav_scores": {n: (None if not np.isfinite(s) else float(s)) for n, s in zip(cavs.names, cavs.scores)},
                "enr_paper000_eq6": self.enr_,
                # Saved so that a tree file alone can label new embeddings (exclust label projects first).
                "concept_activation_vectors": cavs.to_dict(),
                "embedding_features": embedding_names,
            },
        )
        self.summary_ = summary
        self.mmdt_ = mmdt
        self.node_diagnostics_ = mmdt.node_diagnostics_
        self.latent_means_ = np.asarray(base.means)
        w = np.asarray(base.weights) / np.sum(base.weights)
        self.latent_covariance_ = np.einsum("k,kde->de", w, base.covariances)
        self.reference_labels_ = base.labels
        self.mixture_ = base.model
        self.n_features_in_ = cavs.n_features
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "tree_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this ConceptMMDT is not fitted yet; call fit(X) first")

    def transform(self, X):
        """Concept coordinates C x of the embeddings X (numpy or dask)."""
        return _check_cavs(self.cavs).project(X)

    def predict(self, X):
        """Cluster of every embedding: project onto the CAVs, then route through the tree."""
        self._check_fitted()
        return self.tree_.predict(self.transform(X))

    def fit_predict(self, X, labels=None):
        """Fit, then the tree's cluster of every row of X."""
        return self.fit(X, labels).predict(X)

    def rules_text(self) -> str:
        """The tree's rules in concept names, one line per cluster."""
        self._check_fitted()
        return self.tree_.rules_text()

    def __repr__(self) -> str:
        return (
            f"ConceptMMDT(concepts={list(getattr(self.cavs, 'names', []))}, n_components={self.n_components!r}, "
            f"threshold={self.threshold!r}, random_state={self.random_state!r})"
        )


class ConceptCART:
    """Concept-CART, paper 000's baseline: CART in concept coordinates C x, trained on the base labels.

    ``fit(X, labels)`` uses the given base labels; without labels a Gaussian mixture with
    ``n_components`` is fitted in the embedding first (as ``ConceptMMDT`` does). The tree has
    ``max_leaf_nodes`` leaves (default: the number of clusters, as in the paper's comparison).

    Fitted: ``tree_`` (over the concept names), ``reference_labels_``, ``mixture_``, ``cart_``.
    """

    def __init__(
        self,
        cavs: ConceptActivationVectors,
        max_leaf_nodes: int | None = None,
        n_components: int | None = None,
        covariance_type: str = "full",
        n_init: int = 1,
        random_state: Any = None,
    ) -> None:
        self.cavs = cavs
        self.max_leaf_nodes = max_leaf_nodes
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, labels=None) -> "ConceptCART":
        """Project X onto the CAVs and fit CART to the base labels there."""
        from exclust.algorithms.cart import CART

        cavs = _check_cavs(self.cavs)
        X = _embedding_matrix(X, cavs, self.n_components)
        self.mixture_ = None
        if labels is None:
            base = _latent_mixture(X, None, self.n_components, self.covariance_type, self.n_init, self.random_state)
            labels, self.mixture_ = base.labels, base.model
            n_clusters = int(self.n_components)
        else:
            labels = _labels_vector(labels, X.shape[0])
            n_clusters = None
        Z = cavs.project(X)
        max_leaves = self.max_leaf_nodes
        if max_leaves is None:
            if n_clusters is None:
                top = labels.max()
                n_clusters = int(top.compute() if is_dask_array(top) else top) + 1
            max_leaves = n_clusters
        cart = CART(max_leaf_nodes=max_leaves, random_state=self.random_state).fit(
            Dataset(X=Z, feature_names=list(cavs.names)), labels
        )
        self.tree_ = _named_tree(
            cart.tree_, cavs.names, {"algorithm": "concept-cart", "reference": "paper 000 Table 2 baseline (CART on C x)"}
        )
        self.cart_ = cart
        self.reference_labels_ = labels
        self.n_features_in_ = cavs.n_features
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "tree_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this ConceptCART is not fitted yet; call fit(X, labels) first")

    def transform(self, X):
        """Concept coordinates C x of the embeddings X (numpy or dask)."""
        return _check_cavs(self.cavs).project(X)

    def predict(self, X):
        """Cluster of every embedding: project onto the CAVs, then route through the tree."""
        self._check_fitted()
        return self.tree_.predict(self.transform(X))

    def rules_text(self) -> str:
        """The tree's rules in concept names, one line per cluster."""
        self._check_fitted()
        return self.tree_.rules_text()

    def __repr__(self) -> str:
        return f"ConceptCART(concepts={list(getattr(self.cavs, 'names', []))}, max_leaf_nodes={self.max_leaf_nodes!r})"
