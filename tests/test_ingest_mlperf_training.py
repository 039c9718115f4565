"""mlperf-training-resnet importer: every log format and system-file shape, on the real logs, with values read
from the log lines by hand (file:line in the comments, paths relative to the dataset's raw folder)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import REFERENCE, raw_dir

from scalestudy.ingest import mlperf_training
from scalestudy.ingest.logs.mlperf_events import events
from scalestudy.ingest.logs.mlperf_system import read_system_any_shape as read_system
from scalestudy.schema import NOT_STATED, SchemaError

FOLDER = REFERENCE / "mlperf-training-resnet"
V10_NVIDIA = "v1.0/NVIDIA/results/dgxa100_ngc21.05_mxnet/resnet/result_0.txt"
V07_ALIBABA_1280 = "v0.7/Alibaba/results/v100-1280/result_1.txt"
V06_TPU32 = "v0.6/Google/results/tpu-v3-32/resnet/result_0.txt"
V05_DGX1 = "v0.5/v0.5.0/nvidia/submission/results/dgx1_ngc18.11_mxnet/resnet/result_0.txt"
V05_DGX1_MULTI = "v0.5/v0.5.0/nvidia/submission/results/dgx1_multi_ngc18.11_mxnet/resnet/result_0.txt"
V05_TPUV3_8 = "v0.5/v0.5.0/google/cloud_v3.8/resnet-tpuv3-8/results/tpu/resnet/result_0.txt"
V06_SINIAN = "v0.6/Alibaba/results/sinian/resnet/result_1.txt"
V20_N128 = "v2.0/NVIDIA/results/dgxa100_n128_ngc22.04_mxnet/resnet/result_0.txt"
V21_N128 = "v2.1/NVIDIA/results/dgxa100_n128_ngc22.04_mxnet/resnet/result_0.txt"
V40_TINY = "v4.0/tinycorp/results/tinybox_green/resnet/result_0.txt"


@pytest.fixture(scope="module")
def raw():
    """The raw files, fetched (from the mirror) into the cache: they are not committed."""
    return raw_dir("mlperf-training-resnet")


@pytest.fixture(scope="module")
def corpus_runs(raw):
    return {rec.key: rec for rec in mlperf_training.read(FOLDER, progress=False)}


def s(text: str) -> float:
    """'06/13/19 00:30:56' (v0.6 Alibaba's local time, read as UTC) -> unix seconds."""
    return datetime.strptime(text, "%m/%d/%y %H:%M:%S").replace(tzinfo=UTC).timestamp()


def test_one_run_per_distinct_log(corpus_runs):
    # 379 systems, 7 logs absent from the mirror, 42 redundant byte-for-byte copies: 379 - 7 - 42 = 330
    assert len(corpus_runs) == 330
    statuses = [r.tags["run_stop_status"] for r in corpus_runs.values()]
    assert statuses.count("aborted") == 14 and statuses.count("no_run_stop") == 1  # the corpus README's counts
    formats = [r.tags["log_format"] for r in corpus_runs.values()]
    assert (formats.count("mll"), formats.count("mlperf-bracket"), formats.count("mlp05")) == (13, 1, 14)
    for rec in corpus_runs.values():
        rec.validate()
        assert rec.params["model"] == "resnet50" and rec.tags["source"] == "published"
        assert all(v > 0 for k, v in rec.metrics.items() if k != "accuracy_test")


def test_mllog_time_ms(corpus_runs):
    rec = corpus_runs[V10_NVIDIA]
    # :437 global_batch_size 3264; :449 run_start time_ms 1621118646492; :1404 run_stop 1621120371034 "success"
    assert rec.metrics["time_total_s"] == pytest.approx((1621120371034 - 1621118646492) / 1000)
    assert rec.tags["global_batch_size"] == "3264" and rec.params["workers"] == 8  # systems/…json: 1 node x 8
    assert rec.params["batch_per_worker"] == 3264 // 8 and rec.params["epochs"] == 35  # 35 epoch_stop lines
    assert rec.metrics["accuracy_test"] == 0.76066  # :1402
    assert rec.tags["division"] == "closed" and rec.status == "FINISHED"  # :9 submission_division
    # The corpus README's two readings of this log: blocks minus evaluation, and the epoch intervals alone
    assert rec.metrics["throughput_total"] == pytest.approx(26216.7, abs=0.05)
    assert rec.metrics["throughput_epochs"] == pytest.approx(26233.0, abs=0.05)
    assert rec.metrics["throughput_run"] == pytest.approx(35 * 1281167 / rec.metrics["time_total_s"])
    assert rec.tags["train_time_basis"].startswith("blocks")
    assert "global_batch_logged: result_0.txt:437" in rec.tags["source_lines"]
    assert "time_total_s: result_0.txt:1404" in rec.tags["source_lines"]
    assert rec.params["device"] == "A100" and rec.params["framework"] == "mxnet"


def test_mllog_time_s_aborted_run(corpus_runs):
    rec = corpus_runs[V07_ALIBABA_1280]
    # :1293 run_start time_s 1593422672.835; :1535 run_stop 1593422775.122 status "aborted" (after :1533 eval 0.759)
    assert rec.status == "FAILED" and rec.tags["run_stop_status"] == "aborted"
    assert "aborted" in rec.tags["failure_reason"] and "result_1.txt:1535" in rec.tags["failure_reason"]
    assert rec.metrics["time_total_s"] == pytest.approx(1593422775.122 - 1593422672.835)
    assert rec.metrics["accuracy_test"] == 0.759
    # :10 global_batch_size 57600 (a setting stamped time_s 0.0); n160_pai_eflops.json: 160 nodes x 8 (trailing commas)
    assert rec.params["workers"] == 1280 and rec.params["batch_per_worker"] == 45
    assert rec.tags["system_shape"] == "malformed" and "trailing commas" in rec.tags["problems"]
    assert rec.tags["init_start_lines"] == "1280"  # one init_start per GPU


def test_mll_v06_tpu_chips(corpus_runs):
    rec = corpus_runs[V06_TPU32]
    # :21 run_start 1558420845.819, :68 run_stop 1558423379.276 success; 15 blocks of epoch_count 4; :8 batch 4096
    assert rec.metrics["time_total_s"] == pytest.approx(1558423379.276 - 1558420845.819)
    assert rec.params["epochs"] == 60 and rec.tags["global_batch_size"] == "4096"
    assert rec.params["workers"] == 16  # systems/tpu-v3-32.json counts chips: 32 cores = 16 chips
    assert rec.params["batch_per_worker"] == 256 and rec.metrics["accuracy_test"] == pytest.approx(0.7609, abs=1e-6)
    assert "evaluation stays in" in rec.tags["train_time_basis"]  # no eval_start/eval_stop in TPU logs
    assert rec.tags["train_samples_basis"] == "num_train_examples"  # :20 num_train_examples 1281167


def test_v05_nvidia_and_tpu_cores(corpus_runs):
    rec = corpus_runs[V05_DGX1]
    # :3 run_start 1541720386.718659639; :449 run_stop (no value) after :447 eval {"epoch": 62, "value": 0.7522}
    # against :336 eval_target 0.749; train_epoch 0 (:338) .. 62 (:445): 63 epochs; :317 input_batch_size 208 per GPU
    assert rec.metrics["time_total_s"] == pytest.approx(1541728484.695488691 - 1541720386.718659639)
    assert rec.status == "FINISHED" and "eval_accuracy" in rec.tags["status_basis"]
    assert rec.params["epochs"] == 63 and rec.params["workers"] == 8
    assert rec.tags["global_batch_size"] == str(208 * 8) and rec.params["batch_per_worker"] == 208
    # entry.json says 128 nodes (the cluster); 80 run_clear_caches lines = the nodes that ran, x 8 GPUs
    multi = corpus_runs[V05_DGX1_MULTI]
    assert multi.params["workers"] == 640 and "run_clear_caches" in multi.tags["accelerators_basis"]
    # entry.json num_accelerators 8 is the TPU v3-8 slice's cores: 4 chips; Google logs the global batch (1024)
    tpu = corpus_runs[V05_TPUV3_8]
    assert tpu.params["workers"] == 4 and tpu.tags["global_batch_size"] == "1024"
    assert tpu.params["device"] == "tpuv3" and tpu.tags["accelerators_basis"].startswith("entry.json TPU core")


def test_noncompliant_v06_alibaba(corpus_runs):
    rec = corpus_runs[V06_SINIAN]
    # :1 first of 64 run_start lines [06/13/19 00:30:56]; :512 run_stop [06/13/19 00:55:21], no value; :510 eval
    # {"value": 75.98000%, "epoch": 79}: 0.7598 >= 0.759; train_epoch:0 (:324) .. eval epoch 79: 80 epochs
    assert rec.metrics["time_total_s"] == s("06/13/19 00:55:21") - s("06/13/19 00:30:56")
    assert rec.metrics["accuracy_test"] == pytest.approx(0.7598) and rec.status == "FINISHED"
    assert rec.params["epochs"] == 80 and rec.params["workers"] == 64  # entry.json: 16 nodes x 4
    assert rec.params["batch_per_worker"] == NOT_STATED  # input_batch_size 256: its meaning is not stated
    # train time: run_stop - train_loop (:320, 00:30:58) minus the evaluations (:376-:378 the first, 2 s)
    assert rec.metrics["time_train_s"] < s("06/13/19 00:55:21") - s("06/13/19 00:30:58")


def test_republished_copy_is_one_run(corpus_runs):
    # the v2.1 NVIDIA folder holds v2.0's logs byte for byte (the same sha256 in manifest.csv)
    assert V20_N128 in corpus_runs and V21_N128 not in corpus_runs
    assert V21_N128 in corpus_runs[V20_N128].tags["copies"].split("; ")
    assert corpus_runs[V20_N128].tags["round"] == "v2.0"


def test_log_without_run_stop(corpus_runs):
    rec = corpus_runs[V40_TINY]  # 136 lines, ends after :135 eval_accuracy 0.75842
    assert rec.status == "FAILED" and rec.tags["run_stop_status"] == "no_run_stop"
    assert "time_total_s" not in rec.metrics and rec.metrics["accuracy_test"] == 0.75842


def test_early_epoch_stamps_flagged(corpus_runs):
    rec = corpus_runs["v2.0/NVIDIA/results/dgxa100_n527_ngc22.04_mxnet/resnet/result_0.txt"]
    assert "epochs stamped early: the epoch intervals cover 19%" in rec.tags["problems"]
    assert rec.params["workers"] == 4216
    assert rec.metrics["throughput_epochs"] > 4 * rec.metrics["throughput_total"]


@pytest.mark.may_skip
def test_system_shapes_agree_with_the_manifest(raw):
    """Every system file the manifest reads strictly gives the same accelerators here; the others are read leniently."""
    import csv

    manifest = Path(os.environ["SCALESTUDY_DATA_MIRROR"]) / "mlperf-training-resnet" / "manifest.csv"
    if not manifest.is_file():  # the mirror's own listing, not a raw file of the dataset: nothing to fetch it from
        pytest.skip(f"{manifest} is not here (the mirror of ../shared/reference is)")
    shapes = set()
    for row in csv.DictReader(manifest.open()):
        if row["file_kind"] != "system_json":
            continue
        facts, _ = read_system(raw / row["path"])
        shapes.add(facts["shape"])
        if row["total_accelerators"] not in ("", "0"):
            assert facts["accelerators"] == int(row["total_accelerators"]), row["path"]
    assert shapes == {"systems-json", "entry-json", "malformed"}


def test_malformed_system_files_read_by_hand(raw):
    # v0.6 NVIDIA: `key: {json}` lines, `entry` a Python repr: 96 nodes x 16 GPUs
    facts, warnings = read_system(raw / "v0.6/NVIDIA/systems/dgx2h_n96_ngc19.05_mxnet.json")
    assert facts["accelerators"] == 1536 and "key: {json}" in warnings[0]
    assert facts["interconnect"].startswith("InfiniBand 100 Gb/sec")
    facts, warnings = read_system(raw / "v0.7/DellEMC/systems/2xC4140.json")  # "number of nodes": 2, x 4
    assert facts["accelerators"] == 8 and "number of nodes" in warnings[0]
    facts, _ = read_system(raw / "v1.0/Intel/systems/8-nodes-64s-8376H-tensorflow.json")
    assert facts["accelerators"] is None and facts["accelerators_basis"] == "cpu only"


def test_bad_system_file_names_it(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"number_of_nodes": "2",\n "accelerators_per_node": \n')
    with pytest.raises(SchemaError, match=r"broken.json:\d+: not valid JSON"):
        read_system(bad)
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"number_of_nodes": "two", "accelerators_per_node": "8"}))
    with pytest.raises(SchemaError, match=r"nodes.json:1: no number_of_nodes"):
        read_system(nodes)


