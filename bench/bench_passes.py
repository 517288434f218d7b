"""Issue 9 evidence: the whole explain job measured in bare passes over the same Parquet data.

    .venv/bin/python bench/bench_passes.py                 # 10M x 20 in 10 files, the CLI
    .venv/bin/python bench/bench_passes.py --rows 50000000 --files 50 --flow
                                                           # 50M x 20, more than the workers hold

The data (paper 000 Appendix G mixture, K = 10, columns x0..x19 and ``truth``) are written
once into bench/data/ (git-ignored) and reused. One LocalCluster of 2 worker processes x 1
thread x 3.5 GiB serves everything. In the same run:

1. a warm bare pass, ``dd.read_parquet(files, columns=features).sum().compute()`` (best of 2
   after one warm-up);
2. ``exclust explain --algorithm exkmc --k 10 --leaves 20 --reference kmeans --truth truth``
   (report and cost curve included) on that cluster (``--scheduler``), as a subprocess: the
   whole command, imports included; with ``--flow`` the Prefect flow ``flows.explain.explain``
   instead, in this process.

Printed: seconds per step (from metrics.json), passes over the data and Parquet reads per step,
and the job in bare passes (target: at most 15 at 10M; at most 30 at 50M). Figures are noisy on
a shared machine: the load average is printed with them.

``--standing both`` (issue 29 item 4) runs the job twice on the same cluster, with the standing
table and with ``--no-standing``, alternating ``--repeat`` times, and prints the score step and
the whole job of each in bare passes: what the table costs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def dataset(rows: int, features: int, files: int, k: int) -> Path:
    from exclust.datasets.synthetic import write_gmm_parquet

    folder = ROOT / "bench" / "data" / f"passes-{rows}x{features}-{files}files-k{k}"
    if not folder.exists():
        t0 = time.perf_counter()
        write_gmm_parquet(folder, rows, n_components=k, n_features=features, rows_per_file=-(-rows // files),
                          random_state=0)
        print(f"wrote {folder} in {time.perf_counter() - t0:.0f} s", flush=True)
    return folder


def bare_pass(files: list[str], features: list[str]) -> float:
    import dask.dataframe as dd

    best = float("inf")
    for attempt in range(3):  # the first warms the page cache and the workers
        t0 = time.perf_counter()
        dd.read_parquet(files, columns=features).sum().compute()
        took = time.perf_counter() - t0
        if attempt:
            best = min(best, took)
    return best


def run_cli(folder: Path, address: str, out: Path, args, standing: bool = True) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "exclust.cli", "explain", "--input", str(folder), "--algorithm", "exkmc",
           "--k", str(args.k), "--leaves", str(args.leaves), "--reference", "kmeans", "--truth", "truth",
           "--scheduler", address, "--out", str(out)] + (["--no-curve"] if args.no_curve else []) \
        + ([] if standing else ["--no-standing"])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    return time.perf_counter() - t0, json.loads((out / "metrics.json").read_text())


def run_flow(folder: Path, address: str, out: Path, args, standing: bool = True) -> tuple[float, dict]:
    from flows.explain import explain
    from flows.params import ExplainParams

    params = ExplainParams(input=str(folder), algorithm="exkmc", n_clusters=args.k, leaves=args.leaves,
                           reference="kmeans", truth_column="truth", scheduler_address=address, output=str(out),
                           cost_curve=not args.no_curve, standing=standing)
    t0 = time.perf_counter()
    explain(params)
    return time.perf_counter() - t0, json.loads((out / "metrics.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--leaves", type=int, default=20)
    ap.add_argument("--memory", default="3.5GiB", help="memory limit of each of the 2 workers")
    ap.add_argument("--flow", action="store_true", help="run the Prefect flow instead of the CLI")
    ap.add_argument("--no-curve", action="store_true",
                    help="without the cost curve (a nightly run): the score step is then the scoring pass alone")
    ap.add_argument("--standing", choices=("on", "off", "both"), default="on",
                    help="the standing table: on (the default), off (--no-standing), or both, alternating")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each standing mode, alternating")
    args = ap.parse_args()

    import logging

    from distributed import Client, LocalCluster

    folder = dataset(args.rows, args.features, args.files, args.k)
    files = sorted(str(p) for p in folder.glob("*.parquet"))
    features = [f"x{j}" for j in range(args.features)]
    print(f"uptime: {os.popen('uptime').read().strip()}", flush=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=args.memory, processes=True,
                      host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        bare = bare_pass(files, features)
        print(f"bare pass: {bare:.2f} s ({args.rows:,} x {args.features}, {len(files)} files)", flush=True)
        modes = {"on": [True], "off": [False], "both": [True, False]}[args.standing] * args.repeat
        runs = []
        for standing in modes:
            with tempfile.TemporaryDirectory(dir=ROOT / "bench" / "data") as tmp:
                out = Path(tmp) / "out"
                runner = run_flow if args.flow else run_cli
                total, metrics = runner(folder, cluster.scheduler_address, out, args, standing)
            runs.append((standing, total, metrics))
            report(bare, total, metrics, standing)
        bare_after = bare_pass(files, features)
        print(f"bare pass again: {bare_after:.2f} s", flush=True)
        client.close()
    if len(set(modes)) == 2:
        print(f"{'table':<8}{'score s':>9}{'score bp':>10}{'job s':>8}{'job bp':>8}  (bp: bare passes of {bare:.2f} s)")
        for standing, total, metrics in runs:
            score = metrics["seconds"].get("score", float("nan"))
            mode = "on" if standing else "off"
            print(f"{mode:<8}{score:>9.2f}{score / bare:>10.2f}{total:>8.1f}{total / bare:>8.1f}")
    print(f"uptime: {os.popen('uptime').read().strip()}")


def report(bare: float, total: float, metrics: dict, standing: bool) -> None:
    seconds, passes, reads = metrics["seconds"], metrics.get("passes", {}), metrics.get("parquet_reads", {})
    print(f"--- with{'' if standing else 'out'} the standing table")
    print(f"{'step':<16}{'seconds':>9}{'bare passes':>13}{'passes':>8}{'reads':>7}")
    for step, s in seconds.items():
        print(f"{step:<16}{s:>9.1f}{s / bare:>13.1f}{passes.get(step, ''):>8}{reads.get(step, ''):>7}")
    print(f"{'whole command':<16}{total:>9.1f}{total / bare:>13.1f}")
    print(f"held on the workers: {metrics.get('held')}; ExKMC passes: {metrics.get('n_passes')}; "
          f"ARI vs truth {metrics.get('ari_truth')}; price {metrics.get('price_kmeans')}")
    rows = (metrics.get("standing") or {}).get("rows") or []
    if rows:
        print("standing: " + ", ".join(f"{r['algorithm']} {r['price']:.6f}" for r in rows))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"RESULT: the job took {total / bare:.1f} bare passes (target <= 10 with the table at 10M, issue 29)",
          flush=True)

if __name__ == "__main__":
    main()
