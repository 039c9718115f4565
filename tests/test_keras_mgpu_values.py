"""ingest/logs/keras_mgpu.py in this process: every tag, param and metric of a finished run and of a failed run of
the real Keras multi-GPU logs (../shared/reference/keras-multi-gpu-2017, read by hand: file:line in the comments),
and each refusal and fallback as its whole line on a cut copy of the az-2x-m60 log's first run (lines 1-47) in
tmp_path, edited where the real one takes the other branch (said so at each edit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import shared_reference

from scalestudy.ingest.logs import LogOptions, user_source
from scalestudy.ingest.logs.keras_mgpu import parse, sniff
from scalestudy.schema import SchemaError

SHARED = shared_reference("keras-multi-gpu-2017")
pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(SHARED is None, reason="../shared/reference is not here")]
KERAS = SHARED / "keras-multi-gpu-2017" if SHARED else Path()
AZ = KERAS / "benchmark_inception3_resnet50_results_az-2x-m60.txt"
G7 = KERAS / "benchmark_inception3_resnet50_results_7gforce.txt"
COMMAND = "python ../../keras_tf_multigpu/examples/benchmark_inception3_resnet50.py -a inception3 -m kuza55"
OWN = ("log_path", "log_sha256", "log_bytes_sha256", "mlflow.note.content")


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **given)


def own(rec) -> dict:
    return {k: v for k, v in rec.tags.items() if k not in OWN}


def test_az_first_run_every_tag_and_param():
    rec = parse(AZ, options(platform="az"))[0]
    f = AZ.name
    assert own(rec) == {
        "batch_global": "32",  # az:30 `batch_size: 32`
        "parallelization_method": "kuza55",  # az:28
        "parameter_server": "gpu",  # az:27
        "method_note": "1 GPU: the plain model; the parallelization method and parameter server are not used",
        # the progress lines az:33, 36, 39, 42, 45 end in `Samples/sec: 31.54` ... `31.71`; az:47 the one after
        "samples_per_sec_by_epoch": "31.54, 31.67, 31.72, 31.69, 31.71",
        "device_name": "Tesla M60",  # az:17 `name: Tesla M60`
        "command": f"{COMMAND} -g 1",  # az:5, the `++ python ...` trace line without its `++ `
        "source": "yours",
        "citation": "benchmark logs imported into logs-test",
        "dataset": "logs-test",
        "source_url": "",
        "source_line": f"{f}:47",
        "log_format": "keras_mgpu",
        "log_file": f,
        "source_lines": f"model: {f}:25; workers: {f}:26; batch_per_worker: {f}:30; epochs: {f}:29; "
        f"throughput_total: {f}:47; device: {f}:17",
    }
    assert rec.params == {
        "model": "inception3", "framework": "tensorflow", "api": "keras", "workers": 1, "device": "M60",
        "data": "synthetic", "batch_per_worker": 32, "platform": "az", "variable_update": "kuza55 (ps gpu)",
        "epochs": 5,
    }  # fmt: skip
    assert rec.metrics == {"throughput_total": 31.71} and rec.status == "FINISHED"
    assert rec.where == f"{AZ}:5" and (rec.start_ms, rec.end_ms) == (None, None)
    assert rec.key.endswith("#1") and rec.experiment == "logs-test"
    second = parse(AZ, options(platform="az"))[1]  # az:49 on: 2 GPUs, `parameter server: cpu`: 32 / 2 per GPU
    assert (second.params["batch_per_worker"], second.key[-2:], "method_note" in second.tags) == (16, "#2", False)
    assert second.tags["samples_per_sec_by_epoch"] == "52.71, 53.32, 53.41, 53.41, 53.35"


def test_7gforce_failed_run_every_tag_and_param():
    rec = parse(G7, options(platform="7g"))[5]
    f = G7.name
    assert own(rec) == {
        "batch_global": "32",  # 7g:429
        "parallelization_method": "kuza55",  # 7g:427
        "parameter_server": "cpu",  # 7g:426
        "batch_note": "the global batch of 32 does not divide over 6 GPUs: the per-GPU slices differ (kuza55 gives "
        "each 5 and drops the rest; avolkov1 gives the last GPU the rest)",  # 32 // 6 = 5
        # 7g:451, the traceback's last line
        "failure_reason": "tensorflow.python.framework.errors_impl.InvalidArgumentError: Incompatible shapes: [32] "
        f"vs. [30] ({f}:451)",
        "device_name": "GeForce GTX 1070",  # 7g:369, the first of six `name: GeForce GTX 1070`
        "command": f"{COMMAND} -g 6 -p cpu",  # 7g:357
        "source": "yours",
        "citation": "benchmark logs imported into logs-test",
        "dataset": "logs-test",
        "source_url": "",
        "source_line": f"{f}:451",  # no result: the error's line
        "log_format": "keras_mgpu",
        "log_file": f,
        "source_lines": f"model: {f}:424; workers: {f}:425; batch_per_worker: {f}:429; epochs: {f}:428; "
        f"device: {f}:369",
    }
    assert rec.params == {
        "model": "inception3", "framework": "tensorflow", "api": "keras", "workers": 6, "device": "GTX 1070",
        "data": "synthetic", "batch_per_worker": "not stated", "platform": "7g", "variable_update": "kuza55 (ps cpu)",
        "epochs": 5,
    }  # fmt: skip
    assert rec.metrics == {} and rec.status == "FAILED" and rec.where == f"{G7}:357"


@pytest.fixture()
def lines() -> list[str]:
    """The az log's first run, lines 1-47 (its `Samples/sec: 31.71` after training is line 47)."""
    return AZ.read_bytes().decode().split("\n")[:47]  # bytes: the progress bars hold carriage returns


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def refused(path: Path, message: str) -> None:
    with pytest.raises(SchemaError) as err:
        parse(path, options(platform="az"))
    assert str(err.value) == message


