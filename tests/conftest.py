"""Shared fixtures: a store with every published dataset imported once per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = [
    "slurm_cluster",  # the `slurm_cluster` fixture: a real one-node Slurm (tests/slurm_cluster.py)
    "require_all",  # under `make test`, a skipped test fails (tests/require_all.py)
    "pytester",  # pytest's own fixture for running pytest on a test file written by a test
]


REFERENCE = REPO / "experiments" / "reference"
# Third-party raw files (the HackSA logs...) are not committed: the importers fetch them into a cache, here from
# the mirror beside the checkout (../shared/reference, laid out as <dataset>/<path>), as the Makefile and CI do.
# Without that mirror, the user's own cache serves as one: `make test` fills it first (its import fetches every
# listed raw file from its URL), and it has the mirror's layout; every copy is checked by its SHA-256 either way.
SHARED_REFERENCE = REPO.parent / "shared" / "reference"


def _default_mirror() -> Path | None:
    from scalestudy.ingest.fetch import cache_dir

    return next((p for p in (SHARED_REFERENCE, cache_dir()) if p.is_dir()), None)


if not os.environ.get("SCALESTUDY_DATA_MIRROR") and _default_mirror():
    os.environ["SCALESTUDY_DATA_MIRROR"] = str(_default_mirror())


def have_raw_data() -> bool:
    mirror = os.environ.get("SCALESTUDY_DATA_MIRROR")
    return bool(mirror) and Path(mirror).is_dir()


def require_raw_data() -> None:
    """Skip, saying why, where the third-party raw files cannot be had (no mirror; tests have no network)."""
    if not have_raw_data():
        mirror = os.environ.get("SCALESTUDY_DATA_MIRROR") or f"{SHARED_REFERENCE} (SCALESTUDY_DATA_MIRROR unset)"
        pytest.skip(f"no mirror of the third-party raw files: {mirror} is absent, and the tests run without network")


@pytest.fixture(scope="session", autouse=True)
def data_cache(tmp_path_factory):
    """The tests' own cache of fetched raw files (filled from the mirror), not the user's ~/.cache/scalestudy."""
    if os.environ.get("SCALESTUDY_DATA_CACHE"):
        yield Path(os.environ["SCALESTUDY_DATA_CACHE"])
        return
    with pytest.MonkeyPatch.context() as mp:
        cache = tmp_path_factory.mktemp("data-cache")
        mp.setenv("SCALESTUDY_DATA_CACHE", str(cache))
        yield cache


def raw_dir(name: str) -> Path:
    """The folder holding dataset `name`'s raw files at their paths, fetched (from the mirror) and verified."""
    from scalestudy.ingest import fetched_raw_files, read_source

    require_raw_data()
    _, source = fetched_raw_files(REFERENCE / name, read_source(REFERENCE / name))
    return Path(source["raw_dir"])


# A SQLite file holding the published runs imported by this same code, copied instead of importing again (set
# by scripts/mutation_check.py only).
PREBUILT_STORE = "SCALESTUDY_TEST_PUBLISHED_STORE"

# Lines for the end of the test log: the image's size and build time (tests/test_image.py appends them).
IMAGE_FACTS: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if IMAGE_FACTS:
        terminalreporter.section("container image")
        for line in IMAGE_FACTS:
            terminalreporter.write_line(line)


def dataset_copy(tmp_path: Path, name: str) -> Path:
    """A writable copy of the published dataset folder experiments/reference/<name>, with its raw files (fetched,
    not committed) at their paths in it: a test may edit them and parse the copy."""
    dest = tmp_path / name
    shutil.copytree(REFERENCE / name, dest, copy_function=shutil.copyfile)
    from scalestudy.ingest import read_source
    from scalestudy.ingest.fetch import raw_files

    listed = raw_files(read_source(dest), dest)
    if listed:
        fetched = raw_dir(name)
        for raw in listed:
            (dest / raw.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fetched / raw.path, dest / raw.path)
    return dest


