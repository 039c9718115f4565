"""ingest/mlperf_training.py's run records in this process (the importer parses in worker processes, which mutation
testing does not see): each metric, param and tag of real logs with their system files, against values read from
the files by hand (file:line in the comments; the log readings themselves are pinned line by line in
tests/test_mlperf_reading_values.py). Branches no real file takes use an edited copy, and say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REFERENCE, raw_files_of, reference_source

from scalestudy.ingest import mlperf_training as mt
from scalestudy.ingest.fetch import cache_dir
from scalestudy.schema import NOT_STATED, SchemaError

FOLDER = REFERENCE / "mlperf-training-resnet"
SIAT = "v0.7/SIAT/results/modelarts_128_mindspore_open/resnet/result_0.txt"
SIAT_SYSTEM = "v0.7/SIAT/systems/modelarts_128_mindspore_open.json"
V05_NVIDIA = "v0.5/v0.5.0/nvidia/submission/results/dgx1_ngc18.11_mxnet/resnet/result_0.txt"
V05_NVIDIA_SYSTEM = "v0.5/v0.5.0/nvidia/submission/results/dgx1_ngc18.11_mxnet/entry.json"
V05_GOOGLE = "v0.5/v0.5.0/google/cloud_v2.8/resnet-tpuv2-8/results/tpu/resnet/result_0.txt"
V05_GOOGLE_SYSTEM = "v0.5/v0.5.0/google/cloud_v2.8/resnet-tpuv2-8/results/tpu/entry.json"
GRAPHCORE = "v1.1/Graphcore/results/ipu-pod16-TF1/resnet/result_0.txt"
GRAPHCORE_SYSTEM = "v1.1/Graphcore/systems/ipu-pod16-TF1.json"
TINY_GREEN = "v4.0/tinycorp/results/tinybox_green/resnet/result_0.txt"
TINY_GREEN_SYSTEM = "v4.0/tinycorp/systems/tinybox_green.json"
PCL = "v1.0/PCL/results/CloudBrainII_256_mindspore_close/resnet/result_0.txt"
PCL_SYSTEM = "v1.0/PCL/systems/CloudBrainII_256_mindspore_close.json"
PCL_1024 = "v1.0/PCL/results/CloudBrainII_1024_mindspore_close/resnet/result_0.txt"
PCL_1024_SYSTEM = "v1.0/PCL/systems/CloudBrainII_1024_mindspore_close.json"
FILES = (SIAT, SIAT_SYSTEM, V05_NVIDIA, V05_NVIDIA_SYSTEM, V05_GOOGLE, V05_GOOGLE_SYSTEM, GRAPHCORE, GRAPHCORE_SYSTEM,
         TINY_GREEN, TINY_GREEN_SYSTEM, PCL, PCL_SYSTEM, PCL_1024, PCL_1024_SYSTEM)  # fmt: skip
SECONDS = 1e-6


@pytest.fixture(scope="module")
def corpus():
    files = raw_files_of("mlperf-training-resnet", *FILES)
    # the source as ingest.fetched_raw_files gives it to read(), for these files only
    read_at = {str(file.resolve()): path for path, file in files.items()}
    source = reference_source("mlperf-training-resnet")
    source = {**source, "raw_dir": str(cache_dir() / FOLDER.name), "raw_read_at": read_at}
    entries = {e["log"]: e for e in source["results"]}
    return files, source, entries


def record_of(corpus, log: str, copies=(), reading=None):
    files, source, entries = corpus
    fmt, parsed = mt._parse_one(str(files[log]))
    entry = entries[log]
    return mt.record(source, entry, files[log], files[entry["system_file"]], fmt, reading or parsed, list(copies),
                     "ab" * 32)  # fmt: skip


def close(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-8, abs=SECONDS), name  # sums of float stamps round


def test_pcl_epochs_and_throughput(corpus):
    # CloudBrainII_256: a block_start per epoch, one block_stop per 4 (tests/test_mlperf_reading_values.py):
    # 42 epochs (the last eval_accuracy, :87, is at epoch_num 42) of :22 train_samples 1277952 images, trained in
    # 104.900 s of blocks (:24 1622086103.640 to :86 1622086208.549 less nine 1 ms gaps between blocks); :21
    # run_start 1622086103.638, :88 run_stop 1622086208.742; the system file: 32 nodes x 8 "Ascend 910 Pro A".
    # Read before as 11 epochs in 27.802 s: throughput_run 133,748 img/s (4x low), throughput_total 505,628.
    rec = record_of(corpus, PCL)
    images, train_s, run_s = 42 * 1277952, 104.900, 1622086208.742 - 1622086103.638
    assert rec.params["epochs"] == 42 and rec.params["workers"] == 256 and rec.params["batch_per_worker"] == 32
    close(
        {k: v for k, v in rec.metrics.items() if k.startswith(("throughput", "time_train"))},
        {
            "time_train_s": train_s,
            "throughput_total": images / train_s,  # 511,668 img/s
            "throughput_per_worker": images / train_s / 256,  # 1,998.7
            "throughput_run": images / run_s,  # 510,675
        },
    )
    assert rec.metrics["throughput_total"] == pytest.approx(511668.1, abs=0.1)
    # CloudBrainII_1024: 14 blocks of 4 starts, 56 epochs (last eval :107 at epoch_num 56) in 38.552 s of blocks;
    # :21 run_start 1621451986.421, :108 run_stop 1621452025.174; 128 nodes x 8. Read before as 14 epochs.
    rec = record_of(corpus, PCL_1024)
    images, train_s, run_s = 56 * 1277952, 38.552, 1621452025.174 - 1621451986.421
    assert rec.params["epochs"] == 56 and rec.params["workers"] == 1024
    assert rec.metrics["throughput_total"] == pytest.approx(images / train_s, rel=1e-8)  # 1,856,332 img/s
    assert rec.metrics["throughput_run"] == pytest.approx(images / run_s, rel=1e-8)  # 1,846,704
    assert rec.metrics["throughput_per_worker"] == pytest.approx(images / train_s / 1024, rel=1e-8)  # 1,812.8


def test_systems_json_run_every_field(corpus):
    rec = record_of(corpus, SIAT)
    # result_0.txt: :16 run_start 1593193410.509, :34 run_stop 1593193532.867 "success", :7 init_start
    # 1593192965.834; 5 closed blocks of 4 epochs summing to 119.809 s, no eval intervals; :17 train_samples 1277952
    run_s, train_s, samples = 1593193532.867 - 1593193410.509, 119.809, 20 * 1277952
    close(
        rec.metrics,
        {
            "time_total_s": run_s,
            "time_train_s": train_s,
            "time_init_s": 1593193410.509 - 1593192965.834,
            "throughput_run": samples / run_s,
            "throughput_total": samples / train_s,
            "throughput_per_worker": samples / train_s / 128,  # the system file: 16 nodes x 8 Ascend910
            "accuracy_test": 0.75994,  # :33
        },
    )
    # modelarts_128_mindspore_open.json: "number_of_nodes": "16", "accelerators_per_node": "8",
    # "accelerator_model_name": "Ascend910", "framework": "mindspore-0.3.1", "divison" (sic) "open"
    assert rec.params == {
        "model": "resnet50", "framework": "mindspore", "workers": 128, "device": "Ascend910", "data": "real",
        "batch_per_worker": 4096 // 128, "platform": "modelarts_128_mindspore_open", "api": "mlperf", "epochs": 20,
    }  # fmt: skip
    lines = (
        "accuracy_test: result_0.txt:33; epochs: result_0.txt:32; global_batch_logged: result_0.txt:8; "
        "init_start_lines: result_0.txt:7; status: result_0.txt:34; throughput_per_worker: result_0.txt:32; "
        "throughput_run: result_0.txt:34; throughput_total: result_0.txt:32; time_init_s: result_0.txt:16; "
        "time_total_s: result_0.txt:34; time_train_s: result_0.txt:32; train_samples: result_0.txt:17"
    )
    tags = {k: v for k, v in rec.tags.items() if k not in ("citation", "source_url", "mlflow.note.content")}
    assert tags == {
        "source": "published",
        "dataset": "mlperf-training-resnet",
        # run_start's line: record() asks for lines["run_stop"], a name the reading never gives (reported)
        "source_line": "result_0.txt:16",
        "round": "v0.7",
        "submitter": "SIAT",
        "system": "modelarts_128_mindspore_open",
        "division": "open",  # the log's :2 submission_division
        "accelerator_model": "Ascend910",
        "accelerators": "128",
        "accelerators_basis": "number_of_nodes x accelerators_per_node",
        "nodes": "16",
        "framework_stated": "mindspore-0.3.1",
        "interconnect": NOT_STATED,  # accelerator_interconnect and host_networking are ""
        "global_batch_size": "4096",  # :8
        "batch_logged": "4096",
        "train_samples_per_epoch": "1277952",
        "run_stop_status": "success",
        "log_format": "mllog",
        "log_sha256": "ab" * 32,
        "copies": "none",
        "system_file": SIAT_SYSTEM,
        "system_shape": "systems-json",
        "problems": "none",
        "source_lines": lines,
        "status_basis": "run_stop metadata.status",
        "batch_logged_basis": "global_batch_size",
        "train_samples_basis": "train_samples",
        "epochs_basis": "sum of closed blocks' epoch_count",
        "train_time_basis": "blocks: sum of closed blocks minus the evaluations inside them (no eval interval "
        "logged: evaluation stays in)",
        "batch_per_worker_basis": "global batch / accelerators",
        "init_start_lines": "1",
    }
    assert rec.tags["source_url"] == "https://github.com/mlcommons" and rec.tags["citation"].startswith("MLCommons")
    assert f"mlperf-training-resnet/{SIAT}` line 16" in rec.tags["mlflow.note.content"]
    assert (rec.experiment, rec.key, rec.status) == ("mlperf-training-resnet", SIAT, "FINISHED")
    assert (rec.start_ms, rec.end_ms) == (1593193410509, 1593193532867)
    assert rec.where.endswith(f"{SIAT}:16")  # run_start's line
    rec.validate()


def test_v05_nvidia_per_gpu_batch(corpus):
    rec = record_of(corpus, V05_NVIDIA, copies=["v0.5/copy/result_0.txt", "v0.6/copy/result_0.txt"])
    # :3 run_start 1541720386.718659639, :449 run_stop 1541728484.695488691, :337 train_loop 1541720418.766180992,
    # 16 eval intervals 93.143555641 s (awk); 63 epochs (train_epoch 0 :338 .. eval label 62 :447); :317
    # input_batch_size 208 per GPU (NVIDIA's code); entry.json: 1 node x 8 "Tesla V100-SXM2-16GB"
    run_s = 1541728484.695488691 - 1541720386.718659639
    train_s = (1541728484.695488691 - 1541720418.766180992) - 93.143555641
    samples = 63 * 1281167  # :328 preproc_num_train_examples
    close(
        rec.metrics,
        {
            "time_total_s": run_s,
            "time_train_s": train_s,
            "throughput_run": samples / run_s,
            "throughput_total": samples / train_s,
            "throughput_per_worker": samples / train_s / 8,
            "accuracy_test": 0.7522,  # :447
        },
    )
    assert rec.params == {
        "model": "resnet50", "framework": "mxnet", "workers": 8, "device": "V100", "data": "real",
        "batch_per_worker": 208, "platform": "submission/dgx1_ngc18.11_mxnet", "api": "mlperf", "epochs": 63,
    }  # fmt: skip
    tags = rec.tags
    assert tags["global_batch_size"] == "1664" and tags["batch_logged"] == "208"
    assert tags["global_batch_basis"] == "v0.5 input_batch_size read as the per accelerator batch"
    assert tags["batch_logged_basis"] == "input_batch_size (v0.5: its meaning depends on the code)"
    assert tags["division"] == "closed"  # the log states none: entry.json's "division"
    assert tags["accelerators_basis"] == "nodes[0].num_nodes x nodes[0].num_accelerators"
    assert tags["interconnect"] == "InfiniBand EDR 100Gb/s; QPI" and tags["framework_stated"] == "MXNet NGC 18.11"
    assert tags["system_shape"] == "entry-json" and tags["nodes"] == "1"
    assert tags["accelerator_model"] == "Tesla V100-SXM2-16GB"
    assert tags["copies"] == "v0.5/copy/result_0.txt; v0.6/copy/result_0.txt"
    assert tags["status_basis"] == "run_stop states nothing: last eval_accuracy (line 447) against target 0.749"
    assert "init_start_lines" not in tags and "time_init_s" not in rec.metrics  # v0.5 logs no init_start
    assert tags["source_line"] == "result_0.txt:3" and tags["log_format"] == "mlp05"
    assert rec.end_ms == round((1541720386.718659639 + run_s) * 1000)


def test_v05_tpu_chips_and_global_batch(corpus):
    rec = record_of(corpus, V05_GOOGLE)
    # entry.json: "accelerator": "tpuv2-8", "num_accelerators": 8 TensorCores = 4 chips; :4 input_batch_size 1024 is
    # the global batch in Google's code; :400 run_stop {"success": "true"}
    assert rec.params["workers"] == 4 and rec.params["device"] == "tpuv2" and rec.params["framework"] == "tensorflow"
    assert rec.params["batch_per_worker"] == 256 and rec.params["epochs"] == 62
    assert rec.tags["global_batch_size"] == "1024"
    assert rec.tags["global_batch_basis"] == "v0.5 input_batch_size read as the global batch"
    assert rec.tags["accelerators_basis"] == "entry.json TPU core count / 2 = chips" and rec.tags["accelerators"] == "4"
    assert rec.tags["interconnect"] == "TPU" and rec.status == "FINISHED"


def test_failed_runs_name_the_reason(corpus):
    rec = record_of(corpus, GRAPHCORE)  # :138 run_stop {"success": false}, status "aborted"
    assert rec.status == "FAILED" and rec.tags["run_stop_status"] == "aborted"
    assert rec.tags["failure_reason"] == (
        "aborted: the run did not reach the quality target (result_0.txt:138; run_stop metadata.status)"
    )
    # ipu-pod16-TF1.json: 1 node x 16 "Graphcore IPU GC200"; "accelerator_interconnect": "IPULINK", host_networking
    assert rec.params["workers"] == 16 and rec.params["device"] == "Graphcore IPU GC200"
    assert rec.params["batch_per_worker"] == 200 and rec.params["framework"] == "tensorflow"  # :9 3200 / 16
    assert rec.tags["interconnect"].startswith("accelerator_interconnect: IPULINK; host_networking: Management")
    assert rec.metrics["throughput_epochs"] == pytest.approx(38 * 1281167 / 1683.537)  # 38 epochs, 1683.537 s (awk)
    assert "throughput_epochs: result_0.txt:104" in rec.tags["source_lines"]
    green = record_of(corpus, TINY_GREEN)  # no run_stop: the log ends at :136
    assert green.status == "FAILED" and green.end_ms is None and "time_total_s" not in green.metrics
    assert "throughput_run" not in green.metrics and green.params["epochs"] == 37
    assert green.tags["failure_reason"] == (
        "no_run_stop: the run did not reach the quality target (result_0.txt (end of file); no run_stop line: the log "
        "ends before the run did)"
    )
    assert green.tags["source_line"] == "result_0.txt:9"  # no run_stop: run_start's line
    assert green.params["device"] == "RTX 4090" and green.params["framework"] == "tinygrad"
    assert green.params["workers"] == 6 and green.params["batch_per_worker"] == 1536 // 6


def edited(corpus, log: str, **values):
    files = corpus[0]
    fmt, reading = mt._parse_one(str(files[log]))
    reading = {**reading, "values": {**reading["values"], **values}}
    return fmt, reading


def test_v05_multi_node_counts_the_nodes_that_ran(corpus):
    # v0.5 NVIDIA multi-node logs: one run_clear_caches line per node that ran (80 in dgx1_multi); the single-node
    # log's reading edited to say 5 nodes ran: 5 x 8 GPUs, the line of the count noted
    _, reading = edited(corpus, V05_NVIDIA, run_clear_caches_lines=5)
    rec = record_of(corpus, V05_NVIDIA, reading=reading)
    assert rec.params["workers"] == 40 and rec.tags["accelerators"] == "40"
    assert rec.tags["accelerators_basis"] == "run_clear_caches lines (nodes that ran) x GPUs per node"
    assert rec.tags["global_batch_size"] == str(208 * 40) and rec.params["batch_per_worker"] == 208
    _, reading = edited(corpus, V05_NVIDIA, run_clear_caches_lines=2)  # two nodes are several
    assert record_of(corpus, V05_NVIDIA, reading=reading).params["workers"] == 16
    _, reading = mt._parse_one(str(corpus[0][V05_NVIDIA]))
    del reading["values"]["run_clear_caches_lines"]  # none logged: entry.json's count
    assert record_of(corpus, V05_NVIDIA, reading=reading).params["workers"] == 8
    _, reading = edited(corpus, V05_GOOGLE, run_clear_caches_lines=5)  # Google's: the entry's count stands
    assert record_of(corpus, V05_GOOGLE, reading=reading).params["workers"] == 4


def test_batches_that_are_not_stated(corpus):
    # a v0.5 submitter whose input_batch_size means neither (Intel's per-worker batch): no global batch
    files, source, entries = corpus
    fmt, reading = mt._parse_one(str(files[V05_NVIDIA]))
    entry = {**entries[V05_NVIDIA], "submitter": "intel"}
    rec = mt.record(source, entry, files[V05_NVIDIA], files[V05_NVIDIA_SYSTEM], fmt, reading, [], "0" * 64)
    assert rec.tags["global_batch_size"] == NOT_STATED and rec.tags["global_batch_basis"] == "not stated"
    assert rec.params["batch_per_worker"] == NOT_STATED and "batch_per_worker_basis" not in rec.tags
    # no batch logged at all (SIAT's :8 cut): not stated
    _, reading = mt._parse_one(str(corpus[0][SIAT]))
    del reading["values"]["global_batch_logged"], reading["basis"]["global_batch_logged"]
    rec = record_of(corpus, SIAT, reading=reading)
    assert rec.tags["global_batch_size"] == NOT_STATED and rec.tags["batch_logged"] == "None"
    # a global batch the accelerators do not divide: 4097 over 128
    _, reading = edited(corpus, SIAT, global_batch_logged=4097)
    rec = record_of(corpus, SIAT, reading=reading)
    assert rec.tags["global_batch_size"] == "4097" and rec.params["batch_per_worker"] == NOT_STATED
    assert rec.tags["batch_per_worker_basis"] == "does not divide: not stated"


def test_other_benchmark_is_refused(corpus):
    _, reading = edited(corpus, SIAT, submission_benchmark="BERT")
    with pytest.raises(SchemaError, match=rf"^\S*{SIAT}:1: benchmark 'bert', not resnet$"):
        record_of(corpus, SIAT, reading=reading)


def test_counts_and_frameworks():
    assert mt._count("1") == 1
    assert [mt._count(v) for v in ("8", " 16 ", 4.0, "2.5", "0", "-3", "x", None)] == [8, 16, 4, None, None, None,
                                                                                       None, None]  # fmt: skip
    assert mt._framework("NGC MXNet 21.05") == "mxnet" and mt._framework("PaddlePaddle 2.0") == "paddle"
    # NVIDIA's containers list every framework, their ResNet code is MXNet's (v4.0 Quanta spells it 'MxNeti')
    assert mt._framework("NVIDIA PyTorch/MxNeti/DGL") == "mxnet"
    # tf is TensorFlow (v0.7 Google's system files); a text naming no framework gives none, not its first word
    # (it gave 'tf2.0', 'research-tf', 'cuda', 'ngc', 'sinianai': the golden table, tests/test_mlperf_golden.py)
    assert [mt._framework(t) for t in ("tf2.0", "TF-research", "research-tf", "TF")] == ["tensorflow"] * 4
    assert [mt._framework(t) for t in ("Poplar SDK", "CUDA 12.0", "NGC MLPerf v4.0", "platform tflite", "")] == [
        NOT_STATED
    ] * 5


def test_readings_are_kept_and_reused(corpus, tmp_path, monkeypatch):
    files = corpus[0]
    cache = tmp_path / "cache" / ".readings.json"
    digest = "cd" * 32
    # a reading kept from the last import under the same code is used as it is: no log is parsed
    kept = {"code": mt._code_digest(), "readings": {digest: ["mllog", {"values": {"epochs": 7}}]}}
    cache.parent.mkdir()
    cache.write_text(json.dumps(kept))
    assert mt._parse_all({digest: Path("/nonexistent")}, False, cache) == {digest: ("mllog", {"values": {"epochs": 7}})}
    # another code's readings, or a cache that cannot be read, are parsed again and the cache rewritten
    for stored in (json.dumps({**kept, "code": "old"}), "{not json", json.dumps({"code": mt._code_digest()})):
        cache.write_text(stored)
        out = mt._parse_all({digest: files[SIAT]}, False, cache)
        assert out[digest][0] == "mllog" and out[digest][1]["values"]["epochs"] == 20
        again = json.loads(cache.read_text())
        assert again["code"] == mt._code_digest() and again["readings"][digest][1]["values"]["epochs"] == 20
    assert [p.name for p in cache.parent.iterdir()] == [".readings.json"]  # no part file left
    # a cache that cannot be written is skipped
    (tmp_path / "file").write_text("")
    mt._write_json(tmp_path / "file" / "x.json", {})  # its folder is a file: no error, nothing written
    assert (tmp_path / "file").read_text() == ""


def test_logs_parsed_on_the_cores_allowed_at_most_eight_and_no_cache(corpus, monkeypatch):
    """One worker process per log to parse, no more than the cores this process may use nor 8 (a login node's
    64 cores are not all ours); with no cache, nothing is read or written."""
    from concurrent.futures import ThreadPoolExecutor

    files, asked = corpus[0], []

    def pool(max_workers):  # threads in the test: the same map, and the count asked for recorded
        asked.append(max_workers)
        return ThreadPoolExecutor(max_workers=max_workers)

    monkeypatch.setattr(mt, "ProcessPoolExecutor", pool)
    logs = {f"{i:064x}": files[log] for i, log in enumerate([SIAT, V05_NVIDIA, V05_GOOGLE])}
    for cores, expected in ((range(2), 2), (range(64), 3), (range(1), 1)):
        monkeypatch.setattr(mt.os, "sched_getaffinity", lambda pid, cores=cores: set(cores))
        out = mt._parse_all(logs, False, None)
        assert asked.pop() == expected and set(out) == set(logs)
    many = {f"{i:064x}": files[SIAT] for i in range(12)}
    monkeypatch.setattr(mt.os, "sched_getaffinity", lambda pid: set(range(64)))
    assert len(mt._parse_all(many, False, None)) == 12 and asked.pop() == 8
    assert out[f"{0:064x}"][1]["values"]["epochs"] == 20  # SIAT's reading, as test_readings_are_kept_and_reused


def test_the_readings_cache_is_written_whole_beside_itself(tmp_path, monkeypatch):
    """_write_json makes the cache's folders, writes a temporary file in the cache's own folder (a rename within
    one file system: never a half-written cache) and renames it; the system's temporary folder is not used."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-temp"))  # a temporary file there would fail
    target = tmp_path / "a" / "b" / ".readings.json"
    mt._write_json(target, {"code": "c", "readings": {"d": ["mllog", {"values": {"epochs": 7}}]}})
    assert json.loads(target.read_text()) == {"code": "c", "readings": {"d": ["mllog", {"values": {"epochs": 7}}]}}
    assert [p.name for p in target.parent.iterdir()] == [".readings.json"]


