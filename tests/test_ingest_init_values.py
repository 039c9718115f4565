"""The importers' shared helpers (ingest/__init__.py), in-process: a file's text and its refusals, source.yaml, the
CSV reader's rows and line numbers, numbers, params, the tags and descriptions every published run carries. Inputs
are written in tmp_path (each test says what); the published datasets' own files where they serve."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import REFERENCE

from scalestudy.ingest import (
    REFERENCE_DIR,
    csv_params,
    csv_rows,
    experiment_description,
    number,
    published_tags,
    read_source,
    read_text,
    reference_dir,
    registry,
)
from scalestudy.schema import DESCRIPTION_TAG, SchemaError


def refusal(call, *args) -> str:
    with pytest.raises(SchemaError) as err:
        call(*args)
    return str(err.value)


def test_read_text(tmp_path):
    path = tmp_path / "run.log"
    path.write_bytes("first line\nsecond: ü\n".encode())
    assert read_text(path) == "first line\nsecond: ü\n"
    path.write_bytes(b"one\ntwo\nthr\0ee\n")  # a NUL on line 3
    assert refusal(read_text, path) == f"{path}:3: a NUL byte: a binary or UTF-16 file, not UTF-8 text"
    path.write_bytes(b"\0one\n")
    assert refusal(read_text, path) == f"{path}:1: a NUL byte: a binary or UTF-16 file, not UTF-8 text"
    path.write_bytes(b"\nsecond\nth\0ird\nfou\0rth\n")  # a first empty line; the first NUL, on line 3, is named
    assert refusal(read_text, path) == f"{path}:3: a NUL byte: a binary or UTF-16 file, not UTF-8 text"
    path.write_bytes(b"\nsecond\n\xe9t\xe9\n")
    assert refusal(read_text, path) == f"{path}:3: not UTF-8 text (byte 0xe9)"
    path.write_bytes(b"one\ntwo\n\xe9t\xe9\n")  # Latin-1 on line 3
    assert refusal(read_text, path) == f"{path}:3: not UTF-8 text (byte 0xe9)"
    assert refusal(read_text, tmp_path / "absent.log") == f"{tmp_path / 'absent.log'}: missing"
    assert refusal(read_text, tmp_path) == f"{tmp_path}: cannot be read: Is a directory"


def test_read_source(tmp_path):
    folder = tmp_path / "malik-2018"
    folder.mkdir()
    assert refusal(read_source, folder) == (
        f"{folder / 'source.yaml'}: missing (every reference dataset names its source there)"
    )
    shutil.copyfile(REFERENCE / "malik-2018" / "source.yaml", folder / "source.yaml")
    source = read_source(folder)
    assert source["experiment"] == "malik-2018" and source["folder"] == str(folder)
    assert source["dataset_dir"] == "experiments/reference/malik-2018"
    path = folder / "source.yaml"
    path.write_text("experiment: x\ncitation: [unclosed\none_run: y\n")
    # the parser stops at line 3, where the flow sequence of line 2 meets a new key
    assert refusal(read_source, folder) == f"{path}:3: not valid YAML: did not find expected ',' or ']'"
    # a control character: the reader's error has no line mark and no 'problem': the file and the error's own text
    path.write_text('experiment: x\ncitation: "a\x07b"\none_run: y\n')
    assert refusal(read_source, folder) == (
        f"{path}: not valid YAML: unacceptable character #x0007: control characters are not allowed\n"
        '  in "<unicode string>", position 26'
    )
    path.write_text("- a list\n")
    assert (
        refusal(read_source, folder)
        == f"{path}:1: expected 'key: value' lines (experiment, citation, url), got ['a list']"
    )
    for missing in ("experiment", "citation", "one_run"):
        keys = {"experiment": "x", "citation": "y", "one_run": "z", missing: "  "}
        path.write_text("".join(f"{k}: '{v}'\n" for k, v in keys.items()))
        assert refusal(read_source, folder) == f"{path}: key {missing!r} is missing or not a text"
    path.write_text("experiment: x\ncitation: y\none_run: 3\n")
    assert refusal(read_source, folder) == f"{path}: key 'one_run' is missing or not a text"


def test_read_source_reads_the_file_each_time_and_gives_each_caller_its_own_copy(tmp_path):
    """Parsed texts are kept (the MLPerf listing takes 60 ms): a changed file is read anew, and what one caller
    changes in its copy another caller does not see."""
    folder = tmp_path / "d"
    folder.mkdir()
    path = folder / "source.yaml"
    path.write_text("experiment: x\ncitation: y\none_run: z\nraw_files:\n  - {path: a, sha256: b}\n")
    first = read_source(folder)
    first["raw_files"][0]["path"] = "changed"
    first["raw_files"].append({})
    assert read_source(folder)["raw_files"] == [{"path": "a", "sha256": "b"}]
    path.write_text("experiment: w\ncitation: y\none_run: z\n")
    assert read_source(folder)["experiment"] == "w" and "raw_files" not in read_source(folder)
    path.write_text("experiment: x\ncitation: y\none_run: z\nraw_files:\n  - {path: a, sha256: b}\n")
    assert read_source(folder)["raw_files"] == [{"path": "a", "sha256": "b"}]


def test_csv_rows(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('a,b\n1, two \n\n"3,4",5\n')  # a blank line 3: skipped, the next row keeps its line 4
    assert list(csv_rows(path, ["a", "b"])) == [
        (f"{path}:2", {"a": "1", "b": "two"}),
        (f"{path}:4", {"a": "3,4", "b": "5"}),
    ]
    assert refusal(lambda: list(csv_rows(path, ["a", "c"]))) == f"{path}:1: header ['a', 'b'] is not ['a', 'c']"
    path.write_bytes(b'a,b\r\n"x\r\ny",2\r\n')  # Windows line ends, one inside a quoted cell: kept as written
    assert list(csv_rows(path, ["a", "b"])) == [(f"{path}:3", {"a": "x\r\ny", "b": "2"})]
    path.write_text("a,b\n1,2\n1,2,3\n")
    assert refusal(lambda: list(csv_rows(path, ["a", "b"]))) == f"{path}:3: 3 fields, expected 2 (a,b)"
    path.write_text("")
    assert refusal(lambda: list(csv_rows(path, ["a", "b"]))) == f"{path}:1: header None is not ['a', 'b']"


def test_number():
    assert number("2.5", "f.csv:2", "x") == 2.5 and number("0", "f.csv:2", "x") == 0.0
    assert number("7", "f.csv:2", "n", int) == 7 and isinstance(number("7", "f.csv:2", "n", int), int)
    assert refusal(number, "2.5", "f.csv:2", "n", int) == "f.csv:2: column 'n': '2.5' is not a number"
    assert refusal(number, "", "f.csv:2", "x") == "f.csv:2: column 'x': '' is not a number"
    for text in ("-1", "inf", "nan"):
        assert (
            refusal(number, text, "f.csv:3", "x") == f"f.csv:3: column 'x': {text!r} is not a finite measurement >= 0"
        )


def test_csv_params():
    row = {"m": "ResNet50", "n": "8", "gpu": "P100"}
    params = csv_params(row, "f.csv:2", {"model": "m", "workers": "n", "device": "gpu"}, framework="tensorflow")
    assert params == {"framework": "tensorflow", "model": "resnet50", "workers": 8, "device": "P100"}
    assert type(params["workers"]) is int  # MLflow keeps params as text: '8', never '8.0'
    assert refusal(csv_params, {**row, "n": "eight"}, "f.csv:2", {"workers": "n"}) == (
        "f.csv:2: column 'n': 'eight' is not a number"
    )
    assert refusal(csv_params, {**row, "m": "lenet"}, "f.csv:2", {"model": "m"}).startswith(
        "f.csv:2: unknown model name 'lenet' (known: "
    )


def test_published_tags_and_description(tmp_path):
    source = read_source(REFERENCE / "tf-benchmarks-2017")
    where = f"{REFERENCE / 'tf-benchmarks-2017' / 'tf_benchmarks_2017.csv'}:7"
    tags = published_tags(source, where)
    assert tags == {
        "source": "published",
        "citation": source["citation"],
        "dataset": "tf-benchmarks-2017",
        "source_url": source["url"],
        "source_line": "tf_benchmarks_2017.csv:7",
        DESCRIPTION_TAG: "Published measurement, read from "
        "`experiments/reference/tf-benchmarks-2017/tf_benchmarks_2017.csv` "
        f"line 7 by `python -m scalestudy.ingest tf-benchmarks-2017`.\n\nSource: {source['citation']}",
    }
    # a copy of the folder elsewhere names the file as the repository holds it, all the same
    copy = tmp_path / "tf-benchmarks-2017"
    shutil.copytree(REFERENCE / "tf-benchmarks-2017", copy)
    tags = published_tags(read_source(copy), f"{copy / 'tf_benchmarks_2017.csv'}:7")
    assert "`experiments/reference/tf-benchmarks-2017/tf_benchmarks_2017.csv` line 7" in tags[DESCRIPTION_TAG]
    # a raw file read from the cache names its path in the dataset (raw_read_at); one outside it, its name alone
    raw = tmp_path / "cache" / "1.err"
    raw.parent.mkdir()
    raw.write_text("x\n")
    fetched = {**source, "url": "", "raw_read_at": {str(raw.resolve()): "logs/1.err"}}
    tags = published_tags(fetched, f"{raw}:23")
    assert tags["source_url"] == "" and tags["source_line"] == "1.err:23"
    assert "`experiments/reference/tf-benchmarks-2017/logs/1.err` line 23 by" in tags[DESCRIPTION_TAG]
    # a raw file in the cache folder (raw_dir) without a read_at entry: its path under raw_dir
    tags = published_tags({**source, "raw_dir": str(raw.parent)}, f"{raw}:23")
    assert "`experiments/reference/tf-benchmarks-2017/1.err` line 23 by" in tags[DESCRIPTION_TAG]
    # a folder name with a colon: the line is what follows the last one
    odd = tmp_path / "run:1" / "x.csv"
    tags = published_tags({**source, "raw_dir": None}, f"{odd}:2")
    assert tags["source_line"] == "x.csv:2" and "read from `x.csv` line 2 by" in tags[DESCRIPTION_TAG]
    tags = published_tags({**source, "raw_dir": None}, f"{tmp_path / 'elsewhere.csv'}:2")
    assert "read from `elsewhere.csv` line 2 by" in tags[DESCRIPTION_TAG]
    assert experiment_description(source, 12, ["figure-3", "table-2"]) == (
        f"Published measurements: {source['citation']} ({source['url']}).\n\n"
        f"- One run: {' '.join(source['one_run'].split())}; 12 runs. Each run's description names the file and "
        "line it was read from.\n"
        "- Data: `experiments/reference/tf-benchmarks-2017/` (its README.md says how it is read), imported by "
        "`python -m scalestudy.ingest tf-benchmarks-2017` (tag source=published).\n"
        "- Used by: figure-3, table-2."
    )
    assert experiment_description({**source, "url": ""}, 1, []).startswith(
        f"Published measurements: {source['citation']}.\n\n"
    )
    assert experiment_description(source, 1, []).endswith("- Used by: no figure or table yet.")


def test_the_registry_maps_each_dataset_folder_to_its_reader():
    from scalestudy.ingest import (
        hacksa,
        horovod_docs,
        horovod_timelines,
        keras_backends,
        keras_multi_gpu,
        malik,
        mlperf_training,
        tf_benchmarks,
    )

    assert registry() == {
        "tf-benchmarks-2017": tf_benchmarks.read,
        "keras-backends-2017": keras_backends.read,
        "hacksa-2019": hacksa.read,
        "horovod-docs": horovod_docs.read,
        "malik-2018": malik.read,
        "keras-multi-gpu-2017": keras_multi_gpu.read,
        "horovod-timelines-2019": horovod_timelines.read,
        "mlperf-training-resnet": mlperf_training.read,
    }
    # every dataset folder (one with a source.yaml) has its importer
    assert sorted(registry()) == sorted(p.name for p in REFERENCE.iterdir() if (p / "source.yaml").is_file())


def test_a_raw_file_read_from_the_mirror_is_named_by_its_dataset_path(tmp_path, monkeypatch):
    # a cache that cannot be written (its path is a file): the mirror's copy is read, and the run's description
    # names the file by its path in the dataset (source['raw_read_at']), not by where it was read
    from helpers import require_raw_data

    from scalestudy.ingest import fetched_raw_files, hacksa

    require_raw_data()
    (tmp_path / "cache").write_text("not a folder\n")
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    folder = REFERENCE / "hacksa-2019"
    files, source = fetched_raw_files(folder, read_source(folder))
    assert files["logs/1.err"].parent.parent.name == "hacksa-2019" and not str(files["logs/1.err"]).startswith(
        str(tmp_path)
    )
    assert source["raw_read_at"][str(files["logs/1.err"].resolve())] == "logs/1.err"
    rec = hacksa.read_log(files["logs/1.err"], source)
    assert rec.tags[DESCRIPTION_TAG].startswith(
        "Published measurement, read from `experiments/reference/hacksa-2019/logs/1.err` line 23 by "
    )


def test_the_reference_datasets_from_a_checkouts_root_are_the_relative_folder(tmp_path, monkeypatch):
    (tmp_path / "experiments" / "reference").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert reference_dir() == Path("experiments/reference") == REFERENCE_DIR


def test_the_reference_datasets_from_another_folder_are_the_packages_own_checkouts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no experiments/reference here
    found = reference_dir()
    assert found.is_absolute() and found.parts[-2:] == ("experiments", "reference")
    assert (found / "tf-benchmarks-2017").is_dir() and tmp_path not in found.parents
