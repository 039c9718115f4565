"""Shared fixtures: a store with every published dataset imported once per test session. The helpers that tests
import live in tests/helpers.py."""

from __future__ import annotations

import atexit
import gc
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import published
import pytest
from helpers import IMAGE_FACTS, default_mirror, have_raw_data, require_raw_data

pytest_plugins = [
    "slurm_cluster",  # the `slurm_cluster` fixture: a real one-node Slurm (tests/slurm_cluster.py)
    "image_fixtures",  # `docker_env`, `cpu_image`, `cpu_sif`: the CPU image and its SIF (tests/image_fixtures.py)
    "require_all",  # under `make test`, a skipped test fails (tests/require_all.py)
    "pytester",  # pytest's own fixture for running pytest on a test file written by a test
    "mutmut_hits",  # under mutmut's stats run, what a test's subprocesses call counts as called by the test
]


# NumPy's and SciPy's OpenBLAS use one thread in every process of the session (the workers, the background build,
# the commands tests start): after each call their idle threads spin on sched_yield, which on 2 cores took a third
# of the published figures' CPU (15.0 s with 2 threads, 9.6 s with 1, the same files; measured 2026-11-29).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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
# by scripts/mutation_check.py and scripts/mutation_report.py only).
PREBUILT_STORE = "SCALESTUDY_TEST_PUBLISHED_STORE"
# The xdist controller's background build of the published runs, and the fixtures that wait for it.
BACKGROUND = pytest.StashKey[tuple]()
# Under pytest-xdist, the tests' temporary folders (tmp_path) are made in memory-backed /dev/shm too.
BASETEMP = pytest.StashKey[Path]()
# Under pytest-xdist, the session's one cache of fetched raw files.
CACHE = pytest.StashKey[Path]()
# Under pytest-xdist, where the published runs come from this session (pytest's header says).
PUBLISHED_FROM = pytest.StashKey[str]()
PUBLISHED_FIXTURES = {"published_store", "published_figures", "published_folder"}
# Fixtures whose set-up costs far more than a test (mutmut's durations charge it to one test of the session only),
# in the order their tests run last under mutmut: the MLPerf corpus parsed whole (330 logs, each mutant's session
# with a cold cache: minutes behind mutmut's trampolines), the published figures drawn.
COSTLY = {"corpus_runs": 1, "published_figures": 2}


@pytest.fixture(autouse=True)
def http_settings_kept():
    """MLflow's HTTP settings as before each test: check_server sets them in the process that calls it, and a
    test's subprocess would inherit them (a later test's SCALESTUDY_HTTP_TIMEOUT then ignored)."""
    names = ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT")
    before = {name: os.environ.get(name) for name in names}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_terminal_summary(terminalreporter):
    if IMAGE_FACTS:
        terminalreporter.section("container image")
        for line in IMAGE_FACTS:
            terminalreporter.write_line(line)


