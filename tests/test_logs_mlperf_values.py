"""ingest/logs/mlperf.py and mlperf_system.py in this process (the `logs` importer's reader of MLPerf training
result logs and of the system description beside them): every metric, param and tag the reader writes, each
against a value worked out by hand from the real files of experiments/reference/mlperf-training-resnet (fetched
from the mirror by raw_files_of; file:line in the comments, the sums of epoch intervals added up over the logs'
integer ms stamps, as grep '"key": "epoch_st' shows them). Where a branch has no real sample (a SYSJSON line that
is not JSON, a log without a run_stop status, a line removed, a system file beside another log), the test writes
an adapted copy of a real file to tmp_path and says how it was made.

The tests named `*_new_*` check what changed after 8bf9dd3 (the platform's source line names its folder, block_stop
lines that close no block_start are a warning where the epochs are read): leave them out (-k 'not _new_') when
trying the mutants of 8bf9dd3."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import raw_files_of

from scalestudy.ingest.logs import LogOptions, user_source
from scalestudy.ingest.logs import mlperf as mp
from scalestudy.ingest.logs.mlperf_system import (
    _line_of,
    _spelling,
    frameworks_named,
    read_system,
    system_facts,
    system_file,
)
from scalestudy.schema import SchemaError

ALIBABA = "v0.7/Alibaba/results/v100-1280/result_1.txt"  # time_s, aborted; no system file in the layout
SMC = "v4.0/smc/results/1xSMC-H100-SXM-80GB/resnet/result_4955-240510092530204754245_1.txt"  # its :::SYSJSON line
SMC_SYSTEM = "v4.0/smc/systems/1xSMC-H100-SXM-80GB.json"
DELL = "v2.0/Dell/results/XE8545x4A100-SXM-40GB/resnet/result_0.txt"
DELL_SYSTEM = "v2.0/Dell/systems/XE8545x4A100-SXM-40GB.json"  # framework names MXNet, PyTorch and TensorFlow
DELLEMC_SYSTEM = "v0.7/DellEMC/systems/C4140.json"  # "number of nodes"
TRAILING = "v0.7/Alibaba/systems/n32_pai_eflops.json"  # a trailing comma (line 35)
HABANA = "v1.1/Intel-HabanaLabs/results/HLS-1H-N2/resnet/result_0.txt"  # blocks only, 69 lines
HABANA_SYSTEM = "v1.1/Intel-HabanaLabs/systems/HLS-1H-N2.json"
PCL = "v1.0/PCL/results/CloudBrainII_256_mindspore_close/resnet/result_0.txt"  # a block_start per epoch
PCL_SYSTEM = "v1.0/PCL/systems/CloudBrainII_256_mindspore_close.json"
IMAGES = 1281167  # train_samples of every log here
SECONDS = 1e-9


@pytest.fixture(scope="module")
def files():
    return raw_files_of(
        "mlperf-training-resnet",
        ALIBABA,
        SMC,
        SMC_SYSTEM,
        DELL,
        DELL_SYSTEM,
        DELLEMC_SYSTEM,
        TRAILING,
        HABANA,
        HABANA_SYSTEM,
        PCL,
        PCL_SYSTEM,
    )


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **given)


def source_lines(rec) -> dict[str, str]:
    return dict(item.split(": ", 1) for item in rec.tags["source_lines"].split("; "))


def copy(tmp_path: Path, src: Path, rel: str, edit=lambda text: text) -> Path:
    dest = tmp_path / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(edit(src.read_text()))
    return dest


# --------------------------------------------------------------------------------------------------------------
# v0.7 Alibaba v100-1280: time_s stamps, an aborted run, no system file, no framework named in its text


def test_alibaba_time_s_aborted_run_every_value(files):
    path = files[ALIBABA]
    (rec,) = mp.parse(path, options(workers=1280, device="V100", framework="mxnet", platform="pai"))
    rec.validate()
    # :1293 run_start 1593422672.835, :1535 run_stop 1593422775.122 (status aborted): 102.287 s; the 71
    # epoch_start -> epoch_stop intervals (:1304 .. :1530) sum to 97733 ms; :11 the first init_start 1593422652.569
    # (:14 logs .568 later in the file: the first line counts); :1533 the last eval_accuracy 0.759
    want = {
        "throughput_total": 71 * IMAGES / 97.733,
        "throughput_run": 71 * IMAGES / 102.287,
        "time_total_s": 102.287,
        "time_init_s": 20.266,
        "accuracy_test": 0.759,
    }
    assert set(rec.metrics) == set(want)
    for name, value in want.items():
        assert rec.metrics[name] == pytest.approx(value, rel=SECONDS), name
    # global_batch_size 57600 at :10 and again at :1302 (the last is read); 57600 / 1280 = 45
    assert rec.params | {} == {
        "model": "resnet50", "framework": "mxnet", "api": "mlperf", "workers": 1280, "device": "V100",
        "data": "real", "batch_per_worker": 45, "platform": "pai", "epochs": 71,
    }  # fmt: skip
    assert rec.status == "FAILED"
    tags = rec.tags
    assert tags["failure_reason"] == "run_stop status 'aborted': the run did not reach its target (result_1.txt:1535)"
    assert tags["run_stop_status"] == "aborted" and tags["training_seconds"] == "97.733"
    assert tags["throughput_intervals"] == "71 epoch_start -> epoch_stop intervals"
    assert (tags["benchmark"], tags["global_batch_size"], tags["submission_platform"]) == (
        "resnet",
        "57600",
        "PAI_EFLOPS",
    )
    assert tags["source_line"] == "result_1.txt:1530" and tags["log_format"] == "mlperf"
    assert source_lines(rec) == {
        "workers": "result_1.txt:1302", "batch_per_worker": "result_1.txt:1302",
        "throughput_total": "result_1.txt:1530", "throughput_run": "result_1.txt:1535",
        "time_total_s": "result_1.txt:1535", "time_init_s": "result_1.txt:11", "accuracy_test": "result_1.txt:1533",
    }  # fmt: skip
    # no system file, no per-device batch, nothing given differs from the log: none of these tags
    for absent in (
        "import_warning",
        "system_description",
        "system_name",
        "device_name",
        "log_workers",
        "log_framework",
    ):
        assert absent not in tags, absent


def test_alibaba_what_the_log_does_not_say_is_asked_for(files):
    path = files[ALIBABA]
    # the log names no framework in its text and has no system file: each param in turn, at :3 submission_benchmark
    for given, what in (({}, "workers"), ({"workers": 1280}, "device"), ({"workers": 1280, "device": "V100"},
                                                                          "framework")):  # fmt: skip
        with pytest.raises(SchemaError, match=rf"^{path}:3: the log does not say the run's {what}: give it with "
                                              rf"--{what}$"):  # fmt: skip
            mp.parse(path, options(**given))
    with pytest.raises(SchemaError, match=rf"^{path}:1302: global_batch_size 57600 does not divide over 1000 GPUs$"):
        mp.parse(path, options(workers=1000, device="V100", framework="mxnet", platform="p"))


def test_missing_lines_and_another_benchmark(files, tmp_path):
    """Copies of the Alibaba log with one key renamed (line numbers kept): each required line missing, its message
    at the file's last line (1535; its newline at the end starts no line)."""
    src = files[ALIBABA]
    n = 1535
    assert src.read_text().split("\n")[n - 1].endswith('"key": "run_stop", "namespace": "", "time_s": 1593422775.122, '
                                                      '"event_type": "INTERVAL_END" }')  # fmt: skip
    for key in ("submission_benchmark", "run_start", "global_batch_size", "train_samples"):
        cut = copy(tmp_path, src, f"{key}.txt", lambda t, k=key: t.replace(f'"key": "{k}"', f'"key": "x_{k}"'))
        with pytest.raises(SchemaError, match=rf"^{cut}:{n}: no MLLOG '{key}' line$"):
            mp.parse(cut, options(workers=1280, device="V100", framework="mxnet", platform="p"))
    cut = copy(tmp_path, src, "stop.txt", lambda t: t.replace('"key": "run_stop"', '"key": "x_run_stop"'))
    with pytest.raises(SchemaError, match=rf"^{cut}:{n}: the log has no run_stop: the run stopped mid-way \(a log cut "
                                          r"short\?\)$"):  # fmt: skip
        mp.parse(cut, options(workers=1280, device="V100", framework="mxnet", platform="p"))
    bert = copy(tmp_path, src, "bert.txt", lambda t: t.replace('"submission_benchmark", "value": "resnet"',
                                                               '"submission_benchmark", "value": "bert"'))  # fmt: skip
    with pytest.raises(SchemaError, match=rf"^{bert}:3: MLPerf benchmark 'bert': only resnet \(image classification\) "
                                          r"maps to the study's models$"):  # fmt: skip
        mp.parse(bert, options(workers=1280, device="V100", framework="mxnet", platform="p"))


