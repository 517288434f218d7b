"""Apply a saved tree to an input: the labelling job's work (``label_run.run_label`` runs it).

The input is any registered source (``sources.base.open_source``: Parquet files, a Delta or
Iceberg table, a plugin source). A source of Parquet files (``DataSource.label_files``) has each
input file become one output file at the same path relative to the input root (so files of the
same name in different folders never collide, and rows out equal rows in), with every input column
plus a cluster column and a leaf column; any other source has each part of its columns (the tree's)
become one output file ``part-NNNNN.parquet``. Inputs and outputs are local folders or object
store prefixes (``s3://``), opened through fsspec. Each file or part is one task of the data plane
(``dataplane.tasks.run_tasks``: one Dask task each when a client is active; workers must reach
the input and output); each task returns only its counts. A category column is encoded with the tree's
vocabulary (``sources.categories.encode_categories``); a missing value (null, NaN) and a category the tree
never saw go to each cut's missing side, and the unseen values are counted per column. A row gets cluster -1
and leaf -1 only when a feature is infinite, or when a missing value meets a cut that learned no side (a
tree written before issue 28). Output goes through ``exclust.outputs.staging``: whole or nothing, never over
what the run reads.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from exclust.dataplane import parts
from exclust.dataplane.tasks import run_tasks
from exclust.errors import InputError
from exclust.outputs.folders import check_output, json_text
from exclust.outputs.staging import StagedOutput, StagingArea, staged_output
from exclust.scoring.drift import leaf_drift
from exclust.sources.base import Columns, open_source
from exclust.sources.categories import UNSEEN_CATEGORY, encode_categories
from exclust.sources.guards import Guard, file_folder_guard
from exclust.sources.storage import Source, SourceFile, filesystem
from exclust.tree import ThresholdTree

UNLABELLED = parts.UNLABELLED
LABELS_FILE = "_labels.json"


@dataclass
class LabelResult:
    """What a labelling run wrote: the folder, files, rows, rows per cluster and leaf, drift."""

    out: Path | str
    n_files: int
    n_rows: int
    counts: dict[int, int] = field(default_factory=dict)  # cluster -> rows; -1 = not labelled
    seconds: float = 0.0
    leaf_counts: dict[int, int] = field(default_factory=dict)  # leaf id -> rows; -1 = not labelled
    drift: dict | None = None  # exclust.scoring.drift.leaf_drift; None when the tree stores no leaf shares
    unseen_categories: dict[str, int] = field(default_factory=dict)  # column -> rows whose category the tree never saw

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "n_files": self.n_files,
            "n_rows": self.n_rows,
            "rows_per_cluster": {str(k): v for k, v in sorted(self.counts.items())},
            "rows_per_leaf": {str(k): v for k, v in sorted(self.leaf_counts.items())},
            "drift": self.drift,
            "unseen_categories": dict(sorted(self.unseen_categories.items())),
            "seconds": round(self.seconds, 3),
        }


def category_codes(column, vocabulary: Sequence[Any]) -> np.ndarray:
    """A category column (text, dictionary, boolean or integer Arrow array) as the float64 codes of ``vocabulary``:
    its distinct values encoded once (``encode_categories``), null -> NaN, unseen -> ``UNSEEN_CATEGORY``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    encoded = pc.dictionary_encode(column, null_encoding="mask")
    codes_of_values = np.append(encode_categories(encoded.dictionary.to_pylist(), vocabulary), np.nan)
    indices = encoded.indices.fill_null(len(encoded.dictionary)).to_numpy(zero_copy_only=False)
    return codes_of_values[indices.astype(np.int64)]


