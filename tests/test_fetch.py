"""Third-party raw files (ingest/fetch.py): listed in source.yaml by URL and SHA-256, fetched into a cache from
the cache itself, a mirror or the URL, verified; one line naming the file, where it was looked for and how to
supply it when it cannot be had. No network here: the mirror is ../shared/reference, and the URL path is tested
against a real HTTP server on loopback."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import REFERENCE, REPO, free_port, mirror_copy, require_raw_data, run_module

from scalestudy.ingest import read_source
from scalestudy.ingest.fetch import fetch_raw_files, raw_files
from scalestudy.schema import SchemaError

HACKSA = REFERENCE / "hacksa-2019"
ORIGIN = "https://raw.githubusercontent.com/rodarima/sa/d57a81dcd5bfa0f5f72d8d2d0fac36e34860ffff/"


def listed(folder: Path = HACKSA):
    return raw_files(read_source(folder), folder)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache of this test's own."""
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def http_origin(tmp_path):
    """A real HTTP server on loopback serving a folder laid out like the origin (proj/logs/...)."""
    root = tmp_path / "origin"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # not the test's output
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def with_origin(tmp_path: Path, url: str) -> Path:
    """A copy of the dataset's source.yaml alone, its raw files pointed at another origin (same paths, SHA-256)."""
    folder = tmp_path / "listing" / "hacksa-2019"
    folder.mkdir(parents=True)
    (folder / "source.yaml").write_text((HACKSA / "source.yaml").read_text().replace(ORIGIN, url))
    return folder


def test_the_listing_pins_every_hacksa_log():
    files = listed()
    assert len(files) == 16 and len({f.path for f in files}) == 16
    assert all(f.path.startswith("logs/") and f.url == ORIGIN + "proj/" + f.path for f in files)
    one = next(f for f in files if f.path == "logs/1.err")
    # sha256sum ../shared/reference/hacksa-2019/logs/1.err, which is the file the repository held until now
    assert one.sha256 == "5c63f5e4cbc574562c8aa280de75b27c7cc2387d571a0c065e55a35179e3807c"
    assert one.where.endswith("hacksa-2019/source.yaml:9")


def test_a_fetched_file_lands_in_the_cache_from_the_mirror(cache, monkeypatch):
    require_raw_data()
    files = fetch_raw_files("hacksa-2019", listed())
    assert set(files) == {f.path for f in listed()}
    mirror = Path(os.environ["SCALESTUDY_DATA_MIRROR"])
    for raw in listed():
        path = files[raw.path]
        assert path == cache / "hacksa-2019" / raw.path
        assert sha256(path) == raw.sha256
        assert path.read_bytes() == (mirror / "hacksa-2019" / raw.path).read_bytes()
    assert not list(cache.rglob("*.part"))  # no temporary file left
    # once cached, neither mirror nor network is needed
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", "")
    assert fetch_raw_files("hacksa-2019", listed()) == files


def test_a_corrupted_mirror_file_is_refused_naming_it(cache, tmp_path, monkeypatch):
    mirror = mirror_copy(tmp_path, "hacksa-2019")
    bad = mirror / "hacksa-2019" / "logs" / "2.err"
    data = bytearray(bad.read_bytes())
    data[100] ^= 1  # one bit
    bad.write_bytes(bytes(data))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(mirror))
    with pytest.raises(SchemaError) as err:
        fetch_raw_files("hacksa-2019", listed())
    text = str(err.value)
    assert text.startswith(f"{bad}: SHA-256 ") and "\n" not in text
    assert "hacksa-2019/source.yaml:" in text and "pins" in text and ORIGIN + "proj/logs/2.err" in text
    assert not (cache / "hacksa-2019" / "logs" / "2.err").exists()  # never taken into the cache


def test_a_cache_that_cannot_be_written_reads_the_verified_mirror_copy(tmp_path, monkeypatch):
    require_raw_data()
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be\n")  # mkdir fails, as on a read-only home
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(blocked))
    files = fetch_raw_files("hacksa-2019", listed())
    mirror = Path(os.environ["SCALESTUDY_DATA_MIRROR"])
    assert files["logs/1.err"] == mirror / "hacksa-2019" / "logs" / "1.err"


def test_a_corrupted_cache_copy_is_replaced_from_the_mirror(cache):
    require_raw_data()
    stale = cache / "hacksa-2019" / "logs" / "1.err"
    stale.parent.mkdir(parents=True)
    stale.write_text("not the log\n")
    files = fetch_raw_files("hacksa-2019", listed())
    assert sha256(files["logs/1.err"]) == "5c63f5e4cbc574562c8aa280de75b27c7cc2387d571a0c065e55a35179e3807c"


def test_a_missing_file_says_where_it_was_looked_for_and_how_to_supply_it(cache, tmp_path, monkeypatch):
    mirror = mirror_copy(tmp_path, "hacksa-2019")
    (mirror / "hacksa-2019" / "logs" / "8.err").unlink()
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(mirror))
    # an origin where nothing listens (this machine has no network; a machine that has must not reach GitHub here)
    folder = with_origin(tmp_path, f"http://127.0.0.1:{free_port()}/")
    with pytest.raises(SchemaError) as err:
        fetch_raw_files("hacksa-2019", listed(folder))
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("hacksa-2019/logs/8.err: not in the cache (")
    assert f"{cache / 'hacksa-2019' / 'logs' / '8.err'}" in text
    assert f"nor in the mirror ({mirror / 'hacksa-2019' / 'logs' / '8.err'})" in text
    assert "could not be fetched (ConnectionError)" in text
    assert "SCALESTUDY_DATA_MIRROR=DIR with the file at DIR/hacksa-2019/logs/8.err" in text