def mirror_copy(tmp_path: Path, *datasets: str) -> Path:
    """A mirror whose `datasets` are writable copies (to corrupt) and whose other datasets link to the real one."""
    require_raw_data()
    real = Path(os.environ["SCALESTUDY_DATA_MIRROR"])
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for entry in real.iterdir():
        if entry.name in datasets:
            shutil.copytree(entry, mirror / entry.name, copy_function=shutil.copyfile)
            for path in (mirror / entry.name).rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)  # the shared mirror is read-only
            (mirror / entry.name).chmod(0o755)
        else:
            (mirror / entry.name).symlink_to(entry)
    return mirror


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_module(
    module: str, *args: str, uri: str, cwd: Path = REPO, check: bool = True, env: dict | None = None, **popen
) -> subprocess.CompletedProcess:
    """Run `python -m module args` as a user would, against the store `uri` (`env`: more variables)."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, **(env or {}))
    cmd = [sys.executable, "-m", module, *args]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **popen)
    if check and proc.returncode != 0:
        raise AssertionError(f"python -m {module} {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def published_store(tmp_path_factory) -> str:
    """URI of a SQLite store holding every published run (imported once per session; tests must not modify it).

    In memory-backed /dev/shm where there is one: SQLite syncs every MLflow write, which on a busy disk
    doubles the import's time."""
    require_raw_data()
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="scalestudy-published-", dir=shm))
    else:
        folder = tmp_path_factory.mktemp("published-store")
    uri = f"sqlite:///{folder / 'store.db'}"
    try:
        prebuilt = os.environ.get(PREBUILT_STORE)
        if prebuilt:  # scripts/mutation_check.py: one import for all mutants that leave the importers alone
            shutil.copyfile(prebuilt, folder / "store.db")
            if (Path(prebuilt).parent / "store-artifacts").is_dir():
                shutil.copytree(Path(prebuilt).parent / "store-artifacts", folder / "store-artifacts")
        else:
            run_module("scalestudy.ingest", uri=uri)
        yield uri
    finally:
        if folder.is_relative_to(shm):  # tmp_path_factory cleans its own folders, not /dev/shm
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def published_figures(published_store, tmp_path_factory) -> dict:
    """Every figure built once per session from the published store (`python -m scalestudy.paper figures`, one
    query): {"dir": the figures folder, "stdout", "stderr"}. Tests read it; a test that writes copies it."""
    out = tmp_path_factory.mktemp("published-paper")
    proc = run_module("scalestudy.paper", "figures", f"out_dir={out}", uri=published_store)
    return {"dir": out / "figures", "stdout": proc.stdout, "stderr": proc.stderr}


def sidecar(figures: dict, name: str) -> dict:
    """The JSON sidecar of figure `name` in a `published_figures` build."""
    import json

    return json.loads((figures["dir"] / f"{name}.json").read_text())


@pytest.fixture()
def store_copy(published_store, tmp_path) -> str:
    """A private copy of the published store, for tests that write to it."""
    src = Path(published_store[len("sqlite:///") :])
    dst = tmp_path / "store.db"
    shutil.copy(src, dst)
    if (src.parent / "store-artifacts").exists():
        shutil.copytree(src.parent / "store-artifacts", tmp_path / "store-artifacts")
    return f"sqlite:///{dst}"


@pytest.fixture(scope="session")
def empty_store_file(tmp_path_factory) -> Path:
    """A new MLflow SQLite store with its tables made, once per session: creating them (MLflow's migrations)
    costs about a second of CPU, which a test that needs an empty store saves by copying this file."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("empty-store") / "store.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture()
def empty_store(empty_store_file, tmp_path) -> str:
    """URI of a private, empty MLflow store (a copy of `empty_store_file`) in this test's folder."""
    shutil.copyfile(empty_store_file, tmp_path / "store.db")
    return f"sqlite:///{tmp_path / 'store.db'}"
