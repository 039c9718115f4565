"""`python -m scalestudy.ingest` end to end on a temporary SQLite store: idempotent, updates one changed run,
and writes nothing when a file is malformed.

One store is imported once per module (an import costs seconds); tests that write to it work on a copy.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import mirror_copy, require_raw_data

from scalestudy.ingest.__main__ import main
from scalestudy.store import artifact_root, load_runs, load_series

REFERENCE = Path(__file__).resolve().parents[1] / "experiments" / "reference"
DATASETS = ["tf-benchmarks-2017", "keras-backends-2017", "hacksa-2019", "horovod-docs", "malik-2018",
            "keras-multi-gpu-2017", "horovod-timelines-2019", "mlperf-training-resnet"]  # fmt: skip
COUNTS = {"tf-benchmarks-2017": 207, "keras-backends-2017": 29, "hacksa-2019": 16, "horovod-docs": 3, "malik-2018": 3,
          "keras-multi-gpu-2017": 152, "horovod-timelines-2019": 2, "mlperf-training-resnet": 330}  # fmt: skip


def ids(table) -> dict[tuple[str, str], str]:
    """(experiment, import_key) -> run_id."""
    assert not table.duplicated(["experiment", "import_key"]).any()
    return {(e, k): r for e, k, r in zip(table["experiment"], table["import_key"], table["run_id"])}


@pytest.fixture(scope="module")
def store(published_store, tmp_path_factory):
    """A copy of the reference data and of the session's store of every dataset (conftest.published_store:
    `python -m scalestudy.ingest`, imported once per session; where the data were read from does not change a
    run, so importing this copy of them into it changes nothing, as test_second_import_changes_nothing checks).

    The store lives in memory-backed /dev/shm where there is one: SQLite syncs every MLflow write to disk,
    and on a busy disk that doubles the time of the tests that import again.
    """
    require_raw_data()
    root = tmp_path_factory.mktemp("ingest")
    reference = root / "reference"
    shutil.copytree(REFERENCE, reference, copy_function=shutil.copyfile)
    shm = Path("/dev/shm")
    published = Path(published_store[len("sqlite:///") :])
    with tempfile.TemporaryDirectory(prefix="scalestudy-ingest-", dir=shm if shm.is_dir() else root) as tmp:
        db = Path(tmp) / "store" / "store.db"
        db.parent.mkdir()
        shutil.copyfile(published, db)
        if (published.parent / "store-artifacts").is_dir():
            shutil.copytree(published.parent / "store-artifacts", db.parent / "store-artifacts")
        uri = f"sqlite:///{db}"
        table = load_runs(uri)
        yield {"root": root, "reference": reference, "db": db, "uri": uri, "runs": table}


@pytest.fixture
def scratch(store, tmp_path, monkeypatch):
    """A private copy of the imported store (and of the reference data) that a test may change."""
    db = tmp_path / "store" / "store.db"
    db.parent.mkdir()
    shutil.copyfile(store["db"], db)
    reference = tmp_path / "reference"
    shutil.copytree(store["reference"], reference)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    return {"db": db, "reference": reference}


def test_import_all(store):
    runs = store["runs"]
    assert len(runs) == 207 + 29 + 16 + 3 + 3 + 152 + 2 + 330
    assert runs.groupby("experiment").size().to_dict() == COUNTS
    assert (runs["source"] == "published").all()
    assert runs["citation"].notna().all() and (runs["citation"].str.len() > 0).all()
    assert runs["source_line"].notna().all()
    ids(runs)  # one run per (experiment, key)

    hacksa = runs[runs["experiment"] == "hacksa-2019"].set_index("import_key")
    failed = hacksa[hacksa["status"] == "FAILED"]
    assert sorted(failed.index) == ["16.err", "4.err"]
    assert failed["failure_reason"].str.contains("DUE TO TIME LIMIT").all()
    assert hacksa.loc["1.err", "time_init_s"] == pytest.approx(68.217699)
    assert hacksa.loc["1.err", "throughput_per_worker"] == pytest.approx(201.49380583255777)
    assert pd_isna(hacksa.loc["16.inception_v4.err", "throughput_total"])
    assert hacksa.loc["16.inception_v4.err", "status"] == "FINISHED"

    series = load_series(hacksa["run_id"], ["step_throughput_total"], uri=store["uri"])
    key_of = dict(zip(hacksa["run_id"], hacksa.index))
    lengths = {key_of[run_id]: n for run_id, n in series.groupby("run_id").size().items()}
    assert lengths["1.err"] == 18 and lengths["1.vgg_19.err"] == 48 and lengths["32.vgg_19.err"] == 1
    assert "4.err" not in lengths and "16.inception_v4.err" not in lengths
    one = series[series["run_id"] == hacksa.loc["1.err", "run_id"]]
    assert one["step"].tolist() == list(range(21, 192, 10))
    assert one["timestamp_ms"].is_monotonic_increasing
    assert one["value"].iloc[0] == pytest.approx(203.70368155636982)

    keras = runs[runs["experiment"] == "keras-backends-2017"].set_index("import_key")
    assert keras.loc["resnet50/reduce-randomization/mxnet/16", "time_per_epoch_s"] == 304.02
    assert (artifact_root(store["uri"]) / "hacksa-2019").is_dir()  # the raw logs were attached


def test_descriptions_name_the_source_and_the_line(store):
    """MLflow's UI shows each experiment's and each run's description (the mlflow.note.content tag)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store["uri"])
    text = client.get_experiment_by_name("tf-benchmarks-2017").tags["mlflow.note.content"]
    assert text.startswith("Published measurements: TensorFlow documentation, Benchmarks page")
    assert "- One run: one row of tf_benchmarks_2017.csv" in text and "; 207 runs." in text
    # from conf/figure and conf/table
    assert "- Used by: figure-3, figure-4, figure-7, figure-10, table-1, table-4, table-7." in text
    hacksa = client.get_experiment_by_name("hacksa-2019").tags["mlflow.note.content"]
    assert "Used by: figure-1, figure-2, figure-5, figure-7, figure-10, table-3, table-4, table-7." in hacksa
    runs = store["runs"].set_index(["experiment", "import_key"])
    run = client.get_run(runs.loc[("hacksa-2019", "1.err"), "run_id"])
    assert run.data.tags["mlflow.note.content"].startswith(
        "Published measurement, read from `experiments/reference/hacksa-2019/logs/1.err` line 23 by "
        "`python -m scalestudy.ingest hacksa-2019`."
    )
    assert run.data.tags["source_line"] == "1.err:23"