def test_absent_logs_found_in_the_mirror_or_named(tmp_path, monkeypatch):
    """A log the mirror lacks may be put by hand in the mirror's dataset folder as well as in the cache; with no
    mirror set, only the cache is looked in; a wrong copy is named with both ids' first 12 characters."""
    data = b"an absent log, as fetched by hand\n"
    entry = {"log": "v9.9/X/results/y/resnet/result_0.txt", "git_blob_sha1": mt.git_blob_sha1(data),
             "url": "https://example.org/result_0.txt"}  # fmt: skip
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(tmp_path / "mirror"))
    copy = tmp_path / "mirror" / "mlperf-training-resnet" / entry["log"]
    copy.parent.mkdir(parents=True)
    copy.write_bytes(data)
    assert mt.absent_logs("mlperf-training-resnet", [entry]) == ([(entry, copy)], [])
    monkeypatch.delenv("SCALESTUDY_DATA_MIRROR")
    assert mt.absent_logs("mlperf-training-resnet", [entry]) == ([], [entry])
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(tmp_path / "mirror"))
    copy.write_bytes(b"other bytes\n")
    got = mt.git_blob_sha1(b"other bytes\n")
    with pytest.raises(SchemaError) as err:
        mt.absent_logs("mlperf-training-resnet", [entry])
    assert str(err.value) == (f"{copy}: git blob id {got[:12]}... is not the {entry['git_blob_sha1'][:12]}... "
                              "source.yaml lists: replace it with https://example.org/result_0.txt")  # fmt: skip


