"""keras-multi-gpu-2017: seed 002's measurements (rossumai/keras-multi-gpu) -> runs of two kinds, told apart by
the tag `record`:

- `record=log`: every run of the three raw logs (third-party, fetched and verified by ingest/fetch.py), read by
  the log parsers (ingest/logs: tf_cnn_text for the tf_cnn_benchmarks trace, keras_mgpu for the Keras logs).
  The logs do not name their machine: the file does (LOG_PLATFORMS). 46 runs, 4 of them FAILED.
- `record=table`: every row of our transcription of the write-up's tables (measurements.csv) that is one
  measurement of one of the study's models on one machine. The tags keep the printed text of each value
  (`printed_images_per_sec`, `printed_speedup`, `printed_efficiency_pct`: the cross-check compares to the
  printed precision) and the line of measurements.md it is printed on (`published_line`). A cell printed
  `error` is a FAILED run; rows that are not such a measurement are left out (TABLE_SKIPPED says why).

Both kinds carry `method` (tf_cnn_benchmarks, kuza55, avolkov1), `parameter_server` (cpu, gpu or empty where
not stated) and `published_table` (the table's name, or `raw log`), so one run of each kind can be paired.
"""

from __future__ import annotations

from pathlib import Path

from ..schema import NOT_STATED, RunRecord, SchemaError, canonical_model
from . import csv_rows, fetched_raw_files, number, published_tags, read_source, read_text
from .logs import LogOptions, keras_mgpu, tf_cnn_text

FILE = "measurements.csv"
COLUMNS = [
    "table", "machine", "tool", "method", "variable_update", "parameter_server", "nccl", "model", "data",
    "data_format", "gpus", "gpu_ids", "batch", "images_per_sec", "speedup", "efficiency_pct", "other_value",
    "other_name", "status", "source_line", "efficiency_line", "note",
]  # fmt: skip
# The raw logs: (platform, parser). The tf_cnn_benchmarks trace's name spells the machine az-2xm-60.
LOG_PLATFORMS = {
    "benchmark_batch_inception3_az-2xm-60.txt": ("az-2x-m60", tf_cnn_text),
    "benchmark_inception3_resnet50_results_7gforce.txt": ("7gforce", keras_mgpu),
    "benchmark_inception3_resnet50_results_az-2x-m60.txt": ("az-2x-m60", keras_mgpu),
}
# The GPU of each machine, as the logs' device lines name it (log parsers: GeForce GTX 1070 -> GTX 1070).
DEVICES = {"7gforce": "GTX 1070", "az-2x-m60": "M60", "az-4x-m60": "M60"}
# Tables whose rows are not one measurement of a study model on one machine (README: the tables).
TABLE_SKIPPED = {
    "tf-official-medians": "medians over TensorFlow's own benchmark page, not a run",
    "tf-cnn-cifar10": "CIFAR-10 ResNet/DenseNet variants and AlexNet speedups without images/s",
    "kuza55-mlp": "an MLP, speedup of epoch time",
    "avolkov1-cifar10": "a CIFAR-10 convnet, speedups only",
    "az-4x-m60-cifar10": "CIFAR-10 models ('resnet60' as printed, avolkov1's convnet)",
    "gtx1070-vs-m60": "a ratio between two machines",
}
DATA = {"imagenet-synth": "synthetic"}
PRINTED = {
    "images_per_sec": "printed_images_per_sec",
    "speedup": "printed_speedup",
    "efficiency_pct": "printed_efficiency_pct",
}
# The columns that tell one table row from another (the run key).
KEY_COLUMNS = ("table", "source_line", "machine", "tool", "method", "parameter_server", "gpus", "gpu_ids",
               "data_format")  # fmt: skip


def _variable_update(row: dict[str, str], where: str) -> str | None:
    """variable_update spelt as the log parsers spell it, so a table row and its log run read the same."""
    ps = row["parameter_server"].lower()
    if row["tool"] == "keras":
        return f"{row['method']} (ps {ps})" if ps else None
    update = row["variable_update"]
    if update == "parameter_server":
        return f"parameter_server ({ps})"
    if update == "replicated":
        return "replicated (nccl)" if row["nccl"] == "TRUE" else f"replicated ({ps or 'gpu'}, no nccl)"
    if update in ("independent", ""):
        return update or None
    raise SchemaError(f"{where}: column 'variable_update': unknown {update!r}")