def test_fetched_from_the_url_and_verified(cache, tmp_path, http_origin, monkeypatch):
    """No mirror: the files come from their URL (pooch), here a real HTTP server on loopback."""
    require_raw_data()
    real = Path(os.environ["SCALESTUDY_DATA_MIRROR"]) / "hacksa-2019"
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", "")
    root, url = http_origin
    for raw in listed():
        (root / "proj" / raw.path).parent.mkdir(parents=True, exist_ok=True)
        (root / "proj" / raw.path).write_bytes((real / raw.path).read_bytes())
    (root / "proj" / "logs" / "4.err").write_text("a different file at the origin\n")
    folder = with_origin(tmp_path, url)
    with pytest.raises(SchemaError, match=r"^hacksa-2019/logs/4\.err: .*gave a file whose SHA-256 is not the one"):
        fetch_raw_files("hacksa-2019", listed(folder))
    assert not (cache / "hacksa-2019" / "logs" / "4.err").exists()  # the bad download was not kept
    (root / "proj" / "logs" / "4.err").write_bytes((real / "logs" / "4.err").read_bytes())
    files = fetch_raw_files("hacksa-2019", listed(folder))
    assert all(sha256(files[raw.path]) == raw.sha256 for raw in listed())
    assert files["logs/4.err"] == cache / "hacksa-2019" / "logs" / "4.err"


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            "  - path: ../x.err\n    url: http://h/x\n    sha256: " + "a" * 64,
            r"'\.\./x\.err' is not a plain relative path",
        ),
        ("  - path: x.err\n    url: ftp://h/x\n    sha256: " + "a" * 64, r"url 'ftp://h/x' is not an http\(s\) URL"),
        ("  - path: x.err\n    url: http://h/x\n    sha256: abc", r"sha256 'abc' is not 64 hexadecimal digits"),
        ("  - path: x.err\n    url: http://h/x", r"needs exactly the keys path, url and sha256"),
        ("  - path: logs/1.err\n    url: http://h/x\n    sha256: " + "a" * 64, r"'logs/1\.err' is listed twice"),
    ],
)
def test_a_bad_listing_names_source_yaml_and_line(tmp_path, entry, message):
    folder = tmp_path / "hacksa-2019"
    folder.mkdir()
    text = (HACKSA / "source.yaml").read_text() + entry + "\n"
    (folder / "source.yaml").write_text(text)
    line = len(text.splitlines()) - entry.count("\n")  # the entry's `- path:` line
    with pytest.raises(SchemaError, match=rf"source\.yaml:{line}: .*{message}"):
        listed(folder)


def test_the_importer_fails_in_one_line_and_writes_nothing(tmp_path):
    mirror = mirror_copy(tmp_path, "hacksa-2019")
    (mirror / "hacksa-2019" / "logs" / "16.err").write_text("cut\n")
    uri = f"sqlite:///{tmp_path / 'store' / 'store.db'}"
    env = {"SCALESTUDY_DATA_MIRROR": str(mirror), "SCALESTUDY_DATA_CACHE": str(tmp_path / "cache")}
    proc = run_module("scalestudy.ingest", "tf-benchmarks-2017", "hacksa-2019", uri=uri, check=False, env=env)
    assert proc.returncode == 2
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {mirror}/hacksa-2019/logs/16.err: SHA-256 ") and "nothing was written" in line
    assert "Traceback" not in proc.stderr
    assert "created" not in proc.stdout  # tf-benchmarks-2017 was read and checked, and not written either


def test_git_holds_no_third_party_raw_file():
    tracked = subprocess.run(["git", "ls-files", "experiments/reference"], cwd=REPO, capture_output=True, text=True)
    assert tracked.returncode == 0 and tracked.stdout
    paths = set(tracked.stdout.split())
    for folder in sorted(REFERENCE.iterdir()):
        for raw in raw_files(read_source(folder), folder):
            assert f"experiments/reference/{folder.name}/{raw.path}" not in paths
    assert not [p for p in paths if p.endswith(".err") or "/logs/" in p]


def test_a_hung_download_fails_within_the_timeout_the_user_sets(cache, tmp_path, silent_origin, monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", "")
    monkeypatch.setenv("SCALESTUDY_DOWNLOAD_TIMEOUT", "1.5")
    folder = with_origin(tmp_path, silent_origin)
    started = time.monotonic()
    with pytest.raises(SchemaError, match=r"^hacksa-2019/logs/1\.err: not in the cache .* did not answer within 1\.5 s "
                       r"\(SCALESTUDY_DOWNLOAD_TIMEOUT sets the wait\)"):  # fmt: skip
        fetch_raw_files("hacksa-2019", listed(folder)[:1])
    assert 1.5 <= time.monotonic() - started < 10
    assert not (cache / "hacksa-2019" / "logs" / "1.err").exists()
    monkeypatch.setenv("SCALESTUDY_DOWNLOAD_TIMEOUT", "soon")
    with pytest.raises(SchemaError, match=r"^SCALESTUDY_DOWNLOAD_TIMEOUT='soon' is not a number of seconds > 0"):
        fetch_raw_files("hacksa-2019", listed(folder)[:1])
