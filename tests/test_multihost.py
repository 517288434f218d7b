"""A cluster of several hosts, for real: the Dask scheduler, two Dask workers and the S3-compatible
store (moto) each run in a network namespace of their own, reached by addresses of a private /24 on
a bridge. Every host has its own temporary folder and working directory on a private tmpfs, which
also hides the driver's temporary folders from it; the data live only on the object store.

- explain from s3:// and label to s3://, through the CLI and through the flows, give the tree and
  the rows of the single-host run;
- a worker host killed (every process of its namespace) during ``label``: every row is committed
  exactly once;
- the scheduler killed during ``label``: one line, exit 1, nothing committed and no staging left,
  also once a frozen worker of the lost scheduler resumes and finishes the task it held.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) for ``ip netns`` and mounts; skips, saying why, where
the kernel refuses. ``pytest -k multihost`` runs it.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MOTO_PORT, SCHEDULER_PORT = 5000, 8786
N_FILES, ROWS_PER_FILE = 16, 600
CENTERS = np.array([[-8.0, 0.0], [0.0, 8.0], [8.0, 0.0]])
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


def _free_subnet() -> str:
    """The first 10.231.N.0/24 that no interface or route of this machine uses (N from 7)."""
    used = _ip("-4", "route", "show", "table", "all").stdout + _ip("-4", "addr").stdout
    for third in range(7, 255):
        if f"10.231.{third}." not in used:
            return f"10.231.{third}"
    pytest.skip("no free 10.231.N.0/24 for the test's namespaces")


def _wait_for(condition, what: str, timeout: float = 300.0, every: float = 0.02):
    """Poll ``condition`` until it returns something true; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


