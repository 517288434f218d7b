"""End to end against real local services: a Prefect server, a Dask scheduler, two Dask workers.

Everything listens on 127.0.0.1 at free ports, with a temporary PREFECT_HOME (SQLite). The
deployments are registered from deploy/prefect.yaml with ``prefect deploy`` into a process work
pool, a ``prefect worker`` runs them, and the runs are created through the API the way the UI's
Run button does (``run_deployment(..., timeout=0)``), or by the server's own scheduler from a
deployment's schedule (its loop shortened to two seconds). The worker's outputs folder is
served over HTTP, as ``EXCLUST_OUTPUTS_URL`` tells the flows. Select with ``pytest -k e2e``.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
POOL = "exclust-process"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p, log in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: a service exited early ({p.args[:3]}); "
                                   f"log:\n{Path(log).read_text()[-3000:]}")
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what} not ready after {timeout:.0f} s")


class Services:
    """Subprocesses started in their own process groups, stopped together at the end."""

    def __init__(self, folder: Path, env: dict) -> None:
        self.folder, self.env, self.procs = folder, env, []

    def start(self, name: str, args: list[str], cwd: Path = ROOT):
        log = self.folder / f"{name}.log"
        p = subprocess.Popen(args, cwd=cwd, env=self.env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append((p, log))
        return p

    def run(self, args: list[str], timeout: float = 240, env: dict | None = None):
        proc = subprocess.run(args, cwd=ROOT, env=env or self.env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{args[:4]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc

    def stop(self) -> None:
        for p, _ in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p, _ in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Prefect server + Dask scheduler + 2 Dask workers + deployments + a Prefect worker."""
    import httpx

    t0 = time.monotonic()
    folder = tmp_path_factory.mktemp("e2e")
    data = folder / "data"
    data.mkdir()
    api_port, dask_port, files_port = _free_port(), _free_port(), _free_port()
    api = f"http://127.0.0.1:{api_port}/api"
    scheduler = f"tcp://127.0.0.1:{dask_port}"
    env = {
        **os.environ,
        "HOME": str(folder / "home"),
        "PREFECT_HOME": str(folder / "prefect"),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        "PREFECT_WORKER_PREFETCH_SECONDS": "5",
        "PREFECT_LOGGING_LEVEL": "INFO",
        # The scheduler service looks for due schedules every 2 s (default 60 s) and keeps few runs ahead.
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
        "PREFECT_SERVER_SERVICES_SCHEDULER_MIN_RUNS": "1",
        "PREFECT_SERVER_SERVICES_SCHEDULER_MAX_RUNS": "3",
        "EXCLUST_OUTPUT_BASE": str(data),
        "EXCLUST_OUTPUTS_URL": f"http://127.0.0.1:{files_port}/",
        "EXCLUST_HOME": str(ROOT),
        "EXCLUST_DATA": str(data),
        "EXCLUST_DASK_SCHEDULER": scheduler,
        "DASK_LOGGING__DISTRIBUTED": "warning",
        # tests/blocking_source.py, a plugin source whose rows hold a label task until the test releases it
        # (the cancellation test's condition): importable by the flows' processes and the Dask workers.
        "EXCLUST_PLUGINS": "blocking_source",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")])),
    }
    (folder / "home").mkdir()
    svc = Services(folder, env)
    try:
        server = svc.start("prefect-server",
                           [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(api_port)])
        svc.start("dask-scheduler", [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(dask_port),
                                     "--dashboard-address", "127.0.0.1:0"])
        for i in range(2):
            svc.start(f"dask-worker-{i}",
                      [str(BIN / "dask"), "worker", scheduler, "--host", "127.0.0.1", "--nthreads", "1",
                                           "--memory-limit", "2GiB", "--no-dashboard", "--name", f"w{i}"])
        _wait(lambda: httpx.get(f"{api}/health", timeout=5).status_code == 200, 240, "Prefect server", svc.procs[:1])

        from distributed import Client

        client = Client(scheduler, timeout="60s")
        _wait(lambda: len(client.scheduler_info()["workers"]) == 2, 120, "two Dask workers", svc.procs[1:])
        svc.run([str(BIN / "prefect"), "work-pool", "create", POOL, "--type", "process"])
        # Deployed as documented for the default (a local Dask cluster per run): EXCLUST_DASK_SCHEDULER unset.
        deploy_env = {k: v for k, v in env.items() if k != "EXCLUST_DASK_SCHEDULER"}
        deploy = svc.run([str(BIN / "prefect"), "--no-prompt", "deploy", "--all", "--prefect-file",
                          "deploy/prefect.yaml"],
                         env=deploy_env)
        svc.start("prefect-worker", [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--type", "process"])
        svc.start("outputs-http", [sys.executable, "-m", "http.server", str(files_port), "--bind", "127.0.0.1",
                                   "--directory", str(data)])
        setup = time.monotonic() - t0
        yield {"api": api, "scheduler": scheduler, "client": client, "data": data, "folder": folder,
               "env": env, "setup_seconds": setup, "server": server, "svc": svc,
               "deploy_output": deploy.stdout + deploy.stderr}
        client.close()
    finally:
        svc.stop()


def _run_and_wait(env: dict, name: str, parameters: dict, timeout: float = 420):
    """Create a run the way the UI does (no waiting inside Prefect), then poll its state."""
    import prefect.settings
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: env["PREFECT_API_URL"]}):
        run = run_deployment(name, parameters=parameters, timeout=0)
        deadline = time.monotonic() + timeout
        with get_client(sync_client=True) as client:
            while time.monotonic() < deadline:
                run = client.read_flow_run(run.id)
                if run.state is not None and run.state.is_final():
                    break
                time.sleep(1)
            artifacts = client.read_artifacts()
            deployment = client.read_deployment_by_name(name)
    return run, {a.key: a for a in artifacts if a.flow_run_id == run.id}, deployment


