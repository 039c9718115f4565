"""What each figure plots, checked against values worked out by hand from the primary data.

Every figure's sidecar (paper/figures/figure-N.json) lists the values it draws (`points`). For each figure a few
of them are recomputed here from numbers typed from the primary source, each with the file and line it was read
from: the HackSA job logs (experiments/reference/hacksa-2019/logs, the same files as
/work/shared/reference/hacksa-2019/logs), the TF benchmarks table (tf_benchmarks_2017.csv) and the Keras seed
text (seed 001, /work/shared/seeds/001_*.txt). The checks pin which quantity (speedup or efficiency), which
direction (ResNet-50 over Inception-v3, P100 over K80) and which runs (finished ones only).

The figures are built once per session (conftest.published_figures: `python -m scalestudy.paper figures`).
"""

from __future__ import annotations

import csv
from datetime import datetime

import pytest
from helpers import REPO, sidecar

from scalestudy.store import load_runs


def seconds(start: str, end: str) -> float:
    """Seconds between two log timestamps ('2019-01-14 12:14:41.372269')."""
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    return (datetime.strptime(end, fmt) - datetime.strptime(start, fmt)).total_seconds()


# HackSA logs (experiments/reference/hacksa-2019/logs/<file>:<line>). Work time = `Training took` less the
# initialisation, which ends at the last "Shuffle buffer filled." line and starts at " Date is now:".
INCEPTION4_1_AVG = 100.6423504398294  # 1.inception_v4.err:99 average_examples_per_sec, global_step 191 (last)
INCEPTION4_2_AVG = (97.13194558686227, 97.1319447081953)  # 2.inception_v4.err:118-119, both ranks, step 91 (last)
INCEPTION4_1_WORK = 203.52986979484558 - seconds(  # 1.inception_v4.err:104 (took), :23 (start), :41 (init end)
    "2019-01-14 12:14:41.372269", "2019-01-14 12:15:48.936074"
)
INCEPTION4_2_WORK = 189.19382190704346 - seconds(  # 2.inception_v4.err:128 (took), :32 (start), :67 (init end)
    "2019-01-14 12:14:35.010120", "2019-01-14 12:16:24.855508"
)
RESNET_1_AVG = 201.49380583255777  # 1.err:103, step 191 (last)
RESNET_2_AVG = (196.80245653858435, 196.78220822382707)  # 2.err:124 and :126, step 91 (last)
# 1.err:108 (took), :23 (start), :45 (init end); 2.err:134, :29, :73
RESNET_1_WORK = 137.25749254226685 - seconds("2019-01-14 11:27:15.060020", "2019-01-14 11:28:23.277719")
RESNET_2_WORK = 112.79737067222595 - seconds("2019-01-14 11:27:15.539741", "2019-01-14 11:28:29.566116")
# 1.vgg_19.err:201 (took), :23 (start), :42 (init end); 32.vgg_19.err:1089, :211, :826. Steps: 500 on one GPU;
# on 32, every rank logs global_step = 30 and a benchmark line at step 21, so each ran 31 (32 x 31 = 992 in all)
VGG_1_WORK = 225.45039129257202 - seconds("2018-12-31 20:16:55.858277", "2018-12-31 20:17:27.256703")
VGG_32_WORK = 67.19512629508972 - seconds("2018-12-31 20:58:37.410456", "2018-12-31 20:59:25.894856")
# 2.inception_v4.err:78-79: current_examples_per_sec of both ranks at global step 21 (the series' first point)
INCEPTION4_2_STEP21 = (97.97192278043796, 97.97191562900045)

TF_CSV = REPO / "experiments/reference/tf-benchmarks-2017/tf_benchmarks_2017.csv"
# tf_benchmarks_2017.csv:<line>: images/s
DGX_INCEPTION3_SYN64_8 = 1131  # :17 nvidia-dgx-1 P100 inception3 synthetic 64 8
DGX_RESNET50_SYN64_8 = 1734  # :18 nvidia-dgx-1 P100 resnet50 synthetic 64 8
DIST_RESNET50_SYN64_1 = 52.4  # :185 aws-p2.8xlarge-distributed resnet50 synthetic 64 1
DIST_RESNET50_SYN64_64 = 2744  # :197 the same at 64 GPUs
DIST_INCEPTION3_SYN64_1 = 29.7  # :184
DIST_INCEPTION3_SYN64_64 = 1783  # :196

