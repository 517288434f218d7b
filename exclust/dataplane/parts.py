"""Partitioned data: rows held as parts with global row offsets, and every pass over them.

This is the one place that knows numpy from dask. A numpy matrix is cut into in-process row
slices (one per core, so that the GIL-free kernels run on threads); a dask matrix is its row
chunks. Every part knows its global row offset, so anything drawn "per row" (a sample, a
random number) depends on the row's number, never on how the rows were chunked.

The layer holds the only implementations of:

- ``map_reduce`` / ``run_reductions``: a function per part, results merged up a tree of
  ``fan_in``-way merges (nothing row-sized reaches the driver); several reductions can share
  ONE pass (``run_reductions``), which is how scoring and the cost curve fuse;
- ``map_rows``: a per-row result (labels, projections), lazy for dask input;
- ``label_rows``: per-row labels under the one policy for rows holding NaN or inf (``UNLABELLED``);
- ``align``: a per-row column (labels, truth) made to match X's kind and row parts;
- ``uniform_sample``: an exact uniform sample of rows chosen by global row id;
- ``row_uniforms``: per-row uniform numbers from (seed, global row id);
- ``PassCounter``: a run's passes over the data and reads of the files, per step, counted into the
  counter active in the calling thread or task (``counting_passes``; none outside a run).

Threading policy: numpy parts run on our own threads with BLAS and numba held to one thread each
(every thread already has a core; a single part may use them all); inside a Dask worker the
kernels run single-threaded (``kernel_threads``, ``kernel_threading``), because the worker's
threads already use the cores.

Where the rows live between passes (held on the workers or streamed from the files, and
per-part state kept where a pass made it) is ``exclust.dataplane.residency``, built on this layer.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import operator
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from exclust.errors import InputError

logger = logging.getLogger("exclust")

# Below this many rows per slice a numpy input is not worth splitting across threads.
THREAD_MIN_ROWS = 200_000
FAN_IN = 8
# The label of a row that cannot be labelled (a NaN or an infinite value): predict, apply and
# `exclust label` all give it, never a guess.
UNLABELLED = -1
# Dask layers that read the input files: a pass whose graph holds one reads the source.
SOURCE_LAYER_PREFIXES = ("read_piece",)  # exclust.sources.parquet_reader.read_piece: the one Parquet read


def is_lazy(a: Any) -> bool:
    """True for a dask array (the rows live on the cluster), False for anything in memory. Looks
    dask.array up rather than importing it: an object of its type exists only once it is imported,
    and importing it cost a numpy input's first fit 1-2 s (bench/bench_first_fit.py)."""
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(a, da.Array)


# --------------------------------------------------------------------------- threading policy
def blas_one_thread():
    """Hold BLAS to one thread while our own threads run kernels that call it."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def in_dask_worker() -> bool:
    if "distributed" not in sys.modules:  # a worker process has imported it; importing it here costs ~1 s
        return False
    try:
        from distributed import get_worker
        get_worker()
        return True
    except (ImportError, ValueError):
        return False


def label_dtype(n_labels: int):
    """The integer type a kept per-row label column is stored in: one byte a row while the
    labels fit (it is held for every row), else four."""
    return np.uint8 if n_labels <= 256 else np.int32


def kernel_threads() -> int:
    """Threads a numba parallel kernel may use here: 1 inside a Dask worker (its threads
    already fill the cores; nested pools oversubscribe them), else numba's own count."""
    if in_dask_worker():
        return 1
    import numba

    return int(numba.get_num_threads())


@contextlib.contextmanager
def kernel_threading(threads: int | None = None) -> Iterator[None]:
    """Run numba's parallel kernels inside with ``threads`` threads (default ``kernel_threads()``).

    numba's thread count is per calling thread, so this holds for the kernels this thread
    launches only; it is how a part's work runs single-threaded inside a Dask worker, or inside
    one of our own threads over numpy parts.
    """
    import numba

    want = kernel_threads() if threads is None else max(1, int(threads))
    have = numba.get_num_threads()
    if want == have:
        yield
        return
    numba.set_num_threads(want)
    try:
        yield
    finally:
        numba.set_num_threads(have)


