"""figures.draw_warmup in the test's own process on a small real MLflow store (the published figure 5 is checked
against the HackSA logs in tests/test_figure_values.py): the store it reads, the panels' order, the legend's unit
for runs on CPUs, and its refusal."""

from __future__ import annotations

import warnings

import matplotlib
import pytest

matplotlib.use("Agg")

from scalestudy.paper.figures import draw_warmup
from scalestudy.paper.style import COLORS
from scalestudy.schema import RunRecord
from scalestudy.store import load_runs, sync_experiment

START = 1_700_000_000_000  # ms


def record(key: str, batch: int, workers: int, rates: list[float], series: bool = True, framework="tensorflow"):
    params = {"model": "resnet50", "framework": framework, "workers": workers, "device": "cpu",
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
    # no time_init_s, too short for MSER-5 to judge: the data alone, no cut line
    assert [len(ax.lines) for ax in fig.axes[:2]] == [1, 1]
    assert [(p["init_end_s"], p["warmup"], p["warmup_batches"], p["warmup_end_step"], p["warmup_end_s"])
            for p in points] == [(None, "unjudged", 0, None, None)] * 2  # fmt: skip
    by_key = runs.set_index("import_key")
    assert [(p["run_id"], p["series"]) for p in points] == [(by_key.loc[k, "run_id"], by_key.loc[k, "run_name"])
                                                            for k in ("a", "b")]  # fmt: skip


def test_draw_warmup_refuses_runs_without_the_series(empty_store):
    sync_experiment("warm", [record("a", 64, 2, [10.0, 20.0], series=False)], empty_store)
    runs = load_runs(empty_store)
    with pytest.raises(LookupError, match=r"^figure-w: the selected runs have no 'step_throughput_total' series$"):
        draw_warmup(spec(empty_store), runs, runs)


def test_draw_warmup_tells_frameworks_and_sources_apart_and_colours_rank_counts_in_order(empty_store):
    # ranks 1, 2, 4, 8, 16 (as text "16" < "2"): colours in numeric order; two frameworks and two sources
    # at 2 ranks: each its own legend entry and colour
    recs = [record(f"r{n}", 64, n, [1.0, 2.0]) for n in (16, 1, 8, 4)]
    recs += [record("tf2", 64, 2, [1.0, 2.0]), record("mx2", 64, 2, [1.0, 2.0], framework="mxnet"),
             record("pub2", 64, 2, [1.0, 2.0])]  # fmt: skip
    # a second panel whose first run has no series: skipped, and the run after it drawn
    recs += [record("none128", 128, 1, [1.0], series=False), record("x128", 128, 2, [3.0, 4.0])]
    sync_experiment("warm", recs, empty_store)
    runs = load_runs(empty_store)
    runs.loc[runs["import_key"] == "pub2", "source"] = "published"  # as a figure of both sources has it
    fig, points = draw_warmup(spec(empty_store), runs, runs)
    *points, last = points
    assert (last["panel"], last["legend"], last["value"]) == ("batch 128", "2 ranks · tensorflow · measured", [1.5, 2])
    legends = [p["legend"] for p in points]
    assert legends == ["1 rank · tensorflow · measured", "2 ranks · mxnet · measured",
                       "2 ranks · tensorflow · measured", "2 ranks · tensorflow · published",
                       "4 ranks · tensorflow · measured", "8 ranks · tensorflow · measured",
                       "16 ranks · tensorflow · measured"]  # fmt: skip
    shown = fig.legends[0]
    colour = {t.get_text(): h.get_color() for t, h in zip(shown.get_texts(), shown.legend_handles)}
    assert [colour[legend] for legend in legends] == list(COLORS[: len(legends)])


def test_draw_warmup_draws_the_data_above_both_cuts_in_the_runs_colour(empty_store):
    # 5 slow steps, then 15 steady: MSER-5's batch means 1, 10, 10, 10 cut after the first batch (the first of the
    # ties), at step 60 (6 s);
    # the study's cut at time_init_s, 2.5 s
    rates = [1.0] * 5 + [10.0] * 15
    rec = record("a", 64, 1, rates)
    rec.metrics["time_init_s"] = 2.5
    steady = record("b", 128, 1, [10.0] * 20)  # batch means 10, 10, 10, 10: nothing to cut
    sync_experiment("warm", [rec, steady], empty_store)
    runs = load_runs(empty_store)
    fig, points = draw_warmup(spec(empty_store), runs, runs)
    data, init, cut = fig.axes[0].lines  # in the order drawn
    assert data.get_marker() == "o" and data.get_zorder() > init.get_zorder() == cut.get_zorder()  # a lone point shows
    assert data.get_color() == init.get_color() == cut.get_color() == COLORS[0]
    assert (list(init.get_xdata()), init.get_linestyle()) == ([2.5, 2.5], ":")
    assert (list(cut.get_xdata()), cut.get_linestyle()) == ([6.0, 6.0], "--")
    point, flat = points
    assert (point["init_end_s"], point["warmup"], point["warmup_batches"], point["warmup_end_step"],
            point["warmup_end_s"]) == (2.5, "cut", 4, 60, 6.0)  # fmt: skip
    assert (flat["warmup"], flat["warmup_batches"], flat["warmup_end_step"], flat["warmup_end_s"]) == (
        "none", 4, None, None)  # fmt: skip
    assert len(fig.axes[1].lines) == 1  # no cut drawn


def test_a_figures_caption_by_hand():
    # the title twice (list of figures, bold), the config's caption on one line, the runs behind it; LaTeX escaped
    import pandas as pd

    from scalestudy.paper.figures import caption_tex

    fig_cfg = {"name": "figure-t", "title": "P100 & K80", "caption": "Speed-up\n   at 50% of\tthe GPUs."}
    chosen = pd.DataFrame({"experiment": ["tf-benchmarks-2017", "hacksa-2019", "hacksa-2019"]})
    assert caption_tex(fig_cfg, chosen, "published") == (
        "% figure-t: built from conf/figure/figure-t.yaml by `make figure-t`\n"
        "\\caption[P100 \\& K80]{\\textbf{P100 \\& K80.} Speed-up at 50\\% of the GPUs. Runs: 3 MLflow runs "
        "(published) of experiment(s) hacksa-2019, tf-benchmarks-2017; their ids are in figures/figure-t.json.}\n"
    )
    bare = caption_tex({"name": "figure-u", "title": "T"}, chosen.iloc[:1], "measured")  # no caption in its config
    assert bare.splitlines()[1] == ("\\caption[T]{\\textbf{T.}  Runs: 1 MLflow runs (measured) of experiment(s) "
                                    "tf-benchmarks-2017; their ids are in figures/figure-u.json.}")  # fmt: skip


def test_a_figures_derive_step_that_does_not_fit_names_its_config_key():
    import pandas as pd

    from scalestudy.paper.figures import derived_table

    runs = pd.DataFrame({"workers": [1]})
    assert derived_table(runs, {"name": "figure-t"}) is runs  # no derive step: the runs as they are
    with pytest.raises(ValueError, match=r"^conf/figure/figure-t\.yaml derive: scalestudy\.derive\.scaling: "):
        derived_table(runs, {"name": "figure-t", "derive": {"_target_": "scalestudy.derive.scaling", "nope": 1}})


def test_draw_warmup_labels_its_axes_from_zero_with_a_grid_and_a_legend_of_both_cuts(empty_store):
    sync_experiment("warm", [record("a", 64, 1, [1.0, 2.0])], empty_store)
    runs = load_runs(empty_store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig, _ = draw_warmup(spec(empty_store), runs, runs)
    # none of matplotlib's warnings, e.g. of grid(False, alpha=...), which draws the grid all the same
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []
    (ax,) = fig.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time since job start (s)", "images/s")  # the defaults
    assert ax.get_xlim()[0] == 0
    grid = ax.xaxis.get_gridlines()[0]
    assert grid.get_visible() and grid.get_alpha() == 0.3
    shown = fig.legends[0]
    handles = zip(shown.get_texts(), shown.legend_handles)
    cuts = {t.get_text(): (h.get_linestyle(), h.get_linewidth()) for t, h in handles}
    assert list(cuts) == ["1 rank", "end of initialisation (the study's cut)", "end of warm-up, MSER-5"]
    assert (cuts["end of initialisation (the study's cut)"], cuts["end of warm-up, MSER-5"]) == (
        (":", 0.9),
        ("--", 0.9),
    )
    labelled = {**spec(empty_store), "plot": {**spec(empty_store)["plot"], "xlabel": "t (s)", "ylabel": "img/s"}}
    fig, _ = draw_warmup(labelled, runs, runs)
    assert (fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()) == ("t (s)", "img/s")
