"""The table builder: table functions against numbers computed by hand from the primary values, rendering
through the real configs and templates, and failure modes (empty selection, nothing overwritten)."""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

import pandas as pd
import pytest
import yaml

from scalestudy.paper import formats, table_values, tables
from scalestudy.paper.latex import tex
from scalestudy.paper.selection import EmptySelection

REPO = Path(__file__).resolve().parents[1]
TF_CSV = REPO / "experiments/reference/tf-benchmarks-2017/tf_benchmarks_2017.csv"
DGX, GCE = "nvidia-dgx-1", "gce-n1-standard-32-k80x8"


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    """Templates are found relative to the repository root, as `make` runs the builder."""
    monkeypatch.chdir(REPO)


def config(name: str) -> dict:
    return yaml.safe_load((REPO / "conf" / "table" / f"{name}.yaml").read_text())


def compute_args(spec: dict) -> dict:
    args = dict(spec["compute"])
    args.pop("_target_")
    return args


# ------------------------------------------------------------------------------------------------
# Table 1: the primary numbers, read straight from the CSV (the test's own copy of the source)


def primary() -> dict[tuple, float]:
    """(platform, model, data, batch, gpus) -> images/s, for the sheet's 64 cells."""
    out = {}
    with TF_CSV.open() as handle:
        for row in csv.DictReader(handle):
            if (
                row["platform"] in (DGX, GCE)
                and row["model"] in ("inception3", "resnet50")
                and row["batch_per_gpu"] in ("32", "64")
            ):
                key = (row["platform"], row["model"], row["data"], int(row["batch_per_gpu"]), int(row["gpus"]))
                out[key] = float(row["images_per_sec"])
    assert len(out) == 64
    return out


def tf_runs(extra: list[dict] | None = None) -> pd.DataFrame:
    """The 64 runs as the tidy table holds them (plus `extra` rows)."""
    rows = []
    for (platform, model, data, batch, gpus), value in sorted(primary().items()):
        device = "P100" if platform == DGX else "K80"
        rows.append(
            {
                "run_id": f"{platform}-{model}-{data}-{batch}-{gpus}",
                "experiment": "tf-benchmarks-2017",
                "experiment_id": "1",
                "run_name": f"{model} · {device} · {gpus} GPUs · {data} · b{batch} · {platform}",
                "status": "FINISHED",
                "source": "published",
                "model": model,
                "device": device,
                "data": data,
                "batch_per_worker": batch,
                "workers": gpus,
                "platform": platform,
                "throughput_total": value,
            }
        )
    return pd.DataFrame(rows + (extra or []))


@pytest.fixture(scope="module")
def sheet():
    spec = yaml.safe_load((REPO / "conf/table/table-1.yaml").read_text())
    data = table_values.tf_sheet(tf_runs(), **compute_args(spec))
    return {p["key"]: p for p in data["panels"]}, data


def cell(panel: dict, workers: int, **where) -> float:
    """The value of the one column of `panel` matching `where`, at `workers` GPUs."""
    index = [i for i, col in enumerate(panel["columns"]) if all(col[k] == str(v) for k, v in where.items())]
    assert len(index) == 1, (where, panel["columns"])
    row = next(r for r in panel["rows"] if r["workers"] == workers)
    return row["values"][index[0]]


def test_tf_sheet_speedup_and_efficiency_by_hand(sheet):
    panels, _ = sheet
    p = primary()
    key = dict(batch_per_worker=64, data="synthetic", model="inception3", device="P100")
    assert cell(panels["speedup"], 8, **key) == pytest.approx(1131 / 142)
    assert cell(panels["efficiency"], 8, **key) == pytest.approx(1131 / 142 / 8)
    assert p[(DGX, "inception3", "synthetic", 64, 8)] == 1131 and p[(DGX, "inception3", "synthetic", 64, 1)] == 142
    # The sheet's slip cell: the page has 569 (the sheet 596), so no superlinear 104.93 % efficiency.
    assert cell(panels["efficiency"], 4, **key) == pytest.approx(569 / 142 / 4)
    assert round(569 / 142 / 4, 4) == 1.0018
    assert cell(panels["throughput"], 4, **key) == 569


