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
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)

from exclust.errors import InputError
from exclust.jobs import registry
from exclust.jobs.config import EXPLAIN_OPTIONS, ExplainConfig, LabelConfig
from exclust.jobs.label.nightly import check_templates, has_date, parse_dates
from exclust.jobs.option_spec import (
    AUTO_SWITCH,
    CHOICE,
    CONFIG,
    FLOW,
    MAPPING,
    NAMES,
    NUMBER,
    SWITCH,
    WHOLE,
    Option,
    names_text,
)
from exclust.jobs.options import LABEL
from exclust.outputs.folders import validate_output_dir
from exclust.sources.guards import validate_input_path
from exclust.sources.storage import is_remote

SCHEDULER_ENV = "EXCLUST_DASK_SCHEDULER"  # read on the worker when a run names no scheduler
AUTO_SWITCH_CHOICES = {"auto": None, "on": True, "off": False}  # the form's spelling of None, True, False


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
    return parse_storage_options(names_text(text) or [])


def _plain_titles(name: str, _info) -> str:
    """Every form field is titled by its own name (the name the API and the command line use)."""
    return name


def dask_scheduler(address: str) -> str | None:
    """The Dask scheduler of a run: the parameter, else the worker's EXCLUST_DASK_SCHEDULER, else None (local)."""
    return address.strip() or os.environ.get(SCHEDULER_ENV, "").strip() or None



FORM = ConfigDict(extra="forbid", use_enum_values=True, validate_default=True, field_title_generator=_plain_titles,
                  populate_by_name=True)


# --------------------------------------------------------------------------- the form, generated from the schema
def _enumeration(option: Option) -> type[Enum]:
    """The form's drop-down of ``option``: its choices, read from the registry now (plugins included)."""
    names = AUTO_SWITCH_CHOICES if option.kind == AUTO_SWITCH else option.choice_names()
    members = {(n.replace("-", "_") + ("_" if n in ("raise",) else "")): n for n in names}
    enum = Enum(option.flow_type or option.name.title().replace("_", ""), members, type=str)  # type: ignore[misc]
    # Its own description (pydantic leaves out a field's description equal to its enumeration's).
    described = option.describe_choices() if option.describe_choices is not None else {}
    enum.__doc__ = ("; ".join(f"{n}: {line}" for n, line in described.items()) if described
                    else f"The choices of {option.name}: {', '.join(names)}.")
    return enum


def _description(option: Option) -> str:
    if option.flow_help:
        return option.flow_help
    text = option.help[:1].upper() + option.help[1:]
    users = registry.used_by().get(option.name)
    if users:  # an algorithm's own option
        text += f" ({', '.join(users)})"
    if option.unset_means and option.default is None:
        unset = ("auto" if option.kind == AUTO_SWITCH else "blank" if option.flow_unset is None
                 else f"{option.flow_unset:g}")
        text += f"; {unset}: {option.unset_means}"
    return text + "."


def _unset_is(spelling: Any):
    return lambda value: spelling if value is None else value


def _auto_switch(value: Any) -> Any:
    """Python callers may pass the config's own values: None (auto), True, False."""
    if value is None or isinstance(value, bool):
        return {None: "auto", True: "on", False: "off"}[value]
    return value


def _one_text(value: Any) -> Any:
    """Lists become one comma-separated text and None becomes blank: the form shows one text box."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v).strip() for v in value)
    if isinstance(value, dict):  # storage options given from Python: JSON keeps nested options
        return json.dumps(value)
    return value


def _form_field(option: Option) -> tuple[Any, Any]:
    """The annotation and ``Field`` of ``option`` in the form: no field nullable (no type toggle in the form)."""
    extra: dict[str, Any] = {"description": _description(option)}
    if option.flow_aliases:
        extra["validation_alias"] = AliasChoices(option.name, *option.flow_aliases)
    default = option.default
    kind: Any
    if option.kind in (WHOLE, NUMBER):
        base: Any = int if option.kind == WHOLE else float
        kind = Annotated[base, BeforeValidator(_unset_is(option.flow_unset))]
        default = option.flow_unset if default is None else default
        low = option.minimum if option.flow_unset is None else min(option.minimum or 0, option.flow_unset)
        extra.update({k: v for k, v in (("ge", low), ("le", option.maximum)) if v is not None})
    elif option.kind == SWITCH:
        kind = bool
    elif option.kind in (CHOICE, AUTO_SWITCH):
        enum = _enumeration(option)
        kind = Annotated[enum, BeforeValidator(_auto_switch)] if option.kind == AUTO_SWITCH else enum
        default = enum(_auto_switch(default) if option.kind == AUTO_SWITCH else default)
    else:  # text, names, a mapping, anything: one text box
        kind = Annotated[str, BeforeValidator(_one_text)]
        if default:  # a name with a default (a column's) cannot be blanked
            extra["min_length"] = 1
        default = "" if default is None else default
    if option.needed:
        return kind, Field(**extra)
    return kind, Field(default=default, **extra)


def form_model(name: str, options: Sequence[Option], base: type[BaseModel]) -> Any:
    """The pydantic model of a flow's parameters: one field per form option of ``options``, in order."""
    fields = {o.name: _form_field(o) for o in options if o.on(FLOW)}
    model = create_model(name, __base__=base, __module__=__name__, **fields)  # type: ignore[call-overload]
    model.__doc__ = base.__doc__
    return model


