"""Independent tasks of one run, each writing its own piece: one Dask task each, cancelled whole.

``run_tasks`` runs ``fn(*args)`` for every argument tuple as one task on the active Dask client
(else here, one after the other) and returns the results in order. A task's arguments may hold
dask collections or delayed values (a part of a source's lazy columns): each task gets them
computed, read where the task runs. Labelling runs its per-file and per-part tasks here.

A task that writes must never write after its run gave up. Tasks write only below the run's
staging (``exclust.outputs.staging``), which the run removes when it gives up: the removal waits
for a writer still inside (the staging's writers lock), and a task that comes to write later
finds the staging gone and writes nothing (``StagingGone``). On a failure the futures are
cancelled and ``run_tasks`` also waits (bounded) until no task of this run is still executing on
a worker, asked of the workers' own state (``executing_tasks``: a cancelled task whose thread
still runs stays in a worker's executing set until it returns), so nothing is kept in a module.
On a stop signal (issue 29: a run stops within 10 s whatever its tasks are doing; in a Prefect flow
run, cancelled by SIGTERM, Prefect's ``TerminationSignal``) the futures are cancelled and no task
is waited for: a task busy for seconds more (a large file on a loaded
machine) would hold the stop that long. A local cluster the run started (``dask_cluster``) is
closed at once, before the caller removes what the tasks wrote: its worker processes end, so no
task writes afterwards, staged or not (a lake table's night files are written in place). On a
scheduler by address a task may run on; the staging removal makes it write nothing.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from exclust.dataplane.cluster import run_cluster, scheduler_lost
from exclust.dataplane.progress import INTERRUPTED
from exclust.dataplane.stop_signals import held_back


def current_client() -> Any:
    """The active Dask client, or None (no cluster: tasks run in this process)."""
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def task_prefix(fn: Callable, run_id: str) -> str:
    """The key prefix of ``fn``'s tasks in run ``run_id``: named after the task (the dashboard groups
    them so) and the run (unique across runs)."""
    return f"{fn.__name__.lstrip('_')}-{run_id}-"


def _executing_here(prefix: str, dask_worker: Any = None) -> int:
    state = getattr(dask_worker, "state", None)
    running = list(getattr(state, "executing", ())) + list(getattr(state, "long_running", ()))
    return sum(1 for ts in running if str(ts.key).startswith(prefix))


def executing_tasks(client: Any, prefix: str) -> int:
    """How many tasks whose key starts with ``prefix`` still execute on the client's workers
    (cancelled ones whose thread has not returned included)."""
    return int(sum(client.run(_executing_here, prefix).values()))


def run_tasks(fn: Callable[..., Any], args: Sequence[tuple], run_id: str, *, timeout: float = 120.0) -> list:
    """``fn(*a)`` for each ``a``: on the active Dask client (one task each), else here in turn.

    On any failure or interrupt the tasks are cancelled; on a failure the call then waits (up to
    ``timeout`` seconds) until none of this run's tasks is still executing on a worker; on a stop
    signal (KeyboardInterrupt) it waits for none (see the module's docstring). Then the error is
    raised.
    """
    import dask

    prefix = task_prefix(fn, run_id)
    tasks = [dask.delayed(fn, pure=False)(*a, dask_key_name=f"{prefix}{i}") for i, a in enumerate(args)]
    client = current_client()
    if client is None:
        return list(dask.compute(*tasks, scheduler="synchronous"))
    futures = client.compute(tasks)
    try:
        return client.gather(futures)
    except BaseException as exc:
        if scheduler_lost(client):
            # Nothing to cancel through; the workers lose the scheduler too, and a task still
            # writing sees its staging gone (exclust.outputs.staging).
            raise
        client.cancel(futures)
        if _stopping(exc):
            _close_run_cluster(client)
            raise
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not executing_tasks(client, prefix):
                    break
            except Exception:  # workers already gone: nothing of this run is running
                break
            time.sleep(0.1)
        raise


def _stopping(exc: BaseException) -> bool:
    """Whether ``exc`` stops the run rather than fails it: a stop signal's interrupt (``stop_signals``), any other
    exception that is not an ``Exception`` (``SystemExit``; Prefect's ``TerminationSignal``, which its flow engine
    raises on the SIGTERM that cancels a flow run), or anything raised while the run was being stopped."""
    return not isinstance(exc, Exception) or INTERRUPTED.is_set()


def _close_run_cluster(client: Any) -> None:
    """The local cluster this run started, closed now (its worker processes end, with any task still running)."""
    cluster = getattr(client, "cluster", None)
    if cluster is None or cluster is not run_cluster():
        return
    with held_back():
        client.close()
        cluster.close()
