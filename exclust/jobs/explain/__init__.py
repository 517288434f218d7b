"""The explain job: ``pipeline.py`` (its work as plain functions), ``steps.py`` (the one step list
and ``run_explain``), ``standing.py`` (the report's standing table), ``cost_curve.py`` (the report's
cost curve), ``fits_ahead.py`` (their fits on the run's sample, begun during the build), ``held_load.py`` (the
load of a source the workers read: read, checked and sampled in one pass); its
options are ``ExplainConfig`` in ``exclust/jobs/config.py``. Part of the jobs layer: it may import
everything below the jobs and the jobs' shared modules.
"""
