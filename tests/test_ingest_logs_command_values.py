"""`python -m scalestudy.ingest logs` (ingest/logs/command.py) called in-process, every printed line checked: the
--dry-run table (its column widths, a row per created, updated, unchanged, repaired and FAILED run, a row per
duplicate), the summary (each count, 'would be in' or 'in', more than LISTED duplicates or removed runs), every
refusal with exit status 2 and the store unchanged, the warnings (once each, in order), the experiment's
description and each run's tags as MLflow stores them, the usage text and the progress bar's threshold.

The logs are real (../shared/reference): cut copies of the Keras multi-GPU log of seed 002 (`benchmark_inception3_
resnet50_results_7gforce.txt`: lines 1-54 are its first run, lines 55-117 its second, lines 356-482 a run that
failed), a copy of the tf_cnn_benchmarks --benchmark_log_dir folder of ../shared/reference/logs, the az-2xm-60
tf_cnn_benchmarks trace, and MLPerf's DellEMC C4140 result with a copy of its system file (one value changed, said
where). They are written to tmp_path and the test runs there, so the table's paths (and widths) are short and fixed.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
from helpers import REPO, log_text_sha256, shared_reference

from scalestudy.ingest.logs import LogOptions, command, read_logs, user_source
from scalestudy.schema import DESCRIPTION_TAG, RunRecord
from scalestudy.store import load_runs, sync_experiment

SHARED = shared_reference("logs", "keras-multi-gpu-2017", "mlperf-training-resnet")
# Real third-party files no source.yaml of this project lists: a skip allowed under make test.
pytestmark = [
    pytest.mark.may_skip,
    pytest.mark.skipif(SHARED is None, reason="../shared/reference (logs, keras, mlperf-training-resnet) is not here"),
]
REF = SHARED or Path()
KERAS_7G = REF / "keras-multi-gpu-2017" / "benchmark_inception3_resnet50_results_7gforce.txt"
TRACE = REF / "keras-multi-gpu-2017" / "benchmark_batch_inception3_az-2xm-60.txt"
TF_JSON = REF / "logs" / "tf_cnn_benchmarks_json" / "fh2_singularity_500batch_synthetic_resnet50_1_gpu_1"
DELLEMC = REF / "mlperf-training-resnet" / "v0.7" / "DellEMC"
COMMAND = "python -m scalestudy.ingest logs"
NOTHING = "; nothing was written\n"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lines(path: Path, first: int, last: int) -> bytes:
    """Lines first..last of a file, numbered at newlines only (its progress bars hold carriage returns)."""
    return b"".join(line + b"\n" for line in path.read_bytes().split(b"\n")[first - 1 : last])


@pytest.fixture()
def logs(tmp_path, monkeypatch, empty_store):
    """tmp_path as the working folder, holding store.db (empty) and the cut copies the docstring names."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    # 7gforce log: run 1 (inception3, 1 GPU, `Samples/sec: 39.07` at line 54), run 2 (2 GPUs, ps cpu, 49.01 at
    # line 117), the 6-GPU ps-cpu run that fails (`InvalidArgumentError` at lines 451 and 479, no Samples/sec)
    (tmp_path / "ok.txt").write_bytes(_lines(KERAS_7G, 1, 54))
    (tmp_path / "two.txt").write_bytes(_lines(KERAS_7G, 55, 117))
    (tmp_path / "failed.txt").write_bytes(_lines(KERAS_7G, 356, 482))
    shutil.copytree(TF_JSON, tmp_path / "tfjson")  # metric.log:52 average_examples_per_sec 132.37791654965747
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = command.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------------------------------
# The table and the summary


