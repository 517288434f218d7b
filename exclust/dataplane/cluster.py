"""Dask clients for a run: to a scheduler by address, or a local cluster on 127.0.0.1.

A terminal's Ctrl-C reaches the whole process group (and so may SIGTERM or SIGHUP): a local cluster's
worker processes start with them blocked, so the driver alone handles them and stops the workers
cleanly; a stop signal during the cluster's start or close is obeyed once it stands or is gone
(``exclust.dataplane.stop_signals``).
"""
from __future__ import annotations

import contextlib
import logging
import os
import weakref
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin


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


# The local cluster ``dask_cluster`` started for the run in progress (each run holds its own value).
_RUN_CLUSTER: ContextVar[Any] = ContextVar("exclust_run_cluster", default=None)


def run_cluster() -> Any:
    """The local cluster that ``dask_cluster`` started for the run in progress; None for a scheduler by address."""
    return _RUN_CLUSTER.get()


@contextlib.contextmanager
def dask_cluster(address: str | None = None, n_workers: int | None = None,
                 threads_per_worker: int = 1) -> Iterator[Any]:
    """A distributed Client: to the scheduler at ``address``, or to a new local cluster on 127.0.0.1.

    The client is the current one for the run (``Client.as_current``): a caller's own client, entered
    as a context manager, is the context's current client and would otherwise take the run's
    computations, and keep whatever of them a lingering reference holds after the run's client
    has closed."""
    from distributed import Client, LocalCluster

    if address:
        timeout = connect_timeout()
        check_scheduler(address, timeout)
        client = Client(address, timeout=f"{timeout}s")
        try:
            client.register_plugin(QuietUserErrors())
            with client.as_current():
                yield client
        except Exception as exc:
            if not scheduler_lost(client):
                raise
            close_quietly(client)
            raise SchedulerLost(f"lost the Dask scheduler {address} during the run ({type(exc).__name__}); "
                                "the output it was writing is not committed; run again once the scheduler is "
                                "back") from exc
        finally:
            client.close()
        return
    from exclust.dataplane.stop_signals import blocked_for_new_processes, held_back

    # Prefect's logging setup lets distributed's start-up chatter through; a local cluster is routine.
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker",
                 "distributed.http.proxy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    n_workers = n_workers or max(1, min(4, os.cpu_count() or 1))
    # Worker processes read their log level from the environment at start; restore it afterwards.
    saved = os.environ.get("DASK_LOGGING__DISTRIBUTED")
    os.environ["DASK_LOGGING__DISTRIBUTED"] = saved or "warning"
    # A stop signal during the start is raised once the cluster stands (a half-started one would leave
    # its worker processes behind), and the cluster is closed then like after any stop. Its threads and
    # worker processes start with the stop signals blocked, for good: a signal to the whole process
    # group (Ctrl-C in a terminal, ``kill -- -PGID``) stops the driver alone, which stops them cleanly.
    cluster = None
    try:
        with held_back():
            try:
                with blocked_for_new_processes():
                    cluster = LocalCluster(
                        n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                        host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.WARNING,
                    )
            finally:
                if saved is None:
                    os.environ.pop("DASK_LOGGING__DISTRIBUTED", None)
        with held_back():
            client = Client(cluster)
        token = _RUN_CLUSTER.set(cluster)
        try:
            client.register_plugin(QuietUserErrors())
            with client.as_current():
                yield client
        finally:
            _RUN_CLUSTER.reset(token)
            with held_back():
                client.close()
    finally:
        if cluster is not None:
            # Slow worker exits are killed by their nanny; that is the intended end, not news.
            nanny = logging.getLogger("distributed.nanny")
            nanny.setLevel(max(nanny.level, logging.ERROR))  # (a stop may have silenced it entirely)
            with held_back():
                cluster.close()