def deployment_parameters(stack, name: str) -> dict:
    """The ``params`` a deployment holds (as prefect deploy filled them in)."""
    import prefect.settings
    from prefect.client.orchestration import get_client

    with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: stack["env"]["PREFECT_API_URL"]}):
        with get_client(sync_client=True) as client:
            return dict(client.read_deployment_by_name(name).parameters["params"])


def _scheduler_keys(client) -> set[str]:
    """Names of the task groups the shared Dask scheduler has run (proof the flows used it)."""
    return set(client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes)))


def test_e2e_explain_then_label_through_deployments(stack):
    """Create explain and label runs through the API; check outputs, artifacts and the labelled Parquet."""
    import httpx
    import pyarrow.parquet as pq

    from exclust.datasets.synthetic import write_gmm_parquet
    from exclust.tree import ThresholdTree

    data = stack["data"]
    write_gmm_parquet(data / "input", 24_000, n_components=4, n_features=2, rows_per_file=6_000, random_state=1,
                      noise_scale=3.0)
    write_gmm_parquet(data / "incoming" / "date=2026-11-20", 9_000, n_components=4, n_features=2, rows_per_file=3_000,
                      random_state=5, noise_scale=3.0)
    timings = {"setup": stack["setup_seconds"]}

    t0 = time.monotonic()
    run, artifacts, deployment = _run_and_wait(stack["env"], "explain/explain", {"params": {
        "input": str(data / "input"), "output": str(data / "explain"), "features": "x0,x1",
        "n_clusters": 4, "truth": "truth", "threshold": "gaussian",
        "scheduler_address": stack["scheduler"],
    }})
    timings["explain"] = time.monotonic() - t0
    assert run.state.is_completed(), f"{run.state.type}: {run.state.message}"
    # deploy/prefect.yaml filled its defaults from the environment of `prefect deploy`, without a warning
    assert deployment.parameters["params"]["input"] == str(data / "input")
    assert "EXCLUST_DASK_SCHEDULER" not in stack["deploy_output"]
    out = data / "explain"
    tree = ThresholdTree.from_json(out / "tree.json")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["algorithm"] == "mmdt" and metrics["k"] == 4 and metrics["d"] == 2 and metrics["n"] == 24_000
    # the tree agrees with the reference mixture it explains (the mixture itself overlaps: truth ARI is lower)
    assert metrics["ari_reference"] > 0.9 and metrics["error_rate"] < 0.05 and metrics["enr"] > 0
    assert metrics["ari_truth"] is not None
    assert set(metrics["seconds"]) >= {"load", "fit reference", "build tree", "score"}
    assert tree.n_leaves == 4 and (out / "rules.txt").read_text().count("cluster") == 4
    assert "<svg" in (out / "report.html").read_text()
    assert {"explain-metrics", "explain-rules", "explain-report"} <= set(artifacts)
    table = {r["metric"]: r["value"] for r in json.loads(artifacts["explain-metrics"].data)}
    assert table["algorithm"] == "mmdt" and table["k"] == 4
    # the report is a link to where the worker's outputs are served, and it opens
    url = stack["env"]["EXCLUST_OUTPUTS_URL"] + "explain/report.html"
    assert artifacts["explain-report"].data == f"[report.html]({url})"  # Prefect stores a link as markdown
    assert f"[open report.html]({url})" in artifacts["explain-rules"].data
    assert "<svg" in httpx.get(url, timeout=10).text
    assert "cluster 0:" in artifacts["explain-rules"].data

    t0 = time.monotonic()
    # The nightly deployment's own templates, a night named by hand; no scheduler_address: the worker's setting.
    nightly = {**deployment_parameters(stack, "label/label-nightly"), "date": "2026-11-20"}
    run, artifacts, deployment = _run_and_wait(stack["env"], "label/label-nightly", {"params": nightly})
    timings["label"] = time.monotonic() - t0
    assert run.state.is_completed(), f"{run.state.type}: {run.state.message}"
    assert deployment.schedules and deployment.schedules[0].schedule.cron == "30 2 * * *"
    assert deployment.global_concurrency_limit.limit == 1
    assert sorted(p.name for p in (data / "labelled").iterdir() if not p.name.startswith(".")) == ["date=2026-11-20"]
    labelled = pq.read_table(sorted((data / "labelled" / "date=2026-11-20").glob("*.parquet")))
    assert labelled.num_rows == 9_000
    clusters = labelled.column("cluster").to_numpy()
    assert ((clusters >= 0) & (clusters < 4)).all()
    X = np.column_stack([labelled.column("x0").to_numpy(), labelled.column("x1").to_numpy()])
    np.testing.assert_array_equal(clusters, tree.predict(X))
    counts = {str(r["cluster"]): r["rows"] for r in json.loads(artifacts["label-counts"].data)}
    assert counts["total"] == 9_000
    assert "label_file" in _scheduler_keys(stack["client"])  # the label run used the shared scheduler
    (stack["folder"] / "timings.json").write_text(json.dumps(timings))
    print("e2e timings (s):", {k: round(v, 1) for k, v in timings.items()})