# --------------------------------------------------------------------------- pass counter (one per run)
@dataclass
class PassCounter:
    """Passes over the data and reads of the source files, per named step.

    A pass is one run of a function over every part; it reads the source when its dask graph
    still holds the file-reading layers (the data are streamed, not held). Steps nest by name:
    the innermost open step is charged.
    """

    passes: dict[str, int] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)
    _stack: list[str | None] = field(default_factory=list)  # None: paused
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        self._stack.append(name)
        for counts in (self.passes, self.reads):
            counts.setdefault(name, 0)
        try:
            yield
        finally:
            self._stack.pop()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Count nothing inside: passes over an in-memory sample are not passes over the data."""
        self._stack.append(None)
        try:
            yield
        finally:
            self._stack.pop()

    def record(self, *arrays: Any) -> None:
        """Count one pass over ``arrays`` (and a read when their graph reads the files)."""
        name = self._stack[-1] if self._stack else "other"
        if name is not None:
            with self._lock:
                self.passes[name] = self.passes.get(name, 0) + 1
                if reads_source(*arrays):
                    self.reads[name] = self.reads.get(name, 0) + 1


# The active run's counter, per thread and task (no counter shared by the process); None outside a run.
_ACTIVE_COUNTER: contextvars.ContextVar[PassCounter | None] = contextvars.ContextVar("exclust_passes", default=None)


def active_passes() -> PassCounter | None:
    """The pass counter of the run active here, or None outside any run."""
    return _ACTIVE_COUNTER.get()


@contextlib.contextmanager
def counting_passes(counter: PassCounter | None) -> Iterator[PassCounter | None]:
    """Count the passes made inside (in this thread or task) into ``counter`` (None: count none)."""
    token = _ACTIVE_COUNTER.set(counter)
    try:
        yield counter
    finally:
        _ACTIVE_COUNTER.reset(token)


def record_pass(*arrays: Any) -> None:
    """Count one pass over ``arrays`` in the active run's counter (nothing outside a run)."""
    if (counter := _ACTIVE_COUNTER.get()) is not None:
        counter.record(*arrays)


def passes_paused() -> contextlib.AbstractContextManager:
    """Count nothing inside (passes over an in-memory sample are not passes over the data)."""
    return counter.paused() if (counter := _ACTIVE_COUNTER.get()) is not None else contextlib.nullcontext()


def reads_source(*arrays: Any) -> bool:
    """Whether computing these arrays reads the input files (their graph holds read layers)."""
    for a in arrays:
        if not is_lazy(a):
            continue
        layers = getattr(a.__dask_graph__(), "layers", {})
        if any(str(name).startswith(SOURCE_LAYER_PREFIXES) for name in layers):
            return True
    return False


# --------------------------------------------------------------------------- parts
def one_column_chunk(X):
    """X with all its columns in one chunk (a part is a block of whole rows)."""
    if X.ndim == 2 and X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    return X


