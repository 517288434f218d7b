"""Parquet sources as lazy dask arrays: plan from the footers, read pieces on the workers.

Planning lists the source once (``exclust.sources.storage.list_source``) and reads every file's footer
once (in threads: on an object store each footer is one ranged request). The footers give the
row counts, so chunk sizes are known without a pass, and each file's schema, which is checked
against the requested columns before any work: a file lacking a column, or holding text where a
feature must be numeric, is named with the column. Numeric text is never converted.

Row groups are packed in order into pieces of up to ``piece_rows`` rows, one Dask task each; a
piece may span many small files, so 2,000 files of 10 rows cost about what 2 files of 10,000
do. The read tasks open files through the source's fsspec filesystem (it pickles, so workers
reach the same store with the same options) and check the decoded values against the min/max
the writer recorded in the footer: values outside that range mean damaged data pages, and the
file is named as corrupt instead of its garbage reaching the algorithms.

Hive partition keys (``day=3/part.parquet``) are columns too: integers when every value of a
key parses as one, otherwise strings, coded like string columns (codes in sorted order).
"""
from __future__ import annotations

import operator
import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np

from exclust.errors import InputError
from exclust.sources.base import Columns, DataSource
from exclust.sources.feature_choice import choose_features, footer_columns
from exclust.sources.guards import input_guards, validate_input_path
from exclust.sources.parquet_reader import Piece, Segment, piece_values, read_piece
from exclust.sources.storage import Source, SourceFile, list_source

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # how Hive and Spark write a missing partition value
_FOOTER_TAIL = 1 << 16  # bytes fetched from the end of a remote file: the footer in one request
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass
class Plan:
    """Everything the read tasks need, checked against every file's schema."""

    source: Source
    pieces: list[Piece]
    features: list[str]
    extra_columns: list[str]
    file_columns: list[str]  # requested columns read from the files (the others are partition keys)
    partition_columns: list[str]  # requested columns taken from the path, in Segment.constants order
    categories: dict[str, list[Any]]  # category and string columns -> sorted values (code = index)
    string_file_columns: list[str]  # category and string columns whose values need a pass to be known
    note: str | None = None  # columns the default features left out as label-like (feature_choice)
    category_features: tuple[str, ...] = ()  # features coded as categories (a null: NaN; exclust.sources.categories)
    where: str = ""  # how messages name the input

    @property
    def columns(self) -> list[str]:
        return [*self.features, *self.extra_columns]


# --------------------------------------------------------------------------- types
def numeric_type(arrow_type) -> bool:
    import pyarrow.types as pat

    return (pat.is_integer(arrow_type) or pat.is_floating(arrow_type) or pat.is_boolean(arrow_type)
            or pat.is_decimal(arrow_type))


def string_type(arrow_type) -> bool:
    import pyarrow.types as pat

    return pat.is_string(arrow_type) or pat.is_large_string(arrow_type) or pat.is_dictionary(arrow_type)


# --------------------------------------------------------------------------- footers
def _read_footer(fs, path: str, local: bool):
    import pyarrow as pa
    import pyarrow.parquet as pq

    if local:
        return pq.read_metadata(path)
    tail = fs.tail(path, _FOOTER_TAIL)
    footer_len = int.from_bytes(tail[-8:-4], "little") if len(tail) >= 8 else 0
    if len(tail) < footer_len + 8:  # a footer larger than the tail fetched: open the file
        with fs.open(path, "rb") as fh:
            return pq.read_metadata(fh)
    return pq.read_metadata(pa.BufferReader(tail))


def read_footers(source: Source) -> list[Any]:
    """Every file's FileMetaData, once each; on object stores in threads (latency-bound requests;
    local footers take a fraction of a millisecond, and threads only contend for the GIL)."""
    local = source.is_local

    def one(f: SourceFile):
        try:
            return _read_footer(source.fs, f.path, local)
        except Exception as exc:  # pyarrow and the stores raise many types for a damaged or vanished file
            raise InputError(f"cannot read the footer of Parquet file {source.display(f)}: {exc}; "
                             "the file is damaged or not Parquet: restore or rewrite it") from exc

    if local or len(source.files) == 1:
        return [one(f) for f in source.files]
    with ThreadPoolExecutor(max_workers=8 if local else 32) as pool:
        return list(pool.map(one, source.files))


# --------------------------------------------------------------------------- partitions
def _partition_values(source: Source, key: str) -> list[str | None]:
    values = []
    for f in source.files:
        parts = f.partition_dict
        if key not in parts:
            raise InputError(f"file {source.display(f)} is not under a {key}=... folder, unlike other files of "
                             f"{source.url}; move it into one or leave column '{key}' out")
        value = unquote(parts[key])
        values.append(None if value == HIVE_NULL else value)
    return values


