"""ingest/logs/tf_cnn_text.py in this process: every tag and line of a real run (the az-2xm-60 shell trace of
../shared/reference/keras-multi-gpu-2017, read by hand: line numbers in the comments), the variable_update spellings
of the TF 2017 tables, and each refusal as its exact line. Branches no real log takes use a real run cut out of the
trace and edited (said so), or a Horovod log written from the format's print statements (tests/test_ingest_logs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, shared_reference

from scalestudy.ingest.logs import LogOptions, user_source
from scalestudy.ingest.logs.tf_cnn_text import parse, sniff, variable_update
from scalestudy.schema import NOT_STATED, SchemaError

TRACE = (
    (shared_reference("keras-multi-gpu-2017") or REPO / "absent")
    / "keras-multi-gpu-2017"
    / "benchmark_batch_inception3_az-2xm-60.txt"
)
pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(not TRACE.is_file(), reason=f"{TRACE} is not here")]


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **given)


@pytest.fixture(scope="module")
def trace_lines() -> list[str]:
    return TRACE.read_bytes().decode().split("\n")


def run4(trace_lines, tmp_path: Path, edit=lambda lines: lines) -> Path:
    """The trace's fourth run (:164-:218, `--variable_update replicated`, Use NCCL True), alone in a file."""
    log = tmp_path / "run4.txt"
    log.write_text("\n".join(edit(trace_lines[163:218])) + "\n")
    return log


def test_replicated_nccl_run_every_tag(trace_lines):
    records = parse(TRACE, options(platform="az-2x-m60"))
    rec = records[3]
    name = TRACE.name
    assert rec.params == {
        "model": "inception3", "framework": "tensorflow", "api": "tf_cnn_benchmarks", "workers": 2, "device": "M60",
        "data": "synthetic", "batch_per_worker": 32, "platform": "az-2x-m60", "variable_update": "replicated (nccl)",
    }  # fmt: skip
    assert rec.metrics == {"throughput_total": 94.57}  # :217
    tags = {
        k: v
        for k, v in rec.tags.items()
        if k not in ("log_path", "log_sha256", "log_bytes_sha256", "mlflow.note.content")
    }
    assert tags == {
        "batch_global": "64",  # :193 `Batch size:  64 global`
        "citation": "benchmark logs imported into logs-test",
        "command": "python ./tf_cnn_benchmarks.py --model inception3 --num_gpus 2 --variable_update replicated",
        "dataset": "logs-test",
        "device_basis": "log:line 171",  # `name: Tesla M60`
        "device_name": "Tesla M60",  # :171
        "last_logged_step": "100",  # :215
        "local_parameter_device": "gpu",  # not on the command line: tf_cnn_benchmarks' default
        "log_file": name,
        "log_format": "tf_cnn_text",
        "platform_basis": "given (--platform)",
        "source": "yours",
        "source_line": f"{name}:217",
        "source_lines": f"model: {name}:191; batch_per_worker: {name}:194; workers: {name}:193; "
        f"throughput_total: {name}:217; data: {name}:164; device: {name}:171",
        "source_url": "",
        "tensorflow_version": "1.3",  # :190
        "use_nccl": "true",  # :199
        "variable_update_raw": "replicated",  # :198
        "workers_basis": "log:line 193 (64 global / 32 per device); line 195 lists 2 device(s)",  # :195 `Devices:`
    }
    assert rec.status == "FINISHED" and rec.where == f"{TRACE}:164"
    assert [r.key.rsplit("#", 1)[1] for r in records] == ["1", "2", "3", "4", "5", "6"]  # the runs in file order
    assert f"`{name}` line 217 (tf_cnn_benchmarks text output" in rec.tags["mlflow.note.content"]
    # the first run (:1-:54) and the fifth (`--use_nccl False`, :219)
    assert records[0].params["variable_update"] == "parameter_server (gpu)" and "use_nccl" not in records[0].tags
    assert records[4].params["variable_update"] == "replicated (gpu, no nccl)"
    assert records[4].tags["use_nccl"] == "false" and records[4].where == f"{TRACE}:219"