def label_table(tree: ThresholdTree, table, cluster_column: str = "cluster", leaf_column: str = "leaf",
                unseen: dict[str, int] | None = None):
    """A pyarrow table with the tree's cluster and leaf of every row appended; a category column is encoded with
    the tree's vocabulary, and the rows whose category it never saw are added per column to ``unseen``."""
    import pyarrow as pa

    cavs = tree.meta.get("concept_activation_vectors")
    # A Concept-MMDT tree cuts concept coordinates: read its embedding columns and project them.
    columns = tree_columns(tree)
    check_label_schema(tree, table.schema, cluster_column, leaf_column)
    vocabularies = category_columns(tree)
    X = np.empty((table.num_rows, len(columns)), dtype=np.float64)
    for j, name in enumerate(columns):
        col = table.column(name)
        if name in vocabularies:
            X[:, j] = category_codes(col, vocabularies[name])
            if unseen is not None:
                unseen[name] = unseen.get(name, 0) + int((X[:, j] == UNSEEN_CATEGORY).sum())
            continue
        # Nulls become NaN: missing values, routed to each cut's missing side.
        X[:, j] = col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    if cavs:
        matrix = np.asarray(cavs["matrix"], dtype=np.float64)
        if matrix.shape != (tree.n_features, X.shape[1]):
            raise InputError(
                f"the tree's concept vectors have shape {matrix.shape}, which does not fit "
                f"{tree.n_features} concepts over {X.shape[1]} embedding columns"
            )
        X = X @ matrix.T
    leaves = tree.apply(X)  # UNLABELLED for a row holding inf, or NaN at a cut with no missing side
    clusters = np.where(leaves >= 0, tree.value[np.maximum(leaves, 0)], UNLABELLED).astype(np.int32)
    return table.append_column(cluster_column, pa.array(clusters)).append_column(
        leaf_column, pa.array(leaves.astype(np.int32))
    )


def check_label_schema(tree: ThresholdTree, schema, cluster_column: str = "cluster", leaf_column: str = "leaf",
                       from_path: Sequence[str] = ()) -> None:
    """InputError unless data of this Arrow ``schema`` can be labelled with ``tree``: every column the
    tree reads present (or among the hive keys ``from_path``) and numeric (a category feature's column: text,
    dictionary, boolean or integer), no column named like an output column. Planning checks every file's footer
    with it; ``label_table`` checks each table read."""
    import pyarrow as pa

    vocabularies = category_columns(tree)

    names = schema.names
    missing = [c for c in tree_columns(tree) if c not in names and c not in from_path]
    if missing:
        raise InputError(
            f"columns {missing} used by the tree are missing (the data has {names}); "
            "label data with the columns the tree was built on, or use the tree built for this data"
        )
    for name in (cluster_column, leaf_column):
        if name in names:
            raise InputError(f"the input already has a column '{name}'; choose another name for the output column")
    for name in tree_columns(tree):
        if name not in names:
            continue
        t = schema.field(name).type
        if name in vocabularies:
            value_type = t.value_type if pa.types.is_dictionary(t) else t
            if not (pa.types.is_string(value_type) or pa.types.is_large_string(value_type)
                    or pa.types.is_integer(value_type) or pa.types.is_boolean(value_type)):
                raise InputError(f"column '{name}' has type {t}, but the tree cuts it as a category (values "
                                 f"{_vocabulary_words(vocabularies[name])}); label data whose column holds them")
            continue
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            raise InputError(f"column '{name}' has type {t}, but the tree cuts it as a number; "
                             "label data whose column holds numbers")


def check_label_inputs(tree: ThresholdTree, source: Source, cluster_column: str = "cluster",
                       leaf_column: str = "leaf") -> None:
    """Every file of ``source`` checked against the tree from its footer (one read each, as explain's
    planning does), so that a user error fails the run before any task reaches a worker."""
    from exclust.sources.parquet import read_footers

    needed = tree_columns(tree)
    for file, meta in zip(source.files, read_footers(source), strict=True):
        schema = meta.schema.to_arrow_schema()
        from_path = [key for key, _ in file.partitions if key in needed and key not in schema.names]
        try:
            check_label_schema(tree, schema, cluster_column, leaf_column, from_path)
        except InputError as exc:
            raise InputError(f"{source.display(file)}: {exc}") from None
        for key, value in file.partitions:
            if key in from_path and key not in category_columns(tree):
                _partition_number(file, key, value)  # names the file itself