def config_values(options: Sequence[Option], params: BaseModel) -> dict[str, Any]:
    """The config fields the form sets, as the config holds them (blank and the number spelling unset: None)."""
    values: dict[str, Any] = {}
    for option in options:
        if not (option.on(FLOW) and option.on(CONFIG)):
            continue
        value = getattr(params, option.name)
        if option.kind == NAMES:
            value = names_text(value)
        elif option.kind == MAPPING:
            value = parse_storage_options_text(value)
        elif option.kind in (WHOLE, NUMBER):
            value = None if option.flow_unset is not None and value == option.flow_unset else value
        elif option.kind == AUTO_SWITCH:
            value = AUTO_SWITCH_CHOICES[value]
        elif isinstance(value, str) and option.kind not in (CHOICE, SWITCH):
            value = value.strip() or (None if option.default is None else value)
        values[option.name] = value
    return values


class _Form(BaseModel):
    model_config = FORM

    if TYPE_CHECKING:  # the fields are generated from the options schema
        def __getattr__(self, name: str) -> Any: ...

    def storage_options_dict(self) -> dict:
        """The storage_options text as fsspec keyword arguments."""
        return parse_storage_options_text(self.storage_options)


class _ExplainForm(_Form):
    """Parameters of the explain flow: what to read, which clustering to explain, and where to write."""

    @field_validator("output", check_fields=False)
    @classmethod
    def _output_allowed(cls, value: str) -> str:
        return _allowed_output(value)

    @model_validator(mode="after")
    def _consistent(self) -> Any:
        if self.reference == "labels" and not self.reference_column.strip():
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

    def to_config(self) -> ExplainConfig:
        """The library's ExplainConfig for these parameters."""
        return ExplainConfig(**config_values(EXPLAIN_OPTIONS, self))


class _LabelForm(_Form):
    """Parameters of the label flow: the saved tree, the Parquet to label, and where the labelled copy goes."""

    _tree_exists = field_validator("tree", check_fields=False)(_local_at_once(validate_input_path))
    _input_exists = field_validator("input", check_fields=False)(_local_at_once(_existing_or_dated_input))
    _output_allowed = field_validator("output", check_fields=False)(_local_at_once(_allowed_label_output))

    @field_validator("date", check_fields=False)
    @classmethod
    def _dates_parse(cls, value: str) -> str:
        if value.strip():
            parse_dates(value)
        return value.strip()

    @model_validator(mode="after")
    def _remote_paths_and_templates_agree(self) -> Any:
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

    def to_config(self) -> LabelConfig:
        """The library's LabelConfig for these parameters."""
        return LabelConfig(**config_values(LABEL, self))

    @property
    def table(self) -> str | None:
        """The output's table format ("delta", "iceberg"), or None for folders."""
        from exclust.jobs.label.table_labeling import output_table_format

        return output_table_format(self.output, self.output_format, self.storage_options_dict())

    @property
    def dated(self) -> bool:
        """True when the run labels by date ({date} in the paths, or a table output)."""
        return has_date(self.output) or self.table is not None


# The form's enumerations and fields come from the options schema (exclust.jobs.options), read when this
# module is imported: a registered algorithm, reference, threshold or algorithm option appears by itself.
if TYPE_CHECKING:
    class ExplainParams(_ExplainForm):
        def __init__(self, **data: Any) -> None: ...

    class LabelParams(_LabelForm):
        def __init__(self, **data: Any) -> None: ...
else:
    ExplainParams = form_model("ExplainParams", EXPLAIN_OPTIONS, _ExplainForm)
    LabelParams = form_model("LabelParams", LABEL, _LabelForm)
