"""keras-multi-gpu-2017 (seed 002): the importer on the real raw logs (fetched from the mirror) and our
transcription measurements.csv; values worked by hand from the files' lines (cited as file:line), and the
cross-check of the write-up's tables against the logs (derive.table_vs_log)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from helpers import REFERENCE, dataset_copy, require_raw_data, run_here

from scalestudy import derive
from scalestudy.ingest import keras_multi_gpu
from scalestudy.schema import NOT_STATED, SchemaError
from scalestudy.store import check_records

DATASET = "keras-multi-gpu-2017"
TRACE = "benchmark_batch_inception3_az-2xm-60.txt"
KERAS_7G = "benchmark_inception3_resnet50_results_7gforce.txt"
KERAS_AZ = "benchmark_inception3_resnet50_results_az-2x-m60.txt"
# table 5's pairing (conf/table/table-5.yaml)
KEY = ["platform", "api", "model", "workers", "method", "data_format"]
BASELINE = ["platform", "api", "model", "method", "data_format"]


@pytest.fixture(scope="module")
def records():
    require_raw_data()
    recs = keras_multi_gpu.read(REFERENCE / DATASET)
    check_records(DATASET, recs)  # valid for the schema, keys unique
    return recs


def as_table(recs) -> pd.DataFrame:
    """The runs as the tidy table has them: params, metrics and tags as columns, the key as run id."""
    rows = [{**r.params, **r.metrics, **r.tags, "status": r.status, "run_id": r.key, "run_name": r.run_name}
            for r in recs]  # fmt: skip
    return pd.DataFrame(rows)


def one(recs, **where):
    hits = [r for r in recs if all(str({**r.params, **r.tags}.get(k)) == str(v) for k, v in where.items())]
    assert len(hits) == 1, (where, [h.key for h in hits])
    return hits[0]


def test_run_counts(records):
    kinds = Counter((r.tags["record"], r.status) for r in records)
    # 6 tf_cnn_benchmarks runs + 28 Keras runs on 7gforce + 12 on az-2x-m60; 4 failed (kuza55 at 6 GPUs).
    assert kinds[("log", "FINISHED")] == 42 and kinds[("log", "FAILED")] == 4
    # 151 CSV rows less 44 of the skipped tables (3 medians, 8 CIFAR-10 tf_cnn, 4 MLP, 18 avolkov1 CIFAR-10,
    # 6 az-4x-m60 CIFAR-10, 5 ratios) less the one 'N/A' cell (measurements.md:355) = 106; 4 cells print 'error'.
    assert kinds[("table", "FINISHED")] == 102 and kinds[("table", "FAILED")] == 4
    by_file = Counter(r.tags["log_file"] for r in records if r.tags["record"] == "log")
    assert by_file == {TRACE: 6, KERAS_7G: 28, KERAS_AZ: 12}
    assert {r.params["platform"] for r in records if r.tags.get("log_file") == TRACE} == {"az-2x-m60"}
    assert {r.tags["published_table"] for r in records if r.tags["record"] == "table"}.isdisjoint(
        keras_multi_gpu.TABLE_SKIPPED
    )


def test_log_runs_by_hand(records):
    # benchmark_batch_inception3_az-2xm-60.txt:110 `--local_parameter_device cpu`, :142 `Data format: NCHW`,
    # :162 `total images/sec: 95.43`
    ps_cpu = one(records, record="log", api="tf_cnn_benchmarks", workers=2, variable_update="parameter_server (cpu)")
    assert ps_cpu.metrics == {"throughput_total": 95.43}
    assert ps_cpu.tags["source_line"] == f"{TRACE}:162"
    assert (ps_cpu.tags["parameter_server"], ps_cpu.tags["data_format"]) == ("cpu", "NCHW")
    assert (ps_cpu.params["device"], ps_cpu.params["batch_per_worker"]) == ("M60", 32)
    # :219 `--variable_update replicated --use_nccl False`, :272 `total images/sec: 95.33`
    no_nccl = one(records, record="log", api="tf_cnn_benchmarks", variable_update="replicated (gpu, no nccl)")
    assert no_nccl.metrics["throughput_total"] == 95.33 and no_nccl.tags["method"] == "tf_cnn_benchmarks"
    # 7gforce Keras: avolkov1, 6 GPUs, PS on a GPU: the last 'Samples/sec: 21.33' at line 1220
    slow = one(records, record="log", platform="7gforce", model="inception3", workers=6,
               variable_update="avolkov1 (ps gpu)")  # fmt: skip
    assert slow.metrics["throughput_total"] == 21.33 and slow.tags["source_line"] == f"{KERAS_7G}:1220"
    assert slow.params["device"] == "GTX 1070" and slow.params["batch_per_worker"] == NOT_STATED  # 32 over 6
    assert slow.tags["data_format"] == "NHWC" and slow.tags["parameter_server"] == "gpu"
    failed = one(records, record="log", platform="7gforce", model="resnet50", workers=6, method="kuza55",
                 parameter_server="cpu")  # fmt: skip
    assert failed.status == "FAILED" and "InvalidArgumentError" in failed.tags["failure_reason"]
    assert failed.metrics == {}


def test_table_runs_by_hand(records):
    # measurements.csv:109 = measurements.md:353, the tf_cnn_benchmarks column: `126.68 | 1.61x | 80.75%`
    row = one(records, record="table", published_table="keras-inception3", platform="7gforce", workers=2,
              method="tf_cnn_benchmarks", parameter_server="gpu")  # fmt: skip
    assert row.metrics == {"throughput_total": 126.68}
    assert (row.tags["printed_images_per_sec"], row.tags["printed_speedup"], row.tags["printed_efficiency_pct"]) == (
        "126.68",
        "1.61",
        "80.75",
    )
    assert row.tags["published_line"] == "measurements.md:353" and row.tags["source_line"] == "measurements.csv:109"
    assert row.params["variable_update"] == "parameter_server (gpu)" and row.params["batch_per_worker"] == NOT_STATED
    assert row.params["device"] == "GTX 1070" and row.params["data"] == "synthetic"
    # the same line's kuza55 cell `57.15 | 1.46x | 73.14%`: batch 32 (global) over 2 GPUs = 16 per GPU
    kuza = one(records, record="table", published_table="keras-inception3", platform="7gforce", workers=2,
               method="kuza55", parameter_server="gpu")  # fmt: skip
    assert kuza.metrics["throughput_total"] == 57.15 and kuza.params["batch_per_worker"] == 16
    assert kuza.params["variable_update"] == "kuza55 (ps gpu)" and kuza.params["api"] == "keras"
    # measurements.md:352 prints `error` for kuza55 at 6 GPUs, PS on the CPU: a FAILED run without a number
    error = one(records, record="table", published_table="keras-inception3", platform="7gforce", workers=6,
                method="kuza55", parameter_server="cpu")  # fmt: skip
    assert error.status == "FAILED" and error.metrics == {} and "measurements.md:352" in error.tags["failure_reason"]
    # measurements.md:355 prints N/A for tf_cnn_benchmarks at 6 GPUs, PS on a GPU: no run
    assert not [r for r in records if r.tags.get("published_line") == "measurements.md:355"
                and r.tags["method"] == "tf_cnn_benchmarks"]  # fmt: skip
    # pix-phb, measurements.md:244: replicated with NCCL on GPUs 0,5: 1175.59
    nccl = one(records, record="table", published_table="pix-phb", gpu_ids="0,5", variable_update="replicated (nccl)")
    assert nccl.metrics["throughput_total"] == 1175.59 and nccl.params["model"] == "alexnet"


def test_agrees_at_the_printed_precision():
    assert derive.agrees(95.43 / 47.49 * 100 / 2, "100.47")  # 100.4738...
    assert derive.agrees(41.0, "41") and derive.agrees(2.0094757, "2.01")
    assert not derive.agrees(126.68 / 78.44, "1.62")  # 1.61499 prints 1.61
    assert not derive.agrees(57.15, "57.16")


def test_every_logged_value_agrees(records):
    pairs = derive.table_vs_log(as_table(records), key=KEY, baseline=BASELINE)
    assert len(pairs) == 114 and pairs["agree"].all()
    assert pairs["quantity"].value_counts().to_dict() == {
        "images_per_sec": 48, "speedup": 31, "efficiency_pct": 31, "status": 4}  # fmt: skip
    # measurements.md:340 (az-2x-m60, 2 GPUs, PS on the CPU), tf_cnn_benchmarks `95.43 | 2.01x | 100.47%` against
    # the trace's lines 162 and 54: 95.43 / 47.49 = 2.00948, / 2 = 100.474 %
    cell = pairs[(pairs["published_line"] == "measurements.md:340") & (pairs["method"] == "tf_cnn_benchmarks")]
    got = dict(zip(cell["quantity"], cell["log"]))
    assert got["speedup"] == pytest.approx(95.43 / 47.49) and got["efficiency_pct"] == pytest.approx(95.43 / 47.49 * 50)
    assert set(cell["log_line"]) == {f"{TRACE}:162"}


def test_a_changed_published_value_is_a_disagreement(tmp_path):
    folder = dataset_copy(tmp_path, DATASET)
    csv = folder / "measurements.csv"
    lines = csv.read_text().splitlines(keepends=True)
    assert ",57.15,1.46,73.14," in lines[106]  # measurements.csv:107 = measurements.md:353, kuza55
    lines[106] = lines[106].replace(",57.15,1.46,73.14,", ",57.15,1.47,73.14,")
    csv.write_text("".join(lines))
    pairs = derive.table_vs_log(as_table(keras_multi_gpu.read(folder)), key=KEY, baseline=BASELINE)
    bad = pairs[~pairs["agree"]]
    assert len(bad) == 1 and bad.iloc[0]["quantity"] == "speedup" and bad.iloc[0]["printed"] == "1.47"
    assert bad.iloc[0]["log"] == pytest.approx(57.15 / 39.07)  # 7gforce log lines 179 and 54


def test_a_bad_row_stops_the_import_naming_its_line(tmp_path, monkeypatch, capsys):
    folder = dataset_copy(tmp_path, DATASET)
    csv = folder / "measurements.csv"
    text = csv.read_text().replace("keras-resnet50,7gforce,keras,kuza55", "keras-resnet50,8gforce,keras,kuza55", 1)
    csv.write_text(text)
    with pytest.raises(SchemaError, match=r"measurements\.csv:\d+: column 'machine': unknown '8gforce'"):
        keras_multi_gpu.read(folder)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    proc = run_here("scalestudy.ingest", "--reference-dir", str(folder.parent), DATASET, uri=store,
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert proc.returncode == 2 and "nothing was written" in proc.stderr and "8gforce" in proc.stderr
    assert "created" not in proc.stdout
    db = Path(store[len("sqlite:///") :])
    if db.exists():  # the store may exist, but without a run of the dataset
        from scalestudy.store import load_runs

        runs = load_runs(store)
        assert runs.empty or DATASET not in set(runs.get("experiment", []))


def test_the_dataset_is_what_figure_8_and_table_5_import(monkeypatch, capsys):
    proc = run_here("scalestudy.ingest", "--list", "--for", "figure-8", "table-5", uri="sqlite:///unused.db",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert proc.stdout.split() == [DATASET]
