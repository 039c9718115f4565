"""ingest/logs/tf_cnn_json.py in this process: every tag, param and time of the real --benchmark_log_dir folder in
../shared/reference/logs (read by hand: file:line in the comments), and each refusal as its exact line, on a copy
of the folder edited where the real one takes the other branch (said so at each edit)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import REPO, shared_reference

from scalestudy.ingest.logs import LogOptions, user_source
from scalestudy.ingest.logs.tf_cnn_json import _machine, _run_parameters, parse, sniff
from scalestudy.schema import SchemaError

REAL = ((shared_reference("logs") or REPO / "absent") / "logs" / "tf_cnn_benchmarks_json"
        / "fh2_singularity_500batch_synthetic_resnet50_1_gpu_1")  # fmt: skip
pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} is not here")]


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **given)


def test_real_folder_every_tag_and_time():
    (rec,) = parse(REAL, options())
    tags = {
        k: v
        for k, v in rec.tags.items()
        if k not in ("log_path", "log_sha256", "log_bytes_sha256", "mlflow.note.content")
    }
    assert tags == {
        "batch_global": "64",  # benchmark.log:1 run_parameters batch_size long_value 64
        "citation": "benchmark logs imported into logs-test",
        "dataset": "logs-test",
        "device_name": "GeForce GTX 980 Ti",  # machine_config.gpu_info.model
        "log_file": "metric.log",
        "log_format": "tf_cnn_json",
        "machine_gpus": "4",  # gpu_info.count: the machine's, not the run's
        "num_batches": "500",
        "source": "yours",
        "source_line": "metric.log:52",  # the last average_examples_per_sec
        "source_lines": "throughput_total: metric.log:52; model, batch, workers, device: benchmark.log:1",
        "source_url": "",
        "tensorflow_version": "1.10.0",
    }
    assert rec.metrics == {"throughput_total": 132.37791654965747}  # metric.log:52
    # no --platform: the machine machine_config describes; the one GPU the run used (batch 64 / 64 per device)
    assert rec.params == {
        "model": "resnet50", "framework": "tensorflow", "api": "tf_cnn_benchmarks", "workers": 1,
        "device": "GTX 980 Ti", "data": "synthetic", "batch_per_worker": 64,
        "platform": "4x GeForce GTX 980 Ti, Intel(R) Xeon(R) CPU E7-4830 v3 @ 2.10GHz",
    }  # fmt: skip
    # benchmark.log's run_date 2019-03-31T08:10:32.282327Z; metric.log:52's timestamp 2019-03-31T08:15:01.063567Z
    assert (rec.start_ms, rec.end_ms) == (1554019832282, 1554020101064)
    assert rec.where == f"{REAL / 'benchmark.log'}:1" and rec.status == "FINISHED"
    assert "`metric.log` line 52 (tf_cnn_benchmarks --benchmark_log_dir output" in rec.tags["mlflow.note.content"]
    assert "variable_update" not in rec.params  # run_parameters hold none
    # whole numbers (stored as MLflow params '1' and '64', not '1.0'): 64 // 64
    assert type(rec.params["workers"]) is int and type(rec.params["batch_per_worker"]) is int


@pytest.fixture()
def folder(tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(REAL, copy)
    return copy


def edit_meta(folder: Path, change) -> None:
    bench = folder / "benchmark.log"
    meta = json.loads(bench.read_text().split("\n")[0])
    change(meta)
    bench.write_text(json.dumps(meta) + "\n")


def set_param(name: str, **value):
    def change(meta):
        meta["run_parameters"] = [p for p in meta["run_parameters"] if p["name"] != name] + [{"name": name, **value}]

    return change


def refused(folder: Path, pattern: str, **given) -> None:
    with pytest.raises(SchemaError, match=pattern):
        parse(folder, options(platform="p", **given))


def test_metadata_refusals(folder):
    b = str(folder / "benchmark.log").replace(".", r"\.")
    edit_meta(folder, set_param("mode", string_value="forward-only"))
    refused(folder, rf"^{b}:1: a 'forward-only' run: only training runs have a training throughput$")
    edit_meta(folder, set_param("mode", string_value="training"))
    edit_meta(folder, set_param("batch_size_per_device", float_value=48.0))
    refused(folder, rf"^{b}:1: batch_size_per_device 48 does not divide batch_size 64$")
    edit_meta(folder, set_param("batch_size_per_device", float_value=0.0))
    refused(folder, rf"^{b}:1: batch_size_per_device 0 does not divide batch_size 64$")
    edit_meta(folder, set_param("batch_size_per_device", string_value="many"))
    refused(folder, rf"^{b}:1: run_parameters lack a whole batch_size and batch_size_per_device$")
    edit_meta(folder, set_param("batch_size_per_device", float_value=32.0))
    (rec,) = parse(folder, options(platform="p"))
    assert rec.params["workers"] == 2 and rec.params["batch_per_worker"] == 32  # 64 / 32: two devices
    edit_meta(folder, set_param("variable_update", string_value="horovod"))
    view = r"one rank's view \(its batch and its throughput\), not the job's: import the ranks' text output instead$"
    refused(folder, rf"^{b}:1: a horovod run's benchmark log holds {view}")
    edit_meta(folder, set_param("variable_update", string_value="replicated"))
    assert parse(folder, options(platform="p"))[0].params["variable_update"] == "replicated"

    def no_model(meta):
        del meta["model_name"]
        meta["run_parameters"] = [p for p in meta["run_parameters"] if p["name"] != "model"]

    edit_meta(folder, no_model)
    refused(folder, rf"^{b}:1: no model_name in the run's metadata$")
    edit_meta(folder, set_param("model", string_value="resnet50"))  # run_parameters' model stands in
    assert parse(folder, options(platform="p"))[0].params["model"] == "resnet50"
    edit_meta(folder, lambda meta: meta.update(run_date="31 March"))
    refused(folder, rf"^{b}:1: timestamp '31 March' is not 'YYYY-MM-DDTHH:MM:SS.ffffffZ'$")
    edit_meta(folder, lambda meta: meta.pop("run_date"))
    rec = parse(folder, options(platform="p"))[0]
    assert (rec.start_ms, rec.end_ms) == (None, None)


def test_files_refusals(folder):
    m = str(folder / "metric.log").replace(".", r"\.")
    b = str(folder / "benchmark.log").replace(".", r"\.")
    lines = (folder / "metric.log").read_text().split("\n")
    (folder / "metric.log").write_text("\n".join(lines[:3] + ["[1, 2]"] + lines[3:]))
    refused(folder, rf"^{m}:4: a JSON line that is not an object$")
    (folder / "metric.log").write_text("\n".join(lines[:3] + ['{"name": "x", "value": 1}'] + lines[3:]))
    refused(folder, rf"^{m}:4: metric entry lacks \['global_step', 'timestamp'\]$")
    line52 = json.loads(lines[51])
    for bad, shown in (("fast", "'fast'"), (True, "True")):
        (folder / "metric.log").write_text("\n".join(lines[:51] + [json.dumps({**line52, "value": bad})] + lines[52:]))
        refused(folder, rf"^{m}:52: average_examples_per_sec {shown} is not a number$")
    (folder / "metric.log").write_text("\n".join(lines[:51] + [json.dumps({**line52, "timestamp": 5})] + lines[52:]))
    refused(folder, rf"^{m}:52: timestamp '5' is not 'YYYY-MM-DDTHH:MM:SS.ffffffZ'$")
    (folder / "metric.log").write_text("")
    refused(
        folder, rf"^{m}:1: no 'average_examples_per_sec' entry: the run stopped before its end \(a log cut short\?\)$"
    )
    (folder / "metric.log").write_text("\n".join(lines))
    (folder / "benchmark.log").write_text("")
    refused(folder, rf"^{b}:1: empty \(expected the run's metadata as one JSON line\)$")
    (folder / "benchmark.log").unlink()
    refused(folder, rf"^{b}: missing \(a --benchmark_log_dir folder has benchmark.log and metric.log\)$")
    (folder / "metric.log").unlink()
    refused(folder, rf"^{m}: missing ")


def test_devices_and_machine(folder):
    edit_meta(folder, set_param("devices", string_value="['/cpu:0']"))
    (rec,) = parse(folder, options(platform="p"))
    assert rec.params["device"] == "cpu" and "device_name" not in rec.tags and rec.tags["machine_gpus"] == "4"
    edit_meta(folder, lambda meta: meta.update(dataset={"name": "imagenet"}))
    assert parse(folder, options(platform="p"))[0].params["data"] == "real"
    assert _machine({"gpu_info": {"model": "K80"}}) == "K80"
    assert _machine({"cpu_info": {"cpu_info": " Xeon   E5 "}}) == "Xeon E5"
    assert _machine({}) is None
    assert _run_parameters({"run_parameters": [{"name": "a", "bool_value": True}, {"name": "b"}, "x", {"x": 1}]}) == {
        "a": True,
        "b": None,
    }


def test_sniff():
    metric = '{"name": "current_examples_per_sec", "value": 1, "global_step": 1, "timestamp": "t"}'
    assert sniff([metric]) and sniff(['{"model_name": "x", "run_parameters": []}'])
    assert not sniff(['{"name": "loss", "value": 1, "global_step": 1, "timestamp": "t"}', "not json"])
    assert not sniff(["[]"] * 5 + [metric])  # only the first five lines are looked at


def test_defaults_and_devices(folder, monkeypatch):
    import time

    def drop(name: str):
        def change(meta):
            meta["run_parameters"] = [p for p in meta["run_parameters"] if p["name"] != name]

        return change

    edit_meta(folder, drop("mode"))  # no mode: a training run
    edit_meta(folder, drop("devices"))  # no devices: the GPU machine_config names
    edit_meta(folder, set_param("batch_size_per_device", float_value=1.0))  # 64 devices of 1 image
    (rec,) = parse(folder, options(platform="p"))
    assert (rec.params["device"], rec.params["workers"], rec.params["batch_per_worker"]) == ("GTX 980 Ti", 64, 1)
    edit_meta(folder, set_param("devices", string_value="['/cpu:0', '/gpu:0']"))  # a GPU among them: not cpu
    assert parse(folder, options(platform="p"))[0].params["device"] == "GTX 980 Ti"
    # the times are UTC whatever the machine's zone
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert parse(folder, options(platform="p"))[0].start_ms == 1554019832282
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_json_lines_refused_and_blank_lines_skipped(folder):
    b = str(folder / "benchmark.log").replace(".", r"\.")
    m = str(folder / "metric.log").replace(".", r"\.")
    lines = (folder / "metric.log").read_text().split("\n")
    (folder / "metric.log").write_text("\n".join(lines[:3] + ["", "  "] + lines[3:]))
    assert parse(folder, options(platform="p"))[0].tags["source_line"] == "metric.log:54"  # :52, two lines down
    (folder / "metric.log").write_text("\n".join(lines[:3] + ['{"name": "x", "value": 1,'] + lines[3:]))
    refused(folder, rf"^{m}:4: not a JSON line \(cut short\?\): Expecting property name enclosed in double quotes$")
    (folder / "benchmark.log").write_text("not json\n")
    refused(folder, rf"^{b}:1: not a JSON line \(cut short\?\): Expecting value$")


MACHINE = "4x GeForce GTX 980 Ti, Intel(R) Xeon(R) CPU E7-4830 v3 @ 2.10GHz"  # benchmark.log:1 machine_config


def test_given_options_win_and_keep_the_logs_values_in_tags():
    (rec,) = parse(REAL, options(framework="pytorch", device="K80", data="real", platform="p"))
    assert {k: rec.params[k] for k in ("framework", "device", "data", "platform")} == {
        "framework": "pytorch", "device": "K80", "data": "real", "platform": "p",
    }  # fmt: skip
    # the log's own: tensorflow (the format's), GTX 980 Ti (gpu_info.model), synthetic (dataset.name 'imagenet
    # (synthetic)'), the machine machine_config describes
    digests = ("log_path", "log_sha256", "log_bytes_sha256")
    assert {k: v for k, v in rec.tags.items() if k.startswith("log_") and k not in digests} == {
        "log_format": "tf_cnn_json", "log_file": "metric.log", "log_framework": "tensorflow",
        "log_device": "GTX 980 Ti", "log_data": "synthetic", "log_platform": MACHINE,
    }  # fmt: skip
    # the same values given: no log_ tag
    (same,) = parse(REAL, options(framework="tensorflow", device="GTX 980 Ti", data="synthetic", platform=MACHINE))
    assert not {"log_framework", "log_device", "log_data", "log_platform"} & same.tags.keys()


def test_values_the_log_does_not_say_need_their_option(folder):
    b = str(folder / "benchmark.log").replace(".", r"\.")
    # a copy without gpu_info.model (no device), then without a dataset anywhere (no data), then without
    # machine_config (no platform): each refusal names the option that supplies the value
    edit_meta(folder, lambda meta: meta["machine_config"]["gpu_info"].pop("model"))
    with pytest.raises(SchemaError, match=rf"^{b}:1: the log does not say the run's device: give it with --device$"):
        parse(folder, options())
    (rec,) = parse(folder, options(device="K80"))
    assert (
        rec.params["platform"]
        == "Intel(R) Xeon(R) CPU E7-4830 v3 @ 2.10GHz"  # the CPU alone and "device_name" not in rec.tags
    )

    def no_dataset(meta):
        del meta["dataset"]
        meta["run_parameters"] = [p for p in meta["run_parameters"] if p["name"] != "dataset"]

    edit_meta(folder, no_dataset)
    with pytest.raises(SchemaError, match=rf"^{b}:1: the log does not say the run's data: give it with --data$"):
        parse(folder, options(device="K80"))
    edit_meta(folder, lambda meta: meta.update(machine_config={}))
    with pytest.raises(SchemaError, match=rf"^{b}:1: the log does not say the run's platform: give it with --platform"):
        parse(folder, options(device="K80", data="real"))
    (rec,) = parse(folder, options(device="K80", data="real", platform="p"))
    assert "machine_gpus" not in rec.tags and rec.params["device"] == "K80"


def test_metadata_variants(folder):
    b = str(folder / "benchmark.log").replace(".", r"\.")
    # run_parameters' dataset stands in for a missing dataset.name (run_parameters: 'imagenet (synthetic)')
    edit_meta(folder, lambda meta: meta.pop("dataset"))
    assert parse(folder, options(platform="p"))[0].params["data"] == "synthetic"
    edit_meta(folder, set_param("dataset", string_value="imagenet"))
    assert parse(folder, options(platform="p"))[0].params["data"] == "real"
    # model_name alone (run_parameters without model), then a model no table knows: the error names benchmark.log:1
    edit_meta(
        folder, lambda meta: meta.update(run_parameters=[p for p in meta["run_parameters"] if p["name"] != "model"])
    )
    assert parse(folder, options(platform="p"))[0].params["model"] == "resnet50"
    edit_meta(folder, lambda meta: meta.update(model_name="resnet9000"))
    with pytest.raises(SchemaError, match=rf"^{b}:1: unknown model name 'resnet9000' \(known: "):
        parse(folder, options(platform="p"))
    edit_meta(folder, lambda meta: meta.update(model_name="ResNet50"))  # spelled otherwise: canonical
    assert parse(folder, options(platform="p"))[0].params["model"] == "resnet50"
    # tensorflow_version absent or not an object: no tag
    edit_meta(folder, lambda meta: meta.pop("tensorflow_version"))
    assert "tensorflow_version" not in parse(folder, options(platform="p"))[0].tags
    edit_meta(folder, lambda meta: meta.update(tensorflow_version="1.10.0"))
    assert "tensorflow_version" not in parse(folder, options(platform="p"))[0].tags
    # a run_date with another letter than Z at its end is refused (only a trailing Z is stripped)
    edit_meta(folder, lambda meta: meta.update(run_date="2019-03-31T08:10:32.282327X"))
    with pytest.raises(SchemaError, match=rf"^{b}:1: timestamp '2019-03-31T08:10:32\.282327X' is not "):
        parse(folder, options(platform="p"))
    edit_meta(folder, lambda meta: meta.update(run_date="2019-03-31T08:10:32.282327"))  # no Z: the same time
    assert parse(folder, options(platform="p"))[0].start_ms == 1554019832282
