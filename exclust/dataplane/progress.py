"""Progress of a pipeline run: one log line per step with elapsed seconds, and a heartbeat.

A step that lasts longer than ``heartbeat`` seconds logs a line every ``heartbeat`` seconds
with the Dask scheduler's task counts (done / known), so a long pass over the data shows that
it moves. Log lines go to a callable (``print`` in the CLI, a Prefect logger in flows). With
``live=True`` (the CLI on a terminal) a one-line bar of the scheduler's tasks is redrawn in
place instead of heartbeat lines. Each step also opens a step of the timer's own pass counter
(``passes``: the run's, ``exclust.dataplane.run_context.RunContext``) and makes it the active one
inside, so the passes over the data and the reads of the files are counted per step of this run
(metrics.json), apart from any other run in the process.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator

from exclust.dataplane.parts import PassCounter, counting_passes

Log = Callable[[str], None]

# Set by the CLI's Ctrl-C handler. The KeyboardInterrupt it raises can land where Python swallows
# exceptions (a garbage-collector callback of distributed, a __del__): every step boundary checks
# this flag too, so an interrupted run stops at the latest when its current step ends, before
# anything is committed.
INTERRUPTED = threading.Event()


def stop_if_interrupted() -> None:
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt


def _scheduler_counts() -> tuple[int, int] | None:
    """(tasks done, tasks known) on the active Dask scheduler, or None without a client."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    try:
        info = client.run_on_scheduler(_count_tasks)
    except Exception:  # a busy or restarting scheduler must never break the run
        return None
    return int(info[0]), int(info[1])


def _count_tasks(dask_scheduler=None) -> tuple[int, int]:
    tasks = dask_scheduler.tasks
    done = sum(1 for ts in tasks.values() if ts.state in ("memory", "forgotten", "released"))
    return done, len(tasks)


class StepTimer:
    """Times named steps and reports them through ``log``; ``seconds`` maps step -> duration."""

    def __init__(self, log: Log | None = None, heartbeat: float = 10.0, live: bool = False,
                 passes: PassCounter | None = None) -> None:
        self.log: Log = log or (lambda message: None)
        self.heartbeat = heartbeat
        self.live = live
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()
        # One timer per run: the run's passes are counted per step, in this counter alone.
        self.passes = passes if passes is not None else PassCounter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    @contextlib.contextmanager
    def step(self, name: str, detail: str = "") -> Iterator[None]:
        """Time one step; log its start, its end, and a heartbeat while it runs long."""
        stop_if_interrupted()
        self.log(f"[{self.elapsed:7.1f} s] {name}{': ' + detail if detail else ''}")
        t0 = time.perf_counter()
        stop = threading.Event()
        target = self._bar if self.live else self._beat
        beat = threading.Thread(target=target, args=(name, t0, stop), daemon=True)
        if self.live or (self.heartbeat and self.heartbeat > 0):
            beat.start()
        try:
            with counting_passes(self.passes), self.passes.step(name):
                yield
        finally:
            stop.set()
            if beat.is_alive():
                beat.join(2)
            self.seconds[name] = round(time.perf_counter() - t0, 3)
        n, reads = self.passes.passes.get(name, 0), self.passes.reads.get(name, 0)
        counted = (f" ({n} pass{'es' if n != 1 else ''} over the data, "
                   f"{reads} read{'s' if reads != 1 else ''} of the files)") if n else ""
        self.log(f"[{self.elapsed:7.1f} s] {name} done in {self.seconds[name]:.1f} s{counted}")
        stop_if_interrupted()

    def _beat(self, name: str, t0: float, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat):
            counts = _scheduler_counts()
            tasks = f", Dask tasks {counts[0]}/{counts[1]} done" if counts else ""
            self.log(f"[{self.elapsed:7.1f} s]   ... {name} running for {time.perf_counter() - t0:.0f} s{tasks}")

    def _bar(self, name: str, t0: float, stop: threading.Event, width: int = 30) -> None:
        drawn = False
        while not stop.wait(0.5):
            counts = _scheduler_counts()
            if counts and counts[1]:
                done, total = counts
                filled = int(width * done / total)
                bar = f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total} tasks"
            else:
                bar = ""
            sys.stderr.write(f"\r  {name} {bar} {time.perf_counter() - t0:6.1f} s\033[K")
            sys.stderr.flush()
            drawn = True
        if drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
