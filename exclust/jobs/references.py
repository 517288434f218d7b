"""The reference clusterings a tree explains, named once: ``ReferenceKind``, ``REFERENCES``, ``register_reference``.

The explain options' ``reference`` choices (the command line, the flow form's drop-down), the
config's checks and ``pipeline.fit_reference`` all read this table. A kind that names a label
column (``labels:COLUMN``) takes its column from the run's ``reference_column``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from exclust.errors import InputError


@dataclass(frozen=True)
class ReferenceKind:
    """One kind of reference clustering as a run sees it.

    Parameters
    ----------
    name : str
        The value of ``--reference`` and of the flow's ``reference``.
    summary : str
        One line for ``--help`` and the flow form.
    fit : str
        ``"module:function"`` taking ``(data, config)`` and returning a ``pipeline.Reference``; imported when used.
    column : bool, default False
        Whether it reads a label column (``labels:COLUMN``) instead of fitting a clustering.
    """

    name: str
    summary: str
    fit: str
    column: bool = False

    def fit_run(self, data: Any, config: Any) -> Any:
        """This reference fitted on (or read from) ``data`` for the run ``config``."""
        module, _, function = self.fit.partition(":")
        return getattr(importlib.import_module(module), function)(data, config)


REFERENCES: dict[str, ReferenceKind] = {}


def register_reference(entry: ReferenceKind) -> ReferenceKind:
    """Add ``entry`` (its name must be new)."""
    if entry.name in REFERENCES:
        raise ValueError(f"a reference named {entry.name!r} is registered already")
    REFERENCES[entry.name] = entry
    return entry


for _entry in (
    ReferenceKind("gmm", "a Gaussian mixture (EM over the parts)", "exclust.jobs.explain.pipeline:fit_gmm"),
    ReferenceKind("kmeans", "k-means (seeded on the run's sample, refined by Lloyd passes)",
                  "exclust.jobs.explain.pipeline:fit_kmeans"),
    ReferenceKind("kmedians", "k-medians (l1, exact medians by histogram bisection)",
                  "exclust.jobs.explain.pipeline:fit_kmedians"),
    ReferenceKind("labels", "the labels of a column (labels:COLUMN)", "exclust.jobs.explain.pipeline:fit_labels",
                  column=True),
):
    register_reference(_entry)


def spelled() -> str:
    """The kinds as a user writes them: ``gmm, kmeans, kmedians or labels:COLUMN``."""
    names = [f"{r.name}:COLUMN" if r.column else r.name for r in REFERENCES.values()]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def parse(text: str) -> tuple[str, str | None]:
    """``gmm`` / ``kmeans`` / ``labels:COL`` -> (kind, column); InputError saying how to spell it."""
    kind, _, column = str(text).partition(":")
    kind = kind.strip().lower()
    if kind not in REFERENCES:
        raise InputError(f"reference must be {spelled()}, not {text!r}")
    if REFERENCES[kind].column and not column.strip():
        raise InputError(f"reference {kind} needs a column: {kind}:COLUMN")
    if not REFERENCES[kind].column and column:
        raise InputError(f"reference {kind} takes no column (got {text!r})")
    return kind, (column.strip() or None)


def reference(name: str) -> ReferenceKind:
    """The entry of ``name``; InputError listing the choices when unknown."""
    try:
        return REFERENCES[str(name)]
    except KeyError:
        raise InputError(f"reference must be one of {', '.join(REFERENCES)}, not {name!r}") from None