def test_dry_run_table_and_summary_with_every_status_and_duplicates(logs, capsys):
    db = logs / "store.db"
    # the first two runs of the 7gforce log with --platform p, the tf_cnn_benchmarks folder with --platform q
    assert run(capsys, "ok.txt", "two.txt", "--experiment", "mine", "--platform", "p") == (
        0,
        "2 runs (0 failed) from 2 file(s) in experiment 'mine': 2 created, 0 updated, 0 unchanged, 0 removed, "
        "0 duplicates\n", "",
    )  # fmt: skip
    assert run(capsys, "tfjson", "--experiment", "mine", "--platform", "q")[1] == (
        "1 runs (0 failed) from 1 file(s) in experiment 'mine': 1 created, 0 updated, 0 unchanged, 0 removed, "
        "0 duplicates\n"
    )
    # two.txt's run deleted outside an import (as MLflow's UI deletes): the next import writes it again (repaired)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    runs = load_runs(f"sqlite:///{db}").set_index("log_path")
    client.delete_run(runs.loc["two.txt", "run_id"])
    # six copies of ok.txt in a folder (walked in name order): duplicates of ok.txt, given first
    (logs / "copies").mkdir()
    for n in range(1, 7):
        shutil.copyfile(logs / "ok.txt", logs / "copies" / f"c{n}.txt")
    before = sha256(db)
    code, out, err = run(capsys, "ok.txt", "two.txt", "tfjson", "failed.txt", "copies", "--experiment", "mine",
                         "--platform", "p", "--dry-run")  # fmt: skip
    assert (code, err) == (0, "")
    # widths: file 17 (`tfjson/metric.log`), format 11 (`tf_cnn_json`), model 10 (`inception3`), workers 7 (its
    # header), throughput 18 (its header): the status column starts at 17+11+10+7+18 + 5 x 2 = 73; cells joined
    # by two blanks, each line's trailing blanks cut.
    # ok.txt unchanged (same bytes, same options); two.txt repaired (deleted); tfjson updated (platform q -> p);
    # failed.txt created, FAILED: no throughput ('-'); 39.07 -> 39.1, 49.01 -> 49.0, 132.3779... -> 132.4
    assert out.splitlines() == [
        "file               format       model       workers  throughput (img/s)  status",
        "ok.txt#1           keras_mgpu   inception3  1        39.1                unchanged",
        "two.txt#1          keras_mgpu   inception3  2        49.0                repaired",
        "tfjson/metric.log  tf_cnn_json  resnet50    1        132.4               updated",
        "failed.txt#1       keras_mgpu   inception3  6        -                   created (FAILED run)",
        "copies/c1.txt                                                            duplicate of ok.txt",
        "copies/c2.txt                                                            duplicate of ok.txt",
        "copies/c3.txt                                                            duplicate of ok.txt",
        "copies/c4.txt                                                            duplicate of ok.txt",
        "copies/c5.txt                                                            duplicate of ok.txt",
        "copies/c6.txt                                                            duplicate of ok.txt",
        "4 runs (1 failed) from 4 file(s) would be in experiment 'mine': 1 created, 1 updated, 1 unchanged, "
        "0 removed, 6 duplicates, 1 incomplete runs repaired; duplicates (same text, not imported twice): "
        "copies/c1.txt = ok.txt, copies/c2.txt = ok.txt, copies/c3.txt = ok.txt, copies/c4.txt = ok.txt, "
        "copies/c5.txt = ok.txt and 1 more; nothing written (--dry-run)",
    ]
    assert sha256(db) == before
    # the same, written: no table, 'in'; then the store holds the four runs, each tagged as this command's
    code, out, err = run(capsys, "ok.txt", "two.txt", "tfjson", "failed.txt", "copies", "--experiment", "mine",
                         "--platform", "p")  # fmt: skip
    assert (code, err) == (0, "")
    assert out == (
        "4 runs (1 failed) from 4 file(s) in experiment 'mine': 1 created, 1 updated, 1 unchanged, 0 removed, "
        "6 duplicates, 1 incomplete runs repaired; duplicates (same text, not imported twice): copies/c1.txt = "
        "ok.txt, copies/c2.txt = ok.txt, copies/c3.txt = ok.txt, copies/c4.txt = ok.txt, copies/c5.txt = ok.txt "
        "and 1 more\n"
    )
    runs = load_runs(f"sqlite:///{db}")
    assert sorted(runs["log_path"]) == ["failed.txt", "ok.txt", "tfjson/metric.log", "two.txt"]
    assert set(runs["imported_by"]) == {COMMAND} and set(runs["platform"]) == {"p"}
    assert set(runs["status"]) == {"FINISHED", "FAILED"} and (runs["status"] == "FAILED").sum() == 1
    # no --url, no --citation: an empty source_url, the citation and description name the experiment
    assert list(runs["source_url"]) == [""] * 4  # a text, not absent
    assert set(runs["citation"]) == {"benchmark logs imported into mine"}
    exp = client.get_experiment_by_name("mine")
    assert exp.tags[DESCRIPTION_TAG] == (
        f"Benchmark logs imported by `{COMMAND}`: Keras multi-GPU benchmark log of rossumai/keras-multi-gpu "
        "(Samples/sec); tf_cnn_benchmarks --benchmark_log_dir output (benchmark.log + metric.log). "
        "Source: benchmark logs imported into mine."
    )
    # again, dry: all unchanged, five duplicates exactly (none 'more')
    (logs / "copies" / "c6.txt").unlink()
    code, out, _ = run(capsys, "ok.txt", "two.txt", "tfjson", "failed.txt", "copies", "--experiment", "mine",
                       "--platform", "p", "--dry-run")  # fmt: skip
    assert out.splitlines()[-1] == (
        "4 runs (1 failed) from 4 file(s) would be in experiment 'mine': 0 created, 0 updated, 4 unchanged, "
        "0 removed, 5 duplicates; duplicates (same text, not imported twice): copies/c1.txt = ok.txt, "
        "copies/c2.txt = ok.txt, copies/c3.txt = ok.txt, copies/c4.txt = ok.txt, copies/c5.txt = ok.txt; "
        "nothing written (--dry-run)"
    )
    assert [line[73:] for line in out.splitlines()[1:5]] == ["unchanged"] * 3 + ["unchanged (FAILED run)"]


