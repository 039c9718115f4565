"""ingest/fetch.py, the arrangements test_fetch.py leaves out (mutation testing found them unchecked): a corrupted
cache copy as the only copy (no mirror, no network), the cache's and the mirror's location from the environment,
the listing's line numbers, and a verified copy written whole into the cache."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml
from helpers import REFERENCE, free_port, require_raw_data

from scalestudy.ingest import fetch, read_source
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
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", "~/mirror")  # quoted in a shell or a CI file: left to us
    assert mirror_dir() == Path.home() / "mirror"
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


def test_listings_without_a_line_per_entry_name_the_raw_files_line_else_line_1(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    yml = folder / "source.yaml"

    def refusal(text: str) -> str:
        yml.write_text(text)
        with pytest.raises(SchemaError) as err:
            raw_files(yaml.safe_load(text), folder)
        return str(err.value)

    # YAML's flow style: no `- path:` line, so the entry is named by its raw_files line, or line 1 where that is
    # not a line of its own either
    assert refusal("name: d\nraw_files: [{path: a, url: 'https://h/a', sha256: f00}]\n") == (
        f"{yml}:2: raw file 'a': sha256 'f00' is not 64 hexadecimal digits")  # fmt: skip
    assert refusal("{name: d, raw_files: [{path: a, url: 'ftp://h/a', sha256: f00}]}\n") == (
        f"{yml}:1: raw file 'a': url 'ftp://h/a' is not an http(s) URL")  # fmt: skip
    assert refusal("{name: d, raw_files: 3}\n") == f"{yml}:1: raw_files is not a list of path, url, sha256"
    # the second entry, one key short: named by its number and its own line
    second = (
        f"raw_files:\n  - path: a\n    url: https://h/a\n    sha256: {'a' * 64}\n  - path: b\n    url: https://h/b\n"
    )
    assert refusal(second) == f"{yml}:5: raw_files entry 2 needs exactly the keys path, url and sha256"


def test_a_listing_with_bytes_that_are_not_utf8_still_gives_its_lines(tmp_path):
    path = tmp_path / "source.yaml"
    path.write_bytes(b"# caf\xe9 (Latin-1)\nraw_files:\n  - path: a\n")
    assert _key_lines(path) == {"raw_files": 2, ("path", 0): 3}


def test_a_file_in_neither_mirror_folder_names_both(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(mirror))
    raw = RawFile("a", f"http://127.0.0.1:{free_port()}/a", LOG1_SHA, "source.yaml:3")
    with pytest.raises(SchemaError) as err:
        fetch_raw_files("d", [raw], mirror_folder="m")
    assert f"d/a: not in the cache ({tmp_path / 'cache' / 'd' / 'a'}), nor in the mirror ({mirror / 'm' / 'a'} or " \
           f"{mirror / 'd' / 'a'}), and {raw.url} could not be fetched" in str(err.value)  # fmt: skip


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


# ------------------------------------------------------------------------------------------------------------------
# The download (pooch) against a real HTTP server on loopback: what it prints, an HTTP error's status, a server
# that never answers (the timeout), a URL that cannot be parsed.


@pytest.fixture
def origin(tmp_path):
    """(folder served, base URL) of an HTTP server on loopback."""
    root = tmp_path / "origin"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", "")
    return tmp_path / "cache"


def test_a_download_prints_one_line_and_nothing_else(origin, offline, capfd):
    root, url = origin
    (root / "f.log").write_bytes(b"a log\n")
    raw = RawFile("logs/f.log", f"{url}/f.log", hashlib.sha256(b"a log\n").hexdigest(), "source.yaml:2")
    capfd.readouterr()
    assert fetch_raw_files("d", [raw]) == {"logs/f.log": offline / "d" / "logs" / "f.log"}
    out, err = capfd.readouterr()
    # one line on stderr, no progress bar (pooch's needs tqdm, which is installed here)
    assert (out, err) == ("", f"fetching {url}/f.log -> {offline / 'd' / 'logs' / 'f.log'}\n")
    assert (offline / "d" / "logs" / "f.log").read_bytes() == b"a log\n"


def test_an_http_error_gives_its_status(origin, offline):
    _, url = origin
    raw = RawFile("logs/absent.log", f"{url}/absent.log", LOG1_SHA, "source.yaml:2")
    with pytest.raises(SchemaError) as err:
        fetch_raw_files("d", [raw])
    target = offline / "d" / "logs" / "absent.log"
    assert str(err.value) == (
        f"d/logs/absent.log: not in the cache ({target}), no mirror (SCALESTUDY_DATA_MIRROR unset), and "
        f"{url}/absent.log could not be fetched (HTTP 404): download {url}/absent.log to {target}, or set "
        "SCALESTUDY_DATA_MIRROR=DIR with the file at DIR/d/logs/absent.log (its SHA-256 is pinned at source.yaml:2)"
    )


def test_a_server_that_never_answers_fails_after_the_timeout(offline, monkeypatch):
    monkeypatch.setenv(fetch.TIMEOUT_ENV, "0.5")  # the user's setting (issue 25), not the 20 s default
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/f.log"
        started = time.monotonic()
        with pytest.raises(
            SchemaError, match=r"did not answer within 0\.5 s \(SCALESTUDY_DOWNLOAD_TIMEOUT sets the wait\)"
        ):
            fetch_raw_files("d", [RawFile("f.log", url, LOG1_SHA, "source.yaml:2")])
        assert time.monotonic() - started < 30


def test_a_url_that_cannot_be_parsed_says_why(offline):
    raw = RawFile("f.log", "http://127.0.0.1:99999/f.log", LOG1_SHA, "source.yaml:2")
    with pytest.raises(SchemaError) as err:
        fetch_raw_files("d", [raw])
    # requests' InvalidURL is a ValueError, which is not pooch's hash check: its own text is the reason
    assert "http://127.0.0.1:99999/f.log could not be fetched (Failed to parse: http://127.0.0.1:99999/f.log):" in str(
        err.value
    )


def test_a_copy_into_the_cache_goes_through_a_hidden_temporary_beside_the_target(tmp_path, monkeypatch):
    source = tmp_path / "src.log"
    source.write_bytes(b"log\n")
    target = tmp_path / "cache" / "d" / "logs" / "f.log"
    seen = []
    real_copy = shutil.copyfile

    def watched(src, dst):
        seen.append(Path(dst))
        return real_copy(src, dst)

    monkeypatch.setattr(fetch.shutil, "copyfile", watched)
    fetch._copy_into(source, target)
    (tmp,) = seen
    assert tmp.parent == target.parent and tmp.name.startswith(".f.log.") and tmp.name.endswith(".part")
    assert target.read_bytes() == b"log\n" and os.listdir(target.parent) == ["f.log"]


def test_a_copy_that_fails_leaves_no_temporary_and_says_why(tmp_path, monkeypatch):
    source = tmp_path / "src.log"
    source.write_bytes(b"log\n")
    target = tmp_path / "cache" / "f.log"

    def half_written(src, dst):
        Path(dst).write_bytes(b"lo")
        raise OSError("No space left on device")

    monkeypatch.setattr(fetch.shutil, "copyfile", half_written)
    with pytest.raises(OSError, match=r"^No space left on device$"):
        fetch._copy_into(source, target)
    assert os.listdir(target.parent) == []

    def gone(src, dst):  # the temporary already removed when the copy fails: the copy's own error, not unlink's
        Path(dst).unlink()
        raise OSError("No space left on device")

    monkeypatch.setattr(fetch.shutil, "copyfile", gone)
    with pytest.raises(OSError, match=r"^No space left on device$"):
        fetch._copy_into(source, target)
    assert os.listdir(target.parent) == []


def test_a_download_failing_with_an_error_that_carries_no_response_names_its_type(offline, monkeypatch):
    import pooch

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(pooch, "retrieve", disk_full)
    raw = RawFile("f.log", "https://h/f.log", LOG1_SHA, "source.yaml:2")
    with pytest.raises(SchemaError, match=r"https://h/f\.log could not be fetched \(OSError\): download"):
        fetch_raw_files("d", [raw])


@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "soon", "0.0"])
def test_download_timeout_refuses_what_is_not_seconds_above_zero(text, monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DOWNLOAD_TIMEOUT", text)
    with pytest.raises(SchemaError, match=rf"^SCALESTUDY_DOWNLOAD_TIMEOUT='{text}' is not a number of seconds > 0$"):
        fetch.download_timeout()


def test_download_timeout_reads_seconds_and_defaults_to_20(monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DOWNLOAD_TIMEOUT", " 2.5 ")
    assert fetch.download_timeout() == 2.5
    monkeypatch.setenv("SCALESTUDY_DOWNLOAD_TIMEOUT", "0.001")
    assert fetch.download_timeout() == 0.001
    monkeypatch.setenv("SCALESTUDY_DOWNLOAD_TIMEOUT", "  ")
    assert fetch.download_timeout() == 20.0
    monkeypatch.delenv("SCALESTUDY_DOWNLOAD_TIMEOUT")
    assert fetch.download_timeout() == 20.0
