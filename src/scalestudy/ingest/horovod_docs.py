"""horovod-docs: Horovod's published 512-GPU scaling efficiencies -> one run per model."""

from __future__ import annotations

from pathlib import Path

from ..schema import RunRecord, SchemaError
from . import csv_params, csv_rows, number, published_tags, read_source

COLUMNS = ["model", "workers", "efficiency_published", "device", "platform", "batch_per_worker", "data"]


def read(folder: Path) -> list[RunRecord]:
    source = read_source(folder)
    records = []
    for where, row in csv_rows(folder / "claims.csv", COLUMNS):
        efficiency = number(row["efficiency_published"], where, "efficiency_published")
        if not 0 < efficiency <= 1:
            raise SchemaError(f"{where}: column 'efficiency_published': {efficiency} is not a fraction in (0, 1]")
        params = csv_params(
            row,
            where,
            {c: c for c in COLUMNS if c != "efficiency_published"},
            framework="tensorflow",
            api="tf_cnn_benchmarks",
            variable_update="horovod",
        )
        records.append(
            RunRecord(
                experiment=source["experiment"],
                key=f"{params['model']}/{params['workers']}",
                params=params,
                where=where,
                metrics={"efficiency_published": efficiency},
                tags=published_tags(source, where),
            )
        )
    return records
