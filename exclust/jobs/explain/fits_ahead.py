"""The cost curve's and the standing table's fits on the run's sample, started in a driver thread
while the workers build the run's tree (issue 29 item 4).

Those fits (``standing.fit_ahead``: CART and KDTree for the curve; IMM, ExShallow, ExGreedy for
the table) read the run's uniform sample in memory, the reference's centers and the sampled rows'
reference labels: nothing the build makes. Only the curve's series of the run's own kind (read
from its fitted estimator) and the run's own row of the table wait for the tree. Done in the score step, they kept both
cores of a two-worker run waiting on one driver thread, about a bare pass at 10M rows; during the
build the driver mostly waits on the workers. The score step takes the trees fitted here and fits
the rest as before: same calls on the same inputs (``cost_curve.plan_curve``,
``standing.fit_standing``), so the same trees.

Started only where that is safe and free: on a distributed run (the build's parallel numba
kernels then run on the workers, never beside this thread's in this process: numba's workqueue
threading layer takes one launching thread at a time) whose sample is drawn already (no pass
here: a new thread has no active pass counter, so nothing it does is counted). A fit that fails
here is done again in the score step, where its error surfaces as before. The thread is a daemon:
a stopped or failed run does not wait for it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from exclust.jobs import registry
from exclust.sources.dataset import Dataset
from exclust.tree import ThresholdTree

if TYPE_CHECKING:  # the type alone: the chain of imports through the standing table stays short
    from exclust.jobs.config import ExplainConfig


@dataclass
class FittedAhead:
    """What was fitted ahead: the curve's series by algorithm (``CurveSeries``), the table's trees by algorithm."""

    curve: dict[str, Any] = field(default_factory=dict)
    standing: dict[str, ThresholdTree] = field(default_factory=dict)


class FitsAhead:
    """The fits running in a daemon thread; ``result()`` waits for them (empty when they failed)."""

    def __init__(self, work) -> None:
        self._result = FittedAhead()
        self._thread = threading.Thread(target=self._run, args=(work,), name="exclust-fits-ahead", daemon=True)
        self._thread.start()

    def _run(self, work) -> None:
        try:
            self._result = work()
        except Exception:  # noqa: BLE001 (done again in the score step, where the error surfaces)
            self._result = FittedAhead()

    def result(self) -> FittedAhead:
        self._thread.join()
        return self._result


def wants_curve(config: ExplainConfig) -> bool:
    # Under k-medians the curve shows the l1 surrogate cost (exclust.scoring.curves), in the same one pass.
    return bool(config.cost_curve) and registry.algorithm(config.algorithm).cost_curve


def curve_leaves(config: ExplainConfig) -> list[int]:
    """The leaf counts of the run's cost curve: k up to the larger of the run's leaves and 2k."""
    return list(range(config.k, max(config.leaves or config.k, 2 * config.k) + 1))


def sample_reference_labels(sample, ref, config: ExplainConfig):
    """Reference labels of the run's sampled rows (``pipeline.RunSample``), without a pass: the model's
    own prediction, or the sampled label column."""
    if ref.model is not None and hasattr(ref.model, "predict"):
        # As a Dataset with the names of the columns the model was fitted on (the clustering columns when given).
        return np.asarray(ref.model.predict(Dataset(sample.X if sample.Z is None else sample.Z,
                                                    list(ref.summary.feature_names))))
    if config.reference_column and config.reference_column in sample.extra:
        return sample.extra[config.reference_column]
    return None


def start(data: Dataset, ref, config: ExplainConfig, fit: Callable[..., FittedAhead]) -> FitsAhead | None:
    """Start ``fit`` (``standing.fit_ahead``: the fits that need no tree) in a daemon thread, or
    return None where it is not started (see the module). ``fit`` takes (the run's sample, ``ref``,
    ``config``, ``data``, whether the run draws a curve, whether it gets a table); it is handed in
    because it reaches the scoring modules, which the pipeline (importing this module) reaches only
    in its functions: the chain of imports stays short."""
    entry = registry.algorithm(config.algorithm)
    curve = wants_curve(config)
    table = bool(config.standing) and entry.needs != registry.OWN and entry.space is None
    if (not (curve or table) or ref is None or ref.kind.startswith("labels:") or not data.distributed
            or data.run_sample is None):
        return None
    return FitsAhead(lambda: fit(data.run_sample, ref, config, data, curve, table))