def test_tf_sheet_ratios_by_hand(sheet):
    panels, _ = sheet
    p = primary()
    # P100 against K80, resnet50, real data, batch 32, 1 GPU: 193 / 49.3
    assert cell(panels["p100_vs_k80"], 1, batch_per_worker=32, data="real", model="resnet50") == pytest.approx(
        193 / 49.3
    )
    assert p[(GCE, "resnet50", "real", 32, 1)] == 49.3
    # ResNet-50 against Inception-v3, K80, synthetic, batch 64, 1 GPU: 51.9 / 30.5 (the page, not 52 / 30)
    assert cell(
        panels["resnet50_vs_inception3"], 1, batch_per_worker=64, data="synthetic", device="K80"
    ) == pytest.approx(51.9 / 30.5)
    # synthetic against real, inception3 P100 batch 64 at 8 GPUs: 1131 / 1079
    assert cell(
        panels["synthetic_vs_real"], 8, batch_per_worker=64, model="inception3", device="P100"
    ) == pytest.approx(1131 / 1079)
    # batch 64 against 32 is a ratio of speedups: inception3 P100 synthetic, 2 GPUs: (284/142) / (259/128)
    assert cell(panels["batch_64_vs_32"], 2, data="synthetic", model="inception3", device="P100") == pytest.approx(
        (284 / 142) / (259 / 128)
    )
    assert all(v == pytest.approx(1.0) for v in panels["batch_64_vs_32"]["rows"][0]["values"])


def test_tf_sheet_medians_by_hand(sheet):
    panels, _ = sheet
    p = primary()
    # Row median of P100/K80 at 8 GPUs: the 8 ratios (batch 64, 32 > synthetic, real > inception3, resnet50).
    ratios8 = [
        p[(DGX, m, d, b, 8)] / p[(GCE, m, d, b, 8)]
        for b in (64, 32)
        for d in ("synthetic", "real")
        for m in ("inception3", "resnet50")
    ]
    row8 = panels["p100_vs_k80"]["rows"][3]
    assert row8["workers"] == 8 and row8["values"] == pytest.approx(ratios8)
    assert row8["median"] == pytest.approx(statistics.median(ratios8))
    # Overall medians of all 32 ratios: the sheet's 4.40 and 1.61 hold from the primary numbers too.
    all_p100 = [
        p[(DGX, m, d, b, n)] / p[(GCE, m, d, b, n)]
        for b in (64, 32)
        for d in ("synthetic", "real")
        for m in ("inception3", "resnet50")
        for n in (1, 2, 4, 8)
    ]
    assert panels["p100_vs_k80"]["overall_median"] == pytest.approx(statistics.median(all_p100))
    assert f"{statistics.median(all_p100):.2f}" == "4.40"
    all_model = [
        p[(pl, "resnet50", d, b, n)] / p[(pl, "inception3", d, b, n)]
        for pl in (DGX, GCE)
        for b in (64, 32)
        for d in ("synthetic", "real")
        for n in (1, 2, 4, 8)
    ]
    assert panels["resnet50_vs_inception3"]["overall_median"] == pytest.approx(statistics.median(all_model))
    assert f"{statistics.median(all_model):.2f}" == "1.61"
    # images/s rows carry no median (the sheet gives none: a median over models and GPUs means nothing).
    assert all(r["median"] is None for r in panels["throughput"]["rows"])
    assert panels["speedup"]["overall_median"] is None


def test_tf_sheet_column_order_is_the_sheets(sheet):
    panels, data = sheet
    assert data["dims"] == ["batch_per_worker", "data", "model", "device"]
    first = [tuple(c.values()) for c in panels["throughput"]["columns"][:5]]
    assert first == [
        ("64", "synthetic", "inception3", "P100"),
        ("64", "synthetic", "inception3", "K80"),
        ("64", "synthetic", "resnet50", "P100"),
        ("64", "synthetic", "resnet50", "K80"),
        ("64", "real", "inception3", "P100"),
    ]
    assert [tuple(c.values()) for c in panels["p100_vs_k80"]["columns"]][:3] == [
        ("64", "synthetic", "inception3"),
        ("64", "synthetic", "resnet50"),
        ("64", "real", "inception3"),
    ]


