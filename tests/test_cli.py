"""The exclust command: options, exit codes, messages, and the files it writes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from process_groups import wait_for_group_to_end

from exclust.cli import build_parser, main
from exclust.tree import TreeBuilder

ROOT = Path(__file__).resolve().parents[1]


def _tree(path):
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    left, right = b.split(root, feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    b.build(feature_names=["a", "b"]).to_json(path)


def _parts(folder, n_files=2, rows=500):
    rng = np.random.default_rng(3)
    folder.mkdir()
    for i in range(n_files):
        pq.write_table(pa.table({"a": rng.normal(size=rows), "b": rng.normal(size=rows)}), folder / f"p{i}.parquet")


def test_parser_knows_the_issue_options():
    args = build_parser().parse_args(
        "explain --input d --features a,b --algorithm exkmc --k 4 --leaves 8 --reference labels:lab "
        "--truth t --scheduler tcp://127.0.0.1:8786 --out o".split()
    )
    assert (args.algorithm, args.n_clusters, args.leaves, args.reference, args.scheduler_address) == (
        "exkmc", 4, 8, "labels:lab", "tcp://127.0.0.1:8786")
    assert build_parser().parse_args(["demo"]).output == "exclust-demo"
    with pytest.raises(SystemExit):
        build_parser().parse_args("explain --input d --k 4 --algorithm nope --out o".split())


def test_label_command_writes_labelled_parquet(tmp_path, capsys, dask_client):
    _tree(tmp_path / "tree.json")
    _parts(tmp_path / "in")
    code = main(["label", "--tree", str(tmp_path / "tree.json"), "--input", str(tmp_path / "in"),
                 "--out", str(tmp_path / "lab"), "--scheduler", dask_client.scheduler.address, "--quiet"])
    assert code == 0
    out = capsys.readouterr().out
    assert "labelled 1000 rows in 2 file(s)" in out
    t = pq.read_table(sorted((tmp_path / "lab").glob("*.parquet")))
    np.testing.assert_array_equal(t.column("cluster").to_numpy(), (t.column("a").to_numpy() > 0).astype(int))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["label", "--tree", "{tmp}/nope.json", "--input", "{tmp}/in", "--out", "{tmp}/o"],
         "tree file not found: {tmp}/nope.json"),
        (["label", "--tree", "{tmp}/tree.json", "--input", "{tmp}/none", "--out", "{tmp}/o"],
         "input not found: {tmp}/none"),
        (["label", "--tree", "{tmp}/tree.json", "--input", "{tmp}/in", "--out", "/"], "filesystem root"),
        (["label", "--tree", "{tmp}/bad.json", "--input", "{tmp}/in", "--out", "{tmp}/o"], "not valid JSON"),
        (["label", "--tree", "{tmp}/tree.json", "--input", "{tmp}/in", "--out", "{tmp}/o", "--storage-option", "anon"],
         "storage option 'anon' is not key=value"),
        (["label", "--tree", "{tmp}/tree.json", "--input", "{tmp}/in", "--out", "{tmp}/in/o"], "lies inside the input"),
        (["label", "--tree", "{tmp}/tree.json", "--input", "{tmp}/in", "--out", "{tmp}"], "contains the input"),
        (["explain", "--input", "{tmp}/none", "--k", "3", "--out", "{tmp}/o"], "input not found"),
        (["explain", "--input", "{tmp}/in", "--k", "3", "--reference", "dbscan", "--out", "{tmp}/o"],
         "gmm, kmeans, kmedians or labels:COLUMN"),
        (["explain", "--input", "{tmp}/in", "--k", "3", "--algorithm", "concept-mmdt", "--out", "{tmp}/o"],
         "--concepts"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, capsys, argv, message):
    _tree(tmp_path / "tree.json")
    (tmp_path / "bad.json").write_text("{not json")
    _parts(tmp_path / "in", n_files=1, rows=20)
    code = main([a.format(tmp=tmp_path) for a in argv])
    assert code == 2
    err = capsys.readouterr().err
    assert message.format(tmp=tmp_path) in err and err.startswith(f"exclust {argv[0]}: error:")
    assert err.count("\n") == 1  # one line
    assert not (tmp_path / "o").exists() and not (tmp_path / "in" / "o").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "exclust.cli", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and "explain" in proc.stdout and "demo" in proc.stdout


def test_explain_command_writes_outputs(tmp_path, capsys, dask_client):
    from exclust.datasets.synthetic import write_gmm_parquet

    write_gmm_parquet(tmp_path / "data", 8000, n_components=3, n_features=2, rows_per_file=2000, random_state=6,
                      noise_scale=3.0)
    code = main(["explain", "--input", str(tmp_path / "data"), "--features", "x0,x1", "--algorithm", "mmdt",
                 "--k", "3", "--threshold", "exact", "--reference", "kmeans", "--truth", "truth",
                 "--scheduler", dask_client.scheduler.address, "--out", str(tmp_path / "out")])
    assert code == 0
    captured = capsys.readouterr()
    assert "fit reference done in" in captured.err  # progress lines with elapsed seconds
    assert "cluster 2:" in captured.out and "ari_truth=" in captured.out
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert (metrics["algorithm"], metrics["k"], metrics["d"], metrics["reference"], metrics["threshold"]) == (
        "mmdt", 3, 2, "kmeans", "exact")
    assert metrics["enr"] > 0 and {"load", "fit reference", "build tree", "score"} <= set(metrics["seconds"])
    assert (tmp_path / "out" / "report.html").stat().st_size > 1000


def _demo(tmp_path, *options: str) -> subprocess.CompletedProcess:
    """`exclust demo` with an empty HOME and no Prefect or Dask settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DASK_"))}
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    # A Prefect flow run here would need an API: none is configured and no temporary server may start.
    env["PREFECT_SERVER_ALLOW_EPHEMERAL_MODE"] = "false"
    proc = subprocess.run(
        [sys.executable, "-m", "exclust.cli", "demo", "--rows", "30000", "--out", str(tmp_path / "demo"), *options],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = tmp_path / "demo"
    assert {"tree.json", "metrics.json", "rules.txt", "report.html"} <= {p.name for p in out.iterdir()}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 30000 and metrics["k"] == 5 and metrics["algorithm"] == "mmdt"
    assert not (tmp_path / "home" / ".prefect").exists()  # nothing written into the user's home
    assert len(list((tmp_path / "demo-data").glob("*.parquet"))) >= 2
    return proc


def test_demo_runs_without_any_prefect_server_in_a_fresh_home(tmp_path):
    proc = _demo(tmp_path)
    assert "Starting temporary server" not in proc.stderr + proc.stdout
    assert "demo done in" in proc.stdout


def test_the_demos_dataset_appears_whole_with_its_stamp_or_not_at_all(tmp_path):
    """The demo reuses its dataset only where its stamp matches and refuses a folder without one, so the stamp is
    written with the partitions before the folder is renamed into place: a stop between the two would otherwise
    leave a dataset that the next demo refuses."""
    from exclust.datasets.synthetic import write_gmm_parquet

    with pytest.raises(FileNotFoundError):  # a failure in the last step before the rename
        write_gmm_parquet(tmp_path / "data", 3000, 3, 2, rows_per_file=1000, extra_files={"missing/_demo.json": "{}"})
    assert list(tmp_path.iterdir()) == []
    write_gmm_parquet(tmp_path / "data", 3000, 3, 2, rows_per_file=1000, extra_files={"_demo.json": '{"rows": 3000}'})
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "_demo.json", "part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert json.loads((tmp_path / "data" / "_demo.json").read_text()) == {"rows": 3000}


@pytest.mark.e2e
def test_demo_through_the_prefect_flow_starts_a_temporary_server_in_a_temporary_home(tmp_path):
    """`exclust demo --prefect` without PREFECT_API_URL: the flow runs against Prefect's temporary server."""
    proc = _demo(tmp_path, "--prefect")
    assert "Finished in state Completed" in proc.stderr + proc.stdout


def snapshot(folder) -> dict[str, bytes]:
    """Every file below ``folder`` (hidden ones included) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def _explain_output(folder, tree_maker=_tree):
    """A complete exclust explain output folder (as explain's writer commits it)."""
    from exclust.outputs.staging import atomic_output_dir

    with atomic_output_dir(folder, info={"job": "explain"}) as tmp:
        tree_maker(tmp / "tree.json")
        (tmp / "metrics.json").write_text("{}")
        (tmp / "report.html").write_text("<html></html>")


def test_three_ways_to_lose_data_are_refused_and_leave_every_byte(tmp_path, capsys, dask_client):
    """Issue 8: explain over a label output it reads, label over the tree's run folder, a glob of same-named files."""
    scheduler = ["--scheduler", dask_client.scheduler.address, "--quiet"]
    _tree(tmp_path / "tree.json")
    _parts(tmp_path / "data")
    assert main(["label", "--tree", str(tmp_path / "tree.json"), "--input", str(tmp_path / "data"),
                 "--out", str(tmp_path / "lbl"), *scheduler]) == 0
    _explain_output(tmp_path / "run1")
    before = snapshot(tmp_path)
    capsys.readouterr()
    # 1. explain reading a label output and writing over it
    assert main(["explain", "--input", str(tmp_path / "lbl"), "--k", "2", "--features", "a,b",
                 "--out", str(tmp_path / "lbl"), *scheduler]) == 2
    assert f"output {tmp_path / 'lbl'} is the input {tmp_path / 'lbl'}, which this run reads" in capsys.readouterr().err
    # 2. label writing over the run folder that holds its tree
    assert main(["label", "--tree", str(tmp_path / "run1" / "tree.json"), "--input", str(tmp_path / "data"),
                 "--out", str(tmp_path / "run1"), *scheduler]) == 2
    err = capsys.readouterr().err
    assert f"is the folder {tmp_path / 'run1'} of the tree file" in err and err.count("\n") == 1
    # ... and over an explain output that is not its tree's folder: a label run replaces only label outputs
    _explain_output(tmp_path / "run2")
    before["run2"] = None
    assert main(["label", "--tree", str(tmp_path / "tree.json"), "--input", str(tmp_path / "data"),
                 "--out", str(tmp_path / "run2"), *scheduler]) == 2
    assert "holds an exclust explain output, not a label output" in capsys.readouterr().err
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("run2")} == \
        {k: v for k, v in before.items() if k != "run2"}  # inputs, tree and earlier outputs byte-identical
    # 3. a glob over same-named files: rows out equal rows in
    for day in (1, 2):
        (tmp_path / "hive" / f"day={day}").mkdir(parents=True)
        pq.write_table(pa.table({"a": np.linspace(-1, 1, 3000), "b": np.zeros(3000)}),
                       tmp_path / "hive" / f"day={day}" / "part.parquet")
    assert main(["label", "--tree", str(tmp_path / "tree.json"), "--input",
                 str(tmp_path / "hive" / "*" / "part.parquet"),
                 "--out", str(tmp_path / "out"), *scheduler]) == 0
    assert "labelled 6000 rows in 2 file(s)" in capsys.readouterr().out
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in (tmp_path / "out").rglob("*.parquet"))
    assert rows == 6000 == json.loads((tmp_path / "out" / "_labels.json").read_text())["n_rows"]
    # a glob's root and every folder it reads are guarded too
    assert main(["label", "--tree", str(tmp_path / "tree.json"), "--input",
                 str(tmp_path / "hive" / "*" / "part.parquet"),
                 "--out", str(tmp_path / "hive" / "day=1"), *scheduler]) == 2
    assert "the folder" in capsys.readouterr().err


