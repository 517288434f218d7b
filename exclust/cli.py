"""The ``exclust`` command: ``explain``, ``label`` and ``demo``.

``explain`` and ``label`` call the library directly (no Prefect needed); ``demo`` writes a
sample dataset and runs the Prefect ``explain`` flow in-process, with a temporary Prefect home
unless a Prefect API is configured (``PREFECT_API_URL``), so it needs no server and no network.
Exit status: 0 done, 2 bad input or options (the message says what to change), 1 anything else.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Iterator, Sequence

from exclust import registry

ALGORITHMS = tuple(registry.ALGORITHMS)
THRESHOLDS = tuple(registry.THRESHOLDS)
ALGORITHM_HELP = "tree algorithm (default mmdt): " + "; ".join(f"{a.name}: {a.summary}" for a in registry.ALGORITHMS.values())


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    return names or None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="exclust", description="Explain clusterings of large datasets with small axis-aligned decision trees."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{explain,label,demo}")

    ex = sub.add_parser("explain", help="fit a reference clustering on Parquet data and explain it with a tree")
    ex.add_argument("--input", required=True, help="Parquet file, folder of Parquet files, glob, or s3:// URL")
    ex.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                    help="option of the object store an s3:// input lives on (repeatable), e.g. endpoint_url=http://minio:9000")
    ex.add_argument("--features", help="feature columns, comma-separated (default: every numeric column)")
    ex.add_argument("--algorithm", default="mmdt", choices=ALGORITHMS, help=ALGORITHM_HELP)
    ex.add_argument("--k", type=_positive_int, required=True, help="number of clusters")
    ex.add_argument("--objective", default="kmeans", choices=registry.OBJECTIVES,
                    help="cost the tree keeps low, for imm, exkmc, exshallow, random-cut (default kmeans)")
    ex.add_argument("--depth-factor", type=float, default=0.03, help="exshallow's penalty on depth (0: ExGreedy)")
    ex.add_argument("--trials", type=_positive_int, default=1, help="random-cut: trees drawn, the cheapest kept")
    ex.add_argument("--no-curve", action="store_true", help="skip the report's cost-versus-leaves curve")
    ex.add_argument("--kmedians-price", action=argparse.BooleanOptionalAction, default=None,
                    help="price the tree under k-medians too (2+ passes more over the data); "
                         "default: when the objective or the reference is kmedians")
    ex.add_argument("--threshold", default="midpoint", choices=THRESHOLDS, help="MMDT threshold variant")
    ex.add_argument("--reference", default="gmm", help="gmm, kmeans, kmedians, or labels:COLUMN (default gmm)")
    ex.add_argument("--truth", help="ground-truth label column, scored with ARI")
    ex.add_argument("--leaves", type=_positive_int, help="leaf budget for exkmc, kdtree, cart (default k)")
    ex.add_argument("--concepts", help="concept label columns for concept-mmdt, comma-separated")
    ex.add_argument("--kernel", default="gaussian", choices=("gaussian", "laplace"), help="kernel of kernel-mmdt")
    ex.add_argument("--bandwidth", type=float, help="kernel bandwidth of kernel-mmdt")
    ex.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    ex.add_argument("--plot", help="two features for the report's scatter plot, e.g. x0,x3 (default: the tree's first cuts)")
    ex.add_argument("--seed", type=int, default=0, help="random seed")
    ex.add_argument("--drop-nan", action="store_true", help="drop rows with NaN/inf features instead of failing")
    ex.add_argument("--out", required=True, help="output folder (replaced whole when the run succeeds)")
    ex.add_argument("--quiet", action="store_true", help="no progress lines")

    lb = sub.add_parser("label", help="apply a saved tree.json to Parquet partitions")
    lb.add_argument("--tree", required=True, help="tree.json written by explain (a path or an s3:// URL)")
    lb.add_argument("--input", required=True, help="Parquet file, folder of Parquet files, glob, or s3:// URL")
    lb.add_argument("--out", required=True,
                    help="output folder or s3:// prefix for the labelled files (same relative paths as the input)")
    lb.add_argument("--date", help="label by date: YYYY-MM-DD or an inclusive range FIRST..LAST; "
                    "--input and --out then hold {date}, e.g. 'incoming/date={date}'")
    lb.add_argument("--cluster-column", default="cluster")
    lb.add_argument("--leaf-column", default="leaf")
    lb.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                    help="fsspec storage option for s3:// paths, repeatable (e.g. endpoint_url=http://127.0.0.1:9000)")
    lb.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    lb.add_argument("--quiet", action="store_true")

    dm = sub.add_parser("demo", help="write a sample dataset and explain it through the Prefect flow")
    dm.add_argument("--out", default="exclust-demo", help="output folder (default exclust-demo)")
    dm.add_argument("--rows", type=_positive_int, default=300_000, help="rows of the sample dataset")
    dm.add_argument("--k", type=_positive_int, default=5, help="components of the sample mixture")
    dm.add_argument("--d", type=_positive_int, default=2, help="features of the sample mixture")
    dm.add_argument("--algorithm", default="mmdt", choices=ALGORITHMS)
    dm.add_argument("--threshold", default="midpoint", choices=THRESHOLDS)
    dm.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    dm.add_argument("--seed", type=int, default=0)
    dm.add_argument("--no-prefect", action="store_true", help="run the steps directly, without the Prefect flow")
    return parser


def _log(quiet: bool):
    if quiet:
        return None
    return lambda message: print(message, file=sys.stderr, flush=True)


def cmd_explain(args) -> int:
    from exclust.pipeline import ExplainConfig
    from exclust.steps import run_explain
    from exclust.storage import parse_storage_options

    kind, column = ExplainConfig.parse_reference(args.reference)
    config = ExplainConfig(
        input=args.input, features=_names(args.features), algorithm=args.algorithm, k=args.k,
        reference=kind, reference_column=column, threshold=args.threshold, truth=args.truth,
        leaves=args.leaves, concepts=_names(args.concepts), kernel=args.kernel, bandwidth=args.bandwidth,
        random_state=args.seed, nan_policy="drop" if args.drop_nan else "raise", plot_features=_names(args.plot),
        storage_options=parse_storage_options(args.storage_option) or None, objective=args.objective,
        depth_factor=args.depth_factor, trials=args.trials, cost_curve=not args.no_curve,
        kmedians_price=args.kmedians_price,
    )
    result = run_explain(config, args.out, scheduler=args.scheduler, log=_log(args.quiet), live=sys.stderr.isatty())
    _summary(result.metrics, result.rules, result.out)
    return 0


def cmd_label(args) -> int:
    from exclust.nightly import has_date, label_command

    if args.date or has_date(args.input) or has_date(args.out):
        return label_command(args, _log(args.quiet))
    from exclust.labeling import plan_label, run_label
    from exclust.cluster import dask_cluster
    from exclust.progress import StepTimer
    from exclust.storage import parse_storage_options

    options = parse_storage_options(args.storage_option)
    # Tree, input and output are all checked before a cluster starts.
    plan = plan_label(args.tree, args.input, args.out, storage_options=options)
    timer = StepTimer(_log(args.quiet), live=sys.stderr.isatty() and not args.quiet)
    with dask_cluster(args.scheduler):
        with timer.step("label", f"{args.input} -> {args.out}"):
            result = run_label(plan, cluster_column=args.cluster_column, leaf_column=args.leaf_column)
    print(f"labelled {result.n_rows} rows in {result.n_files} file(s) into {result.out}")
    for c, n in sorted(result.counts.items()):
        print(f"  cluster {c}: {n} rows" if c >= 0 else f"  not labelled (missing features): {n} rows")
    if result.drift is not None:
        verdict = "drifted" if result.drift["drifted"] else "no drift"
        print(f"  leaf drift: PSI {result.drift['psi']:.3g} ({verdict}; alert above {result.drift['threshold']:g})")
    return 0


def _summary(metrics: dict, rules: str, out) -> None:
    """Rules, the headline measures of the catalogue (``scorecard.HEADLINE``) and which way each is better."""
    from exclust.scorecard import HEADLINE, MEASURES

    shown = {k: metrics[k] for k in HEADLINE if metrics.get(k) is not None and not isinstance(metrics[k], (dict, list))}
    print("rules:")
    print("  " + rules.rstrip("\n").replace("\n", "\n  "))
    print("metrics: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
    for better in ("lower", "higher"):
        keys = [k for k in shown if MEASURES[k].better == better]
        if keys:
            print(f"  {better} is better: {', '.join(keys)}")
    print(f"wrote {out}/tree.json, metrics.json, rules.txt, report.html")


def _prefect_environment() -> tempfile.TemporaryDirectory | None:
    """Run Prefect with no server configured: a temporary home, quiet logs, no telemetry."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LOGGERS_PREFECT_SERVER_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    # A loaded laptop can take longer than Prefect's default 20 s to start the temporary server.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    if os.environ.get("PREFECT_API_URL"):
        return None  # the user points at a real server: report the run there
    home = tempfile.TemporaryDirectory(prefix="exclust-prefect-")
    os.environ["PREFECT_HOME"] = home.name
    os.environ["PREFECT_SERVER_ALLOW_EPHEMERAL_MODE"] = "true"
    return home