def test_code_digest_is_of_the_two_reading_modules():
    import hashlib

    here = Path(mt.__file__).parent
    want = hashlib.sha256((here / "logs" / "mlperf_events.py").read_bytes() + (here / "mlperf_reading.py").read_bytes())
    assert mt._code_digest() == want.hexdigest()


def test_a_log_that_is_not_mlperf_names_its_file(tmp_path):
    log = tmp_path / "result_0.txt"
    log.write_text("no marker here\n")
    with pytest.raises(SchemaError, match=rf"^{log}:1: no MLPerf log line "):
        mt._parse_one(str(log))


def test_metrics_only_above_zero(corpus):
    # SIAT's reading edited: no training time, half a second of init, no timed window
    _, reading = edited(corpus, SIAT, train_time_s=0.0, time_init_s=0.5)
    rec = record_of(corpus, SIAT, reading=reading)
    assert "time_train_s" not in rec.metrics and "throughput_total" not in rec.metrics
    assert rec.metrics["time_init_s"] == 0.5
    _, reading = mt._parse_one(str(corpus[0][SIAT]))
    del reading["values"]["train_window_epochs"]
    rec = record_of(corpus, SIAT, reading=reading)
    assert "throughput_total" not in rec.metrics and rec.metrics["time_train_s"] == pytest.approx(119.809, abs=SECONDS)