def _many_parts(folder, n_files, rows=1000):
    folder.mkdir()
    rng = np.random.default_rng(5)
    for i in range(n_files):
        pq.write_table(pa.table({"a": rng.normal(size=rows), "b": rng.normal(size=rows)}), folder / f"p{i:04d}.parquet")


def _start_label(tmp_path):
    """`exclust label` in its own process group (as a terminal runs it), started with its own local cluster."""
    return subprocess.Popen(
        [sys.executable, "-m", "exclust.cli", "label", "--tree", str(tmp_path / "model" / "tree.json"),
         "--input", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def _wait_until_staging_has_data(tmp_path, proc) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        staging = [p for p in tmp_path.iterdir() if p.name.startswith(".out.exclust-staging-")]
        if staging and any(p.suffix == ".parquet" for p in staging[0].iterdir()):
            return
        time.sleep(0.02)
    raise AssertionError(f"the run never wrote into its staging folder (exit {proc.poll()})")


def _everything(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), folder)
                  for d, dirs, files in os.walk(folder) for n in dirs + files)


def _signal_label_midway(tmp_path, signum):
    """Start `exclust label` over 400 files, send ``signum`` to its group once it staged a file;
    (listing before, proc, out, err)."""
    (tmp_path / "model").mkdir()
    _tree(tmp_path / "model" / "tree.json")
    _many_parts(tmp_path / "in", 400)
    before = _everything(tmp_path)
    proc = _start_label(tmp_path)
    _wait_until_staging_has_data(tmp_path, proc)
    os.killpg(proc.pid, signum)
    out, err = proc.communicate(timeout=180)
    return before, proc, out, err


