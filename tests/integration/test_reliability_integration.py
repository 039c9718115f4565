"""The end-to-end tests of tests/test_reliability.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import REFERENCE, REPO, dataset_copy, free_port, mirror_copy, run_module
from test_reliability import build, one_line_error

from scalestudy.store import StoreError, load_runs, log_measured_run, relocate_artifacts

TF = "tf-benchmarks-2017"


TF_TARGETS = ("figure-3", "figure-4", "table-1")  # what the tf-benchmarks dataset alone draws


def ingest(uri: str, *datasets: str, reference: Path = REFERENCE, **kw) -> subprocess.CompletedProcess:
    return run_module("scalestudy.ingest", "--reference-dir", str(reference), *datasets, uri=uri, check=False, **kw)


def db(uri: str) -> Path:
    return Path(uri[len("sqlite:///") :])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sidecars(uri: str, out: Path) -> dict:
    """The built figures' and tables' JSON, with what differs between two stores of the same data replaced:
    run ids by the run's experiment and import key, and the git commit and the MLflow UI links (which
    carry the store's own experiment and run ids) dropped."""
    table = load_runs(uri)
    names = {r: f"{e}/{k}" for r, e, k in zip(table.run_id, table.experiment, table.import_key)}

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if k not in ("git_commit", "mlflow_ui")}
        if isinstance(value, list):
            return sorted((plain(v) for v in value), key=json.dumps)
        return names.get(value, value) if isinstance(value, str) else value

    return {p.name: plain(json.loads(p.read_text())) for p in sorted(out.rglob("*.json"))}


def one_run_per_key(uri: str) -> pd.DataFrame:
    table = load_runs(uri)
    assert not table.duplicated(["experiment", "import_key"]).any()
    return table


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    """The tf-benchmarks dataset imported once, cleanly, and what the builder makes of it."""
    folder = tmp_path_factory.mktemp("clean")
    uri = f"sqlite:///{folder / 'store.db'}"
    assert ingest(uri, TF).returncode == 0
    assert build(uri, folder / "paper", *TF_TARGETS).returncode == 0
    return {"uri": uri, "sidecars": sidecars(uri, folder / "paper"), "runs": len(load_runs(uri))}


@pytest.mark.parametrize(
    "writes", [1, 2, 3, 300], ids=["after-marking", "run-without-params", "run-without-hash", "mid-import"]
)
def test_an_import_killed_at_any_point_is_completed_by_the_next(clean, tmp_path, writes):
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    killed = ingest(uri, TF, env={"SCALESTUDY_KILL_AFTER_WRITES": str(writes)})
    assert killed.returncode == -signal.SIGKILL
    refused = build(uri, tmp_path / "paper", "figure-3")
    one_line_error(refused, TF, "interrupted", "make import")
    assert not (tmp_path / "paper" / "figures" / "figure-3.json").exists()

    again = ingest(uri, TF)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(one_run_per_key(uri)) == clean["runs"]
    assert build(uri, tmp_path / "paper", *TF_TARGETS).returncode == 0
    assert sidecars(uri, tmp_path / "paper") == clean["sidecars"]


def test_an_update_killed_between_writing_and_deleting_leaves_no_duplicate(clean, tmp_path):
    """A changed value: the new run is complete, the old one not yet deleted when the import dies."""
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    shutil.copy(db(clean["uri"]), db(uri))
    reference = tmp_path / "reference"
    csv = dataset_copy(reference, TF) / "tf_benchmarks_2017.csv"
    csv.write_text(
        csv.read_text().replace(
            "nvidia-dgx-1,P100,resnet50,synthetic,64,1,219,", "nvidia-dgx-1,P100,resnet50,synthetic,64,1,220,"
        )
    )
    # writes: mark the experiment (1), the new run: create, status, params, metrics and hashes (2-4), delete old (5)
    killed = ingest(uri, TF, reference=reference, env={"SCALESTUDY_KILL_AFTER_WRITES": "4"})
    assert killed.returncode == -signal.SIGKILL
    with pytest.raises(StoreError, match="interrupted"):
        load_runs(uri)
    assert ingest(uri, TF, reference=reference).returncode == 0
    table = one_run_per_key(uri).set_index("import_key")
    assert len(table) == clean["runs"]
    assert table.loc["nvidia-dgx-1/P100/resnet50/synthetic/64/1", "throughput_total"] == 220