def test_variable_update_spellings():
    h = {"Use NCCL": ("True", 9)}
    assert variable_update("parameter_server", {}, {}, "") == (
        "parameter_server",
        {"variable_update_raw": "parameter_server", "local_parameter_device": NOT_STATED},
    )
    assert (
        variable_update("parameter_server", {"local_parameter_device": "CPU"}, {}, "x")[0] == "parameter_server (cpu)"
    )
    assert variable_update("replicated", {}, {"AllReduce": ("xring", 3)}, "x") == (
        "replicated (xring)",
        {"variable_update_raw": "replicated", "local_parameter_device": "gpu", "all_reduce_spec": "xring"},
    )
    assert variable_update("replicated", {}, {"AllReduce": ("None", 3)}, "x")[0] == "replicated"
    assert variable_update("replicated", {}, h, "x")[0] == "replicated (nccl)"
    assert variable_update("replicated", {}, {"Use NCCL": ("False", 9)}, "")[0] == "replicated (no nccl)"
    assert variable_update("replicated", {"use_nccl": ""}, {}, "x")[1]["use_nccl"] == "true"  # a bare flag
    assert variable_update("replicated", {"use_nccl": "no"}, {}, "x")[1]["use_nccl"] == "false"
    assert variable_update("replicated", {"use_nccl": "1"}, h | {"Use NCCL": ("no", 9)}, "x")[1]["use_nccl"] == "false"
    assert variable_update("horovod", {}, {}, "")[0] == "horovod"


def test_sniff():
    assert sniff(["x", "[1,0]<stdout>:total images/sec: 3.5"]) and sniff(["  10\timages/sec: 1.0 +/- 0.1 (jitter"])
    assert sniff(["+ python tf_cnn_benchmarks.py --model x"]) and not sniff(["images/sec", "total: 3"])


def test_refusals_name_the_line(trace_lines, tmp_path):
    def refused(edit, pattern: str, **given) -> None:
        with pytest.raises(SchemaError, match=pattern):
            parse(run4(trace_lines, tmp_path, edit), options(platform="p", **given))

    log = str(tmp_path / "run4.txt")
    esc = log.replace(".", r"\.")
    # in the cut: :1 the command, :28 Model, :29 Mode, :30-:31 Batch size, :54 total, :55 the last line
    drop = lambda pattern: lambda lines: [x for x in lines if pattern not in x]  # noqa: E731
    refused(drop("Model:"), rf"^{esc}:54: the run starting at line 1 has no 'Model:' header line$")
    swap = lambda old, new: lambda lines: [x.replace(old, new) for x in lines]  # noqa: E731
    refused(swap("inception3", "nonet"), rf"^{esc}:28: unknown model name 'nonet' \(known: ")
    refused(swap("training", "forward-only"), rf"^{esc}:29: a 'forward-only' run: only training runs have a ")
    no_batch = "the run starting at line 1 has no 'Batch size: G global' / 'P per device' header$"
    refused(swap("32 per device", "thirty"), rf"^{esc}:55: {no_batch}")
    refused(swap("64 global", "sixty-four"), rf"^{esc}:30: 'Batch size: sixty-four' is not 'G global'$")
    refused(swap("32 per device", "48 per device"), rf"^{esc}:31: 48 per device does not divide the global batch 64$")
    (one,) = parse(run4(trace_lines, tmp_path, swap("32 per device", "1 per device")), options(platform="p"))
    assert (one.params["workers"], one.params["batch_per_worker"]) == (64, 1)
    refused(swap("32 per device", "0 per device"), rf"^{esc}:31: 0 per device does not divide the global batch 64$")
    refused(swap("total images/sec: 94.57", "total images/sec: n/a"), rf"^{esc}:54: 'total images/sec' 'n/a' is not ")
    twice = lambda lines: lines[:54] + ["total images/sec: 1.0"] + lines[54:]  # noqa: E731
    refused(twice, rf"^{esc}:55: 2 'total images/sec' lines in the run starting at line 1, but it has 1 rank\(s\) "
            r"\(2 GPUs, variable_update replicated\): a run without its header\?$")  # fmt: skip
    refused(drop("total images/sec"), rf"^{esc}:54: the run starting at line 1 stops with no 'total images/sec' line ")
    with pytest.raises(SchemaError, match=rf"^{esc}:1: no tf_cnn_benchmarks run \(no header, no 'total images/sec'\)"):
        parse(run4(trace_lines, tmp_path, lambda lines: ["nothing"]), options(platform="p"))