def test_cut_copy_refusals(tmp_path, lines):
    path = write(tmp_path, lines)
    (rec,) = parse(path, options(platform="az"))
    assert rec.metrics == {"throughput_total": 31.71} and rec.where == f"{path}:5"
    # without line 30 `batch_size: 32`: the error names the run's last line (47 is now 46)
    refused(
        write(tmp_path, lines[:29] + lines[30:]), f"{path}:46: the run starting at line 5 has no 'batch_size:' line"
    )
    for bad in ("0", "two"):
        refused(write(tmp_path, lines[:25] + [f"number of GPUs: {bad}"] + lines[26:]),
                f"{path}:26: 'number of GPUs: {bad}' is not a whole number >= 1")  # fmt: skip
    refused(
        write(tmp_path, lines[:28] + ["epochs: 5x"] + lines[29:]), f"{path}:29: 'epochs: 5x' is not a whole number >= 1"
    )
    # a seventh `Samples/sec` line (a copy of line 47) for 5 epochs
    refused(write(tmp_path, [*lines, lines[46]]),
            f"{path}:48: 7 'Samples/sec' lines in the run starting at line 5, which has 5 epochs (one per epoch and "
            "one after training)")  # fmt: skip
    refused(write(tmp_path, [*lines[:46], "Samples/sec: 31.7.1"]), f"{path}:47: 'Samples/sec: 31.7.1' is not a number")
    # cut after the fifth epoch's line 45: five of six lines, no error; the last non-blank line is 45
    refused(write(tmp_path, [*lines[:45], ""]),
            f"{path}:45: the run starting at line 5 stops after 5 of 6 'Samples/sec' lines and no error: a log cut "
            "short?")  # fmt: skip
    refused(write(tmp_path, lines[:24]), f"{path}:24: the run starting at line 5 has no 'architecture:' line")
    refused(write(tmp_path, ["Using TensorFlow backend.", "x"]),
            f"{path}:1: no Keras benchmark run (no 'architecture:' header) in the file")  # fmt: skip


