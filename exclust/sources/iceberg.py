"""Apache Iceberg tables as a source, through ``pyiceberg``.

An Iceberg table is named by its catalog and its identifier, in one address:
``iceberg+<catalog URI>#[<catalog name>:]<namespace>.<table>`` (the name a SQL catalog keys its
tables by; ``default`` when left out). The catalog is a SQL catalog (a SQLite file,
``iceberg+sqlite:////lake/catalog.db#analytics.events``, or PostgreSQL,
``iceberg+postgresql+psycopg2://user@host/db#analytics.events``, which needs pyiceberg's
sql-postgres extra) or a REST catalog (``iceberg+http://rest-catalog:8181#analytics.events``).

Only the files of one snapshot are read: the current one, or the one a source option names
(``table_version``: a snapshot id; ``as_of``: the snapshot current at that time). Planning reads
the manifests alone (files, their row counts, deletes); the files are read on the workers by the
Parquet reader. Iceberg data files hold their partition columns, so partition columns are read as
any column. Object stores take the AWS_* variables, or the fsspec storage options translated to
pyiceberg's ``s3.*`` properties.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from exclust.errors import InputError
from exclust.sources.base import Columns, DataSource
from exclust.sources.delta import check_snapshot_options, parse_as_of
from exclust.sources.extras import require_extra
from exclust.sources.guards import input_guards
from exclust.sources.storage import filesystem
from exclust.sources.table_plan import TableFile, plan_table, table_source

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

PREFIX = "iceberg+"
DEFAULT_CATALOG = "default"  # the catalog name a SQL catalog keys its tables by, unless the address names one
# fsspec/s3fs storage options -> pyiceberg FileIO properties.
_ICEBERG_KEYS = {"key": "s3.access-key-id", "secret": "s3.secret-access-key", "token": "s3.session-token",
                 "endpoint_url": "s3.endpoint", "region_name": "s3.region"}


def is_iceberg_address(spec: Any, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``spec`` names an Iceberg table (``iceberg+...``); cheap, raises nothing."""
    return isinstance(spec, str) and spec.strip().lower().startswith(PREFIX)


def parse_address(spec: str) -> tuple[str, str, str]:
    """(catalog URI, catalog name, table identifier) of ``iceberg+URI#[catalog:]namespace.table``."""
    text = str(spec).strip()
    uri, sep, identifier = text[len(PREFIX):].partition("#")
    name, colon, identifier = identifier.rpartition(":") if ":" in identifier else ("", "", identifier)
    if not sep or "." not in identifier.strip(".") or not uri or (colon and not name):
        raise InputError(f"Iceberg address {text!r} is not iceberg+<catalog URI>#[<catalog>:]<namespace>.<table>, "
                         "such as iceberg+sqlite:////lake/catalog.db#analytics.events")
    return uri, name or DEFAULT_CATALOG, identifier


