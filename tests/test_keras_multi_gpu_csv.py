"""keras-multi-gpu-2017/measurements.csv, our transcription of rossumai/keras-multi-gpu's measurements.md tables:
it parses with the importers' CSV reader, and its numbers are checked against the lines they were read from."""

from __future__ import annotations

import pytest
from helpers import REFERENCE

from scalestudy.ingest import csv_rows

CSV = REFERENCE / "keras-multi-gpu-2017" / "measurements.csv"
COLUMNS = [
    "table", "machine", "tool", "method", "variable_update", "parameter_server", "nccl", "model", "data",
    "data_format", "gpus", "gpu_ids", "batch", "images_per_sec", "speedup", "efficiency_pct", "other_value",
    "other_name", "status", "source_line", "efficiency_line", "note",
]  # fmt: skip
TABLE_LINES = {  # the lines of measurements.md (commit f65c33b) each table's rows lie on
    "tf-official-medians": range(74, 77),
    "tf-cnn-cifar10": range(134, 142),
    "tf-cnn-inception3": range(168, 178),
    "tf-cnn-resnet50": range(188, 194),
    "memory-clock": range(221, 227),
    "pix-phb": range(241, 246),
    "kuza55-mlp": range(264, 268),
    "avolkov1-cifar10": range(285, 291),
    "az-4x-m60-cifar10": range(314, 320),
    "keras-inception3": range(339, 356),
    "keras-resnet50": range(367, 377),
    "one-gpu-speed": range(405, 408),
    "gtx1070-vs-m60": range(417, 422),
}


@pytest.fixture(scope="module")
def rows():
    return [row for _, row in csv_rows(CSV, COLUMNS)]


def test_every_row_parses_and_names_its_line(rows):
    assert len(rows) == 151
    for row in rows:
        assert int(row["source_line"]) in TABLE_LINES[row["table"]], row
        assert row["tool"] in {"tf_cnn_benchmarks", "keras"} and int(row["gpus"]) >= 1
        assert (row["method"] in {"kuza55", "avolkov1"}) == (row["tool"] == "keras")
        for column in ("images_per_sec", "speedup", "efficiency_pct", "other_value"):
            assert row[column] == "" or float(row[column]) > 0, (column, row)
        # a value, or a status saying what the table printed instead, or a number of another kind
        assert row["images_per_sec"] or row["speedup"] or row["status"] in {"error", "N/A"} or row["other_value"]
        if row["efficiency_pct"]:
            assert row["efficiency_line"]
    assert {row["table"] for row in rows} == set(TABLE_LINES)


def test_values_read_from_the_lines_by_hand(rows):
    def find(**match):
        (row,) = [r for r in rows if all(r[k] == v for k, v in match.items())]
        return row

    # line 353: | 7gforce | 2 | GPU | 57.15 | 1.46x | 73.14% | 55.57 | 1.36x | 67.77% | 126.68 | 1.61x | 80.75% |
    tf = find(table="keras-inception3", source_line="353", tool="tf_cnn_benchmarks")
    assert (tf["machine"], tf["gpus"], tf["parameter_server"]) == ("7gforce", "2", "GPU")
    assert (tf["images_per_sec"], tf["speedup"], tf["efficiency_pct"]) == ("126.68", "1.61", "80.75")
    kuza = find(table="keras-inception3", source_line="353", method="kuza55")
    assert (kuza["images_per_sec"], kuza["speedup"], kuza["efficiency_pct"], kuza["batch"]) == (
        "57.15", "1.46", "73.14", "32")  # fmt: skip
    # line 352: kuza55 printed 'error' on 6 GPUs with PS on CPU
    failed = find(table="keras-inception3", source_line="352", method="kuza55")
    assert failed["status"] == "error" and failed["images_per_sec"] == failed["speedup"] == ""
    # line 177: | 7gforce | 6 | inception3 | 351.98 | 4.49x | 74.79% |
    six = find(table="tf-cnn-inception3", source_line="177")
    assert (six["gpus"], six["images_per_sec"], six["speedup"], six["efficiency_pct"]) == (
        "6",
        "351.98",
        "4.49",
        "74.79",
    )
    # lines 286 and 298: avolkov1 CIFAR-10 on 2 GPUs, batch 32: speedup 0.78x, efficiency 39.09 %
    small = find(table="avolkov1-cifar10", gpus="2", batch="32")
    assert (small["speedup"], small["source_line"], small["efficiency_pct"], small["efficiency_line"]) == (
        "0.78", "286", "39.09", "298")  # fmt: skip
    # line 243: replicated without NCCL, GPUs 4,5 not measured (an empty cell): two rows, not three
    assert sorted(r["gpu_ids"] for r in rows if r["source_line"] == "243") == ["0,1", "0,5"]


def test_efficiency_is_speedup_over_gpus_but_where_the_source_errs(rows):
    """Efficiency = speedup / N in every row that prints both, to the printed rounding, except three rows of the
    source itself (README 'Faults of the source')."""
    off = set()
    for row in rows:
        if row["speedup"] and row["efficiency_pct"]:
            speedup, gpus = float(row["speedup"]), int(row["gpus"])
            decimals = len(row["speedup"].partition(".")[2])
            tolerance = 0.5 * 10**-decimals / gpus * 100 + 0.006  # the speedup's rounding, and the efficiency's
            if abs(speedup / gpus * 100 - float(row["efficiency_pct"])) > tolerance:
                off.add((row["table"], row["source_line"], row["gpus"]))
    assert off == {
        ("tf-cnn-inception3", "172", "3"),
        ("tf-cnn-inception3", "173", "4"),
        ("avolkov1-cifar10", "286", "2"),
    }
