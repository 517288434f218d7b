"""The tree file format: a ThresholdTree as a JSON document with a schema version.

``tree_to_document`` turns a tree's arrays into the document; ``tree_arguments`` reads one back
into the ThresholdTree constructor's arguments, checking every entry (a whole number where an
index belongs, a finite number where a threshold does) so that a damaged or hand-edited file
fails with a message naming the entry, and loading never runs code. ``ThresholdTree.to_json``,
``from_json`` and friends are thin delegates to this module.

Schema version 2 (issue 28) adds ``categories`` (category feature name -> its values in code order), the node
kind ``category_set`` with ``nodes.left_categories`` (per node, the codes that go left; ``[]`` elsewhere) and
``nodes.missing`` (per node, ``"left"``, ``"right"`` or null: where missing values go). Files of version 1 still
load: their nodes send missing values nowhere (``MISSING_NONE``).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from exclust.errors import TreeFormatError
from exclust.tree.node_kinds import (
    CATEGORY_SET,
    INTERVAL,
    LEAF,
    MISSING_AT_FIT,
    MISSING_LEFT,
    MISSING_NONE,
    MISSING_RIGHT,
    ONE_SIDED,
)

SCHEMA_NAME = "exclust.ThresholdTree"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1: before category sets and missing sides (issue 28)
KIND_NAMES = {LEAF: "leaf", ONE_SIDED: "one_sided", INTERVAL: "interval", CATEGORY_SET: "category_set"}
MISSING_NAMES = {MISSING_LEFT: "left", MISSING_RIGHT: "right", MISSING_NONE: None}
_MISSING_CODES = {name: code for code, name in MISSING_NAMES.items()}
_KIND_CODES = {name: code for code, name in KIND_NAMES.items()}


_MAX_INDEX = 2**31  # node, feature and cluster indices are stored as int64; anything this large is corrupt
_FIX = "fix that entry or write the tree again with exclust explain"


def _whole(value: Any, where: str, low: int, high: int) -> int:
    """A whole number in [low, high) from a JSON value (not a bool, a string or a fraction)."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if ok and isinstance(value, float):
        ok = math.isfinite(value) and value.is_integer()
    if not ok or not low <= value < high:
        raise TreeFormatError(f"tree.json: {where} is {value!r}; it must be a whole number in [{low}, {high}); {_FIX}")
    return int(value)


def _real(value: Any, where: str, *, optional: bool) -> float:
    """A finite real number from a JSON value (null allowed where the node does not use it)."""
    if value is None and optional:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TreeFormatError(f"tree.json: {where} is {value!r}; it must be a finite number (not a string, "
                              f"a boolean or null); {_FIX}")
    return float(value)


def tree_to_document(tree) -> dict[str, Any]:
    """The JSON document of a ThresholdTree (NaN thresholds and centers of leaves become null)."""
    def floats(a: np.ndarray) -> list[float | None]:
        return [float(v) if np.isfinite(v) else None for v in a]

    return {
        "format": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "n_features": tree.n_features,
        "feature_names": list(tree.feature_names),
        "n_clusters": tree.n_clusters,
        "categories": {tree.feature_names[f]: [_json_default(v) if isinstance(v, np.generic) else v for v in values]
                       for f, values in sorted(tree.categories.items())},
        "nodes": {
            "kind": [KIND_NAMES[int(k)] for k in tree.kind],
            "feature": tree.feature.tolist(),
            "threshold": floats(tree.threshold),
            "center": floats(tree.center),
            "left": tree.left.tolist(),
            "right": tree.right.tolist(),
            "value": tree.value.tolist(),
            "missing": [MISSING_NAMES[int(side)] for side in tree.missing_side],
            "left_categories": [list(codes) for codes in tree.left_categories],
        },
        "meta": tree.meta,
    }


def document_text(doc: dict[str, Any], path: str | Path | None = None, indent: int | None = 1) -> str:
    """A tree document as JSON text; also written to ``path`` (atomically) when given."""
    text = json.dumps(doc, indent=indent, allow_nan=False, default=_json_default)
    if path is not None:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return text


