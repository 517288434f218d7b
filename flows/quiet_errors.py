"""Bad input fails a run with one clear log line instead of Prefect's tracebacks.

Prefect logs a failed run's exception with its traceback up to three times: the flow engine's
"Encountered exception during execution", a failed task's own line, and "Engine execution exited
with unexpected exception" from the process that ran it; a rejected parameter model comes as a
message over several lines. For errors the user fixes by changing a parameter or the data (an
InputError, a parameter the model rejects: not ``flows.retry.is_transient``) the traceback adds
nothing to the message. This filter, on Prefect's run loggers, keeps each message on one line,
drops the traceback and drops the engine's repeat. Transient failures keep their tracebacks.
"""
from __future__ import annotations

import logging

from prefect.exceptions import ParameterTypeError

from flows.retry import is_transient

RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
ENGINE_REPEAT = "Engine execution exited with unexpected exception"


def is_bad_input(exc: BaseException) -> bool:
    """True for failures the user fixes by changing the parameters or the data."""
    return isinstance(exc, ParameterTypeError) or (isinstance(exc, Exception) and not is_transient(exc))


class OneLineForBadInput(logging.Filter):
    """Bad input: no traceback, no repeat, one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and is_bad_input(exc):
            if record.msg == ENGINE_REPEAT:
                return False  # the run's own lines have already said why it failed
            record.exc_info, record.exc_text = None, None
        args = record.args if isinstance(record.args, tuple) else ()
        if exc is not None and is_bad_input(exc) or any(isinstance(a, ParameterTypeError) for a in args):
            record.msg, record.args = " ".join(record.getMessage().split()), ()
        return True


def quiet_bad_input() -> None:
    """Install the filter on Prefect's run loggers (once per process)."""
    for name in RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, OneLineForBadInput) for f in logger.filters):
            logger.addFilter(OneLineForBadInput())
