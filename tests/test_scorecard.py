"""The typed score and its one catalogue of measures; the k-medians price as a run option (pass budget)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from exclust.datasets.synthetic import make_gmm_dataset
from exclust.errors import InputError
from exclust.jobs.config import ExplainConfig
from exclust.jobs.explain.steps import explain, run_explain
from exclust.scoring.metrics import evaluate, score
from exclust.scoring.scorecard import GROUPS, HEADLINE, MEASURES, RunFacts, Score

FEATURES = ["a", "b"]


@pytest.fixture(scope="module")
def frame():
    X, y, _ = make_gmm_dataset(3000, n_components=3, n_features=2, random_state=4, noise_scale=3.0)
    df = pd.DataFrame(X, columns=FEATURES)
    df["truth"] = y
    return df


@pytest.fixture(scope="module")
def scored(frame):
    """A tree scored with every input present (labels, centers, truth, k-medians)."""
    from exclust.algorithms.histogram.exkmc import ExKMC

    X, y = frame[FEATURES].to_numpy(), frame["truth"].to_numpy()
    centers = np.array([X[y == c].mean(axis=0) for c in range(3)])
    tree = ExKMC(3, 5, random_state=0).fit(X, centers).tree_
    return tree, X, y, centers


def test_every_measure_has_a_label_meaning_group_and_direction():
    assert len(MEASURES) == len({f.name for cls in (Score, RunFacts) for f in dataclasses.fields(cls)})
    for key, info in MEASURES.items():
        assert info.key == key and info.label.strip() and len(info.meaning) > 15, key
        assert info.group in GROUPS and info.better in ("lower", "higher", None), key
    assert set(HEADLINE) <= set(MEASURES) and "price_kmeans" in HEADLINE
    # Run facts that replace a score field share its measure: one text per key.
    for f in dataclasses.fields(RunFacts):
        if f.name in Score.__dataclass_fields__:
            assert f.metadata["measure"] is Score.__dataclass_fields__[f.name].metadata["measure"], f.name


def test_directions_of_known_measures():
    better = {key: info.better for key, info in MEASURES.items()}
    assert better["price_kmeans"] == better["price_kmedians"] == better["error_rate"] == "lower"
    assert better["ari_truth"] == better["ari_reference"] == "higher"
    assert better["kmeans_cost_reference"] is None and better["n"] is None  # not a quality of the tree
    assert MEASURES["price_kmeans"].explanation.endswith("lower is better")
    assert MEASURES["n_leaves"].integer and not MEASURES["price_kmeans"].integer


def test_every_key_score_returns_is_catalogued_in_field_order(scored):
    tree, X, y, centers = scored
    full, fused = evaluate(tree, X, reference_labels=y, centers=centers, y_true=y)
    assert isinstance(full, Score) and fused == []
    as_dict = score(tree, X, reference_labels=y, centers=centers, y_true=y)
    assert list(as_dict) == [f.name for f in dataclasses.fields(Score)]  # metrics.json's key order
    assert set(as_dict) <= set(MEASURES)
    assert as_dict == full.as_dict() and full.price_kmeans == as_dict["price_kmeans"]
    assert full.price_kmedians is not None and full.passes == 1 + full.kmedians_passes >= 2
    # What an input does not allow keeps its default; the keys stay.
    bare = score(tree, X, kmedians=False)
    assert list(bare) == list(as_dict)
    assert bare["price_kmeans"] is None and bare["surrogate_price"] is None and bare["ari_truth"] is None
    assert bare["price_kmedians"] is None and bare["kmedians_passes"] == 0 and bare["passes"] == 1
    assert bare["n_reference_noise"] == 0 and bare["n_truth_labelled"] == 0 and bare["kmeans_cost_tree"] > 0


def test_a_section_filling_another_sections_field_is_refused():
    with pytest.raises(TypeError, match="price_kmeans"):
        Score(**{"price_kmeans": 1.0}, **{"price_kmeans": 2.0})
    with pytest.raises(TypeError, match="not_a_measure"):
        Score(not_a_measure=1)


@pytest.mark.parametrize("algorithm,reference,objective", [
    ("exkmc", "kmeans", "kmeans"),  # k-medians price off (auto)
    ("random-cut", "kmedians", "kmedians"),  # on (auto), and the guaranteed price
    ("kernel-mmdt", "gmm", "kmeans"),  # the kernel price
])
def test_every_key_of_a_real_runs_metrics_json_is_catalogued(frame, tmp_path, algorithm, reference, objective):
    config = ExplainConfig(input=frame, features=FEATURES, k=3, truth="truth", algorithm=algorithm,
                           reference=reference, objective=objective, cost_curve=False)
    run_explain(config, tmp_path / "out")
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    missing = [key for key in metrics if key not in MEASURES]
    assert not missing, f"metrics.json keys without catalogue metadata: {missing}"
    assert {"algorithm", "seconds", "passes", "parquet_reads", "price_kmeans"} <= set(metrics)
    # Score's keys first, in order, then the run's own facts.
    score_keys = [f.name for f in dataclasses.fields(Score)]
    assert list(metrics)[: len(score_keys)] == score_keys
    extra = {"random-cut": "guaranteed_price", "kernel-mmdt": "kernel_price"}.get(algorithm)
    if extra:
        assert metrics[extra] is not None
    assert "kernel_price" in metrics or algorithm != "kernel-mmdt"
    assert "guaranteed_price" not in metrics or algorithm == "random-cut"  # left out when None


def _run(frame, **options):
    config = ExplainConfig(input=frame, features=FEATURES, k=3, truth="truth", algorithm="kdtree",
                           cost_curve=False, **options)
    return explain(config).metrics


def test_kmedians_price_is_a_run_option_and_costs_passes_only_when_on(frame):
    off = _run(frame, reference="kmeans")  # auto: a k-means run makes no k-medians pass
    assert ExplainConfig(input=frame, reference="kmeans").wants_kmedians_price is False
    assert off["passes"]["score"] == 1 and off["kmedians_passes"] == 0
    assert off["price_kmedians"] is None and off["kmedians_cost_tree"] is None and off["price_kmeans"] is not None

    on = _run(frame, reference="kmeans", kmedians_price=True)
    assert on["kmedians_passes"] >= 2 and on["passes"]["score"] == 1 + on["kmedians_passes"]
    assert on["price_kmedians"] > 0 and on["price_kmeans"] == off["price_kmeans"]

    auto = _run(frame, reference="kmedians")  # auto: a k-medians reference is priced under k-medians
    assert auto["price_kmedians"] is not None and auto["passes"]["score"] == 1 + auto["kmedians_passes"] >= 3
    forced_off = _run(frame, reference="kmedians", kmedians_price=False)
    assert forced_off["price_kmedians"] is None and forced_off["passes"]["score"] == 1
    assert list(forced_off) == list(auto)  # the same keys either way

    with pytest.raises(InputError, match="kmedians_price"):
        ExplainConfig(input=frame, features=FEATURES, k=3, kmedians_price="yes").check()


def test_the_cli_flag_and_the_flow_parameter_set_the_option(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from exclust.cli import build_parser
    from flows.params import ExplainParams

    base = ["explain", "--input", "x", "--k", "3", "--out", "o"]
    parse = build_parser().parse_args
    assert parse(base).kmedians_price is None
    assert parse(base + ["--kmedians-price"]).kmedians_price is True
    assert parse(base + ["--no-kmedians-price"]).kmedians_price is False

    pq.write_table(pa.table({"u": np.arange(10.0)}), tmp_path / "in.parquet")
    common = {"input": str(tmp_path / "in.parquet"), "output": str(tmp_path / "out")}
    assert ExplainParams(**common).to_config().kmedians_price is None
    for given, expected in ((None, None), (True, True), (False, False), ("on", True), ("off", False)):
        assert ExplainParams(**common, kmedians_price=given).to_config().kmedians_price is expected


def test_the_report_and_digest_read_the_catalogue(scored):
    from exclust.report import summary_markdown
    from exclust.report.measures import metrics_table_html

    tree, X, y, centers = scored
    metrics = score(tree, X, reference_labels=y, centers=centers, y_true=y)
    html = metrics_table_html(metrics)
    for key in ("price_kmeans", "ari_truth", "leaf_sizes"):
        info = MEASURES[key]
        row = html.split(f'<tr data-key="{key}">', 1)[1].split("</tr>", 1)[0]
        assert info.label in row.replace("&#x27;", "'") and info.better in (None, "lower", "higher")
    assert "lower is better" in html.split('<tr data-key="price_kmeans">', 1)[1].split("</tr>", 1)[0]
    md = summary_markdown(tree, metrics)
    assert f"| {MEASURES['ari_truth'].label} |" in md and "higher is better" in md


def _numpy_values(value, where="score"):
    """Paths of every numpy scalar or array inside ``value`` (lists and dicts walked, keys too)."""
    if isinstance(value, (np.generic, np.ndarray)):
        return [where]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _numpy_values(v, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items()
                for p in _numpy_values(k, f"{where} key {k!r}") + _numpy_values(v, f"{where}[{k!r}]")]
    return []


def test_score_holds_plain_python_values_only(frame):
    from exclust.algorithms.histogram.imm import IMM

    X = frame[FEATURES].to_numpy()
    tree = IMM(3, random_state=0).fit(X).tree_
    labels = tree.predict(X)
    result = score(tree, X, reference_labels=labels, centers=np.array([X[labels == c].mean(axis=0) for c in range(3)]),
                   y_true=frame["truth"].to_numpy())
    assert result["price_kmeans"] is not None and result["ari_truth"] is not None  # every section filled
    assert _numpy_values(result) == []
    made = Score(n=np.int64(3), n_features=np.int64(2), n_leaves=np.int64(2), depth=np.int64(1),
                 n_clusters_tree=np.int64(2), n_scored=np.int64(3), kmeans_cost_tree=np.float64(1.5),
                 cluster_sizes_tree=np.array([1, 2]), leaf_sizes={np.int64(1): np.int64(1)})
    assert _numpy_values(dataclasses.asdict(made)) == []
    assert type(made.kmeans_cost_tree) is float and made.cluster_sizes_tree == [1, 2]
    assert _numpy_values(RunFacts(k=np.int64(3), enr=np.float64(2.0)).as_dict()) == []