def scratch_folder(prefix: str = "scalestudy-published-") -> Path:
    """A new folder for the published runs, in memory-backed /dev/shm where there is one: SQLite syncs every MLflow
    write, which on a busy disk doubles an import's time. The caller removes it."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix=prefix, dir=shm if os.access(shm, os.W_OK) else None))


def pytest_configure(config):
    """Under pytest-xdist, the controller (which runs no test) builds the published store and figures in the
    background (tests/published.py), and tells the workers where through the environment they inherit."""
    # The garbage collector runs about 14 times less often than Python's default (700 allocations): a session
    # holds 750,000 objects, and each full collection walked them all (3.4 s of a worker's CPU, 1.3 s so).
    gc.set_threshold(10_000, 10, 10)
    workers = getattr(config.option, "numprocesses", None)
    if not workers or hasattr(config, "workerinput"):
        return
    if config.option.basetemp is None:  # the tests' own stores too: SQLite syncs each write (see scratch_folder)
        config.option.basetemp = scratch_folder()
        config.stash[BASETEMP] = config.option.basetemp
    if not os.environ.get("SCALESTUDY_DATA_CACHE"):
        # One cache of fetched raw files (and of the MLPerf logs' readings) for the session: the background build
        # and both workers fill and read it (every write is a rename), instead of each copying and parsing alone.
        config.stash[CACHE] = scratch_folder("scalestudy-cache-")
        os.environ["SCALESTUDY_DATA_CACHE"] = str(config.stash[CACHE])
    if os.environ.get(PREBUILT_STORE) or not have_raw_data():
        return
    folder = scratch_folder()
    # the build kept by an earlier session with the same inputs (tests/published.py), where pytest's cache is on
    entry = config.cache.mkdir("published") / published.inputs_digest() if getattr(config, "cache", None) else None
    kept = published.restore(entry, folder) if entry is not None else None
    if kept == "figures":
        config.stash[BACKGROUND] = (None, folder)
        config.stash[PUBLISHED_FROM] = f"kept by an earlier session with the same inputs ({entry})"
    else:  # nothing kept, or only its store (its figures stale: drawn again from it)
        config.stash[BACKGROUND] = (published.start(folder, entry), folder)
        what = "its store kept, its figures built" if kept else "built"
        config.stash[PUBLISHED_FROM] = f"{what} in the background" + (f", kept as {entry}" if entry else "")
    os.environ[published.FOLDER] = str(folder)


def pytest_report_header(config):
    if PUBLISHED_FROM in config.stash:
        return [f"published runs and figures: {config.stash[PUBLISHED_FROM]}"]
    return []


def pytest_unconfigure(config):
    if BASETEMP in config.stash:
        shutil.rmtree(config.stash[BASETEMP], ignore_errors=True)
    if CACHE in config.stash:
        shutil.rmtree(config.stash[CACHE], ignore_errors=True)
        os.environ.pop("SCALESTUDY_DATA_CACHE", None)
    proc, folder = config.stash.get(BACKGROUND, (None, None))
    if proc is not None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(published.FOLDER, None)
    # At exit, after pytest's own last collections (which report a __del__ that raised), the session's objects
    # (about 750,000 in an xdist worker) are frozen out of the garbage collector: the interpreter's exit then skips
    # its final collections over them, 2.5 s per worker, which the controller waited for.
    atexit.register(gc.freeze)


def pytest_collection_modifyitems(config, items):
    """While the published runs are built in the background, the tests that need them run last. Under mutmut
    (which stops at a mutant's first failing test), the quickest tests run first, those needing a costly fixture
    (COSTLY) last: a killed mutant then costs the time of one short test."""
    if os.environ.get(published.FOLDER):
        items.sort(key=lambda item: bool(PUBLISHED_FIXTURES & set(item.fixturenames)))
    elif os.environ.get("MUTANT_UNDER_TEST") and Path("mutmut-stats.json").is_file():
        seconds = json.loads(Path("mutmut-stats.json").read_text()).get("duration_by_test", {})

        def cost(item):
            return max((COSTLY.get(name, 0) for name in item.fixturenames), default=0), seconds.get(item.nodeid, 1e9)

        items.sort(key=cost)


@pytest.fixture(scope="session")
def published_folder():
    """The folder of the published store and figures: built in the background by the xdist controller, copied from
    a prebuilt store (mutation testing), or built here when first asked for."""
    require_raw_data()
    if os.environ.get(published.FOLDER):
        yield Path(os.environ[published.FOLDER])
        return
    folder = scratch_folder()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def published_store(published_folder) -> str:
    """URI of a SQLite store holding every published run (imported once per session; tests must not modify it)."""
    background = bool(os.environ.get(published.FOLDER))
    prebuilt = os.environ.get(PREBUILT_STORE)
    if prebuilt and not background:  # the mutation scripts: one import for all mutants that leave it alone
        shutil.copyfile(prebuilt, published_folder / "store.db")
        if (Path(prebuilt).parent / "store-artifacts").is_dir():
            shutil.copytree(Path(prebuilt).parent / "store-artifacts", published_folder / "store-artifacts")
    else:
        published.wait(published_folder, "store", build=not background)
    return published.store_uri(published_folder)


@pytest.fixture(scope="session")
def published_figures(published_store, published_folder) -> dict:
    """Every figure built once per session from the published store (`python -m scalestudy.paper figures`, one
    query): {"dir": the figures folder, "stdout", "stderr"}. Tests read it; a test that writes copies it."""
    build = not os.environ.get(published.FOLDER)
    import mutmut_hits  # the plugin pytest_plugins loaded (imported here, after pytest registered it)

    with pytest.MonkeyPatch.context() as mp:
        if mutmut_hits.published_build_hits():  # mutmut's stats run: the build's calls count for every reader
            mp.setenv(mutmut_hits.HITS, mutmut_hits.published_build_hits())
        ended = published.wait(published_folder, "figures", build=build)
    return {"dir": published.figures_dir(published_folder), "stdout": ended["stdout"], "stderr": ended["stderr"]}


@pytest.fixture(scope="session")
def published_tables(published_store, tmp_path_factory) -> Path:
    """Every table built once per session (in each xdist worker that asks) from the published store
    (`python -m scalestudy.paper tables`): the out_dir, whose tables/ holds them. Tests read it."""
    from scalestudy.cli import run
    from scalestudy.paper.__main__ import main

    out = tmp_path_factory.mktemp("published-tables")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", published_store)
        assert run(main, ["tables", f"out_dir={out}"]) == 0
    return out


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
