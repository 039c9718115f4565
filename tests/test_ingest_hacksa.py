"""hacksa-2019 importer: numbers read by hand from the raw logs, and malformed logs that must fail with file:line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from helpers import REFERENCE, dataset_copy, raw_dir

from scalestudy.ingest import hacksa
from scalestudy.schema import METRICS, SERIES, SchemaError

FOLDER = REFERENCE / "hacksa-2019"


@pytest.fixture(scope="module")
def logs():
    """The raw logs, fetched (from the mirror) into the cache: they are not committed."""
    return raw_dir("hacksa-2019") / "logs"


def utc_ms(text: str) -> int:
    """'2019-01-14T10:28:35.043435Z' -> unix ms."""
    return round(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp() * 1000)


def cet_ms(text: str) -> int:
    """A local (CET = UTC+1) '2019-01-14 11:27:15.060020' -> unix ms."""
    return utc_ms(datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").strftime("%Y-%m-%dT%H:%M:%S.%fZ")) - 3600_000


@pytest.fixture(scope="module")
def runs(logs):  # `logs` first: it skips, saying why, where the raw logs cannot be had
    return {rec.key: rec for rec in hacksa.read(FOLDER)}


@pytest.fixture
def copy(tmp_path):
    return dataset_copy(tmp_path, "hacksa-2019")


def test_one_run_per_log(runs, logs):
    assert len(runs) == 16
    assert set(runs) == {p.name for p in logs.glob("*.err")}
    models = {key: rec.params["model"] for key, rec in runs.items()}
    assert models["1.err"] == "resnet101_v2" and models["32.vgg_19.err"] == "vgg19"
    assert models["8.inception_v4.err"] == "inception4"
    for key, rec in runs.items():
        rec.validate()
        assert rec.params["workers"] == int(key.split(".")[0])
        assert rec.params["device"] == "V100" and rec.params["platform"] == "bsc-power9"
        assert rec.params["framework"] == "tensorflow" and rec.params["api"] == "tf.estimator+horovod"
        assert rec.params["data"] == "cifar10" and rec.params["batch_per_worker"] == 64
        assert rec.tags["log_file"] == key and rec.tags["source"] == "published" and rec.tags["citation"]
        assert rec.tags["source_line"].startswith(f"{key}:")
        assert rec.artifacts == {"log": str(logs / key)}  # the fetched copy
        assert set(rec.metrics) <= set(METRICS) and set(rec.series) <= set(SERIES)
        assert all(v == v and v > 0 for v in rec.metrics.values())  # never a zero or NaN for what is not known
        assert rec.start_ms < rec.end_ms


def test_resnet_1_gpu_by_hand(runs):
    rec = runs["1.err"]
    assert rec.status == "FINISHED" and rec.params["steps"] == 200
    init = 68.217699  # 11:28:23.277719 (line 45, the last 'Shuffle buffer filled') - 11:27:15.060020 (line 23)
    assert rec.metrics["time_init_s"] == pytest.approx(init, abs=1e-9)
    assert rec.metrics["time_total_s"] == 137.25749254226685
    assert rec.metrics["time_work_s"] == pytest.approx(137.25749254226685 - init, abs=1e-9)
    # line 103: the last average_examples_per_sec (global step 191), one rank
    assert rec.metrics["throughput_per_worker"] == 201.49380583255777
    assert rec.metrics["throughput_total"] == 201.49380583255777
    assert rec.tags["source_line"] == "1.err:23"
    assert rec.start_ms == cet_ms("2019-01-14 11:27:15.060020")
    assert rec.end_ms == rec.start_ms + 137257
    series = rec.series["step_throughput_total"]
    assert len(series) == 18 and [s for s, _, _ in series] == list(range(21, 192, 10))
    # line 51: the first current_examples_per_sec, stamped 10:28:35.043435 UTC = 11:28:35 CET
    assert series[0] == (21, utc_ms("2019-01-14T10:28:35.043435Z"), 203.70368155636982)
    assert series[-1] == (191, utc_ms("2019-01-14T10:29:29.074475Z"), 199.995973787299)
    # the first throughput point comes after the end of initialisation (checks the UTC+1 offset)
    assert series[0][1] > cet_ms("2019-01-14 11:28:23.277719")
    assert "throughput_note" not in rec.tags and "failure_reason" not in rec.tags


def test_resnet_2_gpus_sums_ranks(runs):
    rec = runs["2.err"]
    init = (cet_ms("2019-01-14 11:28:29.566116") - cet_ms("2019-01-14 11:27:15.539741")) / 1000  # lines 73 - 29
    assert rec.metrics["time_init_s"] == pytest.approx(74.026375, abs=1e-6) == pytest.approx(init, abs=1e-3)
    assert rec.metrics["time_work_s"] == pytest.approx(112.79737067222595 - 74.026375, abs=1e-9)
    last = [196.80245653858435, 196.78220822382707]  # lines 124 and 126, global step 91
    assert rec.metrics["throughput_per_worker"] == pytest.approx(sum(last) / 2)
    assert rec.metrics["throughput_total"] == pytest.approx(sum(last))
    series = rec.series["step_throughput_total"]
    assert len(series) == 8
    total = 196.03677964629966 + 195.875151484018  # lines 125 and 127
    assert series[-1] == (91, utc_ms("2019-01-14T10:29:05.055125Z"), pytest.approx(total))


def test_series_lengths_and_monotonic_timestamps(runs):
    lengths = {key: len(rec.series.get("step_throughput_total", [])) for key, rec in runs.items()}
    assert lengths == {
        "1.err": 18,
        "1.inception_v4.err": 18,
        "1.vgg_19.err": 48,
        "2.err": 8,
        "2.inception_v4.err": 8,
        "2.vgg_19.err": 23,
        "4.err": 0,
        "4.inception_v4.err": 3,
        "4.vgg_19.err": 11,
        "8.err": 1,
        "8.inception_v4.err": 1,
        "8.vgg_19.err": 5,
        "16.err": 0,
        "16.inception_v4.err": 0,
        "16.vgg_19.err": 1,
        "32.vgg_19.err": 1,
    }
    for rec in runs.values():
        series = rec.series.get("step_throughput_total", [])
        steps = [s for s, _, _ in series]
        stamps = [t for _, t, _ in series]
        assert steps == sorted(set(steps))
        assert stamps == sorted(stamps)
        if series:
            init_end = rec.start_ms + rec.metrics["time_init_s"] * 1000
            assert init_end < stamps[0] and stamps[-1] <= rec.end_ms
            # every logged step of these logs has one line per rank: total = per-worker mean x N at the last step
            per_worker, n = rec.metrics["throughput_per_worker"], rec.params["workers"]
            assert rec.metrics["throughput_total"] == pytest.approx(per_worker * n)


def test_32_gpus_sum_over_ranks(runs, logs):
    rec = runs["32.vgg_19.err"]
    assert rec.status == "FINISHED" and rec.params["workers"] == 32
    text = (logs / "32.vgg_19.err").read_text()
    values = [
        float(line.split("'value': ")[1].split(",")[0])
        for line in text.splitlines()
        if "'average_examples_per_sec'" in line
    ]
    assert len(values) == 32
    assert rec.metrics["throughput_total"] == pytest.approx(sum(values))
    assert rec.metrics["throughput_per_worker"] == pytest.approx(sum(values) / 32)
    assert rec.metrics["time_total_s"] == 67.19512629508972
    # 500 // 32 = 15 steps per rank by the job script, but every rank logs global_step = 30 and a benchmark line
    # at step 21: 31 steps per rank, 992 in all, twice the 1-GPU job's 500 (unequal work, issue 13)
    assert rec.params["steps"] == 31 * 32 and rec.tags["steps_per_rank"] == "31"
    assert "500 // 32 = 15" in rec.tags["steps_note"] and "other images" in rec.tags["steps_note"]
    assert "global_step = 30" in text and "global step 30" in rec.tags["steps_note"]
    assert runs["1.vgg_19.err"].params["steps"] == 500 and "steps_note" not in runs["1.vgg_19.err"].tags


def test_failed_runs(runs):
    rec = runs["4.err"]
    assert rec.status == "FAILED"
    assert "CANCELLED AT 2019-01-14T12:52:16 DUE TO TIME LIMIT" in rec.tags["failure_reason"]
    assert "4.err:193" in rec.tags["failure_reason"]
    assert set(rec.metrics) == {"time_init_s"}  # the shuffle buffer filled; nothing else is known
    assert rec.metrics["time_init_s"] == pytest.approx(
        (cet_ms("2019-01-14 12:39:04.918964") - cet_ms("2019-01-14 12:37:15.816283")) / 1000, abs=1e-3
    )
    assert rec.series == {}
    assert rec.end_ms == cet_ms("2019-01-14 12:52:16.000000")  # the Slurm cancellation, local time

    rec = runs["16.err"]
    assert rec.status == "FAILED"
    reason = rec.tags["failure_reason"]
    assert reason.startswith("slurmstepd: error: *** JOB 1112529") and "DUE TO TIME LIMIT" in reason
    assert "ORTE has lost communication with a remote daemon" in reason
    assert set(rec.metrics) == {"time_init_s"} and rec.series == {}
    assert [k for k, r in runs.items() if r.status == "FAILED"] == ["4.err", "16.err"]


def test_finished_without_throughput(runs):
    rec = runs["16.inception_v4.err"]
    assert rec.status == "FINISHED"
    # its ranks log only the logging hook's first interval (16.inception_v4.err:436-451): no steady one
    assert set(rec.metrics) == {"time_init_s", "time_total_s", "time_work_s", "time_first_interval_s"}
    first = [15.231, 15.235, 15.230, 15.230, 15.231, 15.230, 15.230, 15.229, 15.176, 15.231, 15.198, 15.176, 15.231,
             15.230, 15.187, 15.189]  # fmt: skip
    assert rec.metrics["time_first_interval_s"] == pytest.approx(sum(first) / 16)
    assert rec.metrics["time_total_s"] == 129.11303186416626
    assert rec.metrics["time_init_s"] == pytest.approx(
        (cet_ms("2019-01-14 21:05:03.906227") - cet_ms("2019-01-14 21:03:15.411175")) / 1000, abs=1e-3
    )
    assert rec.series == {}
    assert "each of the 16 ranks ran only 12 steps" in rec.tags["throughput_note"]
    assert rec.params["steps"] == 16 * 12  # 200 // 16 = 12 per rank: 192 steps' worth, not 200


def test_incomplete_step_group_uses_mean_times_n(copy):
    path = copy / "logs" / "2.err"
    lines = path.read_text().splitlines(keepends=True)
    assert "'average_examples_per_sec', 'value': 196.78220822382707" in lines[125]  # line 126
    assert "'current_examples_per_sec', 'value': 195.875151484018" in lines[126]  # line 127
    path.write_text("".join(lines[:125] + lines[127:]))
    rec = {r.key: r for r in hacksa.read(copy, copy / "logs")}["2.err"]
    assert rec.metrics["throughput_per_worker"] == 196.80245653858435
    assert rec.metrics["throughput_total"] == 2 * 196.80245653858435
    assert "1 of 2 ranks" in rec.tags["throughput_note"]
    assert rec.series["step_throughput_total"][-1][2] == 2 * 196.03677964629966
    assert "91 (1/2)" in rec.tags["throughput_note"]


def test_truncated_benchmark_line(copy):
    path = copy / "logs" / "2.vgg_19.err"
    lines = path.read_text().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if "Benchmark metric" in line)
    cut = lines[n][: len(lines[n]) // 2]
    path.write_text("".join(lines[:n]) + cut)
    with pytest.raises(SchemaError, match=rf"2\.vgg_19\.err:{n + 1}: 'Benchmark metric' entry does not parse"):
        hacksa.read(copy, copy / "logs")


def test_benchmark_line_without_a_key(copy):
    path = copy / "logs" / "1.err"
    lines = path.read_text().splitlines(keepends=True)
    lines[49] = lines[49].replace("'global_step': 21, ", "")  # line 50
    path.write_text("".join(lines))
    with pytest.raises(SchemaError, match=r"1\.err:50: 'Benchmark metric' entry lacks \['global_step'\]"):
        hacksa.read(copy, copy / "logs")


def test_unknown_model_in_file_name(copy):
    (copy / "logs" / "2.err").rename(copy / "logs" / "2.lenet.err")
    with pytest.raises(SchemaError, match=r"2\.lenet\.err:1: unknown model name 'lenet'"):
        hacksa.read(copy, copy / "logs")


def test_model_inside_log_must_match(copy):
    # 8.vgg_19.err renamed to 8.err: its model_dir names vgg_19, the file name means resnet_v2_101
    (copy / "logs" / "8.err").unlink()
    (copy / "logs" / "8.vgg_19.err").rename(copy / "logs" / "8.err")
    with pytest.raises(SchemaError, match=r"8\.err:18: the log's model_dir names cifar10_vgg_19\.8"):
        hacksa.read(copy, copy / "logs")


def test_missing_start_line(copy):
    path = copy / "logs" / "1.inception_v4.err"
    path.write_text(path.read_text().replace(" Date is now:", " Date was:"))
    n = len(path.read_text().splitlines())
    with pytest.raises(SchemaError, match=rf"1\.inception_v4\.err:{n}: no ' Date is now:' line"):
        hacksa.read(copy, copy / "logs")


def test_bad_training_took_and_bad_timestamp(copy):
    path = copy / "logs" / "1.err"
    good = path.read_text()
    path.write_text(good.replace("Training took 137.25749254226685 s", "Training took 137.2574.9254226685 s"))
    with pytest.raises(SchemaError, match=r"1\.err:108: 'Training took' value is not a positive number"):
        hacksa.read(copy, copy / "logs")
    path.write_text(good.replace("Date is now: 2019-01-14 11:27:15.060020", "Date is now: 2019-01-14 25:27:15.060020"))
    with pytest.raises(SchemaError, match=r"1\.err:23: timestamp '2019-01-14 25:27:15\.060020' does not parse"):
        hacksa.read(copy, copy / "logs")
    path.write_text(good.replace("'timestamp': '2019-01-14T10:28:41.334912Z'", "'timestamp': '2019-01-14 10:28:41'"))
    with pytest.raises(SchemaError, match=r"1\.err:56: benchmark timestamp"):
        hacksa.read(copy, copy / "logs")


@pytest.mark.parametrize(
    "model, workers, logged, bench, expected",
    [
        ("inception4", 1, 199, 191, (200, "")),  # the script's 200 fits the bounds 200..200
        ("vgg19", 8, 60, 61, (62, "")),  # 500 // 8 = 62 fits 62..70 and 62..71
        ("vgg19", 32, 30, 21, (31, "31 steps")),  # 500 // 32 = 15 does not fit 31..40 and 22..31: 31
        ("vgg19", 32, 30, None, (None, "31 to 40 steps")),  # without the benchmark line: not known
        ("inception4", 16, 11, None, (12, "")),
        ("inception4", 4, None, None, (50, "split assumed")),
    ],
)
def test_steps_per_rank_from_the_hooks_bounds(model, workers, logged, bench, expected):
    from scalestudy.ingest.hacksa import steps_per_rank

    per_rank, note = steps_per_rank(model, workers, logged, bench)
    assert per_rank == expected[0]
    assert (expected[1] in note) if expected[1] else note == ""


def test_the_logging_hooks_first_and_steady_intervals_by_hand(runs):
    """The warm-up the throughput hook cannot see: the logging hook's seconds for steps 0 to 10 against ten steady
    steps. ResNet-v2-101 on 8 GPUs: logs/8.err:261-268 at step 10, the step-20 lines (5 x 3.337, 3 x 3.335),
    the last interval it logs; VGG-19 on 1 GPU: 1.vgg_19.err:45 (4.238 s) and 48 later intervals, median 3.764 s."""
    eight = runs["8.err"].metrics
    assert eight["time_first_interval_s"] == pytest.approx(
        (9.565 + 9.561 + 9.551 + 9.562 + 9.562 + 9.526 + 9.464 + 9.526) / 8
    )
    assert eight["time_steady_interval_s"] == pytest.approx((5 * 3.337 + 3 * 3.335) / 8)
    one = runs["1.vgg_19.err"].metrics
    assert one["time_first_interval_s"] == 4.238 and one["time_steady_interval_s"] == pytest.approx(3.764)
    assert one["time_first_interval_s"] / one["time_steady_interval_s"] == pytest.approx(1.126, abs=1e-3)
