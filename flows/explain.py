"""Prefect flow ``explain``: the steps of ``exclust.jobs.explain.steps`` (load, fit reference, build tree, score,
report, write outputs), each a Prefect task.

The flow is thin: it runs the same step list as the CLI, makes each step a task (with retries
on transient failures), opens the Dask client the parameters ask for, and publishes the run's
metrics, rules and report (a link when EXCLUST_OUTPUTS_URL says where outputs are served) as
Prefect artifacts.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from exclust.jobs import registry
from exclust.jobs.explain import pipeline, steps
from exclust.outputs.folders import BASE_ENV
from flows.params import ExplainParams, dask_scheduler
from flows.quiet_errors import quiet_bad_input
from flows.retry import RETRIES, RETRY_DELAYS, retry_if_transient

OUTPUTS_URL_ENV = "EXCLUST_OUTPUTS_URL"  # URL where the worker's EXCLUST_OUTPUT_BASE folder is served
quiet_bad_input()

TASK_OPTIONS: dict[str, Any] = dict(
    retries=RETRIES, retry_delay_seconds=RETRY_DELAYS, retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE, persist_result=False,
)


# One Prefect task per step of exclust.jobs.explain.steps.STEPS (the CLI and Python run the same list).
STEP_TASKS = {step.name: task(name=step.name, **TASK_OPTIONS)(step.run) for step in steps.STEPS}


def report_url(report: Path) -> str | None:
    """Where the report is served: ``EXCLUST_OUTPUTS_URL`` names the URL of the worker's
    ``EXCLUST_OUTPUT_BASE`` folder (served by any static web server); None when unset or outside it."""
    base_url = os.environ.get(OUTPUTS_URL_ENV, "").strip()
    base = os.environ.get(BASE_ENV, "").strip()
    if not base_url or not base:
        return None
    try:
        relative = report.resolve().relative_to(Path(base).expanduser().resolve())
    except ValueError:
        return None
    return base_url.rstrip("/") + "/" + quote(relative.as_posix())


def publish_artifacts(result: pipeline.ExplainResult) -> None:
    """Metrics table, rules with the headline figures, and the report, visible on the run's page in the Prefect UI."""
    from exclust.scoring.scorecard import MEASURES

    def row(key: str, value: Any, measure_key: str) -> dict[str, Any]:
        info = MEASURES.get(measure_key)  # the catalogue's label and direction; unknown keys shown plainly
        return {"metric": key, "label": info.label if info else key, "value": value,
                "better": (info.better or "") if info else ""}

    rows = [row(k, v, k) for k, v in result.metrics.items() if not isinstance(v, (dict, list))]
    rows += [row(f"seconds.{k}", v, "seconds") for k, v in result.metrics.get("seconds", {}).items()]
    create_table_artifact(rows, key="explain-metrics", description="exclust explain: metrics of the tree")
    from exclust.report.page import summary_markdown

    report: Path | str
    if isinstance(result.out, Path):
        report = (result.out / "report.html").resolve()
        url, hint = report_url(report), f" (set {OUTPUTS_URL_ENV} to link it from here)"
        where_is = f"on the worker's disk; set {OUTPUTS_URL_ENV} to link it"
    else:  # an object store URL (s3://...): the report lies there, beside tree.json
        report, url, hint, where_is = f"{str(result.out).rstrip('/')}/report.html", None, "", "on the object store"
    where = f"[open report.html]({url})" if url else f"`{report}`{hint}"
    digest = summary_markdown(result.tree, result.metrics, title="exclust explain", titles=registry.titles())
    create_markdown_artifact(
        digest + f"\n**Report:** {where}\n\n### Rules\n\n```\n" + result.rules + "```\n", key="explain-rules",
        description="exclust explain: one rule per cluster, the headline metrics and where the report is",
    )
    if url:
        create_link_artifact(url, link_text="report.html", key="explain-report",
                             description="exclust explain: HTML report")
    else:
        create_markdown_artifact(f"The report is `{report}` {where_is}.\n",
                                 key="explain-report", description="exclust explain: HTML report")


@flow(name="explain", log_prints=True)
def explain(params: ExplainParams) -> dict[str, Any]:
    """Explain a clustering of Parquet data with a small threshold tree; write tree, metrics, rules, report."""
    logger = get_run_logger()
    config = params.to_config().check()
    scheduler = dask_scheduler(params.scheduler_address)

    def announce(client) -> None:
        where = f"scheduler {scheduler}" if scheduler else "a local cluster for this run"
        logger.info("Dask: %s (dashboard %s)", where, client.dashboard_link)

    result = steps.run_explain(config, params.output, scheduler=scheduler, log=logger.info,
                               wrap=lambda step: STEP_TASKS[step.name], on_client=announce)
    publish_artifacts(result)
    logger.info("wrote %s (%d leaves, depth %d)", result.out, result.tree.n_leaves, result.tree.depth)
    return {"output": str(result.out),
            "metrics": {k: v for k, v in result.metrics.items() if not isinstance(v, (dict, list))}}
