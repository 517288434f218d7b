"""The options of one explain run: ``ExplainConfig``, its parsing and its checks.

Every way of starting a run (the CLI, ``flows.params.ExplainParams.to_config``, Python) builds
one; ``check`` rejects inconsistent choices with ``InputError`` before any work starts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from exclust.jobs import registry
from exclust.errors import InputError
from exclust.sources.base import open_source

REFERENCES = ("gmm", "kmeans", "kmedians", "labels")
KERNELS = ("gaussian", "laplace")


@dataclass
class ExplainConfig:
    """Everything one explain run needs; validated by ``check``."""

    input: Any  # anything a registered source reads: a Parquet path/folder/glob/URL, an array, a DataFrame
    features: list[str] | None = None
    algorithm: str = registry.DEFAULT_ALGORITHM
    k: int = 5
    reference: str = "gmm"  # gmm | kmeans | labels (then reference_column names the label column)
    reference_column: str | None = None
    threshold: str = "exact"  # paper 002's Alg. 1 (eq. 4), as MMDT's own default
    truth: str | None = None
    leaves: int | None = None  # ExKMC / KDTree / CART leaf budget (default k)
    concepts: list[str] | None = None  # concept-mmdt: label columns, one per concept
    kernel: str = "gaussian"
    bandwidth: float | None = None
    random_state: int = 0
    nan_policy: str = "raise"
    title: str | None = None
    plot_features: list[str] | None = None  # the two features of the report's scatter plot (default: the tree's first)
    storage_options: dict[str, Any] | None = None  # fsspec options of an s3:// (or other) input URL
    cost_curve: bool = True  # the report's cost-vs-leaves curve for data-driven trees (off for nightly runs)
    standing: bool = True  # the report's standing table: the tree beside other algorithms' on the same centers
    hold: bool | None = None  # keep the validated data on the workers: None decides by size, True/False forces
    objective: str = "kmeans"  # the reference cost IMM, ExKMC, ExShallow and random cuts keep low: kmeans | kmedians
    depth_factor: float = 0.03  # ExShallow's penalty on depth (0: ExGreedy)
    trials: int = 1  # random-cut: trees drawn; the cheapest on the data is kept
    # The k-medians price costs 2+ passes of its own: None (auto) prices it when the run is about
    # k-medians (its objective or its reference), True/False forces it.
    kmedians_price: bool | None = None
    # A table input's snapshot (Delta, Iceberg): a version number, or the latest version as of a
    # timestamp (ISO 8601); the latest when both are None. Refused for inputs that are not tables.
    table_version: int | None = None
    as_of: str | None = None

    @classmethod
    def parse_reference(cls, text: str) -> tuple[str, str | None]:
        """``gmm`` / ``kmeans`` / ``labels:COL`` -> (kind, column)."""
        kind, _, column = str(text).partition(":")
        kind = kind.strip().lower()
        if kind not in REFERENCES:
            raise InputError(f"reference must be gmm, kmeans, kmedians or labels:COLUMN, not {text!r}")
        if kind == "labels" and not column.strip():
            raise InputError("reference labels needs a column: labels:COLUMN")
        if kind != "labels" and column:
            raise InputError(f"reference {kind} takes no column (got {text!r})")
        return kind, (column.strip() or None)

    def check(self, source: Any = None) -> "ExplainConfig":
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
        if self.reference not in REFERENCES:
            raise InputError(f"reference must be one of {', '.join(REFERENCES)}, not {self.reference!r}")
        if self.reference == "labels" and not self.reference_column:
            raise InputError("reference 'labels' needs the name of the label column")
        registry.threshold(self.threshold)
        if self.kernel not in KERNELS:
            raise InputError(f"kernel must be one of {', '.join(KERNELS)}, not {self.kernel!r}")
        if not isinstance(self.k, (int, np.integer)) or self.k < 2:
            raise InputError(f"the number of clusters k must be an integer >= 2, got {self.k!r}")
        if self.leaves is not None and self.leaves < self.k:
            raise InputError(f"leaves ({self.leaves}) must be at least the number of clusters k ({self.k})")
        entry.check_required(self)
        if self.plot_features is not None and len(self.plot_features) != 2:
            raise InputError(f"plot features must name two features, got {self.plot_features!r}")
        if self.kmedians_price not in (None, True, False):
            raise InputError(f"kmedians_price must be True, False or None (auto), not {self.kmedians_price!r}")
        if self.bandwidth is not None and not self.bandwidth > 0:
            raise InputError(f"bandwidth must be > 0, got {self.bandwidth!r}")
        self.input = source.checked().spec if source is not None else self.source().check()
        return self

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
