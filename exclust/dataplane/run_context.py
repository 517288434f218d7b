"""One run's own state: its opened input, its pass counter and its step timer.

Nothing of a run lives in a module: a ``RunContext`` is made per run (the explain job's ``Run``,
a labelling run) and dropped with it, so two runs in one process (a notebook, a Prefect worker)
count their passes apart, one after the other or at once on two threads. Passes count into the
counter active in the calling thread or task (``parts.counting_passes``): each step of the timer
makes the run's counter active, and ``active()`` does so for work outside the steps. Outside any
run (an estimator called from Python) no counter is active and no pass is counted.

The input is opened once per run (``source``): the data plane does not know what a source is,
so the caller hands the opener; every later step asks the context for the same opened source
(a table's log or catalog read once, not at every step).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from exclust.dataplane.parts import PassCounter, counting_passes
from exclust.dataplane.progress import Log, StepTimer


class RunContext:
    """One run's opened input (``source``), pass counter (``passes``) and step timer (``timer``).

    Parameters
    ----------
    log : callable, optional
        Where the timer's step lines go (default: nowhere).
    live : bool, default False
        Draw a one-line bar of the Dask tasks instead of heartbeat lines (a terminal).
    heartbeat : float, default 10.0
        Seconds between heartbeat lines of a long step.
    timer : StepTimer, optional
        A timer made by the caller; its pass counter becomes the run's.
    """

    def __init__(self, log: Log | None = None, *, live: bool = False, heartbeat: float = 10.0,
                 timer: StepTimer | None = None) -> None:
        self.timer = timer if timer is not None else StepTimer(log, heartbeat=heartbeat, live=live)
        self.passes: PassCounter = self.timer.passes
        self._source: Any = None

    def source(self, open_source: Callable[[], Any]) -> Any:
        """The run's input, opened by ``open_source()`` the first time it is asked for, then kept."""
        if self._source is None:
            self._source = open_source()
        return self._source

    @property
    def opened(self) -> Any:
        """The input opened so far (None before ``source`` was first asked)."""
        return self._source

    @contextlib.contextmanager
    def active(self) -> Iterator[RunContext]:
        """Count the passes made inside (this thread or task) into this run's counter."""
        with counting_passes(self.passes):
            yield self

    def step(self, name: str, detail: str = ""):
        """One timed step of the run (``StepTimer.step``), its passes counted in this run."""
        return self.timer.step(name, detail)
