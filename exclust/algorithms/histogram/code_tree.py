"""``CodeTree``: the tree the histogram engine grows on bin codes, and its routing tables.

A node cuts one feature in one of two ways:

- a **threshold cut** ``code <= split_bin`` (numeric features), the real-valued cut
  ``x <= edges[f][split_bin]`` (binning.py);
- a **set cut** (category features): the codes in ``left_codes[node]`` go left.

Every cut also has a **missing side** (``missing_side[node]``): where the feature's missing
bin goes (``MISSING_LEFT``, ``MISSING_RIGHT``; ``MISSING_NONE`` when no side was learned, which
routes the missing bin right, past every threshold). The kernels take either the threshold bins
alone (``arrays`` without a mapper, or when the tree needs nothing else) or a table of which
codes go left at each node (``cut_table``), which holds every kind of cut.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from exclust.algorithms.histogram.binning import BinMapper
from exclust.tree import LEAF, ONE_SIDED, ThresholdTree
from exclust.tree.node_kinds import CATEGORY_SET, MISSING_AT_FIT, MISSING_LEFT, MISSING_NONE, MISSING_RIGHT

MISSING_SIDES = (MISSING_NONE, MISSING_LEFT, MISSING_RIGHT)


@dataclass
class CodeTree:
    """A tree being grown on bin codes: node ``i`` sends a row left when ``code[feature] <= split_bin``,
    or (a set cut) when its code is in ``left_codes[i]``; its missing bin goes to ``missing_side[i]``."""

    feature: list[int] = field(default_factory=lambda: [-1])  # -1: leaf
    split_bin: list[int] = field(default_factory=lambda: [-1])  # -1: leaf or set cut
    left: list[int] = field(default_factory=lambda: [-1])
    right: list[int] = field(default_factory=lambda: [-1])
    value: list[int] = field(default_factory=lambda: [-1])  # reference center of a leaf
    left_codes: list[tuple[int, ...]] = field(default_factory=lambda: [()])  # a set cut's left codes
    missing_side: list[int] = field(default_factory=lambda: [MISSING_NONE])
    # Identity of this growing tree, under which kept parts remember each row's leaf between
    # passes (see ``criteria.resume_nodes``); ``remember`` False for a trial copy, which only reads it.
    lineage: int = field(default_factory=lambda: int.from_bytes(os.urandom(8), "little") >> 1)
    remember: bool = True
    lineage_nodes: int | None = None  # a trial copy: how many nodes its lineage had when copied

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    def leaves(self) -> list[int]:
        return [i for i, f in enumerate(self.feature) if f < 0]

    def _grow(self, node: int, feature: int, missing_side: int) -> tuple[int, int]:
        if self.feature[node] >= 0:
            # Routing memory relies on a tree that only grows: a cut is never replaced.
            raise ValueError(f"node {node} is already split")
        if missing_side not in MISSING_SIDES:
            raise ValueError(f"missing_side must be one of {MISSING_SIDES}, got {missing_side!r}")
        kids = []
        for _ in range(2):
            self.feature.append(-1)
            self.split_bin.append(-1)
            self.left.append(-1)
            self.right.append(-1)
            self.value.append(-1)
            self.left_codes.append(())
            self.missing_side.append(MISSING_NONE)
            kids.append(self.n_nodes - 1)
        self.feature[node], self.missing_side[node] = int(feature), int(missing_side)
        self.left[node], self.right[node] = kids
        return kids[0], kids[1]

    def split(self, node: int, feature: int, split_bin: int, missing_side: int = MISSING_NONE) -> tuple[int, int]:
        """Replace leaf ``node`` by the cut ``code[feature] <= split_bin``; returns (left, right)."""
        if split_bin < 0:
            raise ValueError(f"split_bin must be >= 0, got {split_bin}")
        kids = self._grow(node, feature, missing_side)
        self.split_bin[node] = int(split_bin)
        return kids

    def split_set(self, node: int, feature: int, left_codes, missing_side: int = MISSING_NONE) -> tuple[int, int]:
        """Replace leaf ``node`` by the set cut "``code[feature]`` in ``left_codes``"; returns (left, right)."""
        codes = tuple(sorted({int(c) for c in left_codes}))
        if not codes or codes[0] < 0:
            raise ValueError(f"a set cut needs at least one code (all >= 0) on its left, got {left_codes!r}")
        kids = self._grow(node, feature, missing_side)
        self.left_codes[node] = codes
        return kids

    @property
    def has_sets(self) -> bool:
        return any(self.left_codes)

    def trial_copy(self) -> CodeTree:
        """A copy to split further on trial: same node ids and lineage, so its passes resume
        from the rows' remembered leaves, but it writes no memory of its own."""
        return CodeTree(list(self.feature), list(self.split_bin), list(self.left), list(self.right), list(self.value),
                        list(self.left_codes), list(self.missing_side), lineage=self.lineage, remember=False,
                        lineage_nodes=self.n_nodes)

    def routing(self) -> tuple[int, bool, int]:
        """(lineage, remember, nodes of the lineage this tree knows): how the kernels resume
        and record each row's routing (``criteria.resume_nodes``)."""
        known = self.n_nodes if self.lineage_nodes is None else self.lineage_nodes
        return self.lineage, self.remember, known

    def _thresholds_suffice(self, mapper: BinMapper | None) -> bool:
        """Whether ``split_bin`` alone routes every code as the tree does: no set cut, and no
        missing bin sent left (past every threshold, the missing bin goes right)."""
        if self.has_sets:
            return False
        if mapper is None:
            return True
        sent_left = [f for f, side in zip(self.feature, self.missing_side, strict=True) if side == MISSING_LEFT]
        return not mapper.missing[sent_left].any()

    def cut_table(self, mapper: BinMapper) -> np.ndarray:
        """(n_nodes, mapper.max_n_bins) uint8: 1 where a code goes left at a node (0 on leaves)."""
        table = np.zeros((self.n_nodes, mapper.max_n_bins), dtype=np.uint8)
        missing_bin = mapper.missing_bin
        for node, f in enumerate(self.feature):
            if f < 0:
                continue
            if self.left_codes[node]:
                table[node, list(self.left_codes[node])] = 1
            else:
                table[node, : self.split_bin[node] + 1] = 1
            if missing_bin[f] >= 0:
                table[node, missing_bin[f]] = self.missing_side[node] == MISSING_LEFT
        return table

    def arrays(self, mapper: BinMapper | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(feature, cuts, left, right) as arrays for the kernels: ``cuts`` is ``split_bin``
        (int64) where the thresholds route every code as the tree does, else ``cut_table(mapper)``.
        Without a mapper, a tree with set cuts is refused (ValueError)."""
        if self._thresholds_suffice(mapper):
            cuts = np.asarray(self.split_bin, dtype=np.int64)
        elif mapper is None:
            raise ValueError("this tree has set cuts: its kernels need the bins (pass the mapper)")
        else:
            cuts = self.cut_table(mapper)
        return (
            np.asarray(self.feature, dtype=np.int64),
            cuts,
            np.asarray(self.left, dtype=np.int64),
            np.asarray(self.right, dtype=np.int64),
        )

    def route(self, codes: np.ndarray, mapper: BinMapper | None = None) -> np.ndarray:
        """Leaf node of every row of a code block."""
        from exclust.algorithms.histogram._code_histograms import route_all_codes

        return route_all_codes(np.ascontiguousarray(codes), *self.arrays(mapper))

    def to_threshold_tree(
        self,
        mapper: BinMapper,
        n_clusters: int,
        feature_names=None,
        meta: dict[str, Any] | None = None,
        categories: Mapping[int, Sequence[Any]] | None = None,
    ) -> ThresholdTree:
        """The same tree with real-valued thresholds (bin edges), set cuts as ``CATEGORY_SET``
        nodes and every cut's missing side; node ids are kept, so a greedy algorithm's split
        order names nodes of both trees (``ThresholdTree.prune`` gives its prefixes).

        ``categories``: each category feature's vocabulary in code order (``Dataset.categories``);
        a category feature without one (or given only its count) is named by its codes (0 .. C-1)."""
        feature = np.asarray(self.feature, dtype=np.int64)
        split = feature >= 0
        is_set = np.array([bool(codes) for codes in self.left_codes])
        threshold = [mapper.threshold(f, b) if f >= 0 and b >= 0 else np.nan
                     for f, b in zip(self.feature, self.split_bin, strict=True)]
        vocabulary = {f: list(range(int(mapper.n_bins[f]))) for f in np.flatnonzero(mapper.is_category).tolist()}
        vocabulary.update({int(f): list(range(v)) if isinstance(v, (int, np.integer)) else list(v)
                           for f, v in (categories or {}).items()})
        tree = ThresholdTree(
            np.where(is_set, CATEGORY_SET, np.where(split, ONE_SIDED, LEAF)), np.where(split, feature, -1), threshold,
            np.where(split, np.asarray(self.left, dtype=np.int64), -1),
            np.where(split, np.asarray(self.right, dtype=np.int64), -1),
            np.where(split, -1, np.asarray(self.value, dtype=np.int64)),  # a leaf's center; -1 on cuts
            n_features=mapper.n_features, feature_names=feature_names, n_clusters=n_clusters, meta=meta,
            missing_side=np.where(split, np.asarray(self.missing_side), MISSING_NONE),
            left_categories=self.left_codes, categories=vocabulary,
        )
        # Every cut learned a side, but the rules say "(or missing)" only for the features that could
        # hold missing values at fit (a missing bin): elsewhere the side is the larger child, a default.
        tree.meta[MISSING_AT_FIT] = [tree.feature_names[f] for f in np.flatnonzero(mapper.missing).tolist()]
        return tree