def test_status_not_stated_init_at_run_start_and_accuracies(files, tmp_path):
    """Adapted copies of the Alibaba log: run_stop without `"status": "aborted"` (no real log of this corpus lacks
    it); every init_start stamped as run_start (1593422672.835); the last eval_accuracy 1, 0, 1.5, 75.9 or a
    string."""
    src = files[ALIBABA]
    opts = options(workers=1280, device="V100", framework="mxnet", platform="p")

    def edit(text: str) -> str:
        text = text.replace('"status": "aborted", ', "")
        return text.replace('"init_start", "namespace": "", "time_s": 1593422652.5', '"init_start", "namespace": "", '
                            '"time_s": 1593422672.835, "x": 1.5')  # fmt: skip

    (rec,) = mp.parse(copy(tmp_path, src, "plain.txt", edit), opts)
    assert rec.status == "FINISHED" and rec.tags["run_stop_status"] == "not stated"
    assert "failure_reason" not in rec.tags
    assert "time_init_s" not in rec.metrics and "time_init_s" not in source_lines(rec)
    assert rec.metrics["accuracy_test"] == 0.759
    for value, kept in (("1", 1.0), ("0", 0.0), ("1.5", None), ("75.9", None), ('"0.759"', None)):
        text = src.read_text().replace('"value": 0.759, "key": "eval_accuracy"', f'"value": {value}, "key": '
                                       '"eval_accuracy"')  # fmt: skip
        path = tmp_path / f"acc_{kept}_{len(value)}.txt"
        path.write_text(text)
        (rec,) = mp.parse(path, opts)
        if kept is None:
            assert "accuracy_test" not in rec.metrics and "accuracy_test" not in source_lines(rec), value
        else:
            assert rec.metrics["accuracy_test"] == kept and source_lines(rec)["accuracy_test"] == f"{path.name}:1533"
    # `"status": "SUCCESS"` reads as success
    (rec,) = mp.parse(copy(tmp_path, src, "upper.txt", lambda t: t.replace('"aborted"', '"SUCCESS"')), opts)
    assert rec.status == "FINISHED" and rec.tags["run_stop_status"] == "success"


# --------------------------------------------------------------------------------------------------------------
# v4.0 smc: the log's own :::SYSJSON line, the system file beside it


def test_smc_log_facts_file_facts_and_the_run(files):
    path = files[SMC]
    lines = mp.lines_of(path)
    log = mp._scan(path, lines)
    # :239 d_batch_size 400, :243 global_batch_size 3200: 8 GPUs; :7 :::SYSJSON (":6" is the shell trace's
    # `+ echo ':::SYSJSON ...'`, not read): H100, 1 x 8, "MXNet NVIDIA Release 24.04"; the text names mxnet at :3
    assert mp._frameworks_in_log(lines) == {"mxnet": 3}
    own, warnings, line = mp._sysjson(path, lines)
    assert (warnings, line) == ([], 7)
    assert own == {
        "lines": {"nodes": 7, "accelerators_per_node": 7, "accelerator": 7, "framework": 7},
        "nodes": 1, "accelerators_per_node": 8, "accelerators": 8, "accelerator": "NVIDIA H100-SXM5-80GB",
        "frameworks": ["mxnet"], "framework_text": "MXNet NVIDIA Release 24.04", "system_name": "SMC-H100",
    }  # fmt: skip
    found, warnings = mp._log_facts(path, lines, log, 3200)
    assert warnings == []
    assert found == {"workers": (8, 239), "device": ("NVIDIA H100-SXM5-80GB", 7), "framework": ("mxnet", 7)}
    # systems/1xSMC-H100-SXM-80GB.json: system_name "SMC-H100" (:5), 1 node (:6) x 8 (:20), the H100 (:21),
    # "PyTorch NVIDIA Release 24.04" (:31)
    name = "1xSMC-H100-SXM-80GB.json"
    found, tags, warnings = mp._file_facts(path, lines)
    assert warnings == []
    assert tags == {"system_description": f"systems/{name}", "system_name": "SMC-H100"}
    assert found == {"workers": (8, f"{name}:6"), "device": ("NVIDIA H100-SXM5-80GB", f"{name}:21"),
                     "framework": ("pytorch", f"{name}:31")}  # fmt: skip

    (rec,) = mp.parse(path, options())
    rec.validate()
    # :256 run_start 1715304578940, :417 run_stop 1715305376643 (success): 797.703 s; 35 epochs (:411 the last
    # epoch_stop), their intervals 792962 ms; :54 init_start 1715304526724; :415 eval_accuracy 0.76054
    want = {
        "throughput_total": 35 * IMAGES / 792.962,
        "throughput_run": 35 * IMAGES / 797.703,
        "time_total_s": 797.703,
        "time_init_s": 52.216,
        "accuracy_test": 0.76054,
    }
    assert set(rec.metrics) == set(want)
    for metric, value in want.items():
        assert rec.metrics[metric] == pytest.approx(value, rel=SECONDS), metric
    assert rec.params | {} == {
        "model": "resnet50", "framework": "mxnet", "api": "mlperf", "workers": 8, "device": "H100", "data": "real",
        "batch_per_worker": 400, "platform": "1xSMC-H100-SXM-80GB", "epochs": 35,
    }  # fmt: skip
    assert rec.status == "FINISHED" and "failure_reason" not in rec.tags
    want_tags = {
        "benchmark": "resnet", "global_batch_size": "3200", "system_description": f"systems/{name}",
        "system_name": "SMC-H100", "system_framework": "pytorch", "device_name": "NVIDIA H100-SXM5-80GB",
        "throughput_intervals": "35 epoch_start -> epoch_stop intervals", "training_seconds": "792.962",
        "run_stop_status": "success", "submission_platform": "1xSUBMISSION_PLATFORM_PLACEHOLDER",
        "source_line": f"{path.name}:411",
    }  # fmt: skip
    assert {k: rec.tags.get(k) for k in want_tags} == want_tags
    # the file agrees on the workers (8) and the device: no system_workers nor system_device tag
    assert not {"system_workers", "system_device", "import_warning", "log_workers"} & set(rec.tags)
    lines_used = source_lines(rec)
    lines_used.pop("platform")  # test_platform_line_new_names_its_folder
    f = path.name
    assert lines_used == {
        "workers": f"{f}:239", "batch_per_worker": f"{f}:243", "device": f"{f}:7", "framework": f"{f}:7",
        "throughput_total": f"{f}:411", "throughput_run": f"{f}:417", "time_total_s": f"{f}:417",
        "time_init_s": f"{f}:54", "accuracy_test": f"{f}:415",
    }  # fmt: skip
    assert list(source_lines(rec))[:5] == ["workers", "batch_per_worker", "device", "framework", "platform"]


