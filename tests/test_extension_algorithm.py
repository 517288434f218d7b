"""Adding an algorithm is one module plus one registration (issue 18).

This file is that module: ``CenterMedianTree`` is a small tree algorithm of its own (each node
cuts the widest-spread feature of its centers between their two middle ones), and ``ENTRY`` its
one registry entry. Nothing else in exclust changes, and it runs:

- from Python, registered with ``exclust.jobs.registry.register``;
- from the command line and in the flow's form, in a fresh process that loads it the way a user
  plugs an algorithm in: its module named in ``EXCLUST_PLUGINS``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from exclust.estimator import Integral, Interval, TreeExplainer
from exclust.jobs import registry
from exclust.sources.dataset import as_matrix
from exclust.tree import TreeBuilder


class CenterMedianTree(TreeExplainer):
    """A k-leaf tree from the centers alone: every node cuts its centers' widest feature halfway
    between the two middle centers, so each leaf holds exactly one center."""

    _parameter_constraints = {"n_clusters": [Interval(Integral, 2, None, closed="left")]}

    def __init__(self, n_clusters: int = 2):
        self.n_clusters = n_clusters

    def fit(self, X, centers):
        self._check_params()
        data = as_matrix(X)
        centers = np.asarray(centers, dtype=np.float64)
        builder = TreeBuilder(n_features=centers.shape[1])

        def grow(node: int, ids: np.ndarray) -> None:
            if len(ids) == 1:
                builder.make_leaf(node, int(ids[0]))
                return
            feature = int(np.argmax(np.ptp(centers[ids], axis=0)))
            values = np.sort(centers[ids, feature])
            threshold = (values[len(ids) // 2 - 1] + values[len(ids) // 2]) / 2.0
            left, right = builder.split(node, feature, threshold)
            grow(left, ids[centers[ids, feature] <= threshold])
            grow(right, ids[centers[ids, feature] > threshold])

        grow(builder.add_node(), np.arange(len(centers)))
        self.tree_ = builder.build(feature_names=data.feature_names, n_clusters=len(centers),
                                   meta={"algorithm": "center-median"})
        self.n_passes_ = 0
        return self


ENTRY = registry.Algorithm(
    "center-median", "CenterMedian", f"{__name__}:CenterMedianTree",
    "cuts each node's widest center feature between its two middle centers (a test plugin)", registry.CENTERS,
    "tests/test_extension_algorithm.py", options=lambda config: {"n_clusters": config.k},
)

if __name__ in os.environ.get(registry.PLUGINS_ENV, "").split(","):  # loaded as a plugin: register on import
    registry.register(ENTRY)


@pytest.fixture
def registered():
    registry.register(ENTRY)
    try:
        yield ENTRY
    finally:
        registry.unregister(ENTRY.name)


def _blobs(n: int = 1500, seed: int = 0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0], [8.0, 8.0]])
    truth = rng.integers(0, len(centers), n)
    return centers[truth] + rng.normal(size=(n, 2)), truth


def test_a_registered_algorithm_runs_from_python(registered):
    import pandas as pd

    from exclust.jobs.config import ExplainConfig
    from exclust.jobs.explain.steps import explain

    X, truth = _blobs()
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "truth": truth})
    result = explain(ExplainConfig(input=frame, features=["a", "b"], k=4, algorithm="center-median",
                                   reference="kmeans", truth="truth"))
    assert result.metrics["algorithm"] == "center-median"
    assert result.tree.meta["algorithm"] == "center-median" and result.tree.n_leaves == 4
    assert result.metrics["ari_truth"] > 0.95  # the blobs are far apart: the cuts separate them
    assert "CenterMedian" in result.report_html  # the report reads the entry's title
    registry.unregister(ENTRY.name)
    with pytest.raises(ValueError, match="unknown algorithm 'center-median'"):
        ExplainConfig(input=frame, k=4, algorithm="center-median").check()


def test_a_plugin_runs_from_the_command_line_and_the_flow_form(tmp_path):
    import pandas as pd

    X, truth = _blobs()
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "truth": truth}).to_parquet(data / "part-0.parquet")
    script = textwrap.dedent(f"""
        import json, sys
        from exclust import cli
        from exclust.jobs import registry
        from flows.params import ExplainParams

        assert "center-median" in registry.ALGORITHMS
        form = ExplainParams.model_json_schema()
        algorithms = form["$defs"]["Algorithm"]["enum"]
        params = ExplainParams(input={str(data)!r}, output={str(tmp_path / 'flow')!r}, columns="x0,x1",
                               algorithm="center-median", n_clusters=4, reference="kmeans")
        config = params.to_config().check()
        code = cli.main(["explain", "--input", {str(data)!r}, "--features", "x0,x1", "--k", "4",
                         "--algorithm", "center-median", "--reference", "kmeans", "--truth", "truth",
                         "--no-curve", "--quiet", "--out", {str(tmp_path / 'cli')!r}])
        print(json.dumps({{"code": code, "form": algorithms, "config": config.algorithm}}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1]),
                                                         os.environ.get("PYTHONPATH", "")]),
               **{registry.PLUGINS_ENV: Path(__file__).stem})
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0 and seen["config"] == "center-median"
    assert "center-median" in seen["form"] and "mmdt" in seen["form"]  # the form lists it beside the built-ins
    metrics = json.loads((tmp_path / "cli" / "metrics.json").read_text())
    tree = json.loads((tmp_path / "cli" / "tree.json").read_text())
    assert metrics["algorithm"] == "center-median" and metrics["n_leaves"] == 4 and metrics["ari_truth"] > 0.95
    assert tree["meta"]["algorithm"] == "center-median"
