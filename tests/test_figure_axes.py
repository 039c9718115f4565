"""Axis labels and tick labels of every figure (issue 44): a quantity without a unit (a ratio, a speedup, an
efficiency) has no unit in its axis label, and the tick labels of one axis are in one format (figure 11's log
axes once mixed 1000, 1e4 and 1e+05). Read from each figure's declared config, and from the figures as the
builder draws them from the published runs."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest
import yaml
from helpers import REPO
from omegaconf import OmegaConf

from scalestudy.config import call
from scalestudy.paper.__main__ import compose_targets
from scalestudy.paper.figures import derived_table, for_source
from scalestudy.paper.selection import select_runs
from scalestudy.paper.style import STYLE, PlainLogFormatter, tick_number
from scalestudy.store import load_runs

FIGURES = sorted((p.stem for p in (REPO / "conf" / "figure").glob("figure-*.yaml")), key=lambda n: (len(n), n))
UNITLESS = re.compile(r"ratio|speedup|efficiency", re.I)
UNIT_IN_PARENTHESES = re.compile(r"\([^)]*\)")
NUMBER = re.compile(r"^-?[\d,]*\.?\d+$")
SCIENTIFIC = re.compile(r"^-?\d+(\.\d+)?e[+-]?\d+$")


def declared_panels(plot: dict) -> list[tuple[list[str], str]]:
    """(y columns, y label) of every panel a figure's `plot` declares, at any depth; a panel without its own label
    takes the plot's."""
    found = []

    def walk(node, label):
        if isinstance(node, dict):
            label = node.get("ylabel", label)
            if "y" in node:
                found.append(([node["y"]] if isinstance(node["y"], str) else list(node["y"]), str(label or "")))
            for value in node.values():
                walk(value, label)
        elif isinstance(node, list):
            for value in node:
                walk(value, label)

    walk(plot, plot.get("ylabel"))
    return found


def unit_of_unitless(label: str, quantities: list[str]) -> str | None:
    """The unit an axis label puts on a quantity that has none (its column or its label says ratio, speedup or
    efficiency), or None."""
    if not any(UNITLESS.search(name) for name in [*quantities, label]):
        return None
    unit = UNIT_IN_PARENTHESES.search(label)
    return unit.group(0) if unit else None


def tick_format(text: str) -> str | None:
    """The format of one tick label: scientific, mathtext, grouped (1,000) or ungrouped (1000); None where any
    format would write it alike (a number under 1,000) or it is no number (a category's name)."""
    text = text.replace("\u2212", "-")
    if "$" in text:
        return "mathtext"
    if SCIENTIFIC.match(text):
        return "scientific"
    if not NUMBER.match(text):
        return None
    whole = text.lstrip("-").split(".")[0]
    if "," in whole:
        return "grouped"
    return "ungrouped" if len(whole) >= 4 else None


def axis_formats(axis) -> set[str]:
    labels = [t.get_text() for t in axis.get_ticklabels(which="both") if t.get_visible() and t.get_text()]
    return {f for f in map(tick_format, labels) if f}


# --------------------------------------------------------------------------------------------
# The declared configs


@pytest.mark.parametrize("name", FIGURES)
def test_a_unitless_quantity_has_no_unit_in_its_declared_label(name):
    plot = yaml.safe_load((REPO / "conf" / "figure" / f"{name}.yaml").read_text()).get("plot") or {}
    wrong = {label: unit for ys, label in declared_panels(plot) if (unit := unit_of_unitless(label, ys))}
    assert not wrong, f"{name}: a ratio, speedup or efficiency has no unit: {wrong}"


def test_the_checks_see_a_unit_and_mixed_formats():
    assert unit_of_unitless("P100 / K80 (images/s)", ["ratio"]) == "(images/s)"
    assert unit_of_unitless("throughput ratio, P100 / K80", ["ratio"]) is None
    assert unit_of_unitless("images/s (as published)", ["throughput_total"]) is None
    assert {tick_format(t) for t in ["1000", "1e4", "1e+05"]} == {"ungrouped", "scientific"}
    assert {tick_format(t) for t in ["1", "30", "1,000", "100,000", "0.5", "\u22121"]} == {"grouped", None}
    assert [tick_number(v) for v in (1, 0.5, 1000, 1e4, 1e5, 4096.0, 1e6)] == [
        "1", "0.5", "1,000", "10,000", "100,000", "4,096", "1,000,000"
    ]  # fmt: skip


def test_a_log_axis_labels_its_ticks_in_one_format():
    """The axis of figure 11's global batch: 256 to 65,536 on a log scale, labelled by PlainLogFormatter."""
    fig, ax = plt.subplots()
    ax.plot([256, 65536], [1, 2])
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(PlainLogFormatter(labelOnlyBase=False))
    ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    fig.canvas.draw()
    assert axis_formats(ax.xaxis) == {"grouped"}
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# The figures as drawn


def drawn(uri: str, runs, name: str):
    """The figure as the builder draws it from the published runs (None: it draws no published run)."""
    ((_, _, cfg),) = compose_targets([("figure", name)], [])
    spec = {**OmegaConf.to_container(cfg["figure"], resolve=True), "tracking_uri": uri}
    if not spec["runs"].get("published"):
        return None
    chosen = select_runs(runs, spec["runs"], "published", name)
    spec = for_source(spec, chosen, "published")
    draw = spec.get("draw") or {"_target_": "scalestudy.paper.lines.draw_lines"}
    with plt.rc_context(STYLE):
        fig, _ = call(draw, spec, derived_table(chosen, spec), chosen, where=name)
        fig.canvas.draw()
    return fig


@pytest.fixture(scope="module")
def published_runs(published_store):
    return published_store, load_runs(published_store)


@pytest.mark.parametrize("name", FIGURES)
def test_every_axis_of_a_drawn_figure_has_one_tick_format_and_no_unit_on_a_ratio(name, published_runs):
    fig = drawn(*published_runs, name)
    if fig is None:
        pytest.skip(f"{name} draws measured runs only")
    problems = []
    for n, ax in enumerate(fig.axes):
        ylabel = ax.get_ylabel()
        if unit := unit_of_unitless(ylabel, []):
            problems.append(f"axes {n}: y label {ylabel!r} puts {unit} on a unitless quantity")
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if len(formats := axis_formats(axis)) > 1:
                labels = [t.get_text() for t in axis.get_ticklabels(which="both") if t.get_text()]
                problems.append(f"axes {n}: {which} ticks in {sorted(formats)}: {labels}")
    plt.close(fig)
    assert not problems, f"{name}:\n" + "\n".join(problems)