def tree_arguments(doc: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The ThresholdTree constructor's (positional, keyword) arguments from a tree document,
    every entry checked; raises TreeFormatError naming the first bad one."""
    if not isinstance(doc, dict) or doc.get("format") != SCHEMA_NAME:
        raise TreeFormatError(f"not an exclust tree (expected format '{SCHEMA_NAME}')")
    version = doc.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise TreeFormatError(f"tree schema version {version!r} is not supported (this exclust reads "
                              f"{', '.join(map(str, READABLE_VERSIONS))})")
    n_features = _whole(doc.get("n_features"), "n_features", 1, _MAX_INDEX)
    n_clusters = _whole(doc.get("n_clusters"), "n_clusters", 1, _MAX_INDEX)
    names = doc.get("feature_names")
    if not isinstance(names, list) or len(names) != n_features or not all(isinstance(s, str) for s in names):
        raise TreeFormatError(f"tree.json: feature_names must be a list of {n_features} strings (one per feature); "
                              f"{_FIX}")
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise TreeFormatError(f"tree.json: meta is {type(meta).__name__}, not an object; {_FIX}")
    nodes = doc.get("nodes")
    fields = ("kind", "feature", "threshold", "center", "left", "right", "value")
    if not isinstance(nodes, dict) or any(not isinstance(nodes.get(f), list) for f in fields):
        raise TreeFormatError(f"tree.json: nodes must hold the lists {', '.join(fields)}; {_FIX}")
    m = len(nodes["kind"])
    for name in fields:
        if len(nodes[name]) != m:
            raise TreeFormatError(f"tree.json: nodes.{name} has {len(nodes[name])} entries but nodes.kind has {m}; "
                                  f"every node array needs one entry per node; {_FIX}")
    categories = _categories(doc.get("categories") if version >= 2 else None, names)
    missing_side, left_categories = _missing_and_sets(nodes if version >= 2 else {}, m)
    kinds, feature, threshold, center, left, right, value = [], [], [], [], [], [], []
    for i in range(m):
        kind = nodes["kind"][i]
        if not isinstance(kind, str) or kind not in _KIND_CODES:
            raise TreeFormatError(f"tree.json: nodes.kind[{i}] is {kind!r}, not one of {sorted(_KIND_CODES)}: "
                                  f"malformed tree document; {_FIX}")
        code = _KIND_CODES[kind]
        internal = code != LEAF
        kinds.append(code)
        where = f"nodes.%s[{i}]"
        feature.append(_whole(nodes["feature"][i], where % "feature", 0, n_features) if internal
                       else _whole(nodes["feature"][i], where % "feature", -1, _MAX_INDEX))
        threshold.append(_real(nodes["threshold"][i], where % "threshold", optional=code in (LEAF, CATEGORY_SET)))
        center.append(_real(nodes["center"][i], where % "center", optional=code != INTERVAL))
        left.append(_whole(nodes["left"][i], where % "left", 1, m) if internal
                    else _whole(nodes["left"][i], where % "left", -1, _MAX_INDEX))
        right.append(_whole(nodes["right"][i], where % "right", 1, m) if internal
                     else _whole(nodes["right"][i], where % "right", -1, _MAX_INDEX))
        value.append(_whole(nodes["value"][i], where % "value", 0, n_clusters) if not internal
                     else _whole(nodes["value"][i], where % "value", -1, _MAX_INDEX))
    check_meta(meta, n_features, set(range(m)))
    return (kinds, feature, threshold, left, right, value), dict(
        center=center, n_features=n_features, feature_names=names, n_clusters=n_clusters, meta=dict(meta),
        missing_side=missing_side, left_categories=left_categories, categories=categories)


def _categories(entry: Any, names: list[str]) -> dict[int, list[Any]]:
    """``categories`` (feature name -> values in code order) as feature index -> values, each list checked: values
    of one kind (text, booleans or whole numbers), distinct, at least one."""
    if entry is None:
        return {}
    if not isinstance(entry, dict):
        raise TreeFormatError(f"tree.json: categories is {type(entry).__name__}, not an object; {_FIX}")
    out = {}
    for name, values in entry.items():
        if name not in names:
            raise TreeFormatError(f"tree.json: categories names {name!r}, not a feature of the tree; {_FIX}")
        kinds = {type(v) for v in values} if isinstance(values, list) else set()
        if not values or len(kinds) != 1 or not kinds <= {str, bool, int} or len(set(values)) != len(values):
            raise TreeFormatError(f"tree.json: categories[{name!r}] must be a list of distinct values of one kind "
                                  f"(text, booleans or whole numbers), at least one; {_FIX}")
        out[names.index(name)] = list(values)
    return out


def _missing_and_sets(nodes: dict[str, Any], m: int) -> tuple[list[int], list[list[int]]]:
    """``nodes.missing`` ("left", "right" or null per node; absent: null everywhere) and ``nodes.left_categories``
    (per node a list of codes; absent: empty everywhere), each entry checked."""
    sides, sets = nodes.get("missing", [None] * m), nodes.get("left_categories", [[]] * m)
    for name, entries in (("missing", sides), ("left_categories", sets)):
        if not isinstance(entries, list) or len(entries) != m:
            raise TreeFormatError(f"tree.json: nodes.{name} must be a list of one entry per node ({m}); {_FIX}")
    missing_side = []
    for i, side in enumerate(sides):
        if not (side is None or isinstance(side, str)) or side not in _MISSING_CODES:
            raise TreeFormatError(f"tree.json: nodes.missing[{i}] is {side!r}; it must be \"left\", \"right\" or "
                                  f"null (where missing values go); {_FIX}")
        missing_side.append(_MISSING_CODES[side])
    left_categories = []
    for i, codes in enumerate(sets):
        if not isinstance(codes, list):
            raise TreeFormatError(f"tree.json: nodes.left_categories[{i}] is {codes!r}, not a list of category "
                                  f"codes; {_FIX}")
        left_categories.append([_whole(c, f"nodes.left_categories[{i}]", 0, _MAX_INDEX) for c in codes])
    return missing_side, left_categories


def read_document(text_or_path: str | Path) -> dict[str, Any]:
    """The parsed JSON of a tree file, from JSON text or a ``Path`` (a ``str`` is a path only when it does not
    hold JSON: the text of a file is never taken for a path, see ``parse_tree_bytes``)."""
    if isinstance(text_or_path, Path) or (
        isinstance(text_or_path, str) and not text_or_path.lstrip().startswith("{")
        and "\n" not in text_or_path and len(text_or_path) < 4096
    ):
        path = Path(text_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"tree file not found: {path}")
        return parse_tree_bytes(path.read_bytes(), str(path))
    return parse_tree_bytes(text_or_path.encode("utf-8", errors="surrogatepass"), "tree.json")


MAX_TREE_FILE_BYTES = 64 * 2**20  # a tree of a million nodes is ~100 MB of JSON; nothing written by explain nears this
_PARQUET_MAGIC = b"PAR1"


def _refuse_constant(name: str) -> float:
    raise TreeFormatError(f"holds the non-JSON number {name} (tree files store finite numbers only)")


def parse_tree_bytes(data: bytes, name: str) -> dict[str, Any]:
    """The JSON document held by a tree file's bytes: TreeFormatError naming ``name`` unless they are UTF-8 JSON
    of one object whose ``format`` is an exclust tree (a CSV, Parquet, an empty or binary file: each said so)."""
    def fault(reason: str) -> TreeFormatError:
        return TreeFormatError(f"tree file {name}: {reason}; give the tree.json that exclust explain wrote")

    if len(data) > MAX_TREE_FILE_BYTES:
        raise fault(f"{len(data)} bytes is too large for a tree file (at most {MAX_TREE_FILE_BYTES})")
    if not data.strip():
        raise fault("the file is empty")
    if data[:4] == _PARQUET_MAGIC:
        raise fault("it is a Parquet file, not a tree")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise fault("it is binary, not JSON text") from None
    if not text.lstrip("\ufeff \t\r\n").startswith("{"):
        first = text.strip().splitlines()[0][:60] if text.strip() else ""
        raise fault(f"it is not JSON (it starts {first!r}; a CSV or other text?)")
    try:
        doc = json.loads(text.lstrip("\ufeff"), parse_constant=_refuse_constant)
    except TreeFormatError as exc:
        raise fault(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise fault(f"it is not valid JSON ({exc})") from None
    except RecursionError:
        raise fault("its JSON nests too deep to be a tree") from None
    if not isinstance(doc, dict) or doc.get("format") != SCHEMA_NAME:
        raise fault(f"it is JSON but not an exclust tree (expected format '{SCHEMA_NAME}')")
    return doc


def check_meta(meta: dict[str, Any], n_features: int, nodes: set[int]) -> None:
    """The entries of ``meta`` that labelling reads: ``leaf_shares`` (the leaves' built-on shares, for drift) and
    a Concept-MMDT tree's ``concept_activation_vectors`` / ``embedding_features``."""
    shares = meta.get("leaf_shares")
    if shares is not None:
        if not isinstance(shares, dict):
            raise TreeFormatError(f"tree.json: meta.leaf_shares is {type(shares).__name__}, not an object; {_FIX}")
        for key, share in shares.items():
            if not (isinstance(key, str) and key.isdigit() and int(key) in nodes):
                raise TreeFormatError(f"tree.json: meta.leaf_shares names {key!r}, not a node of the tree; {_FIX}")
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < math.inf:
                raise TreeFormatError(f"tree.json: meta.leaf_shares[{key!r}] is {share!r}; it must be a finite "
                                      f"share >= 0; {_FIX}")
    listed = meta.get(MISSING_AT_FIT)
    if listed is not None and not (isinstance(listed, list) and all(isinstance(n, str) for n in listed)):
        raise TreeFormatError(f"tree.json: meta.{MISSING_AT_FIT} must be a list of feature names; {_FIX}")
    cavs = meta.get("concept_activation_vectors")
    if cavs:
        matrix = cavs.get("matrix") if isinstance(cavs, dict) else None
        if not isinstance(matrix, list) or len(matrix) != n_features or not all(
                isinstance(row, list) and row and len(row) == len(matrix[0]) for row in matrix) or not all(
                not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
                for row in matrix for v in row):
            raise TreeFormatError(f"tree.json: meta.concept_activation_vectors.matrix must be {n_features} rows of "
                                  f"finite numbers of one length; {_FIX}")
        names = meta.get("embedding_features")
        if not (isinstance(names, list) and len(names) == len(matrix[0]) and all(isinstance(n, str) for n in names)):
            raise TreeFormatError(f"tree.json: meta.embedding_features must name the {len(matrix[0])} embedding "
                                  f"columns; {_FIX}")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} in a tree file")

