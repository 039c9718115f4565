"""One colour per accelerator kind across the figures that draw MLPerf systems (issue 41: figure 11 coloured the
kinds otherwise than figure 10).

Figures 10, 11 and 12 are drawn from the published store by the builder's own steps (the declared config, the
run selection, the derive step, the draw function), and their lines and legend handles read back. Which kind a
line is comes from what the figure names, not from the colouring code: figure 11's legend is the kind, figure
10's "MLPerf families, <kind>", figure 12's families name their accelerator (every one an NVIDIA GPU).
"""

from __future__ import annotations

import colorsys

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgb
from omegaconf import OmegaConf

from scalestudy import derive
from scalestudy.config import call
from scalestudy.paper.__main__ import compose_targets
from scalestudy.paper.figures import derived_table, for_source
from scalestudy.paper.selection import select_runs
from scalestudy.paper.style import STYLE
from scalestudy.store import load_runs

KINDS_10 = "MLPerf families, "


def drawn(uri: str, runs, name: str):
    """(the figure, its legend as {text: handle}) as the builder draws it from the published runs."""
    ((_, _, cfg),) = compose_targets([("figure", name)], [])
    spec = {**OmegaConf.to_container(cfg["figure"], resolve=True), "tracking_uri": uri}
    chosen = select_runs(runs, spec["runs"], "published", name)
    spec = for_source(spec, chosen, "published")
    draw = spec.get("draw") or {"_target_": "scalestudy.paper.lines.draw_lines"}
    with plt.rc_context(STYLE):
        fig, _ = call(draw, spec, derived_table(chosen, spec), chosen, where=name)
    (legend,) = fig.legends
    return fig, {t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles)}


def kind_of(name: str, label: str) -> str | None:
    """The accelerator kind a legend entry names (None: not a kind, e.g. HackSA or the ideal)."""
    if name == "figure-11":
        return label if label != "ideal" else None
    if name == "figure-10":
        return label.removeprefix(KINDS_10) if label.startswith(KINDS_10) else None
    return derive.accelerator_kind(label) if "NVIDIA" in label else None  # figure 12: the family's accelerator


def hue(colour) -> float:
    return colorsys.rgb_to_hsv(*to_rgb(colour))[0]


@pytest.fixture(scope="module")
def figures(published_store):
    runs = load_runs(published_store)
    built = {name: drawn(published_store, runs, name) for name in ("figure-10", "figure-11", "figure-12")}
    yield built
    for fig, _ in built.values():
        plt.close(fig)


def test_each_accelerator_kind_has_one_colour_in_figures_10_11_and_12(figures):
    # {kind: {(figure, colour, marker)}} from the legend, and every drawn line of the kind's entry in that colour
    seen: dict[str, set] = {}
    for name, (fig, legend) in figures.items():
        for text, handle in legend.items():
            kind = kind_of(name, text)
            if kind is None:
                continue
            colour = to_rgb(handle.get_color())
            lines = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == text]
            assert lines, (name, text)
            assert {to_rgb(ln.get_color()) for ln in lines} == {colour}, (name, text)
            seen.setdefault(kind, set()).add((name, colour, handle.get_marker()))
    # figures 10 and 11 draw the same kinds, each as one legend entry
    for name in ("figure-10", "figure-11"):
        assert {k for k, entries in seen.items() if any(e[0] == name for e in entries)} == {
            "GPU", "TPU", "IPU", "Gaudi", "Ascend"}, name  # fmt: skip
    for kind, entries in seen.items():
        same = {(colour, marker) for figure, colour, marker in entries if figure != "figure-12"}
        assert len(same) == 1, (kind, entries)  # one colour and one marker for the kind in figures 10 and 11
    # different kinds: different colours (and markers) in both
    looks = {kind: next(iter({(c, m) for f, c, m in entries if f != "figure-12"})) for kind, entries in seen.items()}
    assert len({c for c, _ in looks.values()}) == len(looks) and len({m for _, m in looks.values()}) == len(looks)
    # figure 12: its GPU families, one line each, in shades of the GPU colour (its hue), so told apart, and
    # nowhere near another kind's hue
    gpu_families = [(c, m) for f, c, m in seen["GPU"] if f == "figure-12"]
    assert len(gpu_families) == 5 and set(seen) >= {"GPU"}
    assert len({c for c, _ in gpu_families}) == len(gpu_families)
    for colour, _ in gpu_families:
        distance = {kind: abs(hue(colour) - hue(c)) for kind, (c, _) in looks.items()}
        assert distance["GPU"] < 0.01 and min(d for k, d in distance.items() if k != "GPU") > 0.05, colour


def test_series_that_are_no_kind_take_no_kinds_colour(figures):
    """Figure 10's HackSA, TF 2017 and Horovod series must not read as an MLPerf kind."""
    _, legend = figures["figure-10"]
    kinds = {to_rgb(h.get_color()) for t, h in legend.items() if kind_of("figure-10", t)}
    others = {t: to_rgb(h.get_color()) for t, h in legend.items() if t.startswith(("HackSA", "TF 2017", "Horovod"))}
    assert len(others) == 3 and not set(others.values()) & kinds
    assert len(set(others.values())) == 3