def test_dry_run_on_a_new_store_and_citation_url_and_workers_given(logs, capsys):
    """No store file yet: all created, no store made; --citation and --url land in every run and the description;
    --workers 1 (the smallest allowed) is accepted, and where the log states another count (this Keras log's run:
    2 GPUs) the log's is kept with a warning."""
    (logs / "store.db").unlink()
    code, out, err = run(capsys, "tfjson", "--experiment", "theirs 2", "--platform", "p", "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "file               format       model     workers  throughput (img/s)  status",
        "tfjson/metric.log  tf_cnn_json  resnet50  1        132.4               created",
        "1 runs (0 failed) from 1 file(s) would be in experiment 'theirs 2': 1 created, 0 updated, 0 unchanged, "
        "0 removed, 0 duplicates; nothing written (--dry-run)",
    ]
    assert not (logs / "store.db").exists()
    code, out, err = run(capsys, "two.txt", "--experiment", "theirs 2", "--platform", "p", "--workers", "1",
                         "--citation", "Smith (2017)", "--url", "https://example.org/logs")  # fmt: skip
    assert (code, err) == (0, "warning: two.txt: --workers 1 not used: the log says 2 GPUs\n")
    assert out == ("1 runs (0 failed) from 1 file(s) in experiment 'theirs 2': 1 created, 0 updated, 0 unchanged, "
                   "0 removed, 0 duplicates\n")  # fmt: skip
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{logs / 'store.db'}")
    exp = client.get_experiment_by_name("theirs 2")
    assert exp.tags[DESCRIPTION_TAG] == (
        f"Benchmark logs imported by `{COMMAND}`: Keras multi-GPU benchmark log of rossumai/keras-multi-gpu "
        "(Samples/sec). Source: Smith (2017)."
    )
    (rec,) = client.search_runs([exp.experiment_id])
    # --workers 1 is accepted (the Keras parser keeps the log's `number of GPUs: 2`, line 88 of the 7gforce log)
    assert rec.data.params["workers"] == "2"
    assert (rec.data.tags["citation"], rec.data.tags["source_url"]) == ("Smith (2017)", "https://example.org/logs")
    assert rec.data.tags["imported_by"] == COMMAND


