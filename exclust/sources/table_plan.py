"""Planning a table snapshot's read (Delta Lake, Iceberg) from its metadata alone.

A snapshot of a table is a list of live Parquet files, each with its row count, its partition
values and, usually, per-column min/max, all written by the table's log or manifests. That is
everything the Parquet reader needs: the files become ``Segment``s (whole files, row counts from
the metadata, the recorded min/max as the corruption check's bounds), packed in order into
pieces of up to ``piece_rows`` rows, and read on the workers by ``parquet_reader.read_piece``
like any Parquet piece. No file is opened to plan: files the table removed, and files of writes
that never committed, are not in the list and so are never read.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from exclust.errors import InputError
from exclust.sources.categories import arrow_category_type
from exclust.sources.parquet import (
    HIVE_NULL,
    Plan,
    check_columns,
    numeric_type,
    partition_category,
    partition_codes,
    plan_categories,
)
from exclust.sources.parquet_reader import Piece, Segment
from exclust.sources.storage import Source, SourceFile


@dataclass(frozen=True)
class TableFile:
    """One live data file of a snapshot, as the table's metadata records it."""

    path: str  # as the filesystem names it (for s3: "bucket/key")
    relpath: str  # relative to the table's root
    n_rows: int
    partitions: Mapping[str, Any] = field(default_factory=dict)  # partition column -> value (None: null)
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # column -> recorded (min, max)


def partition_text(value: Any) -> str:
    """A partition value as a hive folder would spell it (what ``parquet.partition_codes`` reads)."""
    if value is None:
        return HIVE_NULL
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def plain_bound(value: Any) -> float | None:
    """A recorded min or max as a float, when it is a plain finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def table_source(url: str, fs: Any, root: str, files: Sequence[TableFile],
                 storage_options: Mapping[str, Any] | None = None) -> Source:
    """The snapshot's files as a listed ``Source`` (what the Parquet planner and reader take)."""
    listed = [SourceFile(f.path, f.relpath, tuple((k, partition_text(v)) for k, v in f.partitions.items()))
              for f in files]
    return Source(url, fs, root, listed, dict(storage_options or {}))


def plan_table(source: Source, files: Sequence[TableFile], schema, partition_keys: Sequence[str], where: str,
               features: Sequence[str] | None, extra_columns: Sequence[str] = (),
               piece_rows: int = 1_000_000, categorical: Sequence[str] = (),
               vocabularies: Mapping[str, Sequence[Any]] | None = None) -> Plan:
    """Check the requested columns against the snapshot's ``schema`` (a pyarrow schema holding the
    partition columns too) and pack the files into pieces; ``where`` names the snapshot in messages."""
    extras = list(dict.fromkeys(c for c in extra_columns if c))
    keys = set(partition_keys)
    file_schema = _without(schema, keys)
    if features is None:
        features = [n for n in file_schema.names if n not in extras and numeric_type(file_schema.field(n).type)]
    features = list(features)
    if not features:
        raise InputError(f"no numeric feature columns in {where}; columns are {schema.names}")
    unknown = [c for c in [*features, *extras] if c not in schema.names]
    if unknown:
        raise InputError(f"unknown column(s) {unknown} in {where}; available columns: {schema.names}")
    string_extras: dict[str, str] = {}
    kinds: dict[str, str] = {}
    check_columns(file_schema, where, features, extras, keys, string_extras, categorical, kinds)
    partition_columns = [c for c in dict.fromkeys([*features, *extras]) if c in keys]
    categories: dict[str, list[Any]] = {}
    per_key = []
    import pyarrow.types as pat

    for key in partition_columns:
        key_type = schema.field(key).type
        text = arrow_category_type(key_type) and not pat.is_boolean(key_type)
        if key in features and not (numeric_type(key_type) or text):
            raise InputError(f"partition column '{key}' of {where} holds {key_type} values; it can "
                             "be a label column but not a feature")
        codes, cats = partition_codes(source, key)
        if cats is not None:
            if key in features:  # a category feature: its values are known from the table's metadata
                codes, cats = partition_category(source, key, where, vocabularies)
                kinds[key] = "category"
            categories[key] = cats
        per_key.append(codes)
    coded, gathered = plan_categories(kinds, features, categories, vocabularies)
    file_columns = [c for c in dict.fromkeys([*features, *extras]) if c not in keys]
    segments = []
    for i, (listed, f) in enumerate(zip(source.files, files, strict=True)):
        if f.n_rows:
            bounds = tuple(f.bounds.get(c) for c in file_columns)
            segments.append(Segment(listed.path, source.display(listed), (), int(f.n_rows),
                                    tuple(codes[i] for codes in per_key), True, bounds))
    pieces = pack_files(segments, piece_rows)
    if not pieces:
        raise InputError(f"no rows in {where}")
    text_extras = [c for c, kind in string_extras.items() if kind == "string" and c not in gathered]
    string_file_columns = [*gathered, *text_extras]
    return Plan(source, pieces, features, extras, file_columns, partition_columns, categories, string_file_columns,
                category_features=tuple(coded), where=where)


def pack_files(segments: Sequence[Segment], piece_rows: int) -> list[Piece]:
    """Whole files in order, packed into pieces of at most ``piece_rows`` rows (a larger file alone)."""
    pieces: list[Piece] = []
    current: list[Segment] = []
    rows = 0
    for seg in segments:
        if current and rows + seg.n_rows > piece_rows:
            pieces.append(Piece(tuple(current)))
            current, rows = [], 0
        current.append(seg)
        rows += seg.n_rows
    if current:
        pieces.append(Piece(tuple(current)))
    return pieces


def _without(schema, names: set[str]):
    import pyarrow as pa

    return pa.schema([f for f in schema if f.name not in names])
