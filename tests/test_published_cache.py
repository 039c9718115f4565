"""The published build kept between sessions (tests/published.py): its key must change with anything the build
reads, and a changed module one of its stages loaded must make that stage run again, or a planted bug in an
importer would be tested against runs imported before it was planted; a kept build must come back whole, its
store's artifacts found in the folder it is copied to."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import published
import pytest
from mlflow import MlflowClient

from scalestudy.schema import RunRecord
from scalestudy.store import sync_experiment

ENV = {"SCALESTUDY_DATA_MIRROR": "/mirror", "MLFLOW_ENABLE_ASYNC_LOGGING": "false", "HOME": "/home/a", "TERM": "x"}


@pytest.fixture()
def repo(tmp_path):
    """A checkout holding one file in each of the build's inputs."""
    root = tmp_path / "repo"
    files = {"src/scalestudy/ingest/hacksa.py": "X = 1\n", "src/scalestudy/scaling/sizes.csv": "a,b\n",
             "conf/figure/figure-3.yaml": "name: f\n",
             "experiments/reference/hacksa-2019/source.yaml": "experiment: e\n", "tests/published.py": "# b\n",
             "pyproject.toml": "[project]\n", "requirements.lock": "mlflow==1\n"}  # fmt: skip
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_key_changes_with_each_input_of_the_build_and_nothing_else(repo, monkeypatch):
    base = published.inputs_digest(repo, ENV)
    assert len(base) == 20 and published.inputs_digest(repo, dict(ENV)) == base
    # not read by the build: bytecode, the session's own folders, other variables, files outside INPUTS
    (repo / "src/scalestudy/ingest/__pycache__").mkdir()
    (repo / "src/scalestudy/ingest/__pycache__/hacksa.cpython-311.pyc").write_bytes(b"\0")
    (repo / "tests/test_x.py").write_text("def test(): pass\n")
    (repo / "README.md").write_text("# r\n")
    session = {published.FOLDER: "/dev/shm/a", "SCALESTUDY_DATA_CACHE": "/dev/shm/b", "HOME": "/home/b"}
    assert published.inputs_digest(repo, {**ENV, **session, "PATH": "/bin"}) == base
    # nor a module's bytes (each stage records those it loaded: see the tests below)
    (repo / "src/scalestudy/ingest/hacksa.py").write_text("X = 2\n")
    assert published.inputs_digest(repo, ENV) == base
    # one byte of any other input file
    for path in sorted(p for p in repo.rglob("*") if p.is_file()):
        relative = path.relative_to(repo).as_posix()
        if "__pycache__" in relative or relative in ("tests/test_x.py", "README.md") or relative.endswith(".py"):
            continue
        text = path.read_text()
        path.write_text(text.replace("\n", " \n", 1))
        assert published.inputs_digest(repo, ENV) != base, relative
        path.write_text(text)
    assert published.inputs_digest(repo, ENV) == base
    # a new file, a renamed one (same bytes, another path), a new module, a renamed one
    (repo / "conf/figure/figure-4.yaml").write_text("name: g\n")
    assert published.inputs_digest(repo, ENV) != base
    (repo / "conf/figure/figure-4.yaml").unlink()
    (repo / "src/scalestudy/ingest/new.py").write_text("")
    assert published.inputs_digest(repo, ENV) != base
    (repo / "src/scalestudy/ingest/new.py").unlink()
    (repo / "src/scalestudy/ingest/hacksa.py").rename(repo / "src/scalestudy/ingest/other.py")
    assert published.inputs_digest(repo, ENV) != base
    (repo / "src/scalestudy/ingest/other.py").rename(repo / "src/scalestudy/ingest/hacksa.py")
    (repo / "conf/figure/figure-3.yaml").rename(repo / "conf/figure/figure-5.yaml")
    assert published.inputs_digest(repo, ENV) != base
    (repo / "conf/figure/figure-5.yaml").rename(repo / "conf/figure/figure-3.yaml")
    # the variables the build inherits
    for changed in ({"SCALESTUDY_DATA_MIRROR": "/other"}, {"MLFLOW_X": "1"}, {"PYTHONPATH": "mutants/src"},
                    {"TZ": "Asia/Tokyo"}, {"LANG": "de_DE.UTF-8"}, {"LC_ALL": "C"}):  # fmt: skip
        assert published.inputs_digest(repo, {**ENV, **changed}) != base, changed
    without = {k: v for k, v in ENV.items() if k != "MLFLOW_ENABLE_ASYNC_LOGGING"}
    assert published.inputs_digest(repo, without) != base
    # the packages installed
    assert "mlflow==3.17.2" in published.installed()
    other = [p.replace("mlflow==3.17.2", "mlflow==3.17.3") for p in published.installed()]
    monkeypatch.setattr(published, "installed", lambda: other)
    assert published.inputs_digest(repo, ENV) != base


