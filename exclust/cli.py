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
from typing import Iterator, NoReturn, Sequence

from exclust.jobs import registry

DRIFT_EXIT = 3  # label --fail-on-drift: the output is written, but the data moved


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what to change, and where the help is), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``exclust`` command's parser, generated from the jobs' options schemas (``exclust.jobs.options``)."""
    from exclust import __version__
    from exclust.jobs.option_spec import OneChoiceALineFormatter, add_arguments
    from exclust.jobs.options import LABEL, demo_options, explain_options

    parser = _Parser(prog="exclust", formatter_class=OneChoiceALineFormatter,
                     description="Explain clusterings of large datasets with small axis-aligned decision trees.")
    parser.add_argument("--version", action="version", version=f"exclust {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{explain,label,demo}")
    options = explain_options()
    common = [o for o in options if not registry.used_by().get(o.name)]
    ex = sub.add_parser("explain", formatter_class=OneChoiceALineFormatter,
                        help="fit a reference clustering on a dataset (Parquet, Delta, Iceberg) and explain it with "
                             "a tree")
    add_arguments(ex, common)
    add_arguments(ex.add_argument_group("options of some algorithms (see --algorithm)"),
                  [o for o in options if o not in common], used_by=registry.used_by())
    lb = sub.add_parser("label", formatter_class=OneChoiceALineFormatter,
                        help="apply a saved tree.json to new data, one labelled file per input file")
    add_arguments(lb, LABEL)
    dm = sub.add_parser("demo", formatter_class=OneChoiceALineFormatter,
                        help="write a sample dataset and explain it on a local Dask cluster (--prefect: through the "
                             "Prefect flow)")
    add_arguments(dm, demo_options())
    return parser


def _log(quiet: bool):
    if quiet:
        return None
    return lambda message: print(message, file=sys.stderr, flush=True)


def cmd_explain(args) -> int:
    from exclust.jobs.config import EXPLAIN_OPTIONS, ExplainConfig
    from exclust.jobs.explain.steps import run_explain
    from exclust.jobs.option_spec import config_values

    values = config_values(EXPLAIN_OPTIONS, args)
    if not values["reference_column"]:  # --reference labels:COLUMN, or a kind: spelled as the command line spells it
        values["reference"], values["reference_column"] = ExplainConfig.parse_reference(values["reference"])
    config = ExplainConfig(**values).check()
    config.check_against_source()  # --plot and --k against the source's schema and row count: metadata only
    result = run_explain(config, args.output, scheduler=args.scheduler_address, log=_log(args.quiet),
                         live=sys.stderr.isatty())
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

    return run_label(args.tree, args.input, args.output, dates=parse_dates(args.date) if args.date else [],
                     scheduler=args.scheduler_address, storage_options=parse_storage_options(args.storage_options or []),
                     cluster_column=args.cluster_column, leaf_column=args.leaf_column,
                     out_format=getattr(args, "output_format", None), date_column=getattr(args, "date_column", None),
                     log=log, on_night=report)


def cmd_label(args) -> int:
    from exclust.jobs.label.nightly import has_date

    from exclust.jobs.label.table_labeling import output_table_format

    if (args.date or has_date(args.input) or has_date(args.output)
            or output_table_format(args.output, args.output_format)):
        outcomes = _label_by_date(args, _log(args.quiet))
        return _drift_status(args, [(o.name, o.result.drift) for o in outcomes if o.result is not None])
    from exclust.jobs.label.label_run import run_label
    from exclust.scoring.drift import drift_text
    from exclust.sources.storage import parse_storage_options

    # Tree, input and output are all checked before a cluster starts.
    result = run_label(args.tree, args.input, args.output, scheduler=args.scheduler_address,
                       storage_options=parse_storage_options(args.storage_options or []),
                       cluster_column=args.cluster_column, leaf_column=args.leaf_column, log=_log(args.quiet),
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
    out = validate_output_dir(args.output)
    if not isinstance(out, Path):  # the demo's data are written beside the output folder
        raise InputError(f"exclust demo writes to a local folder; {args.output} is not one")
    data = out.with_name(out.name + "-data")
    spec = {"rows": args.rows, "k": args.n_clusters, "d": args.d, "seed": args.random_state}
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
        log(f"[{0.0:7.1f} s] writing {args.rows} rows (k={args.n_clusters}, d={args.d}) as Parquet partitions to {data}")
        write_gmm_parquet(data, args.rows, args.n_clusters, args.d, rows_per_file=max(10_000, args.rows // 6),
                          random_state=args.random_state)
        stamp.write_text(json.dumps(spec))
    log(f"[{time.perf_counter() - t0:7.1f} s] dataset ready")
    from exclust.jobs.config import EXPLAIN_OPTIONS, ExplainConfig
    from exclust.jobs.option_spec import config_values

    # The demo's options carry the explain options' names: the config and the flow's form take them as they are.
    run = {**config_values(EXPLAIN_OPTIONS, args), "input": str(data), "features": [f"x{j}" for j in range(args.d)],
           "truth": "truth"}
    if not args.prefect:
        from exclust.jobs.explain.steps import run_explain

        config = ExplainConfig(**run)
        result = run_explain(config, out, scheduler=args.scheduler_address, log=log, live=sys.stderr.isatty())
        _summary(result.metrics, result.rules, result.out)
    else:
        home = _prefect_environment()
        try:
            from flows.explain import explain
            from flows.params import ExplainParams

            params = ExplainParams(**run, output=str(out), scheduler_address=args.scheduler_address)
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
