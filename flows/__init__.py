"""Prefect flows of exclust: ``explain`` (flows/explain.py) and ``label`` (flows/label.py).

Import the flows from their modules (``from flows.explain import explain``); this package
imports nothing itself, so ``import flows.params`` does not pay for Prefect.
"""
