"""Importers: published measurements -> RunRecords -> MLflow (through store.sync_experiment).

Each importer is a pure parser `read(folder) -> list[RunRecord]` over one folder of
experiments/reference/; it raises SchemaError naming file and line on bad input. Nothing is
written until every record of a dataset has parsed and validated.
"""

from __future__ import annotations

import csv
import io
import math
import pickle
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path

import yaml

from ..schema import DESCRIPTION_TAG, NUMERIC_PARAMS, RunRecord, SchemaError, canonical_model

REFERENCE_DIR = Path("experiments") / "reference"  # in the checkout, as run descriptions name it


def reference_dir() -> Path:
    """The reference datasets: experiments/reference under the working folder (a checkout's root, as the Makefile
    runs), else in the checkout this package is in (a command run from another folder)."""
    here = Path.cwd() / REFERENCE_DIR
    return REFERENCE_DIR if here.is_dir() else Path(__file__).resolve().parents[3] / REFERENCE_DIR


def read_text(path: Path) -> str:
    """A file's text, which must be UTF-8 (or ASCII): a binary or UTF-16 file fails naming the file and line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SchemaError(f"{path}: missing") from None
    except OSError as err:
        raise SchemaError(f"{path}: cannot be read: {err.strerror}") from None
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise SchemaError(f"{path}:{line}: a NUL byte: a binary or UTF-16 file, not UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SchemaError(f"{path}:{line}: not UTF-8 text (byte {data[err.start]:#04x})") from None


def _parse_yaml(text: str) -> bytes:
    """A YAML text parsed (libyaml's loader where built in), pickled."""
    return pickle.dumps(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


# Kept by text: a source.yaml may list hundreds of raw files (mlperf-training-resnet: 60 ms to parse) and is read by
# every command that looks for a dataset's experiment. (Not a decorator: mutmut mutates undecorated functions only.)
_parsed_yaml = lru_cache(maxsize=16)(_parse_yaml)


def read_source(folder: Path) -> dict[str, str]:
    """The dataset's source.yaml (experiment name, citation, url, what one run is), plus `folder` (where it was
    read) and `dataset_dir` (where the dataset lives in the repository, as descriptions name it)."""
    path = folder / "source.yaml"
    if not path.is_file():
        raise SchemaError(f"{path}: missing (every reference dataset names its source there)")
    try:
        source = pickle.loads(_parsed_yaml(read_text(path)))  # a copy of its own for each caller
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SchemaError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(source, dict):
        raise SchemaError(f"{path}:1: expected 'key: value' lines (experiment, citation, url), got {source!r:.60}")
    for key in ("experiment", "citation", "one_run"):
        if not isinstance(source.get(key), str) or not source[key].strip():
            raise SchemaError(f"{path}: key {key!r} is missing or not a text")
    return {**source, "folder": str(folder), "dataset_dir": (REFERENCE_DIR / folder.name).as_posix()}


def fetched_raw_files(folder: Path, source: dict) -> tuple[dict[str, Path], dict]:
    """The dataset's third-party raw files (source.yaml `raw_files`), fetched into the cache and verified
    (ingest/fetch.py): ({path: file}, the source with `raw_dir`, the dataset's folder in the cache)."""
    from .fetch import cache_dir, fetch_raw_files, raw_files

    files = fetch_raw_files(folder.name, raw_files(source, folder), source.get("mirror_folder"))
    # Where each was read -> its path in the dataset: a cache that cannot be written gives the mirror's copy,
    # which must name the same path (a run's identity does not depend on where its file was read from).
    read_at = {str(file.resolve()): path for path, file in files.items()}
    return files, {**source, "raw_dir": str(cache_dir() / folder.name), "raw_read_at": read_at}


def published_tags(source: dict[str, str], where: str) -> dict[str, str]:
    """The tags of every published run; `where` is the file:line the run was read from. The run's description
    names that file as it lies in the repository (e.g. experiments/reference/hacksa-2019/logs/1.err:23),
    whichever copy of the folder was read, so the run's content hash does not depend on the copy."""
    file, _, line = where.rpartition(":")
    path = Path(file)
    fetched = (source.get("raw_read_at") or {}).get(str(path.resolve()))  # a raw file, from the cache or mirror
    shown = f"{source['dataset_dir']}/{fetched}" if fetched else path.name  # path.name: outside the dataset
    for root in () if fetched else (source["folder"], source.get("raw_dir")):
        try:
            shown = f"{source['dataset_dir']}/{path.resolve().relative_to(Path(root).resolve()).as_posix()}"
            break
        except (TypeError, ValueError):
            continue
    return {
        "source": "published",
        "citation": source["citation"],
        "dataset": source["experiment"],
        "source_url": source.get("url") or "",
        "source_line": f"{path.name}:{line}",
        DESCRIPTION_TAG: (
            f"Published measurement, read from `{shown}` line {line} by "
            f"`python -m scalestudy.ingest {Path(source['folder']).name}`.\n\nSource: {source['citation']}"
        ),
    }


def experiment_description(source: dict[str, str], n_runs: int, users: list[str]) -> str:
    """The experiment's description in MLflow's UI (Markdown): source, citation, what one run is, who uses it."""
    link = f" ({source['url']})" if source.get("url") else ""
    used = ", ".join(users) if users else "no figure or table yet"
    return (
        f"Published measurements: {source['citation']}{link}.\n\n"
        f"- One run: {' '.join(str(source['one_run']).split())}; {n_runs} runs. Each run's description names the "
        f"file and line it was read from.\n"
        f"- Data: `{source['dataset_dir']}/` (its README.md says how it is read), imported by "
        f"`python -m scalestudy.ingest {Path(source['folder']).name}` (tag source=published).\n"
        f"- Used by: {used}."
    )


def csv_rows(path: Path, columns: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """Rows of a CSV file with exactly `columns`, each with its 'file:line' for error messages."""
    with io.StringIO(read_text(path), newline="") as handle:
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
    if not math.isfinite(value) or value < 0:
        raise SchemaError(f"{where}: column {column!r}: {text!r} is not a finite measurement >= 0")
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
    from . import (
        hacksa,
        horovod_docs,
        horovod_timelines,
        keras_backends,
        keras_multi_gpu,
        malik,
        mlperf_training,
        tf_benchmarks,
    )

    return {
        "tf-benchmarks-2017": tf_benchmarks.read,
        "keras-backends-2017": keras_backends.read,
        "hacksa-2019": hacksa.read,
        "horovod-docs": horovod_docs.read,
        "malik-2018": malik.read,
        "keras-multi-gpu-2017": keras_multi_gpu.read,
        "horovod-timelines-2019": horovod_timelines.read,
        "mlperf-training-resnet": mlperf_training.read,
    }
