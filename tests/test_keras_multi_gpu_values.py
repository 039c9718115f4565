"""keras-multi-gpu-2017 (ingest/keras_multi_gpu.py), in-process: every param, tag and metric that a row of our
transcription measurements.csv gives (rows cited as measurements.csv:line, their printed line measurements.md:N),
each spelling of variable_update, each refusal with its whole message; and the tags the importer adds to the runs
of the three raw logs."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import REFERENCE, raw_dir

from scalestudy.ingest import csv_rows, fetched_raw_files, keras_multi_gpu, read_source
from scalestudy.schema import NOT_STATED, SchemaError

FOLDER = REFERENCE / "keras-multi-gpu-2017"
CSV = FOLDER / "measurements.csv"
PUBLISHED = {"source", "citation", "dataset", "source_url", "source_line", "mlflow.note.content"}
TRACE = "benchmark_batch_inception3_az-2xm-60.txt"


@pytest.fixture(scope="module")
def source():
    return read_source(FOLDER)


@pytest.fixture(scope="module")
def rows():
    """measurements.csv's rows by line: (where, row)."""
    return {int(where.rpartition(":")[2]): (where, row) for where, row in csv_rows(CSV, keras_multi_gpu.COLUMNS)}


def own_tags(rec) -> dict:
    return {k: v for k, v in rec.tags.items() if k not in PUBLISHED}


def test_a_tf_cnn_benchmarks_row(rows, source):
    # measurements.csv:80 = measurements.md:340, az-2x-m60, 2 GPUs, PS on the CPU: `95.43 | 2.01x | 100.47%`
    where, row = rows[80]
    rec = keras_multi_gpu.table_record(row, where, source)
    assert rec.params == {"model": "inception3", "framework": "tensorflow", "api": "tf_cnn_benchmarks", "workers": 2,
                          "device": "M60", "data": "synthetic", "batch_per_worker": NOT_STATED,
                          "platform": "az-2x-m60", "variable_update": "parameter_server (cpu)"}  # fmt: skip
    assert rec.metrics == {"throughput_total": 95.43} and rec.status == "FINISHED"
    assert own_tags(rec) == {
        "record": "table", "published_table": "keras-inception3", "published_line": "measurements.md:340",
        "method": "tf_cnn_benchmarks", "parameter_server": "cpu", "data_format": "NCHW",
        "published_efficiency_line": "measurements.md:340",
        "note": "data format NCHW for tf_cnn_benchmarks, NHWC for Keras (lines 162, 403); column group "
                "'tf_cnn_benchmarks' (line 338)",
        "printed_images_per_sec": "95.43", "printed_speedup": "2.01", "printed_efficiency_pct": "100.47",
    }  # fmt: skip
    assert rec.tags["source_line"] == "measurements.csv:80" and rec.where == where
    assert rec.key == "table:keras-inception3/340/az-2x-m60/tf_cnn_benchmarks/-/CPU/2/-/NCHW"
    assert rec.experiment == "keras-multi-gpu-2017"


def test_a_keras_row(rows, source):
    # measurements.csv:78 = measurements.md:340, kuza55, PS on the CPU, 2 GPUs, global batch 32: 16 per GPU
    where, row = rows[78]
    rec = keras_multi_gpu.table_record(row, where, source)
    assert rec.params == {"model": "inception3", "framework": "tensorflow", "api": "keras", "workers": 2,
                          "device": "M60", "data": "synthetic", "batch_per_worker": 16, "platform": "az-2x-m60",
                          "variable_update": "kuza55 (ps cpu)"}  # fmt: skip
    assert rec.metrics == {"throughput_total": 53.35}
    assert type(rec.params["batch_per_worker"]) is int  # MLflow keeps it as text: '16', never '16.0'
    tags = own_tags(rec)
    assert tags["method"] == "kuza55" and tags["parameter_server"] == "cpu" and tags["batch_global"] == "32"
    assert (tags["printed_images_per_sec"], tags["printed_speedup"], tags["printed_efficiency_pct"]) == (
        "53.35", "1.68", "84.12")  # fmt: skip
    assert rec.key == "table:keras-inception3/340/az-2x-m60/keras/kuza55/CPU/2/-/NHWC"
    # the same row on 3 GPUs: 32 does not split evenly, the per-GPU batch is not stated
    rec = keras_multi_gpu.table_record({**row, "gpus": "3"}, where, source)
    assert rec.params["batch_per_worker"] == NOT_STATED and rec.params["workers"] == 3
    # data other than the synthetic ImageNet is kept as the table names it
    assert keras_multi_gpu.table_record({**row, "data": "imagenet"}, where, source).params["data"] == "imagenet"
    # a Keras row that names no parameter server has no variable_update
    rec = keras_multi_gpu.table_record({**row, "parameter_server": ""}, where, source)
    assert "variable_update" not in rec.params and rec.tags["parameter_server"] == ""


