"""The data-source interface and its registry: the one place that decides what kind an input is.

A source turns what a user names (a Parquet folder, a table, a CSV file, an array in memory)
into lazy columns whose parts are read on the workers. It plans from metadata alone (footers,
a table's log: row counts known, schemas checked, nothing read), tells which paths a run reads
(an output may not touch them), and whether its reads need a Dask cluster. ``open_source``
asks the registered sources in turn, the last registered first, so a specific format (a folder
holding ``_delta_log/``, a ``.csv`` file) is recognised before the catch-all Parquet source.

Adding a source is one module with a ``DataSource`` subclass plus one ``register_source`` call.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from exclust.errors import InputError


@dataclass
class Columns:
    """What a source's read gives the validation: lazy or in-memory columns with their names."""

    X: Any  # n x d float64: numpy, or a dask array whose chunk sizes are known
    feature_names: list[str]
    extras: dict[str, Any] = field(default_factory=dict)  # 1-D columns kept aside (truth, labels, concepts)
    categories: dict[str, list[Any]] = field(default_factory=dict)  # category and string columns' values (code = index)
    notes: list[str] = field(default_factory=list)  # what a run should say about the read (columns left out)


class DataSource(ABC):
    """One kind of input. Subclasses say which inputs they take (``recognises``) and implement the rest."""

    kind: str = "source"  # a word for messages: "Parquet", "array", "Delta table", ...
    needs_cluster: bool = True  # whether reading it is Dask work (False: it is in memory already)
    # Source options this kind takes (a table's snapshot: "table_version", "as_of"); any other set option is refused.
    option_names: tuple[str, ...] = ()

    def __init__(self, spec: Any, storage_options: Mapping[str, Any] | None = None,
                 options: Mapping[str, Any] | None = None):
        self.spec = spec
        self.storage_options = dict(storage_options or {})
        self.options = {k: v for k, v in (options or {}).items() if v is not None}
        refused = [k for k in self.options if k not in self.option_names]
        if refused:
            flags = ", ".join("--" + k.replace("_", "-") for k in refused)
            raise InputError(f"{flags} applies to tables (Delta, Iceberg), but {self.describe()} is read as "
                             f"{self.kind}; leave {flags} out or give a table")

    @classmethod
    @abstractmethod
    def recognises(cls, spec: Any, storage_options: Mapping[str, Any] | None = None) -> bool:
        """Whether ``spec`` is an input of this kind; cheap, and it raises nothing."""

    def check(self) -> Any:
        """Refuse an input that cannot be read (InputError saying why) before any work; return the
        spec as the run should keep it (a normalised path, say). Default: as given."""
        return self.spec

    def checked(self) -> DataSource:
        """This source checked (``check``) and kept for the run's every later step, its spec the
        checked one: what a source opens while checking (a table's log) is not opened again."""
        self.spec = self.check()
        return self

    @abstractmethod
    def columns(self, features: Sequence[str] | None, extra_columns: Sequence[str] = (), *,
                piece_rows: int = 1_000_000) -> Columns:
        """Plan the read from metadata and return the columns, lazy where the data are large.
        ``features=None``: every numeric column but the extra ones.

        Sources that read category features (text, booleans: ``exclust.sources.categories``) also
        take ``categorical`` (integer columns to code as categories) and ``vocabularies`` (column
        -> the values to code by, a fitted tree's); ``load_dataset`` passes them only when set, so
        a source without them still serves numeric features. Their codes go in X, their
        vocabularies in ``Columns.categories``."""

    def guards(self) -> list:
        """What a run reads (``exclust.outputs.folders.Guard`` each): outputs may not touch them."""
        return []

    def label_files(self) -> Any:
        """What labelling writes one output file for each of: the source's Parquet files as a listed
        ``exclust.sources.storage.Source`` (each file read whole, every column kept, written at its
        relative path), planned from metadata. None (the default) for a source that is not Parquet
        files: its ``columns`` are then labelled part by part, one output file per part."""
        return None

    def describe(self) -> str:
        """How messages, progress lines and the report name this input."""
        return str(self.spec)


# Built-in sources as "module:Class" (imported only when asked), then registered classes; asked last first.
SOURCES: list[Any] = ["exclust.sources.in_memory:InMemorySource", "exclust.sources.parquet:ParquetSource",
                      "exclust.sources.delta:DeltaSource", "exclust.sources.iceberg:IcebergSource"]


def register_source(source: type[DataSource]) -> type[DataSource]:
    """Add a source; it is asked before every source registered earlier. Usable as a class decorator."""
    if not (isinstance(source, type) and issubclass(source, DataSource)):
        raise TypeError(f"a source must be a DataSource subclass, not {source!r}")
    if source not in SOURCES:
        SOURCES.append(source)
    return source


def unregister_source(source: type[DataSource]) -> None:
    if source in SOURCES:
        SOURCES.remove(source)


def _resolve(entry: Any) -> type[DataSource]:
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        return getattr(importlib.import_module(module), name)
    return entry


def open_source(spec: Any, storage_options: Mapping[str, Any] | None = None,
                options: Mapping[str, Any] | None = None) -> DataSource:
    """The source that reads ``spec`` (an already opened source is returned as it is); ``options``
    are source options such as a table's snapshot (``table_version``, ``as_of``)."""
    if isinstance(spec, DataSource):
        return spec
    for entry in reversed(SOURCES):
        cls = _resolve(entry)
        if cls.recognises(spec, storage_options):
            return cls(spec, storage_options, options)
    raise InputError(f"exclust cannot read {type(spec).__name__} inputs: give a path, a URL, an array or a DataFrame")
