"""The label job: ``label_run.py`` (``run_label``, what the CLI and the flow run), ``labeling.py``
(a saved tree applied to any registered source, its tasks on the data plane), ``nightly.py``
(labelling by date), ``table_labeling.py`` (a night into a lake table). Part of the jobs layer: it
may import everything below the jobs.
"""