def test_platform_line_new_names_its_folder(files):
    (rec,) = mp.parse(files[SMC], options())
    assert source_lines(rec)["platform"] == "its folder results/1xSMC-H100-SXM-80GB/"


def test_smc_given_options_win_and_the_log_values_stay_in_tags(files):
    (rec,) = mp.parse(files[SMC], options(workers=4, device="A100", framework="pytorch", platform="mine"))
    assert (rec.params["workers"], rec.params["batch_per_worker"], rec.params["device"]) == (4, 800, "A100")
    assert (rec.params["framework"], rec.params["platform"]) == ("pytorch", "mine")
    assert (rec.tags["log_workers"], rec.tags["log_device"], rec.tags["log_framework"]) == ("8", "H100", "mxnet")
    assert rec.tags["log_platform"] == "1xSMC-H100-SXM-80GB"


def test_sysjson_lines_that_cannot_be_read(files, tmp_path):
    """Copies of the smc log with its :::SYSJSON line (7) cut short, made a JSON list, or prefixed by a rank and
    blanks; and with no :::SYSJSON line left (both renamed): then the system file beside it decides."""
    src = files[SMC]
    lines = src.read_text().split("\n")
    sysjson = lines[6]
    assert sysjson.startswith(":::SYSJSON {") and lines[5].startswith("+ echo ':::SYSJSON {")

    def variant(name: str, line7: str, line6: str | None = None) -> Path:
        new = list(lines)
        new[6] = line7
        if line6 is not None:
            new[5] = line6
        path = tmp_path / name
        path.write_text("\n".join(new))
        return path

    cut = variant("cut.txt", sysjson[:40])  # ':::SYSJSON {"submitter":"SMC","division"'
    assert mp._sysjson(cut, mp.lines_of(cut)) == (
        {}, [f"{cut}:7: the :::SYSJSON line is not valid JSON (Expecting ':' delimiter): not read"], 7
    )  # fmt: skip
    listed = variant("list.txt", ":::SYSJSON [1, 2]")
    assert mp._sysjson(listed, mp.lines_of(listed)) == (
        {}, [f"{listed}:7: the :::SYSJSON line is not a JSON object: not read"], 7
    )  # fmt: skip
    ranked = variant("ranked.txt", "[1,0]<stdout>:   " + sysjson)  # mpirun's prefix, then blanks
    own, warnings, line = mp._sysjson(ranked, mp.lines_of(ranked))
    assert (own["accelerator"], own["accelerators"], warnings, line) == ("NVIDIA H100-SXM5-80GB", 8, [], 7)
    none = variant("none.txt", sysjson.replace(":::SYSJSON", ":::NOTSYS"), lines[5].replace("SYSJSON", "NOTSYS"))
    assert mp._sysjson(none, mp.lines_of(none)) == ({}, [], 0)
    # the warning of a SYSJSON line that is not read reaches the run's import_warning
    log = mp._scan(cut, mp.lines_of(cut))
    found, warnings = mp._log_facts(cut, mp.lines_of(cut), log, 3200)
    assert found == {"workers": (8, 239), "framework": ("mxnet", 3)}  # the log's text names mxnet at :3
    assert len(warnings) == 1


# --------------------------------------------------------------------------------------------------------------
# The system file beside another log: several frameworks, none the log names


def test_a_system_file_naming_several_frameworks_beside_a_log_naming_none(files, tmp_path):
    """The Alibaba log (its text names no framework) copied as `Sub/results/<system>/resnet/result_1.txt` beside
    Dell's XE8545 system file (framework "NGC MXNet 22.05 , NGC PyTorch 22.05 , NGC TensorFlow 22.05-tf1", line
    31; 1 node at :6 x 4 at :20; A100 at :21) as `Sub/systems/<system>.json`."""
    system = "XE8545x4A100-SXM-40GB"
    log = copy(tmp_path, files[ALIBABA], f"Sub/results/{system}/resnet/result_1.txt")
    sys_path = tmp_path / "Sub" / "systems" / f"{system}.json"
    sys_path.parent.mkdir()
    shutil.copyfile(files[DELL_SYSTEM], sys_path)
    assert system_file(log) == sys_path
    found, tags, warnings = mp._file_facts(log, mp.lines_of(log))
    text = "NGC MXNet 22.05 , NGC PyTorch 22.05 , NGC TensorFlow 22.05-tf1"
    several = f"{sys_path}:31: framework {text!r} names several and neither the log nor the system's name says which"
    assert warnings == [several]
    assert found == {"workers": (4, f"{system}.json:6"), "device": ("NVIDIA A100-SXM-40GB", f"{system}.json:21")}
    assert tags == {"system_description": f"systems/{system}.json", "system_name": system}
    with pytest.raises(SchemaError) as err:
        mp.parse(log, options())
    assert str(err.value) == f"{log}:3: the log does not say the run's framework: give it with --framework ({several})"
    (rec,) = mp.parse(log, options(framework="tensorflow"))
    assert rec.tags["import_warning"] == several
    # 57600 / 4 = 14400 per GPU; the device from the file (:21), the platform its folder
    assert (rec.params["workers"], rec.params["batch_per_worker"], rec.params["device"]) == (4, 14400, "A100")
    assert rec.tags["device_name"] == "NVIDIA A100-SXM-40GB" and rec.params["platform"] == system
    assert source_lines(rec)["workers"] == f"{system}.json:6" and source_lines(rec)["device"] == f"{system}.json:21"
    # the system's name settles it: the same file as `dgx_pytorch.json` beside `results/dgx_pytorch/...`
    log2 = copy(tmp_path, files[ALIBABA], "Sub/results/dgx_pytorch/resnet/result_1.txt")
    shutil.copyfile(files[DELL_SYSTEM], tmp_path / "Sub" / "systems" / "dgx_pytorch.json")
    found, _, warnings = mp._file_facts(log2, mp.lines_of(log2))
    assert found["framework"] == ("pytorch", "dgx_pytorch.json:31") and warnings == []
    # a log that names one of them (the Dell log names mxnet at :38) settles it, and so the warning goes
    log3 = copy(tmp_path, files[DELL], f"Sub/results/{system}/resnet/result_0.txt")
    found, _, warnings = mp._file_facts(log3, mp.lines_of(log3))
    assert found["framework"] == ("mxnet", f"{system}.json:31") and warnings == []


def test_a_malformed_system_file_beside_the_smc_log(files, tmp_path):
    """The smc log (its :::SYSJSON line says everything) beside Alibaba's n32 system file, whose trailing comma
    (:35) makes it no JSON, and beside DellEMC's C4140.json (`"number of nodes"`, :6): the warnings stay."""
    for sys_src, warning in (
        (TRAILING, "{s}:35: the system description is not valid JSON (a trailing comma): none of its facts are used"),
        (DELLEMC_SYSTEM, "{s}:6: the system description spells 'number_of_nodes' as 'number of nodes': not read"),
    ):
        root = tmp_path / Path(sys_src).stem
        log = copy(root, files[SMC], "Sub/results/box/resnet/result_1.txt")
        (root / "Sub" / "systems").mkdir()
        shutil.copyfile(files[sys_src], root / "Sub" / "systems" / "box.json")
        (rec,) = mp.parse(log, options())
        assert rec.tags["import_warning"] == warning.format(s=root / "Sub" / "systems" / "box.json")
        assert (rec.params["workers"], rec.params["device"], rec.params["framework"]) == (8, "H100", "mxnet")


# --------------------------------------------------------------------------------------------------------------
# The helpers, on values of the real files


