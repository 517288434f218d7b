"""The output protocol: where a run may write, staging, commit, abort, stale staging, no lock files."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.errors import InputError
from exclust.jobs.label.labeling import label_parquet, plan_label
from exclust.outputs.folders import MARKER, validate_output_dir
from exclust.outputs.staging import StagingGone, atomic_output_dir, staged_output
from exclust.sources.guards import validate_input_path
from exclust.sources.storage import list_source
from exclust.tree import TreeBuilder

ROOT = Path(__file__).resolve().parents[1]


def _tree(path):
    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    b.build(feature_names=["a", "b"]).to_json(path)


def _part(path, rows=100, seed=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pq.write_table(pa.table({"a": rng.normal(size=rows), "b": rng.normal(size=rows)}), path)


def snapshot(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def everything(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), folder)
                  for d, dirs, files in os.walk(folder) for n in dirs + files)


def test_atomic_output_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "res"
    with atomic_output_dir(target) as tmp:
        (tmp / "a.txt").write_text("first")
    assert (target / "a.txt").read_text() == "first" and (target / MARKER).exists()
    with pytest.raises(RuntimeError):
        with atomic_output_dir(target) as tmp:
            (tmp / "b.txt").write_text("second, half done")
            raise RuntimeError("boom")
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "_SUCCESS", "a.txt"]  # the old result stands
    with atomic_output_dir(target) as tmp:
        (tmp / "c.txt").write_text("third")
    assert sorted(p.name for p in target.iterdir()) == [MARKER, "_SUCCESS", "c.txt"]  # replaced whole, no mix
    assert sorted(os.listdir(tmp_path)) == ["res"]  # no lock file, no staging, nothing hidden
    manifest = json.loads((target / "_SUCCESS").read_text())
    assert [f["path"] for f in manifest["files"]] == ["c.txt"]


def test_output_paths_are_checked(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="root"):
        validate_output_dir("/")
    with pytest.raises(InputError, match="home"):
        validate_output_dir("~")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(InputError, match="existing file"):
        validate_output_dir(tmp_path / "file.txt")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.doc").write_text("x")
    with pytest.raises(InputError, match="not written by exclust; choose a new folder or remove it"):
        validate_output_dir(tmp_path / "mine")
    base = tmp_path / "base"
    base.mkdir()
    assert validate_output_dir("run1", base=base) == base / "run1"
    with pytest.raises(InputError, match="outside the allowed base"):
        validate_output_dir("../escape", base=base)
    monkeypatch.setenv("EXCLUST_OUTPUT_BASE", str(base))
    with pytest.raises(InputError, match="outside the allowed base"):
        validate_output_dir(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="input not found"):
        validate_input_path(tmp_path / "nope.parquet")
    with pytest.raises(InputError, match="no file matches"):
        validate_input_path(str(tmp_path / "*.nothing"))


def test_only_a_complete_output_of_the_same_job_is_replaced(tmp_path):
    with atomic_output_dir(tmp_path / "explained", info={"job": "explain"}) as tmp:
        (tmp / "tree.json").write_text("{}")
    with pytest.raises(InputError, match="holds an exclust explain output, not a label output; choose another folder"):
        validate_output_dir(tmp_path / "explained", job="label")
    assert validate_output_dir(tmp_path / "explained", job="explain") == tmp_path / "explained"
    (tmp_path / "explained" / "_SUCCESS").unlink()  # as an older exclust or a broken commit leaves it
    with pytest.raises(InputError, match="incomplete exclust output .* remove the folder"):
        validate_output_dir(tmp_path / "explained", job="explain")
    (tmp_path / "empty").mkdir()
    assert validate_output_dir(tmp_path / "empty", job="label") == tmp_path / "empty"


@pytest.mark.parametrize(
    "source, out, message",
    [
        ("in", "in", "is the input"),
        ("in", "in/labelled", "lies inside the input"),
        ("in", ".", "contains the input"),
        ("glob/*/part.parquet", ".", "contains the folder"),
        ("glob/*/part.parquet", "glob", "is the folder"),
        ("glob/*/part.parquet", "glob/x", "lies inside the folder"),
        ("glob/*/part.parquet", "glob/day=2", "lies inside the folder"),
        ("in/part.parquet", "in", "contains the input"),
    ],
)
def test_an_output_touching_what_the_run_reads_is_refused_before_any_work(tmp_path, source, out, message):
    _part(tmp_path / "in" / "part.parquet")
    for day in (1, 2):
        _part(tmp_path / "glob" / f"day={day}" / "part.parquet", seed=day)
    (tmp_path / "model").mkdir()
    _tree(tmp_path / "model" / "tree.json")
    before = snapshot(tmp_path)
    listing = everything(tmp_path)
    with pytest.raises(InputError, match=message + ".*which this run reads; write the output to a folder outside"):
        label_parquet(tmp_path / "model" / "tree.json", str(tmp_path / source), tmp_path / out)
    assert snapshot(tmp_path) == before and everything(tmp_path) == listing


def test_the_tree_folder_is_never_replaced_but_may_hold_the_output(tmp_path):
    _part(tmp_path / "in" / "part.parquet")
    (tmp_path / "run1").mkdir()
    _tree(tmp_path / "run1" / "tree.json")
    with pytest.raises(InputError, match="is the folder .* of the tree file"):
        plan_label(tmp_path / "run1" / "tree.json", tmp_path / "in", tmp_path / "run1")
    label_parquet(tmp_path / "run1" / "tree.json", tmp_path / "in", tmp_path / "run1" / "labels")
    assert (tmp_path / "run1" / "labels" / "part.parquet").exists() and (tmp_path / "run1" / "tree.json").exists()


def _immutable(folder: Path) -> bool:
    """Make ``folder`` unwritable even for root (chattr +i); False where that is not possible."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return True
    return subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0


