"""A data source whose rows a labelling task reads for as long as the test wants (issue 29, item 1).

Named in ``EXCLUST_PLUGINS`` (with this folder on ``PYTHONPATH``, which the worker processes
inherit), it makes ``exclust label --input SPEC.blocking`` label rows that are in memory on the
driver but that a Dask worker cannot read: asked for their values inside a task, they create a
file in the spec's ``started`` folder and wait until its ``release`` file exists. The test then
knows for certain that a label task is running, and that it stays running, when it sends a stop
signal: no timing window.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

from exclust.errors import InputError
from exclust.sources.base import Columns, DataSource, register_source
from exclust.sources.guards import input_guards

WAIT_LIMIT_SECONDS = 600.0  # a bound on an orphaned task only: the test releases it


class BlockingRows:
    """``n`` x 2 zeros, held back from any Dask worker's task until the ``release`` file exists."""

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(self, n: int, started: str, release: str) -> None:
        self.n, self.started, self.release = n, started, release

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, 2)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rows: slice) -> BlockingRows:
        return BlockingRows(len(range(*rows.indices(self.n))), self.started, self.release)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        try:
            from distributed import get_worker

            get_worker()
        except (ImportError, ValueError):  # not inside a task: nothing to hold back
            return np.zeros(self.shape, dtype=dtype or np.float64)
        os.makedirs(self.started, exist_ok=True)
        with open(os.path.join(self.started, f"task-{os.getpid()}-{time.monotonic_ns()}"), "w"):
            pass
        deadline = time.monotonic() + WAIT_LIMIT_SECONDS
        while not os.path.exists(self.release) and time.monotonic() < deadline:
            time.sleep(0.05)
        return np.zeros(self.shape, dtype=dtype or np.float64)


class BlockingSource(DataSource):
    """``SPEC.blocking``: a JSON file ``{"rows": N, "started": FOLDER, "release": FILE}``; columns x0, x1."""

    kind = "blocking rows"

    @classmethod
    def recognises(cls, spec, storage_options=None) -> bool:
        return isinstance(spec, (str, os.PathLike)) and str(spec).endswith(".blocking")

    def check(self) -> str:
        if not os.path.isfile(self.spec):
            raise InputError(f"input not found: {self.spec}")
        return str(self.spec)

    def columns(self, features, extra_columns=(), *, piece_rows=1_000_000) -> Columns:
        with open(self.spec) as f:
            spec = json.load(f)
        return Columns(BlockingRows(int(spec["rows"]), spec["started"], spec["release"]), ["x0", "x1"])

    def guards(self) -> list:
        return input_guards(self.spec, storage_options=self.storage_options)


register_source(BlockingSource)
