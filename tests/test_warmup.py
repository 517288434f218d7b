"""The warm-up (``python -m exclust.jobs.warmup``, run by bootstrap after installing) shows its
progress, one line per run, and its local Dask cluster prints nothing, closing included."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from exclust.jobs import warmup

ROOT = Path(__file__).resolve().parents[1]


def test_each_run_prints_a_progress_line(capsys):
    configs = [c for c in warmup._runs(warmup._blobs(300)) if c.algorithm == "mmdt"][:2]
    warmup._warm(configs, "in memory", time.perf_counter())
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[warm-up]  1/2 in memory: mmdt (") and lines[0].endswith(" s in all")
    assert lines[1].startswith("[warm-up]  2/2 in memory: mmdt (")


def test_the_local_cluster_is_quiet_from_start_to_close(tmp_path):
    """A local cluster under the warm-up's quiet: a task runs, the cluster closes, nothing is printed
    (no worker heartbeat errors as the scheduler stops before its workers)."""
    code = textwrap.dedent('''
        from exclust.dataplane.cluster import dask_cluster
        from exclust.jobs.warmup import _quiet_local_cluster

        with _quiet_local_cluster(), dask_cluster(None, n_workers=2) as client:
            assert client.submit(sum, [1, 2]).result() == 3
        print("done")
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("DASK_LOGGING__DISTRIBUTED", None)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "done"
    assert result.stderr.strip() == "", result.stderr[-3000:]


def test_the_modules_bytecode_is_written_even_where_python_writes_none(tmp_path):
    """``compile_bytecode`` writes every module's ``.pyc`` (containers set PYTHONDONTWRITEBYTECODE, under which an
    editable install's imports write none and each start compiles the sources again); Python then loads them."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("VALUE = 41 + 1\n")
    code = textwrap.dedent(f"""
        import importlib.util, pathlib, sys
        from exclust.jobs import warmup
        assert warmup.compile_bytecode(pathlib.Path({str(package)!r})) == 0
        sys.path.insert(0, {str(tmp_path)!r})
        import pkg.mod
        print(pkg.mod.__cached__ is not None and pathlib.Path(pkg.mod.__cached__).exists(), sys.dont_write_bytecode,
              pkg.mod.VALUE)
    """)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.split() == ["True", "True", "42"], proc.stdout + proc.stderr
