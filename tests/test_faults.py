"""Faults: bad input files, a Dask worker killed mid-run, two runs racing for one output folder."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed.diagnostics.plugin import WorkerPlugin

from exclust.datasets.synthetic import write_gmm_parquet

ROOT = Path(__file__).resolve().parents[1]


def test_explain_flow_on_missing_or_corrupt_parquet_fails_naming_the_file(tmp_path, prefect_api, dask_client):
    from flows.explain import explain as explain_flow
    from flows.params import ExplainParams

    missing = tmp_path / "gone" / "part-00000.parquet"
    state = explain_flow(params={"input": str(missing), "output": str(tmp_path / "out")}, return_state=True)
    assert state.is_failed() and str(missing) in state.message
    assert not (tmp_path / "out").exists()

    write_gmm_parquet(tmp_path / "data", 3000, n_components=3, rows_per_file=1000, random_state=0)
    corrupt = tmp_path / "data" / "part-00001.parquet"
    corrupt.write_bytes(corrupt.read_bytes()[: 200])  # a truncated upload: no footer
    params = ExplainParams(input=str(tmp_path / "data"), output=str(tmp_path / "out"), n_clusters=3,
                           scheduler_address=dask_client.scheduler.address)
    state = explain_flow(params, return_state=True)
    assert state.is_failed(), state.message
    assert str(corrupt) in state.message
    assert not (tmp_path / "out").exists()
    assert sorted(os.listdir(tmp_path)) == ["data"]  # no output, no staging, hidden entries included


class KillOnFirstHeldResult(WorkerPlugin):
    """A worker plugin: the first worker process to hold a task's result kills itself (SIGKILL), once
    for the whole cluster (the marker file, made exclusively, records its pid and the key)."""

    name = "kill-on-first-held-result"

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "memory":
            return
        try:
            fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()} {key}".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def test_worker_killed_mid_run_does_not_change_the_result(tmp_path, prefect_api):
    """SIGKILL one of two worker processes during an explain flow run: Dask recomputes what it held.

    The kill is driven by the run itself, not by a timing window: the first worker to hold a result
    of the disturbed run kills itself, so the run must recompute what it lost."""
    from distributed import Client, LocalCluster

    from flows.explain import explain as explain_flow
    from flows.params import ExplainParams

    write_gmm_parquet(tmp_path / "data", 40_000, n_components=4, n_features=2, rows_per_file=5_000, random_state=3)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", memory_limit="2GiB") as cluster, Client(cluster) as client:

        def run(out: str):
            # No standing table: its proven bound is searched within a wall-clock budget
            # (OptimalTree's max_seconds), so its figures are not a function of the data alone.
            params = ExplainParams(input=str(tmp_path / "data"), output=str(tmp_path / out), columns=["x0", "x1"],
                                   n_clusters=4, truth_column="truth", scheduler_address=cluster.scheduler_address,
                                   standing=False)
            return explain_flow(params, return_state=True)

        calm_state = run("calm")
        assert calm_state.is_completed(), calm_state.message
        # The calm run's data are released with its client: once the workers hold nothing, any
        # result a worker holds from now on belongs to the disturbed run.
        deadline = time.monotonic() + 300  # a bound on a hang only: a loaded machine takes its time
        while any(client.has_what().values()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(client.has_what().values()), "the calm run's data were not released"
        before = set(client.run(os.getpid).values())
        marker = tmp_path / "killed-holding"
        client.register_plugin(KillOnFirstHeldResult(str(marker)))
        state = run("disturbed")
        client.unregister_worker_plugin(KillOnFirstHeldResult.name)
        assert marker.exists(), "no worker held a result of the run"
        victim = int(marker.read_text().split()[0])
        assert victim in before
        assert state.is_completed(), state.message
        assert victim not in client.run(os.getpid).values()  # the nanny started a fresh worker process
    assert (tmp_path / "disturbed" / "tree.json").read_text() == (tmp_path / "calm" / "tree.json").read_text()
    calm = json.loads((tmp_path / "calm" / "metrics.json").read_text())
    disturbed = json.loads((tmp_path / "disturbed" / "metrics.json").read_text())
    calm.pop("seconds"), disturbed.pop("seconds")
    assert disturbed == calm


WRITER = """
import random, sys, time
from exclust.outputs.staging import atomic_output_dir
name, target, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(name)
for r in range(rounds):
    with atomic_output_dir(target) as tmp:
        for i in range(15):
            (tmp / f"{name}-{i}.txt").write_text(f"{name} round {r}")
            time.sleep(rng.uniform(0, 0.004))
"""


def test_two_processes_writing_one_folder_never_mix(tmp_path):
    target = tmp_path / "shared-out"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, name, str(target), "6"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in ("alpha", "beta")
    ]
    seen: list[set[str]] = []
    while any(p.poll() is None for p in procs):
        try:
            names = {n.split("-")[0] for n in os.listdir(target) if n.endswith(".txt")}
        except FileNotFoundError:
            names = set()
        if names:
            seen.append(names)
        time.sleep(0.002)
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err
    files = sorted(n for n in os.listdir(target) if n.endswith(".txt"))
    writers = {n.split("-")[0] for n in files}
    assert len(writers) == 1 and len(files) == 15  # one run's complete result
    winner = writers.pop()
    assert all((target / f).read_text().startswith(winner) for f in files)
    assert json.loads((target / ".exclust-output").read_text())["written_by"] == "exclust"
    assert all(len(s) == 1 for s in seen)  # never a mixed listing while they raced
    assert sorted(os.listdir(tmp_path)) == ["shared-out"]  # no lock file, no staging, nothing hidden


@pytest.mark.slow
def test_two_explain_commands_racing_for_one_folder_leave_one_whole_result(tmp_path, dask_client):
    """Two `exclust explain` processes (MMDT and CART) write the same --out at once: one complete result wins."""
    write_gmm_parquet(tmp_path / "data", 6000, n_components=3, n_features=2, rows_per_file=2000, random_state=8)
    out = tmp_path / "shared"
    common = ["--input", str(tmp_path / "data"), "--features", "x0,x1", "--k", "3", "--out", str(out),
              "--scheduler", dask_client.scheduler.address, "--quiet"]
    procs = [
        subprocess.Popen([sys.executable, "-m", "exclust.cli", "explain", "--algorithm", algo, *common], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for algo in ("mmdt", "cart")
    ]
    try:
        for p in procs:
            _, err = p.communicate(timeout=300)  # a bound on a hang only
            assert p.returncode == 0, err
    finally:  # a failed bound must not leave the commands running into the next tests (seen at load 40)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    metrics = json.loads((out / "metrics.json").read_text())
    tree = json.loads((out / "tree.json").read_text())
    assert metrics["algorithm"] in ("mmdt", "cart")
    assert tree["meta"]["algorithm"] == metrics["algorithm"]  # tree and metrics come from the same run
    assert metrics["algorithm"].upper() in (out / "report.html").read_text().upper()
    assert sorted(os.listdir(tmp_path)) == ["data", "shared"]  # no .shared.lock (issue 12), no staging


def test_a_run_computes_on_its_own_client_even_inside_a_callers_client(dask_client):
    """A caller's client entered as a context manager is its context's current client; the run's
    computations must still land on the run's client, so that closing it releases all they made."""
    from distributed import Client, default_client

    from exclust.dataplane.cluster import dask_cluster

    address = dask_client.scheduler.address
    with Client(address) as callers:
        with dask_cluster(address) as run_client:
            assert run_client is not callers
            assert default_client() is run_client
        assert default_client() is callers
