"""A night of labels as one snapshot of an Iceberg table (through ``pyiceberg``), the table named by
an address as the Iceberg source names it (``iceberg+<catalog URI>#[catalog:]namespace.table``).

As for Delta (``outputs.delta_table``), the table's own commit is the commit protocol: the night's
Parquet files are written into the table's location under run-scoped names
(``data/date=2026-11-20/part-00000-<run id>.parquet``, each holding the date column, as Iceberg data
files hold their partition columns), and one OVERWRITE snapshot adds them and removes the night's
previous files; the other nights' files stay. The table is made on the first night, partitioned by
the date column (identity), in the same catalog commit as its first snapshot, at its namespace's
``location`` (or the catalog's warehouse). The files carry no Iceberg field ids: the table's name
mapping (``schema.name-mapping.default``) maps their columns, as pyiceberg's ``add_files`` does.

The commit is made against the snapshot read when the run started, with pyiceberg's commit retries
off for it: a retry would rebase the overwrite onto a concurrent writer's snapshot, and when that
writer appended the same night both nights' rows would stay. So any commit since refuses this one,
and the run fails with one line. A failed or interrupted run removes its data files and the
manifests of its commit (named by its commit id) unless the reloaded table lists its snapshot; the
table stays at the snapshot it had. The snapshot's summary carries the night's figures under
``exclust`` (JSON: rows per cluster and per leaf, drift, the tree), as ``_labels.json`` holds them.
"""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from exclust.dataplane.stop_signals import held_back, note_committed
from exclust.errors import InputError
from exclust.outputs.folders import check_disjoint, output_location
from exclust.outputs.lake_table import METADATA_KEY, NightFiles
from exclust.sources.extras import require_extra
from exclust.sources.guards import Guard
from exclust.sources.iceberg import open_catalog, parse_address
from exclust.sources.storage import filesystem, is_local_filesystem

# The catalog's writes (manifests, metadata) go through fsspec, as every other exclust write does (pyarrow's
# S3 multipart uploads fail against some S3-compatible stores, such as moto's).
FSSPEC_IO = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}


