"""The end-to-end tests of tests/test_fetch.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

from helpers import REFERENCE, run_module

from scalestudy.ingest import read_source
from scalestudy.ingest.fetch import raw_files


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
