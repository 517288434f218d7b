"""Inputs fuzzed (issue 29): 320 generated Parquet inputs (every Arrow type family, nulls, NaN and inf,
empty files and row groups, odd file and column names, huge strings, nested and dictionary columns)
through `exclust explain` and `exclust label`, in-process (``main(argv)``) against the session's cluster.

Each is a result (exit 0, the output committed whole) or exit 2 with one line; never a traceback, never
a partial output (nothing else beside the input and the output in the run's folder, hidden entries
included)."""
from __future__ import annotations

import datetime
import decimal
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.cli import main
from exclust.tree import TreeBuilder

N_CASES = int(os.environ.get("EXCLUST_FUZZ_CASES", "320"))
pytestmark = pytest.mark.slow

ODD_NAMES = ["part 0.parquet", "päärt-ü.parquet", "a#b.parquet", "k=v.parquet", "%41.parquet", "x.PARQUET",
             "no-suffix", "_underscore.parquet", "-dash.parquet", "x" * 200 + ".parquet"]


def _floats(rng: random.Random, n: int, nulls: bool) -> list:
    special = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 5e-324, -0.0]
    return [None if nulls and rng.random() < 0.2 else (rng.choice(special) if rng.random() < 0.05 else rng.gauss(0, 3))
            for _ in range(n)]


def _column(kind: str, rng: random.Random, n: int, nulls: bool) -> pa.Array:
    """``n`` values of one Arrow type family."""
    def maybe(v):
        return None if nulls and rng.random() < 0.2 else v

    if kind in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(kind)
        lo, hi = int(max(info.min, -10**6)), int(min(info.max, 10**6))
        edge = [int(info.min), int(info.max)]
        return pa.array([maybe(rng.choice(edge) if rng.random() < 0.05 else rng.randint(lo, hi)) for _ in range(n)],
                        type=getattr(pa, kind)())
    if kind in ("float32", "float64"):
        values = _floats(rng, n, nulls)
        if kind == "float32":
            values = [v if v is None or abs(v) < 3e38 or v != v else float("inf") for v in values]
        return pa.array(values, type=getattr(pa, kind)())
    if kind == "float16":
        return pa.array(np.array([rng.gauss(0, 1) for _ in range(n)], dtype=np.float16))
    if kind == "bool":
        return pa.array([maybe(rng.random() < 0.5) for _ in range(n)], type=pa.bool_())
    if kind == "string":
        return pa.array([maybe("".join(rng.choice("ab€\x00 ,\n") for _ in range(rng.randrange(5)))) for _ in range(n)])
    if kind == "huge_string":
        return pa.array([maybe("z" * rng.choice([0, 10, 2_000_000])) for _ in range(n)], type=pa.large_string())
    if kind == "binary":
        return pa.array([maybe(bytes(rng.randrange(256) for _ in range(3))) for _ in range(n)], type=pa.binary())
    if kind == "date32":
        return pa.array([maybe(datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randrange(900)))
                         for _ in range(n)], type=pa.date32())
    if kind == "timestamp":
        return pa.array([maybe(rng.randrange(10**12)) for _ in range(n)], type=pa.timestamp("ms", tz="UTC"))
    if kind == "time64":
        return pa.array([maybe(rng.randrange(86_400 * 10**6)) for _ in range(n)], type=pa.time64("us"))
    if kind == "duration":
        return pa.array([maybe(rng.randrange(10**6)) for _ in range(n)], type=pa.duration("s"))
    if kind == "decimal":
        return pa.array([maybe(decimal.Decimal(rng.randrange(-10**6, 10**6)) / 100) for _ in range(n)],
                        type=pa.decimal128(12, 2))
    if kind == "dict_string":  # (no nulls: pyarrow cannot write every dictionary array holding them)
        return pa.array([rng.choice("abc") for _ in range(n)]).dictionary_encode()
    if kind == "dict_float":
        return pa.array([rng.choice([0.5, 1.5, float("nan")]) for _ in range(n)]).dictionary_encode()
    if kind == "list":
        return pa.array([maybe([rng.random() for _ in range(rng.randrange(3))]) for _ in range(n)])
    if kind == "struct":
        return pa.array([maybe({"u": rng.random(), "v": rng.randrange(5)}) for _ in range(n)])
    if kind == "map":
        return pa.array([maybe([("k", rng.random())]) for _ in range(n)], type=pa.map_(pa.string(), pa.float64()))
    if kind == "null":
        return pa.nulls(n)
    raise AssertionError(kind)


