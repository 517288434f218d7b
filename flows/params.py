"""Typed parameters of the flows: the Prefect UI renders these models as forms.

Every field has a description, a default where one makes sense, and an enumeration where the
choices are fixed. Paths are checked when a run starts (on the machine that runs it): the input
must exist, the output folder must be one exclust may write (see ``exclust.outputs.folders``), and,
when ``EXCLUST_OUTPUT_BASE`` is set on the worker, lie under that folder.

No field is nullable: lists are one comma-separated text and "none" is blank (or 0 for numbers),
so the form shows one plain input per field, titled by the field's name, with no type toggle.
"""
from __future__ import annotations

import json
import os
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from exclust.errors import InputError
from exclust.jobs import registry
from exclust.jobs.label.nightly import check_templates, has_date, parse_dates
from exclust.outputs.folders import validate_output_dir
from exclust.sources.guards import validate_input_path
from exclust.sources.storage import is_remote

SCHEDULER_ENV = "EXCLUST_DASK_SCHEDULER"  # read on the worker when a run names no scheduler


# The enumerations of the form come from the registry: a new algorithm or threshold appears here by itself.
# mypy cannot read the members of an Enum made from a computed dict ([misc]); they are the registry's names.
Algorithm = StrEnum("Algorithm", {name.replace("-", "_"): name for name in registry.ALGORITHMS})  # type: ignore[misc]
Algorithm.__doc__ = "Tree algorithms: " + "; ".join(f"{a.name}: {a.summary}" for a in registry.ALGORITHMS.values())
ThresholdVariant = StrEnum("ThresholdVariant", {name: name for name in registry.THRESHOLDS})  # type: ignore[misc]
ThresholdVariant.__doc__ = "How MMDT places a cut between the means of a node."
Objective = StrEnum("Objective", {name: name for name in registry.OBJECTIVES})  # type: ignore[misc]
Objective.__doc__ = "The reference cost the tree keeps low: k-means (squared distances) or k-medians (l1)."


class ReferenceKind(StrEnum):
    """The clustering the tree explains."""

    gmm = "gmm"
    kmeans = "kmeans"
    kmedians = "kmedians"
    labels = "labels"


class Kernel(StrEnum):
    """Per-axis kernel of kernel MMDT."""

    gaussian = "gaussian"
    laplace = "laplace"


class KmediansPrice(StrEnum):
    """Whether scoring prices the tree under k-medians too (2+ passes more over the data)."""

    auto = "auto"  # when the objective or the reference is kmedians
    on = "on"
    off = "off"


_KMEDIANS_PRICE = {KmediansPrice.auto.value: None, KmediansPrice.on.value: True, KmediansPrice.off.value: False}


def _kmedians_price_choice(value):
    """Python callers may pass ExplainConfig's own values: None (auto), True, False."""
    if value is None or isinstance(value, bool):
        return {None: KmediansPrice.auto, True: KmediansPrice.on, False: KmediansPrice.off}[value]
    return value


class OutputFormat(StrEnum):
    auto = "auto"
    folder = "folder"
    delta = "delta"
    iceberg = "iceberg"


class NanPolicy(StrEnum):
    """What to do with rows holding NaN or infinite feature values."""

    raise_ = "raise"
    drop = "drop"


def _names(text: str) -> list[str] | None:
    """'a, b,c' -> ['a', 'b', 'c']; blank -> None."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    return names or None


def _one_text(value):
    """Lists become one comma-separated text and None becomes blank: the form shows one text box."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v).strip() for v in value)
    if isinstance(value, dict):  # storage options given from Python: JSON keeps nested options
        return json.dumps(value)
    return value


def _none_is_zero(value):
    return 0 if value is None else value


def _allowed_output(value: str) -> str:
    """An output folder exclust may write (not /, HOME, a file, or a folder it did not write)."""
    validate_output_dir(value)
    return value


