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
partial output, from the command's first line on; 4 when the signal came after an output was committed
whole (the line names it; it is kept).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Sequence

from exclust.jobs import registry

THRESHOLDS = tuple(registry.THRESHOLDS)
DRIFT_EXIT = 3  # label --fail-on-drift: the output is written, but the data moved
STOPPED_AFTER_COMMIT = 4  # a stop signal came after an output was committed whole: that output is kept


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
                    help="skip the report's standing table (the tree beside other algorithms' trees on the same centers)")
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
    ex.add_argument("--plot", help="two features for the report's scatter plot, e.g. x0,x3 (default: the tree's first cuts)")
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
                    help=f"exit with status {DRIFT_EXIT} when a labelled date's rows per leaf drifted from the data the "
                         "tree was built on (PSI above 0.2); the labelled output is written either way")
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
    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.steps import run_explain
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
    from exclust.dataplane.cluster import dask_cluster
    from exclust.jobs.labeling import load_tree
    from exclust.jobs.nightly import NightOutcome, check_templates, label_dates, parse_dates
    from exclust.jobs.table_labeling import output_table_format
    from exclust.sources.storage import parse_storage_options

    days = parse_dates(args.date) if args.date else []
    options = parse_storage_options(args.storage_option)
    table = output_table_format(args.out, getattr(args, "out_format", None), options)
    check_templates(args.input, args.out, dated=bool(days), table=table)
    tree = load_tree(args.tree, options)  # a bad tree file fails before any cluster starts

    def report(outcome: NightOutcome) -> None:
        print(outcome.summary(), flush=True)

    if log is not None:
        log(f"labelling {len(days)} date(s) {days[0]}..{days[-1]}: {args.input} -> {args.out}")
    with dask_cluster(args.scheduler):
        return label_dates(tree, args.input, args.out, days, on_night=report,
                           cluster_column=args.cluster_column, leaf_column=args.leaf_column, storage_options=options,
                           **({"table_format": table, "date_column": getattr(args, "date_column", None)} if table else {}))


def cmd_label(args) -> int:
    from exclust.jobs.nightly import has_date

    from exclust.jobs.table_labeling import output_table_format

    if args.date or has_date(args.input) or has_date(args.out) or output_table_format(args.out, args.out_format):
        outcomes = _label_by_date(args, _log(args.quiet))
        return _drift_status(args, [(o.name, o.result.drift) for o in outcomes if o.result is not None])
    from exclust.jobs.labeling import plan_label, run_label
    from exclust.dataplane.cluster import dask_cluster
    from exclust.scoring.drift import drift_text
    from exclust.dataplane.progress import StepTimer
    from exclust.sources.storage import parse_storage_options

    options = parse_storage_options(args.storage_option)
    # Tree, input and output are all checked before a cluster starts.
    plan = plan_label(args.tree, args.input, args.out, storage_options=options,
                      cluster_column=args.cluster_column, leaf_column=args.leaf_column)
    timer = StepTimer(_log(args.quiet), live=sys.stderr.isatty() and not args.quiet)
    with dask_cluster(args.scheduler):
        with timer.step("label", f"{args.input} -> {args.out}"):
            result = run_label(plan)
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

    from exclust.outputs.folders import validate_output_dir
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
    if not args.prefect:
        from exclust.jobs.config import ExplainConfig
        from exclust.jobs.steps import run_explain

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
    print(f"label new data with: {_command_name()} label --tree {out / 'tree.json'} --input {data} --out {out}-labelled")
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


def _user_error(exc: BaseException) -> bool:
    """Whether ``exc`` means "change the input or options" (exit 2 with its message). Told without importing
    anything: a stop signal may have cut an import short, and the module that raised is loaded anyway."""
    kinds: list[type[BaseException]] = [FileNotFoundError, FileExistsError]
    for module, name in (("exclust.errors", "InputError"), ("exclust.errors", "TreeFormatError"),
                         ("pydantic", "ValidationError")):  # parameter models (flows.params) check the same options
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            kinds.append(kind)
    return isinstance(exc, tuple(kinds))


def _stopped_line(command: str, stop) -> str:
    if stop.committed:
        return (f"{command}: interrupted ({stop.name}) after committing {', '.join(stop.committed)}: "
                f"that output is complete and kept; exit {STOPPED_AFTER_COMMIT}")
    return f"{command}: interrupted ({stop.name}); stopped the run and removed its partial output"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``exclust`` command. Stop signals are obeyed from its first line
    (``exclust.dataplane.stop_signals``); with ``argv`` None (this process's own command line) the process
    ends with the returned status, and a stop signal after the outcome is settled is ignored while it exits."""
    from exclust.dataplane import stop_signals

    with stop_signals.listening(keep_settled=argv is None) as stop:
        command, code = "exclust", None
        try:
            try:
                args = build_parser().parse_args(argv)
                command = f"exclust {args.command}"
                commands = {"explain": cmd_explain, "label": cmd_label, "demo": cmd_demo}
                # Local-cluster workers report what matters through the driver; their warnings (a task
                # cancelled by Ctrl-C, a slow event loop) would bury the command's own lines.
                os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
                code = commands[args.command](args)
            except KeyboardInterrupt:
                code = -1
            except Exception as exc:
                lost = sys.modules.get("exclust.dataplane.cluster")
                if _user_error(exc):
                    print(f"{command}: error: {_error_line(exc)}", file=sys.stderr)
                    code = 2
                elif lost is not None and isinstance(exc, lost.SchedulerLost):
                    stop_signals.quiet_shutdown()  # the client's reconnection attempts are not news either
                    print(f"{command}: error: {exc}", file=sys.stderr)
                    code = 1
                else:
                    stop_signals.settle()
                    raise
            stop_signals.settle()  # from here on a stop signal changes nothing: the outcome is decided
        except KeyboardInterrupt:  # the first stop signal landed while an outcome was being reported
            stop_signals.settle()
            code = -1
        if stop.signum is not None or code == -1:
            # A KeyboardInterrupt that left an exec() of a string (dataclasses make their methods so: a stop
            # during an import) leaves CPython's "unhandled KeyboardInterrupt" flag set, and `python -m`
            # then ends the process by SIGINT whatever status it returns. Any exec() of a string clears it.
            exec("pass")  # noqa: S102 - a constant
            print(_stopped_line(command, stop), file=sys.stderr, flush=True)
            return STOPPED_AFTER_COMMIT if stop.committed else stop.exit_code
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