def file_io_properties(storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """pyiceberg's FileIO properties from the fsspec options and the AWS_* variables."""
    given = dict(storage_options or {})
    given.update(given.pop("client_kwargs", None) or {})
    properties = {_ICEBERG_KEYS[k]: str(v) for k, v in given.items() if k in _ICEBERG_KEYS and v is not None}
    for variable, key in (("AWS_ENDPOINT_URL", "s3.endpoint"), ("AWS_ACCESS_KEY_ID", "s3.access-key-id"),
                          ("AWS_SECRET_ACCESS_KEY", "s3.secret-access-key"), ("AWS_DEFAULT_REGION", "s3.region")):
        if os.environ.get(variable):
            properties.setdefault(key, os.environ[variable])
    return properties


def open_catalog(spec: str, storage_options: Mapping[str, Any] | None = None,
                 extra_properties: Mapping[str, str] | None = None):
    """(pyiceberg catalog, table identifier) of an address; InputError saying what is wrong."""
    uri, name, identifier = parse_address(spec)
    require_extra("pyiceberg", "Iceberg tables", "lake")
    properties = {**file_io_properties(storage_options), **(extra_properties or {})}
    catalog: Catalog
    try:
        if uri.startswith(("http://", "https://")):
            from pyiceberg.catalog.rest import RestCatalog

            catalog = RestCatalog(name, uri=uri, **properties)
        else:
            from pyiceberg.catalog.sql import SqlCatalog

            catalog = SqlCatalog(name, uri=uri, **properties)
    except ImportError as exc:
        raise InputError(f"the Iceberg catalog {uri} needs a package that is not installed ({exc}); for "
                         "PostgreSQL: pip install 'pyiceberg[sql-postgres]'") from exc
    except Exception as exc:  # the catalog's driver raises its own types
        raise InputError(f"cannot open the Iceberg catalog {uri}: {exc}") from exc
    return catalog, identifier


def load_catalog_table(spec: str, storage_options: Mapping[str, Any] | None = None):
    """The pyiceberg Table an address names; InputError saying what is wrong."""
    require_extra("pyiceberg", "reading Iceberg tables", "lake")
    catalog, identifier = open_catalog(spec, storage_options)
    uri = parse_address(spec)[0]
    try:
        return catalog.load_table(identifier)
    except Exception as exc:  # NoSuchTableError, NoSuchNamespaceError, driver errors
        raise InputError(f"cannot load Iceberg table {identifier} from catalog {uri}: {type(exc).__name__}: {exc}; "
                         "check the catalog address and the table's namespace and name") from exc


def select_snapshot(table, spec: str, table_version: int | None, as_of: Any):
    """The snapshot to read: the current, a snapshot id, or the one current at a time."""
    if table_version is not None:
        snapshot = table.snapshot_by_id(table_version)
        if snapshot is None:
            known = [s.snapshot_id for s in table.snapshots()]
            raise InputError(f"Iceberg table {spec} has no snapshot {table_version}; its snapshots are {known}")
        return snapshot
    if as_of is not None:
        stamp = parse_as_of(as_of)
        snapshot = table.snapshot_as_of_timestamp(int(stamp.timestamp() * 1000))
        if snapshot is None:
            raise InputError(f"Iceberg table {spec} has no snapshot as of {stamp.isoformat()} (its first is later); "
                             "give a later time")
        return snapshot
    snapshot = table.current_snapshot()
    if snapshot is None:
        raise InputError(f"Iceberg table {spec} has no snapshot yet: nothing was ever written to it")
    return snapshot


def snapshot_files(table, snapshot, spec: str, storage_options: Mapping[str, Any] | None = None):
    """(fs, root, [TableFile]) of the snapshot, from its manifests alone."""
    location = table.location()
    fs, root = filesystem(location, storage_options)
    root = root.rstrip("/")
    files = []
    for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
        data = task.file
        if task.delete_files:
            raise InputError(f"Iceberg table {spec} has delete files for {data.file_path}, which exclust does not "
                             "apply; compact the table (rewrite its data files) first")
        if str(data.file_format).upper().rsplit(".", 1)[-1] != "PARQUET":
            raise InputError(f"Iceberg table {spec} holds {data.file_format} file {data.file_path}; exclust reads "
                             "Parquet data files")
        path = filesystem(data.file_path, storage_options)[1]
        relpath = path[len(root) + 1:] if path.startswith(root + "/") else path
        files.append(TableFile(path, relpath, int(data.record_count)))
    files.sort(key=lambda f: f.relpath)
    return fs, root, files


class IcebergSource(DataSource):
    """An Iceberg table, ``iceberg+<catalog URI>#<namespace>.<table>``, at one snapshot."""

    kind = "Iceberg table"
    option_names = ("table_version", "as_of")

    @classmethod
    def recognises(cls, spec: Any, storage_options: Mapping[str, Any] | None = None) -> bool:
        return is_iceberg_address(spec, storage_options)

    def _snapshot(self):
        """(table, snapshot), loaded from the catalog once per source (a run keeps one source)."""
        if getattr(self, "_opened", None) is None:
            check_snapshot_options(self.options)
            table = load_catalog_table(self.spec, self.storage_options)
            self._opened = table, select_snapshot(table, self.spec, self.options.get("table_version"),
                                                  self.options.get("as_of"))
        return self._opened

    def check(self) -> str:
        self._snapshot()
        return self.spec

    def columns(self, features: Sequence[str] | None, extra_columns: Sequence[str] = (), *,
                piece_rows: int = 1_000_000, categorical: Sequence[str] = (),
                vocabularies: Mapping[str, Sequence[Any]] | None = None) -> Columns:
        from exclust.sources.parquet import to_dask

        table, snapshot = self._snapshot()
        fs, root, files = snapshot_files(table, snapshot, self.spec, self.storage_options)
        source = table_source(self.spec, fs, root, files, self.storage_options)
        schema = table.schemas()[snapshot.schema_id] if snapshot.schema_id is not None else table.schema()
        where = f"Iceberg table {parse_address(self.spec)[2]} (snapshot {snapshot.snapshot_id})"
        planned = plan_table(source, files, schema.as_arrow(), [], where, features, extra_columns, piece_rows,
                             categorical, vocabularies)
        X, extras, categories = to_dask(planned)
        return Columns(X, planned.features, extras, categories)

    def label_files(self):
        """The snapshot's data files at their paths under the table's location."""
        table, snapshot = self._snapshot()
        fs, root, files = snapshot_files(table, snapshot, self.spec, self.storage_options)
        return table_source(self.spec, fs, root, files, self.storage_options)

    def guards(self) -> list:
        table = load_catalog_table(self.spec, self.storage_options)
        return input_guards(table.location(), storage_options=self.storage_options)

    def describe(self) -> str:
        snapshot = ("" if not self.options else
                    f" at snapshot {self.options['table_version']}" if "table_version" in self.options
                    else f" as of {self.options['as_of']}")
        return f"Iceberg table {self.spec}{snapshot}"