def _allowed_label_output(value: str, storage_options: dict | None = None) -> str:
    """A label output: a lake table (Delta, Iceberg: its commits guard it), or a folder exclust may write."""
    from exclust.outputs.lake_table import table_format_of

    if table_format_of(value, storage_options) is None:
        validate_output_dir(value, storage_options=storage_options)
    return value


def _existing_or_dated_input(value: str, storage_options: dict | None = None) -> str:
    """An input that exists, or a {date} template (checked per date when the run labels it)."""
    return value if has_date(value) else validate_input_path(value, storage_options)


def _local_at_once(check):
    """``check`` as a field validator of local paths; object-store URLs and catalog addresses are checked by the
    model's validator, with the storage options (a field validator does not see the other fields)."""
    def validator(value: str) -> str:
        return value if is_remote(value) else check(value)

    return validator


def parse_storage_options_text(text: str) -> dict:
    """A form's storage_options text as fsspec keyword arguments: comma-separated key=value, or a JSON object."""
    from exclust.sources.storage import parse_storage_options

    text = text.strip()
    if text.startswith("{"):
        try:
            return dict(json.loads(text))
        except ValueError as exc:
            raise ValueError(f"storage_options is not a valid JSON object: {exc}") from None
    return parse_storage_options(_names(text) or [])


def _plain_titles(name: str, _info) -> str:
    """Every form field is titled by its own name (the name the API and the command line use)."""
    return name


def dask_scheduler(address: str) -> str | None:
    """The Dask scheduler of a run: the parameter, else the worker's EXCLUST_DASK_SCHEDULER, else None (local)."""
    return address.strip() or os.environ.get(SCHEDULER_ENV, "").strip() or None


FORM = ConfigDict(extra="forbid", use_enum_values=True, validate_default=True, field_title_generator=_plain_titles)
STORAGE_OPTIONS_HELP = (
    "Options of the object store s3:// paths live on: comma-separated key=value (endpoint_url=http://minio:9000) "
    "or a JSON object for nested options; blank: the AWS_* environment of the machine that runs the flow."
)
SCHEDULER_HELP = (
    "Dask scheduler address such as tcp://dask-scheduler:8786; blank: the worker's EXCLUST_DASK_SCHEDULER, "
    "or a local Dask cluster started for the run when that is unset too."
)


