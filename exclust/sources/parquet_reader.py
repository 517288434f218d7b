"""Reading a planned Parquet piece on a worker: its segments' row groups into row-major float64 blocks.

A piece (``Piece``: consecutive row groups of one or more files, planned by ``parquet.plan`` from
the footers) is one Dask task. Its read decodes the requested columns, codes string columns,
fills partition columns from the path, and checks the decoded values against the min/max the
writer recorded in the footer: values outside that range mean damaged data pages, and the file
is named as corrupt instead of its garbage reaching the algorithms. Workers import this module
and ``storage``, never the planning.
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from exclust.dataplane.residency import held_array
from exclust.errors import InputError


@dataclass(frozen=True)
class Segment:
    """Consecutive row groups of one file, with the values of its requested partition columns."""

    path: str
    url: str  # for messages
    row_groups: tuple[int, ...]  # () for every row group (a table's file, planned from its log, not its footer)
    n_rows: int
    constants: tuple[float, ...] = ()  # one per partition column requested, coded
    whole: bool = False  # every row group of the file: read with its neighbours in one dataset scan
    bounds: tuple[tuple[float, float] | None, ...] = ()  # per file column: the footer's min/max, if recorded


@dataclass(frozen=True)
class Piece:
    """The rows of one Dask task: one or more segments, read in order."""

    segments: tuple[Segment, ...]

    @property
    def n_rows(self) -> int:
        return sum(s.n_rows for s in self.segments)


@contextlib.contextmanager
def _open(fs, seg: Segment, local: bool):
    import pyarrow.parquet as pq

    with contextlib.ExitStack() as stack:
        try:
            handle = seg.path if local else stack.enter_context(fs.open(seg.path, "rb"))
            pf = stack.enter_context(pq.ParquetFile(handle))
        except Exception as exc:  # a file removed or damaged since planning
            raise InputError(f"cannot open Parquet file {seg.url}: {exc}; it was removed or damaged since the "
                             "run was planned") from exc
        yield pf


def _read_groups(pf, seg: Segment, columns: list[str]):
    return pf.read_row_groups(list(seg.row_groups), columns=columns) if seg.row_groups else pf.read(columns=columns)


def _read_segment(fs, local: bool, seg: Segment, columns: list[str]):
    with _open(fs, seg, local) as pf:
        try:
            table = _read_groups(pf, seg, columns)
        except Exception as exc:  # decoding errors of damaged pages come in several types
            raise InputError(f"Parquet file {seg.url} is corrupt: {exc}; restore the file from its source or "
                             "rewrite it") from exc
    if table.num_rows != seg.n_rows:
        raise InputError(f"Parquet file {seg.url} changed since the run was planned ({table.num_rows} rows, "
                         f"its footer said {seg.n_rows}); rerun on a stable input")
    return table


def _read_whole_files(fs, local: bool, segments: Sequence[Segment], columns: list[str]):
    """Many whole files in one pyarrow dataset scan (C++ threads, rows in file order); any failure
    is left to the file-by-file reader, whose errors name the file."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    try:
        filesystem = None if local else pa.fs.PyFileSystem(pa.fs.FSSpecHandler(fs))
        table = pads.dataset([s.path for s in segments], format="parquet",
                             filesystem=filesystem).to_table(columns=columns)
        if table.num_rows == sum(s.n_rows for s in segments):
            return table
    except Exception:  # a damaged or changed file: read one by one to name it
        pass
    return pa.concat_tables([_read_segment(fs, local, s, columns) for s in segments], promote_options="permissive")


def _check_bounds(seg: Segment, name: str, values: np.ndarray, bounds: tuple[float, float] | None) -> None:
    """Decoded values outside the footer's recorded min/max mean damaged data pages."""
    if bounds is None or values.size == 0:
        return
    finite = values[np.isfinite(values)]
    if finite.size and (finite.min() < bounds[0] or finite.max() > bounds[1]):
        raise InputError(
            f"Parquet file {seg.url} is corrupt: column '{name}' decodes to values in [{finite.min():.4g}, "
            f"{finite.max():.4g}] but the file's footer records [{bounds[0]:.4g}, {bounds[1]:.4g}]; its data "
            "pages were damaged after writing: restore the file from its source or rewrite it"
        )


def _codes_of(column, categories: list, feature: bool) -> np.ndarray:
    """The codes of a category or string column (``exclust.sources.categories``): a feature's null
    is NaN (a missing value), a label column's null and unknown values are -1 (noise)."""
    from exclust.sources.categories import encode_categories

    codes = encode_categories(column, categories)
    return codes if feature else np.where(np.isnan(codes), -1.0, codes)


