"""hacksa-2019 (ingest/hacksa.py, hacksa_log.py, tf_hooks.py): every param, metric, tag, series point, status and
time of every run, each log parsed in its own test (in-process: a mutant of the parser is caught here, not only
through the published store), against values read off the raw logs by hand (file:line in the comments).

Times: ' Date is now:' and TensorFlow's lines are CET (UTC+1), the benchmark hook's lines UTC ('...Z')."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import REFERENCE, raw_dir

from scalestudy.ingest import hacksa, hacksa_log, read_source
from scalestudy.schema import SchemaError

FOLDER = REFERENCE / "hacksa-2019"
COMMON = {"framework": "tensorflow", "api": "tf.estimator+horovod", "device": "V100", "data": "cifar10",
          "batch_per_worker": 64, "platform": "bsc-power9"}  # fmt: skip
MODELS = {"": "resnet101_v2", "inception_v4": "inception4", "vgg_19": "vgg19"}


@pytest.fixture(scope="module")
def logs():
    """The raw logs, fetched (from the mirror) into the cache: they are not committed."""
    return raw_dir("hacksa-2019") / "logs"


@pytest.fixture(scope="module")
def source():
    return read_source(FOLDER)


def cet_ms(text: str) -> int:
    """A local (CET = UTC+1) '2019-01-14 11:27:15.060020' -> unix ms."""
    return round(datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp() * 1000) - 3600_000


def utc_ms(text: str) -> int:
    return round(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp() * 1000)


# One row per finished log with benchmark lines:
#   start (' Date is now:', its line), init end (the last 'Shuffle buffer filled', CET) and time_init_s = the two's
#   difference, 'Training took' (its line) = time_total_s; the last benchmark step, the lines of its
#   average_examples_per_sec entries (one per rank) and their sum = throughput_total (per worker: sum / ranks);
#   the series (steps; first and last point: step, the latest timestamp of the step's lines, the sum of its
#   current_examples_per_sec); the logging hook's `global_step = 10 (X sec)` lines (their mean) and the median over
#   the later steps of the ranks' mean (time_first/steady_interval_s); the steps per rank (200 // N, VGG-19 500 // N).
FINISHED = [
    # 1.err:23, :45, :108; :103 at step 191; series steps 21..191, :51 and :103-104; hook :48 (6.166 s) and
    # :49-102, 18 intervals, median (3.177 + 3.183) / 2 (steps 100 and 110)
    ("1.err", (23, "2019-01-14 11:27:15.060020"), (45, "2019-01-14 11:28:23.277719"), 68.217699,
     (108, 137.25749254226685), (191, 201.49380583255777),
     (18, (21, "2019-01-14T10:28:35.043435Z", 203.70368155636982),
      (191, "2019-01-14T10:29:29.074475Z", 199.995973787299)),
     6.166, (3.177 + 3.183) / 2, 200),
    # 1.inception_v4.err:23, :41, :104; :99; :47, :99-100; hook :44, :45-98 (18, median (6.367 + 6.370) / 2)
    ("1.inception_v4.err", (23, "2019-01-14 12:14:41.372269"), (41, "2019-01-14 12:15:48.936074"), 67.563805,
     (104, 203.52986979484558), (191, 100.6423504398294),
     (18, (21, "2019-01-14T11:16:10.720306Z", 101.88855168384652),
      (191, "2019-01-14T11:17:58.903567Z", 99.97661660649992)),
     10.923, (6.367 + 6.370) / 2, 200),
    # 1.vgg_19.err:23, :42, :201; :196 at step 491; :48, :196-197; hook :45, :46-195 (49 intervals, median 3.764)
    ("1.vgg_19.err", (23, "2018-12-31 20:16:55.858277"), (42, "2018-12-31 20:17:27.256703"), 31.398426,
     (201, 225.45039129257202), (491, 170.23679017254648),
     (48, (21, "2018-12-31T19:17:40.978192Z", 172.36430046577803),
      (491, "2018-12-31T19:20:37.719555Z", 170.39813368862534)),
     4.238, 3.764, 500),
    # 2.err:29, :73, :134; :124 + :126 at step 91; :83 + :85, :124-127; hook :78-79 (7.243 twice), :80-123
    # (8 steps' rank means, median of the 4th and 5th: (3.2475 + 3.252) / 2)
    ("2.err", (29, "2019-01-14 11:27:15.539741"), (73, "2019-01-14 11:28:29.566116"), 74.026375,
     (134, 112.79737067222595), (91, 393.5846647624114),
     (8, (21, "2019-01-14T10:28:42.282863Z", 394.34888804306354),
      (91, "2019-01-14T10:29:05.055125Z", 391.91193113031767)),
     7.243, (3.2475 + 3.252) / 2, 100),
    # 2.inception_v4.err:32, :67, :128; :118-119; :78-79, :118-121; hook :72-73 (15.390, 15.378), :74-117 (8 steps,
    # median (6.588 + 6.588) / 2)
    ("2.inception_v4.err", (32, "2019-01-14 12:14:35.010120"), (67, "2019-01-14 12:16:24.855508"), 109.845388,
     (128, 189.19382190704346), (91, 194.2638902950576),
     (8, (21, "2019-01-14T11:16:51.380963Z", 195.9438384094384),
      (91, "2019-01-14T11:17:37.560133Z", 192.8857766332355)),
     (15.390 + 15.378) / 2, 6.588, 100),
    # 2.vgg_19.err:31, :67, :226; :216-217 at step 241; :77 + :79, :216-219; hook :72-73 (4.831, 4.830), :74-215
    # (23 steps, median 3.78: step 140's 3.780 twice)
    ("2.vgg_19.err", (31, "2018-12-31 20:16:56.004772"), (67, "2018-12-31 20:17:39.814342"), 43.80957,
     (226, 144.92286849021912), (241, 338.74509899292576),
     (23, (21, "2018-12-31T19:17:53.809739Z", 340.41873853145455),
      (241, "2018-12-31T19:19:16.958347Z", 337.8264894227716)),
     (4.831 + 4.830) / 2, 3.78, 250),
    # 4.inception_v4.err:43, :115, :172; :156-162 (4 lines) at step 41; :133-139, :156-163; hook :124-127
    # (15.830, 15.783, 15.774, 15.774), :128-155 (3 steps: 6.478, 6.479, 6.496: median 6.479)
    ("4.inception_v4.err", (43, "2019-01-14 12:33:57.683360"), (115, "2019-01-14 12:35:49.458810"), 111.77545,
     (172, 157.6794126033783), (41, 394.6782281682887),
     (3, (21, "2019-01-14T11:36:15.876422Z", 394.93557468243694),
      (41, "2019-01-14T11:36:28.853305Z", 394.00901999386514)),
     (15.830 + 15.783 + 15.774 + 15.774) / 4, 6.479, 50),
    # 4.vgg_19.err:43, :119, :280; :264-270 at step 121; :138-143, :264-271; hook :128-131 (4.851, 4.838, 4.832,
    # 4.833), later 11 steps, median 3.87525 (step 120: 3.875 x 3 + 3.876)
    ("4.vgg_19.err", (43, "2018-12-31 20:17:02.242019"), (119, "2018-12-31 20:17:50.187486"), 47.945467,
     (280, 103.03410959243774), (121, 660.4532049482783),
     (11, (21, "2018-12-31T19:18:04.616949Z", 662.3731350989372),
      (121, "2018-12-31T19:18:43.390231Z", 657.4573233728579)),
     (4.851 + 4.838 + 4.832 + 4.833) / 4, 3.87525, 125),
    # 8.err:83, :244, :317; :277-289 (8 lines) at step 21, the one step; :277-292; hook :261-268, the step-20 lines
    # (5 x 3.337, 3 x 3.335) the only later ones
    ("8.err", (83, "2019-01-14 17:47:46.753476"), (244, "2019-01-14 17:49:34.875523"), 108.122047,
     (317, 125.42283892631531), (21, 1532.1853777886),
     (1, (21, "2019-01-14T16:49:50.245854Z", 1532.1853777886),
      (21, "2019-01-14T16:49:50.245854Z", 1532.1853777886)),
     (9.565 + 9.561 + 9.551 + 9.562 + 9.562 + 9.526 + 9.464 + 9.526) / 8, (5 * 3.337 + 3 * 3.335) / 8, 25),
    # 8.inception_v4.err:68, :211, :272; :244-258 at step 21; :244-259; hook :228-235 (mean 15.184375), step 20: 6.485
    ("8.inception_v4.err", (68, "2019-01-14 17:50:52.078846"), (211, "2019-01-14 17:52:40.571143"), 108.492297,
     (272, 137.67269611358643), (21, 789.6056152371212),
     (1, (21, "2019-01-14T16:53:06.826845Z", 789.6056152371211),
      (21, "2019-01-14T16:53:06.826845Z", 789.6056152371211)),
     15.184375, 6.485, 25),
    # 8.vgg_19.err:65, :220, :387; :349-363 at step 61; :258-268, :349-364; hook :237-244 (mean 4.965), 5 later
    # steps, median 3.86125. 500 // 8 = 62 per rank: 496 steps.
    ("8.vgg_19.err", (65, "2018-12-31 20:17:02.351738"), (220, "2018-12-31 20:17:46.904856"), 44.553118,
     (387, 74.8300268650055), (61, 1325.9147116557324),
     (5, (21, "2018-12-31T19:18:00.914084Z", 1332.5909033344724),
      (61, "2018-12-31T19:18:16.379575Z", 1326.3230566365205)),
     4.965, 3.86125, 62),
    # 16.vgg_19.err:119, :421, :572; :486-516 (16 lines) at step 21; :486-517; hook :454-469 (mean 4.898125), step 20
    # and 30 (median of 2: 3.8725). 500 // 16 = 31 per rank.
    ("16.vgg_19.err", (119, "2018-12-31 20:17:01.381167"), (421, "2018-12-31 20:17:48.235400"), 46.854233,
     (572, 65.32259011268616), (21, 2644.979192023668),
     (1, (21, "2018-12-31T19:18:02.565049Z", 2644.979192023668),
      (21, "2018-12-31T19:18:02.565049Z", 2644.979192023668)),
     4.898125, 3.8725, 31),
    # 32.vgg_19.err:211, :826, :1089; :955-1017 (32 lines) at step 21; :955-1018; hook :891-922 (mean 5.0175), later
    # steps 20 and 30 (median 3.90703125). Steps per rank 31, not 500 // 32 = 15 (steps_note, below).
    ("32.vgg_19.err", (211, "2018-12-31 20:58:37.410456"), (826, "2018-12-31 20:59:25.894856"), 48.4844,
     (1089, 67.19512629508972), (21, 5247.6021945620705),
     (1, (21, "2018-12-31T19:59:40.515033Z", 5247.6021945620705),
      (21, "2018-12-31T19:59:40.515033Z", 5247.6021945620705)),
     5.0175, 3.90703125, 31),
]  # fmt: skip


def params_of(name: str, workers: int, **more) -> dict:
    model = MODELS[name.removesuffix(".err").partition(".")[2]]
    return {"model": model, "workers": workers, **COMMON, **more}


def published(name: str, line: int) -> dict:
    return {"log_file": name, "source_line": f"{name}:{line}", "device_name": "Tesla V100-SXM2-16GB"}  # e.g. 1.err:33


@pytest.mark.parametrize("row", FINISHED, ids=[row[0] for row in FINISHED])
def test_every_value_of_a_finished_run(logs, source, row):
    name, (start_line, start), (init_line, init_end), init_s, (took_line, took), (step, total), series, first, steady, \
        per_rank = row  # fmt: skip
    workers = int(name.split(".")[0])
    rec = hacksa.read_log(logs / name, source)
    assert rec.status == "FINISHED" and rec.key == name and rec.experiment == "hacksa-2019"
    assert rec.where == f"{logs / name}:{start_line}" and rec.artifacts == {"log": str(logs / name)}
    assert rec.start_ms == cet_ms(start)
    assert rec.end_ms == cet_ms(start) + round(took * 1000)  # start + 'Training took'
    assert (cet_ms(init_end) - cet_ms(start)) / 1000 == pytest.approx(init_s, abs=1e-3)
    assert rec.params == params_of(name, workers, steps=per_rank * workers)
    assert rec.metrics == {
        "time_init_s": pytest.approx(init_s, abs=1e-9),
        "time_total_s": took,
        "time_work_s": pytest.approx(took - init_s, abs=1e-9),
        "time_first_interval_s": pytest.approx(first, rel=1e-12),
        "time_steady_interval_s": pytest.approx(steady, rel=1e-12),
        "throughput_per_worker": pytest.approx(total / workers, rel=1e-12),
        "throughput_total": pytest.approx(total, rel=1e-12),
    }
    assert set(rec.tags) - {"source", "citation", "dataset", "source_url", "mlflow.note.content"} == {
        "log_file", "source_line", "device_name", "last_benchmark_step", "steps_per_rank"
    } | ({"steps_note"} if name == "32.vgg_19.err" else set())  # fmt: skip
    assert {k: rec.tags[k] for k in published(name, start_line)} == published(name, start_line)
    assert rec.tags["last_benchmark_step"] == str(step) and rec.tags["steps_per_rank"] == str(per_rank)
    n, first_point, last_point = series
    got = rec.series["step_throughput_total"]
    assert list(rec.series) == ["step_throughput_total"] and len(got) == n
    assert [s for s, _, _ in got] == list(range(21, step + 1, 10))
    for (s, stamp, value), point in ((first_point, got[0]), (last_point, got[-1])):
        assert point == (s, utc_ms(stamp), pytest.approx(value, rel=1e-12))
    assert rec.tags["source_line"] == f"{name}:{start_line}" and took_line > init_line > start_line
    if name == "32.vgg_19.err":
        # every rank logs `global_step = 30` last and its benchmark line at step 21 (:955): 31 to 40 and 22 to 31
        # steps per rank, so 31, not the script's 500 // 32 = 15
        assert rec.tags["steps_note"] == (
            "each rank ran 31 steps (last logged global step 30, last benchmark step 21), while the job script's "
            "split would be 500 // 32 = 15 steps per rank: this job processed other images"
        )


def test_failed_4_gpus_in_full(logs, source):
    # 4.err: start :43 12:37:15.816283, the last shuffle line :132 12:39:04.918964; no 'Training took'; a Horovod
    # stall at :143 (ranks 1 and 3 missing), then Slurm's cancellation at :193, the log's last line and latest time
    rec = hacksa.read_log(logs / "4.err", source)
    assert rec.status == "FAILED" and rec.params == params_of("4.err", 4)  # no steps: the job did not finish
    assert rec.metrics == {"time_init_s": pytest.approx(109.102681, abs=1e-9)}  # 12:39:04.918964 - 12:37:15.816283
    assert rec.start_ms == cet_ms("2019-01-14 12:37:15.816283")
    assert rec.end_ms == cet_ms("2019-01-14 12:52:16.000000")  # CANCELLED AT 2019-01-14T12:52:16 (local)
    assert rec.series == {}
    stall = "HorovodAllreduce_train_op_gradients_resnet_v2_101_block3_unit_1_bottleneck_v2_shortcut_BiasAdd_grad_tuple"
    assert rec.tags["failure_reason"] == (
        "slurmstepd: error: *** JOB 1112527 ON p9r3n05 CANCELLED AT 2019-01-14T12:52:16 DUE TO TIME LIMIT *** "
        f"(4.err:193); also Horovod stall: stalled op {stall}_control_dependency_1_0 [missing ranks: 1, 3] (4.err:143)"
    )
    assert rec.tags["throughput_note"] == (
        "no 'Benchmark metric' line in the log: the job ended before the first logged step "
        "(last global step in the log: 0)"
    )
    assert set(rec.tags) - {"source", "citation", "dataset", "source_url", "mlflow.note.content"} == {
        "log_file", "source_line", "device_name", "failure_reason", "throughput_note"
    }  # fmt: skip


def test_failed_16_gpus_in_full(logs, source):
    # 16.err: start :116, last shuffle line :467; stall :502 (ranks 3, 7), Slurm :548, Open MPI :550 (the three
    # kinds, the most telling first); the cancellation's time 20:43:19 is the log's latest
    rec = hacksa.read_log(logs / "16.err", source)
    assert rec.status == "FAILED" and rec.params == params_of("16.err", 16)
    assert rec.metrics == {"time_init_s": pytest.approx(109.725765, abs=1e-9)}  # 20:30:28.541361 - 20:28:38.815596
    assert rec.start_ms == cet_ms("2019-01-14 20:28:38.815596")
    assert rec.end_ms == cet_ms("2019-01-14 20:43:19.000000")
    stall = "HorovodAllreduce_train_op_gradients_resnet_v2_101_block3_unit_1_bottleneck_v2_shortcut_BiasAdd_grad_tuple"
    assert rec.tags["failure_reason"] == (
        "slurmstepd: error: *** JOB 1112529 ON p9r3n04 CANCELLED AT 2019-01-14T20:43:19 DUE TO TIME LIMIT *** "
        "(16.err:548); also Open MPI: ORTE has lost communication with a remote daemon. (16.err:550); "
        f"also Horovod stall: stalled op {stall}_control_dependency_1_0 [missing ranks: 3, 7] (16.err:502)"
    )
    assert rec.tags["throughput_note"].endswith("(last global step in the log: 0)")


def test_finished_without_benchmark_lines_in_full(logs, source):
    # 16.inception_v4.err: start :113 21:03:15.411175, last shuffle :403 21:05:03.906227, 'Training took' :478;
    # the logging hook's 16 step-10 lines (:436-451), the last `global_step = 10`: 11 to 20 steps per rank, and the
    # script's 200 // 16 = 12 fits; no benchmark line (the hook's first is at step 21)
    rec = hacksa.read_log(logs / "16.inception_v4.err", source)
    assert rec.status == "FINISHED" and rec.params == params_of("16.inception_v4.err", 16, steps=192)
    first = [15.231, 15.235, 15.230, 15.230, 15.231, 15.230, 15.230, 15.229, 15.176, 15.231, 15.198, 15.176, 15.231,
             15.230, 15.187, 15.189]  # fmt: skip
    assert rec.metrics == {
        "time_init_s": pytest.approx(108.495052, abs=1e-9),
        "time_total_s": 129.11303186416626,
        "time_work_s": pytest.approx(129.11303186416626 - 108.495052, abs=1e-9),
        "time_first_interval_s": pytest.approx(sum(first) / 16, rel=1e-12),
    }
    assert rec.end_ms == cet_ms("2019-01-14 21:03:15.411175") + 129113
    assert rec.series == {} and "last_benchmark_step" not in rec.tags and "steps_note" not in rec.tags
    assert rec.tags["steps_per_rank"] == "12"
    assert rec.tags["throughput_note"] == (
        "no 'Benchmark metric' line in the log: the benchmark hook first logs at global step 21, and each of the 16 "
        "ranks ran only 12 steps"
    )


# --- Logs edited in tmp_path to reach each refusal and each branch no real log takes; each test says what it
# changed. The messages are compared whole: file:line and the text are what a user gets.

BENCH_50 = (  # 1.err:50, the first benchmark line
    "INFO:tensorflow:Benchmark metric: {'name': 'average_examples_per_sec', 'value': 203.70368155636982, 'unit': None, "
    "'global_step': 21, 'timestamp': '2019-01-14T10:28:35.043211Z', 'extras': []}"
)


def edited(logs, tmp_path, name: str, edits=None, *, keep: int | None = None, as_name: str | None = None) -> Path:
    """A copy of the real log `name`: line N replaced by edits[N] (a text, a list of lines, or None: dropped), or
    `edits` a function of each line (returning the same kinds); only the first `keep` lines where given."""
    lines = (logs / name).read_text().split("\n")  # the last item: '' after the final newline
    ending = lines.pop()
    if keep is not None:
        lines = lines[:keep]
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        new = edits(line) if callable(edits) else (edits or {}).get(number, line)
        out.extend([] if new is None else [new] if isinstance(new, str) else new)
    path = tmp_path / (as_name or name)
    path.write_text("\n".join(out) + "\n" + ending)
    return path


def refusal(path: Path, source) -> str:
    with pytest.raises(SchemaError) as err:
        hacksa.read_log(path, source)
    return str(err.value)


def test_file_names_refused(logs, source, tmp_path):
    for name, said in [
        ("x.err", "file name is not 'N.err' or 'N.<model>.err'"),
        ("1.err.txt", "file name is not 'N.err' or 'N.<model>.err'"),
        ("0.err", "file name gives 0 GPUs"),
    ]:
        path = edited(logs, tmp_path, "1.err", as_name=name)
        assert refusal(path, source) == f"{path}:1: {said}"
    path = edited(logs, tmp_path, "1.err", as_name="1.lenet.err")
    assert refusal(path, source).startswith(f"{path}:1: unknown model name 'lenet' (known: ")


def test_model_dir_and_gpu_refused(logs, source, tmp_path):
    model_dir = (logs / "1.err").read_text().split("\n")[17]  # 1.err:18, '_model_dir': '.../cifar10_resnet_v2_101.1'
    assert "cifar10_resnet_v2_101.1'" in model_dir
    path = edited(logs, tmp_path, "1.err", {18: model_dir.replace("resnet_v2_101.1'", "resnet_v2_101.2'")})
    assert refusal(path, source) == (
        f"{path}:18: the log's model_dir names cifar10_resnet_v2_101.2, but the file name says resnet101_v2 on 1 GPUs"
    )
    path = edited(logs, tmp_path, "1.err", {18: model_dir.replace("resnet_v2_101.1'", "lenet.1'")})
    assert refusal(path, source).startswith(f"{path}:18: unknown model name 'lenet' (known: ")
    # 1.err:33 'name: Tesla V100-SXM2-16GB major: 7 ...' made a P100: two GPU kinds in one job
    p100 = "name: Tesla P100-PCIE-16GB major: 6 minor: 0 memoryClockRate(GHz): 1.3"
    path = edited(logs, tmp_path, "1.err", {33: p100})
    kinds = "['Tesla P100-PCIE-16GB', 'Tesla V100-SXM2-16GB']"
    assert refusal(path, source) == f"{path}:1: the log names several GPU kinds: {kinds}"


SHUFFLE_45 = (
    "2019-01-14 11:28:23.277719: I tensorflow/core/kernels/data/shuffle_dataset_op.cc:129] Shuffle buffer filled."
)


def test_initialisation_bounds(logs, source, tmp_path):
    # 1.err:45, the shuffle line, 1 us before the start (:23, 11:27:15.060020): refused; at the start itself: 0 s
    path = edited(logs, tmp_path, "1.err", {45: SHUFFLE_45.replace("11:28:23.277719", "11:27:15.060019")})
    assert refusal(path, source) == f"{path}:45: shuffle buffer filled before the job's start (line 23)"
    path = edited(logs, tmp_path, "1.err", {45: SHUFFLE_45.replace("11:28:23.277719", "11:27:15.060020")})
    rec = hacksa.read_log(path, source)
    assert rec.metrics["time_init_s"] == 0.0 and rec.metrics["time_work_s"] == 137.25749254226685
    # 'Training took' as long as the initialisation (68.217699 s): no work time, refused
    took = " ---------------------- Training took {} s ----------------------"  # 1.err:108
    path = edited(logs, tmp_path, "1.err", {108: took.format("68.217699")})
    assert refusal(path, source) == (
        f"{path}:108: 'Training took' 68.217699 s is not longer than the initialisation (68.218 s)"
    )
    # half a second longer: accepted as times, but the benchmark lines (from :50, 10:28:35Z) now come after the
    # end (11:27:15.060 + 68.718 s = 10:28:23.778Z)
    path = edited(logs, tmp_path, "1.err", {108: took.format("68.717699")})
    assert refusal(path, source) == (
        f"{path}:50: benchmark line comes after the end of training (start line 23 + 'Training took' line 108): "
        "is CLUSTER_UTC_OFFSET right for this log?"
    )


def test_benchmark_lines_against_the_start_and_the_end(logs, source, tmp_path):
    last = (logs / "1.err").read_text().split("\n")[103]  # 1.err:104, the last benchmark line (10:29:29.074475Z)
    # the end: start 11:27:15.060 CET + 137.257 s = 10:29:32.317Z; a line stamped then is in, 1 ms later out
    path = edited(logs, tmp_path, "1.err", {104: last.replace("10:29:29.074475Z", "10:29:32.317000Z")})
    rec = hacksa.read_log(path, source)
    assert rec.series["step_throughput_total"][-1] == (191, utc_ms("2019-01-14T10:29:32.317000Z"), 199.995973787299)
    assert rec.end_ms == utc_ms("2019-01-14T10:29:32.317000Z")
    path = edited(logs, tmp_path, "1.err", {104: last.replace("10:29:29.074475Z", "10:29:32.318000Z")})
    assert refusal(path, source) == (
        f"{path}:104: benchmark line comes after the end of training (start line 23 + 'Training took' line 108): "
        "is CLUSTER_UTC_OFFSET right for this log?"
    )
    # the end of initialisation, 11:28:23.277719 CET (:45) = 10:28:23.278Z in whole ms: a line then is in
    path = edited(logs, tmp_path, "1.err", {50: BENCH_50.replace("10:28:35.043211Z", "10:28:23.278000Z")})
    assert hacksa.read_log(path, source).status == "FINISHED"
    path = edited(logs, tmp_path, "1.err", {50: BENCH_50.replace("10:28:35.043211Z", "10:28:23.277000Z")})
    assert refusal(path, source) == (
        f"{path}:50: benchmark line precedes the end of initialisation (line 45): is CLUSTER_UTC_OFFSET right for "
        "this log?"
    )
    # 2.err: two shuffle lines, :72 (11:28:29.258150) and :73 (11:28:29.566116); at the same time, the later line
    # is the end of initialisation
    shuffle = (logs / "2.err").read_text().split("\n")[71]
    first_bench = (logs / "2.err").read_text().split("\n")[81]  # 2.err:82, 10:28:42.282Z
    path = edited(logs, tmp_path, "2.err", {
        72: shuffle.replace("11:28:29.258150", "11:28:29.566116"),
        82: first_bench.replace("10:28:42.28", "10:28:29.28"),
    })  # fmt: skip
    assert refusal(path, source) == (
        f"{path}:82: benchmark line precedes the end of initialisation (line 73): is CLUSTER_UTC_OFFSET right for "
        "this log?"
    )
    # 1.err:103 (average_examples_per_sec at step 191) twice: two lines for one rank
    average = (logs / "1.err").read_text().split("\n")[102]
    path = edited(logs, tmp_path, "1.err", {103: [average, average]})
    assert refusal(path, source) == (
        f"{path}:104: 2 'average_examples_per_sec' lines for global step 191, but the job has 1 ranks"
    )


def test_ranks_that_did_not_stop(logs, source, tmp_path):
    path = edited(logs, tmp_path, "2.err", {131: None})  # 2.err:131 'Stopping train for 1' dropped: 133 lines
    assert refusal(path, source) == (
        f"{path}:133: the log ends before rank(s) 1 logged 'Stopping train' (each of the 2 ranks does): "
        "a log cut short?"
    )
    # 16.vgg_19.err without the 'Stopping train for R' lines of ranks 0 to 8 (:551-582): 582 - 9 lines, the first
    # 8 ranks named; 8.err without its 8 (:302-316): all 8 named
    path = edited(
        logs, tmp_path, "16.vgg_19.err", lambda line: None if re.search(r"Stopping train for [0-8] -", line) else line
    )
    assert refusal(path, source) == (
        f"{path}:573: the log ends before rank(s) 0, 1, 2, 3, 4, 5, 6, 7 and 1 more logged 'Stopping train' "
        "(each of the 16 ranks does): a log cut short?"
    )
    path = edited(logs, tmp_path, "8.err", lambda line: None if "Stopping train for" in line else line)
    assert refusal(path, source) == (
        f"{path}:309: the log ends before rank(s) 0, 1, 2, 3, 4, 5, 6, 7 logged 'Stopping train' "
        "(each of the 8 ranks does): a log cut short?"
    )


def test_a_failed_run_needs_a_reason_and_ends_at_its_latest_time(logs, source, tmp_path):
    # 4.err cut before Slurm's line (:193): the Horovod stall (:143) alone does not say the job ended
    path = edited(logs, tmp_path, "4.err", keep=192)
    assert refusal(path, source) == (
        f"{path}:192: the log ends without 'Training took' and without a line saying why the job stopped (Slurm, "
        "Open MPI or a Python error): a log cut short?"
    )
    # a second ' Date is now:' line (job scripts print one at the end too) before Slurm's: the run still starts at
    # the first (:43), and ends at the latest time of the log, 13:00 (not at the last line read, 12:52:16)
    slurm = (logs / "4.err").read_text().split("\n")[192]
    path = edited(logs, tmp_path, "4.err", {193: [" Date is now: 2019-01-14 13:00:00.000000", slurm]})
    rec = hacksa.read_log(path, source)
    assert rec.status == "FAILED" and rec.start_ms == cet_ms("2019-01-14 12:37:15.816283")
    assert rec.end_ms == cet_ms("2019-01-14 13:00:00.000000") and rec.tags["source_line"] == "4.err:43"
    assert "(4.err:194)" in rec.tags["failure_reason"]
    # a line quoting a cancellation time that is not Slurm's is no time of the log
    path = edited(logs, tmp_path, "4.err", {193: ["echo job CANCELLED AT 2019-01-14T13:30:00", slurm]})
    assert hacksa.read_log(path, source).end_ms == cet_ms("2019-01-14 12:52:16.000000")
    path = edited(logs, tmp_path, "4.err", {193: slurm.replace("T12:52:16", "T25:52:16")})
    assert refusal(path, source) == f"{path}:193: timestamp '2019-01-14T25:52:16' does not parse"


def test_steps_with_ranks_missing(logs, source, tmp_path):
    # 4.inception_v4.err without a current_examples_per_sec line at step 21 (:139) and one at step 41 (:163): each
    # step's total is the mean of its 3 lines x 4 ranks
    path = edited(logs, tmp_path, "4.inception_v4.err", {139: None, 163: None})
    rec = hacksa.read_log(path, source)
    series = rec.series["step_throughput_total"]
    step_21 = (98.73830874348336 + 98.7310382551366 + 98.73787291980821) / 3 * 4  # :133, :135, :138
    step_41 = (98.50422739787123 + 98.50713730125214 + 98.50412980160718) / 3 * 4  # :157, :159, :161
    step_31 = 98.76936018381626 + 98.77536418880574 + 98.77035958921373 + 98.77674535859373  # :145-151, all 4
    assert [(s, v) for s, _, v in series] == [
        (21, pytest.approx(step_21, rel=1e-12)),
        (31, pytest.approx(step_31, rel=1e-12)),
        (41, pytest.approx(step_41, rel=1e-12)),
    ]
    assert rec.tags["throughput_note"] == (
        "step_throughput_total is mean x 4 at steps with missing ranks: 21 (3/4), 41 (3/4)"
    )
    assert rec.metrics["throughput_total"] == 394.6782281682887  # the average lines are all there
    # and without one of step 41's average_examples_per_sec lines (:162) too: their mean x 4, and both notes
    path = edited(logs, tmp_path, "4.inception_v4.err", {139: None, 162: None, 163: None})
    rec = hacksa.read_log(path, source)
    averages = [98.67049004746953, 98.66937539507872, 98.66960025784994]  # :156, :158, :160
    assert rec.metrics["throughput_per_worker"] == pytest.approx(sum(averages) / 3, rel=1e-12)
    assert rec.metrics["throughput_total"] == pytest.approx(sum(averages) / 3 * 4, rel=1e-12)
    assert rec.tags["throughput_note"] == (
        "last logged step 41 has 3 of 4 ranks' average_examples_per_sec lines: per-worker throughput is their "
        "mean, total = mean x 4; step_throughput_total is mean x 4 at steps with missing ranks: 21 (3/4), 41 (3/4)"
    )


def test_a_log_that_names_no_gpu(logs, source, tmp_path):
    # 1.err without its two 'name: Tesla V100-SXM2-16GB' lines (:33, :40): the README's V100, no device_name
    path = edited(logs, tmp_path, "1.err", {33: None, 40: None})
    rec = hacksa.read_log(path, source)
    assert rec.params["device"] == "V100" and "device_name" not in rec.tags


def test_a_python_error_as_the_reason(logs, source, tmp_path):
    # 4.err cut before Slurm's line, ended instead by a Python error of more than the 200 characters quoted
    error = "tensorflow.python.framework.errors_impl.UnavailableError: " + "the input pipeline lost its shards; " * 6
    path = edited(logs, tmp_path, "4.err", {193: error})
    rec = hacksa.read_log(path, source)
    assert rec.status == "FAILED" and rec.end_ms == cet_ms("2019-01-14 12:39:04.918964")  # the latest time, :132
    stall = "HorovodAllreduce_train_op_gradients_resnet_v2_101_block3_unit_1_bottleneck_v2_shortcut_BiasAdd_grad_tuple"
    assert rec.tags["failure_reason"] == (
        f"{error[:200]} (4.err:193); also Horovod stall: stalled op {stall}_control_dependency_1_0 "
        "[missing ranks: 1, 3] (4.err:143)"
    )


def test_a_log_without_the_logging_hooks_lines(logs, source, tmp_path):
    # 1.err without its 20 `global_step = N` lines (:47-102): the steps are the job script's, said so
    path = edited(logs, tmp_path, "1.err", lambda line: None if "global_step = " in line else line)
    rec = hacksa.read_log(path, source)
    assert rec.params["steps"] == 200 and rec.tags["steps_per_rank"] == "200"
    assert rec.tags["steps_note"] == "no logged global step: the job script's split assumed"
    assert "time_first_interval_s" not in rec.metrics and "time_steady_interval_s" not in rec.metrics


def test_no_benchmark_line_notes(logs, source, tmp_path):
    # 16.inception_v4.err with its logging hook's step-10 lines (:436-451) said as step 1: 2 to 11 steps per rank,
    # which 200 // 16 = 12 does not fit: no steps claimed
    said_step_1 = lambda line: line.replace("global_step = 10 (", "global_step = 1 (")  # noqa: E731
    path = edited(logs, tmp_path, "16.inception_v4.err", said_step_1)
    rec = hacksa.read_log(path, source)
    assert rec.params == params_of("16.inception_v4.err", 16)  # no steps
    assert set(rec.metrics) == {"time_init_s", "time_total_s", "time_work_s"}
    assert "steps_per_rank" not in rec.tags and rec.tags["steps_note"] == (
        "each rank ran 2 to 11 steps (last logged global step 1), while the job script's split would be "
        "200 // 16 = 12 steps per rank: how many is not known"
    )
    assert rec.tags["throughput_note"] == (
        "no 'Benchmark metric' line in the log: the benchmark hook first logs at global step 21"
    )
    # 16.vgg_19.err without its benchmark lines (:486-517): each rank ran 500 // 16 = 31 steps (the last logged
    # global step is 30)
    path = edited(logs, tmp_path, "16.vgg_19.err", lambda line: None if "Benchmark metric" in line else line)
    rec = hacksa.read_log(path, source)
    assert rec.params["steps"] == 496 and rec.series == {} and "throughput_total" not in rec.metrics
    assert "last_benchmark_step" not in rec.tags and "steps_note" not in rec.tags
    assert rec.tags["throughput_note"] == (
        "no 'Benchmark metric' line in the log: the benchmark hook first logs at global step 21, and each of the 16 "
        "ranks ran only 31 steps"
    )


@pytest.mark.parametrize(
    "value, said",
    [
        ("0", "'---------------------- Training took 0 s ----------------------'"),
        ("nan", "'---------------------- Training took nan s ----------------------'"),
        ("-3.5", "'---------------------- Training took -3.5 s ----------------------'"),
        ("many", "'---------------------- Training took many s ----------------------'"),
    ],
)
def test_training_took_refused(logs, source, tmp_path, value, said):
    dashes = "-" * 22
    path = edited(logs, tmp_path, "1.err", {108: f" {dashes} Training took {value} s {dashes}"})
    assert refusal(path, source) == f"{path}:108: 'Training took' value is not a positive number: {said}"


def test_training_took_under_a_second(logs, source, tmp_path):
    # 0.5 s is a positive number; it is shorter than the initialisation
    path = edited(logs, tmp_path, "1.err", {108: " ---------------------- Training took 0.5 s ----------------------"})
    assert refusal(path, source) == (
        f"{path}:108: 'Training took' 0.5 s is not longer than the initialisation (68.218 s)"
    )


def test_timestamps(logs, source, tmp_path):
    # Python prints a time without '.ffffff' when its microseconds are 0: 1.err:23 so printed
    path = edited(logs, tmp_path, "1.err", {23: " Date is now: 2019-01-14 11:27:15"})
    rec = hacksa.read_log(path, source)
    assert rec.start_ms == cet_ms("2019-01-14 11:27:15.000000") and rec.end_ms == rec.start_ms + 137257
    assert rec.metrics["time_init_s"] == pytest.approx(68.277719, abs=1e-9)
    long_tail = " (printed by the job script on p9r3n05, " + "x" * 90 + ")"
    path = edited(logs, tmp_path, "1.err", {23: " Date is now 2019-01-14 11:27:15.060020" + long_tail})
    shown = ("Date is now 2019-01-14 11:27:15.060020" + long_tail)[:120]
    assert refusal(path, source) == f"{path}:23: 'Date is now' line does not parse: {shown!r}"
    path = edited(logs, tmp_path, "1.err", {45: SHUFFLE_45.replace("11:28:23", "25:28:23")})
    assert refusal(path, source) == f"{path}:45: timestamp '2019-01-14 25:28:23.277719' does not parse"
    no_stamp = SHUFFLE_45.removeprefix("2019-01-14 11:28:23.277719: ") + long_tail
    path = edited(logs, tmp_path, "1.err", {45: no_stamp})
    assert refusal(path, source) == (f"{path}:45: 'Shuffle buffer filled' line without a timestamp: {no_stamp[:120]!r}")


def test_the_machines_time_zone_changes_nothing(logs, source, monkeypatch):
    # the benchmark hook's stamps are UTC ('...Z'), whatever the zone of the machine reading them
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        rec = hacksa.read_log(logs / "1.err", source)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert rec.series["step_throughput_total"][0] == (21, utc_ms("2019-01-14T10:28:35.043435Z"), 203.70368155636982)
    assert rec.start_ms == cet_ms("2019-01-14 11:27:15.060020")


BAD_BENCH = [
    # (what replaces what in 1.err:50's entry, the message after '1.err:50: ')
    ("'global_step': 21, ", "", "'Benchmark metric' entry lacks ['global_step']"),
    ("'average_examples_per_sec'", "'examples_per_sec'",
     "unknown benchmark metric 'examples_per_sec' (known: average_examples_per_sec, current_examples_per_sec)"),
    ("203.70368155636982", "True", "benchmark value True is not a valid measurement"),
    ("203.70368155636982", "-1.5", "benchmark value -1.5 is not a valid measurement"),
    ("203.70368155636982", "'fast'", "benchmark value 'fast' is not a valid measurement"),
    ("'global_step': 21", "'global_step': True", "benchmark global_step True is not a step number"),
    ("'global_step': 21", "'global_step': -21", "benchmark global_step -21 is not a step number"),
    ("'global_step': 21", "'global_step': '21'", "benchmark global_step '21' is not a step number"),
    ("'2019-01-14T10:28:35.043211Z'", "1547461715043", "benchmark timestamp 1547461715043 is not a string"),
    ("'2019-01-14T10:28:35.043211Z'", "'2019-01-14 10:28:35'",
     "benchmark timestamp '2019-01-14 10:28:35' does not parse as UTC 'YYYY-MM-DDTHH:MM:SS.ffffffZ'"),
    ("'2019-01-14T10:28:35.043211Z'", "'2019-01-14T10:28:35.043211'",
     "benchmark timestamp '2019-01-14T10:28:35.043211' does not parse as UTC 'YYYY-MM-DDTHH:MM:SS.ffffffZ'"),
]  # fmt: skip


@pytest.mark.parametrize("old, new, said", BAD_BENCH, ids=[said[:40] for _, _, said in BAD_BENCH])
def test_benchmark_entry_refused(logs, source, tmp_path, old, new, said):
    path = edited(logs, tmp_path, "1.err", {50: BENCH_50.replace(old, new)})
    assert refusal(path, source) == f"{path}:50: {said}"


def test_benchmark_entry_that_is_no_dict(logs, source, tmp_path):
    entry = BENCH_50.partition("Benchmark metric: ")[2]
    path = edited(logs, tmp_path, "1.err", {50: BENCH_50[:170]})  # cut: the entry does not close
    assert refusal(path, source) == (
        f"{path}:50: 'Benchmark metric' entry does not parse (truncated?): {entry[:120]!r}"
    )
    assert len(entry) > 170 - 34 > 121  # the message quotes the first 120 characters
    listed = "[" + ", ".join(str(step) for step in range(21, 400, 10)) + ", 'average_examples_per_sec', 203.7]"
    assert len(listed) > 121
    path = edited(logs, tmp_path, "1.err", {50: "INFO:tensorflow:Benchmark metric: " + listed})
    assert refusal(path, source) == f"{path}:50: 'Benchmark metric' entry is not a dict: {listed[:120]!r}"


def test_zero_is_a_value_and_a_step(logs, source, tmp_path):
    # 1.err:103 (the last average_examples_per_sec) said 0; :50-51 (both metrics at step 21) said step 0
    lines = (logs / "1.err").read_text().split("\n")
    path = edited(logs, tmp_path, "1.err", {
        50: BENCH_50.replace("'global_step': 21", "'global_step': 0"),
        51: lines[50].replace("'global_step': 21", "'global_step': 0"),
        103: lines[102].replace("201.49380583255777", "0"),
    })  # fmt: skip
    rec = hacksa.read_log(path, source)
    assert rec.metrics["throughput_total"] == 0.0 == rec.metrics["throughput_per_worker"]
    assert rec.series["step_throughput_total"][0] == (0, utc_ms("2019-01-14T10:28:35.043435Z"), 203.70368155636982)


def test_a_log_without_its_last_newline(logs, source, tmp_path):
    path = tmp_path / "1.err"
    path.write_text((logs / "1.err").read_text().removesuffix("\n"))  # ends in :108's 'Training took'
    rec = hacksa.read_log(path, source)
    assert rec.status == "FINISHED" and rec.metrics["time_total_s"] == 137.25749254226685


def test_the_log_as_scanned(logs):
    # 2.err, read line by line: start :29, the last shuffle line :73, 'Training took' :134 (the last line), the
    # latest time of the log 11:29:07.743277 CET (:129), the logging hook's last global step 90 (:122-123), the
    # model_dir line :18, the GPU lines :47 and :52, ranks 1 and 0 stopping (:131, :133); 32 benchmark lines from
    # :82, whose :124 is stamped 10:29:05.052501Z (whole ms: .053, as the sixth digit rounds it)
    log = hacksa_log.scan(logs / "2.err")
    assert (log.start, log.start_line) == (datetime(2019, 1, 14, 11, 27, 15, 539741, hacksa_log.CLUSTER_TZ), 29)
    assert (log.init_end, log.init_line) == (datetime(2019, 1, 14, 11, 28, 29, 566116, hacksa_log.CLUSTER_TZ), 73)
    assert (log.took, log.took_line, log.n_lines) == (112.79737067222595, 134, 134)
    assert log.last_ms == cet_ms("2019-01-14 11:29:07.743277") and log.last_global_step == 90
    assert log.model_dirs == [(18, "resnet_v2_101", 2)] and log.failures == [] and log.stopped == {0, 1}
    assert log.devices == {"V100"} and log.device_names == {"Tesla V100-SXM2-16GB"}
    assert len(log.bench) == 32 and log.bench[0] == hacksa_log.Bench(
        82, "average_examples_per_sec", 197.1865374055839, 21, utc_ms("2019-01-14T10:28:42.282000Z")
    )
    assert [b.ms for b in log.bench if b.line == 124] == [utc_ms("2019-01-14T10:29:05.053000Z")]


def test_a_benchmark_line_at_the_scripts_last_step():
    # VGG-19 on 16 GPUs: the script's 500 // 16 = 31 steps per rank; a benchmark line at step 31 means 32 steps or
    # more ran (and the logging hook's last step 30 at most 40): the script's number is not what ran
    assert hacksa.steps_per_rank("vgg19", 16, 30, 31) == (
        None,
        "each rank ran 32 to 40 steps (last logged global step 30, last benchmark step 31), while the job script's "
        "split would be 500 // 16 = 31 steps per rank: how many is not known",
    )
    # the logging hook alone: steps 31 to 40, and 31 fits
    assert hacksa.steps_per_rank("vgg19", 16, 30, None) == (31, "")


def test_the_folder_read(logs, tmp_path):
    # hacksa.read on a folder of logs: in the order of the GPU count, then the name
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("2.err", "1.vgg_19.err", "1.err"):
        (folder / name).write_bytes((logs / name).read_bytes())
    assert [rec.key for rec in hacksa.read(FOLDER, folder)] == ["1.err", "1.vgg_19.err", "2.err"]
    # a file whose name is no job's is refused before any log is read (1.err cut to its first 22 lines, before
    # its start, would be refused too: it is not read)
    (folder / "1.err").write_text("".join((logs / "1.err").read_text().splitlines(keepends=True)[:22]))
    (folder / "a.err").write_bytes((logs / "2.err").read_bytes())
    with pytest.raises(SchemaError) as err:
        hacksa.read(FOLDER, folder)
    assert str(err.value) == f"{folder / 'a.err'}:1: file name is not 'N.err' or 'N.<model>.err'"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SchemaError) as err:
        hacksa.read(FOLDER, empty)
    assert str(err.value) == f"{empty}: no logs/*.err log"
    with pytest.raises(SchemaError) as err:
        hacksa.read(FOLDER, tmp_path / "absent")
    assert str(err.value) == f"{tmp_path / 'absent'}: missing (the dataset's Slurm logs)"


def test_a_dataset_that_lists_no_log(tmp_path):
    # the dataset folder with its raw_files list taken out of source.yaml: nothing to read
    folder = tmp_path / "hacksa-2019"
    folder.mkdir()
    text = (FOLDER / "source.yaml").read_text()
    (folder / "source.yaml").write_text(text[: text.index("raw_files:")])
    with pytest.raises(SchemaError) as err:
        hacksa.read(folder)
    assert str(err.value) == f"{folder / 'source.yaml'}: raw_files: no logs/*.err log"
