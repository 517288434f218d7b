"""The ``best`` algorithm: with a centers reference, a run returns the cheapest tree on all rows,
at or below every greedy tree of the standing table (scored on all rows in scoring's pass)."""
from __future__ import annotations

import json


def test_a_best_run_on_parquet_stands_cheapest_in_its_table(tmp_path, dask_client):
    from exclust.cli import main
    from exclust.datasets.synthetic import write_gmm_parquet

    write_gmm_parquet(tmp_path / "data", 3000, n_components=5, n_features=3, rows_per_file=1000, random_state=4,
                      noise_scale=2.0)
    code = main(["explain", "--input", str(tmp_path / "data"), "--features", "x0,x1,x2", "--algorithm", "best",
                 "--k", "5", "--reference", "kmeans", "--no-curve", "--scheduler", dask_client.scheduler.address,
                 "--out", str(tmp_path / "out")])
    assert code == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    rows = {r["algorithm"]: r for r in metrics["standing"]["rows"]}
    assert metrics["algorithm"] == "best" and rows["best"]["own"]
    assert {"imm", "exgreedy", "exshallow", "cart"} <= set(rows)
    assert rows["best"]["best"]  # no greedy tree of the table is cheaper on all rows
    assert all(rows["best"]["price"] <= r["price"] * (1 + 1e-9) for r in rows.values())