def _old_runs(names: dict[int, dict[str, str | None]], experiment: str = "mine") -> list[RunRecord]:
    """The az-2xm-60 trace's six runs as this command wrote them, with their log_path / source_line tags set (a
    value) or removed (None) as `names` says per run number."""
    records = []
    for rec in read_logs([TRACE], LogOptions(source=user_source(experiment), platform="az")):
        tags = dict(rec.tags, imported_by=COMMAND)
        for tag, value in names[int(rec.key.partition("#")[2])].items():
            if value is None:
                tags.pop(tag)
            else:
                tags[tag] = value
        records.append(RunRecord(rec.experiment, rec.key, rec.params, rec.metrics, tags, status=rec.status,
                                 where=rec.where))  # fmt: skip
    return records


def test_replace_names_the_removed_runs_by_path_line_or_key(logs, capsys, empty_store):
    """--replace removes the experiment's runs that the logs given do not hold; the summary names them by log_path,
    else source_line, else their key, sorted, five of them and 'and N more'."""
    digest = log_text_sha256(TRACE)
    old = _old_runs({
        1: {"log_path": "t6.txt"}, 2: {"log_path": "t5.txt"}, 3: {"log_path": "t4.txt"},
        4: {"log_path": None},  # its source_line stays: `benchmark_batch_inception3_az-2xm-60.txt:217`
        5: {"log_path": None, "source_line": None},  # named by its key
        6: {"log_path": "t1.txt"},
    })  # fmt: skip
    assert sync_experiment("mine", old, empty_store)["created"] == 6
    before = sha256(logs / "store.db")
    # sorted: the source_line of run 4, the key of run 5, the paths; t6.txt is the one more
    names = [f"{TRACE.name}:217", f"sha256:{digest}#5", "t1.txt", "t4.txt", "t5.txt"]
    code, out, err = run(capsys, "ok.txt", "--experiment", "mine", "--platform", "p", "--replace", "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == (
        "1 runs (0 failed) from 1 file(s) would be in experiment 'mine': 1 created, 0 updated, 0 unchanged, "
        f"6 removed, 0 duplicates; removed: {', '.join(names)} and 1 more; nothing written (--dry-run)"
    )
    assert sha256(logs / "store.db") == before
    # without --replace, nothing removed
    code, out, err = run(capsys, "ok.txt", "--experiment", "mine", "--platform", "p", "--dry-run")
    assert out.splitlines()[-1] == (
        "1 runs (0 failed) from 1 file(s) would be in experiment 'mine': 1 created, 0 updated, 0 unchanged, "
        "0 removed, 0 duplicates; nothing written (--dry-run)"
    )
    # written: the same line less the dry run's words; the experiment then holds ok.txt's run alone
    code, out, err = run(capsys, "ok.txt", "--experiment", "mine", "--platform", "p", "--replace")
    assert (code, err, out) == (0, "", (
        "1 runs (0 failed) from 1 file(s) in experiment 'mine': 1 created, 0 updated, 0 unchanged, 6 removed, "
        f"0 duplicates; removed: {', '.join(names)} and 1 more\n"
    ))  # fmt: skip
    assert list(load_runs(empty_store)["log_path"]) == ["ok.txt"]


# ------------------------------------------------------------------------------------------------------------------
# Refusals: exit status 2, one line, nothing written


