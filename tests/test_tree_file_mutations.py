"""Every tree file checked before use (issue 29): 240 seeded mutations of a valid tree.json, each either
still a valid tree (it then labels rows) or refused in one line naming the file and the fault, in the
loader and through `exclust label` (exit 2, before any cluster starts, nothing written)."""
from __future__ import annotations

import copy
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.cli import main
from exclust.tree import ThresholdTree, TreeBuilder, TreeFormatError

N_MUTATIONS = 240
FIELDS = ("kind", "feature", "threshold", "center", "left", "right", "value")
ODD_VALUES = [float("nan"), float("inf"), -float("inf"), None, True, "1.5", "", [], {}, -1, 2**40, 1e308, 0.5, -0.0,
              "leaf", "interval", 7, 3]


def valid_tree() -> ThresholdTree:
    """Three features, one-sided and interval cuts, 6 leaves over 4 clusters, leaf shares for drift."""
    b = TreeBuilder(n_features=3)
    root = b.add_node()
    left, right = b.split(root, feature=0, threshold=0.0)
    inside, outside = b.split_interval(left, feature=1, center=0.5, half_width=1.0)
    b.make_leaf(inside, 0)
    a, c = b.split(outside, feature=2, threshold=-1.0)
    b.make_leaf(a, 1)
    b.make_leaf(c, 2)
    d, e = b.split(right, feature=1, threshold=2.0)
    b.make_leaf(d, 3)
    f, g = b.split(e, feature=2, threshold=0.25)
    b.make_leaf(f, 0)
    b.make_leaf(g, 3)
    tree = b.build(feature_names=["a", "b", "c"], n_clusters=4)
    tree.meta["leaf_shares"] = {str(leaf): 1 / tree.n_leaves for leaf in tree.leaves.tolist()}
    return tree


def _structural(doc: dict, rng: random.Random) -> str:
    """One change to the document's content; returns its name."""
    nodes, m = doc["nodes"], len(doc["nodes"]["kind"])
    i = rng.randrange(m)
    choice = rng.randrange(14)
    if choice == 0:
        name = rng.choice(FIELDS)
        nodes[name][i] = rng.choice(ODD_VALUES)
        return f"nodes.{name}[{i}] odd"
    if choice == 1:  # a child pointing to the root, itself, an ancestor, out of range, or another's child
        side = rng.choice(("left", "right"))
        nodes[side][i] = rng.choice([0, i, max(0, i - 1), m, m + 5, -2, nodes["left"][rng.randrange(m)]])
        return f"nodes.{side}[{i}] rewired"
    if choice == 2:
        nodes["kind"][i] = rng.choice(["leaf", "one_sided", "interval", "LEAF", "oblique", 0, None])
        return f"nodes.kind[{i}] changed"
    if choice == 3:
        name = rng.choice(FIELDS)
        (nodes[name].pop if rng.random() < 0.5 else (lambda: nodes[name].append(0)))()
        return f"nodes.{name} length changed"
    if choice == 4:
        nodes.pop(rng.choice(FIELDS))
        return "a node list missing"
    if choice == 5:
        key = rng.choice(["format", "schema_version", "n_features", "n_clusters", "feature_names", "nodes", "meta"])
        doc[key] = rng.choice(ODD_VALUES + [2, 99, "exclust.ThresholdTree", ["a"], 0])
        return f"{key} changed"
    if choice == 6:
        doc.pop(rng.choice(["format", "schema_version", "n_features", "n_clusters", "feature_names", "nodes"]))
        return "a top-level key missing"
    if choice == 7:  # a cycle: a node's child becomes its own ancestor
        internal = [j for j in range(1, m) if nodes["kind"][j] != "leaf"]
        j = rng.choice(internal)
        nodes[rng.choice(("left", "right"))][j] = rng.choice([k for k in range(1, j + 1)])
        return f"cycle at {j}"
    if choice == 8:
        nodes["feature"][i] = rng.choice([-1, 3, 4, 2**31, 1.5, "0"])
        return f"nodes.feature[{i}] out of range"
    if choice == 9:
        nodes["threshold"][i] = rng.choice([float("nan"), float("inf"), None, "x"])
        return f"nodes.threshold[{i}] not finite"
    if choice == 10:
        doc["meta"]["leaf_shares"] = rng.choice([{"99": 0.5}, {"1": -1}, {"1": float("nan")}, [], "x", {"x": 1}])
        return "meta.leaf_shares broken"
    if choice == 11:
        doc["meta"]["concept_activation_vectors"] = rng.choice([{"matrix": [[1.0]]}, {"matrix": "x"}, [1], {"m": 1}])
        return "meta.concept_activation_vectors broken"
    if choice == 12:  # still valid: a finite threshold moved, a leaf's cluster changed within range
        j = rng.randrange(m)
        if nodes["kind"][j] == "one_sided":
            nodes["threshold"][j] = rng.uniform(-5, 5)
        elif nodes["kind"][j] == "leaf":
            nodes["value"][j] = rng.randrange(4)
        return "harmless edit"
    nodes["value"][i] = rng.choice([-1, 4, 2**33, 1.2])
    return f"nodes.value[{i}] out of range"


