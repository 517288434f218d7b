"""Prefect flow ``label``: apply a saved tree to new Parquet partitions (the nightly job)."""
from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from exclust.labeling import label_parquet
from exclust.pipeline import dask_cluster
from flows.params import LabelParams
from flows.retry import RETRIES, RETRY_DELAYS, retry_if_transient


@task(name="label partitions", retries=RETRIES, retry_delay_seconds=RETRY_DELAYS,
      retry_condition_fn=retry_if_transient, cache_policy=NO_CACHE, persist_result=False)
def label_task(params: LabelParams):
    """Label every partition (one Dask task per file) and write them atomically."""
    return label_parquet(
        params.tree, params.input, params.output,
        cluster_column=params.cluster_column, leaf_column=params.leaf_column,
    )


@flow(name="label", log_prints=True)
def label(params: LabelParams) -> dict[str, Any]:
    """Write the input's Parquet partitions again with a cluster and a leaf column from a saved tree."""
    logger = get_run_logger()
    with dask_cluster(params.scheduler_address):
        result = label_task(params)
    rows = [{"cluster": k, "rows": v} for k, v in sorted(result.counts.items())]
    rows.append({"cluster": "total", "rows": result.n_rows})
    create_table_artifact(rows, key="label-counts", description="exclust label: rows per cluster (-1: rows with missing features)")
    logger.info("labelled %d rows in %d files into %s in %.1f s", result.n_rows, result.n_files, result.out, result.seconds)
    return result.to_dict()