def test_reserved_experiments_are_refused(logs, capsys, monkeypatch):
    """'measured' (the harness's), a folder of the reference dir, the experiment a source.yaml there names; a folder
    that is no dataset (no source.yaml) is skipped, and a reference dir that does not exist reserves nothing."""
    ref = logs / "ref"
    for n in range(8):  # not datasets: walked past (whatever order the folder lists them in)
        (ref / f"notes{n}").mkdir(parents=True)
    (ref / "ds1").mkdir()
    (ref / "ds1" / "source.yaml").write_text("experiment: their-exp\ncitation: Them (2020)\none_run: a log\n")
    (ref / "README.md").write_text("a file, not a folder\n")
    before = sha256(logs / "store.db")
    for name in ("measured", "ds1", "their-exp", "notes3"):
        assert run(capsys, "ok.txt", "--experiment", name, "--platform", "p", "--reference-dir", str(ref)) == (
            2, "", f"error: experiment {name!r} belongs to the study's own runs (a published dataset or the "
            f"harness's): choose another name{NOTHING}",
        )  # fmt: skip
    assert sha256(logs / "store.db") == before
    # by default experiments/reference (relative: run from the checkout's root): a dataset's name
    monkeypatch.chdir(REPO)
    code, _, err = run(capsys, str(logs / "ok.txt"), "--experiment", "malik-2018", "--platform", "p")
    assert (code, err) == (2, "error: experiment 'malik-2018' belongs to the study's own runs (a published dataset "
                              f"or the harness's): choose another name{NOTHING}")  # fmt: skip
    assert sha256(logs / "store.db") == before
    monkeypatch.chdir(logs)
    # run from another folder: the experiments/reference of the checkout this package is in
    code, _, err = run(capsys, "ok.txt", "--experiment", "hacksa-2019", "--platform", "p")
    assert (code, err) == (2, "error: experiment 'hacksa-2019' belongs to the study's own runs (a published dataset "
                              f"or the harness's): choose another name{NOTHING}")  # fmt: skip
    # a folder with experiments/reference of its own (another checkout's root): that one, not the package's
    (logs / "experiments" / "reference" / "ds9").mkdir(parents=True)
    assert run(capsys, "ok.txt", "--experiment", "ds9", "--platform", "p")[0] == 2
    code, out, err = run(capsys, "ok.txt", "--experiment", "hacksa-2019", "--platform", "p", "--dry-run")
    assert (code, err) == (0, "")
    # any other name is free, with that reference dir or one that does not exist
    for where in (ref, logs / "no-such-dir"):
        code, out, err = run(capsys, "ok.txt", "--experiment", "Notes3", "--platform", "p", "--reference-dir",
                             str(where), "--dry-run")  # fmt: skip
        assert (code, err) == (0, "") and out.splitlines()[-1].startswith("1 runs (0 failed) from 1 file(s) would")


