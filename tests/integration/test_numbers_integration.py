"""The end-to-end tests of tests/test_numbers.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest
from helpers import raw_dir, run_module

from scalestudy.store import load_runs


@pytest.fixture(scope="module")
def built(published_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("numbers")
    run_module("scalestudy.paper", "numbers-study", f"out_dir={out}", uri=published_store)
    values = json.loads((out / "tables" / "numbers-study.json").read_text())["values"]
    return values, load_runs(published_store)


def _one(frame: pd.DataFrame, **where) -> pd.Series:
    rows = frame
    for column, value in where.items():
        rows = rows[rows[column] == value]
    assert len(rows) == 1, where
    return rows.iloc[0]


def test_hacksa_numbers_recomputed(built):
    values, runs = built
    hacksa = runs[(runs.experiment == "hacksa-2019") & (runs.status == "FINISHED")]
    vgg1, vgg16, vgg32 = (_one(hacksa, model="vgg19", workers=n) for n in (1, 16, 32))
    assert values["VggStudyTimeSpeedup"]["text"] == "10.37"  # the study's own number, kept
    assert values["VggStudyTimeSpeedup"]["value"] == pytest.approx(vgg1.time_work_s / vgg32.time_work_s)
    per_image = (vgg32.steps * 64 / vgg32.time_work_s) / (vgg1.steps * 64 / vgg1.time_work_s)
    assert (vgg1.steps, vgg32.steps) == (500, 992)
    assert values["VggImageTimeSpeedup"]["value"] == pytest.approx(per_image)
    assert values["VggImageTimeEff"]["value"] == pytest.approx(per_image / 32)
    assert values["VggStepsPerRankThirtyTwo"]["value"] == 31
    per_image16 = (vgg16.steps / vgg16.time_work_s) / (vgg1.steps / vgg1.time_work_s) / 16
    assert values["VggImageTimeEffSixteen"]["value"] == pytest.approx(per_image16)
    # jobs that processed other images than the 1-GPU job of their model
    ones = hacksa[hacksa.workers == 1].set_index("model")["steps"]
    unequal = hacksa[hacksa.steps != hacksa.model.map(ones)]
    assert values["HackSAUnequal"]["value"] == len(unequal) == 4
    assert values["HackSAFailed"]["value"] == (runs[runs.experiment == "hacksa-2019"].status == "FAILED").sum()
    shares = hacksa.time_init_s / hacksa.time_total_s
    assert values["HackSAInitShareMax"]["value"] == pytest.approx(shares.max())
    assert values["HackSAInitShareOne"]["value"] == pytest.approx(shares[hacksa.workers == 1].max())
    # the three warm-up outcomes cover every finished job with a throughput series
    outcomes = sum(values[f"HackSAWarmup{k}"]["value"] for k in ("Cut", "None", "Unjudged"))
    assert outcomes == hacksa.throughput_total.notna().sum()


def test_tf_benchmark_numbers_recomputed(built):
    values, runs = built
    tf = runs[runs.experiment == "tf-benchmarks-2017"]
    same = ["model", "data", "batch_per_worker", "workers", "variable_update", "framework"]
    dgx = tf[tf.platform == "nvidia-dgx-1"]
    gce = tf[tf.platform == "gce-n1-standard-32-k80x8"]
    pairs = dgx.merge(gce, on=same, suffixes=("_p", "_k"))
    pairs = pairs[pairs.model.isin(["inception3", "resnet50"]) & pairs.batch_per_worker.isin([32, 64])]
    ratios = pairs.throughput_total_p / pairs.throughput_total_k
    assert values["PairsPOverK"]["value"] == len(pairs)
    assert values["MedianPOverK"]["value"] == pytest.approx(ratios.median())
    # the P100/K80 ratios: range per model and batch 64 against batch 32, like for like
    sheet = runs[(runs.experiment == "tf-benchmarks-2017") & runs.model.isin(["inception3", "resnet50"])]
    key = ["model", "data", "batch_per_worker", "workers", "variable_update"]
    dgx, gce = (sheet[sheet.platform == p] for p in ("nvidia-dgx-1", "gce-n1-standard-32-k80x8"))
    ratio = dgx.merge(gce, on=key, suffixes=("_p", "_k"))
    ratio = ratio[ratio.batch_per_worker.isin([32, 64])].assign(r=lambda f: f.throughput_total_p / f.throughput_total_k)
    for model, name in (("inception3", "Inception"), ("resnet50", "Resnet")):
        assert values[f"POverK{name}Min"]["value"] == pytest.approx(ratio[ratio.model == model].r.min())
        assert values[f"POverK{name}Max"]["value"] == pytest.approx(ratio[ratio.model == model].r.max())
    twins = ratio[ratio.batch_per_worker == 64].merge(ratio[ratio.batch_per_worker == 32], on=key[:2] + key[3:])
    assert values["POverKBatchPairs"]["value"] == len(twins) == 16
    assert values["POverKBatchHigher"]["value"] == (twins.r_x > twins.r_y).sum()
    # ResNet-50 over Inception-v3 on every platform, like for like, and the pairs that differ in the update only
    models = tf[tf.model.isin(["inception3", "resnet50"])]
    key = ["platform", "device", "data", "batch_per_worker", "workers", "framework"]
    both = models[models.model == "resnet50"].merge(models[models.model == "inception3"], on=key)
    like = both[both.variable_update_x.fillna("-") == both.variable_update_y.fillna("-")]
    assert values["PairsResnetInception"]["value"] == len(like)
    assert values["UnlikeResnetInception"]["value"] == len(both) - len(like) > 0
    assert values["MedianResnetInceptionAll"]["value"] == pytest.approx(
        (like.throughput_total_x / like.throughput_total_y).median()
    )
    # the distributed K80 runs at 64 GPUs against their 1-GPU baseline
    dist = tf[tf.platform == "aws-p2.8xlarge-distributed"]
    for model, name in (("resnet50", "DistributedResnetEff"), ("inception3", "DistributedInceptionEff")):
        rows = dist[(dist.model == model) & (dist.batch_per_worker == 64)]
        one = rows[rows.workers == 1].throughput_total.item()
        eff = rows[rows.workers == 64].throughput_total.item() / one / 64
        assert values[name]["value"] == pytest.approx(eff)


def test_keras_and_horovod_numbers_recomputed(built):
    values, runs = built
    keras = runs[runs.experiment == "keras-backends-2017"]
    images = (keras.throughput_total * keras.time_per_epoch_s).dropna()
    assert values["KerasImagesPerEpoch"]["value"] == pytest.approx(images.median())
    assert values["KerasImagesPerEpoch"]["text"] == "60000"
    slip = _one(keras, model="resnet50", framework="mxnet", protocol="reduce-randomization", workers=16)
    assert values["KerasSlipPublished"]["value"] == slip.time_per_epoch_s == 304.02
    assert slip.time_total_s / slip.epochs == pytest.approx(30.4019)  # a tenth of the published time per epoch
    # ResNet-50, reduce randomization, 16 K80 against 1: the seed's images/s rows, by hand
    assert values["KerasMXNetEffSixteen"]["value"] == pytest.approx(1973.56 / 378.30 / 16)
    assert values["KerasTFEffSixteen"]["value"] == pytest.approx(550.08 / 252.63 / 16)
    assert (values["KerasMXNetEffSixteen"]["text"], values["KerasTFEffSixteen"]["text"]) == ("33", "14")
    horovod = runs[runs.experiment == "horovod-docs"].set_index("model")["efficiency_published"]
    assert values["HorovodInceptionEff"]["text"] == f"{100 * horovod['inception3']:.0f}" == "90"
    assert values["HorovodVggEff"]["text"] == f"{100 * horovod['vgg16']:.0f}" == "68"


def test_seed_002_numbers_recomputed(built):
    """Seed 002's claims and the cross-check's counts, by hand from measurements.csv and the raw logs."""
    values, runs = built
    kmg = runs[runs.experiment == "keras-multi-gpu-2017"]
    assert values["KmgLogRuns"]["value"] == (kmg.record == "log").sum() == 46
    assert values["KmgLogFailed"]["value"] == ((kmg.record == "log") & (kmg.status == "FAILED")).sum() == 4
    assert values["KmgTableRuns"]["value"] == (kmg.record == "table").sum() == 106
    # 7gforce, tf_cnn_benchmarks, Inception-v3, PS on CPU (measurements.md:174 and :177): 351.98 / 78.44
    assert values["KmgSevenInceptionSix"]["value"] == pytest.approx(351.98 / 78.44)
    assert values["KmgSevenInceptionSix"]["text"] == "4.487"  # the seed's "best scaling: 4.487x"
    # measurements.md:349 and :353, the PS-on-GPU column: 126.68 / 78.44 = 1.61499, 80.75 % of 2
    assert (values["KmgSevenTwoGpuSpeedup"]["text"], values["KmgSevenTwoGpuEff"]["text"]) == ("1.615", "80.75")
    assert values["KmgSevenTwoGpuEff"]["value"] == pytest.approx(126.68 / 78.44 / 2)
    # ResNet-50 in the same write-up does better (measurements.md:190, :191, :193): 571.9 / 119.8, 196 / 119.8 / 2
    assert values["KmgSevenResnetSix"]["value"] == pytest.approx(571.9 / 119.8)
    assert values["KmgSevenResnetSix"]["value"] > values["KmgSevenInceptionSix"]["value"]
    assert values["KmgSevenResnetTwoEff"]["text"] == "81.80" and values["KmgSevenResnetTwoEff"]["value"] > 0.8075
    # az-2x-m60, the trace's five 2-GPU modes over its 1-GPU run (lines 108, 162, 217, 272, 326 over line 54)
    speedups = [v / 47.49 for v in (94.72, 95.43, 94.57, 95.33, 95.50)]
    assert values["KmgAzModes"]["value"] == 5
    assert values["KmgAzModesMin"]["value"] == pytest.approx(min(speedups))  # replicated with NCCL
    assert values["KmgAzModesMax"]["value"] == pytest.approx(max(speedups))  # independent
    # Keras on 7gforce: best avolkov1, Inception-v3, 6 GPUs, PS on the CPU: 65.37 / 41 (7gforce log :1102, :663);
    # worst avolkov1, ResNet-50, 6 GPUs, PS on a GPU: 21.56 / 58.19 (:2382, :1863); az-2x-m60 best 54.58 / 31.67
    assert values["KmgSevenKerasMax"]["value"] == pytest.approx(65.37 / 41)
    assert values["KmgSevenKerasMin"]["value"] == pytest.approx(21.56 / 58.19)
    assert values["KmgAzKerasMax"]["value"] == pytest.approx(54.58 / 31.67)
    # table 5's totals (tests/test_tables.py counts them by hand)
    assert [values[f"Kmg{k}"]["value"] for k in ("Printed", "Logged", "Agree", "Disagree")] == [216, 114, 114, 0]


def _logging_intervals(path) -> dict[int, list[float]]:
    """The logging hook's `global_step = N (X sec)` seconds per step, read from a raw HackSA log by a regex of
    this test's own (not the importer's)."""
    import re

    found: dict[int, list[float]] = {}
    for step, seconds in re.findall(r"global_step = (\d+) \(([\d.]+) sec\)", path.read_text(errors="replace")):
        found.setdefault(int(step), []).append(float(seconds))
    return found


def test_hacksa_warmup_numbers_recomputed_from_the_raw_logs(built):
    values, runs = built
    logs = raw_dir("hacksa-2019") / "logs"
    # ResNet-v2-101 on 8 GPUs by hand: logs/8.err:261-268 (step 10: the eight ranks' seconds), the step-20 lines
    # (5 x 3.337 + 3 x 3.335), and the work time: 'Training took 125.42283892631531 s' (:317) less the start
    # (:83, 17:47:46.753476) to the last shuffle-buffer line (:244, 17:49:34.875523).
    first = statistics.mean([9.565, 9.561, 9.551, 9.562, 9.562, 9.526, 9.464, 9.526])
    steady = (5 * 3.337 + 3 * 3.335) / 8
    work = 125.42283892631531 - (108.122047)
    assert _logging_intervals(logs / "8.err")[10] == [9.565, 9.561, 9.551, 9.562, 9.562, 9.526, 9.464, 9.526]
    assert values["HackSAWarmupShareResnetEight"]["value"] == pytest.approx((first - steady) / work)
    assert values["HackSAWarmupShareResnetEight"]["text"] == "36"
    assert values["HackSAWarmupRatioMax"]["value"] == pytest.approx(first / steady)  # the largest ratio: this job
    # every finished job: the first interval over the median of the later ones (the ranks' mean at each step)
    finished = runs[(runs.experiment == "hacksa-2019") & (runs.status == "FINISHED")]
    ratios, extras, shares = [], [], []
    for run in finished.itertuples():
        intervals = _logging_intervals(logs / run.import_key)  # the log the run was imported from
        later = [statistics.mean(v) for step, v in intervals.items() if step > 10]
        if not later:  # Inception-v4 on 16 GPUs: its ranks log only steps 0 to 10
            continue
        extra = statistics.mean(intervals[10]) - statistics.median(later)
        ratios.append(statistics.mean(intervals[10]) / statistics.median(later))
        extras.append(extra)
        shares.append(extra / run.time_work_s)
    assert len(ratios) == len(finished) - 1
    assert values["HackSAWarmupRatioMin"]["value"] == pytest.approx(min(ratios))
    assert (values["HackSAWarmupRatioMin"]["text"], values["HackSAWarmupRatioMax"]["text"]) == ("1.13", "2.86")
    assert values["HackSAWarmupExtraMin"]["value"] == pytest.approx(min(extras))
    assert values["HackSAWarmupExtraMax"]["value"] == pytest.approx(max(extras))
    assert values["HackSAWarmupShareMax"]["value"] == pytest.approx(max(shares))
    # ResNet-v2-101's efficiency per image of work time on 8 GPUs without the warm-up's extra time in either job
    one = _one(finished, model="resnet101_v2", workers=1)
    eight = _one(finished, model="resnet101_v2", workers=8)
    i1, i8 = _logging_intervals(logs / "1.err"), _logging_intervals(logs / "8.err")

    def extra_of(iv):
        return statistics.mean(iv[10]) - statistics.median([statistics.mean(v) for s, v in iv.items() if s > 10])

    w1, w8 = one.time_work_s - extra_of(i1), eight.time_work_s - extra_of(i8)
    eff = (eight.steps / w8) / (one.steps / w1) / 8
    assert values["ResnetImageTimeEffEightNoWarmup"]["value"] == pytest.approx(eff)


def test_keras_protocol_accuracy_and_memory_numbers_recomputed(built):
    values, runs = built
    keras = runs[runs.experiment == "keras-backends-2017"]
    # images/s of the 100-epoch runs over the 10-epoch ones, ResNet-50 with MXNet (the only rows with both):
    # 16 GPUs, 1973.56 / 1450.43 (the seed's table), the largest
    rr = keras[(keras.protocol == "reduce-randomization") & (keras.framework == "mxnet") & (keras.model == "resnet50")]
    plain = keras[(keras.protocol == "plain") & (keras.framework == "mxnet") & (keras.model == "resnet50")]
    both = rr.merge(plain, on="workers")
    assert values["KerasProtocolSpeedMax"]["value"] == pytest.approx(
        (both.throughput_total_x / both.throughput_total_y).max()
    )
    assert values["KerasProtocolSpeedMax"]["value"] == pytest.approx(1973.56 / 1450.43)
    # test accuracy, as the seed's table prints it (table 2)
    for name, protocol, framework, workers, expected in (
        ("KerasPlainAccOne", "plain", "mxnet", 1, 0.67),
        ("KerasPlainAccSixteen", "plain", "mxnet", 16, 0.42),
        ("KerasLongAccOne", "reduce-randomization", "mxnet", 1, 0.80),
        ("KerasLongAccSixteen", "reduce-randomization", "mxnet", 16, 0.77),
        ("KerasTFAccOne", "reduce-randomization", "tensorflow", 1, 0.80),
        ("KerasTFAccSixteen", "reduce-randomization", "tensorflow", 16, 0.73),
    ):
        row = _one(keras, model="resnet50", protocol=protocol, framework=framework, workers=workers)
        assert values[name]["value"] == row.accuracy_test == expected, name
    assert values["KerasTFMemoryOne"]["text"] == "10946"
    assert (values["KerasPlainEpochs"]["value"], values["KerasLongEpochs"]["value"]) == (10, 100)
    # figure 4's medians per GPU kind and without the 64-GPU distributed pairs, like for like
    tf = runs[(runs.experiment == "tf-benchmarks-2017") & runs.model.isin(["inception3", "resnet50"])]
    key = ["platform", "device", "data", "batch_per_worker", "workers", "framework"]
    both = tf[tf.model == "resnet50"].merge(tf[tf.model == "inception3"], on=key)
    like = both[both.variable_update_x.fillna("-") == both.variable_update_y.fillna("-")]
    like = like.assign(r=like.throughput_total_x / like.throughput_total_y)
    assert values["MedianResnetInceptionPHundred"]["value"] == pytest.approx(like[like.device == "P100"].r.median())
    assert values["MedianResnetInceptionKEighty"]["value"] == pytest.approx(like[like.device == "K80"].r.median())
    kept = like[~((like.platform == "aws-p2.8xlarge-distributed") & (like.workers == 64))]
    assert len(kept) == len(like) - 2
    assert values["MedianResnetInceptionNoSixtyFour"]["value"] == pytest.approx(kept.r.median())
    assert values["MedianResnetInceptionNoSixtyFour"]["text"] == "1.599"


def test_timeline_numbers_recomputed(built):
    values, runs = built
    timelines = runs[runs.experiment == "horovod-timelines-2019"].set_index("workers")
    assert sorted(timelines.index) == [4, 12]
    for n, name in ((4, "Four"), (12, "Twelve")):
        row = timelines.loc[n]
        assert values[f"TimelineStep{name}"]["value"] == pytest.approx(row.step_time_ms)
        assert values[f"TimelineNegotiateShare{name}"]["value"] == pytest.approx(
            row.step_negotiate_ms / row.step_time_ms
        )
        assert values[f"TimelineComm{name}"]["value"] == pytest.approx(row.step_comm_ms)
        assert values[f"TimelineExposed{name}"]["value"] == pytest.approx(row.step_comm_exposed_ms)
    overlap = 1 - timelines.step_comm_exposed_ms / timelines.step_comm_ms  # per-step means: the share's bound
    assert values["TimelineOverlapMin"]["value"] == pytest.approx(timelines.step_comm_overlap_share.min())
    assert abs(values["TimelineOverlapMin"]["value"] - overlap.min()) < 0.01
    # negotiation dominates: most of every step, in both files
    assert min(values["TimelineNegotiateShareFour"]["value"], values["TimelineNegotiateShareTwelve"]["value"]) > 0.5