def pd_isna(value) -> bool:
    return value != value or value is None


def test_second_import_changes_nothing(store, scratch, capsys):
    assert main(["--reference-dir", str(scratch["reference"])]) == 0  # all datasets, the default
    out, err = capsys.readouterr()
    assert out.count("0 created, 0 updated") == len(DATASETS) and "0 deleted" in out
    assert "mlperf-training-resnet: 330 runs" in out and "330 unchanged" in out
    # the MLPerf logs the mirror lacks are named (their git blob ids are in source.yaml)
    assert "7 logs absent" in err and "v1.0 NVIDIA dgxa100_n310_ngc21.05_mxnet" in err
    assert "description updated" not in out  # nor were the experiments' descriptions written again
    assert ids(load_runs()) == ids(store["runs"])
    # stderr is no terminal here: no progress bar (tqdm printed a line at its start and one at its end)
    assert "%|" not in err and "it/s" not in err and "log/s" not in err


def test_progress_is_one_bar_on_a_terminal_and_none_elsewhere(monkeypatch):
    import io

    from tqdm import tqdm

    from scalestudy import cli

    items = ["a", "b"]
    assert cli.progress(items, "writing", "dataset") is items  # capsys's stderr is no terminal

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    bar = cli.progress(items, "writing", "dataset")
    assert isinstance(bar, tqdm) and list(bar) == items and bar.desc == "writing" and not bar.leave


