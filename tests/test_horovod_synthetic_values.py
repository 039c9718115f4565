"""ingest/logs/horovod_synthetic.py in this process: every param, metric and tag of runs written from the Horovod
examples' print statements (no real output of this benchmark is here: ../shared/reference/logs/README.md), and each
refusal as its exact line."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalestudy.ingest.logs import LogOptions, user_source
from scalestudy.ingest.logs.horovod_synthetic import parse, sniff
from scalestudy.schema import NOT_STATED, SchemaError

# pytorch_synthetic_benchmark.py's prints under horovodrun (rank 0's prefix), then a Keras run on CPUs
TWO_RUNS = """\
[1,0]<stdout>:Model: resnet50
[1,0]<stdout>:Batch size: 64
[1,0]<stdout>:Number of GPUs: 4
[1,0]<stdout>:Running warmup...
[1,0]<stdout>:Iter #0: 410.2 img/sec per GPU
[1,0]<stdout>:Img/sec per GPU: 411.1 +-1.8
[1,0]<stdout>:Total img/sec on 4 GPU(s): 1644.4 +-7.1
Model: InceptionV3
Batch size: 32
Number of CPUs: 2
Img/sec per CPU: 5.5 +-0.25
Total img/sec on 2 CPU(s): 11.0 +-0.5
"""


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **{"platform": "p", "framework": "pytorch", **given})


def write(tmp_path: Path, text: str) -> Path:
    log = tmp_path / "hvd.out"
    log.write_text(text)
    return log


def test_two_runs_every_field(tmp_path):
    log = write(tmp_path, TWO_RUNS)
    gpu, cpu = parse(log, options(device="V100"))
    assert gpu.params == {
        "model": "resnet50", "framework": "pytorch", "api": "horovod_synthetic_benchmark", "workers": 4,
        "device": "V100", "data": "synthetic", "batch_per_worker": 64, "platform": "p", "variable_update": "horovod",
    }  # fmt: skip
    assert gpu.metrics == {"throughput_total": 1644.4, "throughput_per_worker": 411.1}
    tags = {
        k: v
        for k, v in gpu.tags.items()
        if k not in ("log_path", "log_sha256", "log_bytes_sha256", "mlflow.note.content")
    }
    assert tags == {
        "throughput_total_pm": "7.1",
        "citation": "benchmark logs imported into logs-test",
        "dataset": "logs-test",
        "log_file": "hvd.out",
        "log_format": "horovod_synthetic",
        "source": "yours",
        "source_line": "hvd.out:7",
        "source_lines": "model: hvd.out:1; batch_per_worker: hvd.out:2; throughput_total: hvd.out:7; workers: "
        "hvd.out:7; throughput_per_worker: hvd.out:6",
        "source_url": "",
    }
    assert gpu.where == f"{log}:1" and gpu.status == "FINISHED" and gpu.key.endswith("#1")
    # the Keras run: its model name read as the study's, the +- as printed; --device wins over its CPUs (kept)
    assert cpu.params["model"] == "inception3" and cpu.params["device"] == "V100" and cpu.params["workers"] == 2
    assert cpu.params["batch_per_worker"] == 32 and cpu.metrics == {
        "throughput_total": 11.0,
        "throughput_per_worker": 5.5,
    }
    assert cpu.tags["log_device"] == "cpu" and "log_device" not in gpu.tags
    assert cpu.tags["throughput_total_pm"] == "0.5" and cpu.where == f"{log}:8" and cpu.key.endswith("#2")
    # one run in a file: keyed by the file alone
    (one,) = parse(write(tmp_path, "".join(TWO_RUNS.splitlines(keepends=True)[7:])), options())
    assert "#" not in one.key and one.params["device"] == "cpu"


def test_failed_run_and_the_counts(tmp_path):
    failed = TWO_RUNS.splitlines()[:5] + ["Traceback (most recent call last):", "RuntimeError: CUDA out of memory",
                                          "ValueError: later"]  # fmt: skip
    (rec,) = parse(write(tmp_path, "\n".join(failed)), options(device="V100"))
    assert rec.status == "FAILED" and rec.metrics == {}
    assert rec.tags["failure_reason"] == "RuntimeError: CUDA out of memory (hvd.out:7)"  # the first error
    assert rec.params["workers"] == 4 and "workers: hvd.out:3" in rec.tags["source_lines"]
    assert rec.tags["source_line"] == "hvd.out:1" and "throughput_total_pm" not in rec.tags
    no_count = [line for line in failed if "Number of" not in line]
    with pytest.raises(SchemaError, match=r"^\S*hvd\.out:7: failed run starting at line 1 has no 'Number of GPUs:'$"):
        parse(write(tmp_path, "\n".join(no_count)), options(device="V100"))
    # no 'Number of GPUs' but a total: its N is the workers; no 'Img/sec per GPU': no per-worker metric
    lines = [x for x in TWO_RUNS.splitlines()[:7] if "Number of" not in x and "per GPU:" not in x]
    (rec,) = parse(write(tmp_path, "\n".join(lines)), options(device="V100"))
    assert rec.params["workers"] == 4 and rec.metrics == {"throughput_total": 1644.4}


def test_refusals_name_the_line(tmp_path):
    def refused(text: str, pattern: str) -> None:
        with pytest.raises(SchemaError, match=pattern):
            parse(write(tmp_path, text), options(device="V100"))

    first = TWO_RUNS.splitlines(keepends=True)[:7]
    refused("".join(first).replace("Number of GPUs: 4", "Number of GPUs: 8"),
            r"^\S*hvd\.out:7: 'Total img/sec on 4' but 'Number of GPUs: 8' \(line 3\)$")  # fmt: skip
    refused("".join(first[:1] + first[2:]), r"^\S*hvd\.out:6: the run starting at line 1 has no 'Batch size:' line$")
    refused("".join(first[:5]), r"^\S*hvd\.out:5: the run starting at line 1 stops before its 'Total img/sec' line "
            r"and without an error: a log cut short\?$")  # fmt: skip
    refused("".join(first).replace("411.1 +-1.8", "4.1.1 +-1.8"), r"^\S*hvd\.out:6: Img/sec '4\.1\.1' is not a number$")
    refused("".join(first).replace("411.1 +-1.8", "411.1 +-1..8"), r"^\S*hvd\.out:6: \+- '1\.\.8' is not a number$")
    refused("".join(first).replace("1644.4 +-7.1", "16.44.4 +-7.1"), r"^\S*hvd\.out:7: Total img/sec '16\.44\.4' is ")
    refused("".join(first).replace("1644.4 +-7.1", "1644.4 +-7..1"), r"^\S*hvd\.out:7: \+- '7\.\.1' is not a number$")
    refused("Batch size: 64\nnothing\n", r"^\S*hvd\.out:1: no 'Model:' line: no Horovod synthetic benchmark run in ")
    refused("".join(first).replace("resnet50", "nonet"), r"^\S*hvd\.out:1: ")  # an unknown model, named at its line


def test_sniff_and_missing_options(tmp_path):
    assert sniff(["x", "[1,0]<stdout>:Total img/sec on 4 GPU(s): 1.0 +-0.1"]) and sniff(["Img/sec per CPU: 1 +-0"])
    assert not sniff(["Total img/sec: 5", "Img/sec per GPU: 1"])
    log = write(tmp_path, TWO_RUNS)
    with pytest.raises(SchemaError, match=r"^\S*hvd\.out:1: the log does not say the run's device: give it with "):
        parse(log, options())
    assert parse(log, options(device="V100", data="real"))[0].params["data"] == "real"
    assert NOT_STATED not in parse(log, options(device="V100"))[0].params.values()


def test_what_the_log_leaves_to_the_options(tmp_path):
    log = write(tmp_path, "starting\n" + TWO_RUNS)  # a line before the first run's Model line is skipped
    bare = LogOptions(source=user_source("logs-test"))
    steps = (({}, "framework"), ({"framework": "tf"}, "device"), ({"framework": "tf", "device": "K80"}, "platform"))
    for given, missing in steps:
        why = f"the log does not say the run's {missing}: give it with --{missing}"
        with pytest.raises(SchemaError, match=rf"^{log}:2: {why}$"):
            parse(log, LogOptions(source=user_source("logs-test"), **given))
    gpu, _ = parse(log, options(device="V100", data="real"))
    assert gpu.params["data"] == "real" and gpu.tags["log_data"] == "synthetic" and gpu.where == f"{log}:2"
    assert bare.platform is None


def test_a_model_line_alone_and_a_long_error(tmp_path):
    with pytest.raises(SchemaError, match=r"^\S*hvd\.out:1: the run starting at line 1 has no 'Batch size:' line$"):
        parse(write(tmp_path, "Model: resnet50\n"), options(device="V100"))
    long_error = "RuntimeError: " + "y" * 300
    (rec,) = parse(write(tmp_path, "\n".join(TWO_RUNS.splitlines()[:5] + [long_error])), options(device="V100"))
    assert rec.tags["failure_reason"] == f"{long_error[:200]} (hvd.out:6)"
