"""Prefect flow ``explain``: load, fit reference, build tree, score, write outputs.

The flow is thin: every step is a function of ``exclust.pipeline``; this module only gives
each step a task (with retries on transient failures), opens the Dask client the parameters
ask for, and publishes the run's metrics, rules and report (a link when EXCLUST_OUTPUTS_URL says where
outputs are served) as Prefect artifacts.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from exclust import pipeline
from exclust.progress import StepTimer
from exclust.outputs import BASE_ENV
from flows.params import ExplainParams, dask_scheduler
from flows.quiet_errors import quiet_bad_input
from flows.retry import RETRIES, RETRY_DELAYS, retry_if_transient

OUTPUTS_URL_ENV = "EXCLUST_OUTPUTS_URL"  # URL where the worker's EXCLUST_OUTPUT_BASE folder is served
quiet_bad_input()

TASK_OPTIONS = dict(
    retries=RETRIES, retry_delay_seconds=RETRY_DELAYS, retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE, persist_result=False,
)


@task(name="load", **TASK_OPTIONS)
def load_task(config: pipeline.ExplainConfig):
    """Read and validate the Parquet input."""
    return pipeline.load(config)


@task(name="fit reference", **TASK_OPTIONS)
def fit_reference_task(data, config: pipeline.ExplainConfig):
    """Fit the reference clustering across the Dask cluster."""
    return pipeline.fit_reference(data, config)


@task(name="build tree", **TASK_OPTIONS)
def build_tree_task(data, ref, config: pipeline.ExplainConfig):
    """Build the explaining tree."""
    return pipeline.build_tree(data, ref, config)


@task(name="score", **TASK_OPTIONS)
def score_task(data, ref, built, config: pipeline.ExplainConfig):
    """Score the tree against the reference (and the truth when given)."""
    scores = pipeline.score_tree(data, ref, built, config)
    curve = pipeline.cost_curve(data, ref, config, built) if config.algorithm in pipeline.DATA_ALGORITHMS else None
    return scores, curve


@task(name="write outputs", **TASK_OPTIONS)
def write_outputs_task(result: pipeline.ExplainResult, data, built, curve, config, output: str):
    """Render the report and write the output folder atomically."""
    result.report_html = pipeline.render(result, data, built, curve, config)
    return pipeline.write_outputs(result, output)


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
    rows = [{"metric": k, "value": v} for k, v in result.metrics.items() if not isinstance(v, (dict, list))]
    rows += [{"metric": f"seconds.{k}", "value": v} for k, v in result.metrics.get("seconds", {}).items()]
    create_table_artifact(rows, key="explain-metrics", description="exclust explain: metrics of the tree")
    from exclust.report import summary_markdown

    report = (result.out / "report.html").resolve()
    url = report_url(report)
    where = f"[open report.html]({url})" if url else f"`{report}` (set {OUTPUTS_URL_ENV} to link it from here)"
    digest = summary_markdown(result.tree, result.metrics, title="exclust explain")
    create_markdown_artifact(
        digest + f"\n**Report:** {where}\n\n### Rules\n\n```\n" + result.rules + "```\n", key="explain-rules",
        description="exclust explain: one rule per cluster, the headline metrics and where the report is",
    )
    if url:
        create_link_artifact(url, link_text="report.html", key="explain-report", description="exclust explain: HTML report")
    else:
        create_markdown_artifact(f"The report is `{report}` on the worker's disk; set {OUTPUTS_URL_ENV} to link it.\n",
                                 key="explain-report", description="exclust explain: HTML report")


@flow(name="explain", log_prints=True)
def explain(params: ExplainParams) -> dict[str, Any]:
    """Explain a clustering of Parquet data with a small threshold tree; write tree, metrics, rules, report."""
    logger = get_run_logger()
    config = params.to_config().check()
    timer = StepTimer(logger.info)
    scheduler = dask_scheduler(params.scheduler_address)
    with pipeline.dask_cluster(scheduler) as client:
        where = f"scheduler {scheduler}" if scheduler else "a local cluster for this run"
        logger.info("Dask: %s (dashboard %s)", where, client.dashboard_link)
        with timer.step("load", config.input):
            data = load_task(config)
        ref = None
        if pipeline.needs_reference_step(config):
            with timer.step("fit reference", f"{config.reference}, k={config.k}"):
                ref = fit_reference_task(data, config)
        with timer.step("build tree", config.algorithm):
            built = build_tree_task(data, ref, config)
        with timer.step("score"):
            scores, curve = score_task(data, ref, built, config)
        metrics = pipeline.assemble_metrics(scores, data, ref, built, config, timer.seconds)
        result = pipeline.ExplainResult(built.tree, metrics, built.tree.rules_text())
        with timer.step("write outputs", params.output):
            result.out = write_outputs_task(result, data, built, curve, config, params.output)
    publish_artifacts(result)
    logger.info("wrote %s (%d leaves, depth %d)", result.out, built.tree.n_leaves, built.tree.depth)
    return {"output": str(result.out), "metrics": {k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}}
