"""Shared fixtures: a store with every published dataset imported once per test session. The helpers that tests
import live in tests/helpers.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import IMAGE_FACTS, default_mirror, require_raw_data, run_module

pytest_plugins = [
    "slurm_cluster",  # the `slurm_cluster` fixture: a real one-node Slurm (tests/slurm_cluster.py)
    "require_all",  # under `make test`, a skipped test fails (tests/require_all.py)
    "pytester",  # pytest's own fixture for running pytest on a test file written by a test
]


if not os.environ.get("SCALESTUDY_DATA_MIRROR") and default_mirror():
    os.environ["SCALESTUDY_DATA_MIRROR"] = str(default_mirror())


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


# A SQLite file holding the published runs imported by this same code, copied instead of importing again (set
# by scripts/mutation_check.py only).
PREBUILT_STORE = "SCALESTUDY_TEST_PUBLISHED_STORE"


def pytest_terminal_summary(terminalreporter):
    if IMAGE_FACTS:
        terminalreporter.section("container image")
        for line in IMAGE_FACTS:
            terminalreporter.write_line(line)


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


@pytest.fixture
def silent_origin():
    """A real TCP server on loopback that accepts connections and never answers (a hung download)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # accepted, read from never, answered never
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()
