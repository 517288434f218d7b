"""Stop signals (SIGINT, SIGTERM, SIGHUP) obeyed at any moment of a run, in the process that runs it.

One policy for the whole process, from the first line of the command to the last byte committed:

- ``listening()`` installs the handler (the CLI's ``main`` enters it first of all). The first stop
  signal raises KeyboardInterrupt in the main thread, where the run's clean-up (tasks cancelled,
  staging removed, the cluster closed) unwinds it; later ones are ignored while that clean-up runs.
  The signals are never set to SIG_IGN in this process: a signal ignored for a moment, while another
  thread takes it, is lost, and the run would go on to finish.
- ``held_back()`` marks a section that must not be cut in two (a local cluster's start, a commit's
  rename): a stop signal that lands inside is recorded and raised when the section ends.
- ``blocked_for_new_processes()``: the stop signals blocked in this thread, so that the threads and
  processes it starts (a local cluster's event loop, its worker processes) inherit the block. Ctrl-C
  and ``kill -- -PGID`` reach the whole process group; the workers then leave the stopping to the
  driver, which stops them with a message and, at worst, SIGKILL. A signal sent meanwhile is taken
  by an unblocked thread (Python records it and runs the handler in the main thread) or stays
  pending until the block ends: it is never lost.
- ``note_committed(url)``: an output committed whole. A stop that lands after a commit must not say
  the output was removed: the CLI names what was committed and exits with its own status.

Python swallows an exception raised inside a garbage-collector callback, a weakref callback or a
finalizer (distributed registers such callbacks), printing "Exception ignored in ...". Such a
swallowed interrupt reaches ``sys.unraisablehook``: it is dropped there and delivered again once the
callback has returned; a signal that lands inside a garbage-collector callback is not raised there
at all but delivered again a moment later (distributed's GC diagnosis times each collection from its
"start" to its "stop" callback: an interrupt between the two fails an assertion at the next one). So
is one that lands inside a descriptor's ``__set_name__``, where Python 3.11 wraps any exception in a
RuntimeError (a class made while a module imports), and one that lands while a C extension module initialises,
whose init turns any exception into an ImportError.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator

# The signals that stop a run the way Ctrl-C does, and how the closing line names each.
STOP_SIGNALS: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
_REDELIVER_SECONDS = 0.05


@dataclasses.dataclass
class Stop:
    """What a stop signal did to the run: which signal (None: none came) and what was committed before it."""

    signum: int | None = None
    committed: list[str] = dataclasses.field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return STOP_SIGNALS.get(self.signum or signal.SIGINT, "Ctrl-C")


@dataclasses.dataclass
class _State:
    stop: Stop | None = None  # set while ``listening``
    holds: int = 0  # depth of ``held_back`` sections (main thread)
    pending: int | None = None  # a signal that landed inside a held section
    raised: bool = False  # the KeyboardInterrupt of the first signal was raised (and not swallowed)
    settled: bool = False  # the run's outcome is decided (``settle``): no signal is raised or delivered again


_STATE = _State()


def note_committed(url: str) -> None:
    """Record that ``url`` was committed whole (the commit protocol calls it once the output is in place)."""
    if _STATE.stop is not None:
        _STATE.stop.committed.append(str(url))


def _mark_interrupted() -> None:
    """Step boundaries check ``progress.INTERRUPTED`` too (when the run got that far: no import here)."""
    progress = sys.modules.get("exclust.dataplane.progress")
    if progress is not None and hasattr(progress, "INTERRUPTED"):
        progress.INTERRUPTED.set()


def quiet_shutdown() -> None:
    """After a stop, the cluster is torn down mid-task; its loggers' tracebacks are not news. (No import: the
    signal may land while ``logging`` itself is being imported; then there is nothing to quiet yet.)"""
    logging = sys.modules.get("logging")
    if logging is None or not hasattr(logging, "getLogger") or not hasattr(logging, "CRITICAL"):
        return
    names = [n for n in list(logging.root.manager.loggerDict)
             if n.split(".")[0] in ("distributed", "tornado", "asyncio")]
    for name in names + ["distributed", "tornado", "asyncio"]:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _raise_stop() -> None:
    _STATE.raised = True
    try:  # nothing but the KeyboardInterrupt may leave the handler, wherever it interrupted
        _mark_interrupted()
        quiet_shutdown()
    except Exception:
        pass
    raise KeyboardInterrupt


def settle() -> None:
    """The run's outcome is decided: a stop signal from here on changes nothing (ignored; one that came before
    is in the ``Stop`` that ``listening`` yielded)."""
    if _STATE.stop is None or threading.current_thread() is not threading.main_thread():
        return
    _STATE.settled = True  # a signal landing now is only recorded, none is delivered again
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def held_back() -> Iterator[None]:
    """A section no stop signal cuts in two: one that lands inside is raised as KeyboardInterrupt at its end."""
    if threading.current_thread() is not threading.main_thread() or _STATE.stop is None:
        yield
        return
    _STATE.holds += 1
    try:
        yield
    finally:
        _STATE.holds -= 1
    if _STATE.holds == 0 and _STATE.pending is not None and not _STATE.raised:
        _STATE.pending = None
        _raise_stop()


@contextlib.contextmanager
def blocked_for_new_processes() -> Iterator[None]:
    """The stop signals blocked in this thread meanwhile: the threads and processes started inside inherit the
    block (kept for their whole life), so a signal to the process group stops the driver alone."""
    from multiprocessing import resource_tracker

    signals = list(STOP_SIGNALS)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    # multiprocessing's resource tracker (a process of this group) started now, with the block, if not yet:
    # starting it unblocks SIGINT and SIGTERM in the starting thread (else the cluster's event loop, at its
    # first semaphore, and every worker process started after that would inherit the unblocking), and it
    # ignores SIGINT and SIGTERM but not SIGHUP, which then ended it ("process died unexpectedly").
    resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a signal pending meanwhile arrives now


@contextlib.contextmanager
def listening(keep_settled: bool = False) -> Iterator[Stop]:
    """The stop-signal handler installed for the run (main thread only; elsewhere a no-op).

    Yields the run's ``Stop``: ``signum`` once a stop signal came, ``committed`` the outputs committed
    whole before it (``note_committed``).

    Parameters
    ----------
    keep_settled : bool, default False
        Once ``settle`` was called, leave the stop signals ignored on exit instead of restoring the previous
        handlers: for a process that ends with the run (the ``exclust`` command), so that a signal landing while
        it exits cannot turn a decided outcome into a kill."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    inside = [True]

    def handler(signum, frame):
        if _STATE.raised or _STATE.settled:
            if _STATE.settled:
                stop.signum = stop.signum or signum
            return  # already stopping: let the clean-up (cancel tasks, remove staging) finish
        if _must_defer(frame):
            threading.Timer(_REDELIVER_SECONDS, redeliver, (signum,)).start()
            return
        stop.signum = stop.signum or signum
        if _STATE.holds:
            _STATE.pending = signum
            _mark_interrupted()
            return
        _raise_stop()

    def redeliver(signum):
        if inside[0] and not _STATE.settled:
            os.kill(os.getpid(), signum)

    previous_hook = sys.unraisablehook

    def unraisable(event):
        if event.exc_type is KeyboardInterrupt and stop.signum is not None:
            _STATE.raised = False  # swallowed: raise it again once the callback returned
            threading.Timer(_REDELIVER_SECONDS, redeliver_swallowed).start()
            return
        previous_hook(event)

    def redeliver_swallowed():
        if inside[0] and not _STATE.settled and not _STATE.raised and stop.signum is not None:
            os.kill(os.getpid(), stop.signum)

    saved = dataclasses.replace(_STATE)
    _STATE.stop, _STATE.holds, _STATE.pending, _STATE.raised, _STATE.settled = stop, 0, None, False, False
    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    sys.unraisablehook = unraisable
    try:
        yield stop
    finally:
        inside[0] = False
        sys.unraisablehook = previous_hook
        if not (keep_settled and _STATE.settled):
            for signum, action in previous.items():
                signal.signal(signum, action)
        _STATE.stop, _STATE.holds, _STATE.pending = saved.stop, saved.holds, saved.pending
        _STATE.raised, _STATE.settled = saved.raised, saved.settled


