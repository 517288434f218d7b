"""The errors exclust raises on purpose; the CLI maps each to exit code 2 with its one-line message.

An error whose fix is an option of the interface carries that option, so each interface names
the fix in its own words: ``InputError("... pass {fix}", option="nan_policy", value="drop")``
reads ``nan_policy='drop'`` from Python (``str(exc)``), ``--drop-nan`` on the command line
(``exc.describe("cli")``) and ``the nan_policy parameter (drop)`` in a flow form
(``exc.describe("flow")``).
"""
from __future__ import annotations

from typing import Any

INTERFACES = ("python", "cli", "flow")

# option -> how each interface spells "set it to VALUE"; options not listed use the generic forms below.
_OPTION_WORDS: dict[str, dict[str, Any]] = {
    "nan_policy": {"cli": lambda v: "--drop-nan" if v == "drop" else "no --drop-nan"},
    "k": {"flow": lambda v: f"the n_clusters parameter ({v})"},  # ExplainParams names k n_clusters
}


def _generic(interface: str, option: str, value: Any) -> str:
    if interface == "cli":
        return f"--{option.replace('_', '-')} {value}"
    if interface == "flow":
        return f"the {option} parameter ({value})"
    return f"{option}={value!r}"


def option_words(interface: str, option: str, value: Any) -> str:
    """How ``interface`` names setting ``option`` to ``value``."""
    if interface not in INTERFACES:
        raise ValueError(f"interface must be one of {INTERFACES}, not {interface!r}")
    spell = _OPTION_WORDS.get(option, {}).get(interface)
    return spell(value) if spell is not None else _generic(interface, option, value)


class InputError(ValueError):
    """Input that exclust cannot use; the message names the problem and the fix.

    ``message`` may hold ``{fix}``, filled with the option's spelling in each interface; without
    it the fix, when an option is given, is appended as "(set ...)".
    """

    def __init__(self, message: str, *, option: str | None = None, value: Any = None):
        self.template = str(message)
        self.option = option
        self.value = value
        super().__init__(self.describe("python"))

    def describe(self, interface: str = "python") -> str:
        """The message with its fix in the words of ``interface`` ("python", "cli" or "flow")."""
        if self.option is None:
            return self.template
        fix = option_words(interface, self.option, self.value)
        if "{fix}" in self.template:
            return self.template.replace("{fix}", fix)
        return f"{self.template} (set {fix})"

    def __reduce__(self):  # Dask ships errors raised on workers back by pickling them
        return (_rebuild, (type(self), self.template, self.option, self.value))


def _rebuild(cls, template, option, value):
    return cls(template, option=option, value=value)


class ParameterError(InputError):
    """An estimator parameter out of its declared range; the message names the parameter and what it accepts."""


class InputTypeError(InputError, TypeError):
    """Input of a type exclust cannot use (complex numbers, objects, strings, sparse matrices): a
    TypeError as scikit-learn raises for it, and an InputError for the CLI."""


class MissingExtraError(InputError):
    """A feature whose optional dependencies (an extra of the package) are not installed; the message
    names the extra to install, and the CLI exits with code 2 on it like any other InputError
    (raised by ``exclust.sources.extras.require_extra``)."""


class TreeFormatError(ValueError):
    """A tree file or tree arrays that do not describe a valid ThresholdTree."""


class StagingGone(RuntimeError):
    """The run's staging was removed (the run stopped): a late task must not write."""