def test_a_row_with_gpu_ids_and_another_value(rows, source):
    # measurements.csv:37 = measurements.md:241, PS on a GPU, GPUs 0 and 5 (PHB): 1572.61, and the printed ratio 1.17
    where, row = rows[37]
    rec = keras_multi_gpu.table_record(row, where, source)
    assert rec.params == {"model": "alexnet", "framework": "tensorflow", "api": "tf_cnn_benchmarks", "workers": 2,
                          "device": "GTX 1070", "data": "synthetic", "batch_per_worker": NOT_STATED,
                          "platform": "7gforce", "variable_update": "parameter_server (gpu)"}  # fmt: skip
    assert rec.metrics == {"throughput_total": 1572.61}
    assert own_tags(rec) == {
        "record": "table", "published_table": "pix-phb", "published_line": "measurements.md:241",
        "method": "tf_cnn_benchmarks", "parameter_server": "gpu", "gpu_ids": "0,5",
        "note": "GPUs 0,5 connected via PHB (line 240)", "printed_images_per_sec": "1572.61",
        "printed_other": "1.17 (speedup PIX vs. PHB (first PIX pair over the PHB pair))",
    }  # fmt: skip
    assert rec.key == "table:pix-phb/241/7gforce/tf_cnn_benchmarks/-/GPU/2/0,5/-"
    # measurements.csv:29 = measurements.md:221: no variable_update, one GPU (id 0)
    where, row = rows[29]
    rec = keras_multi_gpu.table_record(row, where, source)
    assert "variable_update" not in rec.params and rec.params["workers"] == 1
    assert rec.metrics == {"throughput_total": 1561.745} and rec.tags["gpu_ids"] == "0"
    assert rec.tags["printed_other"] == "100.00 (% of GPU 0's images/sec)" and rec.tags["parameter_server"] == ""


def test_variable_update_spellings(rows, source):
    # measurements.csv:41 (replicated, PS GPU, no NCCL) and :45 (independent), measurements.md:243 and :245
    def update(line, **changes):
        where, row = rows[line]
        return keras_multi_gpu.table_record({**row, **changes}, where, source).params.get("variable_update")

    assert update(41) == "replicated (gpu, no nccl)"
    assert update(41, parameter_server="CPU") == "replicated (cpu, no nccl)"
    assert update(41, parameter_server="") == "replicated (gpu, no nccl)"
    assert update(41, nccl="TRUE") == "replicated (nccl)"
    assert update(45) == "independent"
    assert update(45, variable_update="") is None
    where, row = rows[41]
    with pytest.raises(SchemaError) as err:
        keras_multi_gpu.table_record({**row, "variable_update": "ring"}, where, source)
    assert str(err.value) == f"{where}: column 'variable_update': unknown 'ring'"