_NUMBA_SERIALIZE = os.path.join("numba", "core", "serialize.py")
_LOGGING_SOURCE = logging.__file__


def _must_defer(frame) -> bool:
    """Whether the signal landed where an interrupt raised now would come out as some other error, so it is
    delivered again shortly instead: ``frame`` or a caller of it runs

    - a descriptor's ``__set_name__``: Python 3.11 turns any exception raised there, an interrupt included, into
      ``RuntimeError("Error calling __set_name__ ...")`` (a class being made while a module imports: the sweep's
      SIGHUP at 3 s landed in ``packaging.markers``; exit 1, a traceback);
    - the creation or execution of a C extension module (``ExtensionFileLoader``): the module's C init may import
      further modules, and an interrupt raised in them comes out of the init as an ImportError (the sweep's SIGHUP
      at 1 s of a label run landed while numba's ``_dispatcher`` imported ``numba._devicearray``);
    - a callback of the garbage collector (``gc.callbacks``), whose exceptions are unraisable;
    - numba's ``_numba_unpickle``, which compiled ``parallel=True`` code calls on every call: a signal that arrived
      while the compiled code ran is handled at the callback's first instruction, and the interrupt once came out
      of the kernel as ``SystemError: ... returned a result with an exception set`` (a SIGTERM at 6 s of the demo's
      explain, inside ``surrogate_histograms``; exit 1, a traceback);
    - the ``logging`` module: it takes its locks with ``acquire()`` before a ``try``, so an interrupt raised as
      the acquire returns leaves the lock held by this thread for good, and the next thread that logs waits on
      it forever (the demo stopped at 5.6 s: Dask's event loop thread hung in ``isEnabledFor``, its workers
      were never closed, and the process waited on them at exit).

    One walk up the stack checks all five."""
    import gc

    gc_codes = {getattr(getattr(cb, "__func__", cb), "__code__", None) for cb in gc.callbacks}
    gc_codes.discard(None)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__set_name__" or code in gc_codes:
            return True
        if code.co_name == "_numba_unpickle" and code.co_filename.endswith(_NUMBA_SERIALIZE):
            return True
        if code.co_filename == _LOGGING_SOURCE:
            return True
        if code.co_name in ("create_module", "exec_module") and code.co_filename.endswith("_bootstrap_external>"):
            if type(frame.f_locals.get("self")).__name__ == "ExtensionFileLoader":
                return True
        frame = frame.f_back
    return False
