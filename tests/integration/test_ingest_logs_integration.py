"""The end-to-end tests of tests/test_ingest_logs.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

from helpers import log_text_sha256, raw_dir, run_module
from test_ingest_logs import KERAS_AZ_RUNS, TRACE_RUNS, sha256

from scalestudy.store import load_runs


def test_cli_imports_reimports_unchanged_and_writes_nothing_on_bad_input(tmp_path):
    # two seed-002 logs keras-multi-gpu-2017's source.yaml lists: fetched, so make test has them without the mirror
    seed = raw_dir("keras-multi-gpu-2017")
    keras_az = seed / "benchmark_inception3_resnet50_results_az-2x-m60.txt"
    trace = seed / "benchmark_batch_inception3_az-2xm-60.txt"
    uri = f"sqlite:///{tmp_path / 'store' / 'store.db'}"
    args = ["logs", str(keras_az), str(trace), "--experiment", "az-2x-m60", "--platform", "az-2x-m60"]
    first = run_module("scalestudy.ingest", *args, uri=uri)
    assert "18 runs (0 failed) from 2 file(s)" in first.stdout and "18 created" in first.stdout
    again = run_module("scalestudy.ingest", *args, uri=uri)
    assert "0 created, 0 updated, 18 unchanged, 0 removed, 0 duplicates" in again.stdout
    runs = load_runs(uri)
    assert sorted(runs["throughput_total"]) == sorted([v for *_, v in KERAS_AZ_RUNS] + [v for _, _, v, _ in TRACE_RUNS])
    row = runs[runs["import_key"] == f"sha256:{log_text_sha256(trace)}#3"].iloc[0]
    assert (row["variable_update"], row["throughput_total"], row["source_line"]) == (
        "parameter_server (cpu)", 95.43, f"{trace.name}:162"
    )  # fmt: skip
    db = tmp_path / "store" / "store.db"
    before = sha256(db)
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(trace.read_text().split("\n")[:100]) + "\n")  # run 2 stops before its total
    bad = run_module("scalestudy.ingest", "logs", str(keras_az), str(cut), "--experiment", "az-2x-m60",
                     "--platform", "az-2x-m60", uri=uri, check=False)  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    assert f"{cut}:100: the run starting at line 56 stops with no 'total images/sec' line" in bad.stderr
    assert "nothing was written" in bad.stderr
    assert sha256(db) == before