def _start(module: str, *args: str, uri: str) -> subprocess.Popen:
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


@pytest.mark.parametrize("store", ["new", "existing"])
def test_concurrent_imports_and_builds(clean, tmp_path, store):
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    reference = tmp_path / "reference"
    dataset_copy(reference, TF)
    if store == "existing":  # an existing store, and a changed value for all four importers to apply
        shutil.copy(db(clean["uri"]), db(uri))
        csv = reference / TF / "tf_benchmarks_2017.csv"
        csv.write_text(
            csv.read_text().replace(",P100,resnet50,synthetic,64,1,219,", ",P100,resnet50,synthetic,64,1,220,")
        )
    importers = [_start("scalestudy.ingest", "--reference-dir", str(reference), TF, uri=uri) for _ in range(4)]
    deadline = time.monotonic() + 120
    while not db(uri).exists() and time.monotonic() < deadline:  # builders start once the store is there
        time.sleep(0.1)
    builders = [_start("scalestudy.paper", *TF_TARGETS, f"out_dir={tmp_path / f'paper{i}'}", uri=uri) for i in range(2)]
    for proc in importers + builders:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    table = one_run_per_key(uri)
    assert len(table) == clean["runs"]
    if store == "new":
        for i in range(2):
            assert sidecars(uri, tmp_path / f"paper{i}") == clean["sidecars"]
    else:
        assert table.set_index("import_key").loc["nvidia-dgx-1/P100/resnet50/synthetic/64/1", "throughput_total"] == 220


def _cut(path: Path, fraction: float) -> int:
    lines = path.read_text().splitlines(keepends=True)
    keep = int(len(lines) * fraction)
    path.write_text("".join(lines[:keep]))
    return keep


