"""The Prefect flows, run in-process against a temporary Prefect server (SQLite in a temp folder).

These are real flow runs: real Prefect API, real local Dask cluster inside the flow, real
Parquet files. Artifacts and final states are read back through the Prefect client.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("prefect")

from datetime import UTC

from pydantic import ValidationError  # noqa: E402

from exclust.tree import TreeBuilder  # noqa: E402
from flows.params import ExplainParams, LabelParams  # noqa: E402


def _artifacts(flow_run_id):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    return {a.key: a for a in found}


def _tree(path):
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    left, right = b.split(root, feature=1, threshold=0.5)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    b.build(feature_names=["u", "v"]).to_json(path)


def _parts(folder, n_files=2, rows=2000, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for i in range(n_files):
        pq.write_table(pa.table({"u": rng.normal(size=rows), "v": rng.uniform(size=rows)}), folder / f"p{i}.parquet")


def test_parameter_models_render_as_forms():
    from flows.explain import explain
    from flows.label import label

    schema = explain.parameters.model_dump()
    defs = schema["definitions"]
    assert set(defs["Algorithm"]["enum"]) == {"mmdt", "imm", "exkmc", "exshallow", "exgreedy", "tree-search",
                                              "best", "optimal", "random-cut", "kdtree",
                                              "cart", "label-tree", "concept-mmdt", "kernel-mmdt"}
    assert set(defs["Objective"]["enum"]) == {"kmeans", "kmedians"}
    assert defs["ThresholdVariant"]["enum"][0] == "midpoint"
    fields = defs["ExplainParams"]["properties"]
    assert {"input", "output", "features", "algorithm", "n_clusters", "reference", "threshold", "truth",
            "scheduler_address"} <= set(fields)
    assert all(f.get("description") for f in fields.values())
    assert fields["n_clusters"]["default"] == 5
    label_defs = label.parameters.model_dump()["definitions"]
    assert {"tree", "input", "output", "date"} <= set(label_defs["LabelParams"]["properties"])
    for model in (defs["ExplainParams"], label_defs["LabelParams"]):
        assert "`" not in model["description"]
        for name, field in model["properties"].items():
            assert field["title"] == name  # enumerations too, not "ReferenceKind"
            assert "anyOf" not in field and field.get("type") != "null", name  # no type toggle in the form
            assert "`" not in field["description"], name
    assert fields["reference"]["$ref"].endswith("/ReferenceKind")  # still a drop-down
    assert fields["features"]["type"] == "string" and fields["leaves"]["default"] == 0


def test_parameters_reject_bad_paths(tmp_path):
    _parts(tmp_path / "in")
    with pytest.raises(ValidationError, match="missing.parquet"):
        ExplainParams(input=str(tmp_path / "missing.parquet"), output=str(tmp_path / "o"))
    with pytest.raises(ValidationError, match="root"):
        ExplainParams(input=str(tmp_path / "in"), output="/")
    with pytest.raises(ValidationError, match="reference_column"):
        ExplainParams(input=str(tmp_path / "in"), output=str(tmp_path / "o"), reference="labels")
    p = ExplainParams(input=str(tmp_path / "in"), output=str(tmp_path / "o"), columns="u, v", scheduler_address="")
    config = p.to_config()
    assert config.features == ["u", "v"] and config.leaves is None and config.truth is None and p.algorithm == "mmdt"
    # Python callers may still pass lists and None
    p = ExplainParams(input=str(tmp_path / "in"), output=str(tmp_path / "o"), columns=["u", "v"], leaves=None,
                      scheduler_address=None, truth_column=None)
    assert p.to_config().features == ["u", "v"] and p.scheduler_address == ""
    with pytest.raises(ValidationError, match="has no \\{date\\}"):
        LabelParams(tree=str(tmp_path / "in" / "p0.parquet"), input=str(tmp_path / "in" / "date={date}"),
                    output=str(tmp_path / "out"))
    with pytest.raises(ValidationError, match="2026-13-01"):
        LabelParams(tree=str(tmp_path / "in" / "p0.parquet"), input=str(tmp_path / "in" / "date={date}"),
                    output=str(tmp_path / "out" / "date={date}"), date="2026-13-01")


def test_dask_scheduler_falls_back_to_the_workers_setting(monkeypatch):
    from flows.params import dask_scheduler

    monkeypatch.delenv("EXCLUST_DASK_SCHEDULER", raising=False)
    assert dask_scheduler("") is None and dask_scheduler("tcp://a:1") == "tcp://a:1"
    monkeypatch.setenv("EXCLUST_DASK_SCHEDULER", "tcp://b:2")
    assert dask_scheduler(" ") == "tcp://b:2" and dask_scheduler("tcp://a:1") == "tcp://a:1"


def test_label_flow_writes_partitions_and_counts_artifact(tmp_path, prefect_api, dask_client):
    from flows.label import label

    _tree(tmp_path / "tree.json")
    _parts(tmp_path / "in")
    state = label(LabelParams(tree=str(tmp_path / "tree.json"), input=str(tmp_path / "in"),
                              output=str(tmp_path / "out"),
                              scheduler_address=dask_client.scheduler.address), return_state=True)
    assert state.is_completed(), state.message
    result = state.result()["nights"][0]
    table = pq.read_table(sorted((tmp_path / "out").glob("*.parquet")))
    assert table.num_rows == 4000 == result["n_rows"] and result["date"] is None
    v, cluster = table.column("v").to_numpy(), table.column("cluster").to_numpy()
    np.testing.assert_array_equal(cluster, (v > 0.5).astype(int))
    art = _artifacts(state.state_details.flow_run_id)["label-counts"]
    rows = json.loads(art.data)
    assert {str(r["cluster"]): r["rows"] for r in rows}["total"] == 4000
    assert sum(r["rows"] for r in rows if r["cluster"] != "total") == 4000


def test_label_flow_labels_nights_into_a_delta_table_and_explain_reads_it(tmp_path, prefect_api, dask_client):
    import deltalake

    from flows.explain import explain
    from flows.label import label

    _tree(tmp_path / "tree.json")
    _parts(tmp_path / "in" / "date=2026-11-20", seed=1)
    _parts(tmp_path / "in" / "date=2026-11-21", rows=500, seed=2)
    state = label(LabelParams(tree=str(tmp_path / "tree.json"), input=str(tmp_path / "in" / "date={date}"),
                              output=str(tmp_path / "table"), output_format="delta", date="2026-11-20..2026-11-21",
                              scheduler_address=dask_client.scheduler.address), return_state=True)
    assert state.is_completed(), state.message
    assert [n["n_rows"] for n in state.result()["nights"]] == [4000, 1000]
    table = deltalake.DeltaTable(str(tmp_path / "table"))
    assert table.version() == 1 and table.history(1)[0]["exclust"]["date"] == "2026-11-21"
    params = ExplainParams(input=str(tmp_path / "table"), output=str(tmp_path / "out"), columns="u,v", n_clusters=2,
                           reference="labels", reference_column="cluster", algorithm="imm", table_version=0,
                           cost_curve=False, scheduler_address=dask_client.scheduler.address)
    state = explain(params, return_state=True)
    assert state.is_completed(), state.message
    assert state.result()["metrics"]["n"] == 4000  # version 0: the first night only


def test_label_flow_reads_and_writes_s3_with_its_storage_options_into_an_iceberg_table(
        tmp_path, prefect_api, dask_client, s3_server, s3_bucket, monkeypatch):
    """The label flow's storage_options reach the tree, the input and the output table (no AWS_* variables here)."""
    import s3fs
    from pyiceberg.catalog.sql import SqlCatalog

    from flows.label import label

    options = s3_server["storage_options"]
    fs = s3fs.S3FileSystem(**options)
    _tree(tmp_path / "tree.json")
    fs.put(str(tmp_path / "tree.json"), f"{s3_bucket}/models/tree.json")
    _parts(tmp_path / "in" / "date=2026-11-20", rows=300, seed=3)
    for part in sorted((tmp_path / "in" / "date=2026-11-20").glob("*.parquet")):
        fs.put(str(part), f"{s3_bucket}/incoming/date=2026-11-20/{part.name}")
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db")
    catalog.create_namespace("ns", {"location": f"s3://{s3_bucket}/lake/ns"})
    for variable in s3_server["env"]:  # only the flow's storage_options say where the store is
        monkeypatch.delenv(variable)
    state = label(LabelParams(tree=f"s3://{s3_bucket}/models/tree.json", input=f"s3://{s3_bucket}/incoming/date={{date}}",
                              output=f"iceberg+sqlite:///{tmp_path}/catalog.db#ns.labels", date="2026-11-20",
                              storage_options=json.dumps(options), scheduler_address=dask_client.scheduler.address),
                  return_state=True)
    assert state.is_completed(), state.message
    assert [n["n_rows"] for n in state.result()["nights"]] == [600]
    assert fs.find(f"{s3_bucket}/lake/ns/labels/data/date=2026-11-20")  # the night's files went to the store
    for text, error in (("", "cannot read s3://.*tree.json"),
                        ("{not json", "storage_options is not a valid JSON object")):
        with pytest.raises(ValidationError, match=error):  # without the options the tree is not found on the store
            LabelParams(tree=f"s3://{s3_bucket}/models/tree.json", input=f"s3://{s3_bucket}/incoming/date={{date}}",
                        output=f"s3://{s3_bucket}/out/date={{date}}", storage_options=text)


