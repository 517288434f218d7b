"""The explain job's load of a source the workers read (``pipeline.load``): the rows held on the
workers right after their one read, and the validation's checks and the run's sample made on each
block as soon as it is read, in the read's pass, while this process imports the later steps' modules.

Before (issue 29 item 4), the read, the validation and the sample were three passes, each submitted
once the one before had ended: at 10M rows the workers waited between them, and on the driver's
imports. Now the three are submitted together: the checks and the sample are Dask work on the held
blocks, which the scheduler runs on the worker holding each block once its read is done. The same
checks and the same sample (``parts.uniform_sample``, by global row id) as the passes of their own
gave; the sample is kept only when the validation dropped no row (``nan_policy="drop"`` changes the
rows' ids), else ``run_sample`` draws it again.
"""
from __future__ import annotations

import importlib
from typing import Any

from exclust.dataplane import parts, residency
from exclust.dataplane.tasks import current_client
from exclust.jobs import registry
from exclust.jobs.config import ExplainConfig
from exclust.sources.base import DataSource
from exclust.sources.dataset import Dataset, load_dataset


def load_held(config: ExplainConfig, extra: list[str], source: DataSource, sample_rows: int,
              ) -> tuple[Dataset, bool, tuple | None]:
    """``load_dataset`` for a source the workers read: (the dataset, whether it is held, the run's
    sample of ``sample_rows`` rows of X and the ``extra`` columns, drawn in the read's pass; None when
    it was not drawn there or does not hold for the validated rows)."""
    held: dict[str, Any] = {"held": False, "ahead": None}

    def hold_before_validation(X, extras, checks_of):
        def while_reading(arrays):
            blocks = dict(zip(extras, arrays[1:], strict=True))
            with parts.passes_paused():  # not a pass of its own: it reads each block the read has just held
                sample = parts.uniform_sample(arrays[0], *[blocks[c] for c in extra], size=sample_rows,
                                              random_state=config.random_state, compute=False)
            held["ahead"] = _compute_now(checks_of(arrays[0], blocks), sample)
            import_later_steps(config)

        (X, *columns), held["held"] = residency.hold(X, *extras.values(), force=config.hold,
                                                     while_reading=while_reading)
        checks, held["sample"] = held["ahead"]() if held["ahead"] is not None else (None, None)
        if checks is None:
            parts.record_pass(X)  # validation: one pass (sources/dataset.py's own map over the chunks)
        return X, dict(zip(extras, columns, strict=True)), checks

    data = load_dataset(source, config.features, extra_columns=extra, nan_policy=config.nan_policy,
                        n_clusters=config.k, storage_options=config.storage_options, prepare=hold_before_validation,
                        categorical=config.categorical or (), cluster_on=config.cluster_on)
    drawn = held.get("sample")
    if data.n_dropped or data.cluster_X is not None or list(data.extra) != extra:
        drawn = None  # other rows, or other columns, than run_sample draws
    return data, held["held"], drawn


def _compute_now(*collections: Any):
    """Submit dask collections on the active distributed client now (each task runs once its inputs
    are in memory); returns a function that waits for their values. None without a distributed
    client (the validation then runs its own pass, and the sample is drawn when first needed)."""
    client = current_client()
    if client is None:
        return None
    futures = client.compute(list(collections))
    return lambda: tuple(client.gather(futures))


def import_later_steps(config: ExplainConfig) -> None:
    """Import what fitting the reference and drawing the curve import, while the workers read:
    their modules pull in scikit-learn (and scipy.stats), about 1.1 s of this process's time
    that would otherwise follow the read (measured in the explain job at 10M rows). And what the
    report step imports (matplotlib: most of that step, with both workers idle, issue 29 item 4)."""
    from exclust.report.plots import import_plotting

    importlib.import_module("exclust.reference.kmeans")
    importlib.import_module("exclust.reference.gaussian_mixture")
    for name in registry.algorithm(config.algorithm).curve:  # the curve's series (CART: scikit-learn)
        registry.algorithm(name).estimator_class()
    importlib.import_module("exclust.report.page")
    import_plotting()