def _is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` says another writer committed first: the table moved since it was read (or was made
    meanwhile, for a run that makes it)."""
    from pyiceberg.exceptions import CommitFailedException, TableAlreadyExistsError

    return isinstance(exc, (CommitFailedException, TableAlreadyExistsError))


def without_commit_retries(table):
    """``table`` as read, with pyiceberg's commit retries off for commits made through this object (the
    property is read from the local metadata; the catalog applies only the commit's own updates)."""
    from pyiceberg.table import Table, TableProperties

    properties = {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    metadata = table.metadata.model_copy(update={"properties": properties})
    return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog)


class IcebergNight(NightFiles):
    """One night's write to an Iceberg table: the snapshot read at the start, the files, one snapshot."""

    file_holds_date = True
    files_under = "data/"  # where Iceberg writers put data files

    def __init__(self, url: str, date_column: str, day: date, guards: Sequence[Guard] = (),
                 storage_options: Mapping[str, Any] | None = None):
        NoSuchTableError = require_extra("pyiceberg.exceptions", "writing Iceberg tables", "lake").NoSuchTableError
        self.url = str(url).strip()
        self.date_column, self.day = date_column, day
        self.storage_options = dict(storage_options or {})
        self.uri, _, self.identifier = parse_address(self.url)
        self.catalog, _ = open_catalog(self.url, self.storage_options, FSSPEC_IO)
        try:
            self.table = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            self.table = None
        except Exception as exc:  # NoSuchNamespaceError, the catalog's driver errors
            raise InputError(f"cannot open Iceberg table {self.identifier} in catalog {self.uri}: "
                             f"{type(exc).__name__}: {exc}") from exc
        self.location = (self.table.location() if self.table is not None else self._new_location()).rstrip("/")
        check_disjoint(output_location(self.location, storage_options=self.storage_options), guards)
        self.fs, root = filesystem(self.location, self.storage_options)
        self.root = root.rstrip("/")
        if self.table is None:  # its location may hold files (another run's, making it now): this run's are its own
            self.read_snapshot = None
        else:
            self._check_partitioning()
            snapshot = self.table.current_snapshot()
            self.read_snapshot = None if snapshot is None else snapshot.snapshot_id
        self.run_id = uuid.uuid4().hex[:12]
        self.commit_uuid = uuid.uuid4()  # names this run's manifests: removed with its files unless committed
        self.snapshot_id: int | None = None  # the snapshot this run's commit makes, once staged
        self.written: list[str] = []

    def _new_location(self) -> str:
        """Where a table made by this run lives: its namespace's location, else the catalog's warehouse."""
        namespace, _, table_name = self.identifier.rpartition(".")
        try:
            if not self.catalog.namespace_exists(namespace):
                raise InputError(f"Iceberg namespace {namespace} does not exist in catalog {self.uri}; create it "
                                 "with a location for its tables (pyiceberg: catalog.create_namespace"
                                 f"('{namespace}', {{'location': 's3://bucket/lake/{namespace}'}}))")
            properties = self.catalog.load_namespace_properties(namespace)
        except InputError:
            raise
        except Exception as exc:  # the catalog's driver errors
            raise InputError(f"cannot read Iceberg namespace {namespace} in catalog {self.uri}: {exc}") from exc
        if properties.get("location"):
            return f"{properties['location'].rstrip('/')}/{table_name}"
        if self.catalog.properties.get("warehouse"):
            return f"{self.catalog.properties['warehouse'].rstrip('/')}/{namespace}/{table_name}"
        raise InputError(f"Iceberg table {self.identifier} does not exist and namespace {namespace} has no location "
                         "to make it in; set the namespace's 'location' property (pyiceberg: catalog."
                         f"update_namespace_properties('{namespace}', updates={{'location': ...}}))")

    def _check_partitioning(self) -> None:
        from pyiceberg.transforms import IdentityTransform

        schema, spec = self.table.schema(), self.table.spec()
        fields = [(schema.find_column_name(f.source_id), f.transform) for f in spec.fields]
        if len(fields) != 1 or fields[0][0] != self.date_column or not isinstance(fields[0][1], IdentityTransform):
            shown = ", ".join(f"{t}({name})" for name, t in fields) or "none"
            raise InputError(f"Iceberg table {self.identifier} is not partitioned by identity({self.date_column}) "
                             f"alone (its partition fields: {shown}); label into a table partitioned by the date "
                             "column, or name it with --date-column")

    def _night_files(self, table) -> list:
        """The data files of the night's partition in the snapshot read (all of them from the date's identity spec)."""
        from pyiceberg.expressions import EqualTo

        if self.read_snapshot is None:
            return []
        files = []
        # pyiceberg's EqualTo.__init__(term, literal) is hidden from mypy by the pydantic fields it
        # declares (term, value, type): the positional form is what it takes at run time.
        the_night = EqualTo(self.date_column, self.day.isoformat())  # type: ignore[call-arg, arg-type]
        for task in table.scan(snapshot_id=self.read_snapshot, row_filter=the_night).plan_files():
            if task.delete_files:
                raise InputError(f"Iceberg table {self.identifier} has delete files for {task.file.file_path}, "
                                 "which a night's overwrite would leave dangling; compact the table first")
            if task.file.spec_id != table.spec().spec_id:
                raise InputError(f"Iceberg table {self.identifier} holds {task.file.file_path} of the night under "
                                 "an older partition spec; rewrite the table's files before labelling into it")
            files.append(task.file)
        return files

    def _transaction(self, file_schema):
        """A transaction on the table as read (retries off), or one that makes the table with its first snapshot."""
        from pyiceberg.table import TableProperties

        if self.table is not None:
            table = without_commit_retries(self.table)
            txn = table.transaction()
        else:
            txn = self.catalog.create_table_transaction(self.identifier, schema=file_schema, location=self.location)
            with txn.update_spec() as spec:
                spec.add_identity(self.date_column)
            table = None
        if txn.table_metadata.name_mapping() is None:  # the night's files carry no field ids
            txn.set_properties(**{TableProperties.DEFAULT_NAME_MAPPING:
                                  txn.table_metadata.schema().name_mapping.model_dump_json()})
        return txn, table

    def commit(self, files: Sequence[Mapping[str, Any]], file_schema, figures: Mapping[str, Any]) -> int:
        """Add ``files`` as the night's partition, removing the night's previous files, in one snapshot
        whose summary carries ``figures``; return the new snapshot's id."""
        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import parquet_file_to_data_file

        if self.table is not None:
            current = self.table.schema().as_arrow()
            if current.names != file_schema.names:
                raise InputError(f"the night's columns {file_schema.names} differ from Iceberg table "
                                 f"{self.identifier}'s {current.names}; label into a table of the same columns")
        txn, table = self._transaction(file_schema)
        replaced = self._night_files(table) if table is not None else []
        io = table.io if table is not None else load_file_io(
            {**self.catalog.properties, **txn.table_metadata.properties}, self.location)
        try:
            added = [parquet_file_to_data_file(io, txn.table_metadata, f"{self.location}/{f['relpath']}")
                     for f in files]
        except ValueError as exc:  # pyiceberg's schema check, a table of lines
            raise InputError(f"the night's column types ({', '.join(f'{f.name}: {f.type}' for f in file_schema)}) "
                             f"do not fit Iceberg table {self.identifier}'s; label into a table of the same columns "
                             f"({str(exc).splitlines()[0]})") from exc
        summary = {METADATA_KEY: json.dumps(dict(figures), allow_nan=False)}
        with txn.update_snapshot(snapshot_properties=summary).overwrite(commit_uuid=self.commit_uuid) as overwrite:
            for old in replaced:
                overwrite.delete_data_file(old)
            for data_file in added:
                overwrite.append_data_file(data_file)
        self.snapshot_id = overwrite.snapshot_id
        with held_back():  # a stop signal waits for the commit's outcome: in the table (and said so) or not
            try:
                txn.commit_transaction()
            except Exception as exc:
                if not _is_conflict(exc):
                    raise
                found = "no table" if self.table is None else (
                    "no snapshot" if self.read_snapshot is None else f"snapshot {self.read_snapshot}")
                raise InputError(f"Iceberg table {self.identifier} changed while this run labelled {self.day} "
                                 f"(it found {found}; another run committed to it first: {str(exc).splitlines()[0]}); "
                                 "nothing of this run was committed; the table keeps the other run's commit") from exc
            self.written = []  # committed: the table owns them now
            note_committed(f"{self.identifier} ({self.date_column}={self.day.isoformat()})")
        return self.snapshot_id

    def _committed(self) -> bool:
        """Whether the table lists this run's snapshot (True when the catalog cannot tell: keep the files)."""
        from pyiceberg.exceptions import NoSuchTableError

        if self.snapshot_id is None:
            return False
        try:
            return self.catalog.load_table(self.identifier).snapshot_by_id(self.snapshot_id) is not None
        except NoSuchTableError:
            return False
        except Exception:  # unreachable catalog: the commit's outcome is unknown
            return True

    def discard(self) -> None:
        """Remove this run's data files and its commit's manifests, unless the table committed them."""
        if not self.written or self._committed():
            self.written = []
            return
        mine = [self.path(relpath) for relpath in self.written]
        try:
            mine += [p for p in self.fs.ls(self.path("metadata"), detail=False) if str(self.commit_uuid) in p]
        except OSError:  # no metadata folder: nothing of the commit was written
            pass
        for path in mine:
            try:
                if self.fs.exists(path):
                    self.fs.rm(path)
            except OSError:  # already gone, or the store unreachable: the table never listed it
                pass
        if is_local_filesystem(self.fs):  # folders this run made, when they are left empty
            for folder in (self.path(f"data/{self.partition}"), self.path("data"), self.path("metadata"), self.root):
                try:
                    os.rmdir(folder)
                except OSError:  # not empty (the table's own files) or not there
                    pass
        self.written = []
