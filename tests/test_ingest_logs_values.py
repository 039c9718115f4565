"""ingest/logs/__init__.py's helpers, each value worked out by hand: user_source, run_tags (a user's logs, a file keyed
by name, a tf_cnn_benchmarks folder), content_digest and run_key, LogRecord's content hash, log_record, param,
device_name, strip_rank, lines_of, python_error, gpu_names, one_device, detect, _files (what a folder walk keeps),
scan_logs (no file, the same file twice, a copy, a parser that finds no run, the progress hook) and legacy_claim.

Real files: the tf_cnn_benchmarks --benchmark_log_dir folder of ../shared/reference/logs and the az-2xm-60 trace of
seed 002 (../shared/reference/keras-multi-gpu-2017), read where they lie or copied into tmp_path (said where).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from helpers import log_text, shared_reference

from scalestudy.ingest import logs
from scalestudy.ingest.logs import (
    LogImport,
    LogOptions,
    LogRecord,
    bytes_digest,
    content_digest,
    detect,
    device_name,
    gpu_names,
    keyed_by_name,
    lines_of,
    log_record,
    one_device,
    param,
    python_error,
    read_logs,
    run_key,
    run_tags,
    scan_logs,
    strip_rank,
    user_source,
)
from scalestudy.schema import DESCRIPTION_TAG, RunRecord, SchemaError

SHARED = shared_reference("logs", "keras-multi-gpu-2017")
pytestmark = [
    pytest.mark.may_skip,
    pytest.mark.skipif(SHARED is None, reason="../shared/reference (logs, keras-multi-gpu-2017) is not here"),
]
REF = SHARED or Path()
TRACE = REF / "keras-multi-gpu-2017" / "benchmark_batch_inception3_az-2xm-60.txt"
TF_JSON = REF / "logs" / "tf_cnn_benchmarks_json" / "fh2_singularity_500batch_synthetic_resnet50_1_gpu_1"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_user_source_and_run_tags_of_a_users_log(tmp_path):
    assert user_source("mine") == {"experiment": "mine", "citation": "benchmark logs imported into mine", "url": ""}
    assert user_source("mine", "Smith (2017)", "https://x") == {
        "experiment": "mine", "citation": "Smith (2017)", "url": "https://x",
    }  # fmt: skip
    log = tmp_path / "run.log"
    log.write_bytes(b"total images/sec: 1\n")
    options = LogOptions(source=user_source("mine", "Smith (2017)"))
    assert run_tags(options, log, 7, {"throughput_total": 7, "device": "sys.json:21"}, "tf_cnn_text") == {
        "source": "yours", "citation": "Smith (2017)", "dataset": "mine", "source_url": "",
        "source_line": "run.log:7",
        DESCRIPTION_TAG: "Read from `run.log` line 7 (tf_cnn_benchmarks text output (total images/sec)) by "
                         "`python -m scalestudy.ingest logs`.\n\nSource: Smith (2017)",
        "log_format": "tf_cnn_text", "log_file": "run.log",
        "source_lines": "throughput_total: run.log:7; device: sys.json:21",
        "log_path": str(log), "log_sha256": sha256(b"total images/sec: 1\n"),
        "log_bytes_sha256": sha256(b"total images/sec: 1\n"),
    }  # fmt: skip
    with_url = LogOptions(source=user_source("mine", url="https://example.org"))
    assert run_tags(with_url, log, 1, {}, "mlperf")["source_url"] == "https://example.org"
    # a file the caller keys by name (a reference dataset's raw log): no log_path, no log_sha256
    by_name = LogOptions(source=user_source("mine"), key_prefix={log: "run.log"})
    assert keyed_by_name(by_name, log) and "log_path" not in run_tags(by_name, log, 1, {}, "mlperf")
    in_folder = LogOptions(source=user_source("mine"), key_prefix={tmp_path: "runs"})
    assert keyed_by_name(in_folder, log) and not keyed_by_name(in_folder, tmp_path / "sub" / "run.log")
    assert not {"log_sha256", "log_bytes_sha256"} & set(run_tags(in_folder, log, 1, {}, "mlperf"))


def test_run_tags_of_a_reference_datasets_log(tmp_path):
    """A source with `folder` (a reference dataset's): described as the datasets describe their runs."""
    log = tmp_path / "logs" / "1.err"
    log.parent.mkdir()
    log.write_text("x\n")
    source = {"experiment": "ds", "citation": "Them (2019)", "url": "https://u", "folder": str(tmp_path),
              "dataset_dir": "experiments/reference/ds"}  # fmt: skip
    tags = run_tags(LogOptions(source=source, key_prefix={log: "1.err"}), log, 23, {"workers": 4}, "tf_cnn_text")
    assert tags == {
        "source": "published", "citation": "Them (2019)", "dataset": "ds", "source_url": "https://u",
        "source_line": "1.err:23",
        DESCRIPTION_TAG: f"Published measurement, read from `experiments/reference/ds/logs/1.err` line 23 by "
                         f"`python -m scalestudy.ingest {tmp_path.name}`.\n\nSource: Them (2019)",
        "log_format": "tf_cnn_text", "log_file": "1.err", "source_lines": "workers: 1.err:4",
    }  # fmt: skip


def test_content_digest_and_run_key_of_a_file_and_a_tf_cnn_json_folder(tmp_path):
    # a folder: benchmark.log then metric.log, each as `name NUL length NUL text` (these two are clean: their
    # text is their bytes)
    bench, metric = (TF_JSON / "benchmark.log").read_bytes(), (TF_JSON / "metric.log").read_bytes()
    assert (log_text(bench), log_text(metric)) == (bench, metric)
    folder = sha256(b"benchmark.log\0%d\0" % len(bench) + bench + b"metric.log\0%d\0" % len(metric) + metric)
    assert content_digest(TF_JSON) == folder == bytes_digest(TF_JSON)
    # the trace: 30 of its lines end in blanks; its key is its text's, its bytes' digest another
    trace_text = log_text(TRACE.read_bytes())
    assert len(trace_text) < len(TRACE.read_bytes())
    assert (content_digest(TRACE), bytes_digest(TRACE)) == (sha256(trace_text), sha256(TRACE.read_bytes()))
    options = LogOptions(source=user_source("mine"))
    assert run_key(options, TRACE) == f"sha256:{sha256(trace_text)}"
    assert run_key(options, TRACE, 3) == f"sha256:{sha256(trace_text)}#3"
    assert run_key(options, TRACE, 0) == f"sha256:{sha256(trace_text)}#0"
    named = LogOptions(source=user_source("mine"), key_prefix={TRACE: "trace.txt"})
    assert (run_key(named, TRACE), run_key(named, TRACE, 2)) == ("trace.txt", "trace.txt#2")
    # tags of the folder's metric.log name the folder's digest
    tags = run_tags(options, TF_JSON / "metric.log", 52, {}, "tf_cnn_json")
    assert tags["log_sha256"] == folder and tags["log_path"] == str(TF_JSON / "metric.log")
    # a folder with metric.log alone is no tf_cnn_benchmarks folder: its file's own digest
    (tmp_path / "metric.log").write_bytes(metric)
    assert run_tags(options, tmp_path / "metric.log", 1, {}, "tf_cnn_json")["log_sha256"] == sha256(metric)
    trace_tags = run_tags(options, TRACE, 1, {}, "tf_cnn_text")
    assert (trace_tags["log_sha256"], trace_tags["log_bytes_sha256"]) == (sha256(trace_text), bytes_digest(TRACE))


def test_log_record_and_its_content_hash():
    options = LogOptions(source=user_source("mine"))
    params = {"model": "resnet50"}
    rec = log_record(options, TRACE, 2, params=params, metrics={"throughput_total": 1.5}, tags={"a": "1"},
                     where="t.txt:9", status="FAILED", start_ms=10, end_ms=20)  # fmt: skip
    assert type(rec) is LogRecord
    key = f"sha256:{sha256(log_text(TRACE.read_bytes()))}#2"
    assert (rec.experiment, rec.key, rec.params, rec.metrics, rec.tags, rec.status, rec.start_ms, rec.end_ms,
            rec.where) == ("mine", key, params, {"throughput_total": 1.5}, {"a": "1"}, "FAILED", 10, 20,
                           "t.txt:9")  # fmt: skip
    default = log_record(options, TRACE, None, params=params, metrics={}, tags={}, where="w")
    assert (default.status, default.start_ms, default.end_ms) == ("FINISHED", None, None)
    named = log_record(LogOptions(source=user_source("mine"), key_prefix={TRACE: "t"}), TRACE, None, params=params,
                       metrics={}, tags={}, where="w")  # fmt: skip
    assert type(named) is RunRecord and named.key == "t"
    # the content hash leaves out where the file was found and which copy of its text was read, and nothing else
    base = {"a": "1", "log_path": "x/t.txt", "log_file": "t.txt", "source_line": "t.txt:9"}
    moved = dict(base, log_path="y/t.txt", log_file="u.txt", source_line="u.txt:9", source_lines="s",
                 system_description="d", import_warning="w", log_bytes_sha256="b",
                 **{DESCRIPTION_TAG: "text"})  # fmt: skip

    def rec_with(tags):
        return LogRecord("mine", "k", params, {"throughput_total": 1.5}, tags, where="w")

    assert rec_with(base).content_hash() == rec_with(moved).content_hash() == rec_with({"a": "1"}).content_hash()
    assert rec_with(base).content_hash() == RunRecord("mine", "k", params, {"throughput_total": 1.5}, {"a": "1"},
                                                      where="w").content_hash()  # fmt: skip
    assert rec_with(dict(base, a="2")).content_hash() != rec_with(base).content_hash()
    assert rec_with(dict(base, log_sha256="t")).content_hash() != rec_with(base).content_hash()  # the text's
    assert rec_with(base).tags == base  # left as it was


def test_param_given_or_from_the_log():
    tags: dict[str, str] = {}
    assert param("workers", 2, 4, "--workers", "f:3", tags) == 4 and tags == {"log_workers": "2"}
    tags = {}
    assert param("workers", "4", 4, "--workers", "f:3", tags) == 4 and tags == {}  # the same, as text
    assert param("device", None, "V100", "--device", "f:3", tags) == "V100" and tags == {}
    assert param("device", "", "V100", "--device", "f:3", tags) == "V100" and tags == {}
    assert param("device", "P100", None, "--device", "f:3", tags) == "P100"
    assert param("device", "P100", "", "--device", "f:3", tags) == "P100" and tags == {}
    for missing in (None, ""):
        with pytest.raises(SchemaError) as err:
            param("platform", missing, "", "--platform", "f.log:3", tags)
        assert str(err.value) == "f.log:3: the log does not say the run's platform: give it with --platform"


def test_device_names_gpu_names_and_one_device():
    assert [device_name(n) for n in ("NVIDIA GeForce RTX 3090 (24GB)", "AMD Instinct MI250X", "Quadro P6000",
                                     "  NVIDIA ", "Radeon", "(x) Tesla", "A100-SXM4-80GB")] == [
        "RTX 3090", "MI250X", "P6000", "NVIDIA", "Radeon", "(x) Tesla", "A100"]  # fmt: skip
    assert gpu_names("name: Tesla M60") == "Tesla M60"
    assert gpu_names("..., name: Tesla V100-SXM2-16GB, pci bus id: 0000:06:00.0") == "Tesla V100-SXM2-16GB"
    assert gpu_names("name: Tesla V100 major: 7 minor: 0 memoryClockRate (GHz) 1.53") == "Tesla V100"
    assert gpu_names("(device: 0, name: GeForce GTX 1070)") == "GeForce GTX 1070"
    assert gpu_names("(device: 0, name: GeForce GTX TITAN X, pci bus id: 0000:02:00.0)") == "GeForce GTX TITAN X"
    assert [gpu_names(t) for t in ("name: /job:localhost/replica:0", "name: job:worker", "no gpu here")] == [None] * 3
    assert one_device({}, Path("x.log"), "x.log:1") == (None, None)
    # two names of one kind: the kind, the last full name
    assert one_device({"Tesla V100-SXM2-16GB": 3, "Tesla V100-SXM2-32GB": 9}, Path("x.log"), "w") == (
        "V100", "Tesla V100-SXM2-32GB")  # fmt: skip
    with pytest.raises(SchemaError) as err:
        one_device({"Tesla V100": 3, "Tesla P100": 9}, Path("d/x.log"), "x.log:1")
    assert str(err.value) == ("x.log:1: the log lists several kinds of GPU (Tesla V100 (x.log:3), Tesla P100 "
                              "(x.log:9)): give the run's with --device")  # fmt: skip


def test_strip_rank_lines_of_and_python_error(tmp_path):
    assert strip_rank("[1,0]<stdout>:Total img/sec") == (0, "Total img/sec")
    assert strip_rank("[3]: step 1") == (3, "step 1")
    assert strip_rank("[12]<stderr>:x") == (12, "x")
    assert strip_rank("plain [1] line") == (None, "plain [1] line")
    for data, lines in ((b"a\nb\n", ["a", "b"]), (b"a\nb", ["a", "b"]), (b"", []), (b"a\n\n", ["a", ""])):
        (tmp_path / "f.txt").write_bytes(data)
        assert lines_of(tmp_path / "f.txt") == lines
    assert python_error("  tensorflow.errors.InvalidArgumentError: bad shape  ") == (
        "tensorflow.errors.InvalidArgumentError: bad shape")  # fmt: skip
    assert python_error("KeyboardInterrupt: ") == "KeyboardInterrupt:"
    assert python_error("no error here") is None


def test_detect_and_the_files_a_folder_walk_keeps(tmp_path):
    """A copy of the tf_cnn_benchmarks folder, a copy of the trace, and files a folder holds beside its logs."""
    shutil.copytree(TF_JSON, tmp_path / "d" / "tfjson")
    shutil.copyfile(TRACE, tmp_path / "d" / "b-trace.txt")
    for name in (".hidden.txt", ".git/trace.txt", "README.MD", "notes.rst", "run.sh", "systems/s.json"):
        (tmp_path / "d" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TRACE, tmp_path / "d" / name)
    (tmp_path / "d" / "other").mkdir()
    shutil.copyfile(TRACE, tmp_path / "d" / "other" / "a.json")  # a .json outside systems/: read
    d = tmp_path / "d"
    assert logs._files([d]) == [(d / "b-trace.txt", None), (d / "other" / "a.json", None),
                                (d / "tfjson" / "metric.log", "tf_cnn_json")]  # fmt: skip
    # files given one by one: metric.log of a tf_cnn_benchmarks folder is known by the layout, others are not
    assert logs._files([d / "tfjson" / "metric.log", d / "tfjson" / "benchmark.log", d / "README.MD"]) == [
        (d / "tfjson" / "metric.log", "tf_cnn_json"),
        (d / "tfjson" / "benchmark.log", None),
        (d / "README.MD", None),
    ]
    (tmp_path / "lone").mkdir()
    shutil.copyfile(TF_JSON / "metric.log", tmp_path / "lone" / "metric.log")
    assert logs._files([tmp_path / "lone" / "metric.log"]) == [(tmp_path / "lone" / "metric.log", None)]
    with pytest.raises(SchemaError) as err:
        logs._files([d, tmp_path / "missing"])
    assert str(err.value) == f"{tmp_path / 'missing'}: no such file or folder"
    # the layout decides in a tf_cnn_benchmarks folder (eval.log holds no metric), the content elsewhere
    assert [detect(d / "tfjson" / n) for n in ("benchmark.log", "metric.log", "eval.log")] == ["tf_cnn_json"] * 3
    assert detect(d / "b-trace.txt") == "tf_cnn_text"
    (d / "tfjson" / "x.log").write_text("nothing\n")
    with pytest.raises(SchemaError) as err:
        detect(d / "tfjson" / "x.log")
    assert str(err.value) == (
        f"{d / 'tfjson' / 'x.log'}:1: not a log format this importer knows (MLPerf training result log (:::MLLOG "
        "lines); NVIDIA DLLogger JSON lines (DLLL {...}); tf_cnn_benchmarks --benchmark_log_dir output "
        "(benchmark.log + metric.log); Horovod timeline (HOROVOD_TIMELINE Chrome trace JSON); Horovod synthetic "
        "benchmark output (Total img/sec on N GPU(s)); Keras "
        "multi-GPU benchmark log of rossumai/keras-multi-gpu (Samples/sec); tf_cnn_benchmarks text output (total "
        "images/sec))"
    )
    # by its name alone: eval.log and metric.log there are the folder's whatever they hold (here: text no parser
    # knows, written over the copies)
    for name in ("eval.log", "metric.log"):
        (d / "tfjson" / name).write_text("nothing\n")
        assert detect(d / "tfjson" / name) == "tf_cnn_json"
    shutil.copyfile(TRACE, tmp_path / "lone" / "benchmark.log")  # now beside metric.log: the layout, not the content
    assert detect(tmp_path / "lone" / "benchmark.log") == "tf_cnn_json"


def test_scan_logs_files_copies_and_errors(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("no log\n")
    (tmp_path / "empty").mkdir()
    options = LogOptions(source=user_source("mine"), platform="az")
    with pytest.raises(SchemaError) as err:
        scan_logs([tmp_path / "docs", tmp_path / "empty"], options)
    assert str(err.value) == f"{tmp_path / 'docs'}, {tmp_path / 'empty'}: no log file found"
    shutil.copyfile(TRACE, tmp_path / "docs" / "trace.txt")
    shutil.copyfile(TRACE, tmp_path / "copy.txt")
    shutil.copytree(TF_JSON, tmp_path / "tfjson")
    seen = []

    def progress(files):
        seen.append(list(files))
        return files

    # the folder, a file in it again (skipped: the same file), a copy (a duplicate), a tf_cnn_benchmarks folder
    found = scan_logs(iter([tmp_path / "docs", tmp_path / "docs" / "trace.txt", tmp_path / "copy.txt",
                            tmp_path / "tfjson" / "metric.log"]), options, progress=progress)  # fmt: skip
    assert seen == [[(tmp_path / "docs" / "trace.txt", None), (tmp_path / "docs" / "trace.txt", None),
                     (tmp_path / "copy.txt", None), (tmp_path / "tfjson" / "metric.log", "tf_cnn_json")]]  # fmt: skip
    assert len(found.records) == 7  # the trace's six runs, the folder's one
    assert found.duplicates == [(tmp_path / "copy.txt", tmp_path / "docs" / "trace.txt")]
    assert found.formats == {tmp_path / "docs" / "trace.txt": "tf_cnn_text", tmp_path / "tfjson": "tf_cnn_json"}
    assert [r.key for r in read_logs([tmp_path / "copy.txt"], options)] == [r.key for r in found.records[:6]]
    # a parser that finds no run in a file it recognised
    monkeypatch.setattr(logs.formats()["tf_cnn_json"], "parse", lambda path, options: [])
    with pytest.raises(SchemaError) as err:
        scan_logs([tmp_path / "tfjson"], options)
    assert str(err.value) == (f"{tmp_path / 'tfjson' / 'metric.log'}:1: a tf_cnn_benchmarks --benchmark_log_dir "
                              "output (benchmark.log + metric.log) with no run in it")  # fmt: skip


def test_legacy_claim_matches_runs_keyed_by_name(tmp_path):
    """Runs an earlier importer keyed by the file's name (or its path in the folder given): claimed by the record of
    the same format, file name and run number with the same throughput (a failed run: the same source line)."""
    shutil.copyfile(TRACE, tmp_path / "trace.txt")
    found = scan_logs([tmp_path / "trace.txt", TF_JSON], LogOptions(source=user_source("mine"), platform="az"))
    claim = found.legacy_claim()
    trace = {r.key.partition("#")[2]: r for r in found.records[:6]}
    third = trace["3"]  # 95.43 total images/sec (trace line 162)
    assert third.metrics["throughput_total"] == 95.43
    tags = {"log_format": "tf_cnn_text", "source_line": "trace.txt:162"}
    assert claim("trace.txt#3", tags, {"throughput_total": 95.43}) == third.key
    assert claim("some/dir/trace.txt#3", tags, {"throughput_total": 95.43}) == third.key
    assert claim("trace.txt#3", tags, {"throughput_total": 95.43 * (1 + 5e-10)}) == third.key  # within 1e-9
    assert claim("trace.txt#3", tags, {"throughput_total": 95.43 * (1 + 2e-9)}) is None
    assert claim("trace.txt#3", tags, {"throughput_total": 94.72}) is None  # run 2's number
    assert claim("trace.txt#2", tags, {"throughput_total": 94.72}) == trace["2"].key
    assert claim("trace.txt#3", tags, {}) is None  # no number: not the same
    assert claim("trace.txt#3", {"log_format": "keras_mgpu"}, {"throughput_total": 95.43}) is None
    assert claim("trace.txt#3", {}, {"throughput_total": 95.43}) is None  # no format
    assert claim("trace.txt", tags, {"throughput_total": 95.43}) is None  # no run number
    assert claim("sha256:abc", tags, {"throughput_total": 95.43}) is None  # keyed by content already
    assert claim("trace.txt#3", dict(tags, log_sha256="x"), {"throughput_total": 95.43}) is None
    # a tf_cnn_benchmarks folder: by the folder's name, no run number
    (folder,) = found.records[6:]
    json_tags = {"log_format": "tf_cnn_json"}
    value = folder.metrics["throughput_total"]
    assert claim(TF_JSON.name, json_tags, {"throughput_total": value}) == folder.key
    assert claim("metric.log", json_tags, {"throughput_total": value}) is None
    # a record without a throughput (a failed run): the same source line decides
    failed = LogImport(records=[LogRecord("mine", "sha256:f#1", {}, {}, {"log_format": "keras_mgpu", "log_path":
                                          "x/f.txt", "source_line": "f.txt:40"}, where="f.txt:5")])  # fmt: skip
    claim = failed.legacy_claim()
    # a record that says no log_path (keyed by name): its file name is empty, it claims nothing named
    nameless = LogImport(records=[LogRecord("mine", "k#1", {}, {"throughput_total": 2.0}, {"log_format": "mlperf"},
                                            where="w")])  # fmt: skip
    assert nameless.legacy_claim()("#1", {"log_format": "mlperf"}, {"throughput_total": 2.0}) == "k#1"
    assert nameless.legacy_claim()("a.txt#1", {"log_format": "mlperf"}, {"throughput_total": 2.0}) is None
    # the tolerance's edge, |mine - theirs| == 1e-9 x |mine| exactly in floats (1e9 and 1e9 + 1: 1e-9 * 1e9 == 1.0)
    edge = LogImport(records=[LogRecord("mine", "e#1", {}, {"throughput_total": 1e9}, {"log_format": "mlperf",
                                        "log_path": "d/e.txt"}, where="w")])  # fmt: skip
    assert edge.legacy_claim()("e.txt#1", {"log_format": "mlperf"}, {"throughput_total": 1e9 + 1}) == "e#1"
    assert edge.legacy_claim()("e.txt#1", {"log_format": "mlperf"}, {"throughput_total": 1e9 + 2}) is None
    assert claim("f.txt#1", {"log_format": "keras_mgpu", "source_line": "f.txt:40"}, {}) == "sha256:f#1"
    assert claim("f.txt#1", {"log_format": "keras_mgpu", "source_line": "f.txt:41"}, {}) is None
    assert claim("f.txt#1", {"log_format": "keras_mgpu", "source_line": "f.txt:40"}, {"throughput_total": 1}) is None


def test_a_workers_option_a_log_overrules_is_a_warning():
    """tf_cnn_benchmarks' text log states its GPU count (global batch / per-device batch): the trace's six runs are
    1 GPU (its line 2: `--num_gpus 1`) then 2 (lines 56, 110, 164, 219, 274: `--num_gpus 2`). --workers 2 is not
    used for the first, which carries the warning (the command prints it once per file); the others agree."""
    options = LogOptions(source=user_source("mine"), platform="az", workers=2)
    records = read_logs([TRACE], options)
    assert [r.params["workers"] for r in records] == [1, 2, 2, 2, 2, 2]
    note = f"{TRACE}: --workers 2 not used: the log says 1 GPUs"
    assert [r.tags.get("import_warning") for r in records] == [note, None, None, None, None, None]