def _as_bytes(doc: dict, text: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The file's bytes: the mutated document's JSON, or the valid text damaged as a file can be."""
    choice = rng.randrange(10)
    if choice < 6:
        return json.dumps(doc, allow_nan=True).encode(), "json"
    if choice == 6:
        cut = rng.randrange(len(text))
        return text[:cut], f"truncated at {cut}"
    if choice == 7:
        data = bytearray(text)
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "bytes flipped"
    if choice == 8:
        return rng.choice([b"", b"   \n", b"PAR1\x00\x01garbage", b"\xff\xfe\x00binary", b"[" * 100_000,
                           b"a,b,c\n" + b"".join(b"%d,%d,%d\n" % (k, k, k) for k in range(400)), b"null", b"[1, 2]",
                           "{\"format\": \"exclust.ThresholdTree\", \"é\": 1}".encode("latin-1")]), "not a tree"
    return b"\xef\xbb\xbf" + text, "BOM first"  # a UTF-8 byte-order mark before the valid JSON


def mutations(seed: int = 29):
    """``N_MUTATIONS`` (name, bytes) pairs, reproducible from ``seed``."""
    rng = random.Random(seed)
    valid = valid_tree().to_dict()
    text = json.dumps(valid, indent=1).encode()
    out = []
    for k in range(N_MUTATIONS):
        doc = copy.deepcopy(valid)
        names = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            try:
                names.append(_structural(doc, rng))
            except (KeyError, TypeError, IndexError, AttributeError, ValueError):
                break  # an earlier mutation took away what this one changes
        data, how = _as_bytes(doc, text, rng)
        out.append((f"{k}: {how}: {'; '.join(names) if how == 'json' else ''}", data))
    return out


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    folder = tmp_path_factory.mktemp("night") / "in"
    folder.mkdir()
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({c: rng.normal(size=50) for c in "abc"}), folder / "part-0.parquet")
    return folder


def test_mutated_tree_files_are_valid_trees_or_refused_in_one_line_naming_the_file(tmp_path, night, capsys):
    X = np.random.default_rng(1).normal(size=(200, 3))
    refused = accepted = 0
    kinds_of_fault = set()
    for k, (name, data) in enumerate(mutations()):
        path = tmp_path / f"tree-{k}.json"
        path.write_bytes(data)
        try:
            tree = ThresholdTree.from_file_bytes(data, str(path))
        except TreeFormatError as exc:
            message = str(exc)
            assert message.startswith(f"tree file {path}: ") and "\n" not in message, (name, message)
            kinds_of_fault.add(message.split(": ", 2)[1].split(" is ")[0][:40])
            refused += 1
            out = tmp_path / f"out-{k}"
            code = main(["label", "--tree", str(path), "--input", str(night), "--out", str(out), "--quiet"])
            err = capsys.readouterr().err
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2, (name, err)
            assert len(lines) == 1 and lines[0] == f"exclust label: error: {message}", (name, err)
            assert not out.exists()
            continue
        accepted += 1  # a valid tree after all: it labels every row with one of its clusters
        labels = tree.predict(X)
        assert ((labels >= 0) & (labels < tree.n_clusters)).all(), name
    assert refused + accepted == N_MUTATIONS >= 200
    assert refused >= 180 and accepted >= 5, (refused, accepted)  # both outcomes exercised
    assert len(kinds_of_fault) >= 20, sorted(kinds_of_fault)


def test_a_nan_threshold_a_csv_and_parquet_bytes_given_as_tree_are_refused(tmp_path, night, capsys):
    """Issue 29's cases: a NaN threshold (JSON's non-standard NaN), a 400-line CSV (its text once taken for a
    path: OSError, File name too long), Parquet bytes."""
    doc = valid_tree().to_dict()
    doc["nodes"]["threshold"][0] = float("nan")
    cases = {
        "nan.json": (json.dumps(doc).encode(), "non-JSON number NaN"),
        "big.csv": (b"a,b,c\n" + b"".join(b"%d,%d,%d\n" % (k, k, k) for k in range(400)), "it is not JSON"),
        "data.parquet": ((night / "part-0.parquet").read_bytes(), "it is a Parquet file"),
    }
    for file, (data, fault) in cases.items():
        path = tmp_path / file
        path.write_bytes(data)
        code = main(["label", "--tree", str(path), "--input", str(night), "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and err.startswith(f"exclust label: error: tree file {path}: "), err
        assert fault in err, err
    assert not (tmp_path / "out").exists()


def category_tree() -> ThresholdTree:
    """Issue 28's fields: a set cut on 'c' (vocabulary x, y, z; missing right) over a cut on 'a' (missing left)."""
    from exclust.tree import MISSING_LEFT, MISSING_RIGHT

    b = TreeBuilder(n_features=3)
    left, right = b.split_categories(b.add_node(), feature=2, left_codes=[0, 2], missing_side=MISSING_RIGHT)
    low, high = b.split(left, feature=0, threshold=0.5, missing_side=MISSING_LEFT)
    b.make_leaf(low, 0)
    b.make_leaf(high, 1)
    b.make_leaf(right, 2)
    return b.build(feature_names=["a", "b", "c"], categories={2: ["x", "y", "z"]})