def test_tf_sheet_with_the_sheets_inputs_gives_the_sheets_numbers(sheet):
    """Fed the sheet's inputs (conf/table/table-1.yaml sheet_inputs), the function prints the sheet's rows
    (copied here from seed 003, rows 19, 23, 33 and 37): the columns and formulas are the sheet's."""
    panels, _ = sheet
    fmt = formats.fmt
    speed4 = [fmt(v, "fixed2") for v in panels["speedup"]["sheet"]["rows"][2]["values"]]
    assert speed4 == [
        "4.20",
        "3.87",
        "3.89",
        "3.75",
        "3.88",
        "3.76",
        "3.91",
        "3.79",
        "4.06",
        "3.72",
        "3.94",
        "3.70",
        "3.90",
        "3.73",
        "3.94",
        "3.77",
    ]
    assert fmt(panels["speedup"]["sheet"]["rows"][2]["median"], "fixed2") == "3.87"
    eff4 = [f"{100 * v:.2f}" for v in panels["efficiency"]["sheet"]["rows"][2]["values"]]
    assert eff4 == [
        "104.93",
        "96.67",
        "97.26",
        "93.75",
        "97.01",
        "93.95",
        "97.82",
        "94.73",
        "101.56",
        "93.00",
        "98.46",
        "92.42",
        "97.50",
        "93.22",
        "98.45",
        "94.32",
    ]
    p100_1 = [fmt(v, "fixed2") for v in panels["p100_vs_k80"]["sheet"]["rows"][0]["values"]]
    assert p100_1 == ["4.73", "4.21", "4.64", "4.26", "4.37", "3.94", "4.41", "3.91"]
    model_1 = [fmt(v, "fixed2") for v in panels["resnet50_vs_inception3"]["sheet"]["rows"][0]["values"]]
    assert model_1 == ["1.54", "1.73", "1.54", "1.67", "1.52", "1.69", "1.48", "1.67"]
    assert fmt(panels["p100_vs_k80"]["sheet"]["overall_median"], "fixed2") == "4.40"
    assert fmt(panels["resnet50_vs_inception3"]["sheet"]["overall_median"], "fixed2") == "1.61"


def test_tf_sheet_missing_cell_is_none_and_duplicate_is_an_error():
    spec = config("table-1")
    runs = tf_runs()
    gone = runs[
        ~(
            (runs.model == "resnet50")
            & (runs.device == "K80")
            & (runs.data == "real")
            & (runs.batch_per_worker == 32)
            & (runs.workers == 1)
        )
    ]
    args = compute_args(spec)
    args["sheet_inputs"] = []
    panels = {p["key"]: p for p in table_values.tf_sheet(gone, **args)["panels"]}
    key = dict(batch_per_worker=32, data="real", model="resnet50", device="K80")
    assert cell(panels["throughput"], 1, **key) is None
    assert cell(panels["speedup"], 8, **key) is None  # no baseline: no speedup, never a made-up one
    assert cell(panels["p100_vs_k80"], 1, batch_per_worker=32, data="real", model="resnet50") is None
    twice = pd.concat([runs, runs.iloc[:1].assign(run_id="copy")], ignore_index=True)
    with pytest.raises(ValueError, match="several runs share one cell"):
        table_values.tf_sheet(twice, **args)


def test_tf_sheet_input_that_matches_no_run_is_an_error():
    args = compute_args(config("table-1"))
    args["sheet_inputs"] = [
        {
            "model": "resnet50",
            "device": "V100",
            "data": "synthetic",
            "batch_per_worker": 64,
            "workers": 1,
            "throughput_total": 1.0,
        }
    ]
    with pytest.raises(ValueError, match="matches 0 runs"):
        table_values.tf_sheet(tf_runs(), **args)


# ------------------------------------------------------------------------------------------------
# Rendering table 1 through build_table (real config, real template)


@pytest.fixture
def table1(tmp_path):
    spec = config("table-1")
    written = tables.build_table(spec, tf_runs(), source="published", out_dir=tmp_path, commit="abc123")
    return tmp_path, written


def test_table1_files_and_provenance(table1):
    out, written = table1
    assert written == [out / "table-1.tex", out / "table-1.json"]
    text = (out / "table-1.tex").read_text()
    first = text.splitlines()[0]
    assert first.startswith("%") and "abc123" in first
    assert "make table-1" in text.splitlines()[1]
    sidecar = json.loads((out / "table-1.json").read_text())
    assert sidecar["git_commit"] == "abc123" and sidecar["source"] == "published"
    assert sorted(r["run_id"] for r in sidecar["mlflow_runs"]) == sorted(tf_runs().run_id)
    assert sidecar["data"]["panels"][0]["key"] == "throughput"


