"""Issue 28 end to end through the command line: a customer table (numbers with nulls, text
``country``, pandas-category ``plan``, bool ``vip``) explained with ``exclust explain`` and labelled
with ``exclust label``, from Parquet, from a Delta table and from an Iceberg table."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.cli import main
from exclust.scoring.metrics import evaluate
from exclust.tree import MISSING_NONE, ThresholdTree
from exclust.tree.node_kinds import CATEGORY_SET, LEAF

FEATURES = "age,country,plan,vip"

# The run's scoring pass measures a tree's costs on the clustering columns once issue 28's scoring in
# the clustering space (evaluate(..., Z=), branch zspace28) is in; before it, a feature holding nulls
# stops `exclust explain` at the score step ("X holds NaN"), so these tests are expected to fail there.
pytestmark = pytest.mark.xfail("Z" not in inspect.signature(evaluate).parameters, strict=True,
                               raises=AssertionError, reason="scoring measures costs on the features, not cluster_on")


def customers(n: int, seed: int, unseen: int = 0) -> pd.DataFrame:
    """Spending clusters that follow the country; the tree may cut age, country, plan and vip.
    ``unseen`` rows come from a country the fit never saw (``pl``)."""
    rng = np.random.default_rng(seed)
    country = rng.choice(["at", "de", "es", "fr", "it", "nl"], n).astype(object)
    group = np.select([np.isin(country, ["at", "de"]), np.isin(country, ["es", "it"])], [0, 1], 2)
    spend = np.array([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]])[group] + rng.normal(size=(n, 2))
    country[rng.random(n) < 0.03] = None
    country[:unseen] = "pl"
    age = rng.normal(45, 12, n).round()
    age[rng.random(n) < 0.08] = np.nan
    return pd.DataFrame({"id": np.arange(n), "age": age, "country": country,
                         "plan": pd.Categorical(rng.choice(["basic", "plus", "pro"], n)),
                         "vip": rng.random(n) < 0.2, "income": spend[:, 0], "spend": spend[:, 1]})


def explain_and_label(fit_input: str, label_input: str, fresh: pd.DataFrame, tmp_path: Path, scheduler: str,
                      capsys) -> None:
    run, labelled = tmp_path / "run", tmp_path / "labelled"
    code = main(["explain", "--input", fit_input, "--features", FEATURES, "--cluster-on", "income,spend", "--k", "3",
                 "--algorithm", "imm", "--reference", "kmeans", "--no-curve", "--quiet", "--scheduler", scheduler,
                 "--out", str(run)])
    assert code == 0, capsys.readouterr().err
    tree = ThresholdTree.from_json(run / "tree.json")
    internal = tree.kind != LEAF
    assert (tree.kind == CATEGORY_SET).any()  # a set of countries
    assert (tree.missing_side[internal] != MISSING_NONE).all()  # every cut learned its missing side
    rules = (run / "rules.txt").read_text()
    assert "country in {" in rules and "(or missing)" in rules, rules

    code = main(["label", "--tree", str(run / "tree.json"), "--input", label_input, "--out", str(labelled),
                 "--scheduler", scheduler, "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    summary = json.loads((labelled / "_labels.json").read_text())
    n_unseen = int((fresh.country == "pl").sum())
    assert summary["unseen_categories"]["country"] == n_unseen > 0
    assert f"unseen categories in 'country': {n_unseen} rows" in printed
    out = pq.read_table(sorted(labelled.rglob("*.parquet"))).to_pandas().sort_values("id")
    assert len(out) == len(fresh) and (out.cluster >= 0).all()  # nulls and the unseen country routed: no -1
    assert "-1" not in summary["rows_per_cluster"]
    with_null = fresh.age.isna() | fresh.country.isna()
    assert with_null.sum() > 0 and (out.cluster.to_numpy()[with_null.to_numpy()] >= 0).all()


def test_customer_table_from_parquet(tmp_path, capsys, dask_client):
    fitted, fresh = customers(2000, seed=1), customers(600, seed=2, unseen=25)
    fitted.to_parquet(tmp_path / "customers.parquet", index=False)
    (tmp_path / "tonight").mkdir()
    fresh.to_parquet(tmp_path / "tonight" / "part-0.parquet", index=False)
    assert pa.types.is_dictionary(pq.read_schema(tmp_path / "customers.parquet").field("plan").type)
    explain_and_label(str(tmp_path / "customers.parquet"), str(tmp_path / "tonight"), fresh, tmp_path,
                      dask_client.scheduler.address, capsys)


def test_customer_table_from_delta(tmp_path, capsys, dask_client):
    deltalake = pytest.importorskip("deltalake")
    fitted, fresh = customers(2000, seed=3), customers(600, seed=4, unseen=25)
    deltalake.write_deltalake(str(tmp_path / "customers"), fitted)
    deltalake.write_deltalake(str(tmp_path / "tonight"), fresh)
    explain_and_label(str(tmp_path / "customers"), str(tmp_path / "tonight"), fresh, tmp_path,
                      dask_client.scheduler.address, capsys)


def test_customer_table_from_iceberg(tmp_path, capsys, dask_client):
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db")
    catalog.create_namespace("ns", {"location": f"file://{tmp_path}/warehouse/ns"})
    fitted, fresh = customers(2000, seed=5), customers(600, seed=6, unseen=25)
    for name, frame in (("customers", fitted), ("tonight", fresh)):
        rows = pa.Table.from_pandas(frame, preserve_index=False)
        rows = rows.set_column(rows.schema.get_field_index("plan"), "plan", rows.column("plan").cast(pa.string()))
        catalog.create_table(f"ns.{name}", schema=rows.schema).append(rows)
    address = f"iceberg+sqlite:///{tmp_path}/catalog.db#ns."
    explain_and_label(address + "customers", address + "tonight", fresh, tmp_path, dask_client.scheduler.address,
                      capsys)
