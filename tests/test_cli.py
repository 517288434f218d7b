"""The exclust command: options, exit codes, messages, and the files it writes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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
    assert (args.algorithm, args.k, args.leaves, args.reference, args.scheduler) == ("exkmc", 4, 8, "labels:lab", "tcp://127.0.0.1:8786")
    assert build_parser().parse_args(["demo"]).out == "exclust-demo"
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
        (["label", "--tree", "{tmp}/nope.json", "--input", "{tmp}/in", "--out", "{tmp}/o"], "input not found: {tmp}/nope.json"),
        (["label", "--tree", "{tmp}/tree.json", "--input", "{tmp}/none", "--out", "{tmp}/o"], "input not found: {tmp}/none"),
        (["label", "--tree", "{tmp}/tree.json", "--input", "{tmp}/in", "--out", "/"], "filesystem root"),
        (["label", "--tree", "{tmp}/bad.json", "--input", "{tmp}/in", "--out", "{tmp}/o"], "not valid JSON"),
        (["explain", "--input", "{tmp}/none", "--k", "3", "--out", "{tmp}/o"], "input not found"),
        (["explain", "--input", "{tmp}/in", "--k", "3", "--reference", "dbscan", "--out", "{tmp}/o"], "gmm, kmeans or labels:COLUMN"),
        (["explain", "--input", "{tmp}/in", "--k", "3", "--algorithm", "concept-mmdt", "--out", "{tmp}/o"], "--concepts"),
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
    assert not (tmp_path / "o").exists()


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
    assert (metrics["algorithm"], metrics["k"], metrics["d"], metrics["reference"], metrics["threshold"]) == ("mmdt", 3, 2, "kmeans", "exact")
    assert metrics["enr"] > 0 and {"load", "fit reference", "build tree", "score"} <= set(metrics["seconds"])
    assert (tmp_path / "out" / "report.html").stat().st_size > 1000


@pytest.mark.e2e
def test_demo_e2e_runs_the_flow_with_no_server_in_a_fresh_home(tmp_path):
    """`exclust demo` with an empty HOME and no Prefect settings: temporary server, local Dask cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DASK_"))}
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "exclust.cli", "demo", "--rows", "30000", "--out", str(tmp_path / "demo")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = tmp_path / "demo"
    assert {"tree.json", "metrics.json", "rules.txt", "report.html"} <= {p.name for p in out.iterdir()}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 30000 and metrics["k"] == 5 and metrics["algorithm"] == "mmdt"
    assert "Finished in state Completed" in proc.stderr + proc.stdout
    assert not (tmp_path / "home" / ".prefect").exists()  # nothing written into the user's home
    assert len(list((tmp_path / "demo-data").glob("*.parquet"))) >= 2
