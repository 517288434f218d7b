"""Typed parameters of the flows: the Prefect UI renders these models as forms.

Every field has a description, a default where one makes sense, and an enumeration where the
choices are fixed. Paths are checked when a run starts (on the machine that runs it): the input
must exist, the output folder must be one exclust may write (see ``exclust.outputs``), and,
when ``EXCLUST_OUTPUT_BASE`` is set on the worker, lie under that folder.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from exclust.outputs import validate_input_path, validate_output_dir


class Algorithm(str, Enum):
    """Tree algorithms."""

    mmdt = "mmdt"
    imm = "imm"
    exkmc = "exkmc"
    kdtree = "kdtree"
    cart = "cart"
    concept_mmdt = "concept-mmdt"
    kernel_mmdt = "kernel-mmdt"


class ReferenceKind(str, Enum):
    """The clustering the tree explains."""

    gmm = "gmm"
    kmeans = "kmeans"
    labels = "labels"


class ThresholdVariant(str, Enum):
    """How MMDT places a cut between the means of a node."""

    midpoint = "midpoint"
    gaussian = "gaussian"
    chebyshev = "chebyshev"
    exact = "exact"
    random = "random"


class Kernel(str, Enum):
    """Per-axis kernel of kernel MMDT."""

    gaussian = "gaussian"
    laplace = "laplace"


class NanPolicy(str, Enum):
    """What to do with rows holding NaN or infinite feature values."""

    raise_ = "raise"
    drop = "drop"


def _text_list(value):
    """Accept 'a,b,c' as well as ['a', 'b', 'c'] (forms and command lines give the former)."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if value is not None and len(value) == 0:
        return None
    return value


def _allowed_output(value: str) -> str:
    """An output folder exclust may write (not /, HOME, a file, or a folder it did not write)."""
    validate_output_dir(value)
    return value


class ExplainParams(BaseModel):
    """Parameters of the ``explain`` flow."""

    model_config = ConfigDict(extra="forbid", use_enum_values=True, validate_default=True)

    input: str = Field(
        description="Parquet input: a file, a folder of Parquet files, or a glob (seen from the machine that runs the flow)."
    )
    output: str = Field(
        description="Folder for tree.json, metrics.json, rules.txt and report.html; replaced whole at the end of a run."
    )
    columns: Optional[list[str]] = Field(
        default=None, description="Feature columns, in order; empty means every numeric column except the named label columns."
    )
    algorithm: Algorithm = Field(default=Algorithm.mmdt, description="Tree algorithm.")
    n_clusters: int = Field(default=5, ge=2, le=10_000, description="Number of clusters k of the reference clustering.")
    reference: ReferenceKind = Field(
        default=ReferenceKind.gmm,
        description="Reference clustering: a Gaussian mixture, k-means, or labels from a column (name it in reference_column).",
    )
    reference_column: Optional[str] = Field(default=None, description="Label column when reference is 'labels'.")
    threshold: ThresholdVariant = Field(default=ThresholdVariant.midpoint, description="MMDT threshold variant.")
    truth_column: Optional[str] = Field(default=None, description="Ground-truth label column, scored with ARI when given.")
    leaves: Optional[int] = Field(default=None, ge=2, description="Leaf budget of ExKMC, KDTree and CART (default: n_clusters).")
    concepts: Optional[list[str]] = Field(default=None, description="Concept label columns, for concept-mmdt.")
    kernel: Kernel = Field(default=Kernel.gaussian, description="Kernel of kernel-mmdt.")
    bandwidth: Optional[float] = Field(default=None, gt=0, description="Kernel bandwidth of kernel-mmdt (default: chosen from the data).")
    scheduler_address: Optional[str] = Field(
        default=None,
        description="Dask scheduler address such as tcp://dask-scheduler:8786; empty starts a local Dask cluster for the run.",
    )
    plot_features: Optional[list[str]] = Field(
        default=None, description="Two features for the report's scatter plot; empty: the features of the tree's first cuts."
    )
    random_state: int = Field(default=0, description="Seed of every random choice.")
    nan_policy: NanPolicy = Field(default=NanPolicy.raise_, description="Rows with NaN/inf features: fail the run, or drop them.")
    storage_options: Optional[dict[str, Any]] = Field(
        default=None,
        description="Options of the object store an s3:// input lives on, e.g. {\"endpoint_url\": \"http://minio:9000\"}; "
                    "credentials also come from the AWS_* environment variables of the machine that runs the flow.",
    )

    _lists = field_validator("columns", "concepts", "plot_features", mode="before")(_text_list)

    _output_allowed = field_validator("output")(_allowed_output)

    @field_validator("scheduler_address", "reference_column", "truth_column", mode="before")
    @classmethod
    def _blank_is_none(cls, v):
        return None if isinstance(v, str) and not v.strip() else v

    @model_validator(mode="after")
    def _consistent(self) -> "ExplainParams":
        validate_input_path(self.input, self.storage_options)  # here: an s3:// input needs the storage options
        if self.reference == ReferenceKind.labels.value and not self.reference_column:
            raise ValueError("reference 'labels' needs reference_column, the column that holds the labels")
        if self.algorithm == Algorithm.concept_mmdt.value and not self.concepts:
            raise ValueError("algorithm 'concept-mmdt' needs concepts, the concept label columns")
        if self.leaves is not None and self.leaves < self.n_clusters:
            raise ValueError(f"leaves ({self.leaves}) must be at least n_clusters ({self.n_clusters})")
        return self

    def to_config(self):
        """The library's ExplainConfig for these parameters."""
        from exclust.pipeline import ExplainConfig

        return ExplainConfig(
            input=self.input, features=self.columns, algorithm=self.algorithm, k=self.n_clusters,
            reference=self.reference, reference_column=self.reference_column, threshold=self.threshold,
            truth=self.truth_column, leaves=self.leaves, concepts=self.concepts, kernel=self.kernel,
            bandwidth=self.bandwidth, random_state=self.random_state, nan_policy=self.nan_policy,
            plot_features=self.plot_features, storage_options=self.storage_options,
        )


class LabelParams(BaseModel):
    """Parameters of the ``label`` flow."""

    model_config = ConfigDict(extra="forbid")

    tree: str = Field(description="Path of a tree.json written by an explain run.")
    input: str = Field(description="Parquet input to label: a file, a folder of Parquet files, or a glob.")
    output: str = Field(description="Folder for the labelled Parquet files (same names, two more columns); replaced whole.")
    cluster_column: str = Field(default="cluster", min_length=1, description="Name of the cluster column added to every file.")
    leaf_column: str = Field(default="leaf", min_length=1, description="Name of the leaf-id column added to every file.")
    scheduler_address: Optional[str] = Field(
        default=None, description="Dask scheduler address; empty starts a local Dask cluster for the run."
    )

    _inputs_exist = field_validator("tree", "input")(validate_input_path)
    _output_allowed = field_validator("output")(_allowed_output)

    @field_validator("scheduler_address", mode="before")
    @classmethod
    def _blank_is_none(cls, v):
        return None if isinstance(v, str) and not v.strip() else v
