"""How fast `exclust label` obeys SIGTERM, and what it leaves (issue 29, item 1).

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/bench_stop_signals.py [--files 12] [--rows 300000]
        [--offsets 0.5,1,2,3,4,6,9]

Writes FILES Parquet files of ROWS rows (two normal columns) and a two-leaf tree into bench/data/
(git-ignored) once, then for each offset starts `exclust label` on a local cluster, sends it SIGTERM
OFFSET seconds after the start and prints its exit status, the seconds from the signal to its exit, and
what it left in its output folder's parent (nothing, or the committed output when the signal came after
the commit: exit 4). Ends with the load average: the machine is shared, timings move with it.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--offsets", default="0.5,1,2,3,4,6,9")
    args = ap.parse_args()

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from exclust.tree import TreeBuilder

    base = ROOT / "bench" / "data" / f"stop_{args.files}x{args.rows}"
    data = base / "in"
    if not data.exists():
        data.mkdir(parents=True)
        rng = np.random.default_rng(0)
        for i in range(args.files):
            pq.write_table(pa.table({"a": rng.normal(size=args.rows), "b": rng.normal(size=args.rows)}),
                           data / f"p{i:03d}.parquet")
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    left, right = b.split(root, feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    b.build(feature_names=["a", "b"]).to_json(base / "tree.json")
    for offset in (float(x) for x in args.offsets.split(",")):
        runs = base / "runs"
        shutil.rmtree(runs, ignore_errors=True)
        runs.mkdir()
        proc = subprocess.Popen([sys.executable, "-m", "exclust.cli", "label", "--tree", str(base / "tree.json"),
                                 "--input", str(data), "--out", str(runs / "out"), "--quiet"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(offset)
        sent = time.monotonic()
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
        stopped = time.monotonic() - sent
        left = sorted(os.listdir(runs))
        last = (err.strip().splitlines() or [""])[-1]
        print(f"SIGTERM at {offset:4.1f} s: exit {proc.returncode:4d} {stopped:5.1f} s after the signal, "
              f"left {left or 'nothing'}; {last[:110]}", flush=True)
    with open("/proc/loadavg") as f:
        print(f"load average {' '.join(f.read().split()[:3])} (2 cores shared by 8 engineers)")


if __name__ == "__main__":
    main()