def test_logs_absent_from_the_mirror_fetched_by_hand_are_runs(tmp_path, monkeypatch, capsys):
    """read() on a copy of the dataset's source.yaml cut to one result (SIAT's log) and four of the seven logs the
    mirror lacks: two placed in the cache by hand (standing in for their content, real logs of the corpus: v0.5
    NVIDIA's, and SIAT's again, which is then a copy of the result's run), two not there (named on stderr)."""
    import hashlib

    import yaml

    files = raw_files_of("mlperf-training-resnet", *FILES)  # before the cache below: the stand-ins' bytes
    cache = tmp_path / "cache"
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(cache))
    source = yaml.safe_load((FOLDER / "source.yaml").read_text())
    result = next(r for r in source["results"] if r["log"] == SIAT)
    absent = source["absent_logs"][:4]
    wanted = {SIAT, SIAT_SYSTEM, absent[0]["system_file"], absent[1]["system_file"]}
    source.update(results=[result], absent_logs=absent,
                  raw_files=[r for r in source["raw_files"] if r["path"] in wanted])  # fmt: skip
    folder = tmp_path / "mlperf-training-resnet"
    folder.mkdir()
    contents = {}
    for entry, stand_in in zip(absent[:2], (V05_NVIDIA, SIAT)):
        data = files[stand_in].read_bytes()
        place = cache / "mlperf-training-resnet" / entry["log"]
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_bytes(data)
        entry["git_blob_sha1"] = mt.git_blob_sha1(data)
        contents[entry["log"]] = data
    (folder / "source.yaml").write_text(yaml.safe_dump(source))  # with the stand-ins' git blob ids

    runs = {rec.key: rec for rec in mt.read(folder)}  # progress shown: the default
    err = capsys.readouterr().err
    assert sorted(runs) == sorted([SIAT, absent[0]["log"]])
    siat, fetched = runs[SIAT], runs[absent[0]["log"]]
    assert siat.tags["copies"] == absent[1]["log"]  # the same bytes under the absent log's path: one run
    assert fetched.tags["copies"] == "none"
    assert fetched.tags["log_sha256"] == hashlib.sha256(contents[absent[0]["log"]]).hexdigest()
    assert (fetched.tags["round"], fetched.tags["submitter"], fetched.tags["system"], fetched.tags["system_file"]) == (
        absent[0]["round"], absent[0]["submitter"], absent[0]["system"], absent[0]["system_file"])  # fmt: skip
    missing = f"{absent[2]['round']} {absent[2]['submitter']} {absent[2]['system']}, " + (
        f"{absent[3]['round']} {absent[3]['submitter']} {absent[3]['system']}")  # fmt: skip
    assert (f"mlperf-training-resnet: 2 logs absent (not in the mirror; scripts/fetch_absent_mlperf_logs.py fetches "
            f"them into {cache / 'mlperf-training-resnet'}): {missing}\n") in err  # fmt: skip
    assert "%|" not in err  # stderr is no terminal: no bar (in a pipe tqdm printed one at its start and its end)
    # the readings kept for the next import, in the dataset's folder of the cache, keyed by each log's SHA-256
    kept = json.loads((cache / "mlperf-training-resnet" / mt.READINGS_CACHE).read_text())["readings"]
    assert set(kept) == {siat.tags["log_sha256"], fetched.tags["log_sha256"]}