def test_bad_log_line_names_it(tmp_path):
    log = tmp_path / "result_0.txt"
    log.write_text(':::MLLOG {"key": "run_start", "time_ms": 1}\n:::MLLOG {"key": "run_stop", "time_ms"\n')
    with pytest.raises(SchemaError, match=r"result_0.txt:2: MLLOG line is not valid JSON"):
        events(log, log.read_text())
    log.write_text("nothing here\n")
    with pytest.raises(SchemaError, match=r"result_0.txt:1: no MLPerf log line"):
        events(log, log.read_text())


def test_echoed_lines_read_once(tmp_path, raw):
    """A logger that echoes each line twice (v0.5 dgx2 writes 128 train_epoch lines for 64 markers)."""
    text = (raw / V10_NVIDIA).read_text()
    doubled = "\n".join(f"0: {line}\n1: {line}" for line in text.split("\n"))
    _, once = events(raw / V10_NVIDIA, text)
    _, twice = events(tmp_path / "x", doubled)
    assert [e.key for e in once if e.key != "init_start"] == [e.key for e in twice if e.key != "init_start"]
    starts = sum(e.key == "init_start" for e in once)
    assert starts >= 1 and sum(e.key == "init_start" for e in twice) == 2 * starts  # every rank's init_start


def test_absent_logs_listed_and_checked(tmp_path, raw, monkeypatch):
    listed = mlperf_training.read_source(FOLDER)["absent_logs"]
    assert len(listed) == 7 and {e["git_blob_sha1"][:7] for e in listed} >= {"aacacc9", "798ab13"}
    cache = tmp_path / "cache"
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(cache))
    found, missing = mlperf_training.absent_logs("mlperf-training-resnet", listed)
    assert found == [] and len(missing) == 7
    wrong = cache / "mlperf-training-resnet" / listed[0]["log"]  # a file that is not the listed content
    wrong.parent.mkdir(parents=True)
    shutil.copyfile(raw / V10_NVIDIA, wrong)
    with pytest.raises(SchemaError, match=r"git blob id .* is not the"):
        mlperf_training.absent_logs("mlperf-training-resnet", listed)
    # a copy whose git blob id matches is imported: the id of a known file, computed as git does
    assert mlperf_training.git_blob_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