# Seed 001 (Keras 1.2.2 backends), /work/shared/seeds/001_*.txt:<line>, ResNet50 tables, GPU (1) .. GPU (16)
KERAS_MXNET_PLAIN_IMAGES_S = [372.82, 617.32, 1165.12, 1435.06, 1450.43]  # :30 Images processed per sec
KERAS_MXNET_PLAIN_EPOCH_S = [160.93, 97.19, 51.49, 41.80, 41.36]  # :29 Average time per epoch
KERAS_MXNET_PLAIN_MEMORY = [5086, 5048, 5012, 9786, 15187]  # :33 Maximum Memory Consumption
KERAS_MXNET_RR_TRAINING_16 = 3040.19  # :42 Training time (secs), reduce randomization, GPU (16); 100 epochs (:37)
KERAS_MXNET_RR_EPOCH_16 = 304.02  # :43 the published time per epoch there: ten times the quotient (a slip)
KERAS_TF_RR_MEMORY_16 = 175088  # :57 Maximum Memory Consumption, TensorFlow backend, GPU (16)


def tf_value(platform, model, data, batch, gpus) -> float:
    """images/s of one row of tf_benchmarks_2017.csv, read from the file itself."""
    with TF_CSV.open() as handle:
        for row in csv.DictReader(handle):
            if (row["platform"], row["model"], row["data"], row["batch_per_gpu"], row["gpus"]) == (
                platform, model, data, str(batch), str(gpus)
            ):  # fmt: skip
                return float(row["images_per_sec"])
    raise KeyError((platform, model, data, batch, gpus))


def plotted(points: list[dict], **where) -> list[dict]:
    return [p for p in points if all(p.get(k) == v for k, v in where.items())]


def value(points: list[dict], **where) -> float:
    """The one plotted value matching `where` (several or none is an error: the figure drew something else)."""
    hits = plotted(points, **where)
    assert len(hits) == 1, (where, hits)
    return hits[0]["value"]


@pytest.fixture(scope="module")
def hacksa_runs(published_store):
    """HackSA's runs: which are FINISHED, which FAILED (their ids come from the store)."""
    runs = load_runs(published_store)
    return runs[runs.experiment == "hacksa-2019"].set_index("import_key")


def assert_finished_only(spec: dict, hacksa_runs) -> None:
    """The figure lists the 14 finished HackSA runs and neither failed one (4.err, 16.err: Slurm time limit)."""
    listed = {r["run_id"] for r in spec["mlflow_runs"]}
    assert len(listed) == 14
    assert listed == set(hacksa_runs.loc[hacksa_runs.status == "FINISHED", "run_id"])
    assert not listed & set(hacksa_runs.loc[["4.err", "16.err"], "run_id"])


def test_figure1_plots_speedups_of_finished_runs_by_hand(published_figures, hacksa_runs):
    spec = sidecar(published_figures, "figure-1")
    assert_finished_only(spec, hacksa_runs)
    points = spec["points"]
    # by speed: throughput at N (the ranks' average_examples_per_sec summed) over that at 1; a speedup, not N x it
    assert value(points, panel="Inception-v4", y="speedup_speed", workers=2) == pytest.approx(
        sum(INCEPTION4_2_AVG) / INCEPTION4_1_AVG
    )  # 1.930
    assert value(points, panel="ResNet-v2-101", y="speedup_speed", workers=2) == pytest.approx(
        sum(RESNET_2_AVG) / RESNET_1_AVG
    )
    # by work time: time at 1 over time at N (both jobs split 200 steps: the same images)
    assert value(points, panel="ResNet-v2-101", y="speedup_time_per_image", workers=2) == pytest.approx(
        RESNET_1_WORK / RESNET_2_WORK
    )  # 1.781
    # VGG-19 on 32 GPUs processed about twice the images of its 1-GPU job: per image, not the study's ratio,
    # which is drawn beside it as the flagged job's extra point
    per_image = value(points, panel="VGG-19", y="speedup_time_per_image", workers=32)
    assert per_image == pytest.approx((32 * 31 / VGG_32_WORK) / (500 / VGG_1_WORK))  # 20.58
    assert plotted(points, panel="VGG-19", y="speedup_time_per_image", workers=32)[0]["flagged"] == "unequal_work"
    assert value(points, panel="VGG-19", y="speedup_time", workers=32) == pytest.approx(VGG_1_WORK / VGG_32_WORK)
    # ResNet's 4- and 16-GPU jobs did not finish: no point of theirs is drawn
    assert sorted(p["workers"] for p in plotted(points, panel="ResNet-v2-101", y="speedup_speed")) == [1, 2, 8]


