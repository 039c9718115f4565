"""Checks of a drawn figure that catch what a reader would trip over (issue 24, finding 8): a marker cut by the
axes, data squeezed into a corner of their panel, a colour that names two things in a legend, and LaTeX that
reaches the rendered caption as literal text. Each returns its problems as lines naming the panel or entry;
build_figure records them in the sidecar (`problems`) and tests/test_figures.py requires none."""

from __future__ import annotations

import re

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D

# The share of a panel's y range its data must span at least, where the range is not fixed by the config.
MIN_Y_SHARE = 1 / 3
# The gap a marker keeps from the frame of its axes (points), so that it does not sit on the spine.
CLEARANCE_PT = 1.0
# Two colours closer than this (Euclidean, RGB in 0..1) read as one.
SAME_COLOUR = 0.1
# What LaTeX markup looks like once escaped into a caption: it would print as typed ($N$, tf\_cnn, {}).
LITERAL_LATEX = re.compile(r"\\\$|\\textbackslash|\\\{|\\\}|\\_\\_")


def figure_problems(fig) -> list[str]:
    """Every problem of a figure as it was last drawn or saved (its panels and legends)."""
    problems = []
    for number, ax in enumerate(fig.axes, start=1):
        name = ax.get_title() or f"panel {number}"
        problems += markers_outside(ax, name) + squeezed_data(ax, name)
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None:
            problems += shared_colours(legend)
    return problems


def _data_lines(ax) -> list[Line2D]:
    """The lines of an axes that draw data points: visible, with a marker and at least one finite point."""
    return [
        line
        for line in ax.get_lines()
        if line.get_visible()
        and str(line.get_marker()) not in ("None", "", " ", "none")
        and np.isfinite(np.asarray(line.get_xydata(), dtype=float)).all(axis=1).any()
    ]


def _display_points(line: Line2D) -> np.ndarray:
    xy = np.asarray(line.get_xydata(), dtype=float)
    xy = xy[np.isfinite(xy).all(axis=1)]
    return line.get_transform().transform(xy)


def markers_outside(ax, name: str) -> list[str]:
    """Markers drawn outside the axes or touching their frame (matplotlib clips them there): a marker with its
    edge must keep CLEARANCE_PT from the frame."""
    box, problems = ax.bbox, []
    for line in _data_lines(ax):
        radius = (line.get_markersize() / 2 + line.get_markeredgewidth() / 2 + CLEARANCE_PT) * ax.figure.dpi / 72
        for px, py in _display_points(line):
            if px - radius < box.x0 or px + radius > box.x1 or py - radius < box.y0 or py + radius > box.y1:
                x, y = ax.transData.inverted().transform((px, py))
                problems.append(f"{name}: a marker of {line.get_label()!r} at ({x:.4g}, {y:.4g}) is cut by the axes")
                break
    return problems


def squeezed_data(ax, name: str) -> list[str]:
    """Data that span less than MIN_Y_SHARE of the panel's y range, where the range was left to autoscaling (a
    config that fixes `ylim` has chosen its scale, e.g. to show that differences are small). Panels that share
    their y axis (`sharey`, to compare them by eye) are judged by their data together."""
    lines = [line for sibling in ax.get_shared_y_axes().get_siblings(ax) for line in _data_lines(sibling)]
    if not lines or not ax.get_autoscaley_on():
        return []
    ys = np.concatenate([line.axes.transAxes.inverted().transform(_display_points(line))[:, 1] for line in lines])
    share = float(ys.max() - ys.min())
    if share < MIN_Y_SHARE and len(np.unique(np.round(ys, 6))) > 1:
        return [f"{name}: the data use {share:.0%} of the y range ({ax.get_ylim()[0]:.4g} to {ax.get_ylim()[1]:.4g})"]
    return []


def _look(handle) -> tuple | None:
    """(colour, line style or None, marker or None, filled) of a legend handle; None for a compound handle."""
    if not isinstance(handle, Line2D):
        return None
    line = handle.get_linestyle() not in ("None", "", " ", "none") and handle.get_linewidth() > 0
    marker = str(handle.get_marker()) not in ("None", "", " ", "none")
    colour = to_rgb(handle.get_color() if line else handle.get_markeredgecolor())
    face = handle.get_markerfacecolor() if marker else None
    filled = marker and str(face).lower() not in ("none", "white", "w") and to_rgb(face) != (1.0, 1.0, 1.0)
    return colour, handle.get_linestyle() if line else None, handle.get_marker() if marker else None, filled


def shared_colours(legend) -> list[str]:
    """Two entries of one legend in one colour where that does not tell them apart: a line without markers (a
    reference such as "ideal") beside a series with markers, or both drawn alike. A legend whose entries are
    all one colour is a key of marks (filled, hollow, dashed) and is left alone."""
    entries = [(text.get_text(), _look(h)) for text, h in zip(legend.get_texts(), legend.legend_handles)]
    entries = [(text, look) for text, look in entries if look is not None]
    if len({tuple(np.round(look[0], 2)) for _, look in entries}) <= 1:
        return []
    problems = []
    for i, (text, look) in enumerate(entries):
        for other, other_look in entries[i + 1 :]:
            if np.linalg.norm(np.subtract(look[0], other_look[0])) >= SAME_COLOUR:
                continue
            if text.startswith(f"{other} (on ") or other.startswith(f"{text} (on "):
                continue  # one series, drawn again where another covers it (lines.py)
            if (look[2] is None) != (other_look[2] is None) or look[1:] == other_look[1:]:
                problems.append(f"legend: {text!r} and {other!r} have one colour")
    return problems


def caption_problems(caption_tex: str) -> list[str]:
    """LaTeX markup that the caption prints as typed (a config's $N$ or tf\\_cnn, escaped by the builder)."""
    return [f"caption: {m.group(0)!r} prints literally" for m in LITERAL_LATEX.finditer(caption_tex)]