def test_failed_run_and_cpu_devices(trace_lines, tmp_path):
    def crash(lines):  # the run ends in a Python error instead of its total (edited)
        return lines[:53] + ["Traceback (most recent call last):", "ValueError: " + "x" * 300]

    (rec,) = parse(run4(trace_lines, tmp_path, crash), options(platform="p"))
    assert rec.status == "FAILED" and rec.metrics == {}
    assert rec.tags["failure_reason"] == f"ValueError: {'x' * 188} (run4.txt:55)"  # the first 200 characters
    assert rec.tags["source_line"] == "run4.txt:55"  # the error's line
    assert rec.tags["last_logged_step"] == "100"
    cpu = lambda lines: [x.replace("['/gpu:0', '/gpu:1']", "['/cpu:0']") for x in lines]  # noqa: E731
    (rec,) = parse(run4(trace_lines, tmp_path, cpu), options(platform="p"))
    assert rec.params["device"] == "cpu" and "device_name" not in rec.tags
    assert rec.tags["device_basis"] == "log:line 32"  # run4.txt:32 `Devices:     ['/cpu:0']` (edited)
    (rec,) = parse(run4(trace_lines, tmp_path), options(platform="p", device="K80"))  # --device wins, the log's kept
    assert rec.params["device"] == "K80" and rec.tags["device_name"] == "Tesla M60" and rec.tags["log_device"] == "M60"
    assert rec.tags["device_basis"] == "given (--device)"
    real = lambda lines: [lines[0] + " --data_dir=/data/imagenet", *lines[1:]]  # noqa: E731
    (rec,) = parse(run4(trace_lines, tmp_path, real), options(platform="p"))
    assert rec.params["data"] == "real" and "data: run4.txt:1" in rec.tags["source_lines"]
    dataset = lambda lines: lines[:28] + ["Dataset:     imagenet", *lines[28:]]  # noqa: E731
    (rec,) = parse(run4(trace_lines, tmp_path, dataset), options(platform="p"))
    assert rec.params["data"] == "real" and "data: run4.txt:29" in rec.tags["source_lines"]


# Two Horovod ranks as TF 2.x's tf_cnn_benchmarks prints them (its print statements; no real sample here)
HOROVOD_LOG = """\
[1,0]<stdout>:TensorFlow:  2.1
[1,0]<stdout>:Model:       resnet50
[1,0]<stdout>:Dataset:     imagenet (synthetic)
[1,0]<stdout>:Batch size:  128 global
[1,0]<stdout>:             64.0 per device
[1,0]<stdout>:Variables:   horovod
[1,1]<stdout>:Model:       resnet50
[1,1]<stdout>:Batch size:  128 global
[1,1]<stdout>:             64 per device
[1,0]<stdout>:100\timages/sec: 305.5 +/- 0.4 (jitter = 1.2)\t7.6
[1,0]<stdout>:total images/sec: 305.25
[1,1]<stdout>:total images/sec: 302.75
"""


def test_horovod_ranks_summed(tmp_path):
    log = tmp_path / "hvd.txt"
    log.write_text(HOROVOD_LOG)
    (rec,) = parse(log, options(platform="p", device="V100"))
    assert rec.tags["rank_totals"] == "305.25 (hvd.txt:11), 302.75 (hvd.txt:12)"
    assert rec.metrics == {"throughput_total": 305.25 + 302.75, "throughput_per_worker": (305.25 + 302.75) / 2}
    assert rec.tags["batch_global"] == "128" and "command" not in rec.tags and rec.tags["tensorflow_version"] == "2.1"
    assert "batch_per_worker: hvd.txt:5" in rec.tags["source_lines"]  # `64.0 per device`, rank 0's
    assert rec.tags["source_line"] == "hvd.txt:11" and rec.params["workers"] == 2

    log.write_text("".join(HOROVOD_LOG.splitlines(keepends=True)[:-1]))  # rank 1's total missing
    with pytest.raises(
        SchemaError, match=r"^\S*hvd\.txt:11: the run starting at line 1 stops with 1 of 2 ranks' totals "
    ):
        parse(log, options(platform="p", device="V100"))


def test_a_command_with_bare_flags_and_an_environment_prefix(trace_lines, tmp_path):
    # run4 edited: its command starts with a variable (kept whole), ends in two flags without values, and its
    # `Use NCCL: True` header line is dropped, so the bare --use_nccl says it (tf_cnn_benchmarks: a bare flag is true)
    def edit(lines):
        command = lines[0].replace("+ python", "+ XLA_FLAGS=--xla_gpu_autotune_level=0 python")
        return [command + " --use_nccl --data_dir"] + [x for x in lines[1:] if not x.startswith("Use NCCL")]

    (rec,) = parse(run4(trace_lines, tmp_path, edit), options(platform="p"))
    command = "python ./tf_cnn_benchmarks.py --model inception3 --num_gpus 2 --variable_update replicated"
    assert rec.tags["command"] == f"XLA_FLAGS=--xla_gpu_autotune_level=0 {command} --use_nccl --data_dir"
    assert rec.tags["use_nccl"] == "true" and rec.params["data"] == "synthetic"  # --data_dir names no folder


def test_a_trace_line_right_after_another_is_a_run_of_that_line_alone(trace_lines, tmp_path):
    log = run4(trace_lines, tmp_path, lambda lines: lines[:1] + lines)
    with pytest.raises(SchemaError, match=rf"^{log}:1: the run starting at line 1 has no 'Model:' header line$"):
        parse(log, options(platform="p"))


