"""Where data comes from: data sources, and their validation into one float64 matrix (``Dataset``).

A source is one module implementing ``base.DataSource`` (recognise an input, plan it from
metadata alone, read a part on a worker, guard what a run reads) plus one registration in
``base.SOURCES``; ``base.open_source`` decides the kind of an input, once. Lives here:
``base.py`` (the interface and the registry), ``storage.py`` (paths, ``file://``, ``s3://``
through fsspec: listing), ``parquet.py`` (the Parquet source) with ``parquet_reader.py`` (a
planned piece read on a worker), ``delta.py`` and ``iceberg.py`` (table sources) with
``table_plan.py`` (a snapshot's read planned from its metadata), ``in_memory.py`` (numpy, pandas
and Dask arrays and frames), ``frames.py`` (a DataFrame handed to an estimator: fit's
Dataset, predict's coded rows), ``dataset.py`` (``Dataset``, ``load_dataset``, validation),
``feature_choice.py`` (the feature columns when none are named), ``categories.py`` (category
columns detected, their vocabularies and codes), ``guards.py`` (what a run reads,
as the outputs must know it), ``extras.py`` (an optional extra's package imported where its
feature is used, or one line naming the extra), ``_finite_check.py`` (numba: the validation pass's
per-block counts).
May import: ``exclust.errors`` and the data plane; nothing above.
"""