class ExplainParams(BaseModel):
    """Parameters of the explain flow: what to read, which clustering to explain, and where to write."""

    model_config = FORM

    input: str = Field(
        description="Parquet input: a file, a folder of Parquet files, or a glob (seen from the machine that runs the "
                    "flow)."
    )
    output: str = Field(
        description="Folder for tree.json, metrics.json, rules.txt and report.html; replaced whole at the end of a run."
    )
    columns: str = Field(
        default="",
        description="Feature columns, comma-separated, in order; blank: every numeric column except the named label "
                    "columns."
    )
    algorithm: Algorithm = Field(default=Algorithm("mmdt"), description="Tree algorithm.")
    n_clusters: int = Field(default=5, ge=2, le=10_000, description="Number of clusters k of the reference clustering.")
    reference: ReferenceKind = Field(
        default=ReferenceKind.gmm,
        description="Reference clustering: a Gaussian mixture, k-means, k-medians, or labels from a column (name it in "
                    "reference_column).",
    )
    reference_column: str = Field(default="", description="Label column when reference is labels; blank otherwise.")
    threshold: ThresholdVariant = Field(default=ThresholdVariant("exact"), description="MMDT threshold variant.")
    truth_column: str = Field(default="", description="Ground-truth label column, scored with ARI; blank: none.")
    leaves: int = Field(default=0, ge=0, le=100_000,
                        description="Leaf budget of ExKMC, KDTree and CART; 0: n_clusters.")
    objective: Objective = Field(default=Objective("kmeans"),
                                 description="Cost the tree keeps low (imm, exkmc, exshallow, random-cut): kmeans or "
                                             "kmedians.")
    depth_factor: float = Field(default=0.03, ge=0, description="ExShallow's penalty on depth; 0 gives ExGreedy.")
    trials: int = Field(default=1, ge=1, le=10_000,
                        description="random-cut: trees drawn; the cheapest on the data is kept.")
    cost_curve: bool = Field(default=True,
                             description="Draw the report's cost-versus-leaves curve (data-driven trees); off saves "
                                         "its work.")
    standing: bool = Field(default=True,
                           description="Set the tree beside the other greedy algorithms' trees on the same centers in "
                                       "the report (no extra pass).")
    kmedians_price: KmediansPrice = Field(
        default=KmediansPrice.auto,
        description="Price the tree under k-medians too, at 2 or more passes more over the data: auto does so when "
                    "the objective or the reference is kmedians; on or off force it.",
    )
    concepts: str = Field(default="", description="Concept label columns for concept-mmdt, comma-separated.")
    kernel: Kernel = Field(default=Kernel.gaussian, description="Kernel of kernel-mmdt.")
    bandwidth: float = Field(default=0.0, ge=0, description="Kernel bandwidth of kernel-mmdt; 0: chosen from the data.")
    scheduler_address: str = Field(default="", description=SCHEDULER_HELP)
    plot_features: str = Field(
        default="",
        description="Two features for the report's scatter plot, comma-separated; blank: the features of the tree's "
                    "first cuts."
    )
    random_state: int = Field(default=0, description="Seed of every random choice.")
    nan_policy: NanPolicy = Field(default=NanPolicy.raise_,
                                  description="Rows with NaN/inf features: fail the run, or drop them.")
    table_version: int = Field(
        default=-1, ge=-1,
        description="A table input: the version to read (Delta: a version number; Iceberg: a snapshot id); "
                    "-1: the latest (or as_of).",
    )
    as_of: str = Field(
        default="",
        description="A Delta or Iceberg table input: read the snapshot current at this time (ISO 8601); blank: the "
                    "latest."
    )
    storage_options: str = Field(default="", description=STORAGE_OPTIONS_HELP)

    _texts = field_validator("columns", "concepts", "plot_features", "reference_column", "truth_column",
                             "scheduler_address", "storage_options", mode="before")(_one_text)
    _numbers = field_validator("leaves", "bandwidth", mode="before")(_none_is_zero)
    _kmedians_price = field_validator("kmedians_price", mode="before")(_kmedians_price_choice)
    _output_allowed = field_validator("output")(_allowed_output)

    @model_validator(mode="after")
    def _consistent(self) -> "ExplainParams":
        if self.reference == ReferenceKind.labels.value and not self.reference_column.strip():
            raise ValueError("reference 'labels' needs reference_column, the column that holds the labels")
        try:
            config = self.to_config()
            config.source().check()  # the input's own source says whether it can be read (Parquet, a table, ...)
            registry.algorithm(self.algorithm).check_required(config)
        except InputError as exc:
            raise ValueError(exc.describe("flow")) from None
        if self.leaves and self.leaves < self.n_clusters:
            raise ValueError(f"leaves ({self.leaves}) must be at least n_clusters ({self.n_clusters})")
        return self

    def storage_options_dict(self) -> dict:
        """The storage_options text as fsspec keyword arguments."""
        return parse_storage_options_text(self.storage_options)

    def to_config(self):
        """The library's ExplainConfig for these parameters."""
        from exclust.jobs.explain.config import ExplainConfig

        return ExplainConfig(
            input=self.input, features=_names(self.columns), algorithm=self.algorithm, k=self.n_clusters,
            reference=self.reference, reference_column=self.reference_column.strip() or None,
            threshold=self.threshold, truth=self.truth_column.strip() or None, leaves=self.leaves or None,
            concepts=_names(self.concepts), kernel=self.kernel, bandwidth=self.bandwidth or None,
            random_state=self.random_state, nan_policy=self.nan_policy, plot_features=_names(self.plot_features),
            storage_options=self.storage_options_dict(), objective=self.objective, depth_factor=self.depth_factor,
            trials=self.trials, cost_curve=self.cost_curve, standing=self.standing,
            kmedians_price=_KMEDIANS_PRICE[self.kmedians_price],
            table_version=None if self.table_version < 0 else self.table_version, as_of=self.as_of.strip() or None,
        )


