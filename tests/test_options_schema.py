"""One options schema per job (issue 26, item 1) and the command line's rough edges (issue 31, item 5).

``exclust.jobs.options`` declares each option once; the config, the ``exclust`` parser and the
flow form are generated from it. This file checks that:

- a plugin algorithm with an option of its own (``SplitAtTree``'s ``split_at``, registered the way
  a user plugs one in: its module named in ``EXCLUST_PLUGINS``) shows that option in
  ``exclust explain --help``, in the flow's JSON schema and in ``ExplainConfig``, and the option
  reaches the estimator;
- the old spellings (``--k``, ``--seed``, ``--plot``, ``--drop-nan``, ``--no-curve``, ``--out``,
  the form's ``columns`` and ``truth_column``, ``ExplainConfig(k=...)``) give the same config as the
  new ones, and the command line and the form give the same config for the same run;
- a usage error is one line with exit status 2, the same words for k=0 and k=1; ``--version``;
  the help texts; ``--plot`` and ``--k`` checked against the input before any data are read.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.estimator import Integral, Interval, Real, TreeExplainer
from exclust.jobs import registry
from exclust.jobs.option_spec import NUMBER, Option, config_values
from exclust.sources.dataset import as_matrix
from exclust.tree import TreeBuilder

ROOT = Path(__file__).resolve().parents[1]


# The command line is imported when used: this module is also a plugin that the registry imports first.
def build_parser():
    from exclust.cli import build_parser

    return build_parser()


def main(argv):
    from exclust.cli import main

    return main(argv)


class SplitAtTree(TreeExplainer):
    """Each node cuts its centers' widest feature at ``split_at`` of the way between its two middle centers."""

    _parameter_constraints = {"n_clusters": [Interval(Integral, 2, None, closed="left")],
                              "split_at": [Interval(Real, 0, 1, closed="neither")]}

    def __init__(self, n_clusters: int = 2, split_at: float = 0.5):
        self.n_clusters = n_clusters
        self.split_at = split_at

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
            low, high = values[len(ids) // 2 - 1], values[len(ids) // 2]
            threshold = low + self.split_at * (high - low)
            left, right = builder.split(node, feature, threshold)
            grow(left, ids[centers[ids, feature] <= threshold])
            grow(right, ids[centers[ids, feature] > threshold])

        grow(builder.add_node(), np.arange(len(centers)))
        self.tree_ = builder.build(feature_names=data.feature_names, n_clusters=len(centers),
                                   meta={"algorithm": "split-at", "split_at": self.split_at})
        self.n_passes_ = 0
        return self


SPLIT_AT = Option("split_at", NUMBER, 0.5, "where between the two middle centers a cut lies (0..1)",
                  minimum=0, maximum=1)
ENTRY = registry.Algorithm(
    "split-at", "SplitAt", f"{__name__}:SplitAtTree", "cuts between the two middle centers at split_at (a test plugin)",
    registry.CENTERS, "tests/test_options_schema.py", own_options=(SPLIT_AT,),
    options=lambda config: {"n_clusters": config.n_clusters, "split_at": config.split_at},
)

if __name__ in os.environ.get(registry.PLUGINS_ENV, "").split(","):  # loaded as a plugin: register on import
    registry.register(ENTRY)


def test_a_plugin_option_is_in_the_help_the_flow_schema_and_the_config():
    script = textwrap.dedent("""
        import contextlib, dataclasses, io, json
        import numpy as np, pandas as pd
        from exclust import cli
        from exclust.jobs.config import EXPLAIN_OPTIONS, ExplainConfig
        from exclust.jobs.option_spec import config_values
        from exclust.jobs.explain.steps import explain
        from flows.params import ExplainParams

        help_text = io.StringIO()
        with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
            cli.build_parser().parse_args(["explain", "--help"])
        form = ExplainParams.model_json_schema()["properties"]["split_at"]
        fields = {f.name: f.default for f in dataclasses.fields(ExplainConfig)}
        args = cli.build_parser().parse_args(["explain", "--input", "x", "--k", "4", "--algorithm", "split-at",
                                              "--split-at", "0.25", "--out", "o"])
        rng = np.random.default_rng(0)
        centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0], [8.0, 8.0]])
        X = centers[rng.integers(0, 4, 1200)] + rng.normal(size=(1200, 2))
        run = explain(ExplainConfig(input=pd.DataFrame(X, columns=["a", "b"]), n_clusters=4, algorithm="split-at",
                                    reference="kmeans", split_at=0.25, cost_curve=False, standing=False))
        print(json.dumps({"help": help_text.getvalue(), "form": form, "config_default": fields.get("split_at"),
                          "cli": config_values(EXPLAIN_OPTIONS, args)["split_at"],
                          "fitted": run.tree.meta["split_at"]}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")]),
               **{registry.PLUGINS_ENV: Path(__file__).stem})
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    help_text = " ".join(seen["help"].split())
    assert "--split-at SPLIT_AT where between the two middle centers a cut lies (0..1) (default 0.5); for split-at" \
        in help_text
    assert "split-at: cuts between the two middle centers at split_at (a test plugin)" in help_text
    assert seen["form"]["default"] == 0.5 and seen["form"]["maximum"] == 1 and seen["form"]["type"] == "number"
    assert seen["form"]["description"].startswith("Where between the two middle centers") and \
        "(split-at)" in seen["form"]["description"]
    assert seen["config_default"] == 0.5 and seen["cli"] == 0.25 and seen["fitted"] == 0.25


def test_an_option_of_a_late_registration_is_refused_with_a_reason():
    import exclust.jobs.config  # noqa: F401  (the explain options are built)

    late = registry.Algorithm("late", "Late", f"{__name__}:SplitAtTree", "registered too late", registry.CENTERS, "-",
                              own_options=(SPLIT_AT,))
    with pytest.raises(ValueError, match="register it before exclust.jobs.config is imported"):
        registry.register(late)
    assert "late" not in registry.ALGORITHMS
    with pytest.raises(ValueError, match="two different options are named 'leaves'"):
        registry.register(registry.Algorithm("leafy", "Leafy", f"{__name__}:SplitAtTree", "-", registry.CENTERS, "-",
                                             own_options=(registry.LEAVES.but(default=3),)))


def _explain_config(argv: list[str]):
    from exclust.jobs.config import EXPLAIN_OPTIONS, ExplainConfig

    return ExplainConfig(**config_values(EXPLAIN_OPTIONS, build_parser().parse_args(["explain", *argv])))


def test_old_spellings_parse_to_the_same_config():
    old = _explain_config("--input d --k 4 --seed 7 --plot a,b --drop-nan --no-curve --no-standing "
                          "--storage-option key=v --scheduler tcp://h:1 --reference labels:lab --out o".split())
    new = _explain_config("--input d --n-clusters 4 --random-state 7 --plot-features a,b --nan-policy drop "
                          "--no-cost-curve --no-standing --storage-options key=v --scheduler-address tcp://h:1 "
                          "--reference labels --reference-column lab --output o".split())
    assert old == new
    assert (old.n_clusters, old.k, old.random_state, old.plot_features, old.nan_policy, old.cost_curve, old.standing,
            old.storage_options, old.reference, old.reference_column) == (
        4, 4, 7, ["a", "b"], "drop", False, False, {"key": "v"}, "labels", "lab")
    from exclust.jobs.config import ExplainConfig

    assert ExplainConfig(input="d", k=3) == ExplainConfig(input="d", n_clusters=3)
    with pytest.raises(TypeError, match="old name 'k'"):
        ExplainConfig(input="d", k=3, n_clusters=3)
    label_old = build_parser().parse_args("label --tree t --input i --out o --out-format delta --storage-option a=b "
                                          "--scheduler tcp://h:1".split())
    label_new = build_parser().parse_args("label --tree t --input i --output o --output-format delta "
                                          "--storage-options a=b --scheduler-address tcp://h:1".split())
    assert vars(label_old) == vars(label_new)


def test_the_command_line_and_the_form_give_one_config(tmp_path):
    from exclust.jobs.config import LabelConfig
    from exclust.jobs.options import LABEL
    from flows.params import ExplainParams, LabelParams

    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"a": np.arange(10.0), "b": np.arange(10.0), "t": np.arange(10) % 2}), data / "p.parquet")
    out = str(tmp_path / "out")
    cli = _explain_config(["--input", str(data), "--features", "a,b", "--k", "3", "--truth", "t",
                           "--algorithm", "exkmc", "--leaves", "6", "--kmedians-price", "--out", out])
    old_form = ExplainParams(input=str(data), output=out, columns="a,b", n_clusters=3, truth_column="t",
                             algorithm="exkmc", leaves=6, kmedians_price=True)
    new_form = ExplainParams(input=str(data), output=out, features="a,b", n_clusters=3, truth="t", algorithm="exkmc",
                             leaves=6, kmedians_price="on")
    assert old_form == new_form
    flow = new_form.to_config()
    assert flow.storage_options == {} and cli.storage_options is None  # the form's blank text is no options
    flow.storage_options = None
    assert flow == cli
    label_cli = build_parser().parse_args(["label", "--tree", str(data / "p.parquet"), "--input", str(data),
                                           "--out", out, "--cluster-column", "c"])
    label_flow = LabelParams(tree=str(data / "p.parquet"), input=str(data), output=out, cluster_column="c")
    from_flow = label_flow.to_config()
    from_flow.storage_options = None
    assert LabelConfig(**config_values(LABEL, label_cli)) == from_flow


def test_the_choices_come_from_the_registries():
    from exclust.algorithms.mmdt.similarity import KERNELS
    from exclust.jobs.options import explain_options
    from exclust.jobs.references import REFERENCES
    from exclust.outputs.lake_table import TABLE_FORMATS
    from flows.params import ExplainParams, LabelParams

    assert set(registry.KERNELS) == set(KERNELS)
    options = {o.name: o for o in explain_options()}
    assert options["reference"].choice_names() == tuple(REFERENCES) == ("gmm", "kmeans", "kmedians", "labels")
    defs = ExplainParams.model_json_schema()["$defs"]
    assert defs["ReferenceKind"]["enum"] == list(REFERENCES) and defs["Kernel"]["enum"] == list(registry.KERNELS)
    assert set(LabelParams.model_json_schema()["$defs"]["OutputFormat"]["enum"]) == {"auto", "folder", *TABLE_FORMATS}


def _help(*argv: str) -> str:
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit) as done:
        build_parser().parse_args([*argv, "--help"])
    assert done.value.code == 0
    return text.getvalue()


def test_usage_errors_are_one_line_with_exit_status_2(capsys):
    messages = []
    for k in ("0", "1"):
        with pytest.raises(SystemExit) as done:
            main(["explain", "--input", "in", "--k", k, "--out", "o"])
        err = capsys.readouterr().err
        assert done.value.code == 2 and err.count("\n") == 1, err
        messages.append(err.replace(f"got {k}", "got K"))
    assert messages[0] == messages[1] == (
        "exclust explain: error: argument --n-clusters/--k: expected at least 2 clusters, got K "
        "(see exclust explain --help)\n")
    for argv in (["explain", "--input", "in", "--out", "o"], ["explain", "--algorithm", "nope"], ["lable"], []):
        with pytest.raises(SystemExit) as done:
            main(argv)
        err = capsys.readouterr().err
        assert done.value.code == 2 and err.count("\n") == 1 and "usage" not in err, err


def test_version_and_help_texts(capsys):
    from exclust import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"exclust {__version__}\n"
    top = " ".join(_help().split())
    assert "demo write a sample dataset and explain it on a local Dask cluster (--prefect: through the Prefect flow)" \
        in top
    explain = _help("explain")
    lines = [line.strip() for line in explain.splitlines()]
    for entry in registry.ALGORITHMS.values():  # one line per algorithm, from the registry
        assert any(line.startswith(f"{entry.name}: ") for line in lines), entry.name
    flat = " ".join(explain.split())
    assert "a Delta table folder, an Iceberg table" in flat and "--k" in flat and "--seed" in flat
    parser = build_parser()
    label = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "label")[1]
    shown = [a for a in label._actions if a.help != "==SUPPRESS=="]
    assert all(a.help for a in shown), [a.option_strings for a in shown if not a.help]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_plot_features_and_k_are_checked_before_any_data_are_read(tmp_path, capsys):
    """The scheduler named does not answer: an error about --plot or --k proves no cluster, so no read, came first."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"x0": np.arange(5.0), "x1": np.arange(5.0)}), data / f"p{i}.parquet")
    base = ["explain", "--input", str(data), "--scheduler", f"tcp://127.0.0.1:{_closed_port()}", "--quiet",
            "--out", str(tmp_path / "out")]
    assert main([*base, "--k", "3", "--plot", "x0,x7"]) == 2
    assert capsys.readouterr().err == ("exclust explain: error: plot feature(s) ['x7'] are not among the features "
                                       "['x0', 'x1']\n")
    assert main([*base, "--k", "2000"]) == 2
    err = capsys.readouterr().err
    assert "has 10 row(s), fewer than the 2000 clusters asked for" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_cluster_on_and_categorical_reach_the_config_the_help_and_the_flow_schema(tmp_path, capsys):
    """Issue 28: one declaration each, on every surface; the default nan policy keeps missing values."""
    from flows.params import ExplainParams

    data, out = tmp_path / "data", str(tmp_path / "out")
    data.mkdir()
    pq.write_table(pa.table({"age": np.arange(10.0), "country": ["de", "fr"] * 5, "plan": np.arange(10) % 3,
                             "e0": np.arange(10.0), "e1": np.arange(10.0)}), data / "p.parquet")
    cli = _explain_config(["--input", str(data), "--k", "3", "--features", "age,country,plan", "--categorical", "plan",
                           "--cluster-on", "e0,e1", "--out", out])
    assert (cli.cluster_on, cli.categorical, cli.nan_policy) == (["e0", "e1"], ["plan"], "keep")
    form = ExplainParams(input=str(data), output=out, n_clusters=3, features="age,country,plan", categorical="plan",
                         cluster_on="e0,e1")
    flow = form.to_config()
    flow.storage_options = None
    assert flow == cli
    schema = ExplainParams.model_json_schema()["properties"]
    assert "reference clustering is fitted on" in schema["cluster_on"]["description"]
    assert "categories" in schema["categorical"]["description"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["explain", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--cluster-on CLUSTER_ON" in help_text and "--categorical CATEGORICAL" in help_text
    assert "keep them as missing values" in help_text