def _partition_number(file: SourceFile, key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InputError(f"{file.path}: partition {key}={value} is not a number, but the tree cuts {key}; "
                         "label data whose partition values are numbers") from None


def category_columns(tree: ThresholdTree) -> dict[str, list[Any]]:
    """The tree's category features by column name, each with its vocabulary (values in code order)."""
    if tree.meta.get("concept_activation_vectors"):
        return {}
    return {tree.feature_names[f]: values for f, values in tree.categories.items()}


def _vocabulary_words(values: Sequence[Any]) -> str:
    from exclust.tree.style import category_set_text

    return category_set_text(values, head=6)


def tree_columns(tree: ThresholdTree) -> list[str]:
    """The input columns a tree reads (a Concept-MMDT tree reads its embedding columns)."""
    if tree.meta.get("concept_activation_vectors"):
        return list(tree.meta.get("embedding_features") or [])
    return list(tree.feature_names)


def _with_partition_columns(table, file: SourceFile, needed: Sequence[str],
                            vocabularies: Mapping[str, Sequence[Any]]):
    """``table`` plus the hive keys the tree reads that the file does not hold (as numbers; a category key as its
    value, read as the vocabulary's kind), and their names."""
    import pyarrow as pa

    added = []
    for key, value in file.partitions:
        if key in needed and key not in table.column_names:
            if key in vocabularies:
                table = table.append_column(key, pa.array([_as_vocabulary_kind(value, vocabularies[key])]
                                                          * table.num_rows))
            else:
                number = _partition_number(file, key, value)
                table = table.append_column(key, pa.array(np.full(table.num_rows, number)))
            added.append(key)
    return table, added


def _as_vocabulary_kind(text: str, vocabulary: Sequence[Any]) -> Any:
    """A hive key's text as a value of the vocabulary's kind: a whole number or a boolean where the vocabulary
    holds those (else the text, which then is a category the tree never saw)."""
    kind = type(vocabulary[0])
    if kind is bool and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind is int and text.lstrip("-").isdigit():
        return int(text)
    return text


def read_and_label(tree: ThresholdTree, fs: Any, file: SourceFile, cluster_column: str, leaf_column: str,
                   unseen: dict[str, int] | None = None):
    """One input file read whole and labelled: its columns plus the cluster and leaf columns (unseen categories
    counted into ``unseen``)."""
    import pyarrow.parquet as pq

    try:
        with fs.open(file.path, "rb") as f:
            table = pq.read_table(f)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputError(f"cannot read Parquet file {file.path}: {exc}; replace or remove that file") from exc
    table, added = _with_partition_columns(table, file, tree_columns(tree), category_columns(tree))
    try:
        out = label_table(tree, table, cluster_column, leaf_column, unseen)
    except InputError as exc:
        raise InputError(f"{file.path}: {exc}") from exc
    return out.drop_columns(added)


def _label_file(tree_doc: dict, fs: Any, file: SourceFile, area: StagingArea, run_id: str,
                cluster_column: str, leaf_column: str) -> dict[str, Any]:
    """One task: read a file, label it, write it below the staging root; return its counts."""
    unseen: dict[str, int] = {}
    out = read_and_label(ThresholdTree.from_dict(tree_doc), fs, file, cluster_column, leaf_column, unseen)
    return {**_write_labelled(out, area, file.relpath, cluster_column, leaf_column), "unseen": unseen}


def _label_part(tree_doc: dict, block: Any, names: list[str], area: StagingArea, relpath: str,
                cluster_column: str, leaf_column: str, decode: dict[str, list] | None = None) -> dict[str, Any]:
    """One task: a part of a source's columns (computed where the task runs) labelled and written
    below the staging root as ``relpath``; return its counts. ``decode``: the source's vocabulary of each category
    column it handed over as codes; the codes become its values again, which ``label_table`` encodes with the
    tree's vocabulary (a missing code, NaN or negative, a null)."""
    import pyarrow as pa

    block = np.asarray(block, dtype=np.float64).reshape(-1, len(names))
    columns: dict[str, Any] = {name: block[:, j] for j, name in enumerate(names)}
    for name, vocabulary in (decode or {}).items():
        codes = columns[name]
        known = np.isfinite(codes) & (codes >= 0) & (codes < len(vocabulary))
        index = np.where(known, np.where(known, codes, 0).astype(np.int64), len(vocabulary))
        columns[name] = pa.array(np.asarray(list(vocabulary) + [None], dtype=object)[index].tolist())
    table = pa.table(columns)
    tree = ThresholdTree.from_dict(tree_doc)
    unseen: dict[str, int] = {}
    out = label_table(tree, table, cluster_column, leaf_column, unseen)
    return {**_write_labelled(out, area, relpath, cluster_column, leaf_column), "unseen": unseen}


def _write_labelled(out, area: StagingArea, relpath: str, cluster_column: str, leaf_column: str) -> dict[str, Any]:
    import pyarrow.parquet as pq

    with area.open_write(relpath) as f:
        pq.write_table(out, f)
    return {"relpath": relpath, "rows": out.num_rows, "clusters": _value_counts(out.column(cluster_column)),
            "leaves": _value_counts(out.column(leaf_column))}


def _value_counts(column) -> dict[int, int]:
    values, counts = np.unique(column.to_numpy(), return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts, strict=True)}


