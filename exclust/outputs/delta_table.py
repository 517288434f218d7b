"""A night of labels as one commit to a Delta Lake table (through ``deltalake``, delta-rs).

The table's log is the commit protocol here, in place of exclust's staging folders: the night's
Parquet files are written into the table's folder under run-scoped names
(``date=2026-11-20/part-00000-<run id>.parquet``), where no reader of the table looks until the
log lists them, and then one commit adds them and removes that night's previous files (a
partition overwrite). So a night is in the table whole or not at all; a rerun of a night
replaces that night's partition and no other; a failed or interrupted run removes the files it
wrote and leaves the table at the version it found (a run killed outright leaves only unlisted
files, which no reader of the table sees and Delta's VACUUM removes). The commit is made against
the version the run read when it started, with no retry: when another writer committed since,
the log refuses it, and the run fails with one line and removes its files.

The commit's metadata (``history()``) carries the night's figures under ``exclust``: rows per
cluster and per leaf, drift, the tree's facts, as ``_labels.json`` holds them for folders.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from exclust.dataplane.stop_signals import held_back, note_committed
from exclust.errors import InputError
from exclust.outputs.folders import check_disjoint, output_location
from exclust.outputs.lake_table import METADATA_KEY, NightFiles
from exclust.sources.delta import DELTA_LOG, delta_storage_options, is_delta_table, table_url
from exclust.sources.extras import require_extra
from exclust.sources.guards import Guard
from exclust.sources.storage import filesystem, is_local_filesystem, is_remote


def write_options(url: str, storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """delta-rs options for writing: on S3, commits by conditional put (If-None-Match) unless the
    user chose another mechanism (a locking provider, or unsafe renames)."""
    options = delta_storage_options(url, storage_options)
    if is_remote(url) and not any(k in options for k in ("AWS_S3_LOCKING_PROVIDER", "AWS_S3_ALLOW_UNSAFE_RENAME",
                                                         "AWS_CONDITIONAL_PUT")):
        options["AWS_CONDITIONAL_PUT"] = "etag"
    return options


def file_stats(table) -> str:
    """The ``add`` action's statistics of a written file: its row count, and min/max/nulls of its numbers."""
    import pyarrow.compute as pc
    import pyarrow.types as pat

    stats: dict[str, Any] = {"numRecords": table.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for name in table.column_names:
        column = table.column(name)
        stats["nullCount"][name] = column.null_count
        if (pat.is_integer(column.type) or pat.is_floating(column.type)) and column.null_count < len(column):
            low, high = pc.min_max(column).values()
            if low.is_valid and high.is_valid:
                stats["minValues"][name], stats["maxValues"][name] = low.as_py(), high.as_py()
    return json.dumps(stats, allow_nan=False) if _finite(stats) else json.dumps({"numRecords": table.num_rows})


def _finite(stats: dict) -> bool:
    import math

    values = [*stats["minValues"].values(), *stats["maxValues"].values()]
    return all(not isinstance(v, float) or math.isfinite(v) for v in values)


class DeltaNight(NightFiles):
    """One night's write to a Delta table: the version read at the start, the files, one commit."""

    file_holds_date = False  # the date lives in the partition path and the log, not in the files
    file_stats = staticmethod(file_stats)  # the add actions' statistics, written into the log

    def __init__(self, url: str | Any, date_column: str, day: date, guards: Sequence[Guard] = (),
                 storage_options: Mapping[str, Any] | None = None):
        require_extra("deltalake", "writing Delta tables", "lake")
        self.url = str(url)
        self.date_column, self.day = date_column, day
        self.storage_options = dict(storage_options or {})
        check_disjoint(output_location(self.url, storage_options=self.storage_options), guards)
        self.fs, root = filesystem(self.url, self.storage_options)
        self.root = root.rstrip("/")
        self.table = self._existing_table()
        self.read_version = None if self.table is None else self.table.version()
        self.run_id = uuid.uuid4().hex[:12]
        self.written: list[str] = []  # relative paths this run may have written (removed unless committed)

    def _existing_table(self):
        from deltalake import DeltaTable

        if is_delta_table(self.url, self.storage_options):
            try:
                table = DeltaTable(table_url(self.url), storage_options=write_options(self.url, self.storage_options))
            except Exception as exc:  # delta-rs's own error types
                raise InputError(f"cannot open Delta table {self.url}: {exc}") from exc
            if self.date_column not in table.metadata().partition_columns:
                raise InputError(f"Delta table {self.url} is not partitioned by '{self.date_column}' (its partition "
                                 f"columns: {table.metadata().partition_columns}); label into a table partitioned by "
                                 "the date column, or name it with --date-column")
            return table
        if self.fs.exists(self.root) and (not self.fs.isdir(self.root) or self.fs.ls(self.root)):
            raise InputError(f"output {self.url} exists and is not a Delta table (no {DELTA_LOG}/); give a new "
                             "path or an existing Delta table")
        return None

    def commit(self, files: Sequence[Mapping[str, Any]], file_schema, figures: Mapping[str, Any]) -> int:
        """Add ``files`` (relpath, size, stats) as the night's partition, replacing the night's previous
        files, in one commit carrying ``figures``; return the new version."""
        import pyarrow as pa
        from deltalake import DeltaTable, Schema
        from deltalake.transaction import AddAction, CommitProperties, create_table_with_add_actions

        schema = file_schema.append(pa.field(self.date_column, pa.date32()))
        if self.table is not None:
            current = pa.schema(self.table.schema())
            if [(f.name, f.type) for f in current] != [(f.name, f.type) for f in schema]:
                raise InputError(f"the night's columns {schema.names} ({', '.join(str(f.type) for f in schema)}) "
                                 f"differ from Delta table {self.url}'s {current.names} "
                                 f"({', '.join(str(f.type) for f in current)}); label into a table of the same columns")
        now = int(time.time() * 1000)
        actions = [AddAction(f["relpath"], int(f["size"]), {self.date_column: self.day.isoformat()}, now, True,
                             f["stats"]) for f in files]
        # No retry over a newer version: delta-rs's conflict check lets an overwrite of a partition that
        # was empty when read pass over a concurrent append to it (both nights' rows would stay); any
        # commit since the version this run read refuses this one instead.
        properties = CommitProperties(custom_metadata={METADATA_KEY: dict(figures)}, max_commit_retries=0)
        options = write_options(self.url, self.storage_options)
        with held_back():  # a stop signal waits for the commit's outcome: in the table (and said so) or not
            try:
                if self.table is None:
                    create_table_with_add_actions(table_url(self.url), Schema.from_arrow(schema), actions,
                                                  mode="error", partition_by=[self.date_column],
                                                  storage_options=options, commit_properties=properties)
                else:
                    self.table.create_write_transaction(actions, "overwrite", schema, [self.date_column],
                                                        [(self.date_column, "=", self.day.isoformat())],
                                                        commit_properties=properties)
            except Exception as exc:  # CommitFailedError, or the table created by another run meanwhile
                found = "no table" if self.read_version is None else f"version {self.read_version}"
                raise InputError(f"Delta table {self.url} changed while this run labelled {self.day} (it found "
                                 f"{found}; another run committed to it first: {str(exc).splitlines()[0]}); nothing of "
                                 "this run was committed; the table keeps the other run's commit") from exc
            self.written = []  # committed: the table owns them now
            note_committed(f"{self.url} ({self.date_column}={self.day.isoformat()})")
        return DeltaTable(table_url(self.url), storage_options=options).version()

    def discard(self) -> None:
        """Remove the files this run wrote but did not commit (no reader of the table lists them)."""
        for relpath in self.written:
            try:
                if self.fs.exists(self.path(relpath)):
                    self.fs.rm(self.path(relpath))
            except OSError:  # already gone, or the store unreachable: the table never listed it
                pass
        if self.written and is_local_filesystem(self.fs):  # folders this run made, when they are left empty
            for folder in (self.path(self.partition), self.root):
                try:
                    os.rmdir(folder)
                except OSError:  # not empty (the table's own files) or not there
                    break
        self.written = []
