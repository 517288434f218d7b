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
import re
import subprocess
import sys
import tempfile
import threading
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
        # Each attempt names its columns in another order: the same read and sums under new keys, so
        # that no attempt finds the one before's result still held by the scheduler (one run measured
        # 0.03 s that way).
        columns = features[attempt:] + features[:attempt]
        t0 = time.perf_counter()
        dd.read_parquet(files, columns=columns).sum().compute()
        took = time.perf_counter() - t0
        if attempt:
            best = min(best, took)
    return best


def run_cli(folder: Path, address: str, out: Path, args, standing: bool = True,
            worker_pids: list[int] | None = None) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "exclust.cli", "explain", "--input", str(folder), "--algorithm", "exkmc",
           "--k", str(args.k), "--leaves", str(args.leaves), "--reference", "kmeans", "--truth", "truth",
           "--scheduler", address, "--out", str(out)] + (["--no-curve"] if args.no_curve else []) \
        + ([] if standing else ["--no-standing"])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    if not args.cpu:
        subprocess.run(cmd, check=True, env=env)
        return time.perf_counter() - t0, json.loads((out / "metrics.json").read_text())
    process = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    with CpuSteps(process.pid, worker_pids or []) as steps:
        assert process.stderr is not None
        for line in process.stderr:
            sys.stderr.write(line)
            steps.line(line)
        if process.wait():
            raise subprocess.CalledProcessError(process.returncode, cmd)
    total = time.perf_counter() - t0
    steps.print()
    return total, json.loads((out / "metrics.json").read_text())


class CpuSteps:
    """CPU seconds per step of the explain command (``--cpu``): the driver (the CLI process) and the
    workers, sampled every 50 ms and cut at the steps' log lines. CPU seconds survive a shared machine
    better than wall seconds; ``idle`` is the wall time in which the workers together used less than
    a fifth of one core (they wait on the driver), ``driver busy`` the time the driver used more than
    half a core."""

    STEP = re.compile(r"^\[\s*[\d.]+ s\] (?!\s)([^:]+?)(?:: .*)?$")

    def __init__(self, driver: int, workers: list[int], every: float = 0.05) -> None:
        import psutil

        self.driver = psutil.Process(driver)
        self.workers = [psutil.Process(pid) for pid in workers]
        self.every = every
        self.samples: list[tuple[float, float, float]] = []  # (wall, driver cpu, workers cpu)
        self.marks: list[tuple[float, str]] = [(time.perf_counter(), "(start, imports)")]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _cpu(self, process) -> float:
        try:
            t = process.cpu_times()
            return t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        except Exception:  # the driver has exited
            return float("nan")

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self._cpu(self.driver), sum(map(self._cpu, self.workers))))
            self._stop.wait(self.every)

    def __enter__(self) -> CpuSteps:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def line(self, text: str) -> None:
        match = self.STEP.match(text.rstrip("\n"))
        if match and " done in " not in text:
            self.marks.append((time.perf_counter(), match.group(1)))
        elif match and " done in " in text:
            self.marks.append((time.perf_counter(), "(between steps)"))

    def print(self) -> None:
        import numpy as np

        s = np.asarray([row for row in self.samples if row[1] == row[1]])  # until the driver exits
        if len(s) < 2:
            return
        wall, driver, workers = s[:, 0], s[:, 1], s[:, 2]
        dt = np.diff(wall)
        d_rate, w_rate = np.diff(driver) / dt, np.diff(workers) / dt
        ends = [t for t, _ in self.marks[1:]] + [wall[-1]]
        print(f"{'step (CPU, sampled)':<22}{'wall s':>8}{'driver cpu':>11}{'workers cpu':>12}{'idle s':>8}"
              f"{'driver busy s':>14}")
        for (start, name), end in zip(self.marks, ends, strict=True):
            inside = (wall[1:] > start) & (wall[1:] <= end)
            print(f"{name:<22}{end - start:>8.2f}{(np.diff(driver) * inside).sum():>11.2f}"
                  f"{(np.diff(workers) * inside).sum():>12.2f}{(dt * inside * (w_rate < 0.2)).sum():>8.2f}"
                  f"{(dt * inside * (d_rate > 0.5)).sum():>14.2f}")
        print(f"{'whole command':<22}{wall[-1] - wall[0]:>8.2f}{driver[-1] - driver[0]:>11.2f}"
              f"{workers[-1] - workers[0]:>12.2f}{(dt * (w_rate < 0.2)).sum():>8.2f}"
              f"{(dt * (d_rate > 0.5)).sum():>14.2f}", flush=True)


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
    ap.add_argument("--cpu", action="store_true",
                    help="also print CPU seconds per step of the driver and of the workers (sampled, psutil), the "
                         "wall time the workers sat idle and the time the driver was busy (the CLI only)")
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
        worker_pids = list(client.run(os.getpid).values())
        print(f"bare pass: {bare:.2f} s ({args.rows:,} x {args.features}, {len(files)} files)", flush=True)
        modes = {"on": [True], "off": [False], "both": [True, False]}[args.standing] * args.repeat
        runs = []
        for standing in modes:
            with tempfile.TemporaryDirectory(dir=ROOT / "bench" / "data") as tmp:
                out = Path(tmp) / "out"
                runner = run_flow if args.flow else run_cli
                extra = {"worker_pids": worker_pids} if runner is run_cli else {}
                total, metrics = runner(folder, cluster.scheduler_address, out, args, standing, **extra)
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