def test_a_run_without_a_trace_line_or_a_tensorflow_line_starts_at_its_model_line(trace_lines, tmp_path):
    # run4 (55 lines), then run4 again without its trace line (:1) and its `TensorFlow:  1.3` (:27): the second
    # run's GPU lines come after the first run's total, before its header; file line = 54 + k (53 + k after :27)
    log = run4(trace_lines, tmp_path, lambda lines: lines + [x for x in lines[1:] if not x.startswith("TensorFlow:")])
    first, second = parse(log, options(platform="p", data="synthetic"))  # the second run does not say it
    assert (first.where, second.where) == (f"{log}:1", f"{log}:81")  # run4's Model line, :28
    assert second.tags["device_name"] == "Tesla M60" and "tensorflow_version" not in second.tags
    assert "device: run4.txt:62" in second.tags["source_lines"]  # run4's `name: Tesla M60`, :8
    assert second.metrics == {"throughput_total": 94.57} and "command" not in second.tags


def test_a_per_device_line_counts_only_right_after_the_batch_size(trace_lines, tmp_path):
    log = run4(trace_lines, tmp_path, lambda lines: lines[:30] + ["(a line between)"] + lines[30:])
    with pytest.raises(SchemaError, match=r"has no 'Batch size: G global' / 'P per device' header$"):
        parse(log, options(platform="p"))


def test_the_device_without_a_devices_line_with_cpu_and_gpu_devices_and_with_two_kinds_of_gpu(trace_lines, tmp_path):
    def device(edit) -> str:
        (rec,) = parse(run4(trace_lines, tmp_path, edit), options(platform="p"))
        return rec.params["device"]

    assert device(lambda lines: [x for x in lines if not x.startswith("Devices:")]) == "M60"  # the GPU lines say
    both = lambda lines: [x.replace("['/gpu:0', '/gpu:1']", "['/cpu:0', '/gpu:0']") for x in lines]  # noqa: E731
    assert device(both) == "M60"  # a CPU among the devices: still a GPU run
    log = run4(trace_lines, tmp_path, lambda lines: lines[:12] + ["name: Tesla K80"] + lines[12:])
    with pytest.raises(SchemaError) as err:
        parse(log, options(platform="p"))
    assert str(err.value) == (f"{log}:1: the log lists several kinds of GPU (Tesla M60 (run4.txt:8), Tesla K80 "
                              "(run4.txt:13)): give the run's with --device")  # fmt: skip


def test_the_variable_update_from_the_command_line_where_no_variables_line_says_it(trace_lines, tmp_path):
    def update(edit) -> str:
        (rec,) = parse(run4(trace_lines, tmp_path, edit), options(platform="p"))
        return rec.params["variable_update"]

    no_line = lambda lines: [x for x in lines if not x.startswith("Variables:")]  # noqa: E731
    assert update(no_line) == "replicated (nccl)"  # --variable_update replicated, Use NCCL True
    bare = lambda lines: [lines[0].replace(" --variable_update replicated", "")] + no_line(lines)[1:]  # noqa: E731
    assert update(bare) == "parameter_server (gpu)"  # tf_cnn_benchmarks' default, on its default device


def test_what_the_log_does_not_say_is_asked_for_by_its_option_and_a_given_value_keeps_the_logs(trace_lines, tmp_path):
    named = ("name: Tesla", "Creating TensorFlow device")  # the lines that name the GPU (:8, :15, :25, :26)
    no_gpu = run4(trace_lines, tmp_path, lambda lines: [x for x in lines if not any(n in x for n in named)])
    with pytest.raises(SchemaError) as err:
        parse(no_gpu, options(platform="p"))
    assert str(err.value) == f"{no_gpu}:1: the log does not say the run's device: give it with --device"
    log = run4(trace_lines, tmp_path)
    with pytest.raises(SchemaError) as err:
        parse(log, options())
    assert str(err.value) == f"{log}:1: the log does not say the run's platform: give it with --platform"
    (rec,) = parse(log, options(platform="p", data="real"))  # the caller's data wins, the log's is kept
    assert rec.params["data"] == "real" and rec.tags["log_data"] == "synthetic"
    (rec,) = parse(log, options(platform="p", framework="mxnet"))  # as a caller may say it (the parser: tensorflow)
    assert rec.params["framework"] == "mxnet" and rec.tags["log_framework"] == "tensorflow"


def test_a_long_command_is_kept_to_its_first_250_characters(trace_lines, tmp_path):
    (rec,) = parse(
        run4(trace_lines, tmp_path, lambda lines: [lines[0] + " --x" * 60, *lines[1:]]), options(platform="p")
    )
    full = trace_lines[163].lstrip("+ ") + " --x" * 60  # 85 + 240 characters
    assert rec.tags["command"] == full[:250] and len(full) > 250
