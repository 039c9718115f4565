"""The end-to-end tests of tests/test_fetch.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

import time

from helpers import REFERENCE, require_raw_data, run_module
from test_fetch import HACKSA, ORIGIN

from scalestudy.ingest import read_source
from scalestudy.ingest.fetch import raw_files
from scalestudy.store import load_runs


def test_a_target_imports_only_the_datasets_it_draws(tmp_path):
    """make figure-N imports `python -m scalestudy.ingest --list --for figure-N`: figure-3 needs no third-party
    file, so it imports with no mirror, an empty cache and no network."""
    lists = {
        target: run_module("scalestudy.ingest", "--list", "--for", target, uri="sqlite:///unused.db").stdout.split()
        for target in ("figure-3", "figure-1", "table-2", "figure-9", "all")
    }
    assert lists["figure-3"] == ["tf-benchmarks-2017"] and lists["figure-1"] == ["hacksa-2019"]
    assert lists["table-2"] == ["keras-backends-2017"] and lists["figure-9"] == ["horovod-timelines-2019"]
    assert {"tf-benchmarks-2017", "hacksa-2019", "horovod-docs"} <= set(lists["all"])
    assert not any(raw_files(read_source(REFERENCE / name), REFERENCE / name) for name in lists["figure-3"])
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    env = {"SCALESTUDY_DATA_MIRROR": "", "SCALESTUDY_DATA_CACHE": str(tmp_path / "empty-cache")}
    proc = run_module("scalestudy.ingest", "--for", "figure-3", uri=uri, env=env)
    assert "tf-benchmarks-2017: 207 runs" in proc.stdout and "hacksa" not in proc.stdout
    assert not (tmp_path / "empty-cache").exists()  # nothing was fetched
    unknown = run_module("scalestudy.ingest", "--list", "--for", "figure-99", uri=uri, check=False)
    assert unknown.returncode == 2 and "unknown figure or table 'figure-99'" in unknown.stderr


# the default wait, end to end: about 20 s
def test_a_hung_download_fails_within_30_s_in_one_line(tmp_path, silent_origin):
    reference = tmp_path / "reference"
    folder = reference / "hacksa-2019"
    folder.mkdir(parents=True)
    for item in HACKSA.iterdir():  # the dataset's own files; its raw files only at the (silent) origin
        if item.is_file():
            (folder / item.name).write_bytes(item.read_bytes())
    (folder / "source.yaml").write_text((HACKSA / "source.yaml").read_text().replace(ORIGIN, silent_origin))
    env = {"SCALESTUDY_DATA_MIRROR": "", "SCALESTUDY_DATA_CACHE": str(tmp_path / "cache")}
    started = time.monotonic()
    proc = run_module("scalestudy.ingest", "--reference-dir", str(reference), "hacksa-2019",
                      uri=f"sqlite:///{tmp_path / 'store.db'}", check=False, env=env)  # fmt: skip
    assert time.monotonic() - started < 30
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert f"{silent_origin}proj/logs/1.err did not answer within 20 s (SCALESTUDY_DOWNLOAD_TIMEOUT" in line
    assert "nothing was written" in line and not (tmp_path / "store.db").exists()


# two imports of the datasets with raw files into a real store
def test_a_read_only_cache_reads_the_mirror_in_place_and_rewrites_nothing(tmp_path):
    """A run's identity and hash do not depend on where its raw file was read from: the cache, or (a cache that
    cannot be written, as in a container with a read-only home) the verified mirror copy in place."""
    require_raw_data()
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    datasets = ("hacksa-2019", "keras-multi-gpu-2017")
    first = run_module("scalestudy.ingest", *datasets, uri=uri, env={"SCALESTUDY_DATA_CACHE": str(tmp_path / "c")})
    assert "0 unchanged" in first.stdout
    blocked = tmp_path / "a-file"
    blocked.write_text("the cache cannot be made under a file, even by root\n")
    again = run_module("scalestudy.ingest", *datasets, uri=uri, env={"SCALESTUDY_DATA_CACHE": str(blocked / "c")})
    lines = again.stdout.strip().splitlines()
    assert len(lines) == 2 and all("': 0 created, 0 updated, " in line and line.endswith(" 0 deleted, 0 repaired")
                                   for line in lines), again.stdout  # fmt: skip
    table = load_runs(uri)
    described = table.loc[table.experiment == "hacksa-2019", "source_line"]
    assert len(described) == 16  # the 16 HackSA job logs (README's table)