def test_count_framework_and_param():
    assert mp._count(" 408 ", "f:433", "d_batch_size") == 408
    assert mp._count("1", "f:1", "d_batch_size") == 1 and mp._count(2.0, "f:1", "x") == 2
    with pytest.raises(SchemaError, match=r"^f:433: d_batch_size 'many' is not a whole number$"):
        mp._count("many", "f:433", "d_batch_size")
    for bad in (0, 2.5, -4):
        with pytest.raises(SchemaError, match=rf"^f:9: global_batch_size {bad!r} is not a whole number >= 1$"):
            mp._count(bad, "f:9", "global_batch_size")
    # NVIDIA v1.0 system file: "MXNet NVIDIA Release 21.05"; Dell: MXNet, PyTorch, TensorFlow
    several = ["mxnet", "pytorch", "tensorflow"]
    assert mp._framework(["mxnet"], {"mxnet": 246}) == "mxnet"
    assert mp._framework(["pytorch"], {"mxnet": 3}) == "pytorch"  # smc's file: its only one
    assert mp._framework(several, {"mxnet": 38}) == "mxnet"
    assert mp._framework(several, {"pytorch": 2, "mxnet": 38}) is None
    assert mp._framework(several, {}, "dgxa100_ngc22.05_pytorch") == "pytorch"
    assert mp._framework(several, {}, "box") is None
    assert mp._framework(several, {"jax": 1}, "mxnet_tensorflow") is None
    assert mp._framework(["pytorch", "mxnet"], {"pytorch": 5, "mxnet": 9}, "x_mxnet") == "mxnet"
    assert mp._framework([], {"mxnet": 3}) == "mxnet" and mp._framework([], {"mxnet": 3, "jax": 4}) is None
    assert mp._framework([], {}) is None
    tags: dict[str, str] = {}
    assert mp._param("workers", 8, None, "--workers", "f:7", tags, ["w"]) == 8 and tags == {}
    assert mp._param("workers", 8, 4, "--workers", "f:7", tags, []) == 4 and tags == {"log_workers": "8"}
    with pytest.raises(SchemaError, match=r"^f:7: the log does not say the run's device: give it with --device$"):
        mp._param("device", None, None, "--device", "f:7", {}, [])
    with pytest.raises(SchemaError, match=r"^f:7: the log does not say the run's device: give it with --device "
                                          r"\(a:1: one; b:2: two\)$"):  # fmt: skip
        mp._param("device", None, None, "--device", "f:7", {}, ["a:1: one", "b:2: two"])
    assert mp.sniff(["x", "0: :::MLLOG {}"]) and not mp.sniff(["x", ":::MLL 1 run_start"])


def test_frameworks_in_log_each_with_its_first_line():
    lines = ["+ export MXNET_UPDATE=1", "import torch", "PyTorch 2.1", "TensorFlow and mxnet", "jaxlib", "paddle"]
    assert mp._frameworks_in_log(lines) == {"mxnet": 1, "pytorch": 2, "tensorflow": 4, "paddle": 6}


# --------------------------------------------------------------------------------------------------------------
# mlperf_system: the strict reading of a system file


def test_read_system_real_files(files, tmp_path):
    facts, warnings = read_system(files[SMC_SYSTEM])
    assert warnings == []
    assert facts == {
        "lines": {"nodes": 6, "accelerators_per_node": 20, "accelerator": 21, "framework": 31},
        "nodes": 1, "accelerators_per_node": 8, "accelerators": 8, "accelerator": "NVIDIA H100-SXM5-80GB",
        "frameworks": ["pytorch"], "framework_text": "PyTorch NVIDIA Release 24.04", "system_name": "SMC-H100",
        "system": "1xSMC-H100-SXM-80GB",
    }  # fmt: skip
    facts, warnings = read_system(files[TRAILING])
    assert facts == {"system": "n32_pai_eflops", "lines": {}}
    # a file that is not JSON for another reason: the real smc file cut after its line 6
    cut = tmp_path / "cut.json"
    cut.write_text("\n".join(files[SMC_SYSTEM].read_text().split("\n")[:6]))
    assert read_system(cut) == ({"system": "cut", "lines": {}}, [
        f"{cut}:6: the system description is not valid JSON (Expecting property name enclosed in double quotes): "
        "none of its facts are used"])  # fmt: skip
    listed = tmp_path / "list.json"
    listed.write_text('["number_of_nodes", 1]')
    assert read_system(listed) == ({"system": "list", "lines": {}}, [
        f"{listed}:1: the system description is not a JSON object: none of its facts are used"])  # fmt: skip
    missing = tmp_path / "missing.json"
    facts, warnings = read_system(missing)
    assert facts == {"system": "missing", "lines": {}} and len(warnings) == 1
    assert warnings[0].endswith(": the system description is not read") and str(missing) in warnings[0]


def test_system_facts_values_that_are_not_usable():
    """The smc system file's keys (:::SYSJSON line 7 of its log) with values no reader can use."""
    system = {"number_of_nodes": "0", "accelerators_per_node": "2.5", "accelerator_model_name": " N/A ",
              "framework": "CUDA 12.0", "Accelerators-Per-Node": "8"}  # fmt: skip
    facts, warnings = system_facts(system, "f", lambda key: {"number_of_nodes": 6}.get(key, 9))
    assert facts == {"lines": {"framework": 9}, "frameworks": [], "framework_text": "CUDA 12.0"}
    assert warnings == [
        "f:9: accelerator_model_name ' N/A ': no accelerator named (a CPU system?)",
        "f:6: number_of_nodes '0' is not a whole number >= 1: not read",
        "f:9: accelerators_per_node '2.5' is not a whole number >= 1: not read",
    ]  # in the order of KEYS; the misspelled 'Accelerators-Per-Node' is no warning: the key is there as well
    facts, warnings = system_facts({"number_of_nodes": "x", "accelerators_per_node": " 4 "}, "g", lambda key: 3)
    assert facts == {"lines": {"accelerators_per_node": 3}, "accelerators_per_node": 4}
    assert warnings == [
        "g: the system description has no 'accelerator_model_name'",
        "g:3: number_of_nodes 'x' is not a whole number >= 1: not read",
        "g: the system description has no 'framework'",
    ]
    facts, _ = system_facts({"number_of_nodes": 1.0, "accelerators_per_node": 1, "accelerator_model_name": " TPU v4 "},
                            "h", lambda key: 2)  # fmt: skip
    assert (facts["nodes"], facts["accelerators"], facts["accelerator"]) == (1, 1, "TPU v4")


def test_spelling_line_of_and_frameworks_named():
    system = {"number of nodes": "1", "accelerators_per_node": "4", "Number-Of-Nodes": 2}
    assert _spelling("number_of_nodes", system) == "number of nodes"
    assert _spelling("accelerators_per_node", system) is None
    assert _spelling("framework", {"Frame work": 1}) == "Frame work" and _spelling("framework", {}) is None
    lines = ["{", '  "system_name": "a",', '  "framework": "b"', "}"]
    assert (_line_of(lines, "framework"), _line_of(lines, "system_name"), _line_of(lines, "nodes")) == (3, 2, 1)
    assert frameworks_named("NGC MXNet 21.05 , NGC PyTorch 21.05") == ["mxnet", "pytorch"]
    assert frameworks_named("tf2.0 TF PaddlePaddle paddle MindSpore caffe tinygrad JAX") == [
        "tensorflow", "paddle", "mindspore", "caffe", "tinygrad", "jax"]  # fmt: skip
    assert frameworks_named("pytorch1.8") == ["pytorch"] and frameworks_named("") == []