def test_the_benchmark_names_taken_and_the_lines_an_error_names(corpus):
    # SIAT's reading edited: "resnet50" (any case; later rounds' name) is taken as well as "resnet"
    _, reading = edited(corpus, SIAT, submission_benchmark="ResNet50")
    assert record_of(corpus, SIAT, reading=reading).params["model"] == "resnet50"
    _, reading = edited(corpus, SIAT, submission_benchmark=None)  # none logged (nor its line): '' at line 1
    reading["lines"] = {k: n for k, n in reading["lines"].items() if k != "submission_benchmark"}
    with pytest.raises(SchemaError, match=rf"^\S*{SIAT}:1: benchmark '', not resnet$"):
        record_of(corpus, SIAT, reading=reading)
    _, reading = edited(corpus, SIAT, submission_benchmark="ssd")
    reading["lines"] = {**reading["lines"], "submission_benchmark": 5}  # its line known: that line
    with pytest.raises(SchemaError, match=rf"^\S*{SIAT}:5: benchmark 'ssd', not resnet$"):
        record_of(corpus, SIAT, reading=reading)
    _, reading = mt._parse_one(str(corpus[0][SIAT]))
    reading["lines"] = {k: n for k, n in reading["lines"].items() if k != "run_start"}  # no run_start: line 1
    rec = record_of(corpus, SIAT, reading=reading)
    assert rec.where.endswith(f"{SIAT}:1") and rec.tags["source_line"] == "result_0.txt:1"


