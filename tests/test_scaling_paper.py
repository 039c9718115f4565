"""The scaling model in the paper: figure 7 (curves and bands to 512 GPUs, every claim visible, print size),
table 4 and the numbers the text quotes, and bulk builds beside a figure of measured runs only (figure 9)."""

from __future__ import annotations

import json
import re

import matplotlib.text
import pandas as pd
import pytest
from helpers import REPO, run_module
from omegaconf import OmegaConf

from scalestudy.config import compose
from scalestudy.paper.model_figure import dodged, draw_scaling_model
from scalestudy.paper.selection import select_runs
from scalestudy.store import load_runs


@pytest.fixture(scope="module")
def figure7(published_store):
    spec = OmegaConf.to_container(compose("paper", ["figure=figure-7"]).figure, resolve=True)
    chosen = select_runs(load_runs(published_store), spec["runs"], "published", "figure-7")
    from scalestudy.scaling.report import figure_rows

    table = figure_rows(chosen, scaling=spec["derive"]["scaling"], panels=spec["derive"]["panels"])
    return spec, table, chosen


def test_figure7_draws_the_model_with_bands_from_64_to_512(figure7):
    _, table, _ = figure7
    model = table[table["kind"] == "model"]
    beyond = model[(model["workers"] >= 64) & (model["workers"] <= 512)]
    assert set(beyond["workers"]) >= {64, 128, 256, 512}
    assert (beyond["low"] <= beyond["efficiency"] + 1e-12).all() and (
        beyond["efficiency"] <= beyond["high"] + 1e-12
    ).all()
    # one curve per TF 2017 group on the K80 panel, one per claimed model on the P100 panel
    assert model.groupby("panel")["series"].nunique().tolist() == [5, 3]
    observed = table[table["kind"] == "observed"]
    assert observed["held_out"].sum() == 10 and observed.loc[observed["held_out"], "workers"].min() == 32


def test_figure7_shows_both_90_percent_claims(figure7):
    _, table, _ = figure7
    claims = dodged(table[table["kind"] == "claim"])
    nineties = claims[claims["efficiency"] == 0.9]
    assert len(nineties) == 2
    assert nineties["x"].nunique() == 2 and nineties["marker"].nunique() == 2  # side by side, two markers
    assert claims.loc[claims["efficiency"] == 0.68, "x"].item() == 512  # alone: where it belongs


def test_figure7_is_drawn_at_print_size(figure7):
    spec, table, chosen = figure7
    fig, points = draw_scaling_model(spec, table, chosen)
    assert fig.get_size_inches()[0] <= 16 / 2.54 + 1e-9
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
    assert texts and min(t.get_fontsize() for t in texts) >= 7
    assert any("drawn side by side" in t.get_text() for t in texts)
    drawn = [
        (x, y)
        for line in fig.findobj(matplotlib.lines.Line2D)
        for x, y in zip(line.get_xdata(), line.get_ydata())
        if y == 0.9 and x > 256
    ]
    assert len({round(x, 3) for x, _ in drawn}) == 2  # both claims are on the canvas, apart
    assert len(points) == len(table)


def test_table4_and_the_numbers_the_text_quotes(published_store, tmp_path):
    run_module("scalestudy.paper", "table-4", f"out_dir={tmp_path}", uri=published_store)
    data = json.loads((tmp_path / "tables" / "table-4.json").read_text())["data"]
    tf = next(v for v in data["validation"] if v["dataset"] == "tf-benchmarks-2017")
    point = next(h for h in tf["held_out"] if h["group"] == "Inception-v3 · batch 64" and h["workers"] == 64)
    assert point["observed"] == pytest.approx(1783 / (64 * 29.7))  # the benchmarks page's images/s
    assert tf["mean_abs_error"] == pytest.approx(sum(abs(h["error"]) for h in tf["held_out"]) / 10)
    numbers = (tmp_path / "tables" / "table-4-numbers.tex").read_text()
    defined = set(re.findall(r"\\csname modelnum@(.+?)\\endcsname", numbers))
    section = (REPO / "paper" / "sections" / "model.tex").read_text()
    quoted = set(re.findall(r"\\modelnum\{([^}]+)\}", section)) - {"key"}
    assert quoted and quoted <= defined, sorted(quoted - defined)
    mae = re.search(r"modelnum@tf-benchmarks-2017-mae\\endcsname\{([^}]+)\}", numbers).group(1)
    assert mae == f"{100 * tf['mean_abs_error']:.1f}"
    tex = (tmp_path / "tables" / "table-4.tex").read_text()
    assert "\\textbf{" in tex and "not predicted" in tex and "nan" not in tex.lower()


def test_bulk_builds_skip_a_figure_of_measured_runs_only(published_store, tmp_path):
    # figure 9 without its published timelines: a figure of runs measured here only
    alone = run_module("scalestudy.paper", "figure-9", "figure.runs.published=null", f"out_dir={tmp_path}",
                       uri=published_store, check=False)  # fmt: skip
    assert alone.returncode == 1 and "declares no runs for source=published" in alone.stderr
    assert not (tmp_path / "figures" / "figure-9.json").exists()


def test_dodging_leaves_distinct_points_alone():
    claims = pd.DataFrame({"workers": [512, 512, 256], "efficiency": [0.9, 0.68, 0.9], "series": ["a", "b", "c"]})
    out = dodged(claims)
    assert out["x"].tolist() == [512.0, 512.0, 256.0] and not out["dodged"].any()
