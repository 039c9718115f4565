"""figures.draw_warmup in the test's own process on a small real MLflow store (the published figure 5 is checked
against the HackSA logs in tests/test_figure_values.py): the store it reads, the panels' order, the legend's unit
for runs on CPUs, and its refusal."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from scalestudy.paper.figures import draw_warmup
from scalestudy.schema import RunRecord
from scalestudy.store import load_runs, sync_experiment

START = 1_700_000_000_000  # ms


def record(key: str, batch: int, workers: int, rates: list[float], series: bool = True):
    params = {"model": "resnet50", "framework": "tensorflow", "workers": workers, "device": "cpu",
              "data": "synthetic", "batch_per_worker": batch, "platform": "test-box"}  # fmt: skip
    points = [(10 * (i + 1), START + 1000 * (i + 1), r) for i, r in enumerate(rates)]
    return RunRecord(experiment="warm", key=key, params=params, metrics={"throughput_total": rates[-1]},
                     tags={"source": "measured"}, series={"step_throughput_total": points} if series else {},
                     start_ms=START, end_ms=START + 1000 * (len(rates) + 1), where=f"test:{key}")  # fmt: skip


def spec(uri: str, facet: str = "batch_per_worker") -> dict:
    return {"name": "figure-w", "title": "w", "tracking_uri": uri,
            "plot": {"series": "step_throughput_total", "facet": facet, "per_worker": True}}  # fmt: skip


def test_draw_warmup_reads_the_figures_store_orders_panels_by_number_and_names_cpu_ranks(
    empty_store, tmp_path, monkeypatch
):
    sync_experiment("warm", [record("a", 64, 2, [10.0, 20.0, 30.0]), record("b", 128, 1, [5.0, 6.0])], empty_store)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'elsewhere.db'}")  # not the figure's store
    runs = load_runs(empty_store)
    fig, points = draw_warmup(spec(empty_store), runs, runs)
    # batch 64 before 128 (as numbers; MLflow keeps params as text, where "128" < "64")
    assert [p["panel"] for p in points] == ["batch 64", "batch 128"]
    assert [ax.get_title() for ax in fig.axes[:2]] == ["batch 64", "batch 128"]
    two, one = points
    assert (two["legend"], one["legend"]) == ("2 ranks", "1 rank")  # on CPUs, not "2 GPUs"
    assert two["steps"] == [10, 20, 30] and two["elapsed_s"] == [1.0, 2.0, 3.0]
    assert two["value"] == [5.0, 10.0, 15.0] and one["value"] == [5.0, 6.0]  # per rank: the total / 2


def test_draw_warmup_refuses_runs_without_the_series(empty_store):
    sync_experiment("warm", [record("a", 64, 2, [10.0, 20.0], series=False)], empty_store)
    runs = load_runs(empty_store)
    with pytest.raises(LookupError, match=r"^figure-w: the selected runs have no 'step_throughput_total' series$"):
        draw_warmup(spec(empty_store), runs, runs)