def test_a_real_build_records_the_modules_each_stage_loaded(published_figures, published_folder, tmp_path):
    """The real inputs: a copy of the checkout's INPUTS gives the same key, and what the session's build recorded
    holds for it; one changed importer line makes both stages stale, one changed figure module the figures only."""
    for name in published.INPUTS:
        source = published.REPO / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tmp_path / name)
    assert published.inputs_digest(tmp_path) == published.inputs_digest()
    if not (published_folder / "store.json").exists():
        pytest.skip("the mutation scripts copy a prebuilt store: no import stage ran")
    store = json.loads((published_folder / "store.json").read_text())["sources"]
    figures = json.loads((published_folder / "figures.json").read_text())["sources"]
    importer, drawing = "src/scalestudy/ingest/hacksa.py", "src/scalestudy/paper/figures.py"
    assert {importer, "src/scalestudy/store/write.py", "src/scalestudy/__init__.py"} <= set(store)
    assert drawing not in store and set(store) < set(figures) and drawing in figures
    assert "src/scalestudy/ui/server.py" not in figures  # loaded by neither stage
    assert store[importer] == hashlib.sha256((published.REPO / importer).read_bytes()).hexdigest()
    assert published.changed(store, tmp_path) == [] and published.changed(figures, tmp_path) == []
    assert json.loads((published_folder / "figures.json").read_text())["commit"] == published.git_commit()
    for name, stale in ((importer, ([importer], [importer])), (drawing, ([], [drawing]))):
        text = (tmp_path / name).read_text()
        (tmp_path / name).write_text(text + "# one line more\n")
        assert (published.changed(store, tmp_path), published.changed(figures, tmp_path)) == stale, name
        assert published.inputs_digest(tmp_path) == published.inputs_digest()
        (tmp_path / name).write_text(text)


def fake_build(folder: Path, repo: Path, empty_store_file: Path, stdout: str = "figure-3") -> Path:
    """A build in FOLDER whose store stage loaded repo's a.py and whose figures stage also loaded b.py."""
    folder.mkdir(parents=True)
    shutil.copyfile(empty_store_file, folder / "store.db")
    (folder / "store-artifacts").mkdir()
    (folder / "paper" / "figures").mkdir(parents=True)
    sha = {name: hashlib.sha256((repo / name).read_bytes()).hexdigest() for name in ("a.py", "b.py")}
    ended = {"command": "c", "returncode": 0, "stderr": ""}
    published.record(folder, "store", {**ended, "stdout": "s", "sources": {"a.py": sha["a.py"]}})
    published.record(folder, "figures", {**ended, "stdout": stdout, "sources": sha, "commit": "unknown"})  # no git
    return folder