def row_offsets(X) -> np.ndarray:
    """Global row offset of every part plus the end (length parts + 1).

    dask: its row chunks. numpy: one slice per core when there are enough rows for threads to
    pay, else one part.
    """
    if is_lazy(X):
        return np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
    n = int(np.shape(X)[0])
    parts = max(1, min(os.cpu_count() or 1, n // THREAD_MIN_ROWS))
    return np.linspace(0, n, parts + 1).astype(np.int64)


def align(column: Any, X: Any, what: str = "column"):
    """A per-row column as X's kind with X's row parts (None stays None).

    numpy with dask X: chunked like X. dask with numpy X: computed. dask with dask X: rechunked
    to X's rows. Raises InputError when the lengths differ.
    """
    if column is None:
        return None
    if hasattr(column, "to_numpy") and not is_lazy(column):
        column = column.to_numpy()
    if is_lazy(column):
        if any(np.isnan(c) for c in column.chunks[0]):
            column = column.compute_chunk_sizes()
    else:
        column = np.asarray(column)
    if column.ndim not in (1, 2):
        raise InputError(f"{what} must be one value (or one row of values) per row, got shape {column.shape}")
    if column.shape[0] != X.shape[0]:
        raise InputError(f"{what} has {column.shape[0]} entries for {X.shape[0]} rows of data")
    if not is_lazy(X):
        return np.asarray(column.compute()) if is_lazy(column) else column
    import dask.array as da

    if not is_lazy(column):
        return da.from_array(column, chunks=(X.chunks[0],) + column.shape[1:])
    if column.chunks[0] != X.chunks[0]:
        column = column.rechunk({0: X.chunks[0]})
    return one_column_chunk(column)


@dataclass
class Reduction:
    """One reduction of a pass: ``func(block, *column_blocks, *args)`` per part (with
    ``with_offset``: ``func(offset, block, ...)``), merged pairwise by ``combine``."""

    func: Callable[..., Any]
    columns: Sequence[Any] = ()
    args: tuple = ()
    combine: Callable[[Any, Any], Any] = None  # type: ignore[assignment]
    with_offset: bool = False
    per_part: Sequence[Any] | None = None  # one value per part, passed right after the block

    def __post_init__(self) -> None:
        if self.combine is None:
            self.combine = add_parts


def add_parts(a: Any, b: Any) -> Any:
    """Element-wise sum of two partial results: arrays, mergeable objects, or (nested) tuples of them."""
    if isinstance(a, tuple):
        return tuple(add_parts(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def concat_parts(a: Any, b: Any) -> Any:
    """Row-wise concatenation of two partial results (arrays or tuples of arrays), in order."""
    if isinstance(a, tuple):
        return tuple(concat_parts(x, y) for x, y in zip(a, b, strict=True))
    return np.concatenate([a, b])


def fold(combine: Callable[[Any, Any], Any], *parts: Any) -> Any:
    out = parts[0]
    for p in parts[1:]:
        out = combine(out, p)
    return out


def _run_part(offset: int, block, column_blocks: list, reductions: list[Reduction], slots: list[list[int]],
              own: list, threads: int | None = None):
    out = []
    with kernel_threading(threads):
        for r, idx, mine in zip(reductions, slots, own, strict=True):
            cols = [column_blocks[i] for i in idx]
            head = (offset,) if r.with_offset else ()
            extra = (mine,) if r.per_part is not None else ()
            out.append(r.func(*head, block, *extra, *cols, *r.args))
    return tuple(out)


def _merge_results(reductions: list[Reduction], *parts: tuple) -> tuple:
    return tuple(fold(r.combine, *[p[i] for p in parts]) for i, r in enumerate(reductions))


def tree_reduce(parts: Sequence[Any], combine: Callable[[Any, Any], Any] = operator.add, fan_in: int = FAN_IN):
    """Merge delayed partial results up a tree of ``fan_in``-way merges with the pairwise ``combine``."""
    import dask

    if not parts:
        raise ValueError("nothing to reduce")
    merge = dask.delayed(fold, pure=True)
    level = list(parts)
    while len(level) > 1:
        level = [merge(combine, *level[i : i + fan_in]) for i in range(0, len(level), fan_in)]
    return level[0]


def run_reductions(X, reductions: Sequence[Reduction], *, fan_in: int = FAN_IN, compute: bool = True,
                   count: bool = True):
    """Run several reductions in ONE pass over X's parts; returns their results in order.

    Each part is read once; its per-row columns come from the same read as its rows (a column
    that is also passed to another reduction is read once too). With ``compute=False`` and dask
    input, returns one ``Delayed`` of the tuple of results.
    """
    reductions = list(reductions)
    columns: list[Any] = []
    slots: list[list[int]] = []
    for r in reductions:
        idx = []
        for c in r.columns:
            c = align(c, X)
            same = [i for i, have in enumerate(columns)
                    if have is c or (is_lazy(c) and is_lazy(have) and have.name == c.name)]
            if same:
                idx.append(same[0])
            else:
                columns.append(c)
                idx.append(len(columns) - 1)
        slots.append(idx)
    if count:
        record_pass(X, *columns)
    bounds = row_offsets(X)
    n_parts = len(bounds) - 1
    for r in reductions:
        if r.per_part is not None and len(r.per_part) != n_parts:
            raise ValueError(f"per_part has {len(r.per_part)} values for {n_parts} parts")
    # Tasks carry only their own per-part value, not every part's.
    own = [[None if r.per_part is None else r.per_part[i] for r in reductions] for i in range(n_parts)]
    # Tasks carry no dask collection: a column left in a Reduction would be computed whole.
    plain = [replace(r, columns=(), per_part=None if r.per_part is None else ()) for r in reductions]
    if not is_lazy(X):
        # One part: its kernels may use every numba thread; several: each of our threads has a core.
        threads = None if len(bounds) == 2 else 1

        def run(i):
            sl = slice(int(bounds[i]), int(bounds[i + 1]))
            return _run_part(int(bounds[i]), X[sl], [c[sl] for c in columns], plain, slots, own[i], threads)

        if len(bounds) == 2:
            return list(run(0))
        from concurrent.futures import ThreadPoolExecutor

        with blas_one_thread(), ThreadPoolExecutor(len(bounds) - 1) as pool:
            parts = list(pool.map(run, range(len(bounds) - 1)))
        return list(_merge_results(plain, *parts))
    import dask

    X = one_column_chunk(X)
    # One task per part gets the part's rows and columns together: a column that comes from the
    # same read as the rows (the truth column of a Parquet file) is then read once, by the keys
    # the collections share. Graph optimization would fuse the read into each consumer and read
    # it twice, so it is off (measured: tests/test_parts.py counts the reads). Each block is
    # handed over as it is: no copy (a blockwise packing step concatenated every block anew).
    x_blocks = X.to_delayed(optimize_graph=False).ravel()
    column_blocks = [c.to_delayed(optimize_graph=False).ravel() for c in columns]
    task = dask.delayed(_run_part, pure=True)
    level = [task(int(bounds[i]), x_blocks[i], [cb[i] for cb in column_blocks], plain, slots, own[i])
             for i in range(n_parts)]
    merged = tree_reduce(level, functools.partial(_merge_results, plain), fan_in)
    if not compute:
        return merged
    return list(merged.compute())


def map_reduce(func: Callable[..., Any], X, *columns: Any, args: tuple = (), combine: Callable = add_parts,
               with_offset: bool = False, per_part: Sequence[Any] | None = None, fan_in: int = FAN_IN,
               compute: bool = True):
    """``func(block, *column_blocks, *args)`` on every part of X, merged up a tree: one pass.

    With ``with_offset`` it is called as ``func(global_row_offset, block, ...)``; with
    ``per_part`` (one value per part of ``row_offsets(X)``) that part's value comes right after
    the block. With ``compute=False`` and dask input, returns a ``Delayed`` of the result.
    """
    out = run_reductions(X, [Reduction(func, columns, args, combine, with_offset, per_part)], fan_in=fan_in,
                         compute=compute)
    if not compute and is_lazy(X):
        import dask

        return dask.delayed(operator.itemgetter(0), pure=True)(out)
    return out[0]


def _map_block(block, func, args, width):
    return func(block, *args)


def map_rows(func: Callable[..., np.ndarray], X, *args: Any, dtype=np.float64, width: int | None = None):
    """``func(block, *args)`` -> one value (``width=None``) or ``width`` values per row.

    numpy in, numpy out (one call); dask in, a lazy dask array with X's row chunks out (no pass
    happens until it is used).
    """
    if not is_lazy(X):
        return func(X, *args)
    X = one_column_chunk(X)
    if width is None:
        return X.map_blocks(_map_block, func, args, width, dtype=dtype, drop_axis=1, chunks=(X.chunks[0],))
    return X.map_blocks(_map_block, func, args, width, dtype=dtype, chunks=(X.chunks[0], (width,)))


def _finite_rows_labelled(block, func, args, route_nan=False):
    block = np.asarray(block, dtype=np.float64)
    # A row's sum is finite only if every value is; a non-finite sum (a NaN, an inf, or an
    # overflow) is checked value by value. One float a row of scratch, not one bool a value.
    with np.errstate(over="ignore", invalid="ignore"):
        suspect = ~np.isfinite(block.sum(axis=1))
    labelled = np.ones(block.shape[0], dtype=bool)
    if suspect.any():
        labelled[suspect] = ~(np.isinf(block[suspect]) if route_nan else ~np.isfinite(block[suspect])).any(axis=1)
    if labelled.all():
        return np.asarray(func(block, *args), dtype=np.int64)
    out = np.full(block.shape[0], UNLABELLED, dtype=np.int64)
    if labelled.any():
        out[labelled] = func(np.ascontiguousarray(block[labelled]), *args)
    return out


def label_rows(func: Callable[..., np.ndarray], X, *args: Any, route_nan: bool = False):
    """``map_rows`` for labels: ``func(block, *args)`` labels the finite rows, and a row holding NaN
    or inf gets ``UNLABELLED`` (-1); with ``route_nan`` (a tree, which routes missing values) only a row
    holding +-inf does, and ``func`` sees the rows with NaN. The one place of that policy; lazy for dask
    input, where the check runs inside the pass that labels the rows."""
    return map_rows(_finite_rows_labelled, X, func, args, route_nan, dtype=np.int64)


# --------------------------------------------------------------------------- per-row randomness
def row_uniforms(seed: int, start: int, stop: int) -> np.ndarray:
    """Uniform numbers in [0, 1) for global rows ``start..stop-1``: exclust's one row hash
    (``_row_hash``, splitmix64 of (seed, row id)), shared with the kernel sampler and the
    CAV fit. The same row gets the same number whatever part it sits in.
    """
    from exclust.dataplane._row_hash import row_uniforms as hashed

    return hashed(seed, np.arange(start, stop, dtype=np.int64))


def _take_rows(offset: int, block, ids, *columns):
    local = np.asarray(ids, dtype=np.int64) - offset
    return (np.asarray(block[local], dtype=np.float64), *[np.asarray(c)[local] for c in columns])


def sample_ids(n: int, size: int, random_state=None) -> np.ndarray:
    """Sorted global row ids of an exact uniform sample of ``min(size, n)`` rows."""
    if size >= n:
        return np.arange(n, dtype=np.int64)
    if isinstance(random_state, np.random.RandomState):
        random_state = int(random_state.randint(np.iinfo(np.int32).max))
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n, size=int(size), replace=False)).astype(np.int64)


def uniform_sample(X, *columns: Any, size: int, random_state=None, compute: bool = True) -> Any:
    """(X rows, *column values) of an exact uniform sample of ``min(size, n)`` rows, in row order.

    The rows are chosen by global row id on the driver, so numpy and dask inputs, chunked any
    way, give the same sample. One pass on dask (only the sample travels; ``compute=False``: its Delayed).
    """
    n = int(X.shape[0])
    ids = sample_ids(n, size, random_state)
    if not is_lazy(X):
        cols = [align(c, X) for c in columns]
        return (np.asarray(X[ids], dtype=np.float64), *[np.asarray(c)[ids] for c in cols])
    bounds = row_offsets(X)
    cut = np.searchsorted(ids, bounds)
    own = [ids[cut[i] : cut[i + 1]] for i in range(len(bounds) - 1)]
    drawn = map_reduce(_take_rows, X, *columns, combine=concat_parts, with_offset=True, per_part=own, compute=compute)
    return tuple(drawn) if compute else drawn
