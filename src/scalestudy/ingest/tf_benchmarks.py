"""tf-benchmarks-2017: every row of the TensorFlow benchmark tables (May 2017) -> one run."""
from __future__ import annotations

from pathlib import Path

from ..schema import RunRecord, SchemaError, canonical_model
from . import csv_rows, number, published_tags, read_source

COLUMNS = ["platform", "gpu", "model", "data", "batch_per_gpu", "gpus", "images_per_sec", "variable_update"]


def read(folder: Path) -> list[RunRecord]:
    source = read_source(folder)
    records = []
    for where, row in csv_rows(folder / "tf_benchmarks_2017.csv", COLUMNS):
        model = canonical_model(row["model"], where)
        if row["data"] not in ("synthetic", "real"):
            raise SchemaError(
                f"{where}: column 'data': {row['data']!r} is neither synthetic nor real")
        params = {
            "model": model, "framework": "tensorflow", "api": "tf_cnn_benchmarks",
            "workers": number(row["gpus"], where, "gpus", int),
            "device": row["gpu"], "data": row["data"],
            "batch_per_worker": number(row["batch_per_gpu"], where, "batch_per_gpu", int),
            "platform": row["platform"], "variable_update": row["variable_update"],
        }
        key = "/".join(str(params[k]) for k in ("platform", "device", "model", "data", "batch_per_worker", "workers"))
        records.append(RunRecord(
            experiment=source["experiment"], key=key, params=params, where=where,
            metrics={"throughput_total": number(row["images_per_sec"], where, "images_per_sec")},
            tags=published_tags(source, where.split("/")[-1]),
        ))
    return records
