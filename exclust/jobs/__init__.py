"""The jobs: what the CLI, the Python API and the Prefect flows run, and the registry they read.

Lives here: ``registry.py`` (every algorithm and MMDT threshold variant, named once, with what
each needs from a run), ``config.py`` (``ExplainConfig``), ``pipeline.py`` (the explain job's
work as plain functions), ``steps.py`` (the one step list and ``run_explain``), ``labeling.py``
(apply a saved tree to a source), ``nightly.py`` (labelling by date).
May import everything below it; nothing below imports it. The CLI and ``flows/`` sit above.
"""
