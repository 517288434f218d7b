"""The optional packages of exclust's features, imported where a feature is used.

The core (``pip install exclust``) holds what the in-memory and Dask paths need; lake tables,
object stores, the Prefect flows and the dask-ml backend are extras of the package
(``pyproject.toml``'s ``[project.optional-dependencies]``). ``require_extra`` imports such a
package at the feature's use site, so the core never imports one, and a missing one gives one
line naming the extra: "reading Delta tables needs deltalake: pip install 'exclust[lake]'".
"""
from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from exclust.errors import MissingExtraError

# The extras a feature may need (pyproject.toml's optional dependencies, less all, test and docs).
EXTRAS = ("flows", "lake", "s3", "dask-ml")


def require_extra(module: str, feature: str, extra: str, *, load: bool = True) -> ModuleType | None:
    """``module`` imported, or MissingExtraError: "``feature`` needs ``module``'s package: pip install
    'exclust[extra]'". With ``load=False`` only whether it is installed is checked (nothing is
    imported; returns None)."""
    if extra not in EXTRAS:
        raise ValueError(f"extra must be one of {EXTRAS}, not {extra!r}")
    try:
        if not load:
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(name=module)
            return None
        return importlib.import_module(module)
    except ImportError as exc:
        package = (exc.name or module).split(".")[0].replace("_", "-")
        raise MissingExtraError(f"{feature} needs {package}: pip install 'exclust[{extra}]'") from None
