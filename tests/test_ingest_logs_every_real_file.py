"""`python -m scalestudy.ingest logs --dry-run`'s table, a row per run, compared cell by cell with the runs the logs
hold (read_logs, what the command then writes), for every real log of ../shared/reference it reads (issue 45, item
1: a row that printed another quantity than the run's while the summary stayed right): a row showing a copied
line's key, a throughput rounded or scaled wrongly, a run's model or workers from its neighbour, fails here.

The logs: seed 002's three Keras/tf_cnn_benchmarks logs (46 runs, 4 failed), the tf_cnn_benchmarks
--benchmark_log_dir folder and the MLPerf v1.0 result of ../shared/reference/logs. Read by their own importers and
checked there: the HackSA .err logs, the MLPerf corpus (tests/test_mlperf_golden.py: all 330 runs against an
independent table), the Horovod timelines, which need --model and the rest (test_ingest_horovod_timeline_values.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import shared_reference

from scalestudy.ingest.logs import LogOptions, command, read_logs, user_source

SHARED = shared_reference("logs", "keras-multi-gpu-2017")
pytestmark = [
    pytest.mark.may_skip,
    pytest.mark.skipif(SHARED is None, reason="../shared/reference (logs, keras) is not here"),
]
REF = SHARED or shared_reference()
KERAS = ["benchmark_batch_inception3_az-2xm-60.txt", "benchmark_inception3_resnet50_results_7gforce.txt",
         "benchmark_inception3_resnet50_results_az-2x-m60.txt"]  # fmt: skip
MLPERF = "logs/mlperf/training_results_v1.0/NVIDIA/results/dgxa100_ngc21.05_mxnet/resnet/result_0.txt"
HEADER = ["file", "format", "model", "workers", "throughput (img/s)", "status"]


def every_real_log() -> list[str]:
    if REF is None:
        return []
    paths = [REF / "keras-multi-gpu-2017" / name for name in KERAS]
    paths += [REF / "logs" / "tf_cnn_benchmarks_json", REF / MLPERF]
    return [str(path) for path in paths]


def cells(line: str, starts: list[int]) -> list[str]:
    """A table line cut at the header's column starts (cells are left-aligned, padded with blanks)."""
    ends = [*starts[1:], None]
    return [line[a:b].strip() for a, b in zip(starts, ends)]


def test_each_printed_row_is_the_run_the_logs_hold(capsys, monkeypatch, empty_store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    paths = every_real_log()
    assert command.main([*paths, "--experiment", "mine", "--platform", "p", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    starts = [out[0].index(name) for name in HEADER]
    printed = [cells(line, starts) for line in out[1:-1]]
    records = read_logs([Path(p) for p in paths], LogOptions(source=user_source("mine"), platform="p"))
    assert len(printed) == len(records) == 48  # 46 runs in seed 002's logs, 1 tf_cnn_benchmarks, 1 MLPerf
    for row, rec in zip(printed, records):
        number = rec.key.partition("#")[2]
        value = rec.metrics.get("throughput_total")
        assert row == [
            rec.tags["log_path"] + (f"#{number}" if number else ""), rec.tags["log_format"], rec.params["model"],
            str(rec.params["workers"]), "-" if value is None else f"{value:.1f}",
            "created" + (" (FAILED run)" if rec.status == "FAILED" else ""),
        ], rec.where  # fmt: skip
    failed = sum(rec.status == "FAILED" for rec in records)
    assert failed == 4  # the runs of seed 002's logs that end in an error (no Samples/sec)
    files = len({rec.tags["log_path"] for rec in records})
    summary = f"{len(records)} runs ({failed} failed) from {files} file(s) would be in experiment 'mine': "
    assert out[-1].startswith(f"{summary}{len(records)} created, 0 updated, 0 unchanged, 0 removed"), out[-1]