CATEGORY_MUTATIONS = {
    "a code outside the vocabulary": (lambda d: d["nodes"]["left_categories"].__setitem__(0, [0, 3]),
                                      "left categories [0, 3] are not distinct codes"),
    "a negative code": (lambda d: d["nodes"]["left_categories"].__setitem__(0, [-1]), "nodes.left_categories[0]"),
    "a code given as text": (lambda d: d["nodes"]["left_categories"].__setitem__(0, ["x"]),
                             "nodes.left_categories[0]"),
    "codes that are not a list": (lambda d: d["nodes"]["left_categories"].__setitem__(0, "x,z"),
                                  "nodes.left_categories[0]"),
    "a repeated code": (lambda d: d["nodes"]["left_categories"].__setitem__(0, [2, 2]), "are not distinct codes"),
    "an unknown missing side": (lambda d: d["nodes"]["missing"].__setitem__(1, "up"), "nodes.missing[1] is 'up'"),
    "a missing side as a number": (lambda d: d["nodes"]["missing"].__setitem__(0, 0), "nodes.missing[0] is 0"),
    "a short missing list": (lambda d: d["nodes"]["missing"].pop(), "nodes.missing must be a list"),
    "a set cut on a numeric feature": (lambda d: d["nodes"]["feature"].__setitem__(0, 1), "that feature is numeric"),
    "sets on a numeric cut": (lambda d: d["nodes"]["left_categories"].__setitem__(1, [0]), "lists left categories"),
    "categories of an unknown feature": (lambda d: d["categories"].update(q=["a"]), "categories names 'q'"),
    "categories of mixed kinds": (lambda d: d["categories"].update(c=["x", 1, True]), "categories['c'] must be"),
    "repeated categories": (lambda d: d["categories"].update(c=["x", "x", "z"]), "categories['c'] must be"),
    "no categories": (lambda d: d.pop("categories"), "that feature is numeric"),
    "categories not an object": (lambda d: d.update(categories=["c"]), "categories is list"),
    "an unknown node kind": (lambda d: d["nodes"]["kind"].__setitem__(0, "category_subset"), "nodes.kind[0]"),
    "a version-1 file with a set cut": (lambda d: d.update(schema_version=1), "that feature is numeric"),
}


@pytest.mark.parametrize("name", sorted(CATEGORY_MUTATIONS))
def test_broken_category_sets_and_missing_sides_are_refused_in_one_line_naming_the_file(tmp_path, name):
    change, fault = CATEGORY_MUTATIONS[name]
    doc = category_tree().to_dict()
    change(doc)
    path = tmp_path / "tree.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TreeFormatError) as caught:
        ThresholdTree.from_file_bytes(path.read_bytes(), str(path))
    message = str(caught.value)
    assert message.startswith(f"tree file {path}: ") and "\n" not in message, message
    assert any(part in message for part in fault.split("|")), message


def test_a_valid_category_tree_file_labels_its_rows(tmp_path):
    tree = category_tree()
    path = tmp_path / "tree.json"
    tree.to_json(path)
    loaded = ThresholdTree.from_file_bytes(path.read_bytes(), str(path))
    X = np.array([[0.0, 0.0, 0.0], [np.nan, 0.0, 2.0], [1.0, 0.0, 1.0], [1.0, 0.0, np.nan], [1.0, 0.0, -1.0]])
    assert loaded.predict(X).tolist() == [0, 0, 2, 2, 2]