@dataclass
class LabelPlan:
    """A checked labelling run: the tree, the input (its listed files, or its planned columns) and
    the output, before any work."""

    tree: ThresholdTree
    source: Source | None  # the input's Parquet files (DataSource.label_files), or None: ``columns``
    out: str
    guards: list[Guard]
    storage_options: dict[str, Any]
    base: str | os.PathLike | None
    cluster_column: str = "cluster"
    leaf_column: str = "leaf"
    columns: Columns | None = None  # a source that is not files: the tree's columns, labelled part by part
    url: str = ""  # how ``_labels.json`` names the input


def load_tree(tree: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> ThresholdTree:
    """A tree.json from a local path or a URL; InputError when it is not there, TreeFormatError (one line naming
    the file and the fault) when it is not a valid tree (``ThresholdTree.from_file_bytes``)."""
    from exclust.tree.file_format import MAX_TREE_FILE_BYTES

    fs, path = filesystem(str(tree), storage_options)
    if not fs.isfile(path):
        raise InputError(f"tree file not found: {tree}; give the tree.json that exclust explain wrote")
    if fs.size(path) > MAX_TREE_FILE_BYTES:  # not read whole to be refused
        return ThresholdTree.from_file_bytes(fs.cat_file(path, start=0, end=MAX_TREE_FILE_BYTES + 1), str(tree))
    return ThresholdTree.from_file_bytes(fs.cat_file(path), str(tree))


def plan_label(tree: ThresholdTree | str | os.PathLike, source: Any, out: str | os.PathLike, *,
               storage_options: Mapping[str, Any] | None = None, base: str | os.PathLike | None = None,
               cluster_column: str = "cluster", leaf_column: str = "leaf",
               source_options: Mapping[str, Any] | None = None) -> LabelPlan:
    """Every check that needs no computing: tree, the input (any registered source, opened by
    ``open_source``; ``source_options`` such as a table's snapshot) listed or planned, every file's
    schema against the tree (from the footers), output location (raises InputError)."""
    options = dict(storage_options or {})
    tree_guards: list[Guard] = []
    if not isinstance(tree, ThresholdTree):
        tree_guards.append(file_folder_guard(tree, "the tree file", options))
        tree = load_tree(tree, options)
    opened = open_source(source, options, source_options)
    listed = opened.label_files()
    guards = opened.guards() + tree_guards
    check_output(out, "label", guards, storage_options=options, base=base)
    if listed is not None:
        check_label_inputs(tree, listed, cluster_column, leaf_column)
        return LabelPlan(tree, listed, str(out), guards, options, base, cluster_column, leaf_column, url=listed.url)
    planned = opened.columns(tree_columns(tree))
    check_label_schema(tree, _float_schema(planned.feature_names, source_vocabularies(tree, planned)), cluster_column,
                       leaf_column)
    return LabelPlan(tree, None, str(out), guards, options, base, cluster_column, leaf_column, planned,
                     opened.describe())


def _float_schema(names: Sequence[str], decoded: Mapping[str, list]):
    """The schema of the tables ``_label_part`` labels: numbers, and a category column's values decoded."""
    import pyarrow as pa

    return pa.schema([(name, pa.array(decoded[name]).type if name in decoded else pa.float64()) for name in names])


def label_tasks(plan: LabelPlan, area: StagingArea, run_id: str, cluster_column: str, leaf_column: str):
    """The run's tasks, as (function, argument tuples): one per input file, or one per part of the
    planned columns (a lazy part is read where its task runs)."""
    tree_doc = plan.tree.to_dict()
    if plan.source is not None:
        return _label_file, [(tree_doc, plan.source.fs, f, area, run_id, cluster_column, leaf_column)
                             for f in plan.source.files]
    assert plan.columns is not None  # planned when the source is not files
    X, names = plan.columns.X, list(plan.columns.feature_names)
    decode = source_vocabularies(plan.tree, plan.columns)
    if parts.is_lazy(X):
        blocks = list(parts.one_column_chunk(X).to_delayed().ravel())
    else:
        bounds = parts.row_offsets(X)
        blocks = [X[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
    return _label_part, [(tree_doc, block, names, area, f"part-{i:05d}.parquet", cluster_column, leaf_column,
                          decode) for i, block in enumerate(blocks)]


def source_vocabularies(tree: ThresholdTree, columns: Columns) -> dict[str, list]:
    """The vocabularies of the tree's category columns that a source handed over as codes (``Columns.categories``:
    its own codes, which the labelling turns back into values before encoding them with the tree's)."""
    held = columns.categories or {}
    return {name: list(held[name]) for name in category_columns(tree) if name in held}


def label_planned(plan: LabelPlan, *, cluster_column: str | None = None, leaf_column: str | None = None) -> LabelResult:
    """Label every file (or part) of the plan (output columns: the plan's unless given) and commit the
    output whole (see ``exclust.outputs.staging``)."""
    cluster_column = cluster_column or plan.cluster_column
    leaf_column = leaf_column or plan.leaf_column
    start = time.perf_counter()
    with staged_output(plan.out, "label", plan.guards, storage_options=plan.storage_options, base=plan.base) as stage:
        fn, args = label_tasks(plan, stage.area, stage.run_id, cluster_column, leaf_column)
        per_file = run_tasks(fn, args, stage.run_id)
        result = _collect(stage, per_file, plan.tree)
        result.seconds = time.perf_counter() - start
        stage.write_text(LABELS_FILE, json_text({**result.to_dict(), "tree": plan.tree.meta, "source": plan.url}))
    result.seconds = time.perf_counter() - start
    return result


def _collect(stage: StagedOutput, per_file: list[dict], tree: ThresholdTree) -> LabelResult:
    for part in per_file:
        stage.record_rows(part["relpath"], part["rows"])
    return tally(per_file, tree, stage.target.shown)


def tally(per_file: list[dict], tree: ThresholdTree, out: Any) -> LabelResult:
    """The run's result from its tasks' counts: rows per cluster and leaf, drift against the tree's shares."""
    counts: dict[int, int] = {}
    leaf_counts: dict[int, int] = {}
    unseen = {name: 0 for name in category_columns(tree)}
    for part in per_file:
        for name, n in part.get("unseen", {}).items():
            unseen[name] = unseen.get(name, 0) + n
        for c, n in part["clusters"].items():
            counts[c] = counts.get(c, 0) + n
        for leaf, n in part["leaves"].items():
            leaf_counts[leaf] = leaf_counts.get(leaf, 0) + n
    drift = leaf_drift(tree.meta, {k: v for k, v in leaf_counts.items() if k >= 0})
    return LabelResult(out, len(per_file), sum(p["rows"] for p in per_file), counts,
                       leaf_counts=leaf_counts, drift=drift, unseen_categories=unseen)


def label_parquet(
    tree: ThresholdTree | str | os.PathLike,
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    cluster_column: str = "cluster",
    leaf_column: str = "leaf",
    base: str | os.PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
    source_options: Mapping[str, Any] | None = None,
) -> LabelResult:
    """Label ``source`` with ``tree`` and write it under ``out``, whole or not at all.

    ``tree`` is a ThresholdTree or the path/URL of a ``tree.json``; ``source`` is anything a registered
    source reads (a Parquet file, folder or glob, a Delta table, an Iceberg address, a plugin's input;
    ``source_options``: a table's snapshot) and ``out`` a local path or URL (``s3://``), with
    ``storage_options`` for both. Runs on the current Dask client when one is active (one task per
    file or part), else one after the other in this process.
    """
    plan = plan_label(tree, source, out, storage_options=storage_options, base=base,
                      cluster_column=cluster_column, leaf_column=leaf_column, source_options=source_options)
    return label_planned(plan)