def test_figure2_plots_efficiencies_by_hand(published_figures, hacksa_runs):
    spec = sidecar(published_figures, "figure-2")
    assert_finished_only(spec, hacksa_runs)
    points = spec["points"]
    assert value(points, series="Inception-v4", y="efficiency_speed", workers=2) == pytest.approx(
        sum(INCEPTION4_2_AVG) / INCEPTION4_1_AVG / 2
    )  # 0.965: efficiency = speedup / N
    assert value(points, series="Inception-v4", y="efficiency_time_per_image", workers=2) == pytest.approx(
        INCEPTION4_1_WORK / INCEPTION4_2_WORK / 2
    )  # 0.857
    assert value(points, series="ResNet-v2-101", y="efficiency_time_per_image", workers=2) == pytest.approx(
        RESNET_1_WORK / RESNET_2_WORK / 2
    )
    assert not plotted(points, y="speedup_speed") and not plotted(points, series="ResNet-v2-101", workers=4)


def test_figure3_plots_p100_over_k80_by_hand(published_figures):
    points = sidecar(published_figures, "figure-3")["points"]
    by_key = {(p["series"], p.get("workers")): p["value"] for p in points}
    dgx, gce = "nvidia-dgx-1", "gce-n1-standard-32-k80x8"
    assert by_key[("ResNet-50 · real · batch 32", 1)] == pytest.approx(
        tf_value(dgx, "resnet50", "real", 32, 1) / tf_value(gce, "resnet50", "real", 32, 1)
    )
    # tf_benchmarks_2017.csv:12 (DGX-1, inception3, synthetic, 64, 4 GPUs: 569) and :83 (GCE K80, the same: 116)
    assert by_key[("Inception-v3 · synthetic · batch 64", 4)] == pytest.approx(569 / 116)
    ratios = sorted(v for (series, _), v in by_key.items() if series != "median")
    assert len(ratios) == 32
    median = (ratios[15] + ratios[16]) / 2
    assert by_key[("median", None)] == pytest.approx(median)
    assert round(median, 2) == 4.40  # the seed sheet's overall median, recomputed from the primary numbers