def cmd_demo(args) -> int:
    import json

    from exclust.outputs import validate_output_dir
    from exclust.datasets.synthetic import write_gmm_parquet

    log = _log(False)
    out = validate_output_dir(args.out)
    data = out.with_name(out.name + "-data")
    spec = {"rows": args.rows, "k": args.k, "d": args.d, "seed": args.seed}
    stamp = data / "_demo.json"
    t0 = time.perf_counter()
    if data.exists() and stamp.exists() and json.loads(stamp.read_text()) == spec:
        log(f"[{0.0:7.1f} s] reusing the sample dataset in {data}")
    else:
        if data.exists():
            if not stamp.exists():
                raise FileExistsError(f"{data} exists and was not written by exclust demo; remove it or choose another --out")
            shutil.rmtree(data)
        log(f"[{0.0:7.1f} s] writing {args.rows} rows (k={args.k}, d={args.d}) as Parquet partitions to {data}")
        write_gmm_parquet(data, args.rows, args.k, args.d, rows_per_file=max(10_000, args.rows // 6), random_state=args.seed)
        stamp.write_text(json.dumps(spec))
    log(f"[{time.perf_counter() - t0:7.1f} s] dataset ready")
    features = [f"x{j}" for j in range(args.d)]
    if args.no_prefect:
        from exclust.pipeline import ExplainConfig
        from exclust.steps import run_explain

        config = ExplainConfig(input=str(data), features=features, algorithm=args.algorithm, k=args.k,
                               threshold=args.threshold, truth="truth", random_state=args.seed)
        result = run_explain(config, out, scheduler=args.scheduler, log=log, live=sys.stderr.isatty())
        _summary(result.metrics, result.rules, result.out)
    else:
        home = _prefect_environment()
        try:
            from flows.explain import explain
            from flows.params import ExplainParams

            params = ExplainParams(
                input=str(data), output=str(out), columns=features, algorithm=args.algorithm,
                n_clusters=args.k, threshold=args.threshold, truth_column="truth",
                scheduler_address=args.scheduler, random_state=args.seed,
            )
            summary = explain(params)
        finally:
            if home is not None:
                home.cleanup()
        metrics = json.loads((out / "metrics.json").read_text())
        _summary(metrics, (out / "rules.txt").read_text(), summary["output"])
    print(f"demo done in {time.perf_counter() - t0:.1f} s; open {out / 'report.html'}")
    print(f"label new data with: exclust label --tree {out / 'tree.json'} --input {data} --out {out}-labelled")
    return 0


def _error_line(exc: BaseException) -> str:
    """The one-line message of an error the user can fix, in the words of the command line."""
    describe = getattr(exc, "describe", None)
    text = describe("cli") if callable(describe) else str(exc)
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "change the input or options": exit 2 with their message."""
    from exclust.errors import InputError
    from exclust.tree import TreeFormatError

    errors: list[type[BaseException]] = [InputError, TreeFormatError, FileNotFoundError, FileExistsError]
    try:
        from pydantic import ValidationError  # parameter models (flows.params) check the same options

        errors.append(ValidationError)
    except ImportError:
        pass
    return tuple(errors)


def _quiet_shutdown() -> None:
    """After Ctrl-C: the cluster is torn down mid-task; its loggers' tracebacks are not news."""
    import logging

    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] in ("distributed", "tornado", "asyncio")]
    for name in names + ["distributed", "tornado", "asyncio"]:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


