"""ingest/fetch.py, the arrangements test_fetch.py leaves out (mutation testing found them unchecked): a corrupted
cache copy as the only copy (no mirror, no network), the cache's and the mirror's location from the environment,
the listing's line numbers, and a verified copy written whole into the cache."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import yaml
from conftest import REFERENCE, free_port, require_raw_data

from scalestudy.ingest import read_source
from scalestudy.ingest.fetch import RawFile, _key_lines, cache_dir, fetch_raw_files, mirror_dir, raw_files, sha256_of
from scalestudy.schema import SchemaError

HACKSA = REFERENCE / "hacksa-2019"
# sha256sum ../shared/reference/hacksa-2019/logs/1.err
LOG1_SHA = "5c63f5e4cbc574562c8aa280de75b27c7cc2387d571a0c065e55a35179e3807c"


def test_a_corrupted_cache_copy_with_no_mirror_and_no_network_is_refused_saying_both(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", "")
    stale = tmp_path / "cache" / "hacksa-2019" / "logs" / "1.err"
    stale.parent.mkdir(parents=True)
    stale.write_text("not the log\n")
    got = hashlib.sha256(b"not the log\n").hexdigest()
    raw = RawFile("logs/1.err", f"http://127.0.0.1:{free_port()}/logs/1.err", LOG1_SHA, "source.yaml:7")
    with pytest.raises(SchemaError) as err:
        fetch_raw_files("hacksa-2019", [raw])
    assert str(err.value) == (
        f"hacksa-2019/logs/1.err: not in the cache ({stale}), no mirror (SCALESTUDY_DATA_MIRROR unset), and "
        f"{raw.url} could not be fetched (ConnectionError); the cached copy {stale} has SHA-256 {got[:12]}..., "
        f"not {LOG1_SHA[:12]}...: download {raw.url} to {stale}, or set SCALESTUDY_DATA_MIRROR=DIR with the file "
        "at DIR/hacksa-2019/logs/1.err (its SHA-256 is pinned at source.yaml:7)"
    )
    assert stale.read_text() == "not the log\n"  # refused, not deleted or half-replaced


def test_a_corrupted_mirror_copy_is_named_with_both_digests(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "d" / "logs").mkdir(parents=True)
    (mirror / "d" / "logs" / "1.err").write_text("cut\n")
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(mirror))
    got = hashlib.sha256(b"cut\n").hexdigest()
    raw = RawFile("logs/1.err", "https://h/1.err", LOG1_SHA, "source.yaml:9")
    with pytest.raises(SchemaError) as err:
        fetch_raw_files("d", [raw])
    assert str(err.value) == (
        f"{mirror}/d/logs/1.err: SHA-256 {got[:12]}... is not the {LOG1_SHA[:12]}... that source.yaml:9 pins "
        "(a corrupted or different file): replace it with https://h/1.err"
    )
    assert not (tmp_path / "cache" / "d" / "logs" / "1.err").exists()


def test_a_verified_mirror_copy_lands_whole_in_the_cache_and_is_then_read_from_it(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "d" / "a" / "b").mkdir(parents=True)
    body = b"x" * (3 << 20)  # three blocks of sha256_of's 1 MiB reads
    (mirror / "d" / "a" / "b" / "f.log").write_bytes(body)
    digest = hashlib.sha256(body).hexdigest()
    assert sha256_of(mirror / "d" / "a" / "b" / "f.log") == digest
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(mirror))
    raw = RawFile("a/b/f.log", "https://h/f.log", digest, "source.yaml:3")
    assert fetch_raw_files("d", [raw]) == {"a/b/f.log": tmp_path / "cache" / "d" / "a" / "b" / "f.log"}
    assert (tmp_path / "cache" / "d" / "a" / "b" / "f.log").read_bytes() == body
    assert os.listdir(tmp_path / "cache" / "d" / "a" / "b") == ["f.log"]  # no temporary left beside it
    (mirror / "d" / "a" / "b" / "f.log").unlink()  # cached: the mirror is no longer needed
    assert fetch_raw_files("d", [raw])["a/b/f.log"].read_bytes() == body


def test_cache_and_mirror_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", "~/somewhere")
    assert cache_dir() == Path.home() / "somewhere"
    monkeypatch.delenv("SCALESTUDY_DATA_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "scalestudy"
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", "  ")
    assert mirror_dir() is None
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", f" {tmp_path} ")
    assert mirror_dir() == tmp_path
    monkeypatch.delenv("SCALESTUDY_DATA_MIRROR")
    assert mirror_dir() is None


def test_the_listing_lines_and_entries_by_hand(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "source.yaml").write_text(
        "name: d\n"  # 1
        "raw_files:\n"  # 2
        "  - path: logs/1.err\n"  # 3
        "    url: https://h/1.err\n"  # 4
        f"    sha256: {LOG1_SHA.upper()}\n"  # 5
        "  -   path: ' logs/2.err '\n"  # 6: spaced out, and quoted spaces that are not part of the path
        "      url: http://h/2.err\n"  # 7
        f"      sha256: {'b' * 64}\n"  # 8
    )
    assert _key_lines(folder / "source.yaml") == {"raw_files": 2, ("path", 0): 3, ("path", 1): 6}
    listed = raw_files(yaml.safe_load((folder / "source.yaml").read_text()), folder)
    assert listed == [
        RawFile("logs/1.err", "https://h/1.err", LOG1_SHA, f"{folder / 'source.yaml'}:3"),
        RawFile("logs/2.err", "http://h/2.err", "b" * 64, f"{folder / 'source.yaml'}:6"),
    ]
    assert _key_lines(tmp_path / "absent.yaml") == {}
    assert raw_files({"name": "d"}, folder) == []


def test_a_listing_that_is_not_a_list_names_its_line(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "source.yaml").write_text("name: d\nnote: x\nraw_files: logs/1.err\n")
    with pytest.raises(SchemaError) as err:
        raw_files(yaml.safe_load((folder / "source.yaml").read_text()), folder)
    assert str(err.value) == f"{folder / 'source.yaml'}:3: raw_files is not a list of path, url, sha256"


@pytest.mark.parametrize("path", ["/etc/passwd", "a/../b", "a//b", "./a", ""])
def test_a_path_that_is_not_plain_is_refused(tmp_path, path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "source.yaml").write_text(
        f"raw_files:\n  - path: '{path}'\n    url: https://h/x\n    sha256: {'a' * 64}\n"
    )
    with pytest.raises(SchemaError, match=rf"source\.yaml:2: raw file path '{path}' is not a plain relative path"):
        raw_files(yaml.safe_load((folder / "source.yaml").read_text()), folder)


def test_the_hacksa_listing_is_read_from_the_real_source_yaml():
    require_raw_data()
    listed = raw_files(read_source(HACKSA), HACKSA)
    first = next(r for r in listed if r.path == "logs/1.err")
    assert first.sha256 == LOG1_SHA
    assert first.where.startswith(f"{HACKSA / 'source.yaml'}:")
