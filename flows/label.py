"""Prefect flow ``label``: apply a saved tree to new Parquet partitions (the nightly job).

With ``{date}`` in the input and output paths the run labels by date: the ``date`` parameter
(one date, or FIRST..LAST for a backfill, one date after another), or by default the date the run
was scheduled for, so a late or retried run still labels its own night. Each date is one task
that writes that date's folder atomically (exclust.jobs.label.nightly). After each date the run publishes
the rows per cluster and the drift check that labelling recorded (rows per leaf tonight against
the tree's built-on shares, exclust.scoring.drift): a table per leaf, and a flag when the
population-stability index passes its threshold. A table output (Delta, or an Iceberg address
``iceberg+<catalog URI>#ns.table``) takes each date as one commit of its date partition; the
``storage_options`` parameter reaches the object store of the tree, the input and the output.
"""
from __future__ import annotations

from datetime import UTC, date
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, State

from exclust.jobs.label.label_run import run_label
from exclust.jobs.label.labeling import load_tree
from exclust.jobs.label.nightly import NightOutcome, label_date, parse_dates
from exclust.tree import ThresholdTree
from flows.params import LabelParams, dask_scheduler
from flows.quiet_errors import quiet_bad_input
from flows.retry import RETRIES, RETRY_DELAYS, retry_if_transient

quiet_bad_input()


# One date's labelling (exclust.jobs.label.nightly.label_date: one Dask task per file, that date's folder or
# table partition written atomically) as a Prefect task; run_label runs it for each date.
label_date_task = task(name="label date", task_run_name="label {day}", retries=RETRIES,
                       retry_delay_seconds=RETRY_DELAYS, retry_condition_fn=retry_if_transient, cache_policy=NO_CACHE,
                       persist_result=False)(label_date)


def scheduled_date() -> date:
    """The UTC date this flow run was scheduled for (its start time when run by hand)."""
    from prefect.runtime import flow_run

    return flow_run.scheduled_start_time.astimezone(UTC).date()


def dates_to_label(params: LabelParams) -> list[date | None]:
    """The dates of this run; [None] when the paths hold no {date} (label them as given)."""
    if not params.dated:
        return [None]
    days: list[date | None] = [*parse_dates(params.date)] if params.date else [scheduled_date()]
    return days


def publish_counts(outcome: NightOutcome) -> None:
    result = outcome.result
    rows = [{"cluster": k, "rows": v} for k, v in sorted(result.counts.items())]
    rows.append({"cluster": "total", "rows": result.n_rows})
    unseen = "".join(f"; {n} row(s) with a category of '{name}' the tree never saw (sent to each cut's missing "
                     f"side)" for name, n in sorted(result.unseen_categories.items()))
    create_table_artifact(rows, key="label-counts",
                          description=f"exclust label {outcome.name}: rows per cluster (-1: not labelled, an "
                                      f"infinite value or a missing one at a cut with no missing side){unseen}")


def drift_markdown(name: str, drift: dict, tree: ThresholdTree) -> str:
    """The flag raised on a drifted night: what moved, and what to do."""
    moved = sorted(drift["leaves"], key=lambda leaf: -abs(leaf["share"] - leaf["built_share"]))[:5]
    lines = [
        f"## Drift on {name}",
        "",
        f"Population-stability index **{drift['psi']:.3f}**, above the alert threshold {drift['threshold']:g}: "
        "tonight's rows fall into the tree's leaves in other shares than the data the tree was built on, "
        "so its clusters may no longer describe the data. Check the input, and explain recent data again "
        "if the change is real.",
        "",
        "| leaf | cluster | share when built | share tonight |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {leaf['leaf']} | {int(tree.value[leaf['leaf']])} | {leaf['built_share']:.1%} | {leaf['share']:.1%} |"
              for leaf in moved]
    return "\n".join(lines) + "\n"


def publish_drift(outcome: NightOutcome, tree: ThresholdTree, logger) -> None:
    """Table of shares per leaf, a markdown flag when drifted, and one log line."""
    drift = getattr(outcome.result, "drift", None)
    if not drift:
        logger.info("drift %s: not checked (the tree stores no leaf shares; explain again to store them)", outcome.name)
        return
    rows = [{"leaf": leaf["leaf"], "cluster": int(tree.value[leaf["leaf"]]),
             "share_when_built": round(leaf["built_share"], 4),
             "share_tonight": round(leaf["share"], 4), "psi_term": round(leaf["term"], 4)} for leaf in drift["leaves"]]
    verdict = "DRIFT" if drift["drifted"] else "no drift"
    create_table_artifact(
        rows, key="label-drift",
        description=f"exclust label {outcome.name}: share of rows per leaf against the tree's built-on data; "
                    f"PSI {drift['psi']:.3f} ({verdict}; alert above {drift['threshold']:g})",
    )
    if drift["drifted"]:
        create_markdown_artifact(drift_markdown(outcome.name, drift, tree), key="label-drift-alert",
                                 description=f"exclust label {outcome.name}: drift flag")
        logger.warning("DRIFT %s: population-stability index %.3f > %g; the data moved away from what the tree "
                       "was built on", outcome.name, drift["psi"], drift["threshold"])
    else:
        logger.info("drift %s: population-stability index %.3f <= %g, no drift", outcome.name, drift["psi"],
                    drift["threshold"])


@flow(name="label", log_prints=True)
def label(params: LabelParams) -> dict[str, Any] | State:
    """Write the input's Parquet partitions again with a cluster and a leaf column from a saved tree, by date."""
    logger = get_run_logger()
    days = dates_to_label(params)
    tree = load_tree(params.tree, params.storage_options_dict())  # a bad tree fails before any cluster starts

    def publish(outcome: NightOutcome) -> None:
        logger.info("%s", outcome.summary())
        if outcome.result is not None:
            publish_counts(outcome)
            publish_drift(outcome, tree, logger)

    outcomes = run_label(tree, params.input, params.output, dates=days,
                         scheduler=dask_scheduler(params.scheduler_address),
                         storage_options=params.storage_options_dict(), cluster_column=params.cluster_column,
                         leaf_column=params.leaf_column, out_format=params.table or "folder",
                         date_column=params.date_column, log=logger.info, on_night=publish,
                         wrap=lambda label_one: label_date_task)
    summary = {"nights": [o.to_dict() for o in outcomes]}
    skipped = [o.summary() for o in outcomes if o.skipped is not None]
    if skipped:
        return Completed(message="; ".join(skipped), data=summary)
    return summary
