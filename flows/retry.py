"""When a flow task retries: on transient failures (lost workers, timeouts, I/O), never on bad input."""
from __future__ import annotations

RETRIES = 2
RETRY_DELAYS: list[float] = [2, 10]

# Errors that say the input or the request is wrong: running again cannot help.
_PERMANENT = (ValueError, TypeError, KeyError, LookupError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
              PermissionError)


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: everything except bad input (InputError is a ValueError)."""
    return not isinstance(exc, _PERMANENT)


def retry_if_transient(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry unless the task failed on bad input."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            state.result(raise_on_failure=True)
        except BaseException as raised:  # the failed task's own exception
            exc = raised
        else:
            return False
    return is_transient(exc)