def _runs(segments: Sequence[Segment]) -> list[list[Segment]]:
    """Consecutive whole-file segments together; a part of a file alone."""
    runs: list[list[Segment]] = []
    for seg in segments:
        if seg.whole and runs and runs[-1][-1].whole:
            runs[-1].append(seg)
        else:
            runs.append([seg])
    return runs


def read_piece(fs, local: bool, piece: Piece, plan_columns: list[str], file_columns: list[str],
               partition_columns: list[str], categories: dict[str, list[str]],
               n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The float64 blocks of one piece, its segments in order (many small files in one scan):
    (the first ``n_features`` plan columns, the rest), each row-major: the features block is
    the one every pass reads, made once, never copied out of a wider block."""
    d = len(plan_columns) if n_features is None else int(n_features)
    blocks = (held_array((piece.n_rows, d), np.float64),
              held_array((piece.n_rows, len(plan_columns) - d), np.float64))
    where = [(blocks[0], j) if j < d else (blocks[1], j - d) for j in range(len(plan_columns))]
    row = 0
    for run in _runs(piece.segments):
        table = (_read_whole_files(fs, local, run, file_columns) if len(run) > 1
                 else _read_segment(fs, local, run[0], file_columns))
        # Each column as one contiguous float64 array (Arrow's own buffer when it can be): the
        # footer-range checks read contiguous memory, and the only new memory is ``blocks``.
        values = {}
        for j, name in enumerate(plan_columns):
            if name in partition_columns or table.num_rows == 0:
                continue
            col = table.column(name)
            values[name] = (_codes_of(col, categories[name], j < d) if name in categories
                            else np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64))
        start = 0
        for seg in run:
            _check_segment(seg, values, start, file_columns, categories)
            start += seg.n_rows
        _fill_rows(where, row, table.num_rows, plan_columns, values)
        for seg in run:
            for j, name in enumerate(plan_columns):
                if name in partition_columns:
                    block, k = where[j]
                    block[row:row + seg.n_rows, k] = seg.constants[partition_columns.index(name)]
            row += seg.n_rows
        del table, values
    return blocks


# Rows copied per tile: a tile of the row-major block (8192 x columns) stays in cache while each
# column is written into it, so the strided writes cost what contiguous ones do.
_TILE_ROWS = 8192


def _fill_rows(where: list, row: int, n_rows: int, plan_columns: list[str], values: dict) -> None:
    """Write the column arrays ``values`` into rows ``row .. row + n_rows`` of the row-major
    blocks; ``where[j]`` is (block, its column) of plan column j."""
    placed = [(where[j], values[name]) for j, name in enumerate(plan_columns) if name in values]
    for r0 in range(0, n_rows, _TILE_ROWS):
        r1 = min(n_rows, r0 + _TILE_ROWS)
        for (block, k), column in placed:
            block[row + r0:row + r1, k] = column[r0:r1]


def _check_segment(seg: Segment, values: dict, start: int, file_columns: list[str], categories) -> None:
    """The segment's decoded values must lie within its footer's min/max (else its pages are damaged)."""
    if seg.n_rows == 0:
        return
    for name, column in values.items():
        if name in categories:
            continue
        bounds = seg.bounds[file_columns.index(name)]
        part = column[start:start + seg.n_rows]
        # fmin/fmax skip NaN (checked later, by validation); only a column that seems out of its
        # footer's range is looked at closely.
        if bounds is not None and not (np.fmin.reduce(part) >= bounds[0] and np.fmax.reduce(part) <= bounds[1]):
            _check_bounds(seg, name, part, bounds)


def piece_values(fs, local: bool, piece: Piece, columns: list[str],
                 limits: Sequence[int | None]) -> list[tuple[list, int]]:
    """Per column, the distinct non-null values of one piece (sorted; at most ``limit + 1`` of a
    column with a limit, so that an id column does not travel whole) and their count: the
    vocabulary pass reads each segment once for every column."""
    from exclust.sources.categories import distinct_values

    found: list[set] = [set() for _ in columns]
    counts = [0] * len(columns)
    for seg in piece.segments:
        with _open(fs, seg, local) as pf:
            table = _read_groups(pf, seg, columns)
        for i, column in enumerate(columns):
            limit = limits[i]
            values, count = distinct_values(table.column(column), limit if limit is not None else 1 << 62)
            found[i].update(values)
            counts[i] = max(counts[i], count, len(found[i]))
    return [(sorted(f), n) for f, n in zip(found, counts, strict=True)]
