"""The ``exclust`` command: ``explain``, ``label`` and ``demo``.

``explain`` and ``label`` call the library directly (no Prefect needed); ``demo`` writes a
sample dataset and runs the explain job's steps on a local Dask cluster, without Prefect either.
``demo --prefect`` runs the same steps through the Prefect ``explain`` flow: Prefect 3 records
every flow run through an API, so without ``PREFECT_API_URL`` that starts Prefect's temporary
local server (a temporary Prefect home, no network) for the run.
Exit status: 0 done, 2 bad input or options (the message says what to change), 3 ``label
--fail-on-drift`` labelled data that drifted from what the tree was built on (all of it written),
1 anything else; a run stopped by SIGINT (Ctrl-C), SIGTERM (Prefect's Cancel, Kubernetes, systemd)
or SIGHUP (a closed terminal) exits 128 + the signal's number (130, 143, 129) after removing its
partial output.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Iterator, Sequence

from exclust.jobs import registry

THRESHOLDS = tuple(registry.THRESHOLDS)
DRIFT_EXIT = 3  # label --fail-on-drift: the output is written, but the data moved


def _algorithm_help() -> str:
    """--algorithm's help, read from the registry when the parser is built (plugins included)."""
    return (f"tree algorithm (default {registry.DEFAULT_ALGORITHM}): "
            + "; ".join(f"{a.name}: {a.summary}" for a in registry.ALGORITHMS.values()))


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


def _cluster_count(text: str) -> int:
    """A number of clusters: two or more, as every estimator's ``n_clusters``."""
    value = _positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 clusters, got {value}")
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
    ex.add_argument("--table-version", type=int, metavar="N",
                    help="a Delta or Iceberg table input: read version N (Iceberg: snapshot id) instead of the latest")
    ex.add_argument("--as-of", metavar="TIMESTAMP",
                    help="a Delta or Iceberg table input: read the latest version as of this time (ISO 8601)")
    ex.add_argument("--features", help="feature columns, comma-separated (default: every numeric column)")
    algorithms = tuple(registry.ALGORITHMS)
    ex.add_argument("--algorithm", default=registry.DEFAULT_ALGORITHM, choices=algorithms, help=_algorithm_help())
    ex.add_argument("--k", type=_cluster_count, required=True, help="number of clusters (2 or more)")
    ex.add_argument("--objective", default="kmeans", choices=registry.OBJECTIVES,
                    help="cost the tree keeps low, for imm, exkmc, exshallow, random-cut (default kmeans)")
    ex.add_argument("--depth-factor", type=float, default=0.03, help="exshallow's penalty on depth (0: ExGreedy)")
    ex.add_argument("--trials", type=_positive_int, default=1, help="random-cut: trees drawn, the cheapest kept")
    ex.add_argument("--no-curve", action="store_true", help="skip the report's cost-versus-leaves curve")
    ex.add_argument("--no-standing", action="store_true",
                    help="skip the report's standing table (the tree beside other algorithms' trees on the same "
                         "centers)")
    ex.add_argument("--kmedians-price", action=argparse.BooleanOptionalAction, default=None,
                    help="price the tree under k-medians too (2+ passes more over the data); "
                         "default: when the objective or the reference is kmedians")
    ex.add_argument("--threshold", default="exact", choices=THRESHOLDS, help="MMDT threshold variant (default exact)")
    ex.add_argument("--reference", default="gmm", help="gmm, kmeans, kmedians, or labels:COLUMN (default gmm)")
    ex.add_argument("--truth", help="ground-truth label column, scored with ARI")
    ex.add_argument("--leaves", type=_positive_int, help="leaf budget for exkmc, kdtree, cart (default k)")
    ex.add_argument("--concepts", help="concept label columns for concept-mmdt, comma-separated")
    ex.add_argument("--kernel", default="gaussian", choices=("gaussian", "laplace"), help="kernel of kernel-mmdt")
    ex.add_argument("--bandwidth", type=float, help="kernel bandwidth of kernel-mmdt")
    ex.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    ex.add_argument("--plot",
                    help="two features for the report's scatter plot, e.g. x0,x3 (default: the tree's first cuts)")
    ex.add_argument("--seed", type=int, default=0, help="random seed")
    ex.add_argument("--drop-nan", action="store_true", help="drop rows with NaN/inf features instead of failing")
    ex.add_argument("--out", required=True, help="output folder (replaced whole when the run succeeds)")
    ex.add_argument("--quiet", action="store_true", help="no progress lines")

    lb = sub.add_parser("label", help="apply a saved tree.json to Parquet partitions")
    lb.add_argument("--tree", required=True, help="tree.json written by explain (a path or an s3:// URL)")
    lb.add_argument("--input", required=True, help="Parquet file, folder of Parquet files, glob, or s3:// URL")
    lb.add_argument("--out", required=True,
                    help="output folder or s3:// prefix for the labelled files (same relative paths as the input), "
                         "a Delta table, or an Iceberg table iceberg+<catalog URI>#namespace.table")
    lb.add_argument("--date", help="label by date: YYYY-MM-DD or an inclusive range FIRST..LAST; "
                    "--input and --out then hold {date}, e.g. 'incoming/date={date}'")
    lb.add_argument("--fail-on-drift", action="store_true",
                    help=f"exit with status {DRIFT_EXIT} when a labelled date's rows per leaf drifted from the data "
                         "the tree was built on (PSI above 0.2); the labelled output is written either way")
    lb.add_argument("--out-format", choices=("auto", "folder", "delta", "iceberg"), default="auto",
                    help="delta or iceberg: --out is a table of that format (made on the first night), each --date "
                         "one commit of its partition; auto (default): iceberg for an iceberg+ address, delta when "
                         "--out is a Delta table already, else folder")
    lb.add_argument("--date-column", default="date", help="a table output's date partition column (default date)")
    lb.add_argument("--cluster-column", default="cluster")
    lb.add_argument("--leaf-column", default="leaf")
    lb.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                    help="fsspec storage option for s3:// paths, repeatable (e.g. endpoint_url=http://127.0.0.1:9000)")
    lb.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    lb.add_argument("--quiet", action="store_true")

    dm = sub.add_parser("demo", help="write a sample dataset and explain it through the Prefect flow")
    dm.add_argument("--out", default="exclust-demo", help="output folder (default exclust-demo)")
    dm.add_argument("--rows", type=_positive_int, default=300_000, help="rows of the sample dataset")
    dm.add_argument("--k", type=_cluster_count, default=5, help="components of the sample mixture")
    dm.add_argument("--d", type=_positive_int, default=2, help="features of the sample mixture")
    dm.add_argument("--algorithm", default=registry.DEFAULT_ALGORITHM, choices=algorithms)
    dm.add_argument("--threshold", default="exact", choices=THRESHOLDS)
    dm.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    dm.add_argument("--seed", type=int, default=0)
    dm.add_argument("--prefect", action=argparse.BooleanOptionalAction, default=False,
                    help="run the steps through the Prefect flow explain (without PREFECT_API_URL this starts "
                         "Prefect's temporary local server, about 15 s); default: the steps directly, no Prefect")
    return parser


