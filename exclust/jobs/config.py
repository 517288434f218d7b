"""The options of one explain run: ``ExplainConfig``, its parsing and its checks.

Every way of starting a run (the CLI, ``flows.params.ExplainParams.to_config``, Python) builds
one; ``check`` rejects inconsistent choices with ``InputError`` before any work starts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

import numpy as np

from exclust.errors import InputError
from exclust.jobs import references, registry
from exclust.jobs.option_spec import config_class
from exclust.jobs.options import LABEL, explain_options
from exclust.sources.base import open_source


class _ExplainMethods:
    """What ``ExplainConfig`` does besides holding its fields (those come from ``jobs.options``)."""

    if TYPE_CHECKING:  # the fields are generated: type checkers see any attribute, any keyword
        reference: str
        reference_column: str | None

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...

    def __post_init__(self) -> None:
        # labels:COLUMN, as the command line spells it, is the labels kind with its column
        if isinstance(self.reference, str) and ":" in self.reference:
            self.reference, self.reference_column = self.parse_reference(self.reference)

    @classmethod
    def parse_reference(cls, text: str) -> tuple[str, str | None]:
        """``gmm`` / ``kmeans`` / ``labels:COL`` -> (kind, column)."""
        return references.parse(text)

    def check(self, source: Any = None) -> Self:
        """Validate the choices (not the data); return self. ``source``: the run's opened input
        (``exclust.dataplane.run_context.RunContext.source``) checked in place of opening it again."""
        from enum import Enum

        for name in ("algorithm", "reference", "threshold", "kernel", "nan_policy", "objective"):
            value = getattr(self, name)
            if isinstance(value, Enum):  # parameter models hand over enum members
                setattr(self, name, value.value)
        entry = registry.algorithm(self.algorithm)
        if self.objective not in registry.OBJECTIVES:
            raise InputError(f"objective must be one of {', '.join(registry.OBJECTIVES)}, not {self.objective!r}")
        if self.objective not in entry.objectives:
            raise InputError(f"{self.algorithm} builds trees for the {', '.join(entry.objectives)} objective only, "
                             f"not {self.objective!r}")
        if not isinstance(self.trials, (int, np.integer)) or self.trials < 1:
            raise InputError(f"trials must be a whole number >= 1, got {self.trials!r}")
        if not self.depth_factor >= 0:
            raise InputError(f"depth factor must be >= 0, got {self.depth_factor!r}")
        if references.reference(self.reference).column and not self.reference_column:
            raise InputError(f"reference {self.reference!r} needs the name of the label column")
        registry.threshold(self.threshold)
        if self.kernel not in registry.KERNELS:
            raise InputError(f"kernel must be one of {', '.join(registry.KERNELS)}, not {self.kernel!r}")
        if not isinstance(self.k, (int, np.integer)) or self.k < 2:
            raise InputError(f"the number of clusters k must be an integer >= 2, got {self.k!r}")
        if self.leaves is not None and self.leaves < self.k:
            raise InputError(f"leaves ({self.leaves}) must be at least the number of clusters k ({self.k})")
        entry.check_required(self)
        if self.cluster_on and entry.needs in (registry.SUMMARY, registry.OWN):
            raise InputError(f"{self.algorithm} reads a mixture over the columns it cuts, so it cannot explain a "
                             "clustering fitted on other columns: leave cluster_on out, or choose an algorithm that "
                             "cuts by centers or labels (imm, exkmc, cart, ...)")
        if self.plot_features is not None and len(self.plot_features) != 2:
            raise InputError(f"plot features must name two features, got {self.plot_features!r}")
        if self.kmedians_price not in (None, True, False):
            raise InputError(f"kmedians_price must be True, False or None (auto), not {self.kmedians_price!r}")
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise InputError(f"bandwidth must be > 0, got {self.bandwidth!r}")
        self.input = source.checked().spec if source is not None else self.source().check()
        return self

    def check_against_source(self) -> None:
        """``plot_features`` and ``n_clusters`` against the input's schema and row count, from its metadata alone.

        The source plans its read (``columns()``: Parquet footers, a table's log) and nothing is read, so a
        wrong ``--plot`` feature or more clusters than rows fail before the validation pass, with the
        messages the load step would give after it.
        """
        extra = list(dict.fromkeys(c for c in (self.truth, self.reference_column, *(self.concepts or ())) if c))
        source = self.source()
        planned = source.columns(self.features, extra)
        unknown = [f for f in self.plot_features or () if f not in planned.feature_names]
        if unknown and registry.algorithm(self.algorithm).space is None:  # a tree over other coordinates names its own
            raise InputError(f"plot feature(s) {unknown} are not among the features {planned.feature_names}")
        rows = planned.X.shape[0]
        if isinstance(rows, (int, np.integer)) and rows < self.n_clusters:
            raise InputError(f"{source.describe()} has {rows} row(s), fewer than the {self.n_clusters} clusters "
                             "asked for")

    def source(self):
        """The data source that reads ``input`` (``exclust.sources.base.open_source``: decided there, once)."""
        return open_source(self.input, self.storage_options, self.source_options)

    @property
    def source_options(self) -> dict[str, Any]:
        """The options ``open_source`` hands the source (a table's snapshot); unset ones left out."""
        return {k: v for k, v in (("table_version", self.table_version), ("as_of", self.as_of)) if v is not None}

    @property
    def wants_kmedians_price(self) -> bool:
        """Whether scoring prices the tree under k-medians too (``kmedians_price``, None resolved)."""
        if self.kmedians_price is not None:
            return bool(self.kmedians_price)
        return self.objective == "kmedians" or self.reference == "kmedians"


EXPLAIN_OPTIONS = explain_options()
registry._SCHEMA_BUILT.update(o.name for o in EXPLAIN_OPTIONS)
if TYPE_CHECKING:
    class ExplainConfig(_ExplainMethods):
        """Everything one explain run needs (the fields come from ``jobs.options``)."""
else:
    ExplainConfig = config_class(
        "ExplainConfig", EXPLAIN_OPTIONS, _ExplainMethods,
        "Everything one explain run needs; validated by ``check``. ``k`` is the old name of ``n_clusters``.",
    )


class _LabelMethods:
    """What ``LabelConfig`` does besides holding its fields."""

    if TYPE_CHECKING:
        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...


if TYPE_CHECKING:
    class LabelConfig(_LabelMethods):
        """One label run's options (the fields come from ``jobs.options``)."""
else:
    LabelConfig = config_class("LabelConfig", LABEL, _LabelMethods,
                               "One label run's options: the saved tree, the input, the output and its columns.")