def test_table1_renders_booktabs_numbers_and_marks(table1):
    out, _ = table1
    text = (out / "table-1.tex").read_text()
    for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\cmidrule"):
        assert rule in text
    assert not re.search(r"nan", text, flags=re.IGNORECASE)
    # images/s as on the page: 30.5 (3 significant figures), 1131; the slip cell 569 marked with a dagger.
    assert "& 30.5\\textsuperscript{\\dag} &" in text
    assert "569\\textsuperscript{\\dag}" in text and "596\\textsuperscript" not in text
    # recomputed efficiency at the slip cell: 100.2 (%), marked; the sheet's 104.9 listed below the table
    assert "100.2\\textsuperscript{\\dag}" in text
    assert "col.\\,1: 104.9" in text
    # speedup at 8 GPUs of inception3 P100 synthetic b64: 1131/142 = 7.96, unmarked (the sheet has 7.96 too)
    assert f"8 & {1131 / 142:.2f} & " in text
    # overall medians, bold, unmarked (the sheet's inputs give the same)
    assert "\\textbf{4.40}" in text and "\\textbf{1.61}" in text
    # the continuation keeps the table number
    assert "\\ContinuedFloat" in text


def test_table_build_is_deterministic(tmp_path):
    spec = config("table-1")
    a = tables.build_table(spec, tf_runs(), source="published", out_dir=tmp_path / "a", commit="c")
    b = tables.build_table(
        spec, tf_runs().sample(frac=1, random_state=3), source="published", out_dir=tmp_path / "b", commit="c"
    )
    for x, y in zip(a, b):
        assert x.read_bytes() == y.read_bytes()


def test_empty_selection_is_an_error_naming_the_table(tmp_path):
    spec = config("table-1")
    spec["runs"]["published"]["platform"] = "no-such-machine"
    with pytest.raises(EmptySelection, match="table table-1"):
        tables.build_table(spec, tf_runs(), source="published", out_dir=tmp_path, commit="c")
    with pytest.raises(EmptySelection, match="source=measured"):
        tables.build_table(config("table-1"), tf_runs(), source="measured", out_dir=tmp_path, commit="c")


@pytest.mark.parametrize("breakage", ["empty", "template", "compute"])
def test_failed_build_leaves_existing_files_untouched(tmp_path, breakage):
    spec = config("table-1")
    old_tex, old_json = tmp_path / "table-1.tex", tmp_path / "table-1.json"
    old_tex.write_text("% the table of yesterday\n")
    old_json.write_text("{}\n")
    if breakage == "empty":
        spec["runs"]["published"]["model"] = "vgg16"
    elif breakage == "template":
        bad = tmp_path / "broken.tex.j2"
        bad.write_text("\\begin{tabular}\n((( data.no_such_thing )))\n")
        spec["template"] = str(bad)
    else:
        spec["compute"]["sheet_inputs"][0]["workers"] = 3
    with pytest.raises((LookupError, ValueError)) as err:
        tables.build_table(spec, tf_runs(), source="published", out_dir=tmp_path, commit="new")
    if breakage == "template":
        assert "broken.tex.j2:2" in str(err.value)
    assert old_tex.read_text() == "% the table of yesterday\n"
    assert old_json.read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


# ------------------------------------------------------------------------------------------------
# Table 2: Keras backends


def keras_row(model, protocol, framework, workers, **metrics):
    epochs = {("resnet50", "plain"): 10, ("resnet50", "reduce-randomization"): 100}.get((model, protocol), 25)
    return {
        "run_id": f"k-{model}-{protocol}-{framework}-{workers}",
        "experiment": "keras-backends-2017",
        "experiment_id": "2",
        "run_name": f"{model} {framework} {protocol} {workers}",
        "status": "FINISHED",
        "source": "published",
        "model": model,
        "framework": framework,
        "api": "keras-1.2.2",
        "protocol": protocol,
        "workers": workers,
        "epochs": epochs,
        "platform": "aws-p2.16xlarge" if model == "resnet50" else "aws-p2.8xlarge",
        "device": "K80",
        **metrics,
    }


KERAS_VALUES = (
    "time_total_s",
    "time_per_epoch_s",
    "throughput_total",
    "accuracy_train",
    "accuracy_test",
    "memory_peak_mb",
)
# seed 001 as published: model, protocol, framework, GPUs, then KERAS_VALUES (None: the source gives none)
KERAS_TABLE = [
    ("inception3", "plain", "mxnet", 1, 10738.0, 2147.0, None, 0.78, 0.73, 10319.0),  # no images/s, no 16 GPUs
    ("inception3", "plain", "mxnet", 8, 2839.0, 568.0, None, 0.81, 0.78, 12183.0),
    ("resnet50", "reduce-randomization", "mxnet", 1, 15860.5, 158.61, 378.30, 0.95, 0.80, 5091.0),
    ("resnet50", "reduce-randomization", "mxnet", 16, 3040.19, 304.02, 1973.56, 0.94, 0.77, 15267.0),  # the slip
    ("resnet50", "reduce-randomization", "tensorflow", 1, 23749.9, 237.50, 252.63, 0.95, 0.80, 10946.0),
    ("resnet50", "plain", "mxnet", 8, 418.09, 41.80, 1435.06, 0.68, 0.59, 9786.0),
]


