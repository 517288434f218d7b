"""The data plane: rows held as parts on Dask workers and every pass over them.

Lives here: ``parts.py`` (parts with global row offsets; ``map_reduce``, ``run_reductions``; the
pass counter; laziness, ``is_lazy``; threads), ``arrays.py`` (where an array lives, decided once
as it enters, and the few operations that differ between numpy and Dask), ``residency.py`` (rows
held on the workers or streamed; per-part state kept where a pass made it), ``stats.py`` (per-cluster sufficient
statistics that merge across parts), ``cluster.py`` (the Dask client), ``progress.py`` (one log
line per step), ``run_context.py`` (one run's own state: its opened input, pass counter and step
timer), ``tasks.py`` (a run's independent tasks, one Dask task each, cancelled whole),
``stop_signals.py`` (stop signals obeyed at any moment of a run), ``row_share.py`` (a pass's reduction over a
pseudo-random share of the rows). Kernels used by several layers:
``_cluster_moments.py`` (per-cluster counts,
sums, scatter), ``_center_distances.py`` (nearest center in squared l2 and l1, per-leaf sums,
many trees' costs in one sweep), ``_row_distances.py`` (one row's distance to every center at once, the
least of them), ``_row_hash.py`` (the one row hash behind every random draw).
May import: ``exclust.errors`` only (and its own kernels).
"""