def test_system_file_in_and_out_of_the_layout(files, tmp_path):
    assert system_file(files[SMC]).resolve() == files[SMC_SYSTEM].resolve()
    assert system_file(files[ALIBABA]) is None  # results/v100-1280/result_1.txt: no <benchmark> folder
    log = copy(tmp_path, files[ALIBABA], "Sub/results/box/resnet/result_1.txt")
    assert system_file(log) is None  # no Sub/systems/box.json
    (tmp_path / "Sub" / "systems" / "box.json").mkdir(parents=True)
    assert system_file(log) is None  # a folder, not a file
    assert system_file(Path("results/box/r.txt")) is None


# --------------------------------------------------------------------------------------------------------------
# v1.1 Habana HLS-1H-N2: blocks only


def test_habana_blocks_every_value(files):
    path = files[HABANA]
    (rec,) = mp.parse(path, options())
    rec.validate()
    # 9 block_start -> block_stop intervals (:24 -> :28, ..., :64 -> :68), epoch_count 3 then 8 x 4 = 35 epochs;
    # each block_start has its block_stop's stamp before it, so they sum to :68 1636543909997 - :24 1636540543396
    # = 3366.601 s; :23 run_start (= :24), :69 run_stop 1636543910001: 3366.605 s; :2 init_start 1636540473364;
    # :67 eval_accuracy 0.7594799995422363
    want = {
        "throughput_total": 35 * IMAGES / 3366.601,
        "throughput_run": 35 * IMAGES / 3366.605,
        "time_total_s": 3366.605,
        "time_init_s": 70.032,
        "accuracy_test": 0.7594799995422363,
    }
    assert set(rec.metrics) == set(want)
    for name, value in want.items():
        assert rec.metrics[name] == pytest.approx(value, rel=SECONDS), name
    # systems/HLS-1H-N2.json: 2 nodes (:6) x 4 (:20) = 8; "Habana Gaudi" (:21); "TensorFlow 2.5.1" (:31), which the
    # log's own text names at :1 (the log's line wins); global_batch_size 2048 (:8): 256 a device
    assert rec.params | {} == {
        "model": "resnet50", "framework": "tensorflow", "api": "mlperf", "workers": 8, "device": "Habana Gaudi",
        "data": "real", "batch_per_worker": 256, "platform": "HLS-1H-N2", "epochs": 35,
    }  # fmt: skip
    want_tags = {
        "throughput_intervals": "9 block_start -> block_stop intervals (may include evaluation)",
        "training_seconds": "3366.601", "run_stop_status": "success", "submission_platform": "gaudi-0",
        "system_description": "systems/HLS-1H-N2.json", "system_name": "HLS-1H-N2", "device_name": "Habana Gaudi",
        "global_batch_size": "2048", "source_line": "result_0.txt:68",
    }  # fmt: skip
    assert {k: rec.tags.get(k) for k in want_tags} == want_tags and rec.status == "FINISHED"
    assert not {"system_framework", "system_workers", "import_warning", "failure_reason"} & set(rec.tags)
    lines = source_lines(rec)
    lines.pop("platform")
    assert lines == {
        "workers": "HLS-1H-N2.json:6", "batch_per_worker": "result_0.txt:8", "device": "HLS-1H-N2.json:21",
        "framework": "result_0.txt:1", "throughput_total": "result_0.txt:68", "throughput_run": "result_0.txt:69",
        "time_total_s": "result_0.txt:69", "time_init_s": "result_0.txt:2", "accuracy_test": "result_0.txt:67",
    }  # fmt: skip


def test_pcl_block_starts_of_one_label_are_one_block(files):
    (rec,) = mp.parse(files[PCL], options())
    # A block_start per epoch with its block's first_epoch_num (:24, :25 say 1; :28-:31 say 3; ...; :82-:85 say
    # 39) and one block_stop per block (:26, :32, ..., :86): 11 blocks, 2 + 10 x 4 = 42 epochs (the last
    # eval_accuracy, :87, says epoch_num 42), each block from its first start: 104.900 s in all (:86
    # 1622086208549 - :24 1622086103640 less nine 1 ms gaps, stop to next start); :22 train_samples 1277952;
    # :21 run_start 1622086103638, :88 run_stop 1622086208742. The system file: 32 nodes x 8.
    assert rec.params["epochs"] == 42 and rec.params["workers"] == 256
    assert rec.tags["throughput_intervals"] == "11 block_start -> block_stop intervals (may include evaluation)"
    assert rec.tags["training_seconds"] == "104.900" and rec.tags["source_line"] == "result_0.txt:86"
    assert rec.metrics["throughput_total"] == pytest.approx(42 * 1277952 / 104.900, rel=SECONDS)
    assert rec.metrics["throughput_run"] == pytest.approx(42 * 1277952 / 105.104, rel=SECONDS)


def test_habana_blocks_that_cannot_be_read(files, tmp_path):
    """Copies of the Habana log: a block without epoch_count (the first's removed), the first block_start renamed
    (its block_stop at :28 then closes none), run_stop stamped as run_start, an epoch_stop with no epoch_start."""
    src = files[HABANA]
    text = src.read_text()
    first_count = '"first_epoch_num": 1, "epoch_count": 3'
    assert text.count(first_count) == 2  # :24 block_start and :28 block_stop
    cases = (
        (text.replace(first_count, '"first_epoch_num": 1', 1), "69: no finished epoch \\(epoch_stop\\) or block "
         "\\(block_stop with epoch_count\\) in the log"),
        (text.replace('"key": "block_start"', '"key": "x_block_start"', 1), "28: block_stop without a block_start "
         "before it"),
        (text.replace('"time_ms": 1636543910001', '"time_ms": 1636540543396'),  # :69 only
         "69: run_stop is not after run_start \\(line 23\\)"),
        (text.replace('"key": "block_stop"', '"key": "epoch_stop"', 1), "28: epoch_stop without an epoch_start "
         "before it"),
    )  # fmt: skip
    for n, (changed, message) in enumerate(cases):
        assert changed != text
        path = tmp_path / f"case{n}.txt"
        path.write_text(changed)
        with pytest.raises(SchemaError, match=f"^{path}:{message}$"):
            mp.parse(path, options(workers=8, device="Gaudi", framework="tensorflow", platform="p"))


def test_the_mllog_mark_inside_a_value_and_a_line_cut_short(files, tmp_path):
    """Copies of the Alibaba log: its submission_platform (:6) written ':::MLLOG PAI' (the line's first mark is the
    one read), and its :1535 run_stop line cut after 60 characters."""
    src = files[ALIBABA]
    marked = copy(tmp_path, src, "marked.txt", lambda t: t.replace('"value": "PAI_EFLOPS"', '"value": ":::MLLOG PAI"'))
    (rec,) = mp.parse(marked, options(workers=1280, device="V100", framework="mxnet", platform="p"))
    assert rec.tags["submission_platform"] == ":::MLLOG PAI"
    lines = src.read_text().split("\n")
    lines[1534] = lines[1534][:60]
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(lines))
    with pytest.raises(SchemaError, match=rf"^{cut}:1535: MLLOG line is not valid JSON \(cut short\?\): "):
        mp.parse(cut, options(workers=1280, device="V100", framework="mxnet", platform="p"))


