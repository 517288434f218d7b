"""Delta Lake tables as a source, through ``deltalake`` (delta-rs: no JVM).

A folder (local, ``file://`` or ``s3://``) holding ``_delta_log/`` is a Delta table, never loose
Parquet: only the files of one snapshot are read, as the log lists them. The snapshot is the
latest, or the one a source option names: ``table_version`` (an integer) or ``as_of`` (a
timestamp, ISO 8601; the latest version committed at or before it). Planning reads the log alone:
row counts and min/max come from its ``add`` actions' statistics, partition values from the
actions too (usable as features, truth and label columns), and the columns are checked against
the snapshot's schema. The files are then read on the workers by the Parquet reader.

Object stores: delta-rs has its own S3 client; it takes the same credentials as the Parquet
source (the AWS_* variables, or the fsspec storage options translated by ``delta_storage_options``).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from exclust.errors import InputError
from exclust.sources.base import Columns, DataSource
from exclust.sources.extras import require_extra
from exclust.sources.guards import input_guards
from exclust.sources.storage import GLOB_CHARS, filesystem, is_remote, split_protocol
from exclust.sources.table_plan import TableFile, plain_bound, plan_table, table_source

DELTA_LOG = "_delta_log"
# Reader features whose data files alone do not give the table's rows: exclust refuses them.
_UNREAD_FEATURES = {"deletionVectors": "deletion vectors", "columnMapping": "column mapping"}
# fsspec/s3fs storage options -> delta-rs (object_store) configuration keys.
_DELTA_KEYS = {"key": "AWS_ACCESS_KEY_ID", "secret": "AWS_SECRET_ACCESS_KEY", "token": "AWS_SESSION_TOKEN",
               "endpoint_url": "AWS_ENDPOINT_URL", "region_name": "AWS_REGION", "region": "AWS_REGION"}


def table_url(url: str | os.PathLike) -> str:
    """The table's address as delta-rs takes it: an absolute local path, or the URL as given."""
    text = str(url).strip().rstrip("/")
    proto, rest = split_protocol(text)
    if proto in (None, "file", "local"):
        return os.path.abspath(os.path.expanduser(rest))
    return text