def test_cut_copy_options_command_and_failure(tmp_path, lines):
    # --device given: the log's GPU names are not read (no device_name, no device line)
    rec = parse(write(tmp_path, lines), options(platform="az", device="K80"))[0]
    assert rec.params["device"] == "K80" and "device_name" not in rec.tags
    assert rec.tags["source_lines"].endswith("throughput_total: run.txt:47")
    # a 300-character command line: its first 250 characters
    long = lines[:4] + [lines[4] + " --x " + "y" * 300] + lines[5:]
    rec = parse(write(tmp_path, long), options(platform="az"))[0]
    assert rec.tags["command"] == (f"{COMMAND} -g 1 --x " + "y" * 300)[:250]
    # a 300-character error in place of the result line 47: its first 200 characters and its line
    error = "ValueError: " + "z" * 300
    rec = parse(write(tmp_path, [*lines[:46], error]), options(platform="az"))[0]
    assert rec.status == "FAILED" and rec.tags["failure_reason"] == f"{error[:200]} (run.txt:47)"
    assert rec.tags["source_line"] == "run.txt:47" and "samples_per_sec_by_epoch" not in rec.tags
    # the error in place of the fifth epoch's result line 46: FAILED, the error's line is the source line
    rec = parse(
        write(tmp_path, [*lines[:24], "architecture: inception3", *lines[25:45], error]), options(platform="az")
    )
    assert rec[0].tags["source_line"] == "run.txt:46"


def test_runs_without_trace_and_headers_with_blanks(tmp_path, lines):
    # no `++` lines: the run starts at its `architecture:` header (line 25 becomes 20 without the 5 trace lines);
    # the GPU seen before it (line 17, now 12) counts for it; the headers may carry leading blanks
    bare = [line for line in lines if not line.startswith("+")]
    bare = [("  " + line if line.startswith(("number of GPUs", "epochs")) else line) for line in bare]
    rec = parse(write(tmp_path, bare + bare), options(platform="az"))
    assert [r.where for r in rec] == [f"{tmp_path / 'run.txt'}:20", f"{tmp_path / 'run.txt'}:62"]  # 42 lines each
    assert [r.tags["source_lines"].rsplit("; ", 1)[1] for r in rec] == ["device: run.txt:12", "device: run.txt:54"]
    assert "command" not in rec[0].tags and rec[1].metrics == {"throughput_total": 31.71}


def test_sniff():
    assert sniff(["x", "Samples/sec: 31.71"]) and sniff(["\t parallelization method: kuza55"])
    assert not sniff(["epochs: 5", "architecture: inception3"]) and not sniff(["parallelization method:"])
    assert not sniff(["x parallelization method: kuza55"])