def test_smc_copies_the_log_facts_come_from(files, tmp_path):
    """Copies of the smc log: its d_batch_size (:239) renamed (the GPUs then come from :::SYSJSON line 7: 1 x 8), made
    'many', its SYSJSON framework made PyTorch (the SYSJSON line wins over the text's mxnet at :3), its SYSJSON
    framework key dropped (a warning naming the log)."""
    src = files[SMC]
    log = copy(tmp_path, src, "no_d.txt", lambda t: t.replace('"key": "d_batch_size"', '"key": "x_d_batch_size"'))
    found, warnings = mp._log_facts(log, mp.lines_of(log), mp._scan(log, mp.lines_of(log)), 3200)
    assert found["workers"] == (8, 7) and warnings == []
    log = copy(tmp_path, src, "many.txt", lambda t: t.replace('"key": "d_batch_size", "value": 400',
                                                              '"key": "d_batch_size", "value": "many"'))  # fmt: skip
    with pytest.raises(SchemaError, match=rf"^{log}:239: d_batch_size 'many' is not a whole number$"):
        mp._log_facts(log, mp.lines_of(log), mp._scan(log, mp.lines_of(log)), 3200)
    log = copy(tmp_path, src, "pt.txt", lambda t: t.replace('"framework":"MXNet NVIDIA Release 24.04"',
                                                            '"framework":"PyTorch NVIDIA Release 24.04"'))  # fmt: skip
    found, _ = mp._log_facts(log, mp.lines_of(log), mp._scan(log, mp.lines_of(log)), 3200)
    assert found["framework"] == ("pytorch", 7)
    log = copy(tmp_path, src, "nofw.txt", lambda t: t.replace('"framework":"MXNet NVIDIA Release 24.04",', ""))
    found, warnings = mp._log_facts(log, mp.lines_of(log), mp._scan(log, mp.lines_of(log)), 3200)
    assert warnings == [f"{log}: the system description has no 'framework'"]
    assert found["framework"] == ("mxnet", 3)  # the text's only one


def test_two_frameworks_named_neither_settled(files, tmp_path):
    """Dell's system file with its framework cut to two ("NGC MXNet 22.05 , NGC PyTorch 22.05", :31) beside the
    Alibaba log (names none) in a folder named neither: the warning."""
    log = copy(tmp_path, files[ALIBABA], "Sub/results/box/resnet/result_1.txt")
    sys_path = copy(tmp_path, files[DELL_SYSTEM], "Sub/systems/box.json",
                    lambda t: t.replace(" , NGC TensorFlow 22.05-tf1", ""))  # fmt: skip
    found, _, warnings = mp._file_facts(log, mp.lines_of(log))
    assert "framework" not in found
    assert warnings == [f"{sys_path}:31: framework 'NGC MXNet 22.05 , NGC PyTorch 22.05' names several and neither "
                        "the log nor the system's name says which"]  # fmt: skip


def test_system_file_only_under_results(files, tmp_path):
    """`Sub/other/box/resnet/result_1.txt` beside `Sub/systems/box.json`: not the layout (no results/ folder)."""
    log = copy(tmp_path, files[ALIBABA], "Sub/other/box/resnet/result_1.txt")
    copy(tmp_path, files[DELL_SYSTEM], "Sub/systems/box.json")
    assert system_file(log) is None


def test_a_trailing_comma_after_a_blank_first_line(files, tmp_path):
    """Alibaba's n32 file (trailing comma at :35) with a blank line put before it: the comma is at :36."""
    moved = copy(tmp_path, files[TRAILING], "moved.json", lambda t: "\n" + t)
    assert read_system(moved)[1] == [
        f"{moved}:36: the system description is not valid JSON (a trailing comma): none of its facts are used"
    ]


# --------------------------------------------------------------------------------------------------------------
# What parse adds: the run's times, the data param, the counts it checks, the warnings together


def test_alibaba_run_times_data_and_counts(files, tmp_path):
    src = files[ALIBABA]
    opts = {"workers": 1280, "device": "V100", "framework": "mxnet", "platform": "p"}
    (rec,) = mp.parse(src, options(**opts))
    # :1293 run_start and :1535 run_stop in ms; where = :3 submission_benchmark; 57600 // 1280 an int
    assert (rec.start_ms, rec.end_ms, rec.where) == (1593422672835, 1593422775122, f"{src}:3")
    assert type(rec.params["batch_per_worker"]) is int and type(rec.params["workers"]) is int
    assert rec.params["data"] == "real" and "log_data" not in rec.tags
    (rec,) = mp.parse(src, options(data="synthetic", **opts))
    assert rec.params["data"] == "synthetic" and rec.tags["log_data"] == "real"
    # copies: global_batch_size (:1302, the last) 'lots', train_samples (:8) 0
    batch = '"value": 57600, "key": "global_batch_size"'
    bad = copy(tmp_path, src, "batch.txt", lambda t: t.replace(batch, batch.replace("57600", '"lots"')))
    with pytest.raises(SchemaError, match=rf"^{bad}:1302: global_batch_size 'lots' is not a whole number$"):
        mp.parse(bad, options(**opts))
    bad = copy(tmp_path, src, "samples.txt", lambda t: t.replace('"train_samples", "value": 1281167',
                                                                 '"train_samples", "value": 0'))  # fmt: skip
    with pytest.raises(SchemaError, match=rf"^{bad}:8: train_samples 0 is not a whole number >= 1$"):
        mp.parse(bad, options(**opts))
    # :1306 epoch_start renamed: :1307 epoch_stop closes none
    start_2 = '"epoch_num": 2, "file": "common/fit.py", "lineno": 883}, "value": null, "key": "epoch_start"'
    bad = copy(tmp_path, src, "epoch.txt", lambda t: t.replace(start_2, start_2.replace('"epoch_st', '"x_epoch_st')))
    assert bad.read_text() != src.read_text()
    with pytest.raises(SchemaError, match=rf"^{bad}:1307: epoch_stop without an epoch_start before it$"):
        mp.parse(bad, options(**opts))


def test_habana_short_intervals_and_one_epoch_blocks(files, tmp_path):
    """Copies of the Habana log: run_stop (:69) stamped 0.5 s after run_start (:23 1636540543396); its blocks cut to
    the first (:24, its :28 block_stop stamped 0.5 s after, or at :24's time) and :69; the first block's
    epoch_count 1 (not 3); :29 block_start renamed (:33 then closes none)."""
    src = files[HABANA]
    opts = options(workers=8, device="Gaudi", framework="tensorflow", platform="p")
    text = src.read_text()
    short = copy(
        tmp_path, src, "short_run.txt", lambda t: t.replace('"time_ms": 1636543910001', '"time_ms": 1636540543896')
    )
    (rec,) = mp.parse(short, opts)
    assert rec.metrics["time_total_s"] == 0.5 and rec.metrics["throughput_run"] == pytest.approx(35 * IMAGES / 0.5)
    lines = text.split("\n")
    kept = lines[:24] + [lines[27].replace('"time_ms": 1636540844553', '"time_ms": 1636540543896')] + [lines[68]]
    one = tmp_path / "one_block.txt"
    one.write_text("\n".join(kept) + "\n")
    (rec,) = mp.parse(one, opts)
    # 3 epochs over 0.5 s; the run 3366.605 s; the last interval ends at the copy's line 25
    assert rec.tags["training_seconds"] == "0.500" and rec.params["epochs"] == 3
    assert rec.metrics["throughput_total"] == pytest.approx(3 * IMAGES / 0.5)
    assert rec.tags["source_line"] == "one_block.txt:25"
    # the same with its block_stop stamped as its block_start: no training time
    kept[24] = lines[27].replace('"time_ms": 1636540844553', '"time_ms": 1636540543396')
    none = tmp_path / "no_time.txt"
    none.write_text("\n".join(kept) + "\n")
    with pytest.raises(SchemaError, match=rf"^{none}:26: run_stop is not after run_start \(line 23\)$"):
        mp.parse(none, opts)
    first = '"first_epoch_num": 1, "epoch_count": 3'
    count = copy(tmp_path, src, "count.txt", lambda t: t.replace(first, first.replace("3", "1"), 1))
    (rec,) = mp.parse(count, opts)
    assert rec.params["epochs"] == 33 and rec.metrics["throughput_total"] == pytest.approx(33 * IMAGES / 3366.601)
    starts = text.split('"key": "block_start"')
    stray = tmp_path / "stray.txt"
    stray.write_text(
        starts[0]
        + '"key": "block_start"'
        + starts[1]
        + '"key": "x_block_start"'
        + '"key": "block_start"'.join(starts[2:])
    )
    with pytest.raises(SchemaError, match=rf"^{stray}:33: block_stop without a block_start before it$"):
        mp.parse(stray, opts)