def test_figure4_plots_resnet_over_inception_for_like_pairs_only(published_figures):
    points = sidecar(published_figures, "figure-4")["points"]
    assert value(points, series="nvidia-dgx-1 · synthetic · batch 64", workers=8) == pytest.approx(
        DGX_RESNET50_SYN64_8 / DGX_INCEPTION3_SYN64_8
    )  # 1.533, not its inverse 0.652
    assert value(points, series="aws-p2.8xlarge-distributed · synthetic · batch 64", workers=64) == pytest.approx(
        DIST_RESNET50_SYN64_64 / DIST_INCEPTION3_SYN64_64
    )
    # One p2.8xlarge ran ResNet-50 replicated and Inception-v3 on a parameter server (csv:144-145): no pair.
    assert not [p for p in points if p["series"].startswith("aws-p2.8xlarge ·")]
    ratios = sorted(p["value"] for p in points if p["series"] != "median")
    assert len(ratios) == 42 and all(r > 1 for r in ratios)  # ResNet-50 is the faster model in every pair
    # one panel and one median per GPU kind: P100 (DGX-1, 16 pairs) and K80 (GCE and the distributed runs, 26)
    for panel, n in (("P100", 16), ("K80", 26)):
        kind = sorted(p["value"] for p in points if p["panel"] == panel and p["series"] != "median")
        assert len(kind) == n
        assert value(points, series="median", panel=panel) == pytest.approx((kind[n // 2 - 1] + kind[n // 2]) / 2)


def test_figure5_plots_throughput_per_gpu_of_finished_runs_by_hand(published_figures, hacksa_runs):
    spec = sidecar(published_figures, "figure-5")
    assert_finished_only(spec, hacksa_runs)
    two = plotted(spec["points"], panel="Inception-v4", legend="2 GPUs")
    assert len(two) == 1
    assert two[0]["steps"][0] == 21
    assert two[0]["value"][0] == pytest.approx(sum(INCEPTION4_2_STEP21) / 2)  # per GPU: the sum over ranks / 2
    # the study's cut: the last shuffle-buffer line, 2.inception_v4.err:67, after the start at :32
    assert two[0]["init_end_s"] == pytest.approx(seconds("2019-01-14 12:14:35.010120", "2019-01-14 12:16:24.855508"))
    assert len(two[0]["value"]) == len(two[0]["steps"]) == len(two[0]["elapsed_s"])
    throughput = [p for p in spec["points"] if "steps" in p]
    assert len(throughput) == 13  # 14 finished runs, one of which (16.inception_v4.err) logged no throughput


# 2.inception_v4.err: the logging hook's ten-step intervals of both ranks, in seconds: steps 0 to 10 at :72-73,
# then steps 10-20 .. 80-90 at :74-75, :80-81, :86-87, :92-93, :98-99, :104-105, :110-111, :116-117
INCEPTION4_2_FIRST = (15.390, 15.378)
INCEPTION4_2_LATER = [(6.534, 6.534), (6.538, 6.539), (6.560, 6.560), (6.588, 6.588), (6.588, 6.588),
                      (6.615, 6.615), (6.637, 6.637), (6.639, 6.639)]  # fmt: skip
INCEPTION4_1_FIRST = 10.923  # 1.inception_v4.err:44 (one rank): global_step = 10 (10.923 sec)


def test_figure5_plots_the_logging_hooks_first_and_steady_ten_steps_by_hand(published_figures):
    """Figure 5's lower row: the first ten-step interval (steps 0 to 10, the ranks' mean) and a steady one (the
    median of the later intervals' ranks' means) per run: the warm-up the text reads (issue 41)."""
    points = sidecar(published_figures, "figure-5")["points"]
    rows = [p for p in points if p.get("panel", "").endswith(" · ten-step intervals")]
    assert len(rows) == 14  # every finished run, 16.inception_v4.err included (its first interval only)
    two = plotted(rows, panel="Inception-v4 · ten-step intervals", workers=2)
    assert len(two) == 1
    later = sorted(sum(pair) / 2 for pair in INCEPTION4_2_LATER)
    assert two[0]["first_interval_s"] == pytest.approx(sum(INCEPTION4_2_FIRST) / 2)
    assert two[0]["steady_interval_s"] == pytest.approx((later[3] + later[4]) / 2)
    assert two[0]["ratio"] == pytest.approx(sum(INCEPTION4_2_FIRST) / 2 / ((later[3] + later[4]) / 2))
    one = plotted(rows, panel="Inception-v4 · ten-step intervals", workers=1)
    assert one[0]["first_interval_s"] == pytest.approx(INCEPTION4_1_FIRST)
    sixteen = plotted(rows, panel="Inception-v4 · ten-step intervals", workers=16)
    assert sixteen[0]["steady_interval_s"] is None and sixteen[0]["ratio"] is None
    # the first interval is the longer one in every run that has both (the text's "several times a steady one")
    assert all(p["ratio"] > 1 for p in rows if p["ratio"] is not None)


def test_figure6_plots_the_keras_tables_by_hand(published_figures):
    points = sidecar(published_figures, "figure-6")["points"]
    mxnet = "ResNet-50 · MXNet · plain"
    for gpus, images, epoch, memory in zip(
        (1, 2, 4, 8, 16), KERAS_MXNET_PLAIN_IMAGES_S, KERAS_MXNET_PLAIN_EPOCH_S, KERAS_MXNET_PLAIN_MEMORY
    ):
        assert value(points, series=mxnet, y="throughput_total", workers=gpus) == images
        assert value(points, series=mxnet, y="time_per_epoch_s_consistent", workers=gpus) == epoch
        assert value(points, series=mxnet, y="memory_peak_mb", workers=gpus) == memory
    # the slip: the line uses the source's own total / epochs, the cross the published value
    slip = plotted(points, series="ResNet-50 · MXNet · reduce-randomization", y="time_per_epoch_s_consistent",
                   workers=16)  # fmt: skip
    assert slip[0]["value"] == pytest.approx(KERAS_MXNET_RR_TRAINING_16 / 100) and slip[0]["flagged"] == "slip"
    assert value(points, y="time_per_epoch_s", workers=16, extra=True) == KERAS_MXNET_RR_EPOCH_16
    assert value(points, series="ResNet-50 · TensorFlow · reduce-randomization", y="memory_peak_mb",
                 workers=16) == KERAS_TF_RR_MEMORY_16  # fmt: skip


def test_figure7_plots_efficiency_by_speed_by_hand(published_figures):
    points = sidecar(published_figures, "figure-7")["points"]
    eff = {(p["kind"], p["series"], p["workers"]): p["efficiency"] for p in points}
    assert eff[("observed", "ResNet-50 · batch 64", 64)] == pytest.approx(
        DIST_RESNET50_SYN64_64 / DIST_RESNET50_SYN64_1 / 64
    )  # 0.818: efficiency, throughput at 64 over 64 x that at 1
    assert eff[("observed", "Inception-v3 · batch 64", 64)] == pytest.approx(
        DIST_INCEPTION3_SYN64_64 / DIST_INCEPTION3_SYN64_1 / 64
    )
    # Horovod's documented 512-GPU efficiencies (experiments/reference/horovod-docs)
    assert eff[("claim", "VGG-16 · P100", 512)] == pytest.approx(0.68)
    assert eff[("claim", "Inception-v3 · P100", 512)] == eff[("claim", "ResNet-101 · P100", 512)] == 0.9