def table_record(row: dict[str, str], where: str, source: dict) -> RunRecord | None:
    """One measurements.csv row -> a run, or None for a row that is not one (a skipped table, 'N/A')."""
    if row["table"] in TABLE_SKIPPED or row["status"] == "N/A":
        return None
    if row["machine"] not in DEVICES:
        raise SchemaError(f"{where}: column 'machine': unknown {row['machine']!r} (known: {', '.join(DEVICES)})")
    if row["tool"] not in ("keras", "tf_cnn_benchmarks"):
        raise SchemaError(f"{where}: column 'tool': unknown {row['tool']!r}")
    gpus = number(row["gpus"], where, "gpus", int)
    batch_per_worker: object = NOT_STATED
    if row["batch"]:  # the Keras benchmark's batch is global, sliced over the GPUs
        batch = number(row["batch"], where, "batch", int)
        batch_per_worker = batch // gpus if batch % gpus == 0 else NOT_STATED
    params: dict[str, object] = {
        "model": canonical_model(row["model"], where),
        "framework": "tensorflow",
        "api": row["tool"] if row["tool"] == "tf_cnn_benchmarks" else "keras",
        "workers": gpus,
        "device": DEVICES[row["machine"]],
        "data": DATA.get(row["data"], row["data"]),
        "batch_per_worker": batch_per_worker,
        "platform": row["machine"],
    }
    update = _variable_update(row, where)
    if update:
        params["variable_update"] = update
    tags = published_tags(source, where)
    tags.update(
        record="table",
        published_table=row["table"],
        published_line=f"measurements.md:{row['source_line']}",
        method=row["method"] or row["tool"],
        parameter_server=row["parameter_server"].lower(),
    )
    for column in ("data_format", "gpu_ids", "batch", "efficiency_line", "note"):
        if row[column]:
            tags[{"batch": "batch_global", "efficiency_line": "published_efficiency_line"}.get(column, column)] = (
                f"measurements.md:{row[column]}" if column == "efficiency_line" else row[column]
            )
    if row["other_value"]:
        tags["printed_other"] = f"{row['other_value']} ({row['other_name']})"
    metrics, status = {}, "FINISHED"
    for column, tag in PRINTED.items():
        if row[column]:
            value = number(row[column], where, column)
            tags[tag] = row[column]
            if column == "images_per_sec":
                metrics["throughput_total"] = value
    if row["status"] == "error":
        status = "FAILED"
        tags["failure_reason"] = f"the table prints 'error' (measurements.md:{row['source_line']})"
    elif row["status"]:
        raise SchemaError(f"{where}: column 'status': unknown {row['status']!r} (error, N/A or empty)")
    key = "table:" + "/".join(row[c] or "-" for c in KEY_COLUMNS)
    return RunRecord(source["experiment"], key, params, metrics, tags, status=status, where=where)


def log_records(files: dict[str, Path], source: dict) -> list[RunRecord]:
    """Every run of the raw logs, tagged record=log."""
    records = []
    for name, (platform, parser) in LOG_PLATFORMS.items():
        if name not in files:
            raise SchemaError(f"{source['folder']}/source.yaml: raw_files does not list {name}")
        path = files[name]
        options = LogOptions(source=source, platform=platform, key_prefix={path: f"log:{name}"})
        runs = parser.parse(path, options)
        keras = parser is keras_mgpu
        # tf_cnn_benchmarks prints its data format in each run's header; the Keras benchmark does not print one:
        # it runs Keras' default, channels_last (NHWC), as the write-up says (measurements.md:403).
        formats = ["NHWC"] * len(runs) if keras else _data_formats(path, len(runs))
        for rec, data_format in zip(runs, formats):
            rec.tags.update(
                record="log",
                published_table="raw log",
                method=rec.tags.get("parallelization_method", "") if keras else "tf_cnn_benchmarks",
                parameter_server=rec.tags.get("parameter_server", "") if keras else "",
                data_format=data_format,
            )
            if not keras and str(rec.params.get("variable_update", "")).startswith("parameter_server"):
                rec.tags["parameter_server"] = rec.tags.get("local_parameter_device", "")
            records.append(rec)
    return records


def _data_formats(path: Path, runs: int) -> list[str]:
    """The `Data format:` of each tf_cnn_benchmarks run of a trace, in order (one per run's header)."""
    found = [line.split(":", 1)[1].strip() for line in read_text(path).splitlines() if line.startswith("Data format:")]
    if len(found) != runs:
        raise SchemaError(f"{path}: {len(found)} 'Data format:' lines for {runs} runs")
    return found


def read(folder: Path) -> list[RunRecord]:
    source = read_source(folder)
    files, source = fetched_raw_files(folder, source)
    records = log_records(files, source)
    for where, row in csv_rows(folder / FILE, COLUMNS):
        record = table_record(row, where, source)
        if record is not None:
            records.append(record)
    return records
