"""`python -m scalestudy.ingest logs` as a user brings logs (issue 21): additive imports one call at a time, runs
known by their content (never their file's name), republished copies, runs keyed by name before, --replace,
--dry-run, headers that lost their leading blanks, and the MLPerf standard layout with the system file beside the
results (well-formed and malformed ones).

Every log here is real: the samples of ../shared/reference/logs, the Keras multi-GPU trace of seed 002, and MLPerf
Training ResNet results with their system files from ../shared/reference/mlperf-training-resnet (its README and
manifest.csv name the republished and the malformed files). The expected numbers were read off the files by hand
(file:line in the comments). Files a test changes (blanks stripped, a system file put beside another log) are
written to tmp_path, and the test says how they were made.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from helpers import log_text_sha256, shared_reference

from scalestudy.ingest.__main__ import main
from scalestudy.ingest.logs import LogOptions, read_logs, scan_logs, user_source
from scalestudy.ingest.logs.command import PROGRESS_FILES, _progress
from scalestudy.ingest.logs.mlperf_system import frameworks_named, read_system
from scalestudy.schema import RunRecord, SchemaError
from scalestudy.store import load_runs, sync_experiment

SHARED = shared_reference("logs", "keras-multi-gpu-2017", "mlperf-training-resnet")
# Real third-party files no source.yaml of this project lists yet: a skip allowed under make test.
pytestmark = [
    pytest.mark.may_skip,
    pytest.mark.skipif(SHARED is None, reason="../shared/reference (logs, mlperf-training-resnet) is not here"),
]
REF = SHARED or Path()
TRACE = REF / "keras-multi-gpu-2017" / "benchmark_batch_inception3_az-2xm-60.txt"
KERAS_AZ = REF / "keras-multi-gpu-2017" / "benchmark_inception3_resnet50_results_az-2x-m60.txt"
SAMPLE_NVIDIA = REF / "logs/mlperf/training_results_v1.0/NVIDIA/results/dgxa100_ngc21.05_mxnet/resnet/result_0.txt"
TF_JSON = REF / "logs/tf_cnn_benchmarks_json/fh2_singularity_500batch_synthetic_resnet50_1_gpu_1"
CORPUS = REF / "mlperf-training-resnet"
NVIDIA = CORPUS / "v1.0/NVIDIA/results/dgxa100_ngc21.05_mxnet/resnet/result_0.txt"  # same bytes as SAMPLE_NVIDIA
DELL = CORPUS / "v2.0/Dell/results/XE8545x4A100-SXM-40GB/resnet/result_0.txt"
DELL_AGAIN = CORPUS / "v2.1/Dell/results/XE8545x4A100-SXM-40GB/resnet/result_0.txt"  # republished byte for byte
DELLEMC = CORPUS / "v0.7/DellEMC/results/C4140/resnet/result_0.txt"  # its system file spells 'number of nodes'
SMC = CORPUS / "v4.0/smc/results/1xSMC-H100-SXM-80GB/resnet/result_4955-240510092530204754245_1.txt"
TRAILING_COMMA = CORPUS / "v0.7/Alibaba/systems/n32_pai_eflops.json"
NOT_JSON = CORPUS / "v0.6/NVIDIA/systems/dgx2h_ngc19.05_mxnet.json"  # `key: {json}` lines

# Hand-read values: (GPUs, per-GPU batch, epochs, run_stop - run_start in s, 35 or 40 x 1281167 / that, accuracy)
DELL_RUN = (4, 256, 35, 3732.195, 12014.604, 0.76106)
# v2.0/Dell/.../result_0.txt: d_batch_size 256 (line 1045), global_batch_size 1024 (1049), run_start time_ms
# 1652674817323 (1087), train_samples 1281167 (1088), 35 epoch_stop lines, eval_accuracy 0.76106 (3517), run_stop
# 1652678549518 status success (3519); systems/XE8545x4A100-SXM-40GB.json: 1 node (line 6) x 4 (line 20).
DELLEMC_RUN = (4, 208, 40, 9231.111, 5551.518, 0.7603)
# v0.7/DellEMC/.../result_0.txt: global_batch_size 832 (line 48), run_start 1593141109250 (59), train_samples 1281167
# (60), 40 epoch_stop lines, eval_accuracy 0.7603 (3312), run_stop 1593150340361 (3314); no per-device batch: the
# 4 GPUs are in the system file only, whose `"number of nodes": "1"` (line 6) is not the schema's number_of_nodes.
NVIDIA_RUN = (8, 408, 35, 1724.542, 26001.6, 0.76066)  # ../logs/README.md's table


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **given)


def run_values(rec_or_row) -> tuple:
    get = rec_or_row.get if isinstance(rec_or_row, dict) else rec_or_row.__getitem__
    return (int(get("workers")), int(get("batch_per_worker")), int(get("epochs")), round(get("time_total_s"), 3),
            round(get("throughput_run"), 3 if get("throughput_run") < 20000 else 1), get("accuracy_test"))  # fmt: skip


def flat(rec: RunRecord) -> dict:
    return {**rec.params, **rec.metrics}


def source_lines(rec: RunRecord) -> dict[str, str]:
    return dict(item.split(": ", 1) for item in rec.tags["source_lines"].split("; "))


# ------------------------------------------------------------------------------------------------------------------
# Headers with or without leading blanks


def test_tf_cnn_text_log_that_lost_its_leading_blanks_keeps_its_batch_per_device(tmp_path):
    # Made from the real trace by stripping every line's leading blanks, as `while read line; do echo $line` does:
    # its header `Batch size:  32 global` / `             32 per device` (lines 31-32) becomes `32 per device`.
    stripped = tmp_path / "stripped.txt"
    stripped.write_bytes(b"\n".join(line.lstrip(b" \t") for line in TRACE.read_bytes().split(b"\n")))
    assert stripped.read_text().split("\n")[31] == "32 per device"
    # ... and one with every line indented by four blanks (a capture that indents)
    indented = tmp_path / "indented.txt"
    indented.write_bytes(b"\n".join(b"    " + line for line in TRACE.read_bytes().split(b"\n")))
    original = read_logs([TRACE], options(platform="az"))
    for variant in (stripped, indented):
        records = read_logs([variant], options(platform="az"))
        # the six runs: 1 GPU then 2 GPUs x 5 (`Batch size: 32 global` / `64 global`, `32 per device`)
        assert [(r.params["workers"], r.params["batch_per_worker"]) for r in records] == [(1, 32)] + [(2, 32)] * 5
        assert [flat(r) for r in records] == [flat(r) for r in original]


def test_keras_log_with_indented_headers(tmp_path):
    # the real Keras log with every line indented by a tab: `architecture:`, `number of GPUs:`... still found
    indented = tmp_path / "indented.txt"
    indented.write_bytes(b"\n".join(b"\t" + line for line in KERAS_AZ.read_bytes().split(b"\n")))
    records = read_logs([indented], options(platform="az"))
    assert [flat(r) for r in records] == [flat(r) for r in read_logs([KERAS_AZ], options(platform="az"))]
    assert len(records) == 12 and records[0].metrics["throughput_total"] == 31.71  # line 45 `Samples/sec: 31.71`


# ------------------------------------------------------------------------------------------------------------------
# The MLPerf layout: the system file beside the results


def test_system_files_read_with_their_lines_and_warnings():
    facts, warnings = read_system(DELL.parents[3] / "systems" / "XE8545x4A100-SXM-40GB.json")
    assert warnings == []
    assert {k: facts[k] for k in ("nodes", "accelerators_per_node", "accelerators", "accelerator", "frameworks")} == {
        "nodes": 1, "accelerators_per_node": 4, "accelerators": 4, "accelerator": "NVIDIA A100-SXM-40GB",
        "frameworks": ["mxnet", "pytorch", "tensorflow"],  # "NGC MXNet 22.05 , NGC PyTorch 22.05 , NGC TensorFlow..."
    }  # fmt: skip
    assert facts["lines"] == {"nodes": 6, "accelerators_per_node": 20, "accelerator": 21, "framework": 31}
    # a key spelled otherwise: the rest is read, that fact is not
    facts, warnings = read_system(DELLEMC.parents[3] / "systems" / "C4140.json")
    assert "nodes" not in facts and "accelerators" not in facts and facts["accelerators_per_node"] == 4
    assert warnings == [
        f"{DELLEMC.parents[3] / 'systems' / 'C4140.json'}:6: the system description spells 'number_of_nodes' as "
        "'number of nodes': not read"
    ]
    # not JSON: a trailing comma (line 35, before `},`), `key: {json}` lines: nothing of them is used
    facts, warnings = read_system(TRAILING_COMMA)
    assert set(facts) == {"system", "lines"} and facts["lines"] == {}
    assert warnings == [f"{TRAILING_COMMA}:35: the system description is not valid JSON (a trailing comma): none of "
                        "its facts are used"]  # fmt: skip
    facts, warnings = read_system(NOT_JSON)
    assert set(facts) == {"system", "lines"} and len(warnings) == 1
    assert warnings[0].startswith(f"{NOT_JSON}:1: the system description is not valid JSON")
    assert frameworks_named("tf2.0") == ["tensorflow"] and frameworks_named("NGC MLPerf v4.0") == []


def test_mlperf_layout_gives_accelerators_device_framework_and_platform():
    (rec,) = read_logs([DELL], options())  # no --framework, --device, --workers nor --platform
    rec.validate()
    assert rec.params | {} == {
        "model": "resnet50", "framework": "mxnet", "api": "mlperf", "workers": 4, "device": "A100", "data": "real",
        "batch_per_worker": 256, "platform": "XE8545x4A100-SXM-40GB", "epochs": 35,
    }  # fmt: skip
    assert run_values(flat(rec)) == DELL_RUN
    assert rec.tags["device_name"] == "NVIDIA A100-SXM-40GB" and rec.status == "FINISHED"
    lines = source_lines(rec)
    # the log's own count (1024 / 256, d_batch_size at 1045) is the one used; the system file's 1 x 4 agrees
    assert lines["workers"] == "result_0.txt:1045" and "system_workers" not in rec.tags
    assert lines["device"] == "XE8545x4A100-SXM-40GB.json:21" and lines["throughput_run"] == "result_0.txt:3519"
    # an option wins over the log and the file; the log's value stays in a tag
    (given,) = read_logs([DELL], options(framework="pytorch", workers=2, platform="dell"))
    assert (given.params["framework"], given.params["workers"], given.params["batch_per_worker"]) == ("pytorch", 2, 512)
    assert given.tags["log_framework"] == "mxnet" and given.tags["log_workers"] == "4"


def test_mlperf_accelerators_from_the_system_file_where_the_log_has_no_count():
    # v1.1 Intel-HabanaLabs HLS-1H-N2: no per-device batch in the log (global_batch_size 2048 at line 8); the system
    # file says 2 nodes (line 6) x 4 accelerators (line 20), "Habana Gaudi" (21), "TensorFlow 2.5.1" (31)
    habana = CORPUS / "v1.1/Intel-HabanaLabs/results/HLS-1H-N2/resnet/result_0.txt"
    (rec,) = read_logs([habana], options())
    assert (rec.params["workers"], rec.params["batch_per_worker"], rec.params["device"]) == (8, 256, "Habana Gaudi")
    assert (rec.params["framework"], rec.params["platform"]) == ("tensorflow", "HLS-1H-N2")
    assert source_lines(rec)["workers"] == "HLS-1H-N2.json:6"
    # run_start 1636540543396 (line 23), run_stop 1636543910001 (line 69)
    assert rec.metrics["time_total_s"] == pytest.approx(3366.605)


def test_mlperf_log_own_system_line_wins_over_the_system_file():
    # v4.0 smc: systems/1xSMC-H100-SXM-80GB.json says "framework": "PyTorch NVIDIA Release 24.04" (line 31); the log
    # prints the system it ran on at line 7 (`:::SYSJSON {... "framework": "MXNet NVIDIA Release 24.04" ...}`)
    (rec,) = read_logs([SMC], options())
    assert rec.params["framework"] == "mxnet" and rec.tags["system_framework"] == "pytorch"
    assert source_lines(rec)["framework"] == f"{SMC.name}:7"
    # d_batch_size 400 (line 239), global_batch_size 3200 (243): 8 GPUs, as the system file's 1 x 8
    assert (rec.params["workers"], rec.params["batch_per_worker"], rec.params["device"]) == (8, 400, "H100")
    # run_start 1715304578940 (256), run_stop 1715305376643 (417): 797.703 s; 35 x 1281167 / 797.703 = 56212.5
    assert rec.metrics["time_total_s"] == pytest.approx(797.703) and round(rec.metrics["throughput_run"], 1) == 56212.5


def test_mlperf_malformed_system_file_warns_and_the_log_decides(tmp_path):
    # DellEMC C4140: the GPU count is in no MLLOG line, and the system file's node count is misspelled
    with pytest.raises(SchemaError) as err:
        read_logs([DELLEMC], options())
    assert str(err.value).startswith(f"{DELLEMC}:9: the log does not say the run's workers: give it with --workers (")
    assert "C4140.json:6: the system description spells 'number_of_nodes' as 'number of nodes'" in str(err.value)
    (rec,) = read_logs([DELLEMC], options(workers=4))
    assert run_values(flat(rec)) == DELLEMC_RUN
    # the file's well-spelled facts are still used: its accelerator (line 21); its framework text names MXNet and
    # PyTorch, the log (line 8: `singularity exec sandbox-mxnet-ngc20.06`) names mxnet only
    assert (rec.params["device"], rec.params["framework"], rec.params["platform"]) == ("V100", "mxnet", "C4140")
    assert "spells 'number_of_nodes'" in rec.tags["import_warning"]
    # A system file that is not JSON: the real v0.7 Alibaba file with a trailing comma, put beside the real Dell log
    # as `<Submitter>/systems/<system>.json` (copies in tmp_path): the log's own facts, and a warning
    log = tmp_path / "Sub" / "results" / "sysx" / "resnet" / "result_0.txt"
    log.parent.mkdir(parents=True)
    shutil.copyfile(DELL, log)
    (tmp_path / "Sub" / "systems").mkdir()
    shutil.copyfile(TRAILING_COMMA, tmp_path / "Sub" / "systems" / "sysx.json")
    with pytest.raises(SchemaError, match=r"the log does not say the run's device: give it with --device \(.*"
                                          r"sysx\.json:35: the system description is not valid JSON"):  # fmt: skip
        read_logs([log], options())
    (rec,) = read_logs([log], options(device="A100"))
    assert (rec.params["workers"], rec.params["framework"], rec.params["platform"]) == (4, "mxnet", "sysx")
    assert run_values(flat(rec)) == DELL_RUN
    assert "trailing comma" in rec.tags["import_warning"]


# ------------------------------------------------------------------------------------------------------------------
# Identity by content, one call at a time, on a real store


def _import(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["logs", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _by_key(uri: str):
    runs = load_runs(uri)
    assert not runs.duplicated(["experiment", "import_key"]).any()
    return runs.set_index("import_key")


def test_mlperf_results_of_different_systems_imported_one_call_at_a_time(empty_store, monkeypatch, capsys):
    uri = empty_store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    # three result_0.txt of three systems, one call each: each adds its run, none replaces another's
    assert _import(capsys, str(NVIDIA), "--experiment", "mine")[1].endswith(
        "1 runs (0 failed) from 1 file(s) in experiment 'mine': 1 created, 0 updated, 0 unchanged, 0 removed, "
        "0 duplicates\n"
    )
    assert ": 1 created, 0 updated, 0 unchanged" in _import(capsys, str(DELL), "--experiment", "mine")[1]
    code, out, err = _import(capsys, str(DELLEMC), "--experiment", "mine", "--workers", "4")
    assert code == 0 and ": 1 created, 0 updated, 0 unchanged" in out
    # the malformed system file: one warning line naming it, and the import goes on
    assert err == (f"warning: {DELLEMC.parents[3] / 'systems' / 'C4140.json'}:6: the system description spells "
                   "'number_of_nodes' as 'number of nodes': not read\n")  # fmt: skip
    runs = _by_key(uri)
    assert len(runs) == 3
    for path, expected in ((NVIDIA, NVIDIA_RUN), (DELL, DELL_RUN), (DELLEMC, DELLEMC_RUN)):
        assert run_values(runs.loc[f"sha256:{log_text_sha256(path)}"]) == expected
    ids = runs["run_id"].to_dict()
    # all again in one call, and the NVIDIA log again from another tree (../logs holds the same bytes): nothing
    # changes; the two NVIDIA copies given together are one run, the summary says so
    _, out, _ = _import(capsys, str(SAMPLE_NVIDIA), str(DELL), str(NVIDIA), "--experiment", "mine")
    assert "from 2 file(s) in experiment 'mine': 0 created, 0 updated, 2 unchanged, 0 removed, 1 duplicates" in out
    assert f"duplicates (same text, not imported twice): {NVIDIA} = {SAMPLE_NVIDIA}" in out
    assert ": 0 created, 0 updated, 1 unchanged" in _import(capsys, str(DELLEMC), "--experiment", "mine",
                                                            "--workers", "4")[1]  # fmt: skip
    assert _by_key(uri)["run_id"].to_dict() == ids
    # MLPerf's republished copy (v2.1 holds v2.0's Dell log byte for byte): the same run, unchanged
    _, out, _ = _import(capsys, str(DELL_AGAIN), "--experiment", "mine")
    assert ": 0 created, 0 updated, 1 unchanged, 0 removed, 0 duplicates" in out
    assert _by_key(uri)["run_id"].to_dict() == ids


def test_replace_and_dry_run(empty_store, tmp_path, monkeypatch, capsys):
    # a dry run on a store that does not exist yet: the table, and no store made
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'new' / 'store.db'}")
    code, out, _ = _import(capsys, str(DELL), str(TF_JSON), "--experiment", "mine", "--dry-run")
    assert code == 0 and not (tmp_path / "new").exists()
    table = out.splitlines()
    assert table[0].split() == ["file", "format", "model", "workers", "throughput", "(img/s)", "status"]
    # the Dell run's throughput over its epochs: the 35 epoch_start -> epoch_stop intervals sum to 3705.500 s
    # (grep '"key": "epoch_' result_0.txt), 35 x 1281167 / 3705.5 = 12101.2; metric.log:52 132.37791654965747
    assert table[1].split() == [str(DELL), "mlperf", "resnet50", "4", "12101.2", "created"]
    assert table[2].split() == [str(TF_JSON / "metric.log"), "tf_cnn_json", "resnet50", "1", "132.4", "created"]
    assert table[3] == ("2 runs (0 failed) from 2 file(s) would be in experiment 'mine': 2 created, 0 updated, "
                        "0 unchanged, 0 removed, 0 duplicates; nothing written (--dry-run)")  # fmt: skip
    uri = empty_store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert _import(capsys, str(DELL), str(TF_JSON), "--experiment", "mine")[0] == 0
    db = tmp_path / "store.db"
    before = sha256(db)
    # --replace with the Dell log only, dry: it would remove the tf_cnn_benchmarks run, and writes nothing
    _, out, _ = _import(capsys, str(DELL), "--experiment", "mine", "--replace", "--dry-run")
    assert out.splitlines()[1].split()[-1] == "unchanged"
    assert out.splitlines()[-1] == (
        "1 runs (0 failed) from 1 file(s) would be in experiment 'mine': 0 created, 0 updated, 1 unchanged, "
        f"1 removed, 0 duplicates; removed: {TF_JSON / 'metric.log'}; nothing written (--dry-run)"
    )
    assert sha256(db) == before and len(load_runs(uri)) == 2
    # without --replace the same call removes nothing
    assert ": 0 created, 0 updated, 1 unchanged, 0 removed" in _import(capsys, str(DELL), "--experiment", "mine")[1]
    assert len(load_runs(uri)) == 2
    _, out, _ = _import(capsys, str(DELL), "--experiment", "mine", "--replace")
    assert out.rstrip().endswith(f"0 created, 0 updated, 1 unchanged, 1 removed, 0 duplicates; removed: "
                                 f"{TF_JSON / 'metric.log'}")  # fmt: skip
    assert list(_by_key(uri).index) == [f"sha256:{log_text_sha256(DELL)}"]


def test_runs_keyed_by_file_name_before_are_repaired_without_duplicates(empty_store, monkeypatch, capsys):
    """A store as the importer wrote it before runs had content keys: keyed by the file's name (`trace.txt#3`) or
    its path inside the folder given; the same runs, the same tags less log_sha256 and log_path (written here
    through store.sync_experiment, as that importer did)."""
    uri = empty_store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    old_keys = {TRACE: TRACE.name, SAMPLE_NVIDIA: "training_results_v1.0/NVIDIA/results/dgxa100_ngc21.05_mxnet/"
                "resnet/result_0.txt"}  # fmt: skip
    records = []
    for path, name in old_keys.items():
        for rec in read_logs([path], options(platform="az") if path == TRACE else options()):
            tags = {k: v for k, v in rec.tags.items() if k not in ("log_sha256", "log_bytes_sha256", "log_path")}
            tags.update(imported_by="python -m scalestudy.ingest logs", dataset="mine")
            number = rec.key.partition("#")[2]
            records.append(RunRecord("mine", f"{name}#{number}" if number else name, rec.params, rec.metrics, tags,
                                     status=rec.status, where=rec.where))  # fmt: skip
    assert sync_experiment("mine", records, uri)["created"] == 7  # 6 + 1
    old = _by_key(uri)
    assert old.index.str.startswith("sha256:").sum() == 0
    # re-import the trace: its six runs take content keys, nothing doubles, the MLPerf run (not given) stays
    code, out, _ = _import(capsys, str(TRACE), "--experiment", "mine", "--platform", "az")
    assert code == 0 and ": 0 created, 6 updated, 0 unchanged, 0 removed" in out
    runs = _by_key(uri)
    assert len(runs) == 7 and runs.index.str.startswith("sha256:").sum() == 6
    assert sorted(runs["throughput_total"]) == sorted(old["throughput_total"])
    assert runs.loc[f"sha256:{log_text_sha256(TRACE)}#3", "throughput_total"] == 95.43  # trace line 162
    # the MLPerf log, given now from the corpus (the same bytes elsewhere): its old run is repaired, not doubled
    assert ": 0 created, 1 updated, 0 unchanged" in _import(capsys, str(NVIDIA), "--experiment", "mine")[1]
    runs = _by_key(uri)
    assert len(runs) == 7 and runs.index.str.startswith("sha256:").sum() == 7
    assert round(runs.loc[f"sha256:{log_text_sha256(NVIDIA)}", "throughput_run"], 1) == 26001.6
    # once repaired, a re-import changes nothing (each file with its options: --platform would apply to both)
    assert ": 0 created, 0 updated, 6 unchanged" in _import(capsys, str(TRACE), "--experiment", "mine",
                                                            "--platform", "az")[1]  # fmt: skip
    assert ": 0 created, 0 updated, 1 unchanged" in _import(capsys, str(SAMPLE_NVIDIA), "--experiment", "mine")[1]


def test_republished_copies_in_folders_are_one_run():
    other = CORPUS / "v3.0/Dell/results/XE8545x4A100-SXM-80GB/resnet/result_0.txt"
    found = scan_logs([DELL.parents[1], DELL_AGAIN.parents[1], other.parents[1]], options())
    # v2.0's 40GB log again in v2.1 (the same sha256 in manifest.csv): one run; v3.0's 80GB system is another log
    assert [r.key for r in found.records] == [f"sha256:{log_text_sha256(DELL)}", f"sha256:{log_text_sha256(other)}"]
    assert found.duplicates == [(DELL_AGAIN, DELL)]
    assert found.records[1].params["platform"] == "XE8545x4A100-SXM-80GB"


def test_progress_bar_only_on_a_terminal(monkeypatch):
    files = list(range(PROGRESS_FILES))
    assert _progress(files) is files  # pytest's stderr is no terminal

    class Terminal:
        def isatty(self):
            return True

        def write(self, text):
            return len(text)

        def flush(self):
            pass

    monkeypatch.setattr("sys.stderr", Terminal())
    assert list(_progress(files)) == files and type(_progress(files)).__name__ == "tqdm"
    assert _progress(files[:-1]) == files[:-1]  # few files: no bar