def keras_runs() -> pd.DataFrame:
    rows = []
    for model, protocol, framework, workers, *values in KERAS_TABLE:
        given = {k: v for k, v in zip(KERAS_VALUES, values) if v is not None}
        rows.append(keras_row(model, protocol, framework, workers, **given))
    return pd.DataFrame(rows)


def test_keras_blocks_rows_and_columns():
    data = table_values.backend_comparison(keras_runs(), **compute_args(config("table-2")))
    assert data["workers"] == [1, 8, 16]
    order = [(b["model"], b["protocol"], b["framework"]) for b in data["blocks"]]
    assert order == [
        ("resnet50", "plain", "mxnet"),
        ("resnet50", "reduce-randomization", "mxnet"),
        ("resnet50", "reduce-randomization", "tensorflow"),
        ("inception3", "plain", "mxnet"),
    ]
    inception = data["blocks"][3]
    assert [r["metric"] for r in inception["rows"]] == [
        "time_total_s",
        "time_per_epoch_s",
        "accuracy_train",
        "accuracy_test",
        "memory_peak_mb",
    ]  # no images/s
    assert inception["rows"][0]["values"] == [10738.0, 2839.0, None]
    assert inception["epochs"] == "25" and inception["platform"] == "aws-p2.8xlarge"
    rr = data["blocks"][1]
    epoch = next(r for r in rr["rows"] if r["metric"] == "time_per_epoch_s")
    assert epoch["values"] == [158.61, None, 304.02] and epoch["notes"] == [None, None, 1]
    assert data["notes"][0].startswith("As published")


def rendered(name: str, runs: pd.DataFrame, folder: Path) -> str:
    """The .tex that `make <name>` writes for these runs."""
    tables.build_table(config(name), runs, source="published", out_dir=folder, commit="c1")
    return (folder / f"{name}.tex").read_text()


def test_keras_table_renders(tmp_path):
    text = rendered("table-2", keras_runs(), tmp_path)
    assert "\\toprule" in text and "\\bottomrule" in text
    assert "\\quad training time (s) & 10738 & 2839 & -- \\\\" in text
    assert "\\quad time per epoch (s) & 158.61 & -- & 304.02\\textsuperscript{1} \\\\" in text
    assert "\\quad images/s & 378.30 & -- & 1973.56 \\\\" in text
    assert "\\quad training accuracy & 0.95 & -- & 0.94 \\\\" in text
    assert "\\quad maximum memory (MB) & 5091 & -- & 15267 \\\\" in text
    assert "\\textbf{Inception-v3}, MXNet backend, plain: 25 epochs, aws-p2.8xlarge" in text
    assert "30.40 s per epoch" in text
    assert not re.search(r"nan", text, flags=re.IGNORECASE)


# ------------------------------------------------------------------------------------------------
# Table 3: HackSA


TIME_LIMIT = (
    "slurmstepd: error: *** JOB 1112527 ON p9r3n05 CANCELLED AT 2019-01-14T12:52:16 DUE TO TIME LIMIT *** "
    "(4.err:193); also Horovod stall: stalled op HorovodAllreduce_x [missing ranks: 1, 3] (4.err:143)"
)


def hacksa_row(model, workers, status="FINISHED", **values):
    return {
        "run_id": f"h-{model}-{workers}",
        "run_name": f"{model} {workers}",
        "experiment": "hacksa-2019",
        "experiment_id": "3",
        "status": status,
        "source": "published",
        "model": model,
        "workers": workers,
        "framework": "tensorflow",
        "batch_per_worker": 64,
        **values,
    }


# fmt: off
def hacksa_runs() -> pd.DataFrame:
    return pd.DataFrame([
        hacksa_row("vgg19", 1, time_init_s=31.4, time_work_s=194.0, time_total_s=225.4,
                   throughput_total=170.0, throughput_per_worker=170.0, steps=500),
        hacksa_row("vgg19", 2, time_init_s=43.8, time_work_s=101.0, time_total_s=144.8,
                   throughput_total=338.0, throughput_per_worker=169.0, steps=500),
        hacksa_row("resnet101_v2", 1, time_init_s=68.2, time_work_s=69.0, time_total_s=137.2,
                   throughput_total=201.5, throughput_per_worker=201.5, steps=200),
        hacksa_row("resnet101_v2", 4, status="FAILED", time_init_s=109.1, failure_reason=TIME_LIMIT,
                   throughput_note="no 'Benchmark metric' line in the log"),
        hacksa_row("inception4", 1, time_init_s=67.6, time_work_s=136.0, time_total_s=203.6,
                   throughput_total=100.6, throughput_per_worker=100.6, steps=200),
        # 200 // 16 = 12 steps per rank: 192 steps' worth of images, not 200
        hacksa_row("inception4", 16, time_init_s=108.5, time_work_s=20.6, time_total_s=129.1, steps=192,
                   throughput_note="no 'Benchmark metric' line in the log: each rank ran 12 steps"),
    ])
