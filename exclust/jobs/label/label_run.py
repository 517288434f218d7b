"""The labelling job as every way of starting it runs it: ``run_label``, for the CLI and the flow.

One call checks everything that needs no computing before a Dask cluster starts (the tree file,
the paths' ``{date}`` templates, the output table's format; for undated paths also the input,
through ``open_source``, and the output), opens the cluster, and labels:

- undated paths: one labelling (``labeling.plan_label`` / ``label_planned``), timed as the step
  ``label`` of the run's ``RunContext``;
- by date (``dates``, or ``{date}`` in the paths, or a table output): each date one after another
  (``nightly.label_date``: a folder per date, or one commit of a table's date partition), each
  handed to ``on_night`` as it ends; ``wrap`` makes each date a unit of its caller (the flow: a
  Prefect task).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from exclust.dataplane.cluster import dask_cluster
from exclust.dataplane.progress import Log
from exclust.dataplane.run_context import RunContext
from exclust.jobs.label.labeling import label_planned, load_tree, plan_label
from exclust.jobs.label.nightly import NightOutcome, check_templates, has_date, label_date
from exclust.jobs.label.table_labeling import output_table_format
from exclust.tree import ThresholdTree


def run_label(
    tree: ThresholdTree | str | os.PathLike, input: Any, out: str | os.PathLike, *,
    dates: Sequence[date | None] | None = None, scheduler: str | None = None,
    storage_options: Mapping[str, Any] | None = None, cluster_column: str = "cluster", leaf_column: str = "leaf",
    out_format: str | None = None, date_column: str | None = None, source_options: Mapping[str, Any] | None = None,
    log: Log | None = None, live: bool = False, on_night: Callable[[NightOutcome], None] | None = None,
    wrap: Callable[[Callable[..., NightOutcome]], Callable[..., NightOutcome]] | None = None,
) -> list[NightOutcome]:
    """Label ``input`` with ``tree`` into ``out``: the whole labelling job, CLI and flow alike.

    Parameters
    ----------
    tree : ThresholdTree or str or path
        The tree, or the path or URL of the ``tree.json`` that ``exclust explain`` wrote.
    input : str or path or object
        Anything a registered source reads (Parquet files, a Delta table, an Iceberg address, a
        plugin's input); with ``{date}`` in it when labelling by date.
    out : str or path
        The output folder (``{date}`` in it by date), or a lake table (Delta, Iceberg).
    dates : sequence of date, optional
        The dates to label, one after another; None or empty (or ``[None]``): undated paths.
    scheduler : str, optional
        A Dask scheduler's address; None starts a local cluster for the run.
    storage_options : mapping, optional
        fsspec options of the tree, the input and the output.
    cluster_column, leaf_column : str, default "cluster", "leaf"
        The output columns.
    out_format : str, optional
        ``folder``, ``delta`` or ``iceberg``; None (auto) tells it from ``out``.
    date_column : str, optional
        A table output's date column (default ``date``).
    source_options : mapping, optional
        The input's source options (a table's snapshot), undated paths only.
    log : callable, optional
        Where progress lines go.
    live : bool, default False
        A live bar of the Dask tasks on stderr (a terminal).
    on_night : callable, optional
        Called with each date's ``NightOutcome`` as it ends (and the undated run's).
    wrap : callable, optional
        Takes ``nightly.label_date`` and returns what runs each date (the flow: a Prefect task).

    Returns
    -------
    list of NightOutcome
        One per date (one, with ``day`` None, for undated paths), each with its ``LabelResult``
        or the reason it was skipped.
    """
    options = dict(storage_options or {})
    days = [d for d in (dates or ()) if d is not None]
    table = output_table_format(out, out_format, options)
    if days or table is not None or has_date(input) or has_date(out):
        check_templates(str(input), str(out), dated=bool(days), table=table)
        tree = tree if isinstance(tree, ThresholdTree) else load_tree(tree, options)  # before any cluster starts
        if log is not None:
            log(f"labelling {len(days)} date(s) {days[0]}..{days[-1]}: {input} -> {out}")
        label_one = wrap(label_date) if wrap is not None else label_date
        extra = {"table_format": table, "date_column": date_column} if table else {}
        outcomes = []
        with dask_cluster(scheduler):
            for day in days:
                outcome = label_one(tree, str(input), str(out), day, cluster_column=cluster_column,
                                    leaf_column=leaf_column, storage_options=options, **extra)
                if on_night is not None:
                    on_night(outcome)
                outcomes.append(outcome)
        return outcomes
    # Tree, input and output are all checked before a cluster starts.
    plan = plan_label(tree, input, out, storage_options=options, cluster_column=cluster_column,
                      leaf_column=leaf_column, source_options=source_options)
    context = RunContext(log, live=live and log is not None)
    with dask_cluster(scheduler), context.step("label", f"{input} -> {out}"):
        result = label_planned(plan)
    outcome = NightOutcome(None, str(input), str(out), result)
    if on_night is not None:
        on_night(outcome)
    return [outcome]
