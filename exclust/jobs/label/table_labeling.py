"""Labelling a night into a lake table: one Dask task per input file writes its labelled rows into
the table's location, and the driver commits them as the night's partition in one commit through
the table format's ``TableNight`` (``exclust.outputs.lake_table``: Delta, Iceberg). The input is any
registered source of Parquet files (``DataSource.label_files``), read as for folder outputs
(``labeling.read_and_label``); the rows are the same, only the commit differs. The tasks are the
data plane's (``dataplane.tasks.run_tasks``).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any

from exclust.dataplane.tasks import run_tasks
from exclust.errors import InputError
from exclust.jobs.label.labeling import LabelResult, load_tree, read_and_label, tally
from exclust.outputs.folders import json_text
from exclust.outputs.lake_table import TABLE_FORMATS, open_night, table_format_of
from exclust.sources.base import open_source
from exclust.sources.guards import file_folder_guard
from exclust.sources.storage import SourceFile
from exclust.tree import ThresholdTree

DEFAULT_DATE_COLUMN = "date"


def _label_file_into(tree_doc: dict, fs: Any, file: SourceFile, out_fs: Any, out_path: str, relpath: str,
                     run_id: str, cluster_column: str, leaf_column: str, date_column: str,
                     day_in_file: date | None, stats_of: Callable[[Any], Any] | None) -> dict[str, Any]:
    """One task: label one input file and write it at ``out_path`` in the table's location (with the date
    column ``day_in_file`` when the format's files hold it); return its commit's facts (``stats_of``'s
    statistics of the file when the format records them) and its counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from exclust.jobs.label.labeling import _value_counts

    unseen: dict[str, int] = {}
    out = read_and_label(ThresholdTree.from_dict(tree_doc), fs, file, cluster_column, leaf_column, unseen)
    if date_column in out.column_names:
        raise InputError(f"the labelled data already has a column '{date_column}'; name the table's date "
                         "column otherwise with --date-column")
    if day_in_file is not None:
        out = out.append_column(pa.field(date_column, pa.date32()), pa.array([day_in_file] * out.num_rows,
                                                                              pa.date32()))
    out_fs.makedirs(out_path.rsplit("/", 1)[0], exist_ok=True)
    with out_fs.open(out_path, "wb") as f:
        pq.write_table(out, f)
    return {"relpath": relpath, "rows": out.num_rows, "size": out_fs.size(out_path),
            "stats": None if stats_of is None else stats_of(out), "schema": out.schema,
            "clusters": _value_counts(out.column(cluster_column)), "leaves": _value_counts(out.column(leaf_column)),
            "unseen": unseen}


def output_table_format(out: str | os.PathLike, requested: str | None,
                        storage_options: Mapping[str, Any] | None = None) -> str | None:
    """The table format ``out`` is written in: the one asked for ("folder" for none), else the format
    its address names (an Iceberg address, a Delta table already), else None (a folder of Parquet files)."""
    found = table_format_of(out, storage_options)
    if requested in (None, "auto"):
        return found
    if requested != "folder" and requested not in TABLE_FORMATS:
        raise InputError(f"output format must be folder or {', '.join(TABLE_FORMATS)}, not {requested!r}")
    if found is not None and found != requested:
        raise InputError(f"output {out} is a {found} table, not a {requested} output; drop --out-format (auto) or "
                         f"give it as {found}")
    return None if requested == "folder" else requested


def label_night_into_table(
    tree: ThresholdTree | str | os.PathLike, source: str | os.PathLike, out: str | os.PathLike, day: date, *,
    table_format: str = "delta", date_column: str = DEFAULT_DATE_COLUMN, cluster_column: str = "cluster",
    leaf_column: str = "leaf", storage_options: Mapping[str, Any] | None = None,
    before_commit: Callable[[], None] | None = None,
) -> LabelResult:
    """Label ``source`` (one night's Parquet files) with ``tree`` into the table ``out`` as the
    partition ``date_column = day``, in one commit; a rerun of the night replaces it. Checks
    everything before any work. ``before_commit`` runs after the files are written, before the commit."""
    start = time.perf_counter()
    options = dict(storage_options or {})
    guards = []
    if not isinstance(tree, ThresholdTree):
        guards.append(file_folder_guard(tree, "the tree file", options))
        tree = load_tree(tree, options)
    opened = open_source(source, options)
    listed = opened.label_files()
    if listed is None:
        raise InputError(f"{opened.describe()} is read as {opened.kind}, not as Parquet files: a table output "
                         "takes each input file as a file of the night; label it into a folder instead")
    guards = opened.guards() + guards
    night = open_night(table_format, out, date_column, day, guards, options)
    tree_doc = tree.to_dict()
    try:
        args = []
        for i, f in enumerate(listed.files):
            relpath = night.file_relpath(i)
            args.append((tree_doc, listed.fs, f, night.fs, night.path(relpath), relpath, night.run_id,
                         cluster_column, leaf_column, date_column, day if night.file_holds_date else None,
                         night.file_stats))
        per_file = run_tasks(_label_file_into, args, night.run_id)
        for f, part in zip(listed.files, per_file, strict=True):
            if not part["schema"].equals(per_file[0]["schema"]):
                raise InputError(f"input file {listed.display(f)} labels into columns {part['schema']} unlike "
                                 f"{listed.display(listed.files[0])}'s {per_file[0]['schema']}; a night's files "
                                 "must hold the same columns and types")
        result = tally(per_file, tree, night.url)
        figures = json.loads(json_text({**result.to_dict(), "date": day.isoformat(), "tree": tree.meta,
                                        "source": listed.url}))
        if before_commit is not None:
            before_commit()
        night.commit(per_file, per_file[0]["schema"], figures)
    except BaseException:
        night.discard()
        raise
    result.seconds = time.perf_counter() - start
    return result
