"""Prefect flows of exclust: ``explain`` (``explain.py``) and ``label`` (``label.py``), with their
typed parameters (``params.py``, the forms of the Prefect UI), when a task retries (``retry.py``),
and bad input as one log line (``quiet_errors.py``).

Import the flows from their modules (``from flows.explain import explain``); this package
imports nothing itself, so ``import flows.params`` does not pay for Prefect. It checks only that
the ``flows`` extra is installed (Prefect, and pydantic with it), so that importing a flow without
it says which extra to install in one line instead of failing inside Prefect's imports.
"""
from exclust.sources.extras import check_extra

for _module in ("prefect", "pydantic"):
    check_extra(_module, "running the Prefect flows", "flows")