def test_label_flow_on_corrupt_file_fails_naming_it_without_retrying(tmp_path, prefect_api):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterFlowRunId

    from flows.label import label

    _tree(tmp_path / "tree.json")
    _parts(tmp_path / "in")
    (tmp_path / "in" / "p1.parquet").write_bytes(b"PAR1 garbage, not a footer")
    state = label(LabelParams(tree=str(tmp_path / "tree.json"), input=str(tmp_path / "in"),
                              output=str(tmp_path / "out")),
                  return_state=True)
    assert state.is_failed()
    assert "p1.parquet" in state.message
    assert not (tmp_path / "out").exists()
    with get_client(sync_client=True) as client:
        run_id = state.state_details.flow_run_id
        runs = client.read_task_runs(task_run_filter=TaskRunFilter(flow_run_id=TaskRunFilterFlowRunId(any_=[run_id])))
    # The corrupt file is refused while the run plans (its footer is read before any task starts),
    # so no task of the run is retried: every task run, if any ran, ran once.
    assert [r.run_count for r in runs if r.run_count != 1] == []


def test_deploy_files_parse_and_match_the_flows(tmp_path, monkeypatch):
    """prefect.yaml passes Prefect's own model; its parameters fit the flows; YAML files parse; ports stay local."""
    from pathlib import Path

    import yaml
    from prefect.cli.deploy._models import PrefectYamlModel
    from prefect.flows import load_flow_from_entrypoint
    from prefect.utilities.templating import apply_values

    root = Path(__file__).resolve().parents[1] / "deploy"
    doc = yaml.safe_load((root / "prefect.yaml").read_text())
    model = PrefectYamlModel.model_validate(doc)
    assert {d.name for d in model.deployments} == {"explain", "label-nightly", "label-nightly-delta"}
    (tmp_path / "explain").mkdir()
    (tmp_path / "explain" / "tree.json").write_text("{}")
    # an earlier explain run wrote it, whole: its marker and its _SUCCESS manifest
    (tmp_path / "explain" / ".exclust-output").write_text('{"written_by": "exclust", "job": "explain"}')
    (tmp_path / "explain" / "_SUCCESS").write_text("{}")
    (tmp_path / "input").mkdir()
    monkeypatch.setenv("EXCLUST_DATA", str(tmp_path))
    models = {"explain": ExplainParams, "label": LabelParams}
    for dep in model.deployments:
        flow = load_flow_from_entrypoint(str(root.parent / dep.entrypoint))
        assert dep.work_pool.name == "exclust-process"
        params = apply_values(dep.parameters, {})  # fills {{ $EXCLUST_DATA }} as `prefect deploy` does
        models[flow.name](**params["params"])  # defaults are valid parameters of the flow
    nightly = next(d for d in model.deployments if d.name == "label-nightly")
    assert nightly.schedules[0].cron == "30 2 * * *" and nightly.concurrency_limit == 1
    assert nightly.parameters["params"]["output"].endswith("/labelled/date={date}")
    into_table = LabelParams(**apply_values(next(d for d in model.deployments if d.name == "label-nightly-delta")
                                            .parameters, {})["params"])
    assert into_table.table == "delta" and into_table.dated  # each night one commit of the table's date partition
    # deploying with EXCLUST_DASK_SCHEDULER unset must not warn: the file does not template it
    assert "$EXCLUST_DASK_SCHEDULER" not in (root / "prefect.yaml").read_text()
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    assert {"postgres", "prefect-server", "prefect-worker", "dask-scheduler", "dask-worker"} <= set(compose["services"])
    ports = [p for s in compose["services"].values() for p in s.get("ports", [])]
    assert ports and all(p.startswith("127.0.0.1:") for p in ports)
    kinds = [d["kind"] for f in sorted((root / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    assert {"DaskCluster", "Deployment", "PersistentVolumeClaim"} <= set(kinds)


def test_explain_flow_writes_outputs_and_artifacts(tmp_path, prefect_api, dask_client):
    from exclust.datasets.synthetic import write_gmm_parquet
    from flows.explain import explain

    write_gmm_parquet(tmp_path / "data", 9000, n_components=3, n_features=2, rows_per_file=3000, random_state=7,
                      noise_scale=3.0)
    params = ExplainParams(input=str(tmp_path / "data"), output=str(tmp_path / "out"), columns="x0,x1",
                           n_clusters=3, algorithm="exkmc", leaves=5, reference="kmeans", truth_column="truth",
                           scheduler_address=dask_client.scheduler.address)
    state = explain(params, return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()
    assert summary["output"] == str(tmp_path / "out") and summary["metrics"]["algorithm"] == "exkmc"
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert 3 <= metrics["n_leaves"] <= 5 and metrics["reference"] == "kmeans" and metrics["ari_truth"] > 0.9
    arts = _artifacts(state.state_details.flow_run_id)
    assert {"explain-metrics", "explain-rules", "explain-report"} <= set(arts)
    assert "cluster 0:" in arts["explain-rules"].data
    table = arts["explain-metrics"].data
    rows = {row["metric"]: row for row in (json.loads(table) if isinstance(table, str) else table)}
    from exclust.scoring.scorecard import MEASURES  # the catalogue's labels and directions, not the flow's own

    assert rows["price_kmeans"]["label"] == MEASURES["price_kmeans"].label and rows["price_kmeans"]["better"] == "lower"
    assert rows["ari_truth"]["better"] == "higher" and rows["seconds.score"]["label"] == MEASURES["seconds"].label
    report = str((tmp_path / "out" / "report.html").resolve())
    assert report in arts["explain-report"].data and report in arts["explain-rules"].data  # no server: the path


def test_report_link_where_outputs_are_served(tmp_path, monkeypatch):
    from flows.explain import report_url

    report = tmp_path / "runs" / "a b" / "report.html"
    monkeypatch.setenv("EXCLUST_OUTPUT_BASE", str(tmp_path))
    monkeypatch.delenv("EXCLUST_OUTPUTS_URL", raising=False)
    assert report_url(report) is None
    monkeypatch.setenv("EXCLUST_OUTPUTS_URL", "https://outputs.example/exclust/")
    assert report_url(report) == "https://outputs.example/exclust/runs/a%20b/report.html"
    assert report_url(tmp_path.parent / "elsewhere" / "report.html") is None  # not under the served folder


def test_retry_only_transient_failures():
    from distributed.scheduler import KilledWorker
    from prefect.states import Failed

    from exclust.errors import InputError
    from exclust.tree import TreeFormatError
    from flows.retry import is_transient, retry_if_transient

    assert not is_transient(InputError("cannot read Parquet file x"))
    assert not is_transient(TreeFormatError("bad tree")) and not is_transient(FileNotFoundError("x"))
    assert is_transient(KilledWorker("task", "worker", 3))
    assert is_transient(TimeoutError()) and is_transient(ConnectionError())
    assert retry_if_transient(None, None, Failed(data=OSError("disk busy"))) is True
    assert retry_if_transient(None, None, Failed(data=InputError("no rows"))) is False


def _tree_with_shares(path, low_share):
    """The two-leaf tree of _tree, with built-on shares per leaf as explain stores them; its leaves."""
    from exclust.tree import ThresholdTree

    _tree(path)
    doc = json.loads(path.read_text())
    low, high = ThresholdTree.from_json(path).leaves.tolist()  # v <= 0.5, v > 0.5
    doc["meta"]["leaf_shares"] = {str(low): low_share, str(high): 1 - low_share}
    path.write_text(json.dumps(doc))
    return [low, high]


def test_label_flow_labels_the_scheduled_date_and_skips_a_night_without_input(tmp_path, prefect_api, dask_client):
    """Blank date: the run's scheduled date (today, UTC, for a run started by hand); drift published per night."""
    from datetime import datetime, timedelta

    from exclust.jobs.label.labeling import LabelResult
    from flows.label import label

    leaves = _tree_with_shares(tmp_path / "tree.json", 0.5)
    today = datetime.now(UTC).date()
    _parts(tmp_path / "in" / f"date={today}")  # v uniform on [0, 1): both leaves about half
    common = dict(tree=str(tmp_path / "tree.json"), input=str(tmp_path / "in" / "date={date}"),
                  output=str(tmp_path / "out" / "date={date}"), scheduler_address=dask_client.scheduler.address)
    state = label(LabelParams(**common), return_state=True)
    assert state.is_completed(), state.message
    night = state.result()["nights"][0]
    assert night["date"] == today.isoformat() and night["n_rows"] == 4000
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == [f"date={today}"]
    arts = _artifacts(state.state_details.flow_run_id)
    assert today.isoformat() in arts["label-counts"].description
    if "drift" in LabelResult.__dataclass_fields__:
        rows = json.loads(arts["label-drift"].data)
        assert {r["leaf"] for r in rows} == set(leaves) and "no drift" in arts["label-drift"].description
        assert "label-drift-alert" not in arts

    yesterday = (today - timedelta(days=1)).isoformat()
    state = label(LabelParams(**common, date=yesterday), return_state=True)
    assert state.is_completed() and f"{yesterday}: nothing to label (input not found" in state.message
    assert not (tmp_path / "out" / f"date={yesterday}").exists()


def test_label_flow_flags_a_drifted_night(tmp_path, prefect_api, dask_client):
    from exclust.jobs.label.labeling import LabelResult
    from flows.label import label

    if "drift" not in LabelResult.__dataclass_fields__:
        pytest.skip("exclust.jobs.label.labeling does not record drift yet (LabelResult.drift comes with the "
                    "outputs work)")
    _tree_with_shares(tmp_path / "tree.json", 0.9)  # built on mostly v <= 0.5
    _parts(tmp_path / "in" / "date=2026-11-20")  # tonight: half and half
    state = label(LabelParams(tree=str(tmp_path / "tree.json"), input=str(tmp_path / "in" / "date={date}"),
                              output=str(tmp_path / "out" / "date={date}"), date="2026-11-20",
                              scheduler_address=dask_client.scheduler.address), return_state=True)
    assert state.is_completed(), state.message
    arts = _artifacts(state.state_details.flow_run_id)
    assert "DRIFT" in arts["label-drift"].description
    assert "Drift on 2026-11-20" in arts["label-drift-alert"].data


def test_bad_parameters_fail_the_run_with_one_log_line(tmp_path, prefect_api):
    """A parameter the model rejects: one line naming it, no traceback, on Prefect's run logger."""
    import logging

    from flows.label import label

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    loggers = [logging.getLogger(name) for name in ("prefect.flow_runs", "prefect.engine", "prefect.flows")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        state = label(params={"tree": str(tmp_path / "missing.json"), "input": str(tmp_path),
                              "output": str(tmp_path / "o")},
                      return_state=True)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert state.is_failed()
    errors = [r for r in records if r.levelno >= logging.ERROR]
    assert errors, [r.getMessage() for r in records]
    assert len(errors) == 1 and "params.tree: Value error, input not found:" in errors[0].getMessage()
    assert errors[0].exc_info is None and "\n" not in errors[0].getMessage()


def test_cli_python_and_flow_runs_write_the_same_metrics_keys_and_tree(tmp_path, prefect_api, dask_client):
    """The one step list and the one catalogue: whichever way a run starts, metrics.json has the same keys
    (in the same order, every one catalogued), the same steps in seconds and passes, and the tree is the same."""
    from exclust.cli import main
    from exclust.datasets.synthetic import write_gmm_parquet
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import run_explain
    from exclust.scoring.scorecard import MEASURES
    from flows.explain import explain

    write_gmm_parquet(tmp_path / "data", 6000, n_components=3, n_features=2, rows_per_file=2000, random_state=3,
                      noise_scale=3.0)
    data, scheduler = str(tmp_path / "data"), dask_client.scheduler.address
    code = main(["explain", "--input", data, "--features", "x0,x1", "--algorithm", "kdtree", "--k", "3",
                 "--reference", "kmeans", "--truth", "truth", "--scheduler", scheduler, "--quiet",
                 "--out", str(tmp_path / "cli")])
    assert code == 0
    run_explain(ExplainConfig(input=data, features=["x0", "x1"], algorithm="kdtree", k=3, reference="kmeans",
                              truth="truth"), tmp_path / "python", scheduler=scheduler)
    state = explain(ExplainParams(input=data, output=str(tmp_path / "flow"), columns="x0,x1", algorithm="kdtree",
                                  n_clusters=3, reference="kmeans", truth_column="truth", scheduler_address=scheduler),
                    return_state=True)
    assert state.is_completed(), state.message
    runs = {way: json.loads((tmp_path / way / "metrics.json").read_text()) for way in ("cli", "python", "flow")}
    trees = {way: json.loads((tmp_path / way / "tree.json").read_text()) for way in runs}
    keys = list(runs["cli"])
    assert all(key in MEASURES for key in keys)
    for way, metrics in runs.items():
        assert list(metrics) == keys, way
        assert list(metrics["seconds"]) == list(runs["cli"]["seconds"]), way
        assert metrics["passes"] == runs["cli"]["passes"], way
        assert metrics["price_kmeans"] == pytest.approx(runs["cli"]["price_kmeans"], rel=1e-12), way
        assert {k: v for k, v in trees[way].items() if k != "meta"} == \
            {k: v for k, v in trees["cli"].items() if k != "meta"}, way


def test_explain_flow_runs_label_tree_on_a_label_column(tmp_path, prefect_api, dask_client):
    """LabelTree (issue 21 item 4) from the flow form: labels from a column, no reference fit."""
    from exclust.datasets.synthetic import write_gmm_parquet
    from flows.explain import explain

    write_gmm_parquet(tmp_path / "data", 3000, n_components=3, n_features=2, rows_per_file=1000, random_state=7,
                      noise_scale=3.0)
    params = ExplainParams(input=str(tmp_path / "data"), output=str(tmp_path / "out"), columns="x0,x1",
                           n_clusters=3, algorithm="label-tree", leaves=4, reference="labels",
                           reference_column="truth", truth_column="truth",
                           scheduler_address=dask_client.scheduler.address)
    state = explain(params, return_state=True)
    assert state.is_completed(), state.message
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert (metrics["algorithm"], metrics["reference"]) == ("label-tree", "labels:truth")
    assert 3 <= metrics["n_leaves"] <= 4 and metrics["error_rate"] < 0.05
