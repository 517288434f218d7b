"""End to end against real local services: a Prefect server, a Dask scheduler, two Dask workers.

Everything listens on 127.0.0.1 at free ports, with a temporary PREFECT_HOME (SQLite). The
deployments are registered from deploy/prefect.yaml with ``prefect deploy`` into a process work
pool, a ``prefect worker`` runs them, and the runs are created through the API the way the UI's
Run button does (``run_deployment(..., timeout=0)``). Select with ``pytest -k e2e``.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
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
                raise RuntimeError(f"{what}: a service exited early ({p.args[:3]}); log:\n{Path(log).read_text()[-3000:]}")
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

    def run(self, args: list[str], timeout: float = 240):
        proc = subprocess.run(args, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
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
    api_port, dask_port = _free_port(), _free_port()
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
        "EXCLUST_HOME": str(ROOT),
        "EXCLUST_DATA": str(data),
        "EXCLUST_DASK_SCHEDULER": scheduler,
        "DASK_LOGGING__DISTRIBUTED": "warning",
    }
    (folder / "home").mkdir()
    svc = Services(folder, env)
    try:
        server = svc.start("prefect-server", [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(api_port)])
        svc.start("dask-scheduler", [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(dask_port),
                                     "--dashboard-address", "127.0.0.1:0"])
        for i in range(2):
            svc.start(f"dask-worker-{i}", [str(BIN / "dask"), "worker", scheduler, "--host", "127.0.0.1", "--nthreads", "1",
                                           "--memory-limit", "2GiB", "--no-dashboard", "--name", f"w{i}"])
        _wait(lambda: httpx.get(f"{api}/health", timeout=5).status_code == 200, 240, "Prefect server", svc.procs[:1])

        from distributed import Client

        client = Client(scheduler, timeout="60s")
        _wait(lambda: len(client.scheduler_info()["workers"]) == 2, 120, "two Dask workers", svc.procs[1:])
        svc.run([str(BIN / "prefect"), "work-pool", "create", POOL, "--type", "process"])
        svc.run([str(BIN / "prefect"), "--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml"])
        svc.start("prefect-worker", [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--type", "process"])
        setup = time.monotonic() - t0
        yield {"api": api, "scheduler": scheduler, "client": client, "data": data, "folder": folder,
               "env": env, "setup_seconds": setup, "server": server}
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


def _scheduler_keys(client) -> set[str]:
    """Names of the task groups the shared Dask scheduler has run (proof the flows used it)."""
    return set(client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes)))


def test_e2e_explain_then_label_through_deployments(stack):
    """Create explain and label runs through the API; check outputs, artifacts and the labelled Parquet."""
    import pyarrow.parquet as pq

    from exclust.datasets.synthetic import write_gmm_parquet
    from exclust.tree import ThresholdTree

    data = stack["data"]
    write_gmm_parquet(data / "input", 24_000, n_components=4, n_features=2, rows_per_file=6_000, random_state=1, noise_scale=3.0)
    write_gmm_parquet(data / "incoming", 9_000, n_components=4, n_features=2, rows_per_file=3_000, random_state=5, noise_scale=3.0)
    timings = {"setup": stack["setup_seconds"]}

    t0 = time.monotonic()
    run, artifacts, deployment = _run_and_wait(stack["env"], "explain/explain", {"params": {
        "input": str(data / "input"), "output": str(data / "explain"), "columns": ["x0", "x1"],
        "n_clusters": 4, "truth_column": "truth", "threshold": "gaussian",
        "scheduler_address": stack["scheduler"],
    }})
    timings["explain"] = time.monotonic() - t0
    assert run.state.is_completed(), f"{run.state.type}: {run.state.message}"
    # deploy/prefect.yaml filled its defaults from the environment of `prefect deploy`
    assert deployment.parameters["params"]["scheduler_address"] == stack["scheduler"]
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
    assert (out / "report.html").resolve().as_uri() in artifacts["explain-report"].data
    assert "cluster 0:" in artifacts["explain-rules"].data

    t0 = time.monotonic()
    run, artifacts, deployment = _run_and_wait(stack["env"], "label/label-nightly", {"params": {
        "tree": str(out / "tree.json"), "input": str(data / "incoming"), "output": str(data / "labelled"),
        "scheduler_address": stack["scheduler"],
    }})
    timings["label"] = time.monotonic() - t0
    assert run.state.is_completed(), f"{run.state.type}: {run.state.message}"
    assert deployment.schedules and deployment.schedules[0].schedule.cron == "30 2 * * *"
    labelled = pq.read_table(sorted((data / "labelled").glob("*.parquet")))
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
