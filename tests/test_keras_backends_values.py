"""keras-backends-2017 (ingest/keras_backends.py): every param, metric and tag of all 29 runs, read in-process from
profiling_results.md and checked against the tables as printed (profiling_results.md:line in the comments); then
every refusal, on copies of the file edited in tmp_path, with its whole message."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import REFERENCE

from scalestudy.ingest import keras_backends
from scalestudy.schema import SchemaError

FOLDER = REFERENCE / "keras-backends-2017"
FILE = "profiling_results.md"
ROWS = ["time_total_s", "time_per_epoch_s", "throughput_total", "accuracy_train", "accuracy_test", "memory_peak_mb"]
NO_THROUGHPUT = [r for r in ROWS if r != "throughput_total"]  # Inception_v3's tables print no images/s
# (model, protocol, framework): the table's first line, its GPU counts, its rows as printed (one list per metric)
TABLES = {
    ("resnet50", "plain", "mxnet"): (26, [1, 2, 4, 8, 16], ROWS, [  # :26-33
        [1609.32, 971.94, 514.96, 418.09, 413.66],
        [160.93, 97.19, 51.49, 41.80, 41.36],
        [372.82, 617.32, 1165.12, 1435.06, 1450.43],
        [0.69, 0.69, 0.69, 0.68, 0.54],
        [0.67, 0.52, 0.60, 0.59, 0.42],
        [5086, 5048, 5012, 9786, 15187],
    ]),
    ("resnet50", "reduce-randomization", "mxnet"): (40, [1, 2, 4, 8, 16], ROWS, [  # :40-47
        [15860.5, 9456.02, 4475.55, 3429.55, 3040.19],
        [158.61, 94.56, 44.76, 34.30, 304.02],
        [378.30, 634.52, 1340.62, 1749.50, 1973.56],
        [0.95, 0.95, 0.95, 0.95, 0.94],
        [0.80, 0.75, 0.78, 0.75, 0.77],
        [5091, 5855, 5126, 9826, 15267],
    ]),
    ("resnet50", "reduce-randomization", "tensorflow"): (50, [1, 2, 4, 8, 16], ROWS, [  # :50-57
        [23749.9, 18029.7, 12230.6, 10911.9, 10907.5],
        [237.50, 180.30, 122.31, 109.12, 109.08],
        [252.63, 332.78, 490.57, 549.86, 550.08],
        [0.95, 0.94, 0.90, 0.84, 0.77],
        [0.80, 0.76, 0.76, 0.75, 0.73],
        [10946, 21890, 43778, 87544, 175088],
    ]),
    ("inception3", "plain", "mxnet"): (72, [1, 2, 4, 8], NO_THROUGHPUT, [  # :72-78
        [10738, 5935, 3451, 2839],
        [2147, 1187, 690, 568],
        [0.78, 0.80, 0.81, 0.81],
        [0.73, 0.75, 0.80, 0.78],
        [10319, 9542, 10168, 12183],
    ]),
    ("inception3", "reduce-randomization", "mxnet"): (85, [1, 2, 4, 8, 16], NO_THROUGHPUT, [  # :85-91
        [54609, 29342, 17316, 14170, 12971],
        [2184, 1174, 693, 567, 519],
        [0.99, 0.99, 0.99, 0.99, 0.99],
        [0.83, 0.86, 0.85, 0.87, 0.82],
        [10896, 10961, 11846, 13701, 17628],
    ]),
    ("inception3", "reduce-randomization", "tensorflow"): (94, [1, 2, 4, 8, 16], NO_THROUGHPUT, [  # :94-100
        [121480, 72657, 49758, 44042, 78247],
        [4859, 2906, 1990, 1761, 3130],
        [0.97, 0.97, 0.96, 0.96, 0.96],
        [0.71, 0.81, 0.83, 0.71, 0.79],
        [10946, 21890, 43778, 87544, 175088],
    ]),
}  # fmt: skip
# The setups: ResNet50 :7-9, :20 (10 epochs), its Reduce Randomization :36-37 (seed 1337, 100 epochs);
# Inception_v3 :65-68 (resized to 299x299, a P2.8xlarge, 'Batchsize - 32' without 'per GPU', 5 epochs), :82 (25).
SETUP = {
    "resnet50": {"data": "cifar10", "platform": "aws-p2.16xlarge",
                 "epochs": {"plain": 10, "reduce-randomization": 100}},
    "inception3": {"data": "cifar10-299", "platform": "aws-p2.8xlarge",
                   "epochs": {"plain": 5, "reduce-randomization": 25}},
}  # fmt: skip
BATCH_NOTE = "the setup states 'Batchsize - 32' without 'per GPU'; the per-GPU reading of the ResNet50 setup is assumed"
PUBLISHED = {"source", "citation", "dataset", "source_url", "source_line", "mlflow.note.content"}


def test_every_value_of_every_run():
    runs = {rec.key: rec for rec in keras_backends.read(FOLDER)}
    assert len(runs) == 29
    for (model, protocol, framework), (line, workers, rows, values) in TABLES.items():
        for column, n in enumerate(workers):
            rec = runs.pop(f"{model}/{protocol}/{framework}/{n}")
            setup = SETUP[model]
            params = {"model": model, "framework": framework, "api": "keras-1.2.2", "workers": n, "device": "K80",
                      "data": setup["data"], "batch_per_worker": 32, "platform": setup["platform"],
                      "epochs": setup["epochs"][protocol], "protocol": protocol}  # fmt: skip
            if (model, protocol) == ("resnet50", "reduce-randomization"):
                params["seed"] = 1337
            assert rec.params == params, rec.key
            assert all(type(rec.params[k]) is int for k in ("workers", "epochs", "batch_per_worker")), rec.key
            assert type(rec.params.get("seed", 0)) is int  # as text in MLflow: '1337', never '1337.0'
            assert rec.metrics == {name: row[column] for name, row in zip(rows, values)}, rec.key
            assert rec.experiment == "keras-backends-2017" and rec.status == "FINISHED"
            assert rec.where == f"{FOLDER / FILE}:{line}" and rec.tags["source_line"] == f"{FILE}:{line}"
            tags = {k: v for k, v in rec.tags.items() if k not in PUBLISHED}
            expected = {"batch_note": BATCH_NOTE} if model == "inception3" else {}
            if model == "inception3" and n == 16:  # :96's 16-GPU column, on the P2.8xlarge the setup names (:66)
                expected["platform_note"] = (
                    "16 GPUs, but the setup names a p2.8xlarge (8 GPUs); the platform is imported as the setup names it"
                )
            assert tags == expected, rec.key
    assert runs == {}


@pytest.fixture
def folder(tmp_path):
    """A copy of the dataset folder (source.yaml, profiling_results.md), to edit."""
    dest = tmp_path / "keras-backends-2017"
    dest.mkdir()
    for name in ("source.yaml", FILE):
        shutil.copyfile(FOLDER / name, dest / name)
    return dest


def edit(folder: Path, edits: dict[int, str | list[str] | None]) -> Path:
    """profiling_results.md with line N replaced by edits[N] (a text, lines, or None: dropped)."""
    path = folder / FILE
    out: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        new = edits.get(number, line)
        out.extend([] if new is None else [new] if isinstance(new, str) else new)
    path.write_text("\n".join(out) + "\n")
    return path


def refusal(folder: Path) -> str:
    with pytest.raises(SchemaError) as err:
        keras_backends.read(folder)
    return str(err.value)


SEPARATOR = "|-------------------------------|:-------:|:-------:|:-------:|:-------:|:--------:|"  # :27
CASES = [
    # (edits, the line named, the message after 'profiling_results.md:N: ')
    ({7: "* `Dataset` - [MNIST](http://yann.lecun.com/exdb/mnist/)."}, 7,
     "dataset '[MNIST](http://yann.lecun.com/exdb/mnist/).' is not CIFAR10"),
    ({65: "* `Dataset` - [CIFAR-10 resized to 299 x 300](https://www.cs.toronto.edu/~kriz/cifar.html)"}, 65,
     "dataset resized to a non-square 299x300"),
    ({8: "* `Machine` - [AWS EC2 G3.16xlarge](https://aws.amazon.com/ec2/instance-types/g3/)."}, 8,
     "machine '[AWS EC2 G3.16xlarge](https://aws.amazon.com/ec2/instance-types/g3/).' is not an AWS EC2 instance of "
     "a known family (p2)"),
    ({8: "* `Machine` - a P2.16xlarge"}, 8,
     "machine 'a P2.16xlarge' is not an AWS EC2 instance of a known family (p2)"),
    ({9: "* `Batchsize` - thirty-two per GPU."}, 9, "batch size 'thirty-two per GPU.' is not a number"),
    ({20: "* `Epochs` - ten"}, 20, "column 'Epochs': 'ten' is not a number"),
    ({36: "* `random seed` - -1"}, 36, "column 'random seed': '-1' is not a finite measurement >= 0"),
    ({20: "* `Optimizer` - SGD"}, 20, "unknown setup item 'optimizer'"),
    ({3: "## LeNet"}, 3, "unknown model name 'LeNet' (known: "),
    ({3: None}, 4, "section 'Setup' comes before any '## <model>' heading"),
    ({35: "### Results"}, 35, "unknown section 'Results'"),
    ({24: "### Keras 1.2.2 with CNTK backend"}, 24, "unknown Keras backend 'CNTK' (known: mxnet, tensorflow)"),
    ({84: "#### CNTK Backend"}, 84, "unknown Keras backend 'CNTK' (known: mxnet, tensorflow)"),
    ({84: "#### MXNet"}, 84,
     "unknown heading 'MXNet' (expected '#### <MXNet|Tensorflow> Backend' under a protocol section)"),
    ({63: "### Setup", 64: "#### MXNet Backend"}, 64,
     "unknown heading 'MXNet Backend' (expected '#### <MXNet|Tensorflow> Backend' under a protocol section)"),
    ({39: None}, 39,  # :40's table right under '### Reduce Randomization', with no '#### MXNet Backend'
     "table under no known model / backend heading (expected '### Keras 1.2.2 with MXNet backend' or "
     "'#### <MXNet|Tensorflow> Backend')"),
    ({20: "* `Epochs` - 10X"}, 20, "column 'Epochs': '10X' is not a number"),
    ({36: "* `random seed` - 1337X"}, 36, "column 'random seed': '1337X' is not a number"),
    ({49: "Tensorflow backend:"}, 50,
     "table under no known model / backend heading (expected '### Keras 1.2.2 with MXNet backend' or "
     "'#### <MXNet|Tensorflow> Backend')"),
    ({20: None}, 25, "the setup of resnet50 does not state epochs"),  # a line dropped: the table starts at :25
    ({9: None}, 25, "the setup of resnet50 does not state batch_per_worker"),
    ({26: "| Metric | GPU (1) | GPU (2) | GPU (4) | GPU (8) | GPU (16) |"}, 26,
     "the header's first cell should be empty, not 'Metric'"),
    ({26: "| | GPU (1) | GPU (2) | GPU (4) | GPU (8) | GPU (8) |"}, 26, "header repeats a GPU count: [1, 2, 4, 8, 8]"),
    ({27: None}, 27, "the table header is not followed by a '|---|' row"),
    ({27: SEPARATOR + ":--:|"}, 27, "7 cells in the separator row, expected 6"),
    ({29: "| Training time (secs)          | 1 | 2 | 3 | 4 | 5 |"}, 29, "row 'Training time (secs)' repeats"),
    ({31: "| Training accuracy             | 69      | 0.69    | 0.69    | 0.68    | 0.54     |"}, 31,
     "Training accuracy 69.0 is not a fraction in 0..1"),
    ({32: "| Test accuracy                 | 0.67    | 0.52    | 0.60    | 0.59    | 1.01     |"}, 32,
     "Test accuracy 1.01 is not a fraction in 0..1"),
    ({88: "| Average time per epoch (secs) |2184     |1174     |693      |567      |"}, 88,
     "5 cells, expected 6 (label + 5 GPU counts)"),
    ({53: "| Average time per epoch (secs) | 237.50  | 180.30  | n/a     | 109.12  | 109.08   |"}, 53,
     "column 'Average time per epoch (secs) / GPU (4)': 'n/a' is not a number"),
    ({45: "| Validation accuracy           | 0.95    | 0.95    | 0.95    | 0.95    | 0.94     |"}, 45,
     "unknown row 'Validation accuracy' (known: Training time (secs), Average time per epoch (secs), Images "
     "processed per sec, Training accuracy, Test accuracy, Maximum Memory Consumption)"),
    ({84: "#### MXNet Backend", 93: "#### MXNet Backend"}, 94,
     "a second table for 'inception3/reduce-randomization/mxnet/1' (the first: {folder}/profiling_results.md:85)"),
]  # fmt: skip


@pytest.mark.parametrize("edits, line, said", CASES, ids=[said[:40] for _, _, said in CASES])
def test_refusals(folder, edits, line, said):
    path = edit(folder, edits)
    message = refusal(folder)
    said = said.format(folder=folder)
    if said.endswith("(known: "):
        assert message.startswith(f"{path}:{line}: {said}")
    else:
        assert message == f"{path}:{line}: {said}"


def test_a_file_without_tables(folder):
    path = edit(folder, {n: None for n in range(24, 101)})  # the ResNet50 setup is all that is left
    assert refusal(folder) == f"{path}:1: no profiling table found"


def test_setup_readings(folder):
    # 'Batchsize - 32 per GPU' (ResNet50, :9) needs no note; 'CIFAR-10' (dashed) is CIFAR10 too; a title (# ...) and
    # a deeper heading (##### ...) change nothing; the table right under '### Keras 1.2.2 with MXNet backend' is
    # MXNet's; a bullet after a table (:34) is no setup item
    # (a bullet under a heading that takes none, :25); a row written without padding (:28) reads the same; the
    # resize said with a capital (:65); a seed and epochs printed with a full stop (:36, :68); an accuracy of 1 (:31)
    lines = (folder / FILE).read_text().splitlines()
    indented = {n: "  " + lines[n - 1] for n in range(40, 48)}  # :40-47's table indented (Markdown allows 3)
    edit(folder, {
        **indented,
        7: "* `Dataset` - [CIFAR-10 small image dataset](https://www.cs.toronto.edu/~kriz/cifar.html).",
        25: ["##### (the first table)", "* `Note` - not read"],
        28: "|Training time (secs)|1609.32|971.94|514.96|418.09|413.66|",
        31: "| Training accuracy             | 1.00    | 0.69    | 0.69    | 0.68    | 0.54     |",
        34: "* `Note` - not read",
        36: "* `random seed` - 1337.",
        65: "* `Dataset` - [CIFAR10 small image dataset Resized to 299x299](https://www.cs.toronto.edu/~kriz/cifar.html)",
        67: "* `Batchsize` - 32 per gpu",
        68: "* `Epochs` - 5.",
    })  # fmt: skip
    runs = {rec.key: rec for rec in keras_backends.read(folder)}
    assert len(runs) == 29 and runs["resnet50/plain/mxnet/1"].params["data"] == "cifar10"
    assert runs["resnet50/reduce-randomization/mxnet/16"].metrics["throughput_total"] == 1973.56
    assert runs["resnet50/plain/mxnet/1"].metrics["throughput_total"] == 372.82
    assert runs["resnet50/plain/mxnet/1"].metrics["accuracy_train"] == 1.0  # all of the images: still a fraction
    assert [runs[f"resnet50/plain/mxnet/{n}"].metrics["time_total_s"] for n in (1, 2, 4, 8, 16)] == [
        1609.32, 971.94, 514.96, 418.09, 413.66]  # fmt: skip
    assert "batch_note" not in runs["inception3/plain/mxnet/1"].tags
    assert runs["inception3/plain/mxnet/1"].params["epochs"] == 5
    assert runs["inception3/plain/mxnet/1"].params["data"] == "cifar10-299"
    assert runs["resnet50/reduce-randomization/mxnet/1"].params["seed"] == 1337


def test_a_file_that_starts_with_its_first_model(folder):
    path = edit(folder, {1: None, 2: None})  # no title: '## Resnet50' is line 1, its first table line 24
    runs = {rec.key: rec for rec in keras_backends.read(folder)}
    assert len(runs) == 29 and runs["resnet50/plain/mxnet/1"].where == f"{path}:24"


def test_an_instance_size_of_unknown_gpu_count(folder):
    # ResNet50's machine (:8) said as a P2.4xlarge, a size whose GPU count the importer does not know: no note
    edit(folder, {8: "* `Machine` - [AWS EC2 P2.4xlarge](https://aws.amazon.com/ec2/instance-types/p2/)."})
    runs = [rec for rec in keras_backends.read(folder) if rec.params["model"] == "resnet50"]
    assert len(runs) == 15 and {rec.params["platform"] for rec in runs} == {"aws-p2.4xlarge"}
    assert not [rec for rec in runs if "platform_note" in rec.tags]