# fmt: on


def test_hacksa_numbers_by_hand():
    data = table_values.runs_with_speedups(hacksa_runs(), **compute_args(config("table-3")))
    blocks = {b["model"]: b for b in data["blocks"]}
    assert [b["model"] for b in data["blocks"]] == ["vgg19", "resnet101_v2", "inception4"]
    vgg2 = blocks["vgg19"]["rows"][1]
    assert vgg2["speedup_speed"] == pytest.approx(338.0 / 170.0)  # = 2 x 169 / 170, the HackSA formula
    assert vgg2["speedup_time"] == pytest.approx(194.0 / 101.0)
    assert vgg2["efficiency_speed"] == pytest.approx(338.0 / 170.0 / 2)
    assert vgg2["efficiency_time"] == pytest.approx(194.0 / 101.0 / 2)
    failed = blocks["resnet101_v2"]["rows"][1]
    assert failed["status"] == "FAILED" and failed["reason"] == "Horovod stall; Slurm time limit"
    assert failed["time_init_s"] == 109.1 and failed["speedup_time"] is None
    no_speed = blocks["inception4"]["rows"][1]
    assert no_speed["throughput_per_worker"] is None and no_speed["speedup_speed"] is None
    assert no_speed["speedup_time"] == pytest.approx(136.0 / 20.6)
    assert no_speed["note"].startswith("no 'Benchmark metric'")
    # per image: (192 x 64 / 20.6) / (200 x 64 / 136.0); the study's ratio of times stays beside it
    assert no_speed["speedup_time_per_image"] == pytest.approx((192 * 64 / 20.6) / (200 * 64 / 136.0))
    assert no_speed["unequal_work"] and not vgg2["unequal_work"]
    assert no_speed["work_note"] == (
        "16 ranks x 12 steps x 64 images = 12288 images, against 12800 on 1 GPU: by time per image = by time x 0.960"
    )
    assert vgg2["speedup_time_per_image"] == pytest.approx(vgg2["speedup_time"])  # same images: the same


def test_hacksa_table_renders_failed_and_missing(tmp_path):
    text = rendered("table-3", hacksa_runs(), tmp_path)
    assert "\\toprule" in text and "\\cmidrule" in text
    columns = [c["column"] for c in config("table-3")["columns"]]
    # a failed run: what it logged (init), then one cell saying it failed and why
    reason = "\\textit{failed}: Horovod stall; Slurm time limit"
    failed = f"4 & 109.1 & \\multicolumn{{{len(columns) - 1}}}{{l}}{{{reason}}} \\\\"
    assert failed in text
    # the 16-GPU row: two notes, the unequal work (on the GPU count) and the missing throughput (on the speed)
    line16 = next(line for line in text.splitlines() if line.startswith("16\\textsuperscript{1} & "))
    cells = dict(zip(["workers", *columns], [c.strip() for c in line16.rstrip("\\ ").split("&")]))
    assert [cells[c] for c in ("time_init_s", "time_work_s", "time_total_s")] == ["108.5", "20.6", "129.1"]
    assert cells["throughput_per_worker"] == "--\\textsuperscript{2}"
    assert cells["speedup_speed"] == cells["efficiency_speed"] == "--"  # speed-based: '--'
    assert (
        cells["speedup_time"] == f"{136.0 / 20.6:.2f}" and cells["efficiency_time"] == f"{100 * 136.0 / 20.6 / 16:.1f}"
    )
    per_image = (192 * 64 / 20.6) / (200 * 64 / 136.0)
    assert cells["speedup_time_per_image"] == f"{per_image:.2f}"
    assert cells["efficiency_time_per_image"] == f"{100 * per_image / 16:.1f}"
    assert not re.search(r"(?<![\w.])0\.0*(?![\w.])", " ".join(cells.values()))  # never a 0 for a missing number
    vgg2 = next(line for line in text.splitlines() if line.startswith("2 & "))
    assert f"& {338 / 170:.2f} & {194 / 101:.2f} & {194 / 101:.2f} & {100 * 338 / 170 / 2:.1f} & " in vgg2
    assert "\\textbf{VGG-19}" in text and "(published)" not in text  # one source: no source label
    assert "\\textsuperscript{1}\\,16 ranks x 12 steps x 64 images = 12288 images" in text
    assert "\\textsuperscript{2}\\,no 'Benchmark metric' line in the log: each rank ran 12 steps." in text
    assert not re.search(r"nan", text, flags=re.IGNORECASE)