def test_cut_copy_options_and_what_the_log_does_not_say(tmp_path, lines):
    path = write(tmp_path, lines)
    rec = parse(path, options(platform="az", framework="pytorch", device="K80", data="real"))[0]
    assert {k: rec.params[k] for k in ("framework", "device", "data", "platform")} == {
        "framework": "pytorch", "device": "K80", "data": "real", "platform": "az",
    }  # fmt: skip
    # the log's own values kept: tensorflow and synthetic (the format's), the device is not read with --device
    assert (rec.tags["log_framework"], rec.tags["log_data"], "log_device" in rec.tags) == (
        "tensorflow",
        "synthetic",
        False,
    )
    assert "log_platform" not in rec.tags  # the log names no platform
    with pytest.raises(SchemaError) as err:
        parse(path, options())
    assert str(err.value) == f"{path}:5: the log does not say the run's platform: give it with --platform"
    # without line 17 `name: Tesla M60` and line 24 `Creating TensorFlow device (... name: Tesla M60 ...)` no GPU is
    # named: --device is needed
    with pytest.raises(SchemaError) as err:
        parse(write(tmp_path, lines[:16] + lines[17:23] + lines[24:]), options(platform="az"))
    assert str(err.value) == f"{path}:5: the log does not say the run's device: give it with --device"
    # a second kind of GPU (a K80 line after line 17)
    with pytest.raises(SchemaError) as err:
        parse(write(tmp_path, [*lines[:17], "name: Tesla K80", *lines[17:]]), options(platform="az"))
    assert str(err.value) == (
        f"{path}:5: the log lists several kinds of GPU (Tesla M60 (run.txt:17), Tesla K80 (run.txt:18)): give the "
        "run's with --device"
    )
    refused(write(tmp_path, lines[:24] + ["architecture: alexnet9"] + lines[25:]),
            f"{path}:25: unknown model name 'alexnet9' (known: alexnet, googlenet, inception3, inception4, resnet101, "
            "resnet101_v2, resnet152, resnet50, trivial, vgg16, vgg19)")  # fmt: skip
    assert type(parse(write(tmp_path, lines), options(platform="az"))[0].params["batch_per_worker"]) is int  # 32 // 1


def test_cut_copy_scan_edges(tmp_path, lines):
    path = write(tmp_path, lines)
    # no `parallelization method:` (line 28) and no `parameter server:` (line 27): empty
    rec = parse(write(tmp_path, lines[:26] + lines[28:]), options(platform="az"))[0]
    assert (rec.tags["parallelization_method"], rec.tags["parameter_server"], rec.params["variable_update"]) == (
        "", "", " (ps )",
    )  # fmt: skip
    # a trace line with an environment assignment first: the command is the line without its leading `+ `
    rec = parse(
        write(tmp_path, [*lines[:4], "+ XLA_FLAGS=1 " + lines[4].lstrip("+ "), *lines[5:]]), options(platform="az")
    )
    assert rec[0].tags["command"] == f"XLA_FLAGS=1 {COMMAND} -g 1"
    # a trace line as the file's last line: that run ends (and starts) there
    refused(write(tmp_path, [*lines, lines[4]]), f"{path}:48: the run starting at line 48 has no 'architecture:' line")
    # cut after the header's last line 30: the run ends there
    refused(write(tmp_path, lines[:30]),
            f"{path}:30: the run starting at line 5 stops after 0 of 6 'Samples/sec' lines and no error: a log cut "
            "short?")  # fmt: skip
    # cut inside line 46 after its first character, an X: that line is the run's last
    refused(write(tmp_path, [*lines[:45], "X"]),
            f"{path}:46: the run starting at line 5 stops after 5 of 6 'Samples/sec' lines and no error: a log cut "
            "short?")  # fmt: skip
    # an error after a progress bar's carriage return on line 46: the text after the last one is the error
    rec = parse(write(tmp_path, [*lines[:45], lines[45] + "\rValueError: boom"]), options(platform="az"))[0]
    assert rec.status == "FAILED" and rec.tags["failure_reason"] == "ValueError: boom (run.txt:46)"
    # an error after the run's result (line 48): every run has its result, the error goes to the last one, FINISHED
    rec = parse(write(tmp_path, [*lines, "ValueError: late"]), options(platform="az"))
    assert [(r.status, r.metrics) for r in rec] == [("FINISHED", {"throughput_total": 31.71})]
    # a traced run, then a run without a trace (its 5 `++` lines dropped): its GPU line (42 + 17 = 59, less 5 = 54)
    # comes after the first run's end and counts for the second
    bare = [line for line in lines if not line.startswith("+")]
    rec = parse(write(tmp_path, lines + bare), options(platform="az"))
    assert [r.where for r in rec] == [f"{path}:5", f"{path}:67"]  # 47 + 20
    assert rec[1].tags["source_lines"].endswith("device: run.txt:59") and rec[1].metrics == {"throughput_total": 31.71}