def test_e2e_bad_input_run_fails_with_reason(stack):
    """A run on a missing input ends Failed with the file in its message; no output folder appears."""
    data = stack["data"]
    missing = data / "nowhere" / "part-0.parquet"
    run, _, _ = _run_and_wait(stack["env"], "explain/explain", {"params": {
        "input": str(missing), "output": str(data / "never"), "scheduler_address": stack["scheduler"],
    }}, timeout=240)
    assert run.state.is_failed(), f"{run.state.type}: {run.state.message}"
    assert str(missing) in run.state.message
    assert not (data / "never").exists()
    # the run's log says it in one line: no traceback, no engine repeat
    logs = _run_logs(stack, run.id, until=lambda logs: any(str(missing) in line for line in logs))
    said = [line for line in logs if str(missing) in line]
    assert len(said) == 1 and said[0].startswith("Run failed on bad input") and "\n" not in said[0], logs
    assert not any("Traceback" in line or "Engine execution exited" in line for line in logs), logs


def _run_logs(stack, flow_run_id, until) -> list[str]:
    """The run's log lines, read again until ``until(lines)`` holds: the worker ships its last lines in
    batches, so the test waits for the line it looks for, not for a number of seconds."""
    import prefect.settings
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: stack["env"]["PREFECT_API_URL"]}):
        with get_client(sync_client=True) as client:
            deadline = time.monotonic() + 120  # a bound on a hang only
            while True:
                found = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
                lines = [entry.message for entry in found]
                if until(lines) or time.monotonic() > deadline:
                    return lines
                time.sleep(0.5)


