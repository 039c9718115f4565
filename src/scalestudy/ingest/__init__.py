"""Importers: published measurements -> RunRecords -> MLflow (through tracking.sync_experiment).

Each importer is a pure parser `read(folder) -> list[RunRecord]` over one folder of
experiments/reference/; it raises SchemaError naming file and line on bad input. Nothing is
written until every record of a dataset has parsed and validated.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import yaml

from ..schema import NUMERIC_PARAMS, RunRecord, SchemaError, canonical_model

REFERENCE_DIR = Path("experiments") / "reference"


def read_source(folder: Path) -> dict[str, str]:
    """The dataset's source.yaml: experiment name, citation, url."""
    path = folder / "source.yaml"
    try:
        source = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SchemaError(f"{path}: missing (every reference dataset names its source there)") from None
    for key in ("experiment", "citation"):
        if not source or not source.get(key):
            raise SchemaError(f"{path}: key {key!r} is missing or empty")
    return source


def published_tags(source: dict[str, str], where: str) -> dict[str, str]:
    return {
        "source": "published",
        "citation": source["citation"],
        "dataset": source["experiment"],
        "source_url": source.get("url") or "",
        "source_line": where,
    }


def csv_rows(path: Path, columns: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """Rows of a CSV file with exactly `columns`, each with its 'file:line' for error messages."""
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != columns:
            raise SchemaError(f"{path}:1: header {header} is not {columns}")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if not row:
                continue
            if len(row) != len(columns):
                raise SchemaError(f"{where}: {len(row)} fields, expected {len(columns)} ({','.join(columns)})")
            yield where, dict(zip(columns, (cell.strip() for cell in row)))


def number(text: str, where: str, column: str, kind: Callable = float):
    try:
        value = kind(text)
    except ValueError:
        raise SchemaError(f"{where}: column {column!r}: {text!r} is not a number") from None
    if value != value or value < 0:
        raise SchemaError(f"{where}: column {column!r}: {text!r} is not a valid measurement")
    return value


def csv_params(row: dict[str, str], where: str, columns: Mapping[str, str], **fixed) -> dict[str, object]:
    """A run's params from a CSV row: `columns` maps a param to its CSV column; the model is made canonical,
    the numeric params (schema.NUMERIC_PARAMS) read as whole numbers; `fixed` params are the same for every row."""
    params: dict[str, object] = dict(fixed)
    for param, column in columns.items():
        text = row[column]
        if param == "model":
            params[param] = canonical_model(text, where)
        elif param in NUMERIC_PARAMS:
            params[param] = number(text, where, column, int)
        else:
            params[param] = text
    return params


def registry() -> dict[str, Callable[[Path], list[RunRecord]]]:
    """Dataset folder name -> its parser."""
    from . import hacksa, horovod_docs, keras_backends, malik, tf_benchmarks

    return {
        "tf-benchmarks-2017": tf_benchmarks.read,
        "keras-backends-2017": keras_backends.read,
        "hacksa-2019": hacksa.read,
        "horovod-docs": horovod_docs.read,
        "malik-2018": malik.read,
    }