def test_changed_csv_value_updates_exactly_that_run(store, scratch):
    csv = scratch["reference"] / "tf-benchmarks-2017" / "tf_benchmarks_2017.csv"
    lines = csv.read_text().splitlines(keepends=True)
    assert lines[2] == "nvidia-dgx-1,P100,resnet50,synthetic,64,1,219,parameter_server (cpu)\n"
    lines[2] = lines[2].replace(",219,", ",220,")
    csv.write_text("".join(lines))
    assert main(["--reference-dir", str(scratch["reference"]), "tf-benchmarks-2017"]) == 0
    after = load_runs()
    before_ids, after_ids = ids(store["runs"]), ids(after)
    assert len(after) == len(store["runs"])
    changed = {k for k in before_ids if before_ids[k] != after_ids.get(k)}
    key = ("tf-benchmarks-2017", "nvidia-dgx-1/P100/resnet50/synthetic/64/1")
    assert changed == {key}
    row = after[after["run_id"] == after_ids[key]].iloc[0]
    assert row["throughput_total"] == 220


@pytest.mark.parametrize(
    "dataset, corrupt, where",
    [
        (
            "tf-benchmarks-2017",
            lambda folder, mirror: _edit(folder / "tf_benchmarks_2017.csv", 10, lambda s: s.replace(",", ";", 2)),
            "tf_benchmarks_2017.csv:10",
        ),
        # a raw log (fetched, not committed) cut in the middle of line 76, its first 'Benchmark metric' line, in
        # the mirror: refused by its SHA-256 before any parser reads it (the parser's own file:line errors on cut
        # logs are tested in test_ingest_hacksa.py)
        (
            "hacksa-2019",
            lambda folder, mirror: _edit(
                mirror / "hacksa-2019" / "logs" / "2.vgg_19.err", 76, lambda s: s[: len(s) // 2], last=True
            ),
            "hacksa-2019/logs/2.vgg_19.err: SHA-256",
        ),
    ],
)
def test_malformed_file_writes_nothing(store, scratch, capsys, tmp_path, monkeypatch, dataset, corrupt, where):
    mirror = mirror_copy(tmp_path, "hacksa-2019")
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))  # empty: the mirror is read
    corrupt(scratch["reference"] / dataset, mirror)
    assert main(["--reference-dir", str(scratch["reference"]), *DATASETS]) == 2
    err = capsys.readouterr().err
    assert where in err
    assert ids(load_runs()) == ids(store["runs"])


def _edit(path: Path, line: int, change, last: bool = False) -> None:
    """Change 1-based `line` of a file; with last=True the file ends there (a log cut off mid-line)."""
    lines = path.read_text().splitlines(keepends=True)
    if last:
        assert "Benchmark metric" in lines[line - 1]
    lines[line - 1] = change(lines[line - 1])
    path.write_text("".join(lines[:line] if last else lines))


def test_tf_benchmarks_malformed_row_names_file_and_line(tmp_path):
    from scalestudy.ingest import tf_benchmarks
    from scalestudy.schema import SchemaError

    folder = tmp_path / "tf-benchmarks-2017"
    shutil.copytree(REFERENCE / "tf-benchmarks-2017", folder, copy_function=shutil.copyfile)
    assert len(tf_benchmarks.read(folder)) == 207
    _edit(folder / "tf_benchmarks_2017.csv", 10, lambda s: s.replace(",5658,", ",5658,extra,"))
    with pytest.raises(SchemaError, match=r"tf_benchmarks_2017\.csv:10: 9 fields, expected 8"):
        tf_benchmarks.read(folder)
    _edit(folder / "tf_benchmarks_2017.csv", 10, lambda s: s.replace(",5658,extra,", ",fast,"))
    with pytest.raises(SchemaError, match=r"tf_benchmarks_2017\.csv:10: column 'images_per_sec': 'fast' is not a"):
        tf_benchmarks.read(folder)
