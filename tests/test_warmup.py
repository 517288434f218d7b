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