@pytest.fixture()
def kept(tmp_path, empty_store_file) -> tuple[Path, Path]:
    """A checkout of two modules, a.py and b.py, and the entry a build of it was kept as (see fake_build)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("A = 1\n")
    (repo / "b.py").write_text("B = 1\n")
    entry = tmp_path / "cache" / "key"
    published.keep(fake_build(tmp_path / "built", repo, empty_store_file), entry)
    return repo, entry


def test_a_kept_build_whose_modules_changed_comes_back_in_part_or_not_at_all(tmp_path, kept):
    repo, entry = kept

    def restored():
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        kept = published.restore(entry, folder, repo)
        return kept, sorted(p.name for p in folder.iterdir() if p.name != "store.db.lock")  # the store's lock

    assert restored() == ("figures", sorted(published.KEPT))
    (repo / "b.py").write_text("B = 2\n")  # loaded by the figures stage only: the store comes back, alone
    assert restored() == ("store", sorted(published.STORE_KEPT))
    (repo / "a.py").write_text("A = 2\n")  # loaded by the import: nothing comes back
    assert restored() == (None, [])
    (repo / "b.py").write_text("B = 1\n")
    assert restored() == (None, [])
    (repo / "a.py").write_text("A = 1\n")
    assert restored()[0] == "figures"
    figures = json.loads((entry / "figures.json").read_text())
    published.record(entry, "figures", {**figures, "commit": "0123abc"})  # built at another commit: drawn again
    assert restored() == ("store", sorted(published.STORE_KEPT))
    published.record(entry, "figures", figures)
    (repo / "a.py").unlink()  # gone
    assert restored() == (None, [])
    (repo / "a.py").write_text("A = 1\n")
    stages = json.loads((entry / "store.json").read_text())
    (entry / "store.json").write_text(json.dumps({k: v for k, v in stages.items() if k != "sources"}))
    assert restored() == (None, [])  # kept before stages recorded what they loaded


def test_a_build_on_a_kept_store_draws_the_figures_and_renews_the_entry(tmp_path, kept, monkeypatch):
    repo, entry = kept
    (repo / "b.py").write_text("B = 2\n")
    target = tmp_path / "session"
    target.mkdir()
    assert published.restore(entry, target, repo) == "store"
    calls = []

    def run_stage(folder, stage, loaded=None):  # the figures stage, as recorded by the real one
        calls.append((stage, loaded))
        (folder / "paper" / "figures").mkdir(parents=True)
        sources = {**loaded, "b.py": hashlib.sha256((repo / "b.py").read_bytes()).hexdigest()}
        result = {"command": stage, "returncode": 0, "stdout": "drawn again", "stderr": "", "sources": sources,
                  "commit": "unknown"}  # fmt: skip
        return published.record(folder, stage, result)

    monkeypatch.setattr(published, "run_stage", run_stage)
    published.build(target, entry)
    store = json.loads((target / "store.json").read_text())
    assert calls == [("figures", store["sources"])]  # the kept store was not imported again
    assert sorted(p.name for p in entry.parent.iterdir()) == ["key"]  # the old entry replaced, nothing left over
    assert published.wait(entry, "figures")["stdout"] == "drawn again"
    assert published.restore(entry, Path(tempfile.mkdtemp(dir=tmp_path)), repo) == "figures"
    # an import that failed: its error for the figures' waiters, nothing kept
    failed = tmp_path / "failed"
    failed.mkdir()
    ended = {"command": "i", "returncode": 2, "stdout": "", "stderr": "error: x", "sources": {}}
    monkeypatch.setattr(published, "run_stage", lambda folder, stage, _=None: published.record(folder, stage, ended))
    published.build(failed, tmp_path / "cache" / "other")
    assert json.loads((failed / "figures.json").read_text())["stderr"] == "error: x"
    assert sorted(p.name for p in entry.parent.iterdir()) == ["key"]


def run_with_artifact(tmp_path) -> RunRecord:
    (tmp_path / "log.txt").write_text("step 1\n")
    params = {"model": "resnet50", "framework": "tensorflow", "workers": 2, "device": "P100", "data": "synthetic",
              "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    return RunRecord(experiment="unit", key="a", params=params, metrics={"throughput_total": 190.0},
                     tags={"source": "published", "citation": "unit test"}, where="test:a",
                     artifacts={"log": str(tmp_path / "log.txt")})  # fmt: skip


def test_a_kept_build_comes_back_whole_with_its_artifacts_beside_it(tmp_path, empty_store_file, monkeypatch):
    built = tmp_path / "built"
    built.mkdir()
    shutil.copyfile(empty_store_file, built / "store.db")
    assert sync_experiment("unit", [run_with_artifact(tmp_path)], published.store_uri(built))["created"] == 1
    (built / "paper" / "figures").mkdir(parents=True)
    (built / "paper" / "figures" / "figure-3.json").write_text("{}")
    published.record(built, "store", {"command": "c", "returncode": 0, "stdout": "s", "stderr": "", "sources": {}})
    (built / "pid").write_text("1")
    cache = tmp_path / "cache"
    (cache / "older").mkdir(parents=True)  # a build kept for other inputs: dropped
    (cache / ".other.12").mkdir()  # another session's copy under way: left alone
    (cache / ".dead.13").mkdir()  # one left by a session killed two hours ago: dropped
    os.utime(cache / ".dead.13", (time.time() - 7200, time.time() - 7200))
    entry = cache / "abc"
    assert not published.restore(entry, tmp_path)  # nothing kept yet
    entry.mkdir()
    shutil.copyfile(built / "store.json", entry / "store.json")
    assert not published.restore(entry, tmp_path)  # no figures.json: not a build that ended
    assert not (tmp_path / "store.json").exists()
    shutil.rmtree(entry)

    ended = {"command": "f", "returncode": 0, "stdout": "figure-3", "stderr": "", "sources": {},
             "commit": published.git_commit(published.REPO)}  # fmt: skip
    published.record(built, "figures", ended)
    published.keep(built, entry)
    assert sorted(p.name for p in cache.iterdir()) == [".other.12", "abc"]
    assert sorted(p.name for p in entry.iterdir()) == sorted(published.KEPT)  # no pid, no lock
    shutil.rmtree(built)  # the session that built it is over

    folder = tmp_path / "restored"
    folder.mkdir()
    with monkeypatch.context() as patch:  # the entry dropped by another session half-way through the copy
        patch.setattr(shutil, "copytree", lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError(a[0])))
        assert not published.restore(entry, folder)
    assert list(folder.iterdir()) == []  # nothing half-copied: no store.json for a waiter to take as done
    assert published.restore(entry, folder) == "figures"
    assert published.wait(folder, "figures")["stdout"] == "figure-3"
    assert (folder / "paper" / "figures" / "figure-3.json").read_text() == "{}"
    client = MlflowClient(tracking_uri=published.store_uri(folder))
    run = client.search_runs([client.get_experiment_by_name("unit").experiment_id])[0]
    assert run.info.artifact_uri.startswith((folder / "store-artifacts").as_uri() + "/")
    assert [f.path for f in client.list_artifacts(run.info.run_id, "log")] == ["log/log.txt"]
    assert (folder / "store-artifacts").is_dir() and run.data.metrics == {"throughput_total": 190.0}
