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


def _missing(module: str, feature: str, extra: str, exc: ImportError) -> MissingExtraError:
    package = (exc.name or module).split(".")[0].replace("_", "-")
    return MissingExtraError(f"{feature} needs {package}: pip install 'exclust[{extra}]'")


def _check_extra_name(extra: str) -> None:
    if extra not in EXTRAS:
        raise ValueError(f"extra must be one of {EXTRAS}, not {extra!r}")


def require_extra(module: str, feature: str, extra: str) -> ModuleType:
    """``module`` imported, or MissingExtraError: "``feature`` needs ``module``'s package: pip install
    'exclust[extra]'"."""
    _check_extra_name(extra)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise _missing(module, feature, extra, exc) from None


def check_extra(module: str, feature: str, extra: str) -> None:
    """MissingExtraError as ``require_extra`` gives it when ``module`` is not installed; nothing is imported."""
    _check_extra_name(extra)
    try:
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(name=module)
    except ImportError as exc:
        raise _missing(module, feature, extra, exc) from None
