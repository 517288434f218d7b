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
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

from exclust.jobs import registry

DRIFT_EXIT = 3  # label --fail-on-drift: the output is written, but the data moved
STOPPED_AFTER_COMMIT = 4  # a stop signal came after an output was committed whole: that output is kept


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
                     scheduler=args.scheduler_address,
                     storage_options=parse_storage_options(args.storage_options or []),
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
        print(f"  cluster {c}: {n} rows" if c >= 0 else f"  not labelled (an infinite value, or a missing one at a "
                                                        f"cut with no missing side): {n} rows")
    for name, n in sorted(result.unseen_categories.items()):
        print(f"  unseen categories in '{name}': {n} rows (sent to each cut's missing side)")
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

    from exclust.datasets.synthetic import write_gmm_parquet
    from exclust.errors import InputError
    from exclust.outputs.folders import validate_output_dir

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
        log(f"[{0.0:7.1f} s] writing {args.rows} rows (k={args.n_clusters}, d={args.d}) as Parquet partitions "
            f"to {data}")
        write_gmm_parquet(data, args.rows, args.n_clusters, args.d, rows_per_file=max(10_000, args.rows // 6),
                          random_state=args.random_state, extra_files={stamp.name: json.dumps(spec)})
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
    ends with the returned status, and a stop signal after the outcome is settled is ignored while it exits:
    it ends itself once the outcome is reported (``_end_process``), without the interpreter's teardown."""
    code = _main(argv)
    if argv is None:
        _end_process(code)
    return code


def _end_process(code: int) -> None:
    """End this process with ``code`` as the interpreter would, less its teardown of every module's objects
    (numba, scikit-learn, matplotlib, distributed: about a second of the driver at the end of every run,
    issue 29 item 4). Every output is committed or removed by now: the run's contexts have all exited. What
    an ordinary exit does first is done here too: non-daemon threads joined, ``atexit`` handlers run
    (logging's flush, multiprocessing's finalizers), the standard streams flushed."""
    import atexit

    shutdown = getattr(threading, "_shutdown", None)  # joins non-daemon threads, as Py_Finalize does first
    if callable(shutdown):
        shutdown()
    _end_leftover_children()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(int(code or 0) & 0xFF)  # as sys.exit(code) gives it to the OS


def _end_leftover_children() -> None:
    """Kill the child processes still alive once the run is settled, before ``multiprocessing``'s exit handler
    joins them with no time limit: they can only be workers of the run's own local cluster that its close did not
    reach (a stop once left Dask's event loop unable to run: the workers stayed, and the process waited on them
    for good). They hold nothing of the run's: every output is committed or removed by now."""
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is None:
        return
    for child in multiprocessing.active_children():
        child.kill()  # SIGKILL: a cluster's processes start with the stop signals blocked
        child.join(timeout=5)


def _main(argv: Sequence[str] | None) -> int:
    from exclust.dataplane import stop_signals

    with stop_signals.listening(keep_settled=argv is None) as stop:
        commands = {"explain": cmd_explain, "label": cmd_label, "demo": cmd_demo}
        # The command word from the raw arguments: a stop that lands while the parser is built (it imports the
        # registry, seconds on a loaded machine) still names the command in its closing line.
        words = sys.argv[1:] if argv is None else list(argv)
        command, code = (f"exclust {words[0]}" if words and words[0] in commands else "exclust"), None
        try:
            try:
                args = build_parser().parse_args(argv)
                command = f"exclust {args.command}"
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