def partition_codes(source: Source, key: str) -> tuple[list[float], list[str] | None]:
    """Per file, the value of partition key ``key`` as a number: the integer itself when every value
    is an integer, else the code of the string (categories returned, sorted)."""
    values = _partition_values(source, key)
    present = [v for v in values if v is not None]
    if all(_INTEGER.fullmatch(v) for v in present):
        return [float(int(v)) if v is not None else float("nan") for v in values], None
    categories = sorted(set(present))
    lookup = {v: float(i) for i, v in enumerate(categories)}
    return [lookup[v] if v is not None else -1.0 for v in values], categories


def partition_category(source: Source, key: str, where: str,
                       vocabularies: Mapping[str, Sequence[Any]] | None = None) -> tuple[list[float], list[Any]]:
    """Per file, the code of text partition key ``key`` as a category feature (a null: NaN), and
    its vocabulary: given (a fitted tree's), else the paths' values, sorted."""
    from exclust.sources.categories import checked_vocabulary, encode_categories

    values = _partition_values(source, key)
    vocabulary = (list(vocabularies[key]) if vocabularies is not None and key in vocabularies
                  else checked_vocabulary(key, [v for v in values if v is not None], where))
    return encode_categories(values, vocabulary).tolist(), vocabulary


# --------------------------------------------------------------------------- planning
def _check_schemas(source: Source, footers, features, extras, partition_keys,
                   categorical: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """Fail naming the first file and column that cannot serve; return the string extra columns
    and the kind of each file feature (``feature_kind``)."""
    string_extras: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for f, meta in zip(source.files, footers, strict=True):
        check_columns(meta.schema.to_arrow_schema(), f"Parquet file {source.display(f)}", features, extras,
                      partition_keys, string_extras, categorical, kinds)
    return [c for c, kind in string_extras.items() if kind == "string"], kinds


def feature_kind(name: str, arrow_type, categorical: Sequence[str] = ()) -> str | None:
    """How a feature column of ``arrow_type`` is read: "number", "category" (codes of its sorted
    values), "boolean" (codes False 0, True 1), or None when it cannot be a feature."""
    import pyarrow.types as pat

    from exclust.sources.categories import arrow_category_type, arrow_forcible_type

    if name in categorical and not arrow_forcible_type(arrow_type):
        raise InputError(f"column '{name}' is named as categorical but holds {arrow_type} values; integer, text and "
                         "boolean columns can be categories: leave it out of categorical")
    if pat.is_boolean(arrow_type):
        return "boolean"
    if arrow_category_type(arrow_type) or name in categorical:
        return "category"
    return "number" if numeric_type(arrow_type) else None


def check_columns(schema, where: str, features, extras, partition_keys, string_extras: dict[str, str],
                  categorical: Sequence[str] = (), kinds: dict[str, str] | None = None) -> None:
    """Fail naming ``where`` (a file, a table snapshot) and the first column of ``schema`` that
    cannot serve; ``string_extras`` collects each extra column's kind across calls, ``kinds``
    each feature's (``feature_kind``): a feature must keep its kind in every file."""
    kinds = {} if kinds is None else kinds
    names = schema.names
    for c in [*features, *extras]:
        if c in partition_keys:
            if c in names:
                raise InputError(f"column '{c}' is both a hive partition key ({c}=... in the path) and a column "
                                 f"of {where}; rename one of them")
            continue
        if c not in names:
            raise InputError(f"{where} lacks column '{c}' (it holds {names}); every file must hold "
                             "the requested columns: rewrite the file or leave the column out")
        t = schema.field(c).type
        kind = feature_kind(c, t, categorical) if c in features else None
        if c in features and kind is None:
            raise InputError(
                f"column '{c}' of {where} holds {t} values, not numbers or categories (text, booleans); exclust does "
                f"not convert them to numbers: write '{c}' as a numeric column or leave it out of the features"
            )
        if kind is not None and kinds.setdefault(c, kind) != kind:
            was = "numbers" if kinds[c] == "number" else "categories" if kinds[c] == "category" else "booleans"
            raise InputError(f"column '{c}' of {where} holds {t} values, not {was} as in earlier files; exclust does "
                             f"not convert text to numbers: write '{c}' with one type in every file")
        if c in extras and c not in features:
            kind = "string" if string_type(t) else "number" if numeric_type(t) else None
            if kind is None:
                raise InputError(f"column '{c}' of {where} has type {t}; use integer or string labels")
            first = string_extras.setdefault(c, kind)
            if first != kind:
                raise InputError(f"column '{c}' of {where} holds {kind}s but earlier files hold "
                                 f"{first}s; write it with one type in every file")


def _recorded_bounds(meta, columns: list[str], groups: list[int]) -> tuple[tuple[float, float] | None, ...]:
    """Per column, the min/max the writer recorded over ``groups`` (None when absent or not a plain
    integer/float column): what decoded values must stay within."""
    import pyarrow.types as pat

    schema = meta.schema.to_arrow_schema()
    flat = meta.num_columns == len(schema)  # nested schemas number their leaf columns differently
    out: list[tuple[float, float] | None] = []
    for name in columns:
        index = schema.get_field_index(name) if flat else -1
        if index < 0 or not (pat.is_integer(schema.field(index).type) or pat.is_floating(schema.field(index).type)):
            out.append(None)
            continue
        lows, highs = [], []
        for rg in groups:
            stats = meta.row_group(rg).column(index).statistics
            if stats is None or not stats.has_min_max or not isinstance(stats.min, (int, float)):
                break  # (float16 statistics come back as raw bytes: no bounds then)
            lows.append(float(stats.min))
            highs.append(float(stats.max))
        out.append((min(lows), max(highs)) if lows and len(lows) == len(groups) else None)
    return tuple(out)


def _pack(source: Source, footers, constants: list[tuple[float, ...]], file_columns: list[str],
          piece_rows: int) -> list[Piece]:
    """Row groups in file order, packed into pieces of at most ``piece_rows`` rows (a larger row group alone)."""
    pieces: list[Piece] = []
    current: list[Segment] = []
    rows = 0

    def close_segment(i: int, groups: list[tuple[int, int]]) -> None:
        if groups:
            f, meta = source.files[i], footers[i]
            numbers = [g for g, _ in groups]
            whole = len(groups) == sum(1 for rg in range(meta.num_row_groups) if meta.row_group(rg).num_rows)
            current.append(Segment(f.path, source.display(f), tuple(numbers), sum(n for _, n in groups),
                                   constants[i], whole, _recorded_bounds(meta, file_columns, numbers)))

    for i, meta in enumerate(footers):
        groups: list[tuple[int, int]] = []
        for rg in range(meta.num_row_groups):
            n = meta.row_group(rg).num_rows
            if n == 0:
                continue
            if rows and rows + n > piece_rows:
                close_segment(i, groups)
                pieces.append(Piece(tuple(current)))
                current, groups, rows = [], [], 0
            groups.append((rg, n))
            rows += n
        close_segment(i, groups)
    if current:
        pieces.append(Piece(tuple(current)))
    return pieces


def plan_categories(kinds: Mapping[str, str], features: Sequence[str], categories: dict[str, list[Any]],
                    vocabularies: Mapping[str, Sequence[Any]] | None) -> tuple[list[str], list[str]]:
    """Where each category feature's vocabulary comes from: given (``vocabularies``: a fitted
    tree's), fixed (booleans) or a pass over the data. Fills ``categories`` with those known
    now; returns (the category features, those whose values the pass gathers)."""
    from exclust.sources.categories import BOOLEAN_VOCABULARY

    coded = [c for c in features if kinds.get(c, "number") != "number"]
    gathered = []
    for c in coded:
        if vocabularies is not None and c in vocabularies:
            categories[c] = list(vocabularies[c])
        elif kinds[c] == "boolean":
            categories[c] = list(BOOLEAN_VOCABULARY)
        elif c not in categories:  # (a partition key's values are known from the paths)
            gathered.append(c)
    return coded, gathered


def plan(
    url: str | os.PathLike, features: Sequence[str] | None, extra_columns: Sequence[str] = (),
    piece_rows: int = 1_000_000, storage_options: Mapping[str, Any] | None = None,
    categorical: Sequence[str] = (), vocabularies: Mapping[str, Sequence[Any]] | None = None,
) -> Plan:
    """List, read footers, check every schema and pack the pieces; no data is read."""
    source = list_source(url, storage_options)
    footers = read_footers(source)
    extras = list(dict.fromkeys(c for c in extra_columns if c))
    partition_keys = set(source.partition_keys)
    first = footers[0].schema.to_arrow_schema()
    choice = None
    if features is None:
        choice = choose_features(footer_columns(first, footers, numeric_type), extras)
        features = choice.require(source.url, first.names)
    features = list(features)
    if not features:
        raise InputError(f"no numeric feature columns in {source.url}; columns are {first.names}")
    known = set(partition_keys).union(*(meta.schema.names for meta in footers))
    unknown = [c for c in [*features, *extras] if c not in known]  # in no file; in some: drift, named below
    if unknown:
        available = first.names + sorted(partition_keys - set(first.names))
        raise InputError(f"unknown column(s) {unknown} in {source.url}; available columns: {available}")
    string_extras, kinds = _check_schemas(source, footers, features, extras, partition_keys, categorical)
    partition_columns = [c for c in dict.fromkeys([*features, *extras]) if c in partition_keys]
    categories: dict[str, list[Any]] = {}
    per_key = []
    for key in partition_columns:
        codes, cats = partition_codes(source, key)
        if cats is not None:
            if key in features:  # a category feature: its values are known from the paths
                codes, cats = partition_category(source, key, source.url, vocabularies)
                kinds[key] = "category"
            categories[key] = cats
        per_key.append(codes)
    coded, gathered = plan_categories(kinds, features, categories, vocabularies)
    constants = [tuple(codes[i] for codes in per_key) for i in range(len(source.files))]
    file_columns = [c for c in dict.fromkeys([*features, *extras]) if c not in partition_keys]
    pieces = _pack(source, footers, constants, file_columns, piece_rows)
    if not pieces:
        raise InputError(f"no rows in {source.url}")
    return Plan(source, pieces, features, extras, file_columns, partition_columns, categories,
                [*gathered, *(c for c in string_extras if c not in gathered)], choice.note() if choice else None,
                tuple(coded), source.url)


def to_dask(plan_: Plan):
    """(X, extras, categories) as lazy dask arrays with known chunk sizes; one pass only for string labels."""
    import dask
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
    from dask.typing import Key

    fs, local = plan_.source.fs, plan_.source.is_local
    categories = dict(plan_.categories)
    if plan_.string_file_columns:  # one pass: each piece's distinct values of every such column
        from exclust.sources.categories import MAX_CATEGORIES, collect_vocabulary

        wanted = plan_.string_file_columns
        limits = [MAX_CATEGORIES if c in plan_.category_features else None for c in wanted]
        found = dask.compute(*[dask.delayed(piece_values)(fs, local, p, wanted, limits) for p in plan_.pieces])
        for i, c in enumerate(wanted):
            chunks = [per_piece[i] for per_piece in found]
            categories[c] = (collect_vocabulary(c, chunks, plan_.where or plan_.source.url)
                             if c in plan_.category_features else
                             sorted(set().union(*(values for values, _ in chunks))))
    columns = plan_.columns
    # One graph layer whose keys ARE the reads (no from_delayed wrappers, no concatenate): a
    # wrapper key could be fused differently in two graphs built from the same arrays, which the
    # scheduler reports as "different run_spec for key" (seen at 5M rows). Each read returns
    # (features, extras); X's blocks ARE the features blocks (picked out, not copied).
    d, e = len(plan_.features), len(columns) - len(plan_.features)
    tail = (columns, plan_.file_columns, plan_.partition_columns, categories, d)
    token = tokenize(plan_.source.url, plan_.source.root, plan_.pieces, tail)
    read, feats, rest = "read_piece-" + token, "piece-features-" + token, "piece-extras-" + token
    layers: dict[str, dict[Key, Any]] = {
        read: {(read, i): (read_piece, fs, local, p, *tail) for i, p in enumerate(plan_.pieces)},
        feats: {(feats, i, 0): (operator.getitem, (read, i), 0) for i in range(len(plan_.pieces))},
        rest: {(rest, i, 0): (operator.getitem, (read, i), 1) for i in range(len(plan_.pieces))},
    }
    graph = HighLevelGraph(layers, {read: set(), feats: {read}, rest: {read}})
    rows = tuple(int(p.n_rows) for p in plan_.pieces)
    X = da.Array(graph, feats, (rows, (d,)), dtype=np.float64)
    extras = da.Array(graph, rest, (rows, (e,)), dtype=np.float64)
    return X, {c: extras[:, i] for i, c in enumerate(plan_.extra_columns)}, categories


class ParquetSource(DataSource):
    """Parquet files: a file, a folder read recursively, a glob, or a ``file://`` / ``s3://`` URL
    (other fsspec schemes when their package is installed). The catch-all for paths: a more
    specific source registered later (a table format, say) is asked first."""

    kind = "Parquet"

    @classmethod
    def recognises(cls, spec: Any, storage_options: Mapping[str, Any] | None = None) -> bool:
        return isinstance(spec, (str, os.PathLike))

    def check(self) -> str:
        return validate_input_path(self.spec, self.storage_options)

    def columns(self, features: Sequence[str] | None, extra_columns: Sequence[str] = (), *,
                piece_rows: int = 1_000_000, categorical: Sequence[str] = (),
                vocabularies: Mapping[str, Sequence[Any]] | None = None) -> Columns:
        planned = plan(self.spec, features, extra_columns, piece_rows, self.storage_options, categorical, vocabularies)
        X, extras, categories = to_dask(planned)
        return Columns(X, planned.features, extras, categories, [planned.note] if planned.note else [])

    def guards(self) -> list:
        return input_guards(self.spec, getattr(self, "_listed", None), storage_options=self.storage_options)

    def label_files(self) -> Source:
        """The files of the folder, file or glob, listed once (``storage.list_source``)."""
        if getattr(self, "_listed", None) is None:
            self._listed = list_source(self.spec, self.storage_options)
        return self._listed