def test_hacksa_failure_reason_without_a_known_pattern():
    assert (
        table_values.short_reason(
            "the log ends at line 80 without a 'Training took' line", [{"pattern": "TIME LIMIT", "label": "time limit"}]
        )
        is None
    )
    assert table_values.short_reason(None, []) is None
    labels = config("table-3")["compute"]["failure_labels"]
    assert table_values.short_reason("Traceback ...\nValueError: bad shape (1.err:12)", labels) == "Python error"
    assert (
        table_values.short_reason("slurmstepd: error: *** JOB 1 CANCELLED DUE TO TIME LIMIT ***", labels)
        == "Slurm time limit"
    )


# ------------------------------------------------------------------------------------------------
# Filters


def test_number_formats():
    assert [formats.figs(v) for v in (30.5, 99.0, 142.0, 1131.0, 57.8, 0.98765)] == [
        "30.5",
        "99.0",
        "142",
        "1131",
        "57.8",
        "0.988",
    ]
    assert formats.percent(569 / 142 / 4) == "100.2" and formats.fixed(1131 / 142) == "7.96"
    assert (
        formats.trim(1609.32) == "1609.32" and formats.trim(10738.0) == "10738" and formats.trim(15860.5) == "15860.5"
    )
    # rounded, not cut: half to even (Python's rule) on an exact half
    assert [formats.integer(v) for v in (209.6, 209.106, 2.5, 3.5, 60000.234)] == ["210", "209", "2", "4", "60000"]
    for fn in (formats.figs, formats.percent, formats.fixed, formats.trim, formats.integer):
        assert fn(None) == "--" and fn(float("nan")) == "--"
    with pytest.raises(ValueError, match="unknown number format"):
        formats.fmt(1.0, "nope")
    assert tex("a_b & 10% #1 {x} ~") == r"a\_b \& 10\% \#1 \{x\} \textasciitilde{}"


def test_a_rows_cells_share_the_decimals_of_its_most_precise_cell():
    from scalestudy.paper.formats import fmt_row

    assert fmt_row([160.93, 97.19, 41.8, float("nan")], "trim2") == ["160.93", "97.19", "41.80", "--"]
    assert fmt_row([10738.0, 5935.0, 2839.0], "trim2") == ["10738", "5935", "2839"]
    assert fmt_row([15860.5, 3429.55], "trim2") == ["15860.50", "3429.55"]
    assert fmt_row([0.5, 0.25], "fixed1") == ["0.5", "0.2"]  # other formats: cell by cell


# ------------------------------------------------------------------------------------------------
# Table 5: seed 002's tables against its raw logs (keras-multi-gpu-2017)


@pytest.fixture(scope="module")
def kmg_runs() -> pd.DataFrame:
    from helpers import require_raw_data

    from scalestudy.ingest import keras_multi_gpu

    require_raw_data()
    recs = keras_multi_gpu.read(REPO / "experiments/reference/keras-multi-gpu-2017")
    rows = [{**r.params, **r.metrics, **r.tags, "status": r.status, "run_id": r.key, "run_name": r.run_name}
            for r in recs]  # fmt: skip
    return pd.DataFrame(rows)


