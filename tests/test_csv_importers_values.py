"""The three CSV importers (ingest/tf_benchmarks.py, malik.py, horovod_docs.py), in-process: every param, metric and
tag of rows read by hand from the committed files (file:line), the run counts and keys, and each refusal with its
whole message on a copy edited in tmp_path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import REFERENCE

from scalestudy.ingest import horovod_docs, malik, tf_benchmarks
from scalestudy.schema import DESCRIPTION_TAG, NOT_STATED, SchemaError

PUBLISHED = {"source", "citation", "dataset", "source_url", "mlflow.note.content"}


def copy_of(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(REFERENCE / name, dest)
    return dest


def replace_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")


def refusal(read, folder: Path) -> str:
    with pytest.raises(SchemaError) as err:
        read(folder)
    return str(err.value)


def test_tf_benchmarks_rows():
    runs = tf_benchmarks.read(REFERENCE / "tf-benchmarks-2017")
    assert len(runs) == 207 and len({r.key for r in runs}) == 207  # tf_benchmarks_2017.csv:2-208
    first, resnet152 = runs[0], runs[2]
    # :2 `nvidia-dgx-1,P100,inception3,synthetic,64,1,142,parameter_server (cpu)`
    assert first.params == {"framework": "tensorflow", "api": "tf_cnn_benchmarks", "model": "inception3",
                            "workers": 1, "device": "P100", "data": "synthetic", "batch_per_worker": 64,
                            "platform": "nvidia-dgx-1", "variable_update": "parameter_server (cpu)"}  # fmt: skip
    assert first.metrics == {"throughput_total": 142.0} and first.key == "nvidia-dgx-1/P100/inception3/synthetic/64/1"
    assert first.tags["source_line"] == "tf_benchmarks_2017.csv:2" and first.experiment == "tf-benchmarks-2017"
    assert first.where == f"{REFERENCE / 'tf-benchmarks-2017' / 'tf_benchmarks_2017.csv'}:2"
    # :4 `nvidia-dgx-1,P100,resnet152,synthetic,64,1,91.8,...`; :25 alexnet on real data, batch 512: 2890
    assert resnet152.metrics == {"throughput_total": 91.8} and resnet152.params["model"] == "resnet152"
    alexnet = runs[23]
    assert (alexnet.params["data"], alexnet.params["batch_per_worker"], alexnet.params["variable_update"]) == (
        "real", 512, "replicated (nccl)")  # fmt: skip
    assert (
        alexnet.metrics == {"throughput_total": 2890.0} and alexnet.tags["source_line"] == "tf_benchmarks_2017.csv:25"
    )
    assert {r.status for r in runs} == {"FINISHED"}


def test_tf_benchmarks_refusals(tmp_path):
    folder = copy_of(tmp_path, "tf-benchmarks-2017")
    path = folder / "tf_benchmarks_2017.csv"
    replace_line(path, 3, "nvidia-dgx-1,P100,resnet50,imagenet,64,1,219,parameter_server (cpu)")
    assert refusal(tf_benchmarks.read, folder) == f"{path}:3: column 'data': 'imagenet' is neither synthetic nor real"
    replace_line(path, 3, "nvidia-dgx-1,P100,resnet50,synthetic,64,1,fast,parameter_server (cpu)")
    assert refusal(tf_benchmarks.read, folder) == f"{path}:3: column 'images_per_sec': 'fast' is not a number"
    replace_line(path, 3, "nvidia-dgx-1,P100,resnet50,synthetic,64,one,219,parameter_server (cpu)")
    assert refusal(tf_benchmarks.read, folder) == f"{path}:3: column 'gpus': 'one' is not a number"


def test_malik_runs(tmp_path):
    runs = malik.read(REFERENCE / "malik-2018")
    claim = "almost linear throughput (images/sec) scalability up to 256 GPUs"
    assert [r.key for r in runs] == ["alexnet/256", "googlenet/256", "resnet50/256"]  # claims.csv:2-4
    for line, rec in enumerate(runs, start=2):
        assert rec.params == {"framework": "tensorflow", "api": "horovod", "batch_per_worker": NOT_STATED,
                              "model": rec.key.split("/")[0], "workers": 256, "device": "K40/K80/P100",
                              "data": "synthetic", "platform": "GPU cluster (not named in the abstract)"}  # fmt: skip
        assert rec.metrics == {} and rec.tags["claim"] == claim and rec.tags["source_line"] == f"claims.csv:{line}"
        assert rec.experiment == "malik-2018" and rec.tags["source"] == "published"
        assert rec.where == f"{REFERENCE / 'malik-2018' / 'claims.csv'}:{line}"
        # the description names the file as the repository holds it, as every other dataset's does
        assert rec.tags[DESCRIPTION_TAG].startswith(
            f"Published measurement, read from `experiments/reference/malik-2018/claims.csv` line {line} by "
        )
    folder = copy_of(tmp_path, "malik-2018")
    path = folder / "claims.csv"
    replace_line(path, 3, "googlenet,256,K40/K80/P100,synthetic,64,GPU cluster,almost linear")
    assert malik.read(folder)[1].params["batch_per_worker"] == "64"  # a number is checked, kept as printed
    for batch in ("sixty-four", "64.5"):  # a batch is a whole number of images
        replace_line(path, 3, f"googlenet,256,K40/K80/P100,synthetic,{batch},GPU cluster,almost linear")
        assert refusal(malik.read, folder) == f"{path}:3: column 'batch_per_worker': {batch!r} is not a number"
    replace_line(path, 3, "googlenet,many,K40/K80/P100,synthetic,not stated,GPU cluster,almost linear")
    assert refusal(malik.read, folder) == f"{path}:3: column 'workers': 'many' is not a number"
    replace_line(path, 3, "googlenet,256,K40/K80/P100,synthetic,not stated,GPU cluster,")
    assert refusal(malik.read, folder) == (
        f"{path}:3: column 'claim' is empty (the claim is what this dataset records)"
    )


def test_horovod_docs_runs(tmp_path):
    runs = horovod_docs.read(REFERENCE / "horovod-docs")
    # claims.csv:2-4: 90 % for Inception V3 and ResNet-101, 68 % for VGG-16 on 512 GPUs
    assert [(r.key, r.metrics) for r in runs] == [
        ("inception3/512", {"efficiency_published": 0.90}),
        ("resnet101/512", {"efficiency_published": 0.90}),
        ("vgg16/512", {"efficiency_published": 0.68}),
    ]
    assert runs[2].params == {"framework": "tensorflow", "api": "tf_cnn_benchmarks", "variable_update": "horovod",
                              "model": "vgg16", "workers": 512, "device": "Pascal",
                              "platform": "128 servers x 4 GPUs; 25 Gbit/s RoCE", "batch_per_worker": 64,
                              "data": "synthetic"}  # fmt: skip
    assert runs[2].tags["source_line"] == "claims.csv:4" and runs[2].experiment == "horovod-docs"
    folder = copy_of(tmp_path, "horovod-docs")
    path = folder / "claims.csv"
    row = "vgg16,512,{},Pascal,128 servers x 4 GPUs; 25 Gbit/s RoCE,64,synthetic"
    replace_line(path, 4, row.format("1.0"))  # all of the ideal: still a fraction
    assert horovod_docs.read(folder)[2].metrics == {"efficiency_published": 1.0}
    assert [r.where for r in runs] == [f"{REFERENCE / 'horovod-docs' / 'claims.csv'}:{n}" for n in (2, 3, 4)]
    replace_line(path, 4, row.format("n/a"))
    assert refusal(horovod_docs.read, folder) == f"{path}:4: column 'efficiency_published': 'n/a' is not a number"
    replace_line(path, 4, row.format("0.68").replace(",512,", ",512 GPUs,"))
    assert refusal(horovod_docs.read, folder) == f"{path}:4: column 'workers': '512 GPUs' is not a number"
    for bad in ("0", "1.01", "68"):
        replace_line(path, 4, row.format(bad))
        assert refusal(horovod_docs.read, folder) == (
            f"{path}:4: column 'efficiency_published': {float(bad)} is not a fraction in (0, 1]"
        )