def _log(quiet: bool):
    if quiet:
        return None
    return lambda message: print(message, file=sys.stderr, flush=True)


def cmd_explain(args) -> int:
    from exclust.jobs.explain.config import ExplainConfig
    from exclust.jobs.explain.steps import run_explain
    from exclust.sources.storage import parse_storage_options

    kind, column = ExplainConfig.parse_reference(args.reference)
    config = ExplainConfig(
        input=args.input, features=_names(args.features), algorithm=args.algorithm, k=args.k,
        reference=kind, reference_column=column, threshold=args.threshold, truth=args.truth,
        leaves=args.leaves, concepts=_names(args.concepts), kernel=args.kernel, bandwidth=args.bandwidth,
        random_state=args.seed, nan_policy="drop" if args.drop_nan else "raise", plot_features=_names(args.plot),
        storage_options=parse_storage_options(args.storage_option) or None, objective=args.objective,
        depth_factor=args.depth_factor, trials=args.trials, cost_curve=not args.no_curve, standing=not args.no_standing,
        kmedians_price=args.kmedians_price, table_version=args.table_version, as_of=args.as_of,
    )
    result = run_explain(config, args.out, scheduler=args.scheduler, log=_log(args.quiet), live=sys.stderr.isatty())
    _summary(result.metrics, result.rules, result.out)
    return 0


