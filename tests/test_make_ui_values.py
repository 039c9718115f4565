"""`make ui` rebuilds only the figures and tables whose inputs changed, and none right after `make figures tables`
(issue 44): the Makefile's sidecar rules, asked with `make -n` in a scratch copy of the layout they read (the
Makefile, configs, the builder's code, the environment's and the import's stamps, each given its time here)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from helpers import REPO


def store_key(uri: str) -> str:
    """The Makefile's STORE_KEY: `printf '%s' URI | cksum` (POSIX cksum, not zlib's CRC)."""
    out = subprocess.run(["cksum"], input=uri.encode(), capture_output=True, check=True).stdout
    return out.split()[0].decode()


def layout(root: Path, uri: str) -> dict[str, Path]:
    shutil.copy(REPO / "Makefile", root / "Makefile")
    files = {
        "env": root / ".venv" / ".build.stamp",
        "figure-1": root / "conf" / "figure" / "figure-1.yaml",
        "figure-2": root / "conf" / "figure" / "figure-2.yaml",
        "table-1": root / "conf" / "table" / "table-1.yaml",
        "shared": root / "conf" / "paper.yaml",
        "code": root / "src" / "scalestudy" / "paper" / "figures.py",
        "schema": root / "src" / "scalestudy" / "schema.py",  # the importers' code, which the import stamp follows
        "ui-code": root / "src" / "scalestudy" / "ui" / "home.py",
        "imported": root / ".mlflow" / f"imported-{store_key(uri)}.stamp",
    }
    for name in ("pyproject.toml", "requirements.lock", "scripts/make-env.sh"):
        files[name] = root / name
    (root / "experiments" / "reference").mkdir(parents=True)
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    for name in ("figure-1", "figure-2"):
        files[f"{name}.json"] = root / "paper" / "figures" / f"{name}.json"
    files["table-1.json"] = root / "paper" / "tables" / "table-1.json"
    return files


def stale(root: Path, uri: str) -> list[str]:
    """The figures and tables `make ui` would rebuild."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    out = subprocess.run(["make", "-n", "ui"], cwd=root, env=env, capture_output=True, text=True, check=True).stdout
    return re.findall(r"echo (\S+) >> \.mlflow/ui-stale-", out)


def test_make_ui_rebuilds_only_what_changed(tmp_path):
    uri = f"sqlite:///{tmp_path}/.mlflow/store.db"
    files = layout(tmp_path, uri)
    assert stale(tmp_path, uri) == ["figure-1", "figure-2", "table-1"]  # none built yet

    def at(name: str, t: float) -> None:
        files[name].parent.mkdir(parents=True, exist_ok=True)
        files[name].touch()
        os.utime(files[name], (t, t))

    for name in files:
        at(name, 1_000_000)
    at("imported", 2_000_000)
    for name in ("figure-1.json", "figure-2.json", "table-1.json"):  # `make figures tables` after the import
        at(name, 3_000_000)
    assert stale(tmp_path, uri) == []  # serves at once
    at("figure-2", 4_000_000)
    assert stale(tmp_path, uri) == ["figure-2"]  # its config changed
    at("ui-code", 5_000_000)
    assert stale(tmp_path, uri) == ["figure-2"]  # the UI's own code draws nothing
    at("shared", 6_000_000)
    assert stale(tmp_path, uri) == ["figure-1", "figure-2", "table-1"]
    at("imported", 7_000_000)
    at("code", 7_000_000)
    assert stale(tmp_path, uri) == ["figure-1", "figure-2", "table-1"]
