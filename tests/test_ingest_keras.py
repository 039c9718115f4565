"""keras-backends-2017 importer: the tables of profiling_results.md, and malformed tables failing with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REFERENCE, dataset_copy

from scalestudy.ingest import keras_backends
from scalestudy.schema import METRICS, SchemaError

FILE = "profiling_results.md"


@pytest.fixture(scope="module")
def runs():
    return {rec.key: rec for rec in keras_backends.read(REFERENCE / "keras-backends-2017")}


@pytest.fixture
def copy(tmp_path):
    return dataset_copy(tmp_path, "keras-backends-2017")


def edit_line(folder: Path, line: int, old: str, new: str) -> None:
    path = folder / FILE
    lines = path.read_text().splitlines(keepends=True)
    assert old in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("".join(lines))


def test_counts_and_keys(runs):
    assert len(runs) == 29
    by_table: dict[str, list[int]] = {}
    for rec in runs.values():
        rec.validate()
        by_table.setdefault(rec.key.rsplit("/", 1)[0], []).append(rec.params["workers"])
    assert by_table == {
        "resnet50/plain/mxnet": [1, 2, 4, 8, 16],
        "resnet50/reduce-randomization/mxnet": [1, 2, 4, 8, 16],
        "resnet50/reduce-randomization/tensorflow": [1, 2, 4, 8, 16],
        "inception3/plain/mxnet": [1, 2, 4, 8],
        "inception3/reduce-randomization/mxnet": [1, 2, 4, 8, 16],
        "inception3/reduce-randomization/tensorflow": [1, 2, 4, 8, 16],
    }


def test_params(runs):
    for key, rec in runs.items():
        model, protocol, framework, workers = key.split("/")
        p = rec.params
        assert (p["model"], p["protocol"], p["framework"], str(p["workers"])) == (model, protocol, framework, workers)
        assert p["api"] == "keras-1.2.2" and p["device"] == "K80" and p["batch_per_worker"] == 32
        assert set(rec.metrics) <= set(METRICS)
        if model == "resnet50":
            assert p["platform"] == "aws-p2.16xlarge" and p["data"] == "cifar10"
            assert p["epochs"] == (10 if protocol == "plain" else 100)
            assert "batch_note" not in rec.tags
        else:
            assert p["platform"] == "aws-p2.8xlarge" and p["data"] == "cifar10-299"
            assert p["epochs"] == (5 if protocol == "plain" else 25)
            assert "per GPU" in rec.tags["batch_note"]  # 'Batchsize - 32' without 'per GPU'
        # the seed is stated only under ResNet50's Reduce Randomization
        if model == "resnet50" and protocol == "reduce-randomization":
            assert p["seed"] == 1337
        else:
            assert "seed" not in p
    assert "platform_note" in runs["inception3/reduce-randomization/tensorflow/16"].tags
    assert "platform_note" not in runs["inception3/reduce-randomization/tensorflow/8"].tags


def test_values_as_published(runs):
    rec = runs["resnet50/reduce-randomization/mxnet/16"]
    assert rec.metrics == {
        "time_total_s": 3040.19,
        "time_per_epoch_s": 304.02,  # 304.02 as published (3040.19 / 100 = 30.40)
        "throughput_total": 1973.56,
        "accuracy_train": 0.94,
        "accuracy_test": 0.77,
        "memory_peak_mb": 15267,
    }
    assert rec.tags["source_line"] == "profiling_results.md:40"
    assert rec.tags["source"] == "published" and rec.tags["citation"]
    assert runs["resnet50/plain/mxnet/1"].metrics["throughput_total"] == 372.82
    assert runs["resnet50/plain/mxnet/1"].tags["source_line"] == "profiling_results.md:26"
    assert runs["resnet50/reduce-randomization/tensorflow/16"].metrics["memory_peak_mb"] == 175088
    rec = runs["inception3/plain/mxnet/8"]  # header cell 'GPU(8)', cells without padding
    assert rec.metrics == {
        "time_total_s": 2839,
        "time_per_epoch_s": 568,
        "accuracy_train": 0.81,
        "accuracy_test": 0.78,
        "memory_peak_mb": 12183,
    }
    assert rec.tags["source_line"] == "profiling_results.md:72"
    assert runs["inception3/reduce-randomization/tensorflow/16"].metrics["time_total_s"] == 78247
    assert runs["inception3/reduce-randomization/tensorflow/1"].tags["source_line"] == "profiling_results.md:94"
    # Inception_v3's tables give no images/s: no throughput logged, never a zero
    assert not any("throughput_total" in r.metrics for k, r in runs.items() if k.startswith("inception3"))


@pytest.mark.parametrize(
    "line, old, new, error",
    [
        (53, "| 122.31  |", "| n/a     |", rf"{FILE}:53: .*'n/a' is not a number"),
        (88, "|519      |", "", rf"{FILE}:88: 5 cells, expected 6"),
        (45, "Training accuracy", "Validation accuracy", rf"{FILE}:45: unknown row 'Validation accuracy'"),
        (49, "#### Tensorflow Backend", "Tensorflow backend:", rf"{FILE}:50: table under no known model / backend"),
        (84, "#### MXNet Backend", "#### CNTK Backend", rf"{FILE}:84: unknown Keras backend 'CNTK'"),
        (72, "GPU(8)", "8 GPUs", rf"{FILE}:72: header cell '8 GPUs' is not 'GPU \(N\)'"),
    ],
    ids=["non-numeric cell", "missing cell", "unknown row", "no backend heading", "unknown backend", "bad header"],
)
def test_malformed_table_names_file_and_line(copy, line, old, new, error):
    edit_line(copy, line, old, new)
    with pytest.raises(SchemaError, match=error):
        keras_backends.read(copy)
