"""The numbers the paper's text quotes (scalestudy.paper.numbers): the functions on tables worked by hand, and
(integration) every macro of a fresh build recomputed here from the runs, with pandas and no scalestudy code."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest
from conftest import run_module

from scalestudy.paper import numbers
from scalestudy.store import load_runs

# ------------------------------------------------------------------------------------------------
# The functions


def hacksa_like() -> pd.DataFrame:
    rows = [  # model, workers, steps, time_work_s, throughput_total, time_init_s, time_total_s
        ("vgg19", 1, 500, 200.0, 100.0, 20.0, 220.0),
        ("vgg19", 2, 500, 110.0, 190.0, 40.0, 150.0),
        ("vgg19", 4, 992, 100.0, 380.0, 50.0, 150.0),
    ]
    cols = ["model", "workers", "steps", "time_work_s", "throughput_total", "time_init_s", "time_total_s"]
    table = pd.DataFrame(rows, columns=cols)
    return table.assign(run_id=["a", "b", "c"], run_name=["1", "2", "4"], batch_per_worker=64)


def test_value_picks_exactly_one_run():
    table = hacksa_like()
    assert numbers.value(table, column="steps", where={"workers": 4}) == 992
    with pytest.raises(ValueError, match="2 runs match"):
        numbers.value(table, column="steps", where={"steps": 500})
    with pytest.raises(ValueError, match="0 runs match"):
        numbers.value(table, column="steps", where={"workers": 8})


def test_scaled_count_extreme_and_per_worker_by_hand():
    table = hacksa_like()
    assert numbers.scaled(table, column="speedup_time", group=["model"], where={"workers": 4}) == 2.0
    # per image: (992 x 64 / 100) / (500 x 64 / 200) = 3.968
    per_image = numbers.scaled(table, column="efficiency_time_per_image", group=["model"], where={"workers": 4})
    assert per_image == pytest.approx(3.968 / 4)
    assert numbers.count(table, group=["model"], flag="unequal_work") == 1
    assert numbers.count(table, where={"steps": 500}) == 2
    assert numbers.extreme(table, column="time_init_s", per="time_total_s", how="max") == pytest.approx(1 / 3)
    assert numbers.extreme(table, column="efficiency_speed", how="min", group=["model"]) == pytest.approx(0.95)
    assert numbers.per_worker(table, column="steps", where={"workers": 4}) == 248
    with pytest.raises(ValueError, match="min or max"):
        numbers.extreme(table, column="steps", how="median")


def test_ratio_pairs_counts_like_and_unlike_pairs():
    rows = [  # model, workers, variable_update, throughput
        ("resnet50", 1, "replicated", 200.0),
        ("inception3", 1, "replicated", 100.0),
        ("resnet50", 2, "replicated", 380.0),
        ("inception3", 2, "parameter_server", 200.0),  # unlike: another variable update
        ("resnet50", 4, "replicated", 800.0),
        ("inception3", 4, "replicated", 500.0),
    ]
    table = pd.DataFrame(rows, columns=["model", "workers", "variable_update", "throughput_total"])
    table = table.assign(run_id=list("abcdef"), device="K80", platform="aws", framework="tensorflow", data="real")
    args = {"between": "model", "numerator": "resnet50", "denominator": "inception3"}
    assert numbers.ratio_pairs(table, **args) == 2
    assert numbers.ratio_pairs(table, **args, unlike=True) == 1
    assert numbers.ratio_median(table, **args) == statistics.median([2.0, 1.6])


def test_ratio_extremes_and_batch_comparison_by_hand():
    rows = [  # device, platform, batch, workers, throughput
        ("P100", "dgx", 64, 1, 500.0),
        ("K80", "gce", 64, 1, 100.0),  # 5.0
        ("P100", "dgx", 32, 1, 400.0),
        ("K80", "gce", 32, 1, 100.0),  # 4.0: below its batch-64 twin
        ("P100", "dgx", 64, 2, 900.0),
        ("K80", "gce", 64, 2, 200.0),  # 4.5
        ("P100", "dgx", 32, 2, 960.0),
        ("K80", "gce", 32, 2, 200.0),  # 4.8: above its batch-64 twin
        ("P100", "dgx", 32, 4, 100.0),  # no K80 partner: no ratio
    ]
    table = pd.DataFrame(rows, columns=["device", "platform", "batch_per_worker", "workers", "throughput_total"])
    table = table.assign(run_id=[f"r{i}" for i in range(len(rows))], model="resnet50", data="synthetic")
    args = {"between": "device", "numerator": "P100", "denominator": "K80", "also_differ": ["platform"]}
    assert numbers.ratio_extreme(table, **args, how="min") == 4.0
    assert numbers.ratio_extreme(table, **args, how="max") == 5.0
    assert numbers.ratio_extreme(table, **args, how="max", where={"workers": 2}) == 4.8
    assert numbers.ratio_compare(table, **args, by="batch_per_worker", high=64, low=32) == 1
    assert numbers.ratio_compare(table, **args, by="batch_per_worker", high=64, low=32, total=True) == 2


def test_product_median_counts_images_per_epoch():
    table = pd.DataFrame({"throughput_total": [372.82, 617.32, 1.0], "time_per_epoch_s": [160.93, 97.19, None]})
    assert numbers.product_median(table, columns=["throughput_total", "time_per_epoch_s"]) == pytest.approx(
        statistics.median([372.82 * 160.93, 617.32 * 97.19])
    )


def test_a_number_the_runs_do_not_give_is_an_error_naming_the_config_key():
    table = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    spec = {
        "name": "numbers-x",
        "numbers": {
            "Missing": {
                "runs": {"published": {"experiment": "e"}},
                "value": {
                    "_target_": "scalestudy.paper.numbers.scaled",
                    "column": "speedup_speed",
                    "group": ["model"],
                    "where": {"workers": 8},
                },
            }
        },
    }
    with pytest.raises(ValueError, match=r"conf/numbers/numbers-x.yaml numbers.Missing"):
        numbers.compute_numbers(spec, table, "published", None)
    spec["numbers"] = {"Bad1": spec["numbers"]["Missing"]}
    with pytest.raises(ValueError, match="letters only"):
        numbers.compute_numbers(spec, table, "published", None)


def test_the_macros_are_written_with_their_format(tmp_path):
    table = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    entry = {"runs": {"published": {"experiment": "e"}}}
    spec = {
        "name": "numbers-x",
        "numbers": {
            "Eff": {
                **entry,
                "format": "percent0",
                "value": {
                    "_target_": "scalestudy.paper.numbers.scaled",
                    "column": "efficiency_time",
                    "group": ["model"],
                    "where": {"workers": 2},
                },
            },
            "Steps": {
                **entry,
                "format": "integer",
                "value": {"_target_": "scalestudy.paper.numbers.value", "column": "steps", "where": {"workers": 4}},
            },
        },
    }
    numbers.build_numbers(spec, table, source="published", out_dir=tmp_path, commit="c1")
    tex = (tmp_path / "numbers-x.tex").read_text().splitlines()
    assert tex[2:] == ["\\newcommand{\\numEff}{91}", "\\newcommand{\\numSteps}{992}"]  # 200/110/2 = 90.9 %
    saved = json.loads((tmp_path / "numbers-x.json").read_text())["values"]
    assert saved["Eff"]["value"] == pytest.approx(200 / 110 / 2) and saved["Steps"]["run_ids"] == ["a", "b", "c"]


# ------------------------------------------------------------------------------------------------
# Every macro of the paper, recomputed from the runs


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


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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
