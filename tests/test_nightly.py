"""Labelling by date through the ``exclust`` command: nights, backfills, reruns, missing nights, drift.

Real Parquet folders laid out as a nightly feed (``incoming/date=YYYY-MM-DD``), a tree written by
``exclust explain`` (so it carries the built-on leaf shares), and the session's multi-process
Dask cluster for every labelling run.
"""
from __future__ import annotations

import hashlib
import json
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exclust.cli import main
from exclust.errors import InputError
from exclust.jobs.label.nightly import check_templates, fill_date, parse_dates
from exclust.scoring.drift import leaf_drift
from exclust.tree import ThresholdTree

CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def _night(folder: Path, rows: int, seed: int, weights=(1 / 3, 1 / 3, 1 / 3), n_files: int = 2) -> None:
    """A night's partition: rows around three centres in the given proportions, in n_files files."""
    rng = np.random.default_rng(seed)
    which = rng.choice(3, size=rows, p=weights)
    X = CENTERS[which] + rng.normal(scale=0.7, size=(rows, 2))
    folder.mkdir(parents=True)
    for i, part in enumerate(np.array_split(np.arange(rows), n_files)):
        pq.write_table(pa.table({"x0": X[part, 0], "x1": X[part, 1], "id": part}), folder / f"part-{i}.parquet")


def _folder_bytes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones included) -> SHA-256 of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _visible(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if not p.name.startswith(".")}


@pytest.fixture(scope="module")
def feed(tmp_path_factory, dask_client):
    """A tree explained on the 'build' data, and the scheduler address for every labelling run."""
    root = tmp_path_factory.mktemp("nightly")
    _night(root / "build", 3000, seed=0)
    rc = main(["explain", "--input", str(root / "build"), "--features", "x0,x1", "--k", "3", "--algorithm", "imm",
               "--reference", "kmeans", "--out", str(root / "explain"), "--scheduler", dask_client.scheduler.address,
               "--quiet"])
    assert rc == 0
    return {"root": root, "tree": root / "explain" / "tree.json", "scheduler": dask_client.scheduler.address}


def _label(feed, incoming: Path, labelled: Path, dates: str, *options: str) -> int:
    return main(["label", "--tree", str(feed["tree"]), "--input", f"{incoming}/date={{date}}",
                 "--out", f"{labelled}/date={{date}}", "--date", dates, "--scheduler", feed["scheduler"], "--quiet",
                 *options])


def _rows(folder: Path):
    return pq.read_table(sorted(folder.glob("*.parquet")))


def test_dates_and_templates():
    assert parse_dates("2026-11-20") == [date(2026, 11, 20)]
    assert parse_dates("2026-11-30..2026-12-02") == [date(2026, 11, 30), date(2026, 12, 1), date(2026, 12, 2)]
    assert fill_date("in/date={date}/x", date(2026, 1, 2)) == "in/date=2026-01-02/x"
    for bad, why in (("2026-11-31", "does not exist"), ("20.11.2026", "YYYY-MM-DD"),
                     ("2026-11-22..2026-11-20", "ends before it starts")):
        with pytest.raises(InputError, match=why):
            parse_dates(bad)
    with pytest.raises(InputError, match="output path out has no"):
        check_templates("in/date={date}", "out", dated=True)
    with pytest.raises(InputError, match="input path in has no"):
        check_templates("in", "out/date={date}", dated=True)
    with pytest.raises(InputError, match="no date was given"):
        check_templates("in/date={date}", "out/date={date}", dated=False)


def test_explain_stores_leaf_shares_of_its_data(feed):
    tree = ThresholdTree.from_json(feed["tree"])
    shares = tree.meta["leaf_shares"]
    assert set(shares) == {str(leaf) for leaf in tree.leaves}
    table = _rows(feed["root"] / "build")
    X = np.column_stack([table.column("x0").to_numpy(), table.column("x1").to_numpy()])
    counts = np.bincount(tree.apply(X), minlength=tree.node_count)
    for leaf, share in shares.items():
        assert share == pytest.approx(counts[int(leaf)] / len(X))


def test_two_nights_and_a_backfill_leave_one_folder_per_date_with_every_row(feed, tmp_path, capsys):
    incoming, labelled = tmp_path / "incoming", tmp_path / "labelled"
    nights = {"2026-11-20": 1000, "2026-11-21": 1200, "2026-11-22": 800, "2026-11-23": 900}
    for i, (day, rows) in enumerate(nights.items()):
        _night(incoming / f"date={day}", rows, seed=10 + i)
    tree = ThresholdTree.from_json(feed["tree"])

    assert _label(feed, incoming, labelled, "2026-11-20") == 0
    assert _visible(labelled) == {"date=2026-11-20"}  # one date writes only its own folder
    assert _label(feed, incoming, labelled, "2026-11-21") == 0
    assert _label(feed, incoming, labelled, "2026-11-22..2026-11-23") == 0  # backfill, inclusive
    assert _visible(labelled) == {f"date={day}" for day in nights}
    for day, rows in nights.items():
        out = labelled / f"date={day}"
        table = _rows(out)
        assert table.num_rows == rows
        assert sorted(table.column("id").to_pylist()) == list(range(rows))  # every row, once
        X = np.column_stack([table.column("x0").to_numpy(), table.column("x1").to_numpy()])
        np.testing.assert_array_equal(table.column("cluster").to_numpy(), tree.predict(X))
        assert json.loads((out / "_labels.json").read_text())["n_rows"] == rows
    printed = capsys.readouterr().out
    assert "2026-11-22: labelled 800 rows" in printed and "2026-11-23: labelled 900 rows" in printed

    # Rerun one date after its input grew: that date is replaced, the others stay byte for byte.
    before = {day: _folder_bytes(labelled / f"date={day}") for day in nights}
    extra = _rows(incoming / "date=2026-11-21")
    pq.write_table(extra.slice(0, 100), incoming / "date=2026-11-21" / "part-9.parquet")
    assert _label(feed, incoming, labelled, "2026-11-21") == 0
    assert _rows(labelled / "date=2026-11-21").num_rows == 1300
    for day in nights:
        if day != "2026-11-21":
            assert _folder_bytes(labelled / f"date={day}") == before[day], day
    assert _visible(labelled) == {f"date={day}" for day in nights}


