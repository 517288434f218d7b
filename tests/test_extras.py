"""The core without its extras: each feature whose extra is missing says, in one line, which extra to install.

A package is made missing for real in a child Python: a meta-path finder that fails the import of the
named top-level packages before any other finder looks (what Python does when a package is not
installed), set up in ``sitecustomize`` so that it holds from the interpreter's start, the CLI included.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTRA_PACKAGES = ("prefect", "prefect_dask", "pydantic", "fastapi", "sqlalchemy", "deltalake", "pyiceberg", "s3fs",
                  "dask_ml")

BLOCKER = textwrap.dedent('''
    import os, sys

    class _Missing:
        """Fails the import of the packages named in EXCLUST_TEST_MISSING, as if not installed."""
        blocked = set(filter(None, os.environ.get("EXCLUST_TEST_MISSING", "").split(",")))

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.blocked:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _Missing())
''')


def _run(tmp_path: Path, missing, args, cwd=None) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "EXCLUST_TEST_MISSING": ",".join(missing),
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(args, cwd=cwd or tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _python(tmp_path: Path, missing, code: str) -> subprocess.CompletedProcess:
    return _run(tmp_path, missing, [sys.executable, "-c", textwrap.dedent(code)])


def _expect_message(code: str) -> str:
    """Runs ``code`` (which must raise) and prints the MissingExtraError's message."""
    return f'''
from exclust.errors import MissingExtraError
try:
{textwrap.indent(textwrap.dedent(code), "    ")}
except MissingExtraError as exc:
    print("MESSAGE:", exc)
else:
    print("no error")
'''


def _message(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("MESSAGE: ")]
    assert lines, result.stdout[-2000:]
    return lines[0].removeprefix("MESSAGE: ")


def test_the_all_extra_is_every_feature_extra():
    import tomllib

    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    union = [req for name in ("flows", "lake", "s3", "dask-ml") for req in extras[name]]
    assert sorted(extras["all"]) == sorted(union)


def test_the_blocker_makes_a_package_missing(tmp_path):
    result = _python(tmp_path, ["deltalake"], "import deltalake")
    assert result.returncode == 1 and "ModuleNotFoundError" in result.stderr


def test_the_core_works_without_any_extra(tmp_path):
    """Every public name resolves and an in-memory fit runs with none of the extras' packages."""
    result = _python(tmp_path, EXTRA_PACKAGES, '''
        import numpy as np, exclust
        for name in exclust.__all__:
            getattr(exclust, name)
        X = np.r_[np.zeros((20, 2)), np.ones((20, 2)) * 5] + np.random.default_rng(0).normal(size=(40, 2)) * 0.1
        tree = exclust.IMM(n_clusters=2, random_state=0).fit(X, np.array([[0.0, 0.0], [5.0, 5.0]])).tree_
        print("LEAVES", tree.n_leaves)
        import sys
        extras = {"prefect", "deltalake", "pyiceberg", "s3fs"}
        print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] in extras))
    ''')
    assert result.returncode == 0, result.stderr[-3000:]
    assert "LEAVES 2" in result.stdout and "LOADED []" in result.stdout


def test_delta_tables_need_the_lake_extra(tmp_path):
    (tmp_path / "table" / "_delta_log").mkdir(parents=True)
    message = _message(_python(tmp_path, ["deltalake"], _expect_message(f'''
        from exclust.sources.delta import open_delta_table
        open_delta_table({str(tmp_path / "table")!r})
    ''')))
    assert message == "reading Delta tables needs deltalake: pip install 'exclust[lake]'"
    message = _message(_python(tmp_path, ["deltalake"], _expect_message(f'''
        import datetime
        from exclust.outputs.delta_table import DeltaNight
        DeltaNight({str(tmp_path / "out")!r}, "day", datetime.date(2024, 1, 1))
    ''')))
    assert message == "writing Delta tables needs deltalake: pip install 'exclust[lake]'"


def test_iceberg_tables_need_the_lake_extra(tmp_path):
    address = f"iceberg+sqlite:///{tmp_path}/catalog.db#lake.events"
    message = _message(_python(tmp_path, ["pyiceberg"], _expect_message(f'''
        from exclust.sources.iceberg import load_catalog_table
        load_catalog_table({address!r})
    ''')))
    assert message == "reading Iceberg tables needs pyiceberg: pip install 'exclust[lake]'"
    message = _message(_python(tmp_path, ["pyiceberg"], _expect_message(f'''
        import datetime
        from exclust.outputs.iceberg_table import IcebergNight
        IcebergNight({address!r}, "day", datetime.date(2024, 1, 1))
    ''')))
    assert message == "writing Iceberg tables needs pyiceberg: pip install 'exclust[lake]'"


def test_object_stores_need_the_s3_extra(tmp_path):
    message = _message(_python(tmp_path, ["s3fs"], _expect_message('''
        from exclust.sources.storage import filesystem
        filesystem("s3://bucket/data")
    ''')))
    assert message == "reading and writing s3:// paths needs s3fs: pip install 'exclust[s3]'"


def test_the_flows_need_the_flows_extra(tmp_path):
    for missing, package in (("prefect", "prefect"), ("pydantic", "pydantic")):
        message = _message(_python(tmp_path, [missing], _expect_message("import flows.explain")))
        assert message == f"running the Prefect flows needs {package}: pip install 'exclust[flows]'"


def test_the_dask_ml_backend_needs_its_extra(tmp_path):
    message = _message(_python(tmp_path, ["dask_ml"], _expect_message('''
        import numpy as np
        from exclust import KMeans
        KMeans(n_clusters=2, backend="dask-ml", random_state=0).fit(np.random.default_rng(0).normal(size=(50, 2)))
    ''')))
    assert message == "KMeans(backend='dask-ml') needs dask-ml: pip install 'exclust[dask-ml]'"


@pytest.mark.parametrize("missing, args, line", [
    (["prefect"], ["demo", "--prefect", "--rows", "1000"],
     "exclust demo: error: running the Prefect flows needs prefect: pip install 'exclust[flows]'"),
    (["deltalake"], ["explain", "--input", "table", "--k", "2", "--out", "out"],
     "exclust explain: error: reading Delta tables needs deltalake: pip install 'exclust[lake]'"),
])
def test_the_cli_exits_2_with_one_line(tmp_path, missing, args, line):
    (tmp_path / "table" / "_delta_log").mkdir(parents=True)
    out = ["--out", str(tmp_path / "demo")] if args[0] == "demo" else []
    result = _run(tmp_path, missing, [sys.executable, "-m", "exclust.cli", *args, *out])
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip() == line
    assert not (tmp_path / "demo-data").exists()  # checked before any data are written
