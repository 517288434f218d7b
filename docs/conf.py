"""Sphinx configuration of exclust's documentation (built by ``python3 bootstrap.py docs``).

Sphinx with numpydoc and sphinx-gallery, as scikit-learn, Dask and the rest of the stack exclust
belongs to: the API reference is generated from the numpydoc docstrings, the gallery's examples
are executed at every build (so their figures and printed trees are what the code gives today),
and the CLI reference is generated from ``exclust.cli.build_parser()`` by sphinx-argparse.
The build runs with warnings as errors (``-W``).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "examples"))  # the gallery's shared helper, _show.py
os.environ.setdefault("MPLBACKEND", "Agg")

import exclust  # noqa: E402

project = "exclust"
author = "the exclust authors"
copyright = "2026, the exclust authors"
release = version = exclust.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinxarg.ext",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.json", "auto_examples/*.md5"]
html_theme = "alabaster"
html_theme_options = {"description": "Explain clusterings with small decision trees, on Dask", "fixed_sidebar": True,
                      "page_width": "1100px"}
html_static_path: list[str] = []

autosummary_generate = True
autodoc_default_options = {"members": False, "inherited-members": False}
# numpydoc renders Parameters, Attributes and Returns; the class members are listed by autosummary.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

intersphinx_mapping: dict[str, tuple[str, None]] = {}  # the build must not need the network

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"_show\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "plot_gallery": "True",
    "show_memory": False,
    "min_reported_time": 1,
    "matplotlib_animations": False,
    "capture_repr": (),  # the figure a helper returns is shown as a picture, not as its repr
}

suppress_warnings = ["config.cache"]  # sphinx-gallery's configuration holds callables; not an error
