"""malik-2018: seed 004's claim of "almost linear" scaling to 256 GPUs -> one run per model, no metric."""

from __future__ import annotations

from pathlib import Path

from ..schema import NOT_STATED, RunRecord, SchemaError
from . import csv_params, csv_rows, number, published_tags, read_source

COLUMNS = ["model", "workers", "device", "data", "batch_per_worker", "platform", "claim"]


def read(folder: Path) -> list[RunRecord]:
    source = read_source(folder)
    records = []
    for where, row in csv_rows(folder / "claims.csv", COLUMNS):
        if not row["claim"]:
            raise SchemaError(f"{where}: column 'claim' is empty (the claim is what this dataset records)")
        batch = row["batch_per_worker"]
        if batch != NOT_STATED:
            number(batch, where, "batch_per_worker", int)
        params = csv_params(
            row,
            where,
            {c: c for c in COLUMNS if c not in ("claim", "batch_per_worker")},
            framework="tensorflow",
            api="horovod",
            batch_per_worker=batch,
        )
        records.append(
            RunRecord(
                experiment=source["experiment"],
                key=f"{params['model']}/{params['workers']}",
                params=params,
                where=where,
                tags={**published_tags(source, where), "claim": row["claim"]},
            )
        )
    return records