def test_table5_cells_by_hand(kmg_runs):
    spec = config("table-5")
    data = table_values.cross_check(kmg_runs, **compute_args(spec))
    cell = {(r["published_table"], r["platform"], r["method"], r["model"]): r for r in data["rows"]}
    # measurements.md:349-355, kuza55 on 7gforce, Inception-v3: images/s at 1 GPU, then at 2 and 4 GPUs with the
    # PS on the CPU and on a GPU images/s, speedup and efficiency (4 x 3), and 6 GPUs 'error' twice: 1 + 12 + 2
    kuza = cell[("keras-inception3", "7gforce", "kuza55", "inception3")]
    assert (kuza["printed"], kuza["logged"], kuza["agree"]) == (15, 15, 15)
    assert kuza["lines"] == "349--355" and kuza["log_files"] == ["benchmark_inception3_resnet50_results_7gforce.txt"]
    # avolkov1 ran at 6 GPUs: 1 + 6 x 3
    assert cell[("keras-inception3", "7gforce", "avolkov1", "inception3")]["printed"] == 19
    # 7gforce tf_cnn_benchmarks (measurements.md:174-177): 4 images/s, 3 speedups, 3 efficiencies, no log
    seven = cell[("tf-cnn-inception3", "7gforce", "tf_cnn_benchmarks", "inception3")]
    assert (seven["printed"], seven["logged"], seven["agree"], seven["log_files"]) == (10, 0, 0, [])
    # measurements.md:405: tf_cnn_benchmarks NCHW 47.49 (the trace's line 54) and NHWC 38.92 (no log)
    one_gpu = cell[("one-gpu-speed", "az-2x-m60", "tf_cnn_benchmarks", "inception3")]
    assert (one_gpu["printed"], one_gpu["logged"], one_gpu["agree"]) == (2, 1, 1)
    assert len(data["rows"]) == 28 and data["disagreements"] == []
    assert data["totals"]["by_quantity"] == {
        "efficiency_pct": [31, 31], "images_per_sec": [48, 48], "speedup": [31, 31], "status": [4, 4]}  # fmt: skip
    assert (data["totals"]["printed"], data["totals"]["logged"], data["totals"]["agree"]) == (216, 114, 114)
    # 7gforce has 6 GPUs: kuza55 measured 1, 2 and 4 (6 an "error" cell), tf_cnn_benchmarks 1 to 6
    assert kuza["gpus"] == "1, 2, 4, 6" and seven["gpus"] == "1, 2, 4, 6"  # measurements.csv rows 19-22
    assert data["run_ids"] == sorted(kmg_runs["run_id"])  # the sidecar's list, every run the table read
    # rows in the config's order (published table, then machine, method, model), not alphabetically
    order = spec["compute"]["order"]
    ranks = [tuple(order[c].index(r[c]) for c in ("published_table", "platform", "method", "model"))
             for r in data["rows"]]  # fmt: skip
    assert ranks == sorted(ranks) and data["rows"][0]["published_table"] == "tf-cnn-inception3"


def test_table5_names_a_log_file_whose_name_holds_a_colon(kmg_runs):
    """A log line is 'file:line'; the file is everything before the last colon (Linux file names may hold one)."""
    spec = config("table-5")
    renamed = kmg_runs.assign(
        source_line=kmg_runs["source_line"].str.replace("results_7gforce.txt:", "results:7gforce.txt:", regex=False),
        published_line=kmg_runs["published_line"].str.replace("measurements.md:", "measure:ments.md:", regex=False),
    )
    data = table_values.cross_check(renamed, **compute_args(spec))
    kuza = next(r for r in data["rows"] if (r["platform"], r["method"], r["model"]) == ("7gforce", "kuza55",
                "inception3") and r["published_table"] == "keras-inception3")  # fmt: skip
    assert kuza["log_files"] == ["benchmark_inception3_resnet50_results:7gforce.txt"] and kuza["lines"] == "349--355"


def test_table5_lists_a_disagreement(kmg_runs):
    """A printed speedup the log does not give (measurements.md:353 kuza55 printed 1.47 instead of 1.46) is
    counted and listed with the log's value, 57.15 / 39.07 (7gforce log lines 179 and 54)."""
    spec = config("table-5")
    doctored = kmg_runs.copy()
    hit = (doctored["published_line"] == "measurements.md:353") & (doctored["method"] == "kuza55")
    assert hit.sum() == 1
    doctored.loc[hit, "printed_speedup"] = "1.47"
    data = table_values.cross_check(doctored, **compute_args(spec))
    assert data["totals"]["agree"] == 113 and len(data["disagreements"]) == 1
    bad = data["disagreements"][0]
    assert (bad["quantity"], bad["printed"]) == ("speedup", "1.47") and bad["log"] == pytest.approx(57.15 / 39.07)
    # the sidecar's JSON: plain numbers, a missing one as None (never NaN), no numpy types
    assert all(v is None or type(v) in (str, bool, int, float) for v in bad.values()), bad
    assert all(v == v for v in bad.values() if type(v) is float)
    text = tables.render_table(spec, data, commit="abc", source="published", n_runs=len(doctored))
    assert "\\renewcommand{\\thetable}{5}" in text and "Disagreements:" in text and "printed 1.47" in text
    assert re.search(r"all &.*& 216 & 114 & 113 &", text)
