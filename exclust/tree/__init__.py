"""The tree: ``ThresholdTree``, the one tree type every algorithm returns, and its file format.

Lives here: ``threshold_tree.py`` (the tree, its prefixes by ``prune``, ``TreeBuilder``), ``file_format.py``
(``tree.json``'s schema, written and read back with every entry checked), ``node_kinds.py`` (what
a node is: a leaf, a one-sided cut, an interval, a category set; where missing values go), ``rules.py`` (the
tree in words: node tests, leaf conditions, rules), ``drawing.py`` (the tree as SVG: what the report and a
notebook show) with ``style.py`` (cluster colours, number and text formatting, shared with the
report), ``_routing.py`` (numba: routing rows through a tree).
May import: ``exclust.errors`` and the data plane (``exclust.dataplane``); nothing above.
"""
from __future__ import annotations

from exclust.tree.file_format import TreeFormatError
from exclust.tree.node_kinds import (
    CATEGORY_SET,
    INTERVAL,
    LEAF,
    MISSING_LEFT,
    MISSING_NONE,
    MISSING_RIGHT,
    ONE_SIDED,
    UNSEEN_CATEGORY,
)
from exclust.tree.threshold_tree import ThresholdTree, TreeBuilder

__all__ = ["CATEGORY_SET", "INTERVAL", "LEAF", "MISSING_LEFT", "MISSING_NONE", "MISSING_RIGHT", "ONE_SIDED",
           "UNSEEN_CATEGORY", "ThresholdTree", "TreeBuilder", "TreeFormatError"]