class Network:
    """A bridge carrying this test's own /24 and one network namespace per host; ``close`` removes all."""

    # A host's private tmpfs hides the driver's temporary folders; inside it, the host's own folder
    # is its working directory, HOME and TMPDIR. ``ip netns exec`` gives every host its own mount
    # namespace already; ``unshare`` makes its mounts private for certain.
    HOST_SHELL = ('mount -t tmpfs tmpfs "$1" && mkdir "$1/$2" && cd "$1/$2" && '
                  'export HOME="$1/$2" TMPDIR="$1/$2" && shift 2 && exec "$@"')

    def __init__(self, hidden: Path, logs: Path) -> None:
        self.tag = f"exmh{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"
        self.hidden, self.logs = hidden, logs
        self.hosts: dict[str, str] = {}  # host name -> namespace
        self.veths: dict[str, str] = {}  # host name -> its veth on the bridge
        self.procs: dict[str, list[subprocess.Popen]] = {}
        self.count = 0
        self.subnet = _free_subnet()
        made = _ip("link", "add", self.bridge, "type", "bridge")
        if made.returncode:
            pytest.skip(f"cannot make network devices here (ip link add: {made.stderr.strip()})")
        try:
            self._run("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
            self._run("link", "set", self.bridge, "up")
        except BaseException:
            _ip("link", "del", self.bridge)
            raise

    def _run(self, *args: str) -> None:
        done = _ip(*args)
        if done.returncode:
            raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")

    def add_host(self, name: str, octet: int) -> str:
        """A namespace joined to the bridge at SUBNET.octet; returns that address."""
        self.count += 1
        ns, veth = f"{self.tag}-{name}{self.count}", f"{self.tag}{name}{self.count}"
        made = _ip("netns", "add", ns)
        if made.returncode:
            pytest.skip(f"the kernel refuses network namespaces here (ip netns add: {made.stderr.strip()})")
        self.hosts[name], self.veths[name] = ns, veth
        self._run("link", "add", veth, "type", "veth", "peer", "name", veth + "p", "netns", ns)
        self._run("link", "set", veth, "master", self.bridge, "up")
        address = f"{self.subnet}.{octet}"
        self._run("-n", ns, "addr", "add", f"{address}/24", "dev", veth + "p")
        self._run("-n", ns, "link", "set", veth + "p", "up")
        self._run("-n", ns, "link", "set", "lo", "up")
        return address

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Run ``argv`` on host ``name``, in its private folder; output to LOGS/NAMESPACE.log."""
        log = open(self.logs / f"{self.hosts[name]}.log", "ab")
        with log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.hosts[name], "unshare", "--mount", "--propagation", "private",
                 "sh", "-c", self.HOST_SHELL, "sh", str(self.hidden), name, *argv],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd="/")
        self.procs.setdefault(name, []).append(proc)
        return proc

    def pids(self, name: str) -> list[int]:
        return [int(p) for p in _ip("netns", "pids", self.hosts[name]).stdout.split()]

    def signal(self, name: str, sig: int) -> list[int]:
        pids = self.pids(name)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def kill(self, name: str) -> None:
        """The host goes away: SIGKILL every process of its namespace, and wait until none is left."""
        self.signal(name, signal.SIGKILL)
        for proc in self.procs.get(name, []):
            proc.wait(timeout=30)
        _wait_for(lambda: not self.pids(name), f"the processes of host {name} to end", timeout=30)

    def remove_host(self, name: str) -> None:
        self.kill(name)
        self._forget(name)

    def _forget(self, name: str) -> None:
        # Sockets closing in the namespace may keep it (and its veth) alive a while after its name goes.
        veth = self.veths.pop(name, None)
        if veth:
            _ip("link", "del", veth)
        _ip("netns", "del", self.hosts.pop(name))

    def close(self) -> None:
        for name in list(self.hosts):
            try:
                self.remove_host(name)
            except Exception:  # keep removing the others; the namespace goes once its processes are gone
                self.signal(name, signal.SIGKILL)
                self._forget(name)
        _ip("link", "del", self.bridge)


def host_env(endpoint: str) -> dict[str, str]:
    """What every host is given: this checkout, the store's address and credentials, nothing of the driver's folders."""
    env = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(ROOT), "AWS_ENDPOINT_URL": endpoint,
           "DASK_DISTRIBUTED__WORKER__DAEMON": "false", **CREDENTIALS}
    if os.environ.get("NUMBA_CACHE_DIR"):  # compiled kernels only, as an image would bake them in
        env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
    return env


@dataclass
class Store:
    endpoint: str
    bucket: str
    options: dict
    fs: object
    frame: pd.DataFrame  # every row of the input, with its id

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def keys(self, prefix: str = "") -> list[str]:
        self.fs.invalidate_cache()
        root = f"{self.bucket}/{prefix}".rstrip("/")
        try:
            return sorted(k[len(root) + 1:] for k in self.fs.find(root))
        except FileNotFoundError:
            return []

    def read_rows(self, prefix: str) -> pd.DataFrame:
        """Every row of the Parquet files under ``prefix``, sorted by id."""
        frames = [pq.read_table(io.BytesIO(self.fs.cat_file(f"{self.bucket}/{prefix}/{k}"))).to_pandas()
                  for k in self.keys(prefix) if k.endswith(".parquet")]
        return pd.concat(frames).sort_values("id").reset_index(drop=True)


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CAP_NET_ADMIN)")
    if not shutil.which("ip") or not shutil.which("unshare"):
        pytest.skip("iproute2 (ip) and util-linux (unshare) are needed to make the hosts")
    logs = tmp_path_factory.mktemp("multihost-logs")
    net = Network(hidden=tmp_path_factory.getbasetemp(), logs=logs)
    try:
        yield net
    finally:
        net.close()


@pytest.fixture(scope="module")
def store(network):
    """moto's S3 server alone on its host; the input (N_FILES Parquet files, 3 blobs, an id column) on it."""
    import s3fs

    address = network.add_host("m", 5)
    endpoint = f"http://{address}:{MOTO_PORT}"
    network.start("m", [str(BIN / "moto_server"), "-H", address, "-p", str(MOTO_PORT)], host_env(endpoint))

    def answers() -> bool:
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            return True
        except OSError:
            return False

    _wait_for(answers, f"moto_server on {endpoint}", every=0.2)
    options = {"key": "testing", "secret": "testing", "endpoint_url": endpoint}
    fs = s3fs.S3FileSystem(**options)
    bucket = "multihost"
    fs.mkdir(bucket)
    rng = np.random.default_rng(7)
    n = N_FILES * ROWS_PER_FILE
    X = CENTERS[rng.integers(0, len(CENTERS), size=n)] + rng.normal(size=(n, 2))
    frame = pd.DataFrame({"id": np.arange(n), "x0": X[:, 0], "x1": X[:, 1]})
    for i in range(N_FILES):
        buffer = io.BytesIO()
        frame.iloc[i * ROWS_PER_FILE:(i + 1) * ROWS_PER_FILE].to_parquet(buffer, index=False)
        fs.pipe(f"{bucket}/events/part-{i:02d}.parquet", buffer.getvalue())
    return Store(endpoint, bucket, options, fs, frame)


@dataclass
class Cluster:
    address: str
    client: object  # the test's own client, to watch the scheduler
    workers: dict  # host name -> worker address

    def live_workers(self) -> list[str]:
        """Names of the workers the scheduler knows now."""
        known = self.client.scheduler_info(n_workers=-1)["workers"]
        return [name for name, address in self.workers.items() if address in known]


class Clusters:
    """`dask scheduler` on one host and a `dask worker` (1 thread) on each of two others, started
    when a test needs them; a test that kills a host leaves the survivors to the next test that
    can do with them (the scheduler alive, enough workers), so the module starts as few as it can."""

    WORKERS = (("w1", 3), ("w2", 4))

    def __init__(self, network: Network, store: Store) -> None:
        self.network, self.env = network, host_env(store.endpoint)
        self.current: Cluster | None = None
        self.booting: tuple[str, dict] | None = None  # started processes not yet waited for

    def get(self, n_workers: int) -> Cluster:
        c = self.current
        if c is not None and c.client.status == "running" and len(c.live_workers()) >= n_workers:
            return c
        if c is not None or self.booting is None:
            self.close()
            self.boot()
        address, hosts = self.booting
        self.booting = None
        return self._connect(address, hosts)

    def boot(self) -> None:
        """Start the scheduler's and the workers' processes; ``get`` waits for them."""
        net = self.network
        s = net.add_host("s", 2)
        address = f"tcp://{s}:{SCHEDULER_PORT}"
        net.start("s", [str(BIN / "dask"), "scheduler", "--host", s, "--port", str(SCHEDULER_PORT), "--no-dashboard"],
                  self.env)
        hosts = {}
        for name, octet in self.WORKERS:
            hosts[name] = net.add_host(name, octet)
            net.start(name, [str(BIN / "dask"), "worker", address, "--host", hosts[name], "--name", name,
                             "--nthreads", "1", "--memory-limit", "1GiB", "--no-dashboard", "--local-directory",
                             "dask"],
                      self.env)
        self.booting = (address, hosts)

    def _connect(self, address: str, hosts: dict) -> Cluster:
        from distributed import Client

        client = Client(address, timeout="60s", set_as_default=False)  # each run picks its cluster itself
        self.current = Cluster(address, client, {})
        client.wait_for_workers(len(hosts), timeout=300)
        self.current.workers = {w["name"]: a for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
        assert {n: a.split("://")[1].rsplit(":", 1)[0] for n, a in self.current.workers.items()} == hosts
        return self.current

    def close(self) -> None:
        if self.current is not None:
            from exclust.dataplane.cluster import close_quietly

            close_quietly(self.current.client)  # its scheduler may be gone: no reconnection traceback
            self.current = None
        self.booting = None
        for name in ["s", *(n for n, _ in self.WORKERS)]:
            if name in self.network.hosts:
                self.network.remove_host(name)


@pytest.fixture(scope="module")
def clusters(network, store):
    pool = Clusters(network, store)
    try:
        pool.boot()  # the hosts start while the next fixtures (a local cluster, a Prefect server) do
        yield pool
    finally:
        pool.close()


def driver_env(store: Store) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "AWS_ENDPOINT_URL": store.endpoint, **CREDENTIALS}


def start_cli(*args: str, env: dict[str, str]) -> subprocess.Popen:
    """``exclust ARGS`` on the driver's host, started; ``finished`` waits for it."""
    return subprocess.Popen([sys.executable, "-m", "exclust.cli", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def write_tree(store: Store, key: str) -> None:
    """A tree cutting x0 at 0 (cluster 0 left, 1 right), on the store."""
    from exclust.tree import TreeBuilder

    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    store.fs.pipe(f"{store.bucket}/{key}", b.build(feature_names=["x0", "x1"]).to_json().encode())


def finished(run: subprocess.Popen) -> str:
    """The standard output of a command started with ``start_cli``, once it succeeded."""
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    return out


def test_multihost_hosts_see_only_the_store_and_runs_match_one_host(clusters, store, network, dask_client, prefect_api,
                                                                 tmp_path, monkeypatch, request):
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import run_explain
    from exclust.jobs.label.labeling import label_parquet
    from flows.explain import explain as explain_flow
    from flows.label import label as label_flow
    from flows.params import ExplainParams, LabelParams

    cluster = clusters.get(n_workers=2)
    client = cluster.client
    # Each host has its own working directory and temporary folder, and none sees the driver's.
    assert not any(client.run(os.path.exists, str(tmp_path)).values())
    cwds = client.run(os.getcwd)
    assert sorted(cwds.values()) == [str(network.hidden / "w1"), str(network.hidden / "w2")]
    assert set(client.run(lambda: os.environ["TMPDIR"]).values()) == set(cwds.values())

    # The CLI on the cluster of hosts, from s3:// to s3://, credentials from the AWS_* variables;
    # it runs while this process makes the single-host run and calls the flows.
    events, env = store.url("events"), driver_env(store)
    cli_explain = start_cli("explain", "--input", events, "--features", "x0,x1", "--k", "3", "--out",
                            store.url("runs/cli"), "--scheduler", cluster.address, "--quiet", env=env)

    # The single-host run: the session's local cluster on this machine, outputs in a local folder.
    config = ExplainConfig(input=events, features=["x0", "x1"], k=3, storage_options=store.options)
    run_explain(config, tmp_path / "single", scheduler=dask_client.scheduler.address)
    with dask_client.as_current():
        label_parquet(tmp_path / "single" / "tree.json", events, tmp_path / "single-labels",
                      storage_options=store.options)
    single_tree = json.loads((tmp_path / "single" / "tree.json").read_text())
    single_rows = pd.concat(pd.read_parquet(p) for p in (tmp_path / "single-labels").glob("*.parquet"))
    single_rows = single_rows.sort_values("id").reset_index(drop=True)
    assert len(single_rows) == len(store.frame) and single_rows["cluster"].nunique() == 3

    # The flows, called in-process with the scheduler's address; the store's variables as a worker has them.
    for key, value in {"AWS_ENDPOINT_URL": store.endpoint, **CREDENTIALS}.items():
        monkeypatch.setenv(key, value)
    # s3fs keeps one filesystem per set of arguments, whatever the environment said when it was
    # made: forget those made against the hosts' store once the variables are restored, or a later
    # test's filesystem made from the session store's variables would reach this one.
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    request.addfinalizer(s3fs.S3FileSystem.clear_instance_cache)
    state = explain_flow(ExplainParams(input=events, output=store.url("runs/flow"), columns="x0,x1", n_clusters=3,
                                       scheduler_address=cluster.address), return_state=True)
    assert state.is_completed(), state.message
    finished(cli_explain)
    cli_label = start_cli("label", "--tree", store.url("runs/cli/tree.json"), "--input", events,
                    "--out", store.url("labelled/cli"), "--scheduler", cluster.address, "--quiet", env=env)
    state = label_flow(LabelParams(tree=store.url("runs/flow/tree.json"), input=events,
                                   output=store.url("labelled/flow"), scheduler_address=cluster.address),
                       return_state=True)
    assert state.is_completed(), state.message
    assert f"labelled {len(store.frame)} rows in {N_FILES} file(s)" in finished(cli_label)

    for run in ("cli", "flow"):
        assert json.loads(store.fs.cat_file(f"{store.bucket}/runs/{run}/tree.json")) == single_tree, run
        pd.testing.assert_frame_equal(store.read_rows(f"labelled/{run}"), single_rows)
        manifest = json.loads(store.fs.cat_file(f"{store.bucket}/labelled/{run}/_SUCCESS"))
        assert manifest["rows"] == len(store.frame), run
    assert not [k for k in store.keys() if "exclust-staging" in k]  # committed outputs only, no staging left


def start_label(store: Store, cluster: Cluster, out: str) -> subprocess.Popen:
    write_tree(store, "models/cut/tree.json")
    return start_cli("label", "--tree", store.url("models/cut/tree.json"), "--input", store.url("events"),
               "--out", store.url(out), "--scheduler", cluster.address, "--quiet", env=driver_env(store))


def wait_until_holding_a_label_task(cluster: Cluster, worker: str, run: subprocess.Popen) -> list[str]:
    """Block until ``worker`` is processing a task of the labelling run; the keys it holds."""
    address = cluster.workers[worker]

    def held():
        keys = [k for k in cluster.client.processing(workers=[address]).get(address, ()) if k.startswith("label_file-")]
        return keys or run.poll() is not None

    keys = _wait_for(held, f"worker {worker} to hold a task of the run")
    assert run.poll() is None, f"the run ended before {worker} held a task of it: {run.communicate()}"
    return keys


def test_multihost_a_worker_host_lost_during_label_commits_every_row_once(clusters, store, network):
    cluster = clusters.get(n_workers=2)
    run = start_label(store, cluster, "labelled/lost-worker")
    wait_until_holding_a_label_task(cluster, "w2", run)
    network.kill("w2")  # the host goes away with every process on it, mid-task
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    assert cluster.workers["w2"] not in cluster.client.scheduler_info(n_workers=-1)["workers"]
    manifest = json.loads(store.fs.cat_file(f"{store.bucket}/labelled/lost-worker/_SUCCESS"))
    assert manifest["rows"] == len(store.frame)
    assert sorted(f["path"] for f in manifest["files"]) == ["_labels.json"] + [
        f"part-{i:02d}.parquet" for i in range(N_FILES)]
    rows = store.read_rows("labelled/lost-worker")
    assert rows["id"].tolist() == store.frame["id"].tolist()  # every row once: none lost, none twice
    pd.testing.assert_frame_equal(rows[["id", "x0", "x1"]], store.frame)
    assert (rows["cluster"] == (rows["x0"] > 0).astype(int)).all()


def test_multihost_the_scheduler_lost_during_label_ends_in_one_line_and_commits_nothing(clusters, store, network):
    cluster = clusters.get(n_workers=1)
    frozen = cluster.live_workers()[0]
    run = start_label(store, cluster, "labelled/lost-scheduler")
    ours = lambda: [k for k in store.keys("labelled") if "lost-scheduler" in k]  # noqa: E731 (output and staging)
    staged = lambda: [k for k in ours() if k.endswith(".parquet")]  # noqa: E731
    _wait_for(lambda: staged() or run.poll() is not None, "a labelled file in the run's staging")
    wait_until_holding_a_label_task(cluster, frozen, run)
    network.signal(frozen, signal.SIGSTOP)  # frozen holding a task of the run: the run cannot finish
    try:
        assert run.poll() is None and staged()
        network.kill("s")
        out, err = run.communicate(timeout=300)
        assert run.returncode == 1, err[-3000:]
        assert err.count("\n") == 1 and err.startswith("exclust label: error: lost the Dask scheduler"), err
        assert "the output it was writing is not committed" in err
        assert ours() == []  # no output, no staging
    finally:
        network.signal(frozen, signal.SIGCONT)
    # The frozen worker wakes up without a scheduler: it finishes its task, finds the staging
    # gone (removing again any file it wrote), and closes.
    _wait_for(lambda: not network.pids(frozen), "the worker of the lost scheduler to close", every=0.2)
    assert ours() == []
