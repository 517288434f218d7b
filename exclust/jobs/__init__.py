"""The jobs: what the CLI, the Python API and the Prefect flows run, and the registry they read.

Lives here: ``registry.py`` (every algorithm and MMDT threshold variant, named once, with what
each needs from a run), ``config.py`` (``ExplainConfig``), ``pipeline.py`` (the explain job's
work as plain functions), ``steps.py`` (the one step list and ``run_explain``), ``labeling.py``
(apply a saved tree to a source), ``nightly.py`` (labelling by date), ``table_labeling.py`` (a
night's labels committed to a Delta or Iceberg table), ``cost_curve.py`` (the report's cost curve
for a run), ``standing.py`` (the run's tree beside the other algorithms' trees), ``warmup.py``
(compile the numba kernels once, into numba's cache).
May import everything below it; nothing below imports it. The CLI and the Prefect flows (package ``flows``) sit above.
"""