def test_accuracy_kept_only_between_0_and_1_and_a_window_under_a_second(corpus):
    for accuracy, kept in ((0.0, True), (1.0, True), (0.759, True), (1.5, False), (-0.1, False), (None, False)):
        _, reading = edited(corpus, SIAT, accuracy=accuracy)
        metrics = record_of(corpus, SIAT, reading=reading).metrics
        assert metrics.get("accuracy_test", "absent") == (accuracy if kept else "absent"), accuracy
    # a timed window of half a second: its throughput all the same (window epochs x :17's 1277952 samples / 0.5 s)
    _, reading = edited(corpus, SIAT, train_time_s=0.5)
    window = reading["values"]["train_window_epochs"]
    metrics = record_of(corpus, SIAT, reading=reading).metrics
    assert metrics["throughput_total"] == pytest.approx(window * 1277952 / 0.5)
    assert metrics["throughput_per_worker"] == pytest.approx(window * 1277952 / 0.5 / 128)


def test_no_batch_per_accelerator_without_both_counts():
    basis = {}
    assert mt._batch_per_accelerator(None, 8, basis) is None and mt._batch_per_accelerator(512, None, basis) is None
    assert basis == {}  # nothing to say how
    assert mt._batch_per_accelerator(512, 8, basis) == 64 and basis["batch_per_worker"] == "global batch / accelerators"


