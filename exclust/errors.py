"""The errors exclust raises on purpose; the CLI maps each to exit code 2 with its one-line message."""
from __future__ import annotations


class InputError(ValueError):
    """Input that exclust cannot use; the message names the problem and the fix."""


class ParameterError(InputError):
    """An estimator parameter out of its declared range; the message names the parameter and what it accepts."""
