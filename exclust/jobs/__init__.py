"""The jobs: what the CLI, the Python API and the Prefect flows run, and the registries they read.

Lives here: ``registry.py`` (every algorithm and MMDT threshold variant, named once, with what
each needs from a run and the options of its own), ``references.py`` (the reference clusterings'
registry), ``option_spec.py`` (``Option``: an option declared once, and what it becomes on a
config and a command line), ``options.py`` (each job's options schema), ``config.py``
(``ExplainConfig`` and ``LabelConfig``, generated from the schema), ``warmup.py`` (numba's kernels
compiled once), and one folder per job: ``explain/`` (the explain job's work as plain functions,
the one step list and ``run_explain``, the report's standing table and cost curve) and ``label/``
(``run_label``, a saved tree applied to any source, labelling by date and into a lake table).
May import everything below it; nothing below imports it. The CLI and the ``flows`` package sit above.
"""