def test_e2e_a_deployment_schedule_fires_and_its_run_labels_the_scheduled_night(stack):
    """The server's scheduler (not the API) creates a run from a deployment's schedule; the worker labels that night.

    The deployment is label-nightly from deploy/prefect.yaml with a 10-second interval instead of 02:30
    each night, under another name, and its own folders.
    """
    from datetime import datetime, timedelta

    import prefect.settings
    import pyarrow.parquet as pq
    import yaml
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    from exclust.datasets.synthetic import write_gmm_parquet
    from exclust.tree import TreeBuilder

    data = stack["data"] / "scheduled"
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    left, right = b.split(root, feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    data.mkdir()
    b.build(feature_names=["x0", "x1"]).to_json(data / "tree.json")
    today = datetime.now(UTC).date()
    for day in (today, today + timedelta(days=1)):  # the run may be scheduled just after midnight
        write_gmm_parquet(data / "incoming" / f"date={day}", 2_000, n_components=2, n_features=2, rows_per_file=1_000,
                          random_state=3)

    doc = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    nightly = next(d for d in doc["deployments"] if d["name"] == "label-nightly")
    nightly.update(name="label-every-10s", schedules=[{"interval": 10, "active": True}])
    nightly["parameters"]["params"].update(tree=str(data / "tree.json"), input=str(data / "incoming" / "date={date}"),
                                           output=str(data / "labelled" / "date={date}"))
    doc["deployments"] = [nightly]
    spec = stack["folder"] / "scheduled.yaml"
    spec.write_text(yaml.safe_dump(doc))
    stack["svc"].run([str(BIN / "prefect"), "--no-prompt", "deploy", "--prefect-file", str(spec), "--name",
                      "label-every-10s"])

    with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: stack["env"]["PREFECT_API_URL"]}):
        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name("label/label-every-10s")
            assert deployment.global_concurrency_limit.limit == 1
            only_this = DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id]))
            done, deadline = None, time.monotonic() + 150
            while done is None and time.monotonic() < deadline:
                runs = client.read_flow_runs(deployment_filter=only_this)
                failed = [r for r in runs if r.state is not None and r.state.is_final() and not r.state.is_completed()]
                assert not failed, f"{failed[0].state.type}: {failed[0].state.message}"
                done = next((r for r in runs if r.state is not None and r.state.is_completed()), None)
                time.sleep(1)
            client.pause_deployment(deployment.id)  # no more runs while the other tests go on
    assert done is not None, f"no scheduled run completed in 150 s; runs: {[(r.name, r.state_type) for r in runs]}"
    assert done.auto_scheduled  # created by the server's scheduler, not through the API
    night = done.expected_start_time.astimezone(UTC).date()
    out = data / "labelled" / f"date={night}"
    assert pq.read_table(sorted(out.glob("*.parquet"))).num_rows == 2_000
    assert json.loads((out / "_labels.json").read_text())["n_rows"] == 2_000


def test_e2e_a_run_cancelled_through_the_api_ends_cancelled_and_leaves_nothing(stack):
    """Cancel an explain run the way the UI's Cancel button does; the process worker stops the flow's
    process with SIGTERM: the run ends Cancelled, with neither output nor staging.

    The run is held in its load step, without a timing window: its scheduler has no workers, so
    its first pass waits until the run is stopped."""
    import prefect.settings
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.deployments import run_deployment

    from exclust.datasets.synthetic import write_gmm_parquet

    data = stack["data"] / "to-cancel"
    write_gmm_parquet(data / "input", 4_000, n_components=2, n_features=2, rows_per_file=2_000, random_state=2)
    port = _free_port()
    idle = f"tcp://127.0.0.1:{port}"
    stack["svc"].start("dask-scheduler-no-workers", [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1",
                                                     "--port", str(port), "--dashboard-address", "127.0.0.1:0"])
    from exclust.dataplane.cluster import check_scheduler

    _wait(lambda: check_scheduler(idle, 5) is None, 120, "a Dask scheduler without workers")
    before = sorted(os.listdir(data))
    with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: stack["env"]["PREFECT_API_URL"]}):
        run = run_deployment("explain/explain", timeout=0, parameters={"params": {
            "input": str(data / "input"), "output": str(data / "out"), "features": "x0,x1", "n_clusters": 2,
            "scheduler_address": idle}})
        with get_client(sync_client=True) as client:
            only_run = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id]))

            def loading() -> bool:
                return any("] load: " in entry.message for entry in client.read_logs(log_filter=only_run))

            _wait(loading, 300, "the run's load step")
            assert [n for n in os.listdir(data) if n.startswith(".out.exclust-staging-")]  # staged before computing
            run, took = _cancel_and_wait(client, run.id)
    assert run.state.is_cancelled(), f"{run.state.type}: {run.state.message}"
    assert sorted(os.listdir(data)) == before  # no output, no staging, hidden entries included
    assert took < 10.0, f"the cancelled run's processes took {took:.1f} s to end"


