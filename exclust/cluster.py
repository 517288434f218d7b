"""Dask clients for a run: to a scheduler by address, or a local cluster on 127.0.0.1.

A terminal's Ctrl-C reaches the whole process group: while a local cluster starts, its worker
processes are made to ignore SIGINT, so the driver alone handles it and stops them cleanly.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator


class SchedulerLost(RuntimeError):
    """The Dask scheduler went away during a run (its host, its process, or the network to it)."""


def scheduler_lost(client: Any) -> bool:
    """True once the client has lost its scheduler: it is reconnecting or closed, its futures cancelled."""
    return client.status not in ("running", "newly-created")


def close_quietly(client: Any) -> None:
    """Close a client whose scheduler is gone: its reconnection attempt, cut short, logs a traceback that is no news."""
    import logging

    logger = logging.getLogger("distributed.client")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        client.close()
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def dask_cluster(address: str | None = None, n_workers: int | None = None, threads_per_worker: int = 1) -> Iterator[Any]:
    """A distributed Client: to the scheduler at ``address``, or to a new local cluster on 127.0.0.1."""
    from distributed import Client, LocalCluster

    if address:
        client = Client(address, timeout="30s")
        try:
            yield client
        except Exception as exc:
            if not scheduler_lost(client):
                raise
            close_quietly(client)
            raise SchedulerLost(f"lost the Dask scheduler {address} during the run ({type(exc).__name__}); "
                                "the output it was writing is not committed; run again once the scheduler is back") from exc
        finally:
            client.close()
        return
    import logging
    import threading

    # Prefect's logging setup lets distributed's start-up chatter through; a local cluster is routine.
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker", "distributed.http.proxy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    n_workers = n_workers or max(1, min(4, os.cpu_count() or 1))
    # Worker processes read their log level from the environment at start; restore it afterwards.
    saved = os.environ.get("DASK_LOGGING__DISTRIBUTED")
    os.environ["DASK_LOGGING__DISTRIBUTED"] = saved or "warning"
    # Ctrl-C in a terminal reaches the whole process group. While the cluster starts, SIGINT is
    # ignored (worker processes inherit that, so the driver alone handles Ctrl-C and stops them,
    # without a traceback from each) and blocked here (so a Ctrl-C pressed meanwhile stays pending
    # and arrives once the handler is back).
    interrupts = _DeferredInterrupts() if threading.current_thread() is threading.main_thread() else None
    try:
        cluster = LocalCluster(
            n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
            host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.WARNING,
        )
    except BaseException:
        if interrupts:
            interrupts.restore()
        raise
    finally:
        if saved is None:
            os.environ.pop("DASK_LOGGING__DISTRIBUTED", None)
    try:
        if interrupts:
            interrupts.restore()
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        # Slow worker exits are killed by their nanny; that is the intended end, not news.
        nanny = logging.getLogger("distributed.nanny")
        nanny.setLevel(max(nanny.level, logging.ERROR))  # (a Ctrl-C may have silenced it entirely)
        cluster.close()


class _DeferredInterrupts:
    """SIGINT ignored for processes started meanwhile and held back for this one, until ``restore``."""

    def __init__(self) -> None:
        import signal

        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # blocked, so a Ctrl-C stays pending

    def restore(self) -> None:
        import signal

        signal.signal(signal.SIGINT, self.previous if self.previous is not None else signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending Ctrl-C arrives now
