"""Where the rows live between passes: held on the workers (read once) or streamed from the
files, and per-part state a pass made, kept where it was made.

- ``hold``: persist dask arrays on the workers when they fit in ``HOLD_MEMORY_SHARE`` of the
  workers' memory (one read of their source; every later pass reads memory), else leave them
  to be streamed (every pass reads the files);
- ``keep_parts`` / ``reduce_kept``: the result of ``func(block)`` for every row part, kept in
  this process (numpy) or persisted on the workers (dask), and the passes that read it (the
  histogram engine's bin codes and per-center values live this way).

Every pass is counted in the active run's counter (``exclust.dataplane.parts.record_pass``) and
runs under its threading policy.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from exclust.dataplane.parts import (
    FAN_IN,
    add_parts,
    fold,
    is_lazy,
    kernel_threading,
    one_column_chunk,
    reads_source,
    record_pass,
    tree_reduce,
)

logger = logging.getLogger("exclust")

# Hold the data on the workers when it takes at most this share of their memory.
HOLD_MEMORY_SHARE = 0.5


def held_array(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised C-ordered array in its own anonymous memory mapping: for what a part holds
    for the whole run (the rows a read makes, the encoding's codes and per-center values).

    numpy asks the kernel for transparent huge pages on every large array (madvise); where the
    kernel's THP defrag policy is "madvise" (Ubuntu's default, and this project's machines),
    each first touch of such memory may compact memory synchronously, and a worker that already
    holds gigabytes pays that on every page. Memory written once and then held needs no huge
    pages: measured on a 2-worker LocalCluster, reading a 1M x 20 piece took 0.38 s into numpy's
    memory and 0.22 s into a plain mapping (the explain job's load at 10M: 3.5-5.0 -> 2.4-3.4 s),
    and encoding a 1M x 20 part with k = 10 0.25-0.34 s against 0.18-0.23 s (bench/README.md).
    Where anonymous mappings are not available, numpy's memory. The array keeps its mapping
    alive through its buffer; the mapping goes when the array does.
    """
    import mmap

    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * np.dtype(dtype).itemsize
    private, anonymous = getattr(mmap, "MAP_PRIVATE", None), getattr(mmap, "MAP_ANONYMOUS", None)
    if nbytes == 0 or private is None or anonymous is None:
        return np.empty(shape, dtype=dtype)
    mapping = mmap.mmap(-1, nbytes, flags=private | anonymous)
    return np.frombuffer(mapping, dtype=dtype, count=count).reshape(shape)


def cluster_memory() -> int:
    """Bytes the Dask workers may use (sum of memory_limit), or the free memory without a client."""
    try:
        from distributed import default_client

        workers = default_client().scheduler_info(n_workers=-1)["workers"].values()
        return int(sum(w.get("memory_limit", 0) or 0 for w in workers))
    except (ImportError, ValueError, TypeError):
        return free_memory()


def free_memory() -> int:
    """Bytes of this machine's memory available now."""
    import psutil

    return int(psutil.virtual_memory().available)


def memory_where(distributed: bool) -> int:
    """Bytes of the memory data would live in: the workers' for ``distributed``, else this
    machine's free memory."""
    return cluster_memory() if distributed else free_memory()


def share_that_fits(nbytes: int, memory: int, share: float, beside: int = 0) -> float:
    """The share (0..1) of ``nbytes`` that fits in ``share`` of ``memory`` beside ``beside`` bytes
    that take their place in it first."""
    return 1.0 if nbytes <= 0 else min(1.0, max(0.0, (share * memory - beside) / nbytes))


def fits_on_workers(nbytes: int, share: float = HOLD_MEMORY_SHARE) -> bool:
    """Whether ``nbytes`` fit in ``share`` of the workers' memory."""
    return share_that_fits(nbytes, cluster_memory(), share) >= 1.0


def hold(*arrays: Any, force: bool | None = None,
         while_reading: Callable[[tuple], Any] | None = None) -> tuple[tuple, bool]:
    """Persist dask arrays on the workers together (one read of their shared source) when they
    fit in ``HOLD_MEMORY_SHARE`` of the workers' memory; else leave them to be streamed.

    ``force`` True/False overrides the size rule. Returns (arrays, held). numpy input is held
    already. Holding is one pass (counted). ``while_reading(held)``, when the arrays are being held,
    runs on this process while the workers read (driver work that would otherwise wait); ``held``:
    the arrays as they will be returned, whose blocks are being read (work submitted on them then
    runs on each block as soon as it is read, in the read's pass).
    """
    lazy = [a for a in arrays if is_lazy(a)]
    if not lazy:
        return arrays, True
    if not any(reads_source(a) for a in lazy) and _all_persisted(lazy):
        return arrays, True
    nbytes = sum(int(a.nbytes) for a in lazy)
    keep = fits_on_workers(nbytes) if force is None else bool(force)
    if not keep:
        logger.info("data (%.1f GB) exceed %.0f%% of the workers' memory: streamed, each pass reads the source",
                    nbytes / 1e9, 100 * HOLD_MEMORY_SHARE)
        return arrays, False
    import dask

    record_pass(*lazy)
    persisted = dask.persist(*lazy)
    in_order = iter(persisted)
    held = tuple(next(in_order) if is_lazy(a) else a for a in arrays)
    if while_reading is not None:
        while_reading(held)
    _wait(persisted)
    return held, True