class UserErrorFilter(logging.Filter):
    """Drops a worker's "Compute Failed" record (its repr and a traceback fragment) when the task
    failed on bad input (an exclust ``InputError``, a damaged tree file) or on staging its stopped run removed
    (``StagingGone``): the driver reports the one, in one line, and the other is the intended end."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if isinstance(record.msg, str) and record.msg.startswith("Compute Failed") and len(args) >= 4:
            return str(args[3]).split("(", 1)[0] not in _quiet_error_names()  # args[3]: repr of the exception
        return True


def _quiet_error_names() -> set[str]:
    from exclust.errors import InputError, StagingGone, TreeFormatError

    names, todo = {StagingGone.__name__}, [InputError, TreeFormatError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


class ClosingHeartbeatFilter(logging.Filter):
    """Drops a worker's "Failed to communicate with scheduler during heartbeat" record (and its traceback) while
    that worker closes, and only then.

    Why: distributed's ``Worker.close`` stops the heartbeat's periodic callback but not a heartbeat already
    waiting on the scheduler's reply, and then closes the worker's connection pool under it (``rpc.close``):
    the waiting heartbeat fails with ``CommClosedError`` ("Stream is closed") and logs it as an error with a
    traceback. The scheduler is still up (``LocalCluster.close`` closes the workers, through their nannies,
    before the scheduler); nothing failed. It shows when a close meets a heartbeat in flight (1 of 15
    explain runs stopped by a signal at load 0.5-4; in 3 of 3 runs of the fault and signal tests). A
    heartbeat that fails while the worker runs (the scheduler lost) is news and still logged.
    """

    MESSAGE = "Failed to communicate with scheduler during heartbeat"

    def __init__(self, worker) -> None:
        super().__init__()
        self._worker = weakref.ref(worker)

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(self.MESSAGE)):
            return True
        worker = self._worker()
        return worker is None or getattr(worker, "status", None) not in (Status.closing, Status.closed)


class PeerClosedTransferFilter(logging.Filter):
    """Drops a worker's record of a transfer between workers cut by the other worker closing the connection
    (``CommClosedError``), with its traceback: "failed during get data" (the sender: the asking worker hung up
    after the data were sent) and "Worker stream died during communication" (the asker: the sender went away).

    Why: when a stopped run closes its local cluster, one worker may close while a partial result of a
    reduction's merge passes between them (the demo's explain stopped at 3.95 s and at 4.75 s: exit 143, its
    output removed, and one such traceback on stderr each time). A transfer cut any other way (another error) is
    still logged. A worker that dies while the run goes on is reported by its nanny and the scheduler in their own
    words. Installed on the workers of the clusters exclust starts only."""

    MESSAGES = ("failed during get data", "Worker stream died during communication")

    def filter(self, record: logging.LogRecord) -> bool:
        from distributed.comm.core import CommClosedError

        if not (isinstance(record.msg, str) and record.msg.startswith(self.MESSAGES)):
            return True
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, CommClosedError)


class QuietUserErrors(WorkerPlugin):
    """Installs ``UserErrorFilter``, ``PeerClosedTransferFilter`` and ``ClosingHeartbeatFilter`` on every worker's
    ``distributed.worker`` logger (once per worker)."""

    name = "exclust-quiet-user-errors"

    def setup(self, worker) -> None:
        logger = logging.getLogger("distributed.worker")
        if not any(isinstance(f, UserErrorFilter) for f in logger.filters):
            logger.addFilter(UserErrorFilter())
        if not any(isinstance(f, PeerClosedTransferFilter) for f in logger.filters):
            logger.addFilter(PeerClosedTransferFilter())
        for f in [f for f in logger.filters if isinstance(f, ClosingHeartbeatFilter)]:
            logger.removeFilter(f)  # one worker per process; a filter of a worker gone before it does nothing
        logger.addFilter(ClosingHeartbeatFilter(worker))


CONNECT_TIMEOUT_SECONDS = 10.0
CONNECT_TIMEOUT_ENV = "EXCLUST_SCHEDULER_TIMEOUT"


def connect_timeout() -> float:
    """Seconds a run waits for a Dask scheduler to answer: ``EXCLUST_SCHEDULER_TIMEOUT``, default 10."""
    from exclust.errors import InputError

    text = os.environ.get(CONNECT_TIMEOUT_ENV, "").strip()
    if not text:
        return CONNECT_TIMEOUT_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise InputError(f"{CONNECT_TIMEOUT_ENV}={text!r} is not a positive number of seconds; set it to e.g. 30")
    return value


def check_scheduler(address: str, timeout: float) -> None:
    """InputError, in one line, unless a Dask scheduler answers at ``address`` within ``timeout`` seconds.

    distributed's own Client raises a ValueError deep in its address parsing for a malformed
    address, retries a refused connection until its timeout, and waits without end for the
    handshake of a server that speaks another protocol: this asks the scheduler who it is, with
    every stage bounded, before the Client connects.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend
    from distributed.security import Security

    from exclust.errors import InputError

    try:
        scheme, location = parse_address(address)  # no scheme: tcp, as distributed reads it
        get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise InputError(f"Dask scheduler address {address!r} is not valid ({exc}); "
                         "give it as tcp://HOST:PORT") from None

    async def identity() -> dict:
        comm = await connect(address, timeout=timeout, **Security().get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def ask() -> dict:
        return asyncio.run(asyncio.wait_for(identity(), timeout + 1))  # connect's own error first, when it has one

    pool = ThreadPoolExecutor(1, thread_name_prefix="exclust-scheduler-check")
    try:
        reply = pool.submit(ask).result(timeout + 5)
    except (Exception, FutureTimeout) as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        reason = " ".join(reason.split())
        raise InputError(f"no Dask scheduler answered at {address} within {timeout:g} s ({reason}); check the address "
                         f"and that the scheduler runs (a slow network: raise {CONNECT_TIMEOUT_ENV})") from None
    finally:
        pool.shutdown(wait=False)
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind != "Scheduler":
        raise InputError(f"{address} is a Dask {kind or 'service'}, not a scheduler; give the scheduler's address")
