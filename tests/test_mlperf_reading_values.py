"""ingest/mlperf_reading.py in this process, on real MLPerf result logs: every value, source line, basis and problem
of a reading against values read from the log by hand (file:line in the comments; paths relative to the raw folder
of experiments/reference/mlperf-training-resnet). Sums of many intervals were added up with awk over the log's
time stamps, independently of the code. The importer parses in worker processes, where mutation testing sees no
test: this file is what pins the reading. Where no real log takes a branch, a real log is edited (said so)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import raw_files_of

from scalestudy.ingest.logs.mlperf_events import Event, events
from scalestudy.ingest.mlperf_reading import Reading, read

SIAT = "v0.7/SIAT/results/modelarts_128_mindspore_open/resnet/result_0.txt"
TPU32 = "v0.6/Google/results/tpu-v3-32/resnet/result_0.txt"
H100_N64 = "v3.0/NVIDIA/results/dgxh100_n64_ngc23.04_mxnet/resnet/result_0.txt"
TINY_RED = "v4.0/tinycorp/results/tinybox_red/resnet/result_0.txt"
TINY_GREEN = "v4.0/tinycorp/results/tinybox_green/resnet/result_0.txt"
GRAPHCORE = "v1.1/Graphcore/results/ipu-pod16-TF1/resnet/result_0.txt"
V05_GOOGLE = "v0.5/v0.5.0/google/cloud_v2.8/resnet-tpuv2-8/results/tpu/resnet/result_0.txt"
V05_NVIDIA = "v0.5/v0.5.0/nvidia/submission/results/dgx1_ngc18.11_mxnet/resnet/result_0.txt"
SINIAN = "v0.6/Alibaba/results/sinian/resnet/result_1.txt"
PCL = "v1.0/PCL/results/CloudBrainII_256_mindspore_close/resnet/result_0.txt"
PCL_1024 = "v1.0/PCL/results/CloudBrainII_1024_mindspore_close/resnet/result_0.txt"
SIAT_512 = "v0.7/SIAT/results/modelarts_512_tensorflow_close/resnet/result_0.txt"
INTEL_SPR = "v2.1/Intel/results/16-nodes-SPR-pytorch/resnet/result_1.txt"
INTEL_8380H = "v1.0/Intel/results/1-node-8s-8380H-tensorflow/resnet/result_1.txt"
COREWEAVE = "v3.1/NVIDIA/results/coreweave_hgxh100_n448_ngc23.04_mxnet/resnet/result_0.txt"
V05_INTEL = "v0.5/v0.5.0/intel/intel_resnet_submission/results/skx_8180_2s_8x/resnet/result_0.txt"
V05_TPU512 = "v0.5/v0.5.0/google/research_v3.512/resnet-tpuv3-512/results/tpu/resnet/result_0.txt"
LOGS = (SIAT, TPU32, H100_N64, TINY_RED, TINY_GREEN, GRAPHCORE, V05_GOOGLE, V05_NVIDIA, SINIAN, PCL, PCL_1024, SIAT_512,
        INTEL_SPR, INTEL_8380H, COREWEAVE, V05_INTEL, V05_TPU512)  # fmt: skip
EXACT = 1e-6  # seconds: sums of float stamps round; one interval wrong moves them by a millisecond or more

BLOCKS = "blocks: sum of closed blocks minus the evaluations inside them"
NO_EVAL = f"{BLOCKS} (no eval interval logged: evaluation stays in)"
BLOCK_EPOCHS = "sum of closed blocks' epoch_count"
PAIRS = "completed epoch_start/epoch_stop pairs"
EPOCH_SUM = "epochs: sum of epoch_start -> epoch_stop"
LABELS = "max - min + 1 of train_epoch markers and eval epoch labels"
TRAIN_LOOP = "train_loop: run_stop - train_loop minus the evaluations"
V05_BATCH = "input_batch_size (v0.5: its meaning depends on the code)"


@pytest.fixture(scope="module")
def texts() -> dict[str, tuple[Path, str]]:
    files = raw_files_of("mlperf-training-resnet", *LOGS)
    return {name: (files[name], files[name].read_text()) for name in LOGS}


def reading_of(texts, name: str, edit=None) -> Reading:
    path, text = texts[name]
    fmt, found = events(path, edit(text) if edit else text)
    return read(fmt, found)


def check(reading: Reading, values: dict, lines: dict, basis: dict, problems: list | None = None) -> None:
    assert set(reading.values) == set(values)
    for name, value in values.items():
        got = reading.values[name]
        assert got == (pytest.approx(value, rel=1e-12, abs=EXACT) if isinstance(value, float) else value), name
        assert type(got) is type(value) or isinstance(value, float), name  # a count stays a whole number
    assert reading.lines == lines
    assert reading.basis == basis
    assert reading.problems == (problems or [])


def test_mllog_blocks_only(texts):
    # 34 lines: :16 run_start 1593193410509 ms, :34 run_stop 1593193532867 "success"; :7 init_start 1593192965834;
    # five blocks of epoch_count 4 (:19-:20, :22-:23, :25-:26, :28-:29, :31-:32), no eval_start/eval_stop
    blocks = (
        (1593193434.923 - 1593193410.511)
        + (1593193459.684 - 1593193435.514)
        + (1593193484.223 - 1593193460.225)
        + (1593193508.344 - 1593193484.717)
        + (1593193532.465 - 1593193508.863)
    )
    values = {
        "submission_benchmark": "resnet",  # :1
        "submission_division": "open",  # :2
        "submission_org": "SIAT",  # :3
        "submission_platform": "Ascend 910",  # :4
        "run_start": 1593193410.509,
        "init_start_lines": 1,
        "time_init_s": 1593193410.509 - 1593192965.834,
        "status": "success",
        "run_time_s": 1593193532.867 - 1593193410.509,
        "global_batch_logged": 4096,  # :8
        "train_samples": 1277952,  # :17
        "epochs": 20,
        "train_time_s": blocks,
        "train_window_epochs": 20,
        "accuracy": 0.75994,  # :33
    }
    lines = {"submission_benchmark": 1, "submission_division": 2, "submission_org": 3, "submission_platform": 4,
             "run_start": 16, "init_start_lines": 7, "time_init_s": 16, "status": 34, "run_time_s": 34,
             "global_batch_logged": 8, "train_samples": 17, "epochs": 32, "train_time_s": 32,
             "train_window_epochs": 32, "accuracy": 33}  # fmt: skip
    basis = {"status": "run_stop metadata.status", "global_batch_logged": "global_batch_size",
             "train_samples": "train_samples", "epochs": BLOCK_EPOCHS, "train_time_s": NO_EVAL}  # fmt: skip
    check(reading_of(texts, SIAT), values, lines, basis)
    assert blocks == pytest.approx(119.809, abs=1e-6)


def test_mll_blocks_paired_by_label(texts):
    # 68 lines, settings stamped 0.0 (:1-:5); :7 init_start 1558420762.299, :21 run_start 1558420845.819, :68 run_stop
    # 1558423379.276 "success"; 15 blocks of epoch_count 4, the next block_start before the previous block_stop
    # (:25 before :28): sum of block_stop - sum of block_start = 2533.445 s (awk); the last block_stop is :65
    values = {
        "submission_benchmark": "resnet",
        "submission_division": "closed",
        "submission_org": "google",
        "submission_platform": "tpu-v3-32",
        "run_start": 1558420845.819,
        "init_start_lines": 1,
        "time_init_s": 1558420845.819 - 1558420762.299,
        "status": "success",
        "run_time_s": 1558423379.276 - 1558420845.819,
        "global_batch_logged": 4096,  # :8
        "train_samples": 1281167,  # :20 num_train_examples
        "epochs": 60,
        "train_time_s": 2533.445,
        "train_window_epochs": 60,
        "accuracy": 0.7609000205993652,  # :66
    }
    lines = {"submission_benchmark": 1, "submission_division": 2, "submission_org": 3, "submission_platform": 4,
             "run_start": 21, "init_start_lines": 7, "time_init_s": 21, "status": 68, "run_time_s": 68,
             "global_batch_logged": 8, "train_samples": 20, "epochs": 65, "train_time_s": 65,
             "train_window_epochs": 65, "accuracy": 66}  # fmt: skip
    basis = {"status": "run_stop metadata.status", "global_batch_logged": "global_batch_size",
             "train_samples": "num_train_examples", "epochs": BLOCK_EPOCHS, "train_time_s": NO_EVAL}  # fmt: skip
    check(reading_of(texts, TPU32), values, lines, basis)


def test_blocks_nesting_epochs_with_early_stamps(texts):
    # 410 lines: :192 run_start 1683515854.111, :410 run_stop 1683515886.076 "success", :7 init_start 1683515713.811;
    # 50 epoch intervals (last epoch_stop :404) summing to 11.249 s, 13 blocks (2 + 12 x 4 epochs, last block_stop
    # :409) summing to 31.179 s, 13 eval intervals inside them summing to 0.215 s (awk): 11.249 / 30.964 = 36 %
    values = {
        "submission_benchmark": "resnet",
        "submission_division": "closed",
        "submission_org": "NVIDIA",
        "submission_platform": "64xNVIDIA DGX H100",
        "run_start": 1683515854.111,
        "init_start_lines": 1,
        "time_init_s": 1683515854.111 - 1683515713.811,
        "status": "success",
        "run_time_s": 1683515886.076 - 1683515854.111,
        "global_batch_logged": 20480,  # :179
        "train_samples": 1281167,  # :193
        "epochs": 50,
        "epoch_time_sum_s": 11.249,
        "train_time_s": 31.179 - 0.215,
        "train_window_epochs": 50,
        "accuracy": 0.7596,  # :408
    }
    lines = {"submission_benchmark": 1, "submission_org": 2, "submission_division": 3, "submission_platform": 5,
             "run_start": 192, "init_start_lines": 7, "time_init_s": 192, "status": 410, "run_time_s": 410,
             "global_batch_logged": 179, "train_samples": 193, "epochs": 404, "epoch_time_sum_s": 404,
             "train_time_s": 409, "train_window_epochs": 409, "accuracy": 408}  # fmt: skip
    basis = {"status": "run_stop metadata.status", "global_batch_logged": "global_batch_size",
             "train_samples": "train_samples", "epochs": PAIRS, "train_time_s": BLOCKS}  # fmt: skip
    problems = ["epochs stamped early: the epoch intervals cover 36% of the training time in blocks"]
    check(reading_of(texts, H100_N64), values, lines, basis, problems)


def test_epochs_without_blocks(texts):
    # 127 lines: :9 run_start 1715332908.589, :127 run_stop 1715342677.622 "success", :7 init_start 1715331108.590;
    # 35 epoch intervals (last epoch_stop :123) summing to 9319.048 s (awk); no blocks
    values = {
        "submission_org": "tinycorp",
        "submission_platform": "tinybox_red",
        "submission_division": "closed",
        "submission_benchmark": "resnet",
        "run_start": 1715332908.589,
        "init_start_lines": 1,
        "time_init_s": 1715332908.589 - 1715331108.590,
        "status": "success",
        "run_time_s": 1715342677.622 - 1715332908.589,
        "global_batch_logged": 1536,  # :11
        "train_samples": 1281167,  # :12
        "epochs": 35,
        "epoch_time_sum_s": 9319.048,
        "train_time_s": 9319.048,
        "train_window_epochs": 35,
        "accuracy": 0.75942,  # :125
    }
    lines = {"submission_org": 1, "submission_platform": 2, "submission_division": 3, "submission_benchmark": 5,
             "run_start": 9, "init_start_lines": 7, "time_init_s": 9, "status": 127, "run_time_s": 127,
             "global_batch_logged": 11, "train_samples": 12, "epochs": 123, "epoch_time_sum_s": 123,
             "train_time_s": 123, "train_window_epochs": 123, "accuracy": 125}  # fmt: skip
    basis = {"status": "run_stop metadata.status", "global_batch_logged": "global_batch_size",
             "train_samples": "train_samples", "epochs": PAIRS, "train_time_s": EPOCH_SUM}  # fmt: skip
    check(reading_of(texts, TINY_RED), values, lines, basis)


def test_log_ending_before_run_stop(texts):
    # 136 lines, no run_stop: :9 run_start 1715318457.308, :7 init_start 1715316660.676; 37 epoch intervals (last
    # epoch_stop :133) summing to 7464.450 s (awk); :135 eval_accuracy 0.75842
    values = {
        "submission_org": "tinycorp",
        "submission_platform": "tinybox_green",
        "submission_division": "closed",
        "submission_benchmark": "resnet",
        "run_start": 1715318457.308,
        "init_start_lines": 1,
        "time_init_s": 1715318457.308 - 1715316660.676,
        "status": "no_run_stop",
        "global_batch_logged": 1536,
        "train_samples": 1281167,
        "epochs": 37,
        "epoch_time_sum_s": 7464.450,
        "train_time_s": 7464.450,
        "train_window_epochs": 37,
        "accuracy": 0.75842,
    }
    lines = {"submission_org": 1, "submission_platform": 2, "submission_division": 3, "submission_benchmark": 5,
             "run_start": 9, "init_start_lines": 7, "time_init_s": 9, "global_batch_logged": 11, "train_samples": 12,
             "epochs": 133, "epoch_time_sum_s": 133, "train_time_s": 133, "train_window_epochs": 133,
             "accuracy": 135}  # fmt: skip
    basis = {"status": "no run_stop line: the log ends before the run did", "global_batch_logged": "global_batch_size",
             "train_samples": "train_samples", "epochs": PAIRS, "train_time_s": EPOCH_SUM}  # fmt: skip
    check(reading_of(texts, TINY_GREEN), values, lines, basis)


def test_blocks_that_do_not_nest_the_epochs(texts):
    # Graphcore's second "block" (:106-:137, label 1 again) is the evaluation: it holds none of its 38 epochs, so the
    # epoch intervals are the training time: 38 of them (:29-:104) summing to 1683.537 s (awk). :27 run_start
    # 1636168821.801, :138 run_stop 1636170592.706 {"success": false} with status "aborted"; :2 init_start
    # 1636168322.052
    values = {
        "submission_benchmark": "resnet",
        "submission_division": "closed",
        "submission_org": "Graphcore",
        "submission_platform": "POD16",
        "run_start": 1636168821.801,
        "init_start_lines": 1,
        "time_init_s": 1636168821.801 - 1636168322.052,
        "status": "aborted",
        "run_time_s": 1636170592.706 - 1636168821.801,
        "global_batch_logged": 3200,  # :9
        "train_samples": 1281167,  # :14
        "epochs": 38,
        "epoch_time_sum_s": 1683.537,
        "train_time_s": 1683.537,
        "train_window_epochs": 38,
        "accuracy": 0.75846025390625,  # :136
    }
    lines = {"submission_benchmark": 3, "submission_division": 4, "submission_org": 5, "submission_platform": 7,
             "run_start": 27, "init_start_lines": 2, "time_init_s": 27, "status": 138, "run_time_s": 138,
             "global_batch_logged": 9, "train_samples": 14, "epochs": 104, "epoch_time_sum_s": 104,
             "train_time_s": 104, "train_window_epochs": 104, "accuracy": 136}  # fmt: skip
    basis = {"status": "run_stop metadata.status", "global_batch_logged": "global_batch_size",
             "train_samples": "train_samples", "epochs": PAIRS, "train_time_s": EPOCH_SUM}  # fmt: skip
    check(reading_of(texts, GRAPHCORE), values, lines, basis)


def test_v05_run_stop_value_and_train_loop(texts):
    # :1 run_clear_caches, :2 run_start 1541660914.084755421, :7 train_loop 1541660914.304390430, :400 run_stop
    # 1541679005.124143600 {"success": "true"}; train_epoch 0 (:8) and eval labels 0 .. 60, then 61 (:398): 62 epochs;
    # 17 eval intervals summing to 251.035595894 s (awk)
    values = {
        "submission_benchmark": "resnet",  # the v0.5 line's benchmark field, :1
        "run_start": 1541660914.084755421,
        "status": "success",
        "run_time_s": 1541679005.124143600 - 1541660914.084755421,
        "global_batch_logged": 1024,  # :4
        "train_samples": 1281167,  # :5 preproc_num_train_examples
        "epochs": 62,
        "train_window_epochs": 62,
        "train_time_s": (1541679005.124143600 - 1541660914.304390430) - 251.035595894,
        "accuracy": 0.7511393427848816,  # :398
        "run_clear_caches_lines": 1,
    }
    lines = {"submission_benchmark": 1, "run_start": 2, "status": 400, "run_time_s": 400, "global_batch_logged": 4,
             "train_samples": 5, "epochs": 398, "train_window_epochs": 398, "train_time_s": 400, "accuracy": 398,
             "run_clear_caches_lines": 1}  # fmt: skip
    basis = {"status": "run_stop value success", "global_batch_logged": V05_BATCH,
             "train_samples": "preproc_num_train_examples", "epochs": LABELS, "train_time_s": TRAIN_LOOP}  # fmt: skip
    check(reading_of(texts, V05_GOOGLE), values, lines, basis)


def test_v05_status_from_eval_target(texts):
    # :3 run_start 1541720386.718659639, :337 train_loop 1541720418.766180992, :449 run_stop 1541728484.695488691
    # without a value; :336 eval_target 0.749, :447 eval {"epoch": 62, "value": 0.7522}; train_epoch 0 (:338) ..
    # 62 (:445): 63 epochs, the top label's line the eval's (:447); 16 eval intervals summing to 93.143555641 s (awk)
    values = {
        "submission_benchmark": "resnet",
        "run_start": 1541720386.718659639,
        "status": "success",
        "run_time_s": 1541728484.695488691 - 1541720386.718659639,
        "global_batch_logged": 208,  # :317
        "train_samples": 1281167,  # :328
        "epochs": 63,
        "train_window_epochs": 63,
        "train_time_s": (1541728484.695488691 - 1541720418.766180992) - 93.143555641,
        "accuracy": 0.7522,
        "run_clear_caches_lines": 1,
    }
    lines = {"submission_benchmark": 1, "run_start": 3, "status": 449, "run_time_s": 449, "global_batch_logged": 317,
             "train_samples": 328, "epochs": 447, "train_window_epochs": 447, "train_time_s": 449, "accuracy": 447,
             "run_clear_caches_lines": 1}  # fmt: skip
    basis = {"status": "run_stop states nothing: last eval_accuracy (line 447) against target 0.749",
             "global_batch_logged": V05_BATCH, "train_samples": "preproc_num_train_examples", "epochs": LABELS,
             "train_time_s": TRAIN_LOOP}  # fmt: skip
    check(reading_of(texts, V05_NVIDIA), values, lines, basis)


def test_noncompliant_bracket_log(texts):
    # [06/13/19 00:30:56] run_start :1 (the first of many), train_loop :320 at 00:30:58, run_stop :512 at 00:55:21
    # without a value, no eval_target: 0.759; :510 eval {"value": 75.98000%, "epoch": 79}; train_epoch:0 (:324);
    # 20 eval intervals (:376-:378 2 s, then 0 or 1 s each): 10 s
    values = {
        "submission_benchmark": "resnet",
        "run_start": 1560385856.0,  # 2019-06-13 00:30:56 read as UTC
        "status": "success",
        "run_time_s": 1465.0,  # 00:55:21 - 00:30:56
        "global_batch_logged": 256,  # :14
        "train_samples": 1281167,  # :15
        "epochs": 80,
        "train_window_epochs": 80,
        "train_time_s": 1463.0 - 10.0,  # (00:55:21 - 00:30:58) - 10 s of evaluation
        "accuracy": 0.7598,
    }
    lines = {
        "submission_benchmark": 1,
        "run_start": 1,
        "status": 512,
        "run_time_s": 512,
        "global_batch_logged": 14,
        "train_samples": 15,
        "epochs": 510,
        "train_window_epochs": 510,
        "train_time_s": 512,
        "accuracy": 510,
    }
    basis = {"status": "run_stop states nothing: last eval_accuracy (line 510) against target 0.759",
             "global_batch_logged": V05_BATCH, "train_samples": "preproc_num_train_examples", "epochs": LABELS,
             "train_time_s": TRAIN_LOOP}  # fmt: skip
    check(reading_of(texts, SINIAN), values, lines, basis)


# Branches no real log takes: the SIAT log edited (its run_stop :34 ends `"status": "success"}}`).
SIAT_STOP = '"lineno": 314, "status": "success"}}'


def test_status_against_the_target_when_run_stop_states_nothing(texts):
    def unstated(last_accuracy: str, target: str = ""):
        def edit(text):
            text = text.replace(SIAT_STOP, '"lineno": 314}}').replace('"value": 0.75994', f'"value": {last_accuracy}')
            return text + target

        return edit

    reading = reading_of(texts, SIAT, unstated("0.759"))  # exactly the target from v0.6 on: reached
    assert (reading.values["status"], reading.lines["status"]) == ("success", 34)
    assert reading.basis["status"] == "run_stop states nothing: last eval_accuracy (line 33) against target 0.759"
    assert reading_of(texts, SIAT, unstated("0.75899")).values["status"] == "aborted"
    assert reading_of(texts, SIAT, unstated("75.994")).values["accuracy"] == pytest.approx(0.75994)  # a percentage
    target = ':::MLLOG {"time_ms": 1593193532868, "key": "eval_target", "value": 0.76}\n'  # a logged target wins
    reading = reading_of(texts, SIAT, unstated("0.75994", target))
    assert reading.values["status"] == "aborted"
    assert reading.basis["status"] == "run_stop states nothing: last eval_accuracy (line 33) against target 0.76"
    target = ':::MLLOG {"time_ms": 1593193532868, "key": "eval_target", "value": 0.7599}\n'
    assert reading_of(texts, SIAT, unstated("0.7599", target)).values["status"] == "success"


def test_status_without_any_accuracy(texts):
    def edit(text):
        kept = [line for line in text.split("\n") if '"eval_accuracy"' not in line]
        return "\n".join(kept).replace(SIAT_STOP, '"lineno": 314}}')

    reading = reading_of(texts, SIAT, edit)
    assert (reading.values["status"], reading.lines["status"]) == ("aborted", 29)  # 5 lines fewer: run_stop is :29
    assert reading.basis["status"] == "run_stop states nothing and no eval_accuracy was logged"
    assert "accuracy" not in reading.values


def test_run_stop_value_overrides_a_stated_success(texts):
    # Graphcore's :138 run_stop says {"success": false} and "aborted"; stating "success" beside that value is aborted
    reading = reading_of(texts, GRAPHCORE, lambda t: t.replace('"status": "aborted"', '"status": "Success"'))
    assert (reading.values["status"], reading.lines["status"]) == ("aborted", 138)
    assert reading.basis["status"] == "run_stop value success false"
    # v0.5's value {"success": false}, no metadata: aborted (V05_GOOGLE's :400 says "true")
    false = 'run_stop: {"success": false}'
    reading = reading_of(texts, V05_GOOGLE, lambda t: t.replace('run_stop: {"success": "true"}', false))
    assert (reading.values["status"], reading.basis["status"]) == ("aborted", "run_stop value success")


def test_train_samples_not_logged_and_blocks_without_a_count(texts):
    def edit(text):
        text = "\n".join(line for line in text.split("\n") if '"train_samples"' not in line)
        return text.replace('"first_epoch_num": 17, "epoch_count": 4', '"first_epoch_num": 17')  # :31's count gone

    reading = reading_of(texts, SIAT, edit)
    assert reading.values["train_samples"] == 1281167 and "train_samples" not in reading.lines
    assert reading.basis["train_samples"] == "not logged: ImageNet's 1281167 assumed"
    # a block without epoch_count counts 0 epochs and leaves no training time (no epoch intervals either)
    assert reading.values["epochs"] == 16 and reading.lines["epochs"] == 31  # the line after the cut :17
    assert "train_time_s" not in reading.values and "train_window_epochs" not in reading.values


def test_v05_labels_outside_the_run_are_not_epochs(texts):
    # A train_epoch marker before run_start (:2) and an eval label after run_stop (:400) are not counted (edited)
    early = ":::MLPv0.5.0 resnet 1541660914.0 (x.py:1) train_epoch: -5\n"
    late = '\n:::MLPv0.5.0 resnet 1541679009.0 (x.py:1) eval_accuracy: {"value": 0.76, "epoch": 90}'
    reading = reading_of(texts, V05_GOOGLE, lambda t: early + t.rstrip("\n") + late)
    assert reading.values["epochs"] == 62 and reading.lines["epochs"] == 399
    assert reading.values["accuracy"] == 0.76  # the last eval_accuracy is still the accuracy


# Real logs whose blocks, labels or evaluations pair in the odd ways the corpus README lists (sums by awk)


def test_blocks_of_one_epoch_per_start(texts):
    # PCL writes a block_start per epoch, each with its block's first_epoch_num and epoch_count 1, and one
    # block_stop per block (before each evaluation): :24, :25 (label 1) closed by :26 (label 1), eval :27 at
    # epoch_num 2; :28-:31 (label 3) by :32, eval :33 at 6; ... :82-:85 (label 39) by :86, eval :87 at 42: the
    # starts of one label are one block from the earliest of them, 2 + 10 x 4 = 42 epochs (the last eval label).
    # Time (ms): (:26 1622086109020 - :24 1622086103640) + (:32 ...118933 - :28 ...109021) + (:38 ...128860 - :34
    # ...118934) + (:44 ...138799 - :40 ...128861) + (:50 ...148749 - :46 ...138800) + (:56 ...158713 - :52
    # ...148750) + (:62 ...168684 - :58 ...158714) + (:68 ...178657 - :64 ...168685) + (:74 ...188642 - :70
    # ...178658) + (:80 ...198622 - :76 ...188642) + (:86 ...208549 - :82 ...198623) = 104.900 s, that is
    # :86 - :24 = 104.909 s less the nine 1 ms gaps between a stop and the next start. Reading each stop as
    # closing only the latest start of its label gave 11 blocks of 1 epoch in 27.802 s (the old reading); the
    # earliest open start whatever its label (:24 by :26, :25 by :32, ...) would give 465.827 s.
    reading = reading_of(texts, PCL)
    assert (reading.values["epochs"], reading.values["train_window_epochs"]) == (42, 42)
    assert reading.values["train_time_s"] == pytest.approx(104.900, abs=EXACT) and reading.lines["train_time_s"] == 86
    assert reading.lines["epochs"] == 86 and reading.values["accuracy"] == 0.76088  # :87, at epoch_num 42
    assert reading.basis["train_time_s"] == NO_EVAL and reading.basis["epochs"] == BLOCK_EPOCHS
    # :19 init_start 1622086048.408, :21 run_start 1622086103.638, :88 run_stop 1622086208.742
    assert reading.values["time_init_s"] == pytest.approx(1622086103.638 - 1622086048.408, abs=EXACT)
    assert reading.values["run_time_s"] == pytest.approx(1622086208.742 - 1622086103.638, abs=EXACT)


def test_blocks_of_one_epoch_per_start_four_per_block(texts):
    # PCL's 1,024-accelerator log: 14 labels (1, 5, ..., 53) of 4 block_starts each (:24-:27 closed by :28, ...,
    # :102-:105 by :106), the last eval :107 at epoch_num 56 = 14 x 4. Time: :106 1621452024.981 - :24
    # 1621451986.422 = 38.559 s less the gaps stop -> next start (1 ms after :28, :40, :46, :64, :70, :76, :94;
    # 0 ms after the other six) = 38.552 s
    reading = reading_of(texts, PCL_1024)
    assert (reading.values["epochs"], reading.values["train_window_epochs"]) == (56, 56)
    assert reading.values["train_time_s"] == pytest.approx(38.552, abs=EXACT) and reading.lines["train_time_s"] == 106
    assert reading.values["accuracy"] == 0.76024 and reading.lines["accuracy"] == 107


def test_blocks_whose_stop_names_the_next_block(texts):
    # SIAT's block_stop says the next block's first_epoch_num (:22 start 0, :23 stop 2): no label matches, each stop
    # closes the earliest open start: 30 blocks of 2 epochs summing to 91.300 s (awk), the last block_stop :110
    reading = reading_of(texts, SIAT_512)
    assert (reading.values["epochs"], reading.values["train_window_epochs"], reading.lines["epochs"]) == (60, 60, 110)
    assert reading.values["train_time_s"] == pytest.approx(91.300, abs=EXACT) and reading.lines["train_time_s"] == 110


def test_block_stops_that_all_say_one(texts):
    # Intel SPR: one block_start (:186, epoch_count 3) and 9 block_stops all labelled 1: the first (:199) closes it;
    # the 3 epochs in it nest, so the blocks rule: (1665444361.035 - 1665443899.914) s minus the eval :196-:198
    # (1665444361.035 - 1665444353.828); the 35 epoch intervals sum to 5242.989 s (awk)
    reading = reading_of(texts, INTEL_SPR)
    block = (1665444361.035 - 1665443899.914) - (1665444361.035 - 1665444353.828)
    assert reading.values["train_time_s"] == pytest.approx(block, abs=EXACT) and reading.lines["train_time_s"] == 199
    assert (reading.values["train_window_epochs"], reading.values["epochs"]) == (3, 35)
    assert reading.values["epoch_time_sum_s"] == pytest.approx(5242.989, abs=EXACT)
    assert reading.basis["train_time_s"] == BLOCKS and reading.problems == []


def test_init_stamped_after_the_run_and_evaluations_outside_the_blocks(texts):
    # Intel 8380H: :1 init_start 1623864781.600 is after :13 run_start 1623291226.646: no init time; its 9 eval
    # intervals (217.492 s) lie outside the 9 blocks (56413.898 s, awk): the evaluation is not subtracted
    reading = reading_of(texts, INTEL_8380H)
    assert "time_init_s" not in reading.values and reading.values["init_start_lines"] == 1
    assert reading.values["train_time_s"] == pytest.approx(56413.898, abs=EXACT)
    assert reading.basis["train_time_s"] == NO_EVAL


def test_epochs_covering_the_blocks_are_not_flagged(texts):
    # CoreWeave n448: 77 epoch intervals sum to 10.137 s, 20 blocks to 10.609 s with 0.360 s of evaluation (awk):
    # 10.137 / 10.249 = 98.9 %, above the 95 % below which epochs count as stamped early
    reading = reading_of(texts, COREWEAVE)
    assert reading.problems == [] and reading.values["train_time_s"] == pytest.approx(10.609 - 0.360, abs=EXACT)
    assert reading.values["epoch_time_sum_s"] == pytest.approx(10.137, abs=EXACT)


def test_v05_labels_from_minus_one_and_an_eval_ending_at_run_stop(texts):
    # Intel v0.5: the first eval is labelled -1 (:306), the last 60 (:733): 62 epochs; whole-second stamps, :300
    # train_loop 1541213559, :734 run_stop 1541291399; 62 evals of 800 s in all (awk), the last ending at run_stop
    reading = reading_of(texts, V05_INTEL)
    assert (reading.values["epochs"], reading.lines["epochs"], reading.values["train_window_epochs"]) == (62, 733, 62)
    assert reading.values["train_time_s"] == (1541291399 - 1541213559) - 800
    assert reading.values["global_batch_logged"] == 32 and reading.lines["run_clear_caches_lines"] == 735


def test_v05_eval_before_the_train_loop_is_not_subtracted(texts):
    # Google TPU v3-512: an eval :14-:16 (1544221507.511962891 - 1544221493.741590977 s) before :19 run_start and
    # :343 train_loop; all 21 evals sum to 94.760796547 s (awk); :343 train_loop 1544221725.253753901, :688 run_stop
    # 1544222152.085911036
    reading = reading_of(texts, V05_TPU512)
    after_loop = 94.760796547 - (1544221507.511962891 - 1544221493.741590977)
    train = (1544222152.085911036 - 1544221725.253753901) - after_loop
    assert reading.values["train_time_s"] == pytest.approx(train, abs=EXACT)
    # labels: train_epoch 0 (:346) .. eval 83 (:686); the eval labelled 3 (:17) is before run_start: not counted
    assert (reading.values["epochs"], reading.lines["epochs"]) == (84, 686)


# Branches at the edges of the rules, on edited real logs (each edit said) or, for the early-stamp share's bounds,
# on events built here (block, epoch and eval intervals of chosen lengths: no real log sits on those bounds)


def test_stops_before_any_start_are_ignored(texts):
    # an epoch_stop (tinybox_red) and a block_stop (SIAT) logged before the first start: nothing to close
    orphan = ':::MLLOG {"time_ms": 1715332908590, "key": "epoch_stop", "value": 0, "metadata": {"epoch_num": 0}}'
    red = reading_of(texts, TINY_RED, lambda t: t.replace("\n", f"\n{orphan}\n", 1))  # after :1
    assert red.values["epochs"] == 35 and red.values["train_time_s"] == pytest.approx(9319.048, abs=EXACT)
    block = (
        ':::MLLOG {"time_ms": 1593193410510, "key": "block_stop", "value": null, "metadata": {"first_epoch_num": 1}}'
    )
    siat = reading_of(texts, SIAT, lambda t: t.replace("\n", f"\n{block}\n", 1))
    assert siat.values["train_time_s"] == pytest.approx(119.809, abs=EXACT) and siat.values["epochs"] == 20


def test_accuracy_values_read_as_fractions_or_percentages(texts):
    def last(value: str):
        return lambda t: t.replace('"value": 0.75994', f'"value": {value}')  # SIAT's :33

    assert reading_of(texts, SIAT, last("1.5")).values["accuracy"] == pytest.approx(0.015)  # above 1: a percentage
    assert reading_of(texts, SIAT, last("1")).values["accuracy"] == 1.0
    reading = reading_of(texts, SIAT, last("true"))  # not a number: the last numeric one stands
    assert (reading.values["accuracy"], reading.lines["accuracy"]) == (0.7186, 30)


def test_init_start_at_the_run_start_gives_no_init_time(texts):
    key = '"event_type": "INTERVAL_START", "key": "init_start"'  # SIAT's :7, moved to run_start's time (:16)
    same = lambda t: t.replace(f'"time_ms": 1593192965834, {key}', f'"time_ms": 1593193410509, {key}')  # noqa: E731
    assert "time_init_s" not in reading_of(texts, SIAT, same).values


def test_eval_starting_at_its_block_start_is_inside(texts):
    # H100_N64's first eval (:202 1683515856322 - :203 1683515856373) moved to start with its block (:195 ...854896)
    moved = lambda t: t.replace('"time_ms": 1683515856322', '"time_ms": 1683515854896')  # noqa: E731
    reading = reading_of(texts, H100_N64, moved)
    evals = 0.215 - (1683515856.373 - 1683515856.322) + (1683515856.373 - 1683515854.896)
    assert reading.values["train_time_s"] == pytest.approx(31.179 - evals, abs=EXACT)


def test_v05_edges_of_the_run(texts):
    # V05_GOOGLE: :2 run_start 1541660914.084755421, :7 train_loop 1541660914.304390430, :8 train_epoch 0, the first
    # eval :332-:333, :400 run_stop 1541679005.124143600; 62 epochs, 17 evals of 251.035595894 s (awk)
    def lines_without(*words):
        return lambda t: "\n".join(x for x in t.split("\n") if not any(w in x for w in words))

    assert reading_of(texts, V05_GOOGLE, lines_without(") run_start")).values["epochs"] == 62  # no run_start: all
    no_stop = reading_of(texts, V05_GOOGLE, lines_without(") run_stop"))
    assert no_stop.values["epochs"] == 62 and "train_time_s" not in no_stop.values
    no_markers = reading_of(texts, V05_GOOGLE, lines_without("train_epoch"))
    assert (no_markers.values["epochs"], no_markers.lines["epochs"]) == (62, 397)  # eval labels 0 .. 61 (:8 cut)
    no_evals = reading_of(texts, V05_GOOGLE, lines_without("eval_accuracy"))
    assert no_evals.values["epochs"] == 1 and "accuracy" not in no_evals.values  # train_epoch 0 alone
    assert "train_time_s" not in reading_of(texts, V05_GOOGLE, lines_without(") train_loop")).values
    # a marker stamped at run_start (labelled -1) and one at run_stop (70) count; so does an eval starting at
    # train_loop (the first, :332, moved there: 23.48 s longer)
    at_start = ":::MLPv0.5.0 resnet 1541660914.084755421 (x.py:1) train_epoch: -1"
    at_stop = ":::MLPv0.5.0 resnet 1541679005.124143600 (x.py:1) train_epoch: 70"
    both = reading_of(texts, V05_GOOGLE, lambda t: f"{at_start}\n{t.rstrip()}\n{at_stop}\n")
    assert both.values["epochs"] == 72
    early_eval = ':::MLPv0.5.0 resnet 1541660914.084755421 (x.py:1) eval_accuracy: {"value": 0.01, "epoch": -2}'
    assert reading_of(texts, V05_GOOGLE, lambda t: f"{early_eval}\n{t}").values["epochs"] == 64
    moved = reading_of(texts, V05_GOOGLE, lambda t: t.replace("1541661275.935679674", "1541660914.304390430"))
    longer = 1541661275.935679674 - 1541660914.304390430
    train = (1541679005.124143600 - 1541660914.304390430) - 251.035595894 - longer
    assert moved.values["train_time_s"] == pytest.approx(train, abs=EXACT)
    # an eval_accuracy with a bare value has no epoch label; a log of one line still names its benchmark
    labelled = 'eval_accuracy: {"value": 0.7511393427848816, "epoch": 61}'  # :398
    bare = reading_of(texts, V05_GOOGLE, lambda t: t.replace(labelled, "eval_accuracy: 0.7511393427848816"))
    assert (bare.values["epochs"], bare.values["accuracy"]) == (61, 0.7511393427848816)
    one = read("mlp05", events(Path("x"), ":::MLPv0.5.0 resnet 1.5 (x.py:1) run_start")[1])
    assert (one.values["submission_benchmark"], one.lines["submission_benchmark"]) == ("resnet", 1)


def built(blocks, epochs, evals=()) -> Reading:
    """A reading of MLLOG events with closed blocks (start, stop, count), epochs and evals (start, stop) in s."""
    found, line = [], 0

    def add(key: str, t: float, **meta) -> None:
        nonlocal line
        line += 1
        found.append(Event(key, None, t, line, meta))

    for a, b, count in blocks:
        add("block_start", a, first_epoch_num=a, epoch_count=count)
        add("block_stop", b, first_epoch_num=a)
    for key, pairs in (("epoch", epochs), ("eval", evals)):
        for a, b in pairs:
            add(f"{key}_start", a)
            add(f"{key}_stop", b)
    return read("mllog", sorted(found, key=lambda e: (e.t, e.line)))


def test_early_stamp_share_bounds():
    assert built([(0, 1.0, 1)], [(0, 0.95)]).problems == []  # exactly 95 %: not early
    assert built([(0, 0.8, 1)], [(0, 0.1)]).problems == [
        "epochs stamped early: the epoch intervals cover 12% of the training time in blocks"
    ]  # under a second of training is still a share
    assert built([(0, 10, 1)], [(0, 1)], [(2, 7)]).problems == [
        "epochs stamped early: the epoch intervals cover 20% of the training time in blocks"
    ]  # 1 s of epochs over 10 - 5 s
    whole = built([(0, 10, 1)], [(0, 0.5)], [(0, 10)])  # the evaluation fills the block: no share
    assert whole.values["train_time_s"] == 0 and whole.problems == []


def test_epochs_nest_in_blocks_edge_to_edge():
    nested = built([(0, 1, 1), (2, 3, 1)], [(0, 1), (2, 3)])  # each epoch ends where its block does
    assert nested.basis["train_time_s"] == NO_EVAL and nested.values["train_time_s"] == 2
    stray = built([(0, 1, 1), (2, 3, 1)], [(0, 1), (2, 2.5), (1.2, 1.8)])  # an epoch between the blocks
    assert stray.basis["train_time_s"] == EPOCH_SUM
    # epochs pair in time order: (0, 1), (1.5, 3), (2, 3); (1.5, 3) ends at the last block_stop and lies in no block
    last = built([(0, 1, 1), (2, 3, 1)], [(0, 1), (2, 3), (1.5, 3)])
    assert last.basis["train_time_s"] == EPOCH_SUM
