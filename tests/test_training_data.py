"""The training data archives (conf/data/*.yaml `archive`) are fetched like the published raw files: from the
cache, the mirror or the URL, each checked against the SHA-256 its config pins (ingest/fetch.py)."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO

from scalestudy.ingest import fetch

CIFAR_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"  # Keras' cifar10.load_data pins it


def test_cifar10_names_its_archive_url_and_pinned_sha256():
    (name,) = fetch.training_archives()
    raw = fetch.training_archives()[name]
    assert name == "cifar10" and raw.path == "cifar-10-python.tar.gz"
    assert raw.url == "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz" and raw.sha256 == CIFAR_SHA256
    assert raw.where.endswith("conf/data/cifar10.yaml")


def test_a_wrong_copy_in_the_mirror_is_refused_naming_the_pin(tmp_path, monkeypatch):
    (tmp_path / "mirror" / "datasets").mkdir(parents=True)
    (tmp_path / "mirror" / "datasets" / "cifar-10-python.tar.gz").write_bytes(b"not the archive")
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "scalestudy.ingest", "data", "cifar10"], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: {tmp_path}/mirror/datasets/cifar-10-python.tar.gz: SHA-256 ")
    assert f"is not the {CIFAR_SHA256[:12]}... that {REPO}/conf/data/cifar10.yaml pins" in line
    assert not (tmp_path / "cache" / "datasets" / "cifar-10-python.tar.gz").exists()


def test_a_verified_cached_archive_is_its_path_on_stdout(tmp_path, monkeypatch):
    """The cache's copy whose SHA-256 matches is used as it is (a stand-in archive, its hash pinned here)."""
    archive = tmp_path / "cache" / "datasets" / "cifar-10-python.tar.gz"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"stand-in")
    raw = fetch.RawFile("cifar-10-python.tar.gz", "https://example.invalid/x", fetch.sha256_of(archive), "test")
    monkeypatch.setattr(fetch, "training_archives", lambda: {"cifar10": raw})
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SCALESTUDY_DATA_MIRROR", raising=False)
    assert fetch.fetch_training_data("cifar10") == archive


def test_an_unknown_data_set_is_refused_by_the_command(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "scalestudy.ingest", "data", "imagenet"], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 2 and "invalid choice: 'imagenet' (choose from 'cifar10')" in proc.stderr