KINDS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
         "bool", "string", "huge_string", "binary", "date32", "timestamp", "time64", "duration", "decimal",
         "dict_string", "dict_float", "list", "struct", "map", "null"]


def _write_case(folder, rng: random.Random) -> str:
    """One generated input under ``folder``: a file or a folder of files; returns what it is."""
    n = rng.choice([0, 1, 2, 7, 40, 40, 120])
    nulls = rng.random() < 0.4
    names = ["x0", "x1"]
    kinds = [rng.choice(["float64", "float64", "float32", "int32", "int64"] + KINDS) for _ in names]
    extra = [rng.choice(KINDS) for _ in range(rng.randrange(3))]
    columns = {name: _column(kind, rng, n, nulls) for name, kind in zip(names, kinds, strict=True)}
    for j, kind in enumerate(extra):
        name = rng.choice([f"e{j}", f"odd name {j}", f"é{j}", "", "x0.1", "__index_level_0__"])
        columns[name] = _column(kind, rng, n, nulls)
    if rng.random() < 0.1:
        columns.pop(rng.choice(names))  # a feature column missing
    table = pa.table(columns)
    files = rng.choice([1, 1, 2, 3])
    os.makedirs(folder)
    for f in range(files):
        name = rng.choice(ODD_NAMES) if rng.random() < 0.3 else f"part-{f}.parquet"
        path = os.path.join(folder, name if not os.path.exists(os.path.join(folder, name)) else f"{f}-{name}")
        how = rng.randrange(5)
        if how == 0:  # an empty row group between two
            with pq.ParquetWriter(path, table.schema) as w:
                w.write_table(table.slice(0, n // 2))
                w.write_table(table.slice(0, 0))
                w.write_table(table.slice(n // 2))
        elif how == 1:
            pq.write_table(table, path, row_group_size=max(1, n // 3))
        elif how == 2 and rng.random() < 0.3:  # a damaged file
            pq.write_table(table, path)
            data = open(path, "rb").read()
            open(path, "wb").write(data[: rng.randrange(1, max(2, len(data)))])
        else:
            pq.write_table(table, path, use_dictionary=rng.random() < 0.5, compression=rng.choice(["snappy", "none"]))
    return f"{files} file(s) of {n} rows, features {kinds}, extra {extra}, nulls {nulls}"


@pytest.fixture(scope="module")
def tree_file(tmp_path_factory):
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    left, right = b.split(root, feature=0, threshold=0.0)
    b.make_leaf(left, 0)
    a, c = b.split(right, feature=1, threshold=1.0)
    b.make_leaf(a, 1)
    b.make_leaf(c, 0)
    path = tmp_path_factory.mktemp("tree") / "tree.json"
    b.build(feature_names=["x0", "x1"]).to_json(path)
    return path


def _entries(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), folder)
                  for d, dirs, files in os.walk(folder) for n in dirs + files)


def test_generated_parquet_inputs_give_a_result_or_one_line(tmp_path, tree_file, dask_client, capsys):
    rng = random.Random(29)
    outcomes = {"explain": {0: 0, 2: 0}, "label": {0: 0, 2: 0}}
    for case in range(N_CASES):
        run = tmp_path / f"case-{case}"
        what = _write_case(str(run / "in"), rng)
        before = _entries(run)
        command = "label" if case % 5 else "explain"
        source = str(run / "in") if rng.random() < 0.8 else str(next(p for p in sorted((run / "in").iterdir())))
        if command == "explain":
            argv = ["explain", "--input", source, "--k", "2", "--algorithm", "imm", "--reference", "kmeans",
                    "--no-curve", "--no-standing", "--out", str(run / "out"), "--quiet"]
        else:
            argv = ["label", "--tree", str(tree_file), "--input", source, "--out", str(run / "out"), "--quiet"]
        try:
            code = main(argv + ["--scheduler", dask_client.scheduler.address])
        except BaseException as exc:  # a traceback: the bug this test is for
            raise AssertionError(f"case {case} ({what}): {command} raised {type(exc).__name__}: {exc}") from exc
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code in (0, 2), (case, what, code, err)
        outcomes[command][code] += 1
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith(f"exclust {command}: error: "), (case, what, err)
            assert _entries(run) == before, (case, what)  # no partial output, no staging
        else:
            assert (run / "out" / "_SUCCESS").is_file(), (case, what)
            assert sorted(set(_entries(run)) - set(before))[0] == "out", (case, what)
            assert not [e for e in _entries(run) if "exclust-staging" in e], (case, what)
    # both outcomes exercised for both commands
    assert all(n > 5 for counts in outcomes.values() for n in counts.values()), outcomes
