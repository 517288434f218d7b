"""What a run writes: output folders checked against what the run reads, and the commit protocol
by which a folder or object-store prefix appears whole or not at all.

Lives here: ``folders.py`` (locations, guards, replaceable outputs, JSON text) and ``staging.py``
(staging areas, commit by rename or by ``_SUCCESS`` written last, stale staging removed);
``lake_table.py`` (the output-table interface: a night of labels as one commit), with its formats
``delta_table.py`` (Delta Lake) and ``iceberg_table.py`` (Iceberg).
May import: ``exclust.errors`` and ``exclust.sources`` (storage); nothing above.
"""
