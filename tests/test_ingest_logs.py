"""`python -m scalestudy.ingest logs`: every real sample of ../shared/reference/logs and the raw logs of seed 002
(../shared/reference/keras-multi-gpu-2017) import with the values their READMEs give and the logs print (worked
out by hand from the files' lines); malformed, truncated and unknown files stop the import with file:line, exit 2
and the store unchanged; a re-import changes nothing.

The third-party files are read where they lie (never copied into the repository); tests that need a broken or
changed file write it to tmp_path. Small logs of formats with no real sample here (Horovod's synthetic benchmark,
a Horovod tf_cnn_benchmarks run) are written by the tests from the formats' print statements.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from helpers import log_text, log_text_sha256, shared_reference

from scalestudy.ingest.__main__ import main
from scalestudy.ingest.logs import LogOptions, detect, device_name, read_logs, user_source
from scalestudy.schema import NOT_STATED, SchemaError
from scalestudy.store import load_runs, sync_experiment

SHARED = shared_reference("logs", "keras-multi-gpu-2017")
# Real third-party samples that no source.yaml lists (nothing to fetch them from): a skip allowed under make test.
pytestmark = [
    pytest.mark.may_skip,
    pytest.mark.skipif(SHARED is None, reason="../shared/reference (the real logs) is not here"),
]
LOGS = SHARED / "logs" if SHARED else Path()
KERAS = SHARED / "keras-multi-gpu-2017" if SHARED else Path()
TRACE = KERAS / "benchmark_batch_inception3_az-2xm-60.txt"
KERAS_AZ = KERAS / "benchmark_inception3_resnet50_results_az-2x-m60.txt"
KERAS_7G = KERAS / "benchmark_inception3_resnet50_results_7gforce.txt"
MLPERF = LOGS / "mlperf" / "training_results_v1.0" / "NVIDIA"
MLPERF_RESULT = MLPERF / "results" / "dgxa100_ngc21.05_mxnet" / "resnet" / "result_0.txt"
DLL_EXCERPT = LOGS / "dllogger" / "raport.EXCERPT_lines_1-69.json"
DLL_EVAL = LOGS / "dllogger" / "experiment_raport.json"
TF_JSON = LOGS / "tf_cnn_benchmarks_json" / "fh2_singularity_500batch_synthetic_resnet50_1_gpu_1"


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **given)


def by_key(records) -> dict:
    return {r.key: r for r in records}


def raw_lines(path: Path) -> list[str]:
    """A file's lines split at newlines only (Path.read_text would also split at the progress bars' carriage
    returns; editors and grep -n number lines as the importer does)."""
    return path.read_bytes().decode().split("\n")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------------------------------
# tf_cnn_benchmarks text output


# The six runs of the az-2xm-60 trace: (GPUs, variable_update as the TF 2017 tables write it, `total images/sec`,
# its line), read off the file (each run starts at its `++ python ./tf_cnn_benchmarks.py ...` line).
TRACE_RUNS = [
    (1, "parameter_server (gpu)", 47.49, 54),
    (2, "parameter_server (gpu)", 94.72, 108),
    (2, "parameter_server (cpu)", 95.43, 162),
    (2, "replicated (nccl)", 94.57, 217),
    (2, "replicated (gpu, no nccl)", 95.33, 272),
    (2, "independent", 95.50, 326),
]


def test_tf_cnn_text_trace_holds_six_runs_with_their_totals():
    assert detect(TRACE) == "tf_cnn_text"
    records = read_logs([TRACE], options(platform="az-2x-m60"))
    assert [(r.params["workers"], r.params["variable_update"], r.metrics["throughput_total"]) for r in records] == [
        (n, update, value) for n, update, value, _ in TRACE_RUNS
    ]
    for rec, (_, _, _, line) in zip(records, TRACE_RUNS):
        rec.validate()
        assert rec.tags["source_line"] == f"{TRACE.name}:{line}"
        assert rec.status == "FINISHED"
        # `Batch size: 64 global / 32 per device`: the per-device batch is the worker's
        assert rec.params | {"workers": 0, "variable_update": ""} == {
            "model": "inception3", "framework": "tensorflow", "api": "tf_cnn_benchmarks", "workers": 0,
            "device": "M60", "data": "synthetic", "batch_per_worker": 32, "platform": "az-2x-m60",
            "variable_update": "",
        }  # fmt: skip
        assert rec.tags["device_name"] == "Tesla M60" and rec.tags["tensorflow_version"] == "1.3"
    # the two runs with identical headers differ on their command line only
    assert records[1].tags["local_parameter_device"] == "gpu" and records[2].tags["local_parameter_device"] == "cpu"
    assert records[4].tags["use_nccl"] == "false" and records[3].tags["use_nccl"] == "true"
    assert records[1].tags["batch_global"] == "64"
    assert len({r.key for r in records}) == 6
    assert not any(r.series for r in records)  # the step lines are running means: no per-step series


def test_tf_cnn_text_runs_without_a_shell_trace_split_at_their_headers(tmp_path):
    bare = tmp_path / "bare.txt"
    bare.write_text("".join(line for line in TRACE.read_text().splitlines(keepends=True) if not line.startswith("+")))
    with pytest.raises(SchemaError, match=r"bare\.txt:\d+: the log does not say the run's data: give it with --data"):
        read_logs([bare], options(platform="az"))  # TF 1.3 prints no Dataset line, and no command line is left
    records = read_logs([bare], options(platform="az", data="synthetic"))
    assert [r.metrics["throughput_total"] for r in records] == [v for _, _, v, _ in TRACE_RUNS]
    # the parameter device was on the command line only: not claimed
    assert [r.params["variable_update"] for r in records] == [
        "parameter_server", "parameter_server", "parameter_server", "replicated (nccl)", "replicated (no nccl)",
        "independent",
    ]  # fmt: skip
    assert records[2].tags["local_parameter_device"] == NOT_STATED


HOROVOD_TF2_LOG = """\
[1,0]<stdout>:TensorFlow:  2.1
[1,1]<stdout>:TensorFlow:  2.1
[1,0]<stdout>:Model:       resnet50
[1,0]<stdout>:Dataset:     imagenet (synthetic)
[1,0]<stdout>:Mode:        training
[1,0]<stdout>:SingleSess:  False
[1,0]<stdout>:Batch size:  128 global
[1,0]<stdout>:             64.0 per device
[1,0]<stdout>:Num batches: 100
[1,1]<stdout>:Model:       resnet50
[1,1]<stdout>:Dataset:     imagenet (synthetic)
[1,1]<stdout>:Batch size:  128 global
[1,1]<stdout>:             64 per device
[1,0]<stdout>:Devices:     ['horovod/gpu:0']
[1,0]<stdout>:Variables:   horovod
[1,0]<stdout>:==========
[1,0]<stdout>:Step\tImg/sec\ttotal_loss
[1,0]<stdout>:1\timages/sec: 301.0 +/- 0.0 (jitter = 0.0)\t7.9
[1,1]<stdout>:1\timages/sec: 299.0 +/- 0.0 (jitter = 0.0)\t7.9
[1,0]<stdout>:100\timages/sec: 305.5 +/- 0.4 (jitter = 1.2)\t7.6
[1,0]<stdout>:----------------------------------------------------------------
[1,0]<stdout>:total images/sec: 305.25
[1,1]<stdout>:100\timages/sec: 303.1 +/- 0.4 (jitter = 1.1)\t7.6
[1,1]<stdout>:total images/sec: 302.75
"""


def test_tf_cnn_text_horovod_job_total_is_the_sum_of_the_ranks(tmp_path):
    log = tmp_path / "hvd.txt"
    log.write_text(HOROVOD_TF2_LOG)
    (rec,) = read_logs([log], options(platform="p", device="V100"))
    assert rec.metrics == {"throughput_total": 305.25 + 302.75, "throughput_per_worker": (305.25 + 302.75) / 2}
    assert rec.params["workers"] == 2 and rec.params["batch_per_worker"] == 64
    assert rec.params["variable_update"] == "horovod" and rec.params["data"] == "synthetic"
    assert rec.tags["source_line"] == "hvd.txt:22"
    # one rank's total missing: the job stopped mid-way
    log.write_text("".join(HOROVOD_TF2_LOG.splitlines(keepends=True)[:-1]))
    with pytest.raises(SchemaError, match=r"hvd\.txt:23: .*1 of 2 ranks' totals"):
        read_logs([log], options(platform="p", device="V100"))


# ------------------------------------------------------------------------------------------------------------------
# Keras multi-GPU logs

# (model, GPUs, method, parameter server, `Samples/sec` after training or None for a failed run), in file order.
KERAS_AZ_RUNS = [
    ("inception3", 1, "kuza55", "gpu", 31.71), ("inception3", 2, "kuza55", "cpu", 53.35),
    ("inception3", 2, "kuza55", "gpu", 53.33), ("inception3", 1, "avolkov1", "gpu", 31.67),
    ("inception3", 2, "avolkov1", "cpu", 54.58), ("inception3", 2, "avolkov1", "gpu", 53.20),
    ("resnet50", 1, "kuza55", "gpu", 41.69), ("resnet50", 2, "kuza55", "cpu", 71.72),
    ("resnet50", 2, "kuza55", "gpu", 67.18), ("resnet50", 1, "avolkov1", "gpu", 41.64),
    ("resnet50", 2, "avolkov1", "cpu", 71.73), ("resnet50", 2, "avolkov1", "gpu", 68.78),
]  # fmt: skip
KERAS_7G_RUNS = [
    ("inception3", 1, "kuza55", "gpu", 39.07), ("inception3", 2, "kuza55", "cpu", 49.01),
    ("inception3", 2, "kuza55", "gpu", 57.15), ("inception3", 4, "kuza55", "cpu", 60.38),
    ("inception3", 4, "kuza55", "gpu", 33.00), ("inception3", 6, "kuza55", "cpu", None),
    ("inception3", 6, "kuza55", "gpu", None), ("inception3", 1, "avolkov1", "gpu", 41.00),
    ("inception3", 2, "avolkov1", "cpu", 50.10), ("inception3", 2, "avolkov1", "gpu", 55.57),
    ("inception3", 4, "avolkov1", "cpu", 64.05), ("inception3", 4, "avolkov1", "gpu", 32.23),
    ("inception3", 6, "avolkov1", "cpu", 65.37), ("inception3", 6, "avolkov1", "gpu", 21.33),
    ("resnet50", 1, "kuza55", "gpu", 54.52), ("resnet50", 2, "kuza55", "cpu", 55.09),
    ("resnet50", 2, "kuza55", "gpu", 67.34), ("resnet50", 4, "kuza55", "cpu", 66.55),
    ("resnet50", 4, "kuza55", "gpu", 33.29), ("resnet50", 6, "kuza55", "cpu", None),
    ("resnet50", 6, "kuza55", "gpu", None), ("resnet50", 1, "avolkov1", "gpu", 58.19),
    ("resnet50", 2, "avolkov1", "cpu", 56.02), ("resnet50", 2, "avolkov1", "gpu", 66.90),
    ("resnet50", 4, "avolkov1", "cpu", 67.33), ("resnet50", 4, "avolkov1", "gpu", 33.43),
    ("resnet50", 6, "avolkov1", "cpu", 68.21), ("resnet50", 6, "avolkov1", "gpu", 21.56),
]  # fmt: skip


def _keras_rows(records):
    return [
        (r.params["model"], r.params["workers"], r.tags["parallelization_method"], r.tags["parameter_server"],
         r.metrics.get("throughput_total"))
        for r in records
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "expected", "device"), [(KERAS_AZ, KERAS_AZ_RUNS, "M60"), (KERAS_7G, KERAS_7G_RUNS, "GTX 1070")]
)
def test_keras_logs_give_every_run_with_its_final_samples_per_sec(path, expected, device):
    assert detect(path) == "keras_mgpu"
    records = read_logs([path], options(platform="machine"))
    assert _keras_rows(records) == expected
    for rec in records:
        rec.validate()
        assert rec.params["device"] == device and rec.params["epochs"] == 5 and rec.params["data"] == "synthetic"
        assert (
            rec.params["variable_update"] == f"{rec.tags['parallelization_method']} (ps {rec.tags['parameter_server']})"
        )
        # `batch_size: 32` is the global batch, sliced over the GPUs
        gpus = rec.params["workers"]
        assert rec.params["batch_per_worker"] == (32 // gpus if 32 % gpus == 0 else NOT_STATED)
        assert rec.tags["batch_global"] == "32"
        if rec.status == "FINISHED":
            # 5 per-epoch running medians, then the one after training (the stored one) on the source line
            assert len(rec.tags["samples_per_sec_by_epoch"].split(", ")) == 5
            line = int(rec.tags["source_line"].rsplit(":", 1)[1])
            assert f"Samples/sec: {rec.metrics['throughput_total']:.2f}" in raw_lines(path)[line - 1]


def test_keras_runs_without_a_shell_trace_split_at_their_headers(tmp_path):
    for path, expected in ((KERAS_AZ, KERAS_AZ_RUNS), (KERAS_7G, KERAS_7G_RUNS)):
        bare = tmp_path / path.name
        bare.write_bytes(b"".join(line for line in path.read_bytes().splitlines(keepends=True) if line[:1] != b"+"))
        records = read_logs([bare], options(platform="machine"))
        assert _keras_rows(records) == expected
        assert {r.params["device"] for r in records} == {"M60" if path == KERAS_AZ else "GTX 1070"}


def test_keras_failed_runs_are_failed_with_their_reason():
    records = read_logs([KERAS_7G], options(platform="7gforce"))
    failed = [r for r in records if r.status == "FAILED"]
    assert [(r.params["model"], r.params["workers"], r.tags["parameter_server"]) for r in failed] == [
        ("inception3", 6, "cpu"), ("inception3", 6, "gpu"), ("resnet50", 6, "cpu"), ("resnet50", 6, "gpu")
    ]  # fmt: skip
    lines = raw_lines(KERAS_7G)
    for rec in failed:
        assert "throughput_total" not in rec.metrics
        assert "InvalidArgumentError: Incompatible shapes: [32] vs. [30]" in rec.tags["failure_reason"]
        line = int(rec.tags["failure_reason"].rsplit(":", 1)[1].rstrip(")"))
        assert "Incompatible shapes" in lines[line - 1]
        assert line > int(rec.where.rsplit(":", 1)[1])  # the run's own traceback, after its start
    assert len(records) + len(read_logs([KERAS_AZ], options(platform="az"))) == 40


def test_keras_log_cut_short_is_an_error_naming_its_last_line(tmp_path):
    lines = raw_lines(KERAS_AZ)
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(lines[:90]) + "\n")  # inside run 2's epochs (its first 'Samples/sec' is at line 88)
    with pytest.raises(SchemaError, match=r"cut\.txt:90: the run starting at line 49 stops after 1 of 6"):
        read_logs([cut], options(platform="az"))


# ------------------------------------------------------------------------------------------------------------------
# tf_cnn_benchmarks --benchmark_log_dir, DLLogger, MLPerf


def test_tf_cnn_json_folder_gives_its_average_examples_per_sec():
    (rec,) = read_logs([TF_JSON.parent], options())
    rec.validate()
    assert rec.metrics == {"throughput_total": 132.37791654965747}
    # no --platform: the machine benchmark.log:1's machine_config describes (gpu_info count 4, model GeForce GTX
    # 980 Ti; cpu_info Intel(R) Xeon(R) CPU E7-4830 v3 @ 2.10GHz); the run used one of its GPUs
    assert rec.params == {
        "model": "resnet50", "framework": "tensorflow", "api": "tf_cnn_benchmarks", "workers": 1,
        "device": "GTX 980 Ti", "data": "synthetic", "batch_per_worker": 64,
        "platform": "4x GeForce GTX 980 Ti, Intel(R) Xeon(R) CPU E7-4830 v3 @ 2.10GHz",
    }  # fmt: skip
    assert rec.tags["machine_gpus"] == "4"
    # the run's key is its files' content (their text), not the folder's name
    digest = hashlib.sha256()
    for name in ("benchmark.log", "metric.log"):
        data = log_text((TF_JSON / name).read_bytes())
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    assert rec.tags["source_line"] == "metric.log:52" and rec.key == f"sha256:{digest.hexdigest()}"
    # the same run whether the folder, the file or the folder above is given; --platform wins over the log
    again = read_logs([TF_JSON / "metric.log"], options(platform="fh2"))[0]
    assert again.metrics == rec.metrics and again.key == rec.key and again.params["platform"] == "fh2"


def test_tf_cnn_json_cut_short_is_an_error(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(TF_JSON, folder)
    lines = (folder / "metric.log").read_text().split("\n")
    (folder / "metric.log").write_text("\n".join(lines[:40]) + '\n{"timestamp": "2019-03-31T08:1')
    with pytest.raises(SchemaError, match=r"metric\.log:41: not a JSON line"):
        read_logs([folder], options(platform="fh2"))
    (folder / "metric.log").write_text("\n".join(lines[:40]) + "\n")
    with pytest.raises(SchemaError, match=r"metric\.log:40: no 'average_examples_per_sec' entry"):
        read_logs([folder], options(platform="fh2"))


def test_dllogger_excerpt_gives_the_last_epoch_total_ips(tmp_path):
    (rec,) = read_logs([DLL_EXCERPT], options(platform="dgx", device="A100"))
    rec.validate()
    assert rec.metrics["throughput_total"] == 7766.159344405196
    assert rec.tags["source_line"] == f"{DLL_EXCERPT.name}:68" and rec.tags["throughput_epoch"] == "1"
    assert (rec.params["workers"], rec.params["batch_per_worker"], rec.params["model"]) == (8, 128, "resnet50")
    assert rec.params["data"] == "real" and rec.params["framework"] == "pytorch"
    # `workers` of the PARAMETER line counts data-loader processes: the GPUs are world_size
    changed = tmp_path / "raport.json"
    changed.write_text(DLL_EXCERPT.read_text().replace('"workers": 8,', '"workers": 5,', 1))
    assert read_logs([changed], options(platform="dgx", device="A100"))[0].params["workers"] == 8
    # the device is in no DLLogger line
    with pytest.raises(SchemaError, match=r"raport\.EXCERPT_lines_1-69\.json:1: .*device: give it with --device"):
        read_logs([DLL_EXCERPT], options(platform="dgx"))


def test_dllogger_evaluation_only_log_is_refused():
    with pytest.raises(SchemaError, match=r"experiment_raport\.json:1: an evaluation-only run .*no training"):
        read_logs([DLL_EVAL], options(platform="dgx", device="A100"))


def test_dllogger_epoch_that_never_ends_is_an_error(tmp_path):
    lines = DLL_EXCERPT.read_text().split("\n")
    cut = tmp_path / "cut.json"
    cut.write_text("\n".join(lines[:66]) + "\n")  # epoch 1's iterations, not its end-of-epoch lines
    with pytest.raises(SchemaError, match=r"cut\.json:66: epoch 1 started \(line \d+\) and did not end"):
        read_logs([cut], options(platform="dgx", device="A100"))


def test_mlperf_result_with_its_system_description():
    (rec,) = read_logs([LOGS / "mlperf"], options())
    rec.validate()
    assert round(rec.metrics["throughput_run"], 1) == 26001.6  # 35 x 1281167 / 1724.542 s
    assert round(rec.metrics["throughput_total"], 1) == 26233.0  # over the epochs only: 1709.331 s
    assert rec.metrics["time_total_s"] == pytest.approx(1724.542)
    assert rec.metrics["time_init_s"] == pytest.approx(29.596)
    assert rec.metrics["accuracy_test"] == 0.76066
    assert rec.tags["training_seconds"] == "1709.331"
    assert rec.params | {} == {
        "model": "resnet50", "framework": "mxnet", "api": "mlperf", "workers": 8, "device": "A100", "data": "real",
        "batch_per_worker": 408, "platform": "dgxa100_ngc21.05_mxnet", "epochs": 35,
    }  # fmt: skip
    assert rec.status == "FINISHED" and rec.tags["source_line"] == "result_0.txt:1393"
    assert rec.key == f"sha256:{log_text_sha256(MLPERF_RESULT)}"  # its text, not its name (all are result_N.txt)
    # where each number was read: the log (d_batch_size at 433 gives 3264 / 408 = 8 GPUs: the log's own count
    # wins over the system file's 1 x 8) and the system description (accelerator_model_name at its line 21)
    lines = dict(item.split(": ", 1) for item in rec.tags["source_lines"].split("; "))
    assert lines["workers"] == "result_0.txt:433" and lines["device"] == "dgxa100_ngc21.05_mxnet.json:21"
    # the system file says "MXNet NVIDIA Release 21.05" (its line 31); the log names mxnet itself first at line 246
    # (DALI's "`mxnet_reader` is now deprecated"), and the log's own facts win
    assert lines["framework"] == "result_0.txt:246"


def test_mlperf_without_system_description_aborted_and_cut_short(tmp_path):
    text = MLPERF_RESULT.read_text()
    alone = tmp_path / "result_0.txt"
    alone.write_text(text)
    # the device and the platform were in the system description and its layout only; the framework is named in
    # the log's own text too (line 246: DALI's `mxnet_reader`)
    with pytest.raises(SchemaError, match=r"result_0\.txt:7: the log does not say the run's device: give it"):
        read_logs([alone], options(platform="dgx"))
    with pytest.raises(SchemaError, match=r"result_0\.txt:7: the log does not say the run's platform: give it"):
        read_logs([alone], options(device="A100"))
    (rec,) = read_logs([alone], options(platform="dgx", device="A100"))
    assert rec.params["workers"] == 8  # global_batch_size 3264 / d_batch_size 408
    assert rec.params["framework"] == "mxnet"
    assert read_logs([alone], options(platform="dgx", device="A100", framework="pytorch"))[0].params["framework"] == (
        "pytorch"
    )  # an option wins over the log
    aborted = tmp_path / "aborted.txt"
    aborted.write_text(text.replace('"status": "success"', '"status": "aborted"'))
    (rec,) = read_logs([aborted], options(platform="dgx", framework="mxnet", device="A100"))
    assert rec.status == "FAILED" and "aborted" in rec.tags["failure_reason"]
    assert round(rec.metrics["throughput_run"], 1) == 26001.6
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(text.split("\n")[:1000]) + "\n")
    with pytest.raises(SchemaError, match=r"cut\.txt:1000: the log has no run_stop: the run stopped mid-way"):
        read_logs([cut], options(platform="dgx", framework="mxnet", device="A100"))


# ------------------------------------------------------------------------------------------------------------------
# Horovod synthetic benchmark (no real sample here: written from the examples' print statements)

HOROVOD_SYNTHETIC = """\
Model: resnet50
Batch size: 64
Number of GPUs: 4
Running warmup...
Running benchmark...
Iter #0: 410.2 img/sec per GPU
Iter #1: 412.0 img/sec per GPU
Img/sec per GPU: 411.1 +-1.8
Total img/sec on 4 GPU(s): 1644.4 +-7.1
Model: vgg16
Batch size: 32
Number of GPUs: 4
Running warmup...
"""


def test_horovod_synthetic_runs_and_a_run_cut_short(tmp_path):
    log = tmp_path / "hvd.out"
    complete = "".join(HOROVOD_SYNTHETIC.splitlines(keepends=True)[:9])
    log.write_text("".join(f"[1,0]<stdout>:{line}" for line in complete.splitlines(keepends=True)))
    assert detect(log) == "horovod_synthetic"
    (rec,) = read_logs([log], options(platform="p", device="P100", framework="pytorch"))
    rec.validate()
    assert rec.metrics == {"throughput_total": 1644.4, "throughput_per_worker": 411.1}
    assert (rec.params["workers"], rec.params["batch_per_worker"]) == (4, 64)
    assert rec.tags["source_line"] == "hvd.out:9"
    with pytest.raises(SchemaError, match=r"hvd\.out:1: the log does not say the run's framework"):
        read_logs([log], options(platform="p", device="P100"))
    log.write_text(HOROVOD_SYNTHETIC)
    with pytest.raises(SchemaError, match=r"hvd\.out:13: the run starting at line 10 stops before its 'Total"):
        read_logs([log], options(platform="p", device="P100", framework="pytorch"))


# ------------------------------------------------------------------------------------------------------------------
# Detection and bad input


def test_unknown_and_binary_files_are_refused(tmp_path):
    text = tmp_path / "notes.log"
    text.write_text("some notes\nnothing a benchmark printed\n")
    with pytest.raises(SchemaError, match=r"notes\.log:1: not a log format this importer knows"):
        read_logs([text], options())
    binary = tmp_path / "run.log"
    binary.write_bytes("total images/sec: 1\n".encode("utf-16"))
    with pytest.raises(SchemaError, match=r"run\.log:1: a NUL byte"):
        read_logs([binary], options())
    with pytest.raises(SchemaError, match="no such file or folder"):
        read_logs([tmp_path / "missing.txt"], options())


def test_device_names():
    names = ("Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB (400W)", "GeForce GTX 1070", "Tesla M60", "Tesla K80")
    assert [device_name(n) for n in names] == ["V100", "A100", "GTX 1070", "M60", "K80"]


# ------------------------------------------------------------------------------------------------------------------
# The command, on a real SQLite store


def test_cli_in_process_with_failed_runs_and_guards(empty_store, tmp_path, monkeypatch, capsys):
    uri = empty_store  # tmp_path/store.db, its tables made
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["logs", str(KERAS_7G), "--experiment", "mine", "--platform", "7gforce"]) == 0
    assert "28 runs (4 failed) from 1 file(s)" in capsys.readouterr().out
    runs = load_runs(uri)
    assert (runs["status"] == "FAILED").sum() == 4 and len(runs) == 28
    failed = runs[runs["status"] == "FAILED"]
    assert failed["throughput_total"].isna().all() and failed["failure_reason"].str.contains("Incompatible").all()
    # the study's own experiments are refused by name; another program's runs are never deleted
    assert main(["logs", str(KERAS_7G), "--experiment", "hacksa-2019", "--platform", "x"]) == 2
    assert "belongs to the study's own runs" in capsys.readouterr().err
    other = read_logs([KERAS_AZ], LogOptions(source=user_source("theirs"), platform="az"))
    sync_experiment("theirs", other, uri)  # written by another program: no imported_by tag
    before = sha256(tmp_path / "store.db")
    assert main(["logs", str(KERAS_7G), "--experiment", "theirs", "--platform", "x"]) == 2
    assert "holds 12 run(s) that `python -m scalestudy.ingest logs` did not write" in capsys.readouterr().err
    assert sha256(tmp_path / "store.db") == before
    # a required param nobody gives
    assert main(["logs", str(KERAS_7G), "--experiment", "mine"]) == 2
    assert f"{KERAS_7G}:5: the log does not say the run's platform: give it with --platform" in capsys.readouterr().err
