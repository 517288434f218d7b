"""Bad input fails a run with one clear log line instead of Prefect's tracebacks.

Prefect logs a failed run's exception with its traceback up to three times: the flow engine's
"Encountered exception during execution", a failed task's own line, and "Engine execution
exited with unexpected exception" from the process that ran it; a rejected parameter model comes
as a message over several lines, after a dump of pydantic's error dictionaries. For errors the
user fixes by changing a parameter or the data (an InputError, a parameter the model rejects:
not ``flows.retry.is_transient``) the traceback adds nothing to the message. This filter, on
Prefect's run loggers, keeps each message on one line, drops the traceback and the dump, and
turns the engine's repeat into a line that says what to fix. Transient failures keep theirs.
"""
from __future__ import annotations

import logging

from prefect.exceptions import ParameterTypeError

from flows.retry import is_transient

RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine", "prefect.flows")
ENGINE_REPEAT = "Engine execution exited with unexpected exception"
BAD_INPUT = "Run failed on bad input (change the parameters or the data):"
# pydantic's error dicts; the engine's next line says it plainly
RAW_VALIDATION = "Parameter validation failed for flow"


def is_bad_input(exc: BaseException) -> bool:
    """True for failures the user fixes by changing the parameters or the data."""
    return isinstance(exc, ParameterTypeError) or (isinstance(exc, Exception) and not is_transient(exc))


class OneLineForBadInput(logging.Filter):
    """Bad input: no traceback, no repeat, one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(RAW_VALIDATION):
            return False
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and is_bad_input(exc):
            if record.msg == ENGINE_REPEAT:
                # The one line of the run's log in the UI for a rejected parameter (the engine's
                # validation line goes to the worker's console only): say what to fix instead.
                record.msg, record.args = f"{BAD_INPUT} {exc}", ()
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