_REDELIVER_SECONDS = 0.05


@contextlib.contextmanager
def _interrupts() -> Iterator[None]:
    """First Ctrl-C: quiet the cluster's loggers and raise KeyboardInterrupt; later ones wait for the clean-up.

    Python swallows an exception raised inside a garbage-collector callback, a weakref callback
    or a finalizer (distributed registers such callbacks), printing "Exception ignored in ..."
    with a traceback and going on. Such a swallowed interrupt reaches ``sys.unraisablehook``:
    it is dropped there and delivered again once the callback has returned.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from exclust.progress import INTERRUPTED

    interrupted = []
    inside = [True]

    def handler(signum, frame):
        if interrupted:
            return  # already stopping: let the clean-up (cancel tasks, remove staging) finish
        interrupted.append(signum)
        INTERRUPTED.set()  # step boundaries check it too, whatever happens to the exception below
        _quiet_shutdown()
        raise KeyboardInterrupt

    def redeliver(signum):
        if inside[0]:
            os.kill(os.getpid(), signum)

    previous_hook = sys.unraisablehook

    def unraisable(event):
        if event.exc_type is KeyboardInterrupt and interrupted:
            threading.Timer(_REDELIVER_SECONDS, redeliver, (interrupted.pop(),)).start()
            return
        previous_hook(event)

    previous = signal.signal(signal.SIGINT, handler)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        inside[0] = False
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``exclust`` command."""
    args = build_parser().parse_args(argv)
    commands = {"explain": cmd_explain, "label": cmd_label, "demo": cmd_demo}
    # Local-cluster workers report what matters through the driver; their warnings (a task
    # cancelled by Ctrl-C, a slow event loop) would bury the command's own lines.
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    try:
        with _interrupts():
            return commands[args.command](args)
    except _user_errors() as exc:
        print(f"exclust {args.command}: error: {_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"exclust {args.command}: interrupted (Ctrl-C); stopped the run and removed its partial output",
              file=sys.stderr)
        return 130
    except Exception as exc:
        from exclust.cluster import SchedulerLost

        if not isinstance(exc, SchedulerLost):
            raise
        _quiet_shutdown()  # the client's reconnection attempts are not news either
        print(f"exclust {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
