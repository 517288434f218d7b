"""The one step list of an explain run, run alike by the CLI, the Python API and the Prefect flow.

A run is a ``Run`` (its config and what each step produced) taken through ``STEPS`` in order:
load, fit reference, build tree, score, report, write outputs. ``run_steps`` times each step
with the run's ``StepTimer`` (so ``metrics["seconds"]`` has the same keys whichever way a run
starts) and hands it to ``wrap`` first: the flow passes a function that makes each step a
Prefect task; the CLI and Python pass none. What the run owns (its input opened once, its pass
counter, its timer) is its ``RunContext``: no step keeps anything in a module, and each step runs
with the run's counter active wherever the step runs (a Prefect task's thread included).
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exclust.dataplane.cluster import dask_cluster
from exclust.dataplane.progress import Log, StepTimer
from exclust.dataplane.run_context import RunContext
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain import fits_ahead, pipeline


@dataclass
class Run:
    """One explain run: its configuration and what its steps produced so far."""

    config: ExplainConfig
    out: str | os.PathLike | None = None  # None: no write step (explain in memory)
    base: str | os.PathLike | None = None
    stage: Any = None  # the output's staging area, opened before any work (staging.staged_output)
    context: RunContext = field(default_factory=RunContext)
    started: float = field(default_factory=time.perf_counter)
    data: Any = None
    ref: Any = None
    built: Any = None
    ahead: fits_ahead.FitsAhead | None = None  # the curve's and the table's fits begun during the build
    scores: dict | None = None
    curve: dict | None = None
    standing: dict | None = None
    result: pipeline.ExplainResult | None = None

    @property
    def timer(self) -> StepTimer:
        return self.context.timer

    @property
    def source(self):
        """The run's input, opened once (``RunContext.source``)."""
        return self.context.source(self.config.source)


def _in_run(action: Callable[[Run], None]) -> Callable[[Run], None]:
    """``action`` with the run's pass counter active: a step counts its passes into its own run,
    whichever thread runs it (a Prefect task's too)."""
    import functools

    @functools.wraps(action)
    def step(run: Run) -> None:
        with run.context.active():
            action(run)

    return step


@_in_run
def _load(run: Run) -> None:
    run.data = pipeline.load(run.config, run.source)
    for note in run.data.notes:  # e.g. a label-like column left out of the default features
        run.timer.log(f"[{run.timer.elapsed:7.1f} s]   note: {note}")


@_in_run
def _fit_reference(run: Run) -> None:
    run.ref = pipeline.fit_reference(run.data, run.config)


@_in_run
def _build_tree(run: Run) -> None:
    # The curve's and the standing table's fits that need no tree run in a driver thread meanwhile.
    from exclust.jobs.explain.standing import fit_ahead

    run.ahead = fits_ahead.start(run.data, run.ref, run.config, fit_ahead)
    run.built = pipeline.build_tree(run.data, run.ref, run.config)


@_in_run
def _score(run: Run) -> None:
    run.scores, run.curve, run.standing = pipeline.score_and_curve(run.data, run.ref, run.built, run.config,
                                                                   ahead=run.ahead)


@_in_run
def _report(run: Run) -> None:
    # The scatter plot's rows: the run's sample, drawn before the metrics count this step's passes
    # (a pass when no earlier step drew it), so that metrics.json counts it.
    pipeline.run_sample(run.data, run.config)
    metrics = pipeline.assemble_metrics(run.scores, run.data, run.ref, run.built, run.config, run.timer.seconds,
                                        run.standing, pass_counter=run.context.passes)
    run.result = pipeline.ExplainResult(run.built.tree, metrics, run.built.tree.rules_text())
    run.result.report_html = pipeline.render(run.result, run.data, run.built, run.curve, run.config, run.source)


@_in_run
def _write_outputs(run: Run) -> None:
    assert run.result is not None and run.out is not None  # the report step ran; the step applies with an out
    seconds = run.result.metrics["seconds"]
    seconds.update(run.timer.seconds)  # the report step's time too
    seconds["total"] = round(time.perf_counter() - run.started, 3)
    pipeline.write_outputs(run.result, run.out, run.base, stage=run.stage)


@dataclass(frozen=True)
class Step:
    """One step: its name (the key in metrics["seconds"]), what it does, and when it applies."""

    name: str
    run: Callable[[Run], None]
    applies: Callable[[Run], bool] = lambda run: True
    detail: Callable[[Run], str] = lambda run: ""


STEPS: tuple[Step, ...] = (
    Step("load", _load, detail=lambda r: r.source.describe()),
    Step("fit reference", _fit_reference, applies=lambda r: pipeline.needs_reference_step(r.config),
         detail=lambda r: f"{r.config.reference}, k={r.config.k}"),
    Step("build tree", _build_tree, detail=lambda r: r.config.algorithm),
    Step("score", _score, detail=lambda r: "with the cost curve" if pipeline.wants_curve(r.config) else ""),
    Step("report", _report),
    Step("write outputs", _write_outputs, applies=lambda r: r.out is not None, detail=lambda r: str(r.out)),
)
STEP_NAMES = tuple(step.name for step in STEPS)


def run_steps(run: Run, wrap: Callable[[Step], Callable[[Run], Any]] | None = None) -> Run:
    """Take ``run`` through every step that applies, each timed by ``run.timer`` (and wrapped)."""
    run.config.check(run.source)
    for step in STEPS:
        if not step.applies(run):
            continue
        action = wrap(step) if wrap is not None else step.run
        with run.context.step(step.name, step.detail(run)):
            action(run)
    return run


def explain(config: ExplainConfig, log: Log | None = None, timer: StepTimer | None = None) -> pipeline.ExplainResult:
    """Every step but writing, on the active Dask client (or in memory); returns tree, metrics, report."""
    return _finished(run_steps(Run(config, context=RunContext(log, timer=timer))))


def run_explain(
    config: ExplainConfig, out: str | os.PathLike, *, scheduler: str | None = None,
    log: Log | None = None, base: str | os.PathLike | None = None, live: bool = False,
    wrap: Callable[[Step], Callable[[Run], Any]] | None = None, on_client: Callable[[Any], None] | None = None,
) -> pipeline.ExplainResult:
    """The whole explain job: check the output, open the Dask client, run every step, write the folder.

    Every way of starting a run ends here: the CLI and Python as they are, the Prefect flow with
    ``wrap`` (each step a task) and ``on_client`` (told which Dask client the run uses).
    ``live`` draws a progress bar of the Dask tasks on stderr (for a terminal).
    """
    context = RunContext(log, live=live and log is not None)
    source = context.source(config.source)
    with staged_explain_output(config, out, base, source) as stage:
        run = Run(config, out=out, base=base, stage=stage, context=context)
        with (dask_cluster(scheduler) if source.needs_cluster else contextlib.nullcontext()) as client:
            if on_client is not None and client is not None:
                on_client(client)
            run_steps(run, wrap)
    return _finished(run)


def _finished(run: Run) -> pipeline.ExplainResult:
    """The result of a run that went through its steps (the report step makes it, always)."""
    assert run.result is not None
    return run.result


def staged_explain_output(config: ExplainConfig, out: str | os.PathLike, base: str | os.PathLike | None = None,
                          source=None):
    """The output's staging, opened before any work: it may not touch what the run reads, and must be writable.
    ``source``: the run's opened input (default: opened from ``config``)."""
    from exclust.outputs.staging import staged_output

    source = source if source is not None else config.source()
    return staged_output(out, "explain", source.guards(), base=base, storage_options=config.storage_options,
                         info={"algorithm": config.algorithm})