def _label_by_date(args, log) -> list:
    """``exclust label`` with ``--date`` or ``{date}`` paths: label each date, print one line per date
    (with its drift); returns the outcomes, for the command's exit status."""
    from exclust.jobs.label.label_run import run_label
    from exclust.jobs.label.nightly import NightOutcome, parse_dates
    from exclust.sources.storage import parse_storage_options

    def report(outcome: NightOutcome) -> None:
        print(outcome.summary(), flush=True)

    return run_label(args.tree, args.input, args.out, dates=parse_dates(args.date) if args.date else [],
                     scheduler=args.scheduler, storage_options=parse_storage_options(args.storage_option),
                     cluster_column=args.cluster_column, leaf_column=args.leaf_column,
                     out_format=getattr(args, "out_format", None), date_column=getattr(args, "date_column", None),
                     log=log, on_night=report)


def cmd_label(args) -> int:
    from exclust.jobs.label.nightly import has_date

    from exclust.jobs.label.table_labeling import output_table_format

    if args.date or has_date(args.input) or has_date(args.out) or output_table_format(args.out, args.out_format):
        outcomes = _label_by_date(args, _log(args.quiet))
        return _drift_status(args, [(o.name, o.result.drift) for o in outcomes if o.result is not None])
    from exclust.jobs.label.label_run import run_label
    from exclust.scoring.drift import drift_text
    from exclust.sources.storage import parse_storage_options

    # Tree, input and output are all checked before a cluster starts.
    result = run_label(args.tree, args.input, args.out, scheduler=args.scheduler,
                       storage_options=parse_storage_options(args.storage_option), cluster_column=args.cluster_column,
                       leaf_column=args.leaf_column, log=_log(args.quiet),
                       live=sys.stderr.isatty() and not args.quiet)[0].result
    print(f"labelled {result.n_rows} rows in {result.n_files} file(s) into {result.out}")
    for c, n in sorted(result.counts.items()):
        print(f"  cluster {c}: {n} rows" if c >= 0 else f"  not labelled (missing features): {n} rows")
    print(f"  {drift_text(result.drift)}")
    return _drift_status(args, [(args.input, result.drift)])


def _drift_status(args, drifts: list[tuple[str, dict | None]]) -> int:
    """0, or ``DRIFT_EXIT`` with one line naming the drifted dates when ``--fail-on-drift`` asks for it."""
    drifted = [(name, drift) for name, drift in drifts if drift is not None and drift["drifted"]]
    if not (args.fail_on_drift and drifted):
        return 0
    names = ", ".join(f"{name} (PSI {drift['psi']:.3g})" for name, drift in drifted)
    print(f"exclust label: drift: {len(drifted)} of {len(drifts)} labelled input(s) drifted from the data the tree "
          f"was built on: {names}; exit {DRIFT_EXIT} (--fail-on-drift)", file=sys.stderr)
    return DRIFT_EXIT