def test_rows_that_are_no_run_or_a_failed_one(rows, source):
    # measurements.csv:2, a median over TensorFlow's page (a skipped table); :115, the N/A cell of measurements.md:355
    assert keras_multi_gpu.table_record(rows[2][1], rows[2][0], source) is None
    assert keras_multi_gpu.table_record(rows[115][1], rows[115][0], source) is None
    # :104, measurements.md:352 prints 'error' for kuza55 on 6 GPUs, PS on the CPU
    where, row = rows[104]
    rec = keras_multi_gpu.table_record(row, where, source)
    assert rec.status == "FAILED" and rec.metrics == {}
    assert rec.tags["failure_reason"] == "the table prints 'error' (measurements.md:352)"
    assert not {"printed_images_per_sec", "printed_speedup", "printed_efficiency_pct"} & set(rec.tags)


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"machine": "8gforce"}, "column 'machine': unknown '8gforce' (known: 7gforce, az-2x-m60, az-4x-m60)"),
        ({"tool": "caffe"}, "column 'tool': unknown 'caffe'"),
        ({"status": "crashed"}, "column 'status': unknown 'crashed' (error, N/A or empty)"),
        ({"gpus": "two"}, "column 'gpus': 'two' is not a number"),
        ({"batch": "32.5"}, "column 'batch': '32.5' is not a number"),
        ({"speedup": "1.68x"}, "column 'speedup': '1.68x' is not a number"),
    ],
)
def test_row_refusals(rows, source, changes, said):
    where, row = rows[78]
    with pytest.raises(SchemaError) as err:
        keras_multi_gpu.table_record({**row, **changes}, where, source)
    assert str(err.value) == f"{where}: {said}"


def test_the_tags_of_the_log_runs(source):
    raw_dir("keras-multi-gpu-2017")  # skips, saying why, without the mirror
    files, fetched = fetched_raw_files(FOLDER, source)
    runs = keras_multi_gpu.log_records(files, fetched)
    assert len(runs) == 46 and all(r.tags["record"] == "log" and r.tags["published_table"] == "raw log" for r in runs)
    trace = [r for r in runs if r.tags["log_file"] == TRACE]
    # the trace's 6 runs: PS on a GPU (1 and 2 GPUs, :29-54, :83-108), on the CPU (--local_parameter_device cpu,
    # :110), replicated with and without NCCL (:164, :219), independent (:274); each 'Data format: NCHW' (:34, :88,
    # :142, :196, :251, :306)
    assert [(r.key, r.tags["method"], r.tags["parameter_server"], r.tags["data_format"]) for r in trace] == [
        (f"log:{TRACE}#{n}", "tf_cnn_benchmarks", ps, "NCHW")
        for n, ps in enumerate(["gpu", "gpu", "cpu", "", "", ""], start=1)
    ]  # fmt: skip
    keras = Counter(
        (r.tags["method"], r.tags["parameter_server"], r.tags["data_format"]) for r in runs if r not in trace
    )
    assert keras == {("kuza55", "gpu", "NHWC"): 12, ("avolkov1", "gpu", "NHWC"): 12, ("kuza55", "cpu", "NHWC"): 8,
                     ("avolkov1", "cpu", "NHWC"): 8}  # fmt: skip
    assert {r.params["platform"] for r in trace} == {"az-2x-m60"}
    missing = {k: v for k, v in files.items() if k != TRACE}
    with pytest.raises(SchemaError) as err:
        keras_multi_gpu.log_records(missing, fetched)
    assert str(err.value) == f"{FOLDER}/source.yaml: raw_files does not list {TRACE}"


def test_data_format_lines_must_match_the_runs(tmp_path):
    trace = raw_dir("keras-multi-gpu-2017") / TRACE
    assert keras_multi_gpu._data_formats(trace, 6) == ["NCHW"] * 6
    with pytest.raises(SchemaError) as err:
        keras_multi_gpu._data_formats(trace, 7)
    assert str(err.value) == f"{trace}: 6 'Data format:' lines for 7 runs"


def test_a_row_of_an_unknown_model(rows, source):
    where, row = rows[78]
    with pytest.raises(SchemaError) as err:
        keras_multi_gpu.table_record({**row, "model": "lenet"}, where, source)
    assert str(err.value).startswith(f"{where}: unknown model name 'lenet' (known: ")