class LabelParams(BaseModel):
    """Parameters of the label flow: the saved tree, the Parquet to label, and where the labelled copy goes."""

    model_config = FORM

    tree: str = Field(description="Path of a tree.json written by an explain run.")
    input: str = Field(
        description="Parquet input to label: a file, a folder of Parquet files, or a glob; "
                    "{date} in it is replaced by the date labelled, e.g. /data/incoming/date={date}."
    )
    output: str = Field(
        description="Folder for the labelled Parquet files (same names, two more columns), replaced whole; "
                    "with {date} (e.g. /data/labelled/date={date}) each date has its own folder."
    )
    date: str = Field(
        default="",
        description="Date to label when the paths hold {date}: YYYY-MM-DD, or FIRST..LAST for an inclusive backfill; "
                    "blank: the date the run was scheduled for (UTC).",
    )
    output_format: OutputFormat = Field(
        default=OutputFormat.auto,
        description="delta or iceberg: output is a table of that format (made on the first night; an Iceberg table "
                    "named iceberg+<catalog URI>#namespace.table), each date one commit of its date partition; "
                    "auto: iceberg for an iceberg+ address, delta when output is a Delta table already, else folders.",
    )
    date_column: str = Field(default="date", min_length=1, description="A table output's date partition column.")
    cluster_column: str = Field(default="cluster", min_length=1,
                                description="Name of the cluster column added to every file.")
    leaf_column: str = Field(default="leaf", min_length=1,
                             description="Name of the leaf-id column added to every file.")
    scheduler_address: str = Field(default="", description=SCHEDULER_HELP)
    storage_options: str = Field(default="", description=STORAGE_OPTIONS_HELP)

    _texts = field_validator("date", "scheduler_address", "storage_options", mode="before")(_one_text)
    _tree_exists = field_validator("tree")(_local_at_once(validate_input_path))
    _input_exists = field_validator("input")(_local_at_once(_existing_or_dated_input))
    _output_allowed = field_validator("output")(_local_at_once(_allowed_label_output))

    @field_validator("date")
    @classmethod
    def _dates_parse(cls, value: str) -> str:
        if value.strip():
            parse_dates(value)
        return value.strip()

    @model_validator(mode="after")
    def _remote_paths_and_templates_agree(self) -> "LabelParams":
        options = self.storage_options_dict()
        try:
            for check, value in ((validate_input_path, self.tree), (_existing_or_dated_input, self.input),
                                 (_allowed_label_output, self.output)):
                if is_remote(value):
                    check(value, options)
        except InputError as exc:
            raise ValueError(exc.describe("flow")) from None
        dated = bool(self.date) or has_date(self.input) or has_date(self.output) or self.table is not None
        check_templates(self.input, self.output, dated, table=self.table)
        return self

    def storage_options_dict(self) -> dict:
        """The storage_options text as fsspec keyword arguments (for the tree, the input and the output)."""
        return parse_storage_options_text(self.storage_options)

    @property
    def table(self) -> str | None:
        """The output's table format ("delta", "iceberg"), or None for folders."""
        from exclust.jobs.label.table_labeling import output_table_format

        return output_table_format(self.output, self.output_format, self.storage_options_dict())

    @property
    def dated(self) -> bool:
        """True when the run labels by date ({date} in the paths, or a table output)."""
        return has_date(self.output) or self.table is not None
