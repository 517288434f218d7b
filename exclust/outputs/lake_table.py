"""The output-table interface: a night of labels committed to a lake table, one module per format.

A format's module holds one class, a ``TableNight``: opened for (table address, date column, day)
before any work, it says where the night's files go (run-scoped names inside the table, where no
reader looks until a commit lists them), then commits them as the night's partition in one
commit against the snapshot it read, or discards them. ``TABLE_FORMATS`` names each format's class
(imported when used) and how its address is recognised; ``table_format_of`` is the one place that
tells a table output's format from its address.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from importlib import import_module
from typing import Any, Protocol

from exclust.errors import InputError
from exclust.sources.guards import Guard

METADATA_KEY = "exclust"  # the commit's metadata key holding the night's figures, in every format


class TableNight(Protocol):
    """One night's write to a lake table (what ``jobs.label.table_labeling`` needs of a format)."""

    url: str
    run_id: str
    fs: Any  # the fsspec filesystem the night's files are written on
    file_holds_date: bool  # whether data files carry the date column (Iceberg) or only the partition path (Delta)
    # Per-file statistics its commit records, computed by the task that writes the file: a picklable
    # function (pyarrow table) -> value in the file's facts under "stats", or None (Iceberg: none needed).
    file_stats: Any

    def __init__(self, url: str, date_column: str, day: date, guards: Sequence[Guard] = (),
                 storage_options: Mapping[str, Any] | None = None) -> None: ...

    def file_relpath(self, index: int) -> str:
        """Where the night's ``index``-th file goes, relative to the table's root (remembered for ``discard``)."""

    def path(self, relpath: str) -> str:
        """``relpath``'s path on ``fs``."""

    def commit(self, files: Sequence[Mapping[str, Any]], file_schema, figures: Mapping[str, Any]) -> Any:
        """Commit ``files`` as the night's partition (replacing its previous files), with ``figures`` in the
        commit's metadata under ``METADATA_KEY``; InputError with one line when the table changed since it was read."""

    def discard(self) -> None:
        """Remove the files this run wrote and did not commit."""


class NightFiles:
    """Where a night's files go, shared by the formats' TableNight classes: run-scoped names under
    the night's partition folder, ``files_under`` the table's root, remembered for ``discard``.
    A subclass sets ``root``, ``date_column``, ``day``, ``run_id`` and ``written``."""

    root: str
    date_column: str
    day: date
    run_id: str
    written: list[str]
    files_under = ""  # the folder under the table's root that holds data files ("data/" for Iceberg)
    # no per-file statistics unless the format's commit needs them (a written table -> their text)
    file_stats: Callable[[Any], str] | None = None

    @property
    def partition(self) -> str:
        return f"{self.date_column}={self.day.isoformat()}"

    def file_relpath(self, index: int) -> str:
        """Where the night's ``index``-th file goes, relative to the table's root (run-scoped: no clash)."""
        relpath = f"{self.files_under}{self.partition}/part-{index:05d}-{self.run_id}.parquet"
        self.written.append(relpath)
        return relpath

    def path(self, relpath: str) -> str:
        return f"{self.root}/{relpath}"


@dataclass(frozen=True)
class TableFormat:
    name: str
    night: str  # "module:Class" of its TableNight, imported when used
    recognises: str  # "module:function" (address, storage options) -> whether it names a table of this format


TABLE_FORMATS = {
    "iceberg": TableFormat("iceberg", "exclust.outputs.iceberg_table:IcebergNight",
                           "exclust.sources.iceberg:is_iceberg_address"),
    "delta": TableFormat("delta", "exclust.outputs.delta_table:DeltaNight", "exclust.sources.delta:is_delta_table"),
}


def _named(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


def table_format_of(out: Any, storage_options: Mapping[str, Any] | None = None) -> str | None:
    """The format of the table ``out`` names (an Iceberg address, an existing Delta table), else None."""
    for fmt in TABLE_FORMATS.values():
        if _named(fmt.recognises)(str(out), storage_options):
            return fmt.name
    return None


def open_night(table_format: str, url: Any, date_column: str, day: date, guards: Sequence[Guard] = (),
               storage_options: Mapping[str, Any] | None = None) -> TableNight:
    """The ``table_format`` night writer of ``url``, checked against what the run reads (``guards``)."""
    if table_format not in TABLE_FORMATS:
        raise InputError(f"table format must be one of {', '.join(TABLE_FORMATS)}, not {table_format!r}")
    return _named(TABLE_FORMATS[table_format].night)(str(url), date_column, day, guards, storage_options)
