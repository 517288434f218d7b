"""Checks of an installed exclust wheel, run by .ci/wheel_check.sh with the fresh venv's Python.

``core``: the wheel without extras: its files (py.typed, the report's CSS, the flows), the
public names, an in-memory fit, ``exclust explain`` on a Parquet folder through a LocalCluster
(the report written), the version, and a missing extra's one-line message with exit code 2.
``lake``: after ``pip install exclust[lake]``, ``exclust explain`` on a Delta table.
"""
from __future__ import annotations

import subprocess
import sys
import time
from importlib import resources
from pathlib import Path


def say(text: str) -> None:
    print(f"[wheel] {text}", flush=True)


def check(condition: bool, text: str) -> None:
    if not condition:
        sys.exit(f"[wheel] FAILED: {text}")


def exclust_command(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "exclust"
    t0 = time.perf_counter()
    result = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=1800)
    say(f"exclust {' '.join(args[:1])}: exit {result.returncode} in {time.perf_counter() - t0:.0f} s")
    check(result.returncode == expect, f"exclust {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result


def blobs(rows: int = 3000):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    truth = rng.integers(0, 3, rows)
    X = centers[truth] + rng.normal(size=(rows, 2))
    return pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "truth": truth}), centers


def core(src: Path) -> None:
    import exclust

    where = Path(exclust.__file__).resolve()
    check(src not in where.parents, f"exclust was imported from the source tree ({where})")
    say(f"import exclust {exclust.__version__} from {where.parent}")
    check((where.parent / "py.typed").is_file(), "the wheel lacks py.typed")
    css = [p.name for p in resources.files("exclust.report").iterdir() if p.name.endswith(".css")]
    check(bool(css), "the wheel lacks the report's CSS")
    import importlib.util

    flows = importlib.util.find_spec("flows")  # found, not imported: the flows extra is not installed here
    check(flows is not None and any((Path(p) / "explain.py").is_file() for p in flows.submodule_search_locations),
          "the wheel lacks the flows")
    for name in exclust.__all__:
        getattr(exclust, name)
    frame, centers = blobs()
    t0 = time.perf_counter()
    tree = exclust.IMM(n_clusters=3, random_state=0).fit(frame[["x0", "x1"]].to_numpy(), centers).tree_
    check(tree.n_leaves == 3, f"an in-memory IMM fit gave {tree.n_leaves} leaves, not 3")
    say(f"in-memory IMM fit (first, kernels compiled) in {time.perf_counter() - t0:.0f} s")

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = Path("data")
    data.mkdir()
    for i in range(2):
        part = frame.iloc[i * 1500:(i + 1) * 1500]
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), data / f"part-{i}.parquet")
    # One algorithm's kernels only (no standing table, no cost curve): a fresh venv compiles every kernel
    # a run uses, in the driver and in each worker, and the other algorithms are the suite's business.
    exclust_command("explain", "--input", str(data), "--features", "x0,x1", "--k", "3", "--algorithm", "imm",
                    "--reference", "kmeans", "--truth", "truth", "--no-standing", "--no-curve", "--out", "run")
    check(Path("run/report.html").is_file() and Path("run/tree.json").is_file(), "explain wrote no report")
    say("explain on Parquet through a LocalCluster: run/report.html written")

    from exclust.cli import build_parser

    if any("--version" in action.option_strings for action in build_parser()._actions):
        out = exclust_command("--version").stdout + exclust_command("--version").stderr
        check(exclust.__version__ in out, f"exclust --version printed {out!r}")
    else:  # the parser of this branch has no --version yet
        say("exclust --version: not in this parser; exclust.__version__ checked instead")
    check(exclust.__version__ == __import__("importlib.metadata").metadata.version("exclust"),
          "exclust.__version__ differs from the wheel's version")

    Path("table/_delta_log").mkdir(parents=True)
    result = exclust_command("explain", "--input", "table", "--k", "3", "--out", "run-delta", expect=2)
    check(result.stderr.strip() == "exclust explain: error: reading Delta tables needs deltalake: "
                                   "pip install 'exclust[lake]'", f"missing extra said {result.stderr!r}")
    say("a Delta table without the lake extra: one line naming it, exit 2")


def lake(src: Path) -> None:
    import shutil

    import pyarrow as pa
    from deltalake import write_deltalake

    frame, _ = blobs()
    shutil.rmtree("table")
    write_deltalake("table", pa.Table.from_pandas(frame, preserve_index=False))
    exclust_command("explain", "--input", "table", "--features", "x0,x1", "--k", "3", "--algorithm", "imm",
                    "--reference", "kmeans", "--no-standing", "--no-curve", "--out", "run-delta")
    check(Path("run-delta/report.html").is_file(), "explain on the Delta table wrote no report")
    say("explain on a Delta table with the lake extra: run-delta/report.html written")


if __name__ == "__main__":
    {"core": core, "lake": lake}[sys.argv[1]](Path(sys.argv[2]).resolve())