def delta_storage_options(url: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """delta-rs options for ``url``: the fsspec options translated, the AWS_* variables otherwise
    (delta-rs reads them itself), and plain HTTP allowed when the endpoint is http://."""
    if not is_remote(url):
        return {}
    options: dict[str, str] = {}
    given = dict(storage_options or {})
    given.update(given.pop("client_kwargs", None) or {})
    for key, value in given.items():
        if key == "anon" and value:
            options["AWS_SKIP_SIGNATURE"] = "true"
        elif key in _DELTA_KEYS and value is not None:
            options[_DELTA_KEYS[key]] = str(value)
        elif key.upper().startswith("AWS_"):  # delta-rs keys given as they are
            options[key.upper()] = str(value)
    endpoint = options.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL", "")
    if endpoint.startswith("http://"):
        options.setdefault("AWS_ALLOW_HTTP", "true")
    if "AWS_REGION" not in options and not os.environ.get("AWS_REGION"):
        options["AWS_REGION"] = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    return options


def is_delta_table(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``url`` is a folder holding ``_delta_log/`` (a glob never is)."""
    text = str(url).strip().rstrip("/")
    if not text or any(ch in text for ch in GLOB_CHARS):
        return False
    try:
        fs, path = filesystem(text, storage_options)
        return bool(fs.isdir(path.rstrip("/") + "/" + DELTA_LOG))
    except Exception:  # not reachable or not a folder: not a table this source can claim
        return False


def parse_as_of(value: Any) -> datetime:
    """A timestamp (datetime, or ISO 8601 text; UTC when it names no zone)."""
    if isinstance(value, datetime):
        stamp = value
    else:
        try:
            stamp = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise InputError(f"--as-of {value!r} is not a timestamp; write it as ISO 8601, such as "
                             "2026-11-20T06:00:00Z or 2026-11-20") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def check_snapshot_options(options: Mapping[str, Any]) -> None:
    if options.get("table_version") is not None and options.get("as_of") is not None:
        raise InputError("give --table-version or --as-of, not both")
    version = options.get("table_version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise InputError(f"--table-version must be a whole number >= 0, not {version!r}")


def open_delta_table(url: str, storage_options: Mapping[str, Any] | None = None,
                     table_version: int | None = None, as_of: Any = None):
    """The ``deltalake.DeltaTable`` at the snapshot asked for; InputError naming what is wrong."""
    DeltaTable = require_extra("deltalake", "reading Delta tables", "lake").DeltaTable

    address = table_url(url)
    options = delta_storage_options(url, storage_options)
    try:
        table = DeltaTable(address, storage_options=options)
    except Exception as exc:  # delta-rs raises its own error types for unreadable logs and stores
        raise InputError(f"cannot open Delta table {url}: {exc}; check the path and, for an object store, the "
                         "credentials and endpoint (AWS_* variables or storage options)") from exc
    latest = table.version()
    if table_version is not None:
        if table_version > latest:
            raise InputError(f"Delta table {url} has versions up to {latest}, not {table_version}")
        _load(table, table_version, url)
    elif as_of is not None:
        stamp = parse_as_of(as_of)
        created = table.metadata().created_time  # ms since the epoch; delta-rs loads version 0 for earlier times
        if created is not None and stamp.timestamp() * 1000 < created:
            first = datetime.fromtimestamp(created / 1000, UTC).isoformat()
            raise InputError(f"Delta table {url} was created at {first}, after --as-of {stamp.isoformat()}; "
                             "give a later time")
        _load(table, stamp, url)
    return table


def _load(table, version: int | datetime, url: str) -> None:
    try:
        table.load_as_version(version)
    except Exception as exc:
        what = f"version {version}" if isinstance(version, int) else f"a version as of {version.isoformat()}"
        raise InputError(f"Delta table {url} has no {what} (vacuumed, or before the table's first commit): "
                         f"{exc}") from exc


def snapshot_files(table, url: str, storage_options: Mapping[str, Any] | None = None):
    """(fs, root, [TableFile]) of the loaded snapshot, from its log's add actions alone."""
    import pyarrow as pa

    for feature in table.protocol().reader_features or ():
        if feature in _UNREAD_FEATURES:
            raise InputError(f"Delta table {url} uses {_UNREAD_FEATURES[feature]} ({feature}), which exclust does "
                             "not read; rewrite the table without it")
    fs, root = filesystem(url, storage_options)
    root = root.rstrip("/")
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    partition_keys = list(table.metadata().partition_columns)
    files = []
    for action in actions:
        relpath = unquote(action["path"])
        if "://" in relpath:  # an absolute URI (shallow clones): take it as it is
            path = filesystem(relpath, storage_options)[1]
        else:
            path = f"{root}/{relpath}"
        if action.get("num_records") is None:
            raise InputError(f"Delta table {url} records no row count for {relpath}; exclust plans from the log's "
                             "statistics: rewrite the table with statistics (any recent writer keeps them)")
        bounds = {}
        for key, value in action.items():
            if key.startswith("min."):
                column = key[4:]
                low, high = plain_bound(value), plain_bound(action.get("max." + column))
                if low is not None and high is not None:
                    bounds[column] = (low, high)
        partitions = {k: action.get("partition." + k) for k in partition_keys}
        files.append(TableFile(path, relpath, int(action["num_records"]), partitions, bounds))
    files.sort(key=lambda f: f.relpath)
    return fs, root, files, partition_keys


class DeltaSource(DataSource):
    """A Delta Lake table: a folder or prefix holding ``_delta_log/``, at one snapshot."""

    kind = "Delta table"
    option_names = ("table_version", "as_of")

    @classmethod
    def recognises(cls, spec: Any, storage_options: Mapping[str, Any] | None = None) -> bool:
        return isinstance(spec, (str, os.PathLike)) and is_delta_table(spec, storage_options)

    def _table(self):
        """The table at the run's snapshot, opened once per source (a run keeps one source: its log is
        read once for the check, the plan and the labelling alike)."""
        if getattr(self, "_opened", None) is None:
            check_snapshot_options(self.options)
            self._opened = open_delta_table(str(self.spec), self.storage_options, self.options.get("table_version"),
                                            self.options.get("as_of"))
        return self._opened

    def check(self) -> str:
        self._table()
        return str(self.spec)

    def columns(self, features: Sequence[str] | None, extra_columns: Sequence[str] = (), *,
                piece_rows: int = 1_000_000, categorical: Sequence[str] = (),
                vocabularies: Mapping[str, Sequence[Any]] | None = None) -> Columns:
        import pyarrow as pa

        from exclust.sources.parquet import to_dask

        table = self._table()
        url = str(self.spec)
        fs, root, files, partition_keys = snapshot_files(table, url, self.storage_options)
        source = table_source(url, fs, root, files, self.storage_options)
        where = f"Delta table {url} (version {table.version()})"
        planned = plan_table(source, files, pa.schema(table.schema()), partition_keys, where, features,
                             extra_columns, piece_rows, categorical, vocabularies)
        X, extras, categories = to_dask(planned)
        return Columns(X, planned.features, extras, categories)

    def guards(self) -> list:
        return input_guards(str(self.spec), storage_options=self.storage_options)

    def label_files(self):
        """The snapshot's live data files at their paths in the table, partition values from the log."""
        fs, root, files, _ = snapshot_files(self._table(), str(self.spec), self.storage_options)
        return table_source(str(self.spec), fs, root, files, self.storage_options)

    def describe(self) -> str:
        snapshot = ("" if not self.options else
                    f" at version {self.options['table_version']}" if "table_version" in self.options
                    else f" as of {self.options['as_of']}")
        return f"Delta table {self.spec}{snapshot}"