def _run_processes(flow_run_id) -> list[str]:
    """The live processes of a flow run: the flow's process and all it started (a local cluster's workers,
    multiprocessing's resource tracker), told by the PREFECT__FLOW_RUN_ID the process worker gives the flow's
    process and they inherit; as "pid state command"."""
    key = f"PREFECT__FLOW_RUN_ID={flow_run_id}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if key not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                continue
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if state != "Z":
            found.append(f"{pid} {state} {command[:120]}")
    return found


def _cancel_and_wait(client, flow_run_id):
    """Cancel the run as the UI's Cancel button does (state Cancelling; the process worker then sends the flow's
    process group SIGTERM), wait until none of the run's processes is left and then until its state is final.
    Returns the run and the seconds until its processes were gone (the 180 s bound a hang only).

    The bound of issue 29 (a stop obeyed within 10 s) is on the run's processes. The state is Prefect's: its
    runner (3.9.1) marks the run Cancelled only once its 30 s grace after the SIGTERM has passed, however soon
    the flow's process ended (seen at load 22: the process gone 6-7 s after the request, Cancelled after 38-43
    s); the flow's engine leaves that state to the runner, so no flow can shorten it."""
    from prefect.states import Cancelling

    before = _run_processes(flow_run_id)
    assert before, "the flow run's process was not found"
    sent = time.monotonic()
    client.set_flow_run_state(flow_run_id, Cancelling(message="cancelled by the test"))
    deadline = sent + 180
    left = before
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _run_processes(flow_run_id)
    took = time.monotonic() - sent
    assert not left, f"the cancelled run's processes still ran after {took:.0f} s: {left}"
    while time.monotonic() < deadline:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and run.state.is_final():
            break
        time.sleep(0.5)
    return run, took


def test_e2e_a_label_run_cancelled_inside_its_task_ends_cancelled_within_10_s_and_leaves_nothing(stack, tmp_path):
    """Cancel a label run while its label task runs, for certain (tests/blocking_source.py: the task's rows wait for
    a file the test creates only once the run ended): Prefect's SIGTERM reaches the flow's process as Prefect's
    own termination signal, not as a KeyboardInterrupt, and the run must still not wait for its task (issue 29:
    stopped within 10 s), which on the shared Dask scheduler cannot be ended. It ends Cancelled, with neither
    output nor staging, and the task, released later, writes nothing."""
    import prefect.settings
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    from exclust.tree import TreeBuilder

    data = stack["data"] / "to-cancel-label"
    data.mkdir()
    b = TreeBuilder(n_features=2)
    node = b.add_node()
    left, right = b.split(node, feature=0, threshold=0.5)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    b.build(feature_names=["x0", "x1"]).to_json(data / "tree.json")
    started, release = tmp_path / "started", tmp_path / "release"
    spec = data / "rows.blocking"
    spec.write_text(json.dumps({"rows": 1000, "started": str(started), "release": str(release)}))
    before = sorted(os.listdir(data))
    params = {**deployment_parameters(stack, "label/label-nightly"), "tree": str(data / "tree.json"),
              "input": str(spec), "output": str(data / "out")}
    try:
        with prefect.settings.temporary_settings({prefect.settings.PREFECT_API_URL: stack["env"]["PREFECT_API_URL"]}):
            run = run_deployment("label/label-nightly", timeout=0, parameters={"params": params})
            with get_client(sync_client=True) as client:
                def task_started() -> bool:
                    state = client.read_flow_run(run.id).state
                    assert state is None or not state.is_final(), f"{state.type}: {state.message}"
                    return started.exists() and any(started.iterdir())

                _wait(task_started, 300, "the run's label task")
                assert [n for n in os.listdir(data) if n.startswith(".out.exclust-staging-")]  # the task writes there
                run, took = _cancel_and_wait(client, run.id)
    finally:
        release.touch()
    assert run.state.is_cancelled(), f"{run.state.type}: {run.state.message}"
    assert sorted(os.listdir(data)) == before  # no output, no staging, hidden entries included
    assert took < 10.0, f"the cancelled run's processes took {took:.1f} s to end"
    # the released task ends on the shared workers and finds its staging gone: it writes nothing
    _wait(lambda: not any(stack["client"].processing().values()), 120, "the released label task's end")
    assert sorted(os.listdir(data)) == before
