"""Helpers the tests share (imported as `from helpers import ...`: pytest puts tests/ on the path); fixtures stay in
conftest.py."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (registered under NAME, so its dataclasses resolve their annotations)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


REFERENCE = REPO / "experiments" / "reference"
# Third-party raw files (the HackSA logs...) are not committed: the importers fetch them into a cache, here from
# the mirror beside the checkout (../shared/reference, laid out as <dataset>/<path>), as the Makefile and CI do.
# Without that mirror, the user's own cache serves as one: `make test` fills it first (its import fetches every
# listed raw file from its URL), and it has the mirror's layout; every copy is checked by its SHA-256 either way.
SHARED_REFERENCE = REPO.parent / "shared" / "reference"


def shared_reference(*needed: str) -> Path | None:
    """The folder of third-party samples no source.yaml lists (../shared/reference/logs...): $SCALESTUDY_DATA_MIRROR
    (set under mutmut, whose tests run inside mutants/) or ../shared/reference beside the checkout or a worktree,
    whichever holds every `needed` subfolder; None where none does (the tests using it may skip)."""
    candidates = [Path(os.environ["SCALESTUDY_DATA_MIRROR"])] if os.environ.get("SCALESTUDY_DATA_MIRROR") else []
    candidates += [parent / "shared" / "reference" for parent in REPO.parents]
    return next((c for c in candidates if all((c / n).is_dir() for n in needed)), None)


def log_text(data: bytes) -> bytes:
    """A log's text as `python -m scalestudy.ingest logs` keys it, made here another way than the importer's
    ingest.logs.log_text: every blank (space, tab, \\r, \\v, \\f) before a line's end removed, a final \\n added
    where the last line has none. A \\r inside a line (a progress bar's) stays."""
    text = re.sub(rb"[ \t\r\v\f]+$", b"", data, flags=re.MULTILINE)
    return text if not text or text.endswith(b"\n") else text + b"\n"


def log_text_sha256(path: Path) -> str:
    """SHA-256 of a log file's text (`log_text`): the digest in the key of its runs (`sha256:<this>#N`)."""
    return hashlib.sha256(log_text(path.read_bytes())).hexdigest()


def default_mirror() -> Path | None:
    from scalestudy.ingest.fetch import cache_dir

    return next((p for p in (SHARED_REFERENCE, cache_dir()) if p.is_dir()), None)


def have_raw_data() -> bool:
    mirror = os.environ.get("SCALESTUDY_DATA_MIRROR")
    return bool(mirror) and Path(mirror).is_dir()


def require_raw_data() -> None:
    """Skip, saying why, where the third-party raw files cannot be had (no mirror; tests have no network)."""
    if not have_raw_data():
        mirror = os.environ.get("SCALESTUDY_DATA_MIRROR") or f"{SHARED_REFERENCE} (SCALESTUDY_DATA_MIRROR unset)"
        pytest.skip(f"no mirror of the third-party raw files: {mirror} is absent, and the tests run without network")


def raw_dir(name: str) -> Path:
    """The folder holding dataset `name`'s raw files at their paths, fetched (from the mirror) and verified."""
    from scalestudy.ingest import fetched_raw_files, read_source

    require_raw_data()
    _, source = fetched_raw_files(REFERENCE / name, read_source(REFERENCE / name))
    return Path(source["raw_dir"])


_SOURCES: dict[str, dict] = {}


def reference_source(name: str) -> dict:
    """Dataset `name`'s source.yaml as ingest.read_source gives it, read once a session (the MLPerf corpus's lists
    751 raw files: 0.1 s a read)."""
    from scalestudy.ingest import read_source

    if name not in _SOURCES:
        _SOURCES[name] = read_source(REFERENCE / name)
    return _SOURCES[name]


def raw_files_of(name: str, *paths: str) -> dict[str, Path]:
    """{path: file} of a few of dataset `name`'s raw files, fetched (from the mirror) and verified: cheaper than
    raw_dir where a fast test reads a handful of a large dataset's files."""
    from scalestudy.ingest.fetch import fetch_raw_files, raw_files

    require_raw_data()
    source = reference_source(name)
    wanted = [raw for raw in raw_files(source, REFERENCE / name) if raw.path in paths]
    assert len(wanted) == len(set(paths)), f"not all of {paths} are raw files of {name}"
    mirror_folder = source.get("mirror_folder")
    return fetch_raw_files(name, wanted, mirror_folder)


# Lines for the end of the test log: the image's size and build time (tests/test_image.py appends them).
IMAGE_FACTS: list[str] = []


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


def run_here(module: str, *args: str, uri: str, monkeypatch, capsys) -> subprocess.CompletedProcess:
    """`python -m module args` in this process, through the same entry point and error handler (scalestudy.cli):
    a subprocess costs 1 to 2 s of imports. Its exit status, stdout and stderr as run_module gives them."""
    import importlib

    from scalestudy.cli import run

    main = importlib.import_module(f"{module}.__main__").main
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    capsys.readouterr()
    status = run(main, list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([module, *args], status, out, err)


def sidecar(figures: dict, name: str) -> dict:
    """The JSON sidecar of figure `name` in a `published_figures` build."""
    import json

    return json.loads((figures["dir"] / f"{name}.json").read_text())


def printed_latex(text: str) -> list[str]:
    """Figure captions of a PDF's text (from "Figure N:" to the paragraph's end) that print LaTeX as typed."""
    import re

    captions = re.findall(r"Figure \d+: .*?(?:\n\n|\Z)", text, flags=re.S)
    return [c[:60] for c in captions if re.search(r"[$\\]", c)]