def _summary(metrics: dict, rules: str, out) -> None:
    """Rules, the headline measures of the catalogue (``scorecard.HEADLINE``) and which way each is better."""
    from exclust.scoring.scorecard import HEADLINE, MEASURES

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
    from pathlib import Path

    from exclust.errors import InputError
    from exclust.outputs.folders import validate_output_dir
    from exclust.datasets.synthetic import write_gmm_parquet

    if args.prefect:
        import flows  # noqa: F401  (checks that the flows extra is installed, before any data are written)
    log = _log(False)
    out = validate_output_dir(args.out)
    if not isinstance(out, Path):  # the demo's data are written beside the output folder
        raise InputError(f"exclust demo writes to a local folder; {args.out} is not one")
    data = out.with_name(out.name + "-data")
    spec = {"rows": args.rows, "k": args.k, "d": args.d, "seed": args.seed}
    stamp = data / "_demo.json"
    t0 = time.perf_counter()
    if data.exists() and stamp.exists() and json.loads(stamp.read_text()) == spec:
        log(f"[{0.0:7.1f} s] reusing the sample dataset in {data}")
    else:
        if data.exists():
            if not stamp.exists():
                raise FileExistsError(f"{data} exists and was not written by exclust demo; remove it or choose another "
                                      "--out")
            shutil.rmtree(data)
        log(f"[{0.0:7.1f} s] writing {args.rows} rows (k={args.k}, d={args.d}) as Parquet partitions to {data}")
        write_gmm_parquet(data, args.rows, args.k, args.d, rows_per_file=max(10_000, args.rows // 6),
                          random_state=args.seed)
        stamp.write_text(json.dumps(spec))
    log(f"[{time.perf_counter() - t0:7.1f} s] dataset ready")
    features = [f"x{j}" for j in range(args.d)]
    if not args.prefect:
        from exclust.jobs.explain.config import ExplainConfig
        from exclust.jobs.explain.steps import run_explain

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
                input=str(data), output=str(out), columns=",".join(features), algorithm=args.algorithm,
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
    print(f"label new data with: {_command_name()} label --tree {out / 'tree.json'} --input {data} --out "
          f"{out}-labelled")
    return 0


def _command_name() -> str:
    """How the user's shell reaches this exclust command: ``exclust`` when it is on the PATH (the
    environment activated), else the script's path beside this Python, else ``python -m exclust.cli``."""
    from pathlib import Path

    beside = Path(sys.executable).parent / "exclust"
    found = shutil.which("exclust")
    if found and beside.exists() and Path(found).resolve() == beside.resolve():
        return "exclust"
    if beside.exists():
        return os.path.relpath(beside)
    return f"{os.path.relpath(sys.executable)} -m exclust.cli"


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

    names = [n for n in list(logging.root.manager.loggerDict)
             if n.split(".")[0] in ("distributed", "tornado", "asyncio")]
    for name in names + ["distributed", "tornado", "asyncio"]:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


_REDELIVER_SECONDS = 0.05
# The signals that stop a run the way Ctrl-C does, and how the closing line names each.
STOP_SIGNALS: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


@dataclasses.dataclass
class _Stop:
    """The signal that stopped the run, if one did."""

    signum: int | None = None

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return STOP_SIGNALS.get(self.signum or signal.SIGINT, "Ctrl-C")


@contextlib.contextmanager
def _interrupts() -> Iterator[_Stop]:
    """First stop signal (``STOP_SIGNALS``): quiet the cluster's loggers and raise KeyboardInterrupt;
    later ones wait for the clean-up. Every one of them stops a run alike: tasks cancelled, staging
    removed, one line; the yielded ``_Stop`` records which signal it was (the exit code).

    Python swallows an exception raised inside a garbage-collector callback, a weakref callback
    or a finalizer (distributed registers such callbacks), printing "Exception ignored in ..."
    with a traceback and going on. Such a swallowed interrupt reaches ``sys.unraisablehook``:
    it is dropped there and delivered again once the callback has returned. A signal that lands
    inside a garbage-collector callback is not raised there at all but delivered again a moment
    later: distributed's GC diagnosis (its scheduler runs in this process with a local cluster)
    times each collection from its "start" to its "stop" callback, and an interrupt between the
    two leaves it failing an assertion at the next collection, printed as a traceback.
    """
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    from exclust.dataplane.progress import INTERRUPTED

    interrupted: list[int] = []
    inside = [True]

    def handler(signum, frame):
        if interrupted:
            return  # already stopping: let the clean-up (cancel tasks, remove staging) finish
        if _in_gc_callback(frame):
            threading.Timer(_REDELIVER_SECONDS, redeliver, (signum,)).start()
            return
        interrupted.append(signum)
        stop.signum = stop.signum or signum
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

    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    sys.unraisablehook = unraisable
    try:
        yield stop
    finally:
        inside[0] = False
        sys.unraisablehook = previous_hook
        for signum, action in previous.items():
            signal.signal(signum, action)


def _in_gc_callback(frame) -> bool:
    """Whether ``frame`` or a caller of it runs a callback of the garbage collector (``gc.callbacks``)."""
    import gc

    codes = {getattr(getattr(cb, "__func__", cb), "__code__", None) for cb in gc.callbacks}
    codes.discard(None)
    while frame is not None and codes:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``exclust`` command."""
    args = build_parser().parse_args(argv)
    commands = {"explain": cmd_explain, "label": cmd_label, "demo": cmd_demo}
    # Local-cluster workers report what matters through the driver; their warnings (a task
    # cancelled by Ctrl-C, a slow event loop) would bury the command's own lines.
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    stop = _Stop()
    try:
        with _interrupts() as stop:
            return commands[args.command](args)
    except _user_errors() as exc:
        print(f"exclust {args.command}: error: {_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"exclust {args.command}: interrupted ({stop.name}); stopped the run and removed its partial output",
              file=sys.stderr)
        return stop.exit_code
    except Exception as exc:
        from exclust.dataplane.cluster import SchedulerLost

        if not isinstance(exc, SchedulerLost):
            raise
        _quiet_shutdown()  # the client's reconnection attempts are not news either
        print(f"exclust {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