@pytest.mark.slow
def test_ctrl_c_stops_label_with_one_line_and_leaves_nothing(tmp_path):
    # Ctrl-C reaches the whole foreground group: driver and workers
    before, proc, out, err = _signal_label_midway(tmp_path, signal.SIGINT)
    assert proc.returncode == 130, err[-3000:]
    assert err.strip() == "exclust label: interrupted (Ctrl-C); stopped the run and removed its partial output"
    wait_for_group_to_end(proc.pid)
    assert _everything(tmp_path) == before  # hidden entries included


@pytest.mark.slow
def test_a_killed_label_run_leaves_only_hidden_staging_that_the_next_run_removes(tmp_path):
    from exclust.sources.storage import list_source

    before, proc, _, _ = _signal_label_midway(tmp_path, signal.SIGKILL)  # no process is left to clean up
    wait_for_group_to_end(proc.pid)
    left = sorted(set(os.listdir(tmp_path)) - {p.split(os.sep)[0] for p in before})
    assert left and all(name.startswith(".out.exclust-staging-") for name in left)
    assert [f.relpath for f in list_source(str(tmp_path)).files] == \
        [p for p in before if p.endswith(".parquet")]  # no reader picks the staging up
    proc = _start_label(tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "labelled 400000 rows in 400 file(s)" in out
    assert sorted(os.listdir(tmp_path)) == ["in", "model", "out"]  # the dead run's staging is gone


@pytest.mark.slow
def test_ctrl_c_stops_explain_with_one_line_and_leaves_nothing(tmp_path):
    rng = np.random.default_rng(1)
    (tmp_path / "data").mkdir()
    for i in range(10):  # four blobs, 200,000 rows in 10 files
        centers = rng.integers(0, 4, size=20_000)[:, None] * np.array([[6.0, 3.0]])
        X = centers + rng.normal(size=(20_000, 2))
        pq.write_table(pa.table({"x0": X[:, 0], "x1": X[:, 1]}), tmp_path / "data" / f"part-{i}.parquet")
    before = _everything(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "exclust.cli", "explain", "--input", str(tmp_path / "data"), "--features", "x0,x1",
         "--k", "4", "--out", str(tmp_path / "out")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    progress = []
    for line in proc.stderr:  # progress lines; the first step starts once the local cluster is up
        progress.append(line)
        if "load" in line:
            break
    assert any(p.name.startswith(".out.exclust-staging-") for p in tmp_path.iterdir())  # staged before computing
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, "".join(progress) + err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    # the one closing line, at most a few progress lines before it, and not a single worker traceback
    assert lines[-1] == "exclust explain: interrupted (Ctrl-C); stopped the run and removed its partial output"
    assert "Traceback" not in err and len(err) < 1000, err
    wait_for_group_to_end(proc.pid)
    assert _everything(tmp_path) == before


@pytest.fixture
def wrong_protocol_server():
    """A real HTTP server on 127.0.0.1: it listens, but speaks HTTP, not Dask's protocol."""
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # the bad requests it gets are the point, not news
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free again once closed: nothing listens there


@pytest.mark.parametrize("command", ["explain", "label"])
def test_a_bad_scheduler_address_is_one_line_and_exit_2(command, tmp_path, capsys, monkeypatch, wrong_protocol_server):
    """Not an address, an unknown scheme, nothing listening, a server speaking another protocol."""
    monkeypatch.setenv("EXCLUST_SCHEDULER_TIMEOUT", "2")
    _tree(tmp_path / "tree.json")
    _parts(tmp_path / "data")
    cases = {
        "notanaddress": "Dask scheduler address 'notanaddress' is not valid (missing port number",
        "tcp://127.0.0.1:x": "Dask scheduler address 'tcp://127.0.0.1:x' is not valid",
        "http://127.0.0.1:8787": "Dask scheduler address 'http://127.0.0.1:8787' is not valid (unknown address scheme "
                                 "'http'",
        f"tcp://127.0.0.1:{_closed_port()}": "within 2 s (OSError: Timed out trying to connect",
        f"tcp://{wrong_protocol_server}": f"no Dask scheduler answered at tcp://{wrong_protocol_server} within 2 s",
    }
    for address, message in cases.items():
        if command == "explain":
            argv = ["explain", "--input", str(tmp_path / "data"), "--k", "2", "--out", str(tmp_path / "out")]
        else:
            argv = ["label", "--tree", str(tmp_path / "tree.json"), "--input", str(tmp_path / "data"), "--out",
                    str(tmp_path / "out")]
        assert main([*argv, "--scheduler", address, "--quiet"]) == 2, address
        captured = capsys.readouterr()
        assert captured.err.startswith(f"exclust {command}: error: ") and message in captured.err, captured.err
        assert captured.err.count("\n") == 1 and captured.out == "", captured.err
        assert sorted(os.listdir(tmp_path)) == ["data", "tree.json"]  # no output, no staging


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """The command in a process of its own, with its own local Dask cluster: the workers' logs show on its stderr."""
    return subprocess.run([sys.executable, "-m", "exclust.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_label_checks_every_file_against_the_tree_when_it_plans(tmp_path):
    """A file without the tree's column, one holding text, one with an output column's name: one line, exit 2,
    before any worker starts (the local cluster is never made)."""
    _tree(tmp_path / "tree.json")
    _parts(tmp_path / "data", n_files=3)
    bad = {"lacks": (pa.table({"a": [1.0, 2.0]}), "columns ['b'] used by the tree are missing"),
           "text": (pa.table({"a": [1.0], "b": ["x"]}), "column 'b' has type string, but the tree cuts it as a number"),
           "named": (pa.table({"a": [1.0], "b": [1.0], "cluster": [0]}), "the input already has a column 'cluster'")}
    for name, (table, message) in bad.items():
        pq.write_table(table, tmp_path / "data" / f"{name}.parquet")
        proc = _cli("label", "--tree", str(tmp_path / "tree.json"), "--input", str(tmp_path / "data"),
                    "--out", str(tmp_path / "out"))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"exclust label: error: {tmp_path / 'data' / name}.parquet")
        assert message in proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr  # no worker log, no progress line: nothing started
        (tmp_path / "data" / f"{name}.parquet").unlink()
    assert sorted(os.listdir(tmp_path)) == ["data", "tree.json"]


def test_bad_data_found_by_a_worker_is_one_line_without_worker_logs(tmp_path):
    """Damaged data pages are found only when a worker decodes them: the run still ends in one line."""
    (tmp_path / "data").mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        table = pa.table({"a": rng.normal(size=400), "b": rng.normal(size=400)})
        pq.write_table(table, tmp_path / "data" / f"p{i}.parquet", compression="none", use_dictionary=False)
    damaged = tmp_path / "data" / "p1.parquet"
    start = pq.read_metadata(damaged).row_group(0).column(0).data_page_offset + 64  # past the page header
    raw = bytearray(damaged.read_bytes())
    raw[start:start + 800] = rng.integers(0, 256, 800, dtype=np.uint8).tobytes()
    damaged.write_bytes(bytes(raw))
    proc = _cli("explain", "--input", str(tmp_path / "data"), "--k", "2", "--out", str(tmp_path / "out"), "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"exclust explain: error: Parquet file {damaged} is corrupt"), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # not a worker's "Compute Failed" with its traceback
    assert sorted(os.listdir(tmp_path)) == ["data"]


def test_error_lines_use_the_words_of_the_command_line():
    from exclust.cli import _error_line
    from exclust.errors import InputError

    class Described(InputError):
        def describe(self, interface):
            return f"k is too large; lower it ({interface}: --k)"

    assert _error_line(Described("k is too large; lower k")) == "k is too large; lower it (cli: --k)"
    assert _error_line(InputError("first line\n  second line\n")) == "first line; second line"


@pytest.mark.parametrize("where", ["gc callback", "weakref callback", "finalizer"])
def test_ctrl_c_landing_where_python_swallows_it_is_delivered_again(capfd, where):
    """Python swallows an exception raised in a gc callback (distributed registers one), a weakref
    callback or a finalizer, and prints "Exception ignored in ..." with a traceback: the CLI drops
    that interrupt and delivers it again once the callback has returned."""
    import gc
    import threading
    import weakref

    from exclust.dataplane import progress
    from exclust.dataplane.stop_signals import listening

    hits = []

    def interrupt_here(*_):
        # Only once, in the main thread, with the handler installed: the handler runs in here.
        if not hits and threading.current_thread() is threading.main_thread():
            hits.append(where)
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                pass

    class Finalized:
        def __del__(self):
            interrupt_here()

    class Target:
        pass

    def gc_callback(phase, info):
        if phase == "start":
            interrupt_here()

    caught = False
    try:
        with listening():
            if where == "gc callback":
                gc.callbacks.append(gc_callback)
                gc.collect()
            elif where == "weakref callback":
                target = Target()
                ref = weakref.ref(target, interrupt_here)  # noqa: F841 - the callback fires on del
                del target
            else:
                obj = Finalized()
                del obj
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.01)
    except KeyboardInterrupt:
        caught = True
    finally:
        if gc_callback in gc.callbacks:
            gc.callbacks.remove(gc_callback)
        progress.INTERRUPTED.clear()
    assert hits == [where] and caught
    assert "Exception ignored" not in capfd.readouterr().err


# -------------------------------------------------------------------------- the CLI and Python agree (issue 19, item 5)
def _default(cls, name):
    import inspect

    return inspect.signature(cls).parameters[name].default


def test_cli_and_python_defaults_agree():
    import dataclasses

    from exclust.algorithms.histogram.exshallow import ExShallow
    from exclust.algorithms.mmdt.concept import ConceptMMDT
    from exclust.algorithms.mmdt.kernel_mmdt import KernelMMDT
    from exclust.algorithms.mmdt.mmdt import MMDT
    from exclust.algorithms.random_cut import RandomCutTree
    from exclust.jobs import registry
    from exclust.jobs.config import ExplainConfig
    from exclust.sources.dataset import load_dataset
    from flows.params import ExplainParams

    cli = build_parser().parse_args(["explain", "--input", "in", "--k", "3", "--out", "o"])
    demo = build_parser().parse_args(["demo"])
    config = {f.name: f.default for f in dataclasses.fields(ExplainConfig)}
    flow = {name: getattr(f.default, "value", f.default) for name, f in ExplainParams.model_fields.items()}
    agreed = {  # one default, read from every place that declares it
        "threshold": [cli.threshold, demo.threshold, config["threshold"], flow["threshold"],
                      _default(MMDT, "threshold"),
                      _default(ConceptMMDT, "threshold")],
        "algorithm": [cli.algorithm, demo.algorithm, config["algorithm"], flow["algorithm"]],
        "objective": [cli.objective, config["objective"], flow["objective"]]
        + [_default(registry.algorithm(a).estimator_class(), "objective")
           for a in ("imm", "exkmc", "exshallow", "random-cut")],
        "depth factor": [cli.depth_factor, config["depth_factor"], flow["depth_factor"],
                         _default(ExShallow, "depth_factor")],
        "trials": [cli.trials, config["trials"], flow["trials"], _default(RandomCutTree, "n_trials")],
        "kernel": [cli.kernel, config["kernel"], flow["kernel"], _default(KernelMMDT, "kernel")],
        "reference": [cli.reference, config["reference"], flow["reference"]],
        "seed": [cli.random_state, config["random_state"], flow["random_state"]],
        "k": [demo.n_clusters, config["n_clusters"], flow["n_clusters"]],
        "nan policy": [cli.nan_policy, config["nan_policy"], flow["nan_policy"],
                       _default(load_dataset, "nan_policy")],
        "cost curve": [cli.cost_curve, config["cost_curve"], flow["cost_curve"]],
        "standing table": [cli.standing, config["standing"], flow["standing"]],
        "k-medians price (auto)": [cli.kmedians_price, config["kmedians_price"]],
        # no leaf budget: one leaf per cluster (the flow spells it 0)
        "leaves": [cli.leaves, config["leaves"], flow["leaves"] or None,
                   _default(registry.algorithm("exkmc").estimator_class(), "max_leaves"),
                   _default(registry.algorithm("kdtree").estimator_class(), "max_leaves"),
                   _default(registry.algorithm("cart").estimator_class(), "max_leaf_nodes")],
    }
    for what, values in agreed.items():
        assert len(set(map(str, values))) == 1, (what, values)

    # What a run passes to each estimator, with the CLI's defaults, is the estimator's own default.
    run = ExplainConfig(input="unused", k=3)
    for entry in registry.ALGORITHMS.values():
        for name, value in entry.options(run).items():
            # the run's seed is 0 (an estimator's None); k is the run's
            if name in ("random_state", "n_clusters", "n_components"):
                continue
            own = _default(entry.estimator_class(), name)
            if name in ("max_leaves", "max_leaf_nodes", "n_leaves"):  # the run's k leaves: what None means to it
                assert value == run.k and own is None, (entry.name, name, own)
            else:
                assert value == own, (entry.name, name, value, own)


def test_cli_and_python_refuse_fewer_than_two_clusters(capsys):
    from exclust.algorithms.mmdt.kernel_mmdt import KernelMMDT
    from exclust.errors import InputError, ParameterError
    from exclust.jobs import registry
    from exclust.jobs.config import ExplainConfig
    from flows.params import ExplainParams

    for argv in (["explain", "--input", "in", "--k", "1", "--out", "o"], ["demo", "--k", "1"]):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(argv)
        assert exit_.value.code == 2 and "at least 2 clusters" in capsys.readouterr().err
    assert build_parser().parse_args(["explain", "--input", "in", "--k", "2", "--out", "o"]).n_clusters == 2
    with pytest.raises(InputError, match=">= 2"):
        ExplainConfig(input="unused", k=1).check()
    with pytest.raises(ValueError):
        ExplainParams(input="in", output="out", n_clusters=1)
    X = np.random.default_rng(0).normal(size=(40, 2))
    for name in ("imm", "exkmc", "exshallow", "random-cut", "kdtree"):
        cls = registry.algorithm(name).estimator_class()
        with pytest.raises(ParameterError, match="'n_clusters' parameter"):
            cls(n_clusters=1).fit(X, X[:1])
    with pytest.raises(ParameterError, match="'n_clusters' parameter"):
        KernelMMDT(1).fit(X)


def test_explain_on_the_demo_data_without_features_never_cuts_on_truth(tmp_path, capsys, dask_client):
    """The issue's run: ``exclust explain --input exclust-demo-data --k 5`` cut on ``truth`` (error 0)."""
    from exclust.datasets.synthetic import write_gmm_parquet

    data = tmp_path / "exclust-demo-data"
    write_gmm_parquet(data, 6000, 5, 2, rows_per_file=2000, random_state=0)
    rc = main(["explain", "--input", str(data), "--k", "5", "--scheduler", dask_client.scheduler.address,
               "--out", str(tmp_path / "out")])
    assert rc == 0
    captured = capsys.readouterr()
    assert "note: left out of the features: 'truth' (0..4)" in captured.err
    rules = (tmp_path / "out" / "rules.txt").read_text()
    assert "truth" not in rules and ("x0" in rules or "x1" in rules)
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["d"] == 2


def test_the_hints_name_the_command_as_the_shell_reaches_it(tmp_path):
    """``exclust`` when the environment is activated (its bin first on PATH), else the script's path."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "exclust").exists():
        pytest.fail(f"no exclust script beside {sys.executable}: the package is not installed in this environment")
    code = "from exclust.cli import _command_name; print(_command_name())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bare = subprocess.run([sys.executable, "-c", code], env={**env, "PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert Path(tmp_path, bare).resolve() == (bin_dir / "exclust").resolve()
    activated = subprocess.run([sys.executable, "-c", code], env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin"},
                               cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert activated == "exclust"