def test_a_date_without_input_says_so_and_writes_nothing(feed, tmp_path, capsys):
    incoming, labelled = tmp_path / "incoming", tmp_path / "labelled"
    _night(incoming / "date=2026-11-20", 500, seed=3)
    (incoming / "date=2026-11-22").mkdir()  # the night's folder exists, its files have not arrived
    assert _label(feed, incoming, labelled, "2026-11-20..2026-11-22") == 0
    printed = capsys.readouterr().out
    assert f"2026-11-21: nothing to label (input not found: {incoming}/date=2026-11-21); nothing written" in printed
    assert f"2026-11-22: nothing to label (no Parquet files found at {incoming}/date=2026-11-22)" in printed
    assert _visible(labelled) == {"date=2026-11-20"}
    assert not any(p.name.startswith(".date=2026-11-2") and "tmp" in p.name for p in labelled.iterdir())


def test_bad_date_or_template_exits_2_before_any_work(feed, tmp_path, capsys):
    incoming, labelled = tmp_path / "incoming", tmp_path / "labelled"
    assert _label(feed, incoming, labelled, "2026-02-30") == 2
    assert "2026-02-30" in capsys.readouterr().err
    rc = main(["label", "--tree", str(feed["tree"]), "--input", f"{incoming}/date={{date}}", "--out", str(labelled),
               "--date", "2026-11-20", "--quiet"])
    assert rc == 2 and "has no {date}" in capsys.readouterr().err
    assert not labelled.exists()


def _night_drift(labelled: Path, tree: ThresholdTree) -> dict:
    """The night's drift as labelling recorded it, else computed from the leaf column it wrote."""
    doc = json.loads((labelled / "_labels.json").read_text())
    if doc.get("drift") is not None:
        return doc["drift"]
    leaves, counts = np.unique(_rows(labelled).column("leaf").to_numpy(), return_counts=True)
    return leaf_drift(tree.meta, {int(a): int(b) for a, b in zip(leaves, counts, strict=True) if a >= 0})


def test_drift_flag_rises_when_the_data_moved_and_stays_down_when_not(feed, tmp_path, capsys):
    incoming, labelled = tmp_path / "incoming", tmp_path / "labelled"
    _night(incoming / "date=2026-11-20", 1500, seed=21)  # same mixture as the tree was built on
    _night(incoming / "date=2026-11-21", 1500, seed=22, weights=(0.8, 0.1, 0.1))  # most rows moved to one cluster
    assert _label(feed, incoming, labelled, "2026-11-20..2026-11-21") == 0  # without --fail-on-drift: exit 0
    tree = ThresholdTree.from_json(feed["tree"])
    calm = _night_drift(labelled / "date=2026-11-20", tree)
    moved = _night_drift(labelled / "date=2026-11-21", tree)
    assert calm["drifted"] is False and calm["psi"] < 0.05
    assert moved["drifted"] is True and moved["psi"] > calm["threshold"]
    assert {leaf["leaf"] for leaf in moved["leaves"]} == set(tree.leaves.tolist())
    # The terminal says it too: one line per night with its PSI, the drifted night marked.
    lines = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("2026-")}
    assert f"leaf drift PSI {calm['psi']:.3g}: no drift" in lines["2026-11-20"]
    assert f"leaf drift PSI {moved['psi']:.3g}: DRIFTED" in lines["2026-11-21"]


def test_fail_on_drift_exits_3_after_writing_every_night_and_0_on_calm_nights(feed, tmp_path, capsys):
    incoming, labelled = tmp_path / "incoming", tmp_path / "labelled"
    _night(incoming / "date=2026-11-20", 1500, seed=21)
    _night(incoming / "date=2026-11-21", 1500, seed=22, weights=(0.8, 0.1, 0.1))
    _night(incoming / "date=2026-11-22", 1500, seed=23)
    assert _label(feed, incoming, labelled, "2026-11-20", "--fail-on-drift") == 0
    assert "drifted" not in capsys.readouterr().err
    assert _label(feed, incoming, labelled, "2026-11-21..2026-11-22", "--fail-on-drift") == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of 2 labelled input(s) drifted" in err[0] and "2026-11-21 (PSI" in err[0]
    assert "2026-11-22" not in err[0]
    assert _visible(labelled) == {"date=2026-11-20", "date=2026-11-21", "date=2026-11-22"}  # written all the same
    assert _rows(labelled / "date=2026-11-21").num_rows == 1500


def test_labelling_records_drift_in_labels_json(feed, tmp_path):
    """Needs LabelResult.drift (recorded in _labels.json by exclust.jobs.label.labeling)."""
    from exclust.jobs.label.labeling import LabelResult

    if "drift" not in LabelResult.__dataclass_fields__:
        pytest.skip("exclust.jobs.label.labeling does not record drift yet (LabelResult.drift comes with the "
                    "outputs work)")
    incoming, labelled = tmp_path / "incoming", tmp_path / "labelled"
    _night(incoming / "date=2026-11-21", 1500, seed=22, weights=(0.8, 0.1, 0.1))
    assert _label(feed, incoming, labelled, "2026-11-21") == 0
    doc = json.loads((labelled / "date=2026-11-21" / "_labels.json").read_text())
    assert doc["drift"]["drifted"] is True
