"""What every figure shares: print size and fonts, colours, line styles and markers, series, the legend."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .formats import label

# 18 distinguishable colours: tab20's dark shades first, then its light ones, without its greys: grey is the
# colour of reference lines ("ideal"), never of a series.
COLORS = tuple(
    c for c in plt.get_cmap("tab20").colors[0::2] + plt.get_cmap("tab20").colors[1::2] if max(c) - min(c) > 0.02
)
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
# Figures are drawn at the size they are printed: the paper's text is 16.2 cm wide (A4, 2.4 cm margins) and
# main.tex includes a figure at its natural size, so a point here is a point on paper (no text below 7 pt).
PRINT_WIDTH_IN = 6.3
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "figure.titlesize": 9,
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    # Room for a marker (up to 7 pt, hollow ones on top) at the ends of an autoscaled axis: the 5 % default lets
    # markers at the extremes touch the frame (checks.markers_outside).
    "axes.xmargin": 0.07,
    "axes.ymargin": 0.09,
    "pdf.fonttype": 42,  # TrueType: text stays text, selectable and measurable in the PDF
}


def setting(fig_cfg: dict, key: str, default: float) -> float:
    """A number of the figure's `plot` settings; anything else is an error naming the config key."""
    value = fig_cfg["plot"].get(key, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"conf/figure/{fig_cfg['name']}.yaml: plot.{key}={value!r} is not a number") from None


def workers_unit(runs: pd.DataFrame) -> str:
    """What `workers` counts in these runs: GPUs, or ranks on CPUs (measured here), or both; ranks where no run
    states its device (a published timeline)."""
    device = runs["device"].astype(str).str.lower() if "device" in runs else pd.Series("", index=runs.index)
    cpu, unstated = device.eq("cpu"), device.eq("not stated")
    if unstated.any():
        return "ranks"
    return "CPU ranks" if cpu.all() else "GPUs" if not cpu.any() else "GPUs or CPU ranks"


def sort_key(value):
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def series_of(frame: pd.DataFrame, hue: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) of each series of `frame`, one per value of the `hue` columns, in a stable order."""
    if not hue:
        return [("", frame)]
    # Keys as tuples (np.atleast_1d would make a mixed key all strings, NaN included).
    groups = [(key if isinstance(key, tuple) else (key,), rows) for key, rows in frame.groupby(hue, dropna=False)]
    groups.sort(key=lambda kv: [sort_key(v) for v in kv[0]])
    # A column that one source does not have is left out of the label (no "nan").
    return [(" · ".join(label(c, v) for c, v in zip(hue, key) if not pd.isna(v)), rows) for key, rows in groups]


def new_figure(fig_cfg: dict, columns: int) -> tuple[plt.Figure, np.ndarray]:
    """A figure of `columns` panels, as wide as the printed text; the legend goes below the panels."""
    height = setting(fig_cfg, "height", 2.9)
    fig, axes = plt.subplots(1, columns, figsize=(PRINT_WIDTH_IN, height), squeeze=False, layout="constrained",
                             sharey=bool(fig_cfg["plot"].get("sharey", False)))  # fmt: skip
    fig.suptitle(fig_cfg["title"])
    return fig, axes[0]


def legend_below(fig: plt.Figure, entries: dict) -> None:
    """One legend for the whole figure, under its panels, in as many columns as its longest label allows."""
    if not entries:
        return
    longest = max(len(text) for text in entries)  # about 3.6 pt a character at 7 pt, and 30 pt for the key
    columns = max(1, min(len(entries), int(PRINT_WIDTH_IN * 72 / (3.6 * longest + 30))))
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=columns, frameon=False)