def test_bad_options_logs_names_and_foreign_runs_are_refused(logs, capsys, empty_store):
    db = logs / "store.db"
    # runs 1-2 of the trace written by this command, 3-6 by another program (no imported_by tag)
    old = _old_runs({n: {} for n in range(1, 7)}, "theirs")
    for rec in old[2:]:
        del rec.tags["imported_by"]
    assert sync_experiment("theirs", old, empty_store)["created"] == 6
    before = sha256(db)
    assert run(capsys, "ok.txt", "--experiment", "mine", "--platform", "p", "--workers", "0") == (
        2,
        "",
        f"error: --workers 0 is not a number of GPUs >= 1{NOTHING}",
    )
    assert run(capsys, "ok.txt", "--experiment", "mine", "--platform", "p", "--workers", "-3")[2] == (
        f"error: --workers -3 is not a number of GPUs >= 1{NOTHING}"
    )
    # a file no parser knows: a SchemaError naming it, line 1
    (logs / "notes.log").write_text("some notes\nnothing a benchmark printed\n")
    assert run(capsys, "ok.txt", "notes.log", "--experiment", "mine", "--platform", "p") == (
        2, "", "error: notes.log:1: not a log format this importer knows (MLPerf training result log (:::MLLOG "
        "lines); NVIDIA DLLogger JSON lines (DLLL {...}); tf_cnn_benchmarks --benchmark_log_dir output "
        "(benchmark.log + metric.log); Horovod timeline (HOROVOD_TIMELINE Chrome trace JSON); Horovod synthetic "
        "benchmark output (Total img/sec on N GPU(s)); Keras "
        "multi-GPU benchmark log of rossumai/keras-multi-gpu (Samples/sec); tf_cnn_benchmarks text output (total "
        f"images/sec)){NOTHING}",
    )  # fmt: skip
    # a name the store refuses (check_records, before any write)
    assert run(capsys, "ok.txt", "--experiment", "a/b", "--platform", "p") == (
        2, "", "error: experiment name 'a/b': use letters, digits, spaces and . _ + = @ , ( ) - only, starting with "
        "a letter or digit, without '/' or '..' (it names the experiment's artifact folder beside the store)"
        f"{NOTHING}",
    )  # fmt: skip
    # another program's runs: 4 of the 6 (the command's own 2 are not counted), dry run or not
    for dry in ([], ["--dry-run"]):
        assert run(capsys, "ok.txt", "--experiment", "theirs", "--platform", "p", *dry) == (
            2, "", "error: experiment 'theirs' holds 4 run(s) that `python -m scalestudy.ingest logs` did not "
            f"write, whose owner's next import would delete these: choose another experiment{NOTHING}",
        )  # fmt: skip
    assert sha256(db) == before
    assert len(load_runs(empty_store)) == 6
    # --experiment is required: argparse's usage and error, exit 2
    with pytest.raises(SystemExit) as exit_:
        command.main(["ok.txt"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m scalestudy.ingest logs: error: the following arguments are required: --experiment"
    )


def test_usage_text(capsys, monkeypatch):
    """--help: the command's name, the first line of its docstring, every option's help; --reference-dir hidden."""
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as exit_:
        command.main(["--help"])
    assert exit_.value.code == 0
    indent = " " * 40
    assert capsys.readouterr().out.splitlines() == [
        "usage: python -m scalestudy.ingest logs [-h] --experiment EXPERIMENT [--replace] [--dry-run] "
        "[--platform PLATFORM]",
        f"{indent}[--device DEVICE] [--framework FRAMEWORK] [--data DATA] [--model MODEL]",
        f"{indent}[--workers WORKERS] [--citation CITATION] [--url URL]",
        f"{indent}PATH [PATH ...]",
        "",
        "python -m scalestudy.ingest logs PATH... --experiment NAME: benchmark logs -> published MLflow runs.",
        "",
        "positional arguments:",
        "  PATH                  log files or folders of logs",
        "",
        "options:",
        "  -h, --help            show this help message and exit",
        "  --experiment EXPERIMENT",
        "                        MLflow experiment the runs are added to",
        "  --replace             make the experiment hold exactly these logs' runs (the summary names those it "
        "removes)",
        "  --dry-run             print the runs that would be written; write nothing",
        "  --platform PLATFORM   machine or cluster the runs were made on, where neither the log nor its folder "
        "names it",
        "  --device DEVICE       GPU (V100, A100, M60...) or cpu, where the log does not name it",
        "  --framework FRAMEWORK",
        "                        tensorflow, pytorch, mxnet..., where the log does not say it",
        "  --data DATA           synthetic or real, where the log does not say it",
        "  --model MODEL         resnet50, vgg16...: the model of a Horovod timeline (which names none)",
        "  --workers WORKERS     number of GPUs, where the log does not say it (MLPerf, DLLogger)",
        "  --citation CITATION   where the logs come from (default: the experiment's name)",
        "  --url URL             where the logs can be found",
    ]


# ------------------------------------------------------------------------------------------------------------------
# Options, warnings, the progress bar


def test_device_framework_and_data_given_override_the_log(logs, capsys, empty_store):
    # tfjson's benchmark.log says tensorflow, synthetic data, a GeForce GTX 980 Ti (../logs/README.md)
    code, _, err = run(capsys, "tfjson", "--experiment", "mine", "--platform", "p", "--device", "V100",
                       "--framework", "pytorch", "--data", "real")  # fmt: skip
    assert (code, err) == (0, "")
    (row,) = load_runs(empty_store).to_dict("records")
    assert (row["platform"], row["device"], row["framework"], row["data"]) == ("p", "V100", "pytorch", "real")
    assert (row["log_framework"], row["log_data"]) == ("tensorflow", "synthetic")


def test_warnings_printed_once_each_in_order(logs, capsys):
    """The DellEMC C4140 result (v0.7) twice beside a copy of its system file whose accelerators_per_node (line 20)
    is changed from "4" to "four": each run carries the file's two warnings (the misspelled 'number of nodes' at
    line 6, then line 20's value); each is printed once, in the order the runs give them. The second log is the
    first plus a final newline (other bytes: not a duplicate)."""
    results = logs / "Sub" / "results" / "C4140" / "resnet"
    results.mkdir(parents=True)
    (logs / "Sub" / "systems").mkdir()
    text = (DELLEMC / "systems" / "C4140.json").read_text()
    assert text.count('"accelerators_per_node": "4"') == 1
    (logs / "Sub" / "systems" / "C4140.json").write_text(text.replace('"4"', '"four"'))
    shutil.copyfile(DELLEMC / "results" / "C4140" / "resnet" / "result_0.txt", results / "result_0.txt")
    (results / "result_1.txt").write_bytes((results / "result_0.txt").read_bytes() + b"\n")
    code, out, err = run(capsys, "Sub", "--experiment", "mine", "--workers", "4")
    system = logs.resolve() / "Sub" / "systems" / "C4140.json"
    assert (code, err) == (0, (
        f"warning: {system}:6: the system description spells 'number_of_nodes' as 'number of nodes': not read\n"
        f"warning: {system}:20: accelerators_per_node 'four' is not a whole number >= 1: not read\n"
    ))  # fmt: skip
    assert out == ("2 runs (0 failed) from 2 file(s) in experiment 'mine': 2 created, 0 updated, 0 unchanged, "
                   "0 removed, 0 duplicates\n")  # fmt: skip


def test_progress_bar_from_twenty_files_on_a_terminal(logs, capsys, monkeypatch):
    """ok.txt and copies of it: 19 files give no bar, 20 give tqdm's bar on stderr ('reading logs', counted in
    files), cleared when done (leave=False: no final newline); the rest of the output is the same."""
    (logs / "many").mkdir()
    for n in range(19):
        shutil.copyfile(logs / "ok.txt", logs / "many" / f"c{n:02}.txt")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run(capsys, "many", "--experiment", "mine", "--platform", "p", "--dry-run")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1].startswith("1 runs (0 failed) from 1 file(s) would be in experiment 'mine': "
                                           "1 created, 0 updated, 0 unchanged, 0 removed, 18 duplicates;")  # fmt: skip
    shutil.copyfile(logs / "ok.txt", logs / "many" / "c19.txt")
    code, out, err = run(capsys, "many", "--experiment", "mine", "--platform", "p", "--dry-run")
    assert code == 0 and "19 duplicates;" in out.splitlines()[-1]
    assert err.startswith("\rreading logs:   0%|          | 0/20 [00:00<?, ?file/s]")
    assert err.endswith("\r") and "\n" not in err  # the bar's last state wiped by blanks
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert run(capsys, "many", "--experiment", "mine", "--platform", "p", "--dry-run")[2] == ""