def test_accelerators_not_known_are_empty_unless_the_system_is_cpu_only(corpus, monkeypatch):
    read_system = mt.read_system  # the real reading, edited below

    def system_of(basis):
        def read(path):
            facts, warnings = read_system(path)
            return {**facts, "accelerators": None, "accelerators_basis": basis}, warnings

        return read

    monkeypatch.setattr(mt, "read_system", system_of("not stated"))
    rec = record_of(corpus, SIAT)
    assert rec.tags["accelerators"] == "" and rec.params["workers"] == NOT_STATED and rec.params["device"] == "cpu"
    monkeypatch.setattr(mt, "read_system", system_of("cpu only"))
    assert record_of(corpus, SIAT).tags["accelerators"] == "0"


def test_values_the_log_does_not_give_are_not_stated(corpus):
    # SIAT's reading edited, one value at a time
    _, reading = edited(corpus, SIAT, train_samples=None)
    assert record_of(corpus, SIAT, reading=reading).tags["train_samples_per_epoch"] == NOT_STATED
    for epochs, param in ((1, 1), (40, 40), (0, NOT_STATED), (2.5, NOT_STATED), (None, NOT_STATED)):
        _, reading = edited(corpus, SIAT, epochs=epochs)
        assert record_of(corpus, SIAT, reading=reading).params["epochs"] == param, epochs
    _, reading = edited(corpus, SIAT, run_start=None)  # no start stamp: no times on the run
    rec = record_of(corpus, SIAT, reading=reading)
    assert rec.start_ms is None and rec.end_ms is None
    _, reading = mt._parse_one(str(corpus[0][SIAT]))
    reading = {**reading, "problems": ["first problem", "second problem"]}  # each one, in order
    assert record_of(corpus, SIAT, reading=reading).tags["problems"] == "first problem; second problem"