def test_a_log_naming_a_framework_the_system_file_does_not(files, tmp_path):
    """The Alibaba log with `jax` put in its :1 (`"file": "/run/jax_setup.py"`), beside Dell's system file (MXNet,
    PyTorch, TensorFlow) in `Sub/results/box/`: the log's jax settles it, the file's warning goes."""
    log = copy(tmp_path, files[ALIBABA], "Sub/results/box/resnet/result_1.txt",
               lambda t: t.replace('"/run/setup.py"', '"/run/jax_setup.py"', 1))  # fmt: skip
    copy(tmp_path, files[DELL_SYSTEM], "Sub/systems/box.json")
    assert mp._frameworks_in_log(mp.lines_of(log)) == {"jax": 1}
    (rec,) = mp.parse(log, options())
    assert rec.params["framework"] == "jax" and source_lines(rec)["framework"] == "result_1.txt:1"
    assert "import_warning" not in rec.tags and "system_framework" not in rec.tags
    assert (rec.params["workers"], rec.params["batch_per_worker"]) == (4, 14400)


def test_two_warnings_together(files, tmp_path):
    """The smc log with its SYSJSON framework key dropped, beside DellEMC's C4140.json (`"number of nodes"`, :6)
    in `Sub/results/box/`: the log's warning, then the file's, joined by ' | '."""
    log = copy(tmp_path, files[SMC], "Sub/results/box/resnet/result_1.txt",
               lambda t: t.replace('"framework":"MXNet NVIDIA Release 24.04",', ""))  # fmt: skip
    sys_path = copy(tmp_path, files[DELLEMC_SYSTEM], "Sub/systems/box.json")
    (rec,) = mp.parse(log, options())
    assert rec.tags["import_warning"] == (
        f"{log}: the system description has no 'framework' | {sys_path}:6: the system description spells "
        "'number_of_nodes' as 'number of nodes': not read"
    )


def test_a_relative_path_of_four_parts(files, tmp_path, monkeypatch):
    """`results/box/resnet/result_1.txt` given relative to the working folder: its platform is still its folder."""
    copy(tmp_path, files[ALIBABA], "results/box/resnet/result_1.txt")
    monkeypatch.chdir(tmp_path)
    relative = Path("results/box/resnet/result_1.txt")
    (rec,) = mp.parse(relative, options(workers=1280, device="V100", framework="mxnet"))
    assert rec.params["platform"] == "box"


# --------------------------------------------------------------------------------------------------------------
# mlperf_system: the corpus's lenient reading (read_system_any_shape), each shape on a real file

TPU_ENTRY = "v0.5/v0.5.0/google/cloud_v3.8/resnet-tpuv3-8/results/tpu/entry.json"
DGX1_ENTRY = "v0.5/v0.5.0/nvidia/submission/results/dgx1_ngc18.11_mxnet/entry.json"
CPU_ENTRY = "v0.5/v0.5.0/intel/intel_resnet_submission/results/skx_8180_2s_1x/entry.json"
KEY_LINES = "v0.6/NVIDIA/systems/dgx2h_n96_ngc19.05_mxnet.json"


@pytest.fixture(scope="module")
def shapes():
    return raw_files_of("mlperf-training-resnet", TPU_ENTRY, DGX1_ENTRY, CPU_ENTRY, KEY_LINES, TRAILING,
                        DELLEMC_SYSTEM, DELL_SYSTEM)  # fmt: skip


def test_any_shape_entry_json(shapes):
    from scalestudy.ingest.logs.mlperf_system import read_system_any_shape

    # tpuv3-8: num_nodes 1, num_accelerators 8 TensorCores = 4 chips; "interconnect": "TPU", the node's
    # cpu_accel_interconnect ""; "framework": "TensorFlow 1.12"; "division": "closed"
    assert read_system_any_shape(shapes[TPU_ENTRY]) == ({
        "shape": "entry-json", "nodes": 1, "accelerators_per_node": None, "accelerator_model": "tpuv3-8",
        "framework": "TensorFlow 1.12", "interconnect": "TPU", "division": "closed", "host_processors": None,
        "system_name": "", "accelerators": 4, "accelerators_basis": "entry.json TPU core count / 2 = chips",
    }, [])  # fmt: skip
    # DGX-1: 1 node x 8 "Tesla V100-SXM2-16GB"; "InfiniBand EDR 100Gb/s" and the node's "QPI"
    assert read_system_any_shape(shapes[DGX1_ENTRY]) == ({
        "shape": "entry-json", "nodes": 1, "accelerators_per_node": 8, "accelerator_model": "Tesla V100-SXM2-16GB",
        "framework": "MXNet NGC 18.11", "interconnect": "InfiniBand EDR 100Gb/s; QPI", "division": "closed",
        "host_processors": None, "system_name": "", "accelerators": 8,
        "accelerators_basis": "nodes[0].num_nodes x nodes[0].num_accelerators",
    }, [])  # fmt: skip
    # Intel SKX 8180: "accelerator": "NA", 0 of them: a CPU system
    facts, warnings = read_system_any_shape(shapes[CPU_ENTRY])
    assert warnings == [] and (facts["accelerators"], facts["accelerators_basis"]) == (None, "cpu only")
    assert (facts["accelerators_per_node"], facts["accelerator_model"], facts["interconnect"]) == (0, "NA", "NA; NA")
    assert (facts["framework"], facts["nodes"]) == ("Intel Caffe 1.1.2a", 1)


def test_any_shape_malformed_and_systems_json(shapes):
    from scalestudy.ingest.logs.mlperf_system import read_system_any_shape

    # v0.6 NVIDIA: `key: {json}` lines, `entry` a Python repr whose `nodes` is a repr again: 96 nodes x 16
    facts, warnings = read_system_any_shape(shapes[KEY_LINES])
    assert warnings == ["dgx2h_n96_ngc19.05_mxnet.json: not valid JSON (line 1: Expecting value); read as "
                        "'key: {json}' lines"]  # fmt: skip
    assert facts == {
        "shape": "malformed", "nodes": 96, "accelerators_per_node": 16, "accelerator_model": "Tesla V100-SXM3-32GB-H",
        "framework": "MXNet NVIDIA Release 19.05", "interconnect": "InfiniBand 100 Gb/sec (4X EDR); UPI",
        "division": "closed", "host_processors": None, "system_name": "", "accelerators": 1536,
        "accelerators_basis": "nodes[0].num_nodes x nodes[0].num_accelerators",
    }  # fmt: skip
    # v0.7 Alibaba n32: a trailing comma; "divison" (sic, :3) "closed", 32 nodes (:6) x 8 (:20), 2 host CPUs (:7),
    # "NVLINK2.0 300GB/s" (:27) and host_networking "100Gbps" (:17)
    facts, warnings = read_system_any_shape(shapes[TRAILING])
    assert len(warnings) == 1 and warnings[0].startswith("n32_pai_eflops.json: not valid JSON (line ")
    assert warnings[0].endswith("); read without its trailing commas")
    assert facts == {
        "shape": "malformed", "nodes": 32, "accelerators_per_node": 8, "accelerator_model": "NVIDIA V100-SXM2-32GB",
        "framework": "MXNET PAI", "interconnect": "accelerator_interconnect: NVLINK2.0 300GB/s; host_networking: "
        "100Gbps", "division": "closed", "host_processors": 2, "system_name": "PAI_EFLOPS", "accelerators": 256,
        "accelerators_basis": "number_of_nodes x accelerators_per_node",
    }  # fmt: skip
    # v0.7 DellEMC C4140: "number of nodes": "1" (:6), 4 a node (:20)
    facts, warnings = read_system_any_shape(shapes[DELLEMC_SYSTEM])
    assert warnings == ["C4140.json: key 'number of nodes' read as number_of_nodes"]
    assert (facts["shape"], facts["nodes"], facts["accelerators"]) == ("malformed", 1, 4)
    assert facts["interconnect"] == "accelerator_interconnect: NVLINK2.0; host_networking: 1Gb Ethernet"
    # v2.0 Dell XE8545: well-formed
    facts, warnings = read_system_any_shape(shapes[DELL_SYSTEM])
    assert warnings == [] and facts == {
        "shape": "systems-json", "nodes": 1, "accelerators_per_node": 4, "accelerator_model": "NVIDIA A100-SXM-40GB",
        "framework": "NGC MXNet 22.05 , NGC PyTorch 22.05 , NGC TensorFlow 22.05-tf1",
        "interconnect": "accelerator_interconnect: NVLink 3.0 600GB/s; host_networking: 2x ConnectX-6 IB HDR 200Gb/Sec",
        "division": "closed", "host_processors": 2, "system_name": "XE8545x4A100-SXM-40GB", "accelerators": 4,
        "accelerators_basis": "number_of_nodes x accelerators_per_node",
    }  # fmt: skip