def _writable(folder: Path) -> None:
    if os.geteuid() != 0:
        folder.chmod(0o755)
    else:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_an_unwritable_output_fails_before_any_work(tmp_path):
    locked = tmp_path / "readonly"
    locked.mkdir()
    if not _immutable(locked):
        pytest.skip("cannot make a folder unwritable here (root without chattr +i)")
    try:
        work = []
        with pytest.raises(InputError,
                           match="output .*readonly/out cannot be written .*; choose a location you can write to"):
            with staged_output(locked / "out", "label"):
                work.append("computed")
        assert work == [] and os.listdir(locked) == []
    finally:
        _writable(locked)


def test_a_worker_never_recreates_staging_the_driver_removed(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with staged_output(tmp_path / "out", "label") as stage:
            area = stage.area
            with area.open_write("day=1/a.parquet") as f:
                f.write(b"x")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []
    with pytest.raises(StagingGone, match="is gone"):  # a late task: nothing is created, not even the root
        with area.open_write("day=2/b.parquet") as f:
            f.write(b"late")
    assert os.listdir(tmp_path) == []


STAGER = """
import sys, time
from exclust.outputs.staging import staged_output
with staged_output(sys.argv[1], "label") as stage:
    stage.write_bytes("day=1/part.parquet", open(sys.argv[2], "rb").read())
    print("staged", flush=True)
    time.sleep(600)
"""


def test_a_killed_runs_staging_is_hidden_kept_while_alive_and_removed_by_the_next_run(tmp_path):
    _part(tmp_path / "data" / "part.parquet")
    proc = subprocess.Popen([sys.executable, "-c", STAGER, str(tmp_path / "data" / "out"),
                             str(tmp_path / "data" / "part.parquet")],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "staged"
    staging = [n for n in os.listdir(tmp_path / "data") if n.startswith(".out.exclust-staging-")]
    assert len(staging) == 1
    with atomic_output_dir(tmp_path / "data" / "other", info={"job": "label"}):
        pass  # a run to another output leaves it alone
    with staged_output(tmp_path / "data" / "out", "label"):
        assert staging[0] in os.listdir(tmp_path / "data")  # its owner is alive: never removed
    assert staging[0] in os.listdir(tmp_path / "data")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert [f.relpath for f in list_source(str(tmp_path / "data")).files] == ["part.parquet"]  # hidden from readers
    with staged_output(tmp_path / "data" / "out", "label") as stage:
        stage.write_text("x.txt", "next run")
    assert sorted(os.listdir(tmp_path / "data")) == ["other", "out", "part.parquet"]
    assert (tmp_path / "data" / "out" / "x.txt").read_text() == "next run"


def test_parent_folders_a_failed_run_created_are_removed(tmp_path):
    with pytest.raises(ValueError):
        with staged_output(tmp_path / "a" / "b" / "out", "explain") as stage:
            stage.write_text("tree.json", "{}")
            raise ValueError("the run failed")
    assert os.listdir(tmp_path) == []