def _wait(arrays) -> None:
    """Block until persisted arrays are in memory (so that the step that held them pays for it)."""
    try:
        from distributed import default_client, wait
    except ImportError:  # pragma: no cover
        return
    try:
        default_client()
    except ValueError:
        return
    wait(list(arrays))


def _all_persisted(arrays: Sequence[Any]) -> bool:
    """True when every array's graph is made of futures already (persisted, nothing to compute)."""
    try:
        from distributed import Future
    except ImportError:  # pragma: no cover
        return False
    for a in arrays:
        graph = dict(a.__dask_graph__())
        for key in a.__dask_keys__() if a.ndim == 1 else [k for row in a.__dask_keys__() for k in row]:
            if not isinstance(graph.get(key), Future):
                return False
    return True


@dataclass
class KeptParts:
    """Per-part results kept where they were computed: one in-process object for numpy input
    (its kernels thread internally), or one persisted Dask object per chunk on the workers.
    ``summary``: what ``keep_parts`` was asked to reduce from them in the same pass."""

    parts: list
    distributed: bool
    summary: Any = None
    rows: tuple = ()  # rows of each part (X's row chunks)

    def release(self) -> None:
        self.parts = []

    def column(self, key: str, dtype=np.int64):
        """The per-row array ``part[key]`` of every part, as one column aligned with X's rows:
        numpy for in-process parts, else a dask array with X's row chunks whose blocks are
        picked out of the kept parts on their workers (no pass over X)."""
        if not self.distributed:
            return np.asarray(self.parts[0][key], dtype=dtype)
        import dask.array as da
        from dask.base import tokenize
        from dask.highlevelgraph import HighLevelGraph
        from dask.typing import Key

        name = "kept-column-" + tokenize([p.key for p in self.parts], key, np.dtype(dtype).str)
        layer: dict[Key, Any] = {(name, i): (_kept_column_block, p.key, key, dtype) for i, p in enumerate(self.parts)}
        graph = HighLevelGraph.from_collections(name, layer, dependencies=self.parts)
        return da.Array(graph, name, (tuple(self.rows),), dtype=dtype)


def _kept_column_block(part: dict, key: str, dtype) -> np.ndarray:
    return np.asarray(part[key], dtype=dtype)


def _run_kept(func: Callable[..., Any], part: Any, args: tuple) -> Any:
    with kernel_threading():
        return func(part, *args)


def keep_parts(func: Callable[..., Any], X, *args: Any, summarize: Callable[..., Any] | None = None,
               summarize_args: tuple = (), combine: Callable = add_parts) -> KeptParts:
    """``func(block, *args)`` on every row part of X, each result kept where it was computed
    (numpy: one call on the whole matrix; dask: persisted on the workers, one per chunk). One
    pass (counted; a read when X streams from its files).

    ``summarize(result, *summarize_args)`` merged by ``combine`` over the parts is computed in
    the same pass, into ``.summary``.
    """
    record_pass(X)
    if not is_lazy(X):
        with kernel_threading():
            made = func(X, *args)
            return KeptParts([made], False, summarize(made, *summarize_args) if summarize else None,
                             (int(X.shape[0]),))
    import dask

    task = dask.delayed(_run_kept, pure=True)
    made = [task(func, b, args) for b in one_column_chunk(X).to_delayed().ravel()]
    rows = tuple(int(r) for r in X.chunks[0])
    if summarize is None:
        return KeptParts(list(dask.persist(*made)), True, rows=rows)
    total = tree_reduce([task(summarize, m, summarize_args) for m in made], combine)
    *kept, total = dask.persist(*made, total)
    return KeptParts(kept, True, total.compute(), rows)


def reduce_kept(kept: KeptParts, func: Callable[..., Any], *args: Any, combine: Callable = add_parts,
                fan_in: int = FAN_IN):
    """``func(part, *args)`` on every kept part, merged up a tree of ``fan_in``-way merges: one
    pass over memory (counted, never a read)."""
    record_pass()
    if not kept.distributed:
        with kernel_threading():
            return fold(combine, *[func(p, *args) for p in kept.parts])
    import dask

    task = dask.delayed(_run_kept, pure=True)
    return tree_reduce([task(func, p, args) for p in kept.parts], combine, fan_in).compute()