def _set_cell(path: Path, line: int, column: int, value: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    cells = lines[line - 1].rstrip("\n").split(",")
    cells[column] = value
    lines[line - 1] = ",".join(cells) + "\n"
    path.write_text("".join(lines))


def _write(path: Path, text: str, encoding: str = "utf-8") -> None:
    path.write_text(text, encoding=encoding)


TF_CSV = f"{TF}/tf_benchmarks_2017.csv"


MIRRORED = "mirror/hacksa-2019"  # beside the reference copy: the test's mirror of the raw files (conftest.mirror_copy)


CLAIMS = "horovod-docs/claims.csv"


# case: (what the error names, how the reference copy is broken)
BAD_INPUTS = {
    # a finished HackSA log cut short at a third, a half and near its end: not a FAILED run, an error
    # (the logs are fetched, not committed: cut in the mirror, each is refused by its SHA-256; the parser's own
    # errors on cut logs are tested in test_ingest_hacksa.py)
    "hacksa-cut-33%": ("2.err: SHA-256", lambda ref: _cut(ref.parent / MIRRORED / "logs/2.err", 0.33)),
    "hacksa-cut-50%": ("8.vgg_19.err: SHA-256", lambda ref: _cut(ref.parent / MIRRORED / "logs/8.vgg_19.err", 0.5)),
    "hacksa-cut-95%": ("16.inception_v4.err: SHA-256", lambda ref: _cut(
        ref.parent / MIRRORED / "logs/16.inception_v4.err", 0.95)),
    "throughput-inf": ("tf_benchmarks_2017.csv:3", lambda ref: _set_cell(ref / TF_CSV, 3, 6, "inf")),
    "throughput-1e999": ("tf_benchmarks_2017.csv:3", lambda ref: _set_cell(ref / TF_CSV, 3, 6, "1e999")),
    "throughput-0": ("tf_benchmarks_2017.csv:3", lambda ref: _set_cell(ref / TF_CSV, 3, 6, "0")),
    "gpus-0": ("tf_benchmarks_2017.csv:3", lambda ref: _set_cell(ref / TF_CSV, 3, 5, "0")),
    "binary-csv": ("claims.csv:1", lambda ref: (ref / CLAIMS).write_bytes(bytes(range(14, 256)) + b"\0")),
    "utf16-csv": ("claims.csv:1", lambda ref: _write(ref / CLAIMS, (REFERENCE / CLAIMS).read_text(), "utf-16")),
    "source-yaml-broken": ("keras-backends-2017/source.yaml:", lambda ref: _write(
        ref / "keras-backends-2017/source.yaml", "experiment: [x\n")),
    "source-yaml-a-list": ("horovod-docs/source.yaml:1", lambda ref: _write(
        ref / "horovod-docs/source.yaml", "- a\n- b\n")),
    "source-yaml-no-citation": ("horovod-docs/source.yaml", lambda ref: _write(
        ref / "horovod-docs/source.yaml", "experiment: horovod-docs\n")),
    # a repeated key in the LAST dataset: the earlier ones are fine, and still nothing is written
    "duplicate-key-in-a-later-dataset": ("claims.csv:", lambda ref: _write(
        ref / CLAIMS, (REFERENCE / CLAIMS).read_text() + (REFERENCE / CLAIMS).read_text().splitlines()[1] + "\n")),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_changes_nothing(store_copy, tmp_path, case):
    reference = tmp_path / "reference"
    shutil.copytree(REFERENCE, reference, copy_function=shutil.copyfile)
    mirror = mirror_copy(tmp_path, "hacksa-2019")  # tmp_path/mirror, beside the reference copy
    where, corrupt = BAD_INPUTS[case]
    corrupt(reference)
    before = digest(db(store_copy))
    env = {"SCALESTUDY_DATA_MIRROR": str(mirror), "SCALESTUDY_DATA_CACHE": str(tmp_path / "cache")}
    proc = ingest(store_copy, reference=reference, env=env)
    one_line_error(proc, where, "nothing was written")
    assert digest(db(store_copy)) == before


@pytest.mark.parametrize(
    "uri, importing, building",
    [
        ("garbage", "is not a store URI", "is not a store URI"),
        ("sqlite://relative.db", "sqlite:///relative/path.db", "sqlite:///relative/path.db"),
        ("sqlite:////proc/scalestudy/store.db", "cannot create its folder /proc/scalestudy", "does not exist"),
    ],
)
def test_a_store_that_cannot_be_used_is_one_line(tmp_path, uri, importing, building):
    one_line_error(ingest(uri, "horovod-docs"), importing)
    one_line_error(build(uri, tmp_path, "figure-3"), building)


def test_a_server_that_does_not_answer_fails_in_seconds(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    one_line_error(build(uri, tmp_path, "figure-3", env={"SCALESTUDY_HTTP_TIMEOUT": "3"}), uri, "does not answer")
    one_line_error(ingest(uri, "horovod-docs", env={"SCALESTUDY_HTTP_TIMEOUT": "3"}), uri, "does not answer")
    assert time.monotonic() - started < 60  # two processes, each failing within its 3 s, imports included


def _without_root_powers(module: str, *args: str, uri: str) -> subprocess.CompletedProcess:
    """`python -m module args` as root without CAP_DAC_OVERRIDE: file permissions bind it as they bind a user."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        pytest.skip("needs root and util-linux's setpriv to drop the power to ignore file permissions")
    cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--", sys.executable, "-m", module, *args]
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_a_read_only_store_refuses_writes_in_one_line_and_still_builds(published_store, tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    shutil.copy(db(published_store), folder / "store.db")
    os.chown(folder / "store.db", 65534, 65534)  # someone else's store: readable, not writable
    os.chmod(folder / "store.db", 0o644)
    os.chown(folder, 65534, 65534)
    uri = f"sqlite:///{folder / 'store.db'}"
    before = digest(folder / "store.db")
    proc = _without_root_powers("scalestudy.ingest", "--reference-dir", str(REFERENCE), "horovod-docs", uri=uri)
    one_line_error(proc, "store.db", "not writable")
    built = _without_root_powers("scalestudy.paper", "figure-3", f"out_dir={tmp_path / 'paper'}", uri=uri)
    assert built.returncode == 0, built.stderr[-2000:]
    assert digest(folder / "store.db") == before


@pytest.mark.parametrize("sig", ["KILL", "TERM"])
def test_a_build_stopped_before_renaming_leaves_the_old_figure_whole(published_store, tmp_path, sig):
    assert build(published_store, tmp_path, "figure-3").returncode == 0
    figures = tmp_path / "figures"
    before = {p.name: p.read_bytes() for p in figures.iterdir()}
    assert sorted(before) == ["figure-3.caption.tex", "figure-3.json", "figure-3.pdf", "figure-3.png"]
    env = {"SCALESTUDY_SIGNAL_BEFORE_RENAME": sig}
    stopped = build(published_store, tmp_path, "figure-3", "figure.plot.median=false", env=env)
    assert stopped.returncode in (-signal.SIGKILL, 128 + signal.SIGTERM), stopped.returncode
    after = {p.name: p.read_bytes() for p in figures.iterdir() if not p.name.startswith(".")}
    assert after == before  # nothing renamed: all four old files, whole
    leftovers = sorted(p.name for p in figures.iterdir() if p.name.startswith("."))
    if sig == "TERM":
        assert leftovers == []  # SIGTERM became an exit that removed them
    else:
        assert len(leftovers) == 4 and all(name.endswith(".tmp") for name in leftovers)
        assert build(published_store, tmp_path, "figure-3").returncode == 0  # removes what the dead build left
        assert not [p for p in figures.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "override, expected, status",
    [
        ("+figure.plot.height=abc", "plot.height='abc' is not a number", 2),  # refused by the schema, before the build
        ("figure.derive._target_=scalestudy.derive.nope", "derive: scalestudy.derive.nope", 1),
        ("+figure.derive.fn=nope", "unexpected keyword argument 'fn'", 1),
    ],
)
def test_a_bad_figure_setting_names_its_key(published_store, tmp_path, override, expected, status):
    proc = build(published_store, tmp_path, "figure-3", override)
    assert proc.returncode == status and "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "conf/figure/figure-3.yaml" in line and expected in line, line


def test_a_moved_store_writes_its_artifacts_beside_itself(store_copy, tmp_path):
    moved = tmp_path / "moved" / "store.db"
    moved.parent.mkdir()
    shutil.move(db(store_copy), moved)
    shutil.move(tmp_path / "store-artifacts", moved.parent / "store-artifacts")
    uri = f"sqlite:///{moved}"
    assert relocate_artifacts(uri) >= 4  # every experiment pointed at the old folder
    assert relocate_artifacts(uri) == 0
    from scalestudy.schema import RunRecord

    log = tmp_path / "job.log"
    log.write_text("a measured job's log\n")
    params = {"model": "resnet50", "framework": "tensorflow", "workers": 1, "device": "cpu", "data": "synthetic",
              "batch_per_worker": 4, "platform": "test-box"}  # fmt: skip
    record = RunRecord(experiment="hacksa-2019", key="moved", params=params, metrics={"throughput_total": 5.0},
                       tags={"source": "measured"}, artifacts={"logs": str(log)}, where="test")  # fmt: skip
    run_id = log_measured_run(record, uri)
    written = list((moved.parent / "store-artifacts").glob(f"*/{run_id}/artifacts/logs/job.log"))
    assert len(written) == 1 and written[0].read_text() == "a measured job's log\n"
    assert not (tmp_path / "store-artifacts").exists()  # nothing written where the store used to be


def test_the_network_file_system_lock_serialises_importers_too(clean, tmp_path):
    """SCALESTUDY_LOCK=soft: the lock used on NFS/GPFS (hard links, heartbeats), here on a local disk."""
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, SCALESTUDY_LOCK="soft")
    cmd = [sys.executable, "-m", "scalestudy.ingest", TF]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-2000:]
    assert len(one_run_per_key(uri)) == clean["runs"]
    assert (tmp_path / "store.db.lock.rw").is_dir()  # the soft lock's own files, not the local one's
