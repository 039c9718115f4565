"""tf-benchmarks-2017: every row of the TensorFlow benchmark tables (May 2017) -> one run."""

from __future__ import annotations

from pathlib import Path

from ..schema import RunRecord, SchemaError
from . import csv_params, csv_rows, number, published_tags, read_source

COLUMNS = ["platform", "gpu", "model", "data", "batch_per_gpu", "gpus", "images_per_sec", "variable_update"]
PARAMS = {
    "model": "model",
    "workers": "gpus",
    "device": "gpu",
    "data": "data",
    "batch_per_worker": "batch_per_gpu",
    "platform": "platform",
    "variable_update": "variable_update",
}  # param: CSV column


def read(folder: Path) -> list[RunRecord]:
    source = read_source(folder)
    records = []
    for where, row in csv_rows(folder / "tf_benchmarks_2017.csv", COLUMNS):
        params = csv_params(row, where, PARAMS, framework="tensorflow", api="tf_cnn_benchmarks")
        if row["data"] not in ("synthetic", "real"):
            raise SchemaError(f"{where}: column 'data': {row['data']!r} is neither synthetic nor real")
        key = "/".join(str(params[k]) for k in ("platform", "device", "model", "data", "batch_per_worker", "workers"))
        records.append(
            RunRecord(
                experiment=source["experiment"],
                key=key,
                params=params,
                where=where,
                metrics={"throughput_total": number(row["images_per_sec"], where, "images_per_sec")},
                tags=published_tags(source, where),
            )
        )
    return records
