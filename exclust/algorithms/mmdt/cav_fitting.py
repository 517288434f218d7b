"""Fitting concept activation vectors on embeddings, numpy or Dask, in two passes.

Paper 000, Algorithm 2, step 1 (after Kim et al. 2018): for each concept, a linear model on the
embeddings separates rows that show the concept from rows that do not (binary concept: logistic
regression) or predicts its strength (continuous concept: least squares). Its weight vector,
scaled to unit length, is the CAV (``exclust.algorithms.mmdt.cavs``). Which rows are held out for a
concept's score, and which rows a binary concept samples, is decided by the row hash of
``exclust.dataplane._row_hash`` (the one kernel MMDT samples with), so any chunking of the same
rows fits the same CAVs.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from exclust.algorithms.mmdt._concept_grams import accumulate_concept_grams
from exclust.algorithms.mmdt.cavs import DEFAULT_MAX_CONDITION, KINDS, SCORE_NAMES, ConceptActivationVectors
from exclust.dataplane import arrays
from exclust.dataplane._row_hash import row_uniforms, stream_seed
from exclust.dataplane.parts import map_reduce
from exclust.errors import InputError
from exclust.sources.dataset import as_matrix

# Rows held out for each CAV's score, and the most rows (per binary concept) that are sampled
# to fit a logistic regression on the driver: a CAV is a d-vector, and a few hundred thousand
# rows fix its direction far beyond what the concept labels themselves are worth.
DEFAULT_TEST_FRACTION = 0.2
DEFAULT_MAX_SAMPLE_ROWS = 200_000
# Streams of row draws: which rows are held out, which rows a binary concept samples.
_HELD_OUT_STREAM, _SAMPLE_STREAM = 0, 1


def _seed_from(random_state: Any) -> int:
    if isinstance(random_state, (int, np.integer)):
        return int(random_state) & 0x7FFFFFFFFFFFFFFF
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    return int(rng.integers(0, 2**62))


def held_out_rows(rows: np.ndarray, seed: int, test_fraction: float) -> np.ndarray:
    """True for the global row indices held out to score the CAVs (the same however rows are chunked)."""
    return row_uniforms(stream_seed(seed, _HELD_OUT_STREAM), rows) < test_fraction


# --------------------------------------------------------------------------- pass 1: the labels
@dataclass
class _LabelScan:
    """Per concept: labelled rows, infinite values, and up to three distinct values (sorted)."""

    n_valid: np.ndarray
    n_infinite: np.ndarray
    distinct: list[np.ndarray]

    def __add__(self, other: _LabelScan) -> _LabelScan:
        return _LabelScan(
            self.n_valid + other.n_valid,
            self.n_infinite + other.n_infinite,
            [np.union1d(a, b)[:3] for a, b in zip(self.distinct, other.distinct, strict=True)],
        )


def _first_distinct(values: np.ndarray, limit: int = 3) -> np.ndarray:
    """Up to ``limit`` distinct values (sorted), in linear time: enough to tell binary from continuous."""
    found: list[float] = []
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

    def __add__(self, other: _ConceptPass) -> _ConceptPass:
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
    test = held_out_rows(rows, seed, test_fraction)
    grams = accumulate_concept_grams(np.ascontiguousarray(X), np.ascontiguousarray(Y), test, continuous)
    if binary.size:
        u = row_uniforms(stream_seed(seed, _SAMPLE_STREAM), rows)
        Yb = Y[:, binary]
        keep = np.isfinite(Yb) & (u[:, None] < rates[None, :])
        rows_kept = keep.any(axis=1)
        sample_Y = np.where(keep, Yb, np.nan)[rows_kept]
        return _ConceptPass(grams, X[rows_kept], sample_Y, test[rows_kept])
    return _ConceptPass(grams, np.empty((0, d)), np.empty((0, 0)), np.empty(0, dtype=bool))


# --------------------------------------------------------------------------- fitting the CAVs
def _concept_columns(concepts: Mapping[str, Any], n: int, X, lazy: bool) -> tuple[list[str], Any]:
    """The concept labels as one (n x M) float matrix, numpy or dask (``lazy``: X is a Dask
    array) aligned with X's rows."""
    names = [str(k) for k in concepts]
    if len(set(names)) != len(names):
        raise InputError(f"concept names must be distinct, got {names}")
    columns = []
    for name, values in zip(names, concepts.values(), strict=True):
        col, lazy_col = arrays.entering_array(values.to_numpy() if hasattr(values, "to_numpy") else values)
        if col.dtype.kind not in "biuf":
            raise InputError(
                f"concept {name!r} has labels of dtype {col.dtype}; give 0/1 (binary) or numbers (continuous), "
                "NaN where a row is unlabelled"
            )
        if col.ndim != 1 or col.shape[0] != n:
            raise InputError(f"concept {name!r} needs one label per row ({n}), got shape {tuple(col.shape)}")
        if lazy_col and not lazy:
            col = arrays.to_memory(col)  # one value per row, the size of a single embedding column
        columns.append(col.astype(np.float64))
    if not lazy:
        return names, np.column_stack(columns)
    import dask.array as da

    rows = X.chunks[0]
    lazy_cols = [arrays.as_lazy(c, rows) for c in columns]
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
            raise InputError(f"concept {name!r} has {int(scan.n_infinite[m])} infinite label(s); use NaN for "
                             "unlabelled rows")
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
        raise InputError("no concepts given: pass a dict {concept name: one label per row (0/1 or a number, NaN = "
                         "unlabelled)}")
    data = as_matrix(embeddings)
    X = data.X
    n, d = X.shape
    names, Y = _concept_columns(concepts, n, X, data.distributed)
    seed = _seed_from(random_state)

    scan = map_reduce(_label_scan_block, Y)
    resolved = _resolve_kinds(names, kinds, scan)
    continuous = np.array([m for m, k in enumerate(resolved) if k == "continuous"], dtype=np.int64)
    binary = np.array([m for m, k in enumerate(resolved) if k == "binary"], dtype=np.int64)
    rates = np.minimum(1.0, int(max_sample_rows) / np.maximum(scan.n_valid[binary], 1)).astype(np.float64)

    if data.distributed:
        import dask.array as da

        if X.numblocks[1] != 1:
            X = X.rechunk({1: -1})
        rows = da.arange(n, chunks=X.chunks[0], dtype=np.int64)
    else:
        rows = np.arange(n, dtype=np.int64)
    result = map_reduce(
        _concept_pass_block, X, Y, rows, args=(continuous, binary, rates, seed, float(test_fraction))
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