# ------------------------------------------------------------------------------------------------------------------
# The table and summary as functions (no store): the same files, a plan written by hand


def test_table_and_summary_functions_of_a_plan(logs):
    from scalestudy.ingest.logs import LogRecord, scan_logs
    from scalestudy.store import SyncPlan

    (logs / "copies").mkdir()
    for n in range(1, 8):
        shutil.copyfile(logs / "two.txt", logs / "copies" / f"c{n}.txt")
    found = scan_logs([Path("ok.txt"), Path("two.txt"), Path("tfjson"), Path("failed.txt"), Path("copies")],
                      LogOptions(source=user_source("mine"), platform="p"))  # fmt: skip
    keys = [rec.key for rec in found.records]
    # a plan as sync_runs gives it: a status per key (tfjson's left out: no status, an empty cell), removed runs'
    # tags (by log_path, else source_line, else import_key, else '?'), 2 incomplete runs deleted
    plan = SyncPlan(
        status={keys[0]: "unchanged", keys[1]: "repaired", keys[3]: "created"},
        removed=[{"log_path": "z.txt", "source_line": "a.txt:1"}, {"source_line": "b.txt:7", "import_key": "k1"},
                 {"import_key": "k2"}, {"log_path": "", "import_key": "k0"}, {}, {"log_path": "y.txt"}],
        repaired=2,
    )  # fmt: skip
    assert command._table(found, plan).split("\n") == [
        "file               format       model       workers  throughput (img/s)  status",
        "ok.txt#1           keras_mgpu   inception3  1        39.1                unchanged",
        "two.txt#1          keras_mgpu   inception3  2        49.0                repaired",
        "tfjson/metric.log  tf_cnn_json  resnet50    1        132.4",
        "failed.txt#1       keras_mgpu   inception3  6        -                   created (FAILED run)",
        *[f"copies/c{n}.txt                                                            duplicate of two.txt"
          for n in range(1, 8)],
    ]  # fmt: skip
    # counts: 1 created, 0 updated, 1 unchanged, 6 removed; repaired 2 + 1 (the status); 7 duplicates: 5 and 2 more;
    # removed, named z.txt, b.txt:7, k2, k0 (an empty log_path), ?, y.txt; sorted: ?, b.txt:7, k0, k2, y.txt, z.txt
    removed = "; removed: ?, b.txt:7, k0, k2, y.txt and 1 more"
    duplicates = ", ".join(f"copies/c{n}.txt = two.txt" for n in range(1, 6)) + " and 2 more"
    for dry, verb in ((True, "would be in"), (False, "in")):
        assert command._summary(found, plan, "my exp", dry) == (
            f"4 runs (1 failed) from 4 file(s) {verb} experiment 'my exp': 1 created, 0 updated, 1 unchanged, "
            f"6 removed, 7 duplicates, 3 incomplete runs repaired; duplicates (same text, not imported twice): "
            f"{duplicates}{removed}"
        )
    # nothing removed, repaired nor duplicated: the plain line
    plain = scan_logs([Path("tfjson")], LogOptions(source=user_source("mine"), platform="p"))
    assert command._summary(plain, SyncPlan(status={plain.records[0].key: "updated"}), "x", False) == (
        "1 runs (0 failed) from 1 file(s) in experiment 'x': 0 created, 1 updated, 0 unchanged, 0 removed, 0 duplicates"
    )
    # a record keyed by name (a reference dataset's raw log) has no log_path: its log_file names it; one with
    # neither, nor a log_format (made by hand), has empty cells
    named = scan_logs([Path("ok.txt")], LogOptions(source=user_source("mine"), platform="p",
                                                   key_prefix={Path("ok.txt"): "ok"}))  # fmt: skip
    bare = LogRecord("mine", "k#4", {"model": "m", "workers": 3}, {}, {}, where="w")
    named.records.append(bare)
    assert command._table(named, SyncPlan(status={"ok#1": "created"})).split("\n") == [
        "file      format      model       workers  throughput (img/s)  status",
        "ok.txt#1  keras_mgpu  inception3  1        39.1                created",
        "#4                    m           3        -",
    ]
    assert command._removed(SyncPlan()) == ""
    assert command._listed([]) == "" and command._listed(["a"]) == "a"
    assert command._listed(list("abcde")) == "a, b, c, d, e" and command._listed(list("abcdef")) == (
        "a, b, c, d, e and 1 more"
    )


def test_a_workers_note_is_added_to_the_warnings_a_parser_gave(logs, monkeypatch):
    from scalestudy.ingest.logs import WARNING_TAG, keras_mgpu, scan_logs

    parse = keras_mgpu.parse

    def warned(path, options):  # as a parser that warns about a file beside the log (the MLPerf one does)
        runs = parse(path, options)
        for run in runs:
            run.tags[WARNING_TAG] = "a file beside it: not read"
        return runs

    monkeypatch.setattr(keras_mgpu, "parse", warned)
    (run,) = scan_logs([logs / "two.txt"], LogOptions(source=user_source("mine"), platform="p", workers=1)).records
    note = f"{logs / 'two.txt'}: --workers 1 not used: the log says 2 GPUs"
    assert run.tags[WARNING_TAG] == f"a file beside it: not read | {note}"
