"""Shared fixtures: a store with every published dataset imported once per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["slurm_cluster"]  # the `slurm_cluster` fixture: a real one-node Slurm (tests/slurm_cluster.py)


REFERENCE = REPO / "experiments" / "reference"
# Lines for the end of the test log: the image's size and build time (tests/test_image.py appends them).
IMAGE_FACTS: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if IMAGE_FACTS:
        terminalreporter.section("container image")
        for line in IMAGE_FACTS:
            terminalreporter.write_line(line)


def dataset_copy(tmp_path: Path, name: str) -> Path:
    """A writable copy of the published dataset folder experiments/reference/<name>."""
    dest = tmp_path / name
    shutil.copytree(REFERENCE / name, dest, copy_function=shutil.copyfile)
    return dest


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
    """URI of a SQLite store holding every published run (imported once; tests must not modify it)."""
    folder = tmp_path_factory.mktemp("published-store")
    uri = f"sqlite:///{folder / 'store.db'}"
    run_module("scalestudy.ingest", uri=uri)
    return uri


@pytest.fixture()
def store_copy(published_store, tmp_path) -> str:
    """A private copy of the published store, for tests that write to it."""
    src = Path(published_store[len("sqlite:///") :])
    dst = tmp_path / "store.db"
    shutil.copy(src, dst)
    if (src.parent / "store-artifacts").exists():
        shutil.copytree(src.parent / "store-artifacts", tmp_path / "store-artifacts")
    return f"sqlite:///{dst}"