def test_any_shape_refusals_and_edges(shapes, tmp_path):
    """Files written here (no real file is any of these): adapted from the Dell XE8545 and the DGX-1 entry.json."""
    import json

    from scalestudy.ingest.logs.mlperf_system import _key_json_lines, _whole, read_system_any_shape

    assert [_whole(v) for v in (" 3 ", "0", 2.0, "2.5", "-1", "x", None)] == [3, 0, 2, None, None, None, None]
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(SchemaError, match=rf"^{listed}:1: a system description that is not a JSON object$"):
        read_system_any_shape(listed)
    broken = tmp_path / "broken.json"
    broken.write_text('{"number_of_nodes": "2",\n "accelerators_per_node": \n')
    with pytest.raises(SchemaError, match=rf"^{broken}:3: not valid JSON \(line 3: Expecting value\), nor key: "
                                          r"\{json\} lines$"):  # fmt: skip
        read_system_any_shape(broken)
    dell = json.loads(shapes[DELL_SYSTEM].read_text())
    for change, message in (({"number_of_nodes": "two"}, "no number_of_nodes the file states as a whole number"),):
        path = tmp_path / "nodes.json"
        path.write_text(json.dumps({**dell, **change}))
        with pytest.raises(SchemaError, match=rf"^{path}:1: {message}$"):
            read_system_any_shape(path)
    # 0 accelerators a node, or "N/A" named: a CPU system; no accelerators_per_node: no count
    basis = "number_of_nodes x accelerators_per_node"
    for change, want in (({"accelerators_per_node": "0"}, (None, "cpu only")),
                         ({"accelerator_model_name": "N/A"}, (None, "cpu only")),
                         ({"accelerators_per_node": ""}, (None, basis))):  # fmt: skip
        path = tmp_path / "cpu.json"
        path.write_text(json.dumps({**dell, **change}))
        facts, _ = read_system_any_shape(path)
        assert (facts["accelerators"], facts["accelerators_basis"]) == want, change
    entry = json.loads(shapes[DGX1_ENTRY].read_text())
    for node, want in (({"num_nodes": "x"}, None), ({"num_accelerators": 0}, (None, "cpu only")),
                       ({"accelerator": "tpuv2-8", "num_accelerators": 0}, (None, "entry.json TPU core count / 2 = "
                                                                             "chips"))):  # fmt: skip
        path = tmp_path / "entry.json"
        path.write_text(json.dumps({**entry, "nodes": [{**entry["nodes"][0], **node}]}))
        if want is None:
            with pytest.raises(SchemaError, match=rf"^{path}:1: nodes\[0\]\.num_nodes is not a whole number$"):
                read_system_any_shape(path)
        else:
            facts, _ = read_system_any_shape(path)
            assert (facts["accelerators"], facts["accelerators_basis"]) == want, node
    # `key: {json}` lines: a line that is not `identifier: ...` is passed over; a value that is no JSON object, or an
    # entry that is no Python literal, reads as nothing
    assert _key_json_lines('org: {"value": "NVIDIA"}\n# a comment\nnot a key: {"value": 1}') == {"org": "NVIDIA"}
    assert _key_json_lines('org: {"value": "NVIDIA"}\ndivision: [1]') == {}
    assert _key_json_lines('org: {"value": "NVIDIA"}\ndivision: nope') == {}
    assert _key_json_lines('entry: {"value": "not a literal ("}') == {}
    assert _key_json_lines('entry: {"value": "{\'framework\': \'MXNet\'}"}') == {"entry": "{'framework': 'MXNet'}",
                                                                                   "framework": "MXNet"}  # fmt: skip


def test_any_shape_fields_left_out(shapes, tmp_path):
    """The Dell XE8545 and the DGX-1 entry.json with fields removed or changed (written here): what is left out
    reads as '' (not a placeholder), an odd TensorCore count halves down, "NA" names no accelerator."""
    import json

    from scalestudy.ingest.logs.mlperf_system import _key_json_lines, read_system_any_shape

    dell = json.loads(shapes[DELL_SYSTEM].read_text())
    gone = ("accelerator_model_name", "framework", "host_networking", "division", "system_name")
    path = tmp_path / "bare.json"
    path.write_text(json.dumps({k: v for k, v in dell.items() if k not in gone}))
    facts, warnings = read_system_any_shape(path)
    assert warnings == [] and facts["shape"] == "systems-json"
    assert (facts["accelerator_model"], facts["framework"], facts["division"], facts["system_name"]) == ("", "", "", "")
    assert facts["interconnect"] == "accelerator_interconnect: NVLink 3.0 600GB/s"
    assert (facts["accelerators"], facts["accelerators_basis"]) == (None, "cpu only")  # no accelerator named
    # both spellings: the schema's wins, no warning; a `nodes` list of no objects is not the entry.json shape
    path.write_text(json.dumps({**dell, "number of nodes": "9", "nodes": ["node0"]}))
    facts, warnings = read_system_any_shape(path)
    assert warnings == [] and (facts["shape"], facts["nodes"], facts["accelerators"]) == ("systems-json", 1, 4)
    entry = json.loads(shapes[DGX1_ENTRY].read_text())
    node = {k: v for k, v in entry["nodes"][0].items() if k != "accelerator"}
    path = tmp_path / "entry.json"
    path.write_text(json.dumps({"nodes": [node]}))
    facts, _ = read_system_any_shape(path)
    assert (facts["accelerator_model"], facts["framework"], facts["division"]) == ("", "", "")
    assert facts["interconnect"] == "QPI" and (facts["accelerators"], facts["accelerators_basis"]) == (None, "cpu only")
    for changed, want in (({"accelerator": "tpuv2-8", "num_accelerators": 7}, 3),
                          ({"accelerator": "NA", "num_accelerators": 2}, None)):  # fmt: skip
        path.write_text(json.dumps({**entry, "nodes": [{**entry["nodes"][0], **changed}]}))
        facts, _ = read_system_any_shape(path)
        assert facts["accelerators"] == want and type(facts["accelerators"]) is type(want), changed
    assert _key_json_lines('org: {"value": "NVIDIA"}\n# a note\ndivision: {"value": "closed"}') == {
        "org": "NVIDIA", "division": "closed"}  # fmt: skip
