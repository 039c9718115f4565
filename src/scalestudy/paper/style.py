"""What every figure shares: print size and fonts, colours, line styles and markers, series, the legend."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import numpy as np
import pandas as pd

from ..derive import accelerator_kind
from .formats import label

# 18 distinguishable colours: tab20's dark shades first, then its light ones, without its greys: grey is the
# colour of reference lines ("ideal"), never of a series.
COLORS = tuple(
    c for c in plt.get_cmap("tab20").colors[0::2] + plt.get_cmap("tab20").colors[1::2] if max(c) - min(c) > 0.02
)
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
# One colour and marker per accelerator kind (derive.accelerator_kind), the same in every figure that draws one:
# a series whose rows are all of one kind takes its kind's (several series of one kind: shades of it, dark to
# light); the other series of such a figure take colours and markers no kind has.
TAB20 = plt.get_cmap("tab20").colors
KIND_STYLES = {
    "GPU": (TAB20[4], "s"),  # green
    "TPU": (TAB20[6], "D"),  # red
    "IPU": (TAB20[8], "v"),  # purple
    "Gaudi": (TAB20[10], "^"),  # brown
    "Ascend": (TAB20[12], "P"),  # pink
    "other": (TAB20[16], "X"),  # olive
}
# tab20 pairs a dark shade with a light one of the same hue: neither is free where a kind has the dark one
FREE_COLORS = tuple(c for c in COLORS if not any(c in TAB20[i : i + 2] for i in (4, 6, 8, 10, 12, 16)))
FREE_MARKERS = ["o", "*", "h", "<", ">", "p"]


def tick_number(value: float, _position: object = None) -> str:
    """Every tick label of the figures in one format: plain numbers, thousands grouped (1, 30, 1,000, 100,000;
    0.5 below 1), never 1e4 or 1e+05."""
    return format(float(value), ",.12g")


class PlainLogFormatter(ticker.LogFormatter):
    """matplotlib's choice of which ticks of a log axis to label (decades, and some minor ticks where few decades
    are shown), each label a `tick_number`: its own labels mix 1000, 1e4 and 1e+05 on one axis."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return tick_number(x)


def log_axis_ticks(axis) -> None:
    """One formatter for the major and minor ticks of a log axis (an axes' xaxis or yaxis)."""
    axis.set_major_formatter(PlainLogFormatter(labelOnlyBase=False))
    axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


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


def new_figure(fig_cfg: dict, columns: int, rows: int = 1) -> tuple[plt.Figure, np.ndarray]:
    """A figure of `columns` panels (in `rows` rows: then the axes as rows x columns), as wide as the printed
    text; the legend goes below the panels."""
    height = setting(fig_cfg, "height", 2.9)
    fig, axes = plt.subplots(rows, columns, figsize=(PRINT_WIDTH_IN, height), squeeze=False, layout="constrained",
                             sharey=bool(fig_cfg["plot"].get("sharey", False)))  # fmt: skip
    fig.suptitle(fig_cfg["title"])
    return fig, axes[0] if rows == 1 else axes


def legend_below(fig: plt.Figure, entries: dict) -> None:
    """One legend for the whole figure, under its panels, in as many columns as its longest label allows."""
    if not entries:
        return
    longest = max(len(text) for text in entries)  # about 3.6 pt a character at 7 pt, and 30 pt for the key
    columns = max(1, min(len(entries), int(PRINT_WIDTH_IN * 72 / (3.6 * longest + 30))))
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=columns, frameon=False)


def series_kind(rows: pd.DataFrame, runs: pd.DataFrame) -> str | None:
    """The accelerator kind of a series: its rows' `accelerator_kind`, else that of the accelerator model of the
    runs behind them (`run_id`); None where a row has none or the rows mix kinds."""
    if "accelerator_kind" in rows.columns:
        kinds = rows["accelerator_kind"]
    elif "run_id" in rows.columns and {"run_id", "accelerator_model"} <= set(runs.columns):
        model = runs.drop_duplicates("run_id").set_index("run_id")["accelerator_model"]
        kinds = rows["run_id"].map(model).map(lambda m: m if pd.isna(m) else accelerator_kind(m))
    else:
        return None
    if rows.empty or kinds.isna().any() or kinds.nunique() != 1:
        return None
    return str(kinds.iloc[0])


def shade(colour: tuple, t: float) -> tuple:
    """`colour` mixed with black (t < 0) or white (t > 0) by |t|: its hue kept."""
    rgb = np.asarray(colour[:3], dtype=float)
    mixed = rgb * (1 + t) if t < 0 else rgb + t * (1 - rgb)
    return tuple(float(v) for v in mixed)


def series_looks(kind_of: dict) -> tuple[dict, dict]:
    """({series: colour}, {series: marker}) for series named in the order they are first drawn, each with its
    accelerator kind or None. Without any kind: COLORS and MARKERS in that order. With kinds: KIND_STYLES (several
    series of one kind: shades of its colour from dark to light, MARKERS in order), the rest FREE_COLORS and
    FREE_MARKERS in order."""
    if not any(kind_of.values()):
        return ({name: COLORS[i % len(COLORS)] for i, name in enumerate(kind_of)},
                {name: MARKERS[i % len(MARKERS)] for i, name in enumerate(kind_of)})  # fmt: skip
    colour_of, marker_of = {}, {}
    others = [name for name, kind in kind_of.items() if not kind]
    for i, name in enumerate(others):
        colour_of[name], marker_of[name] = FREE_COLORS[i % len(FREE_COLORS)], FREE_MARKERS[i % len(FREE_MARKERS)]
    for kind in dict.fromkeys(k for k in kind_of.values() if k):
        names = [name for name, k in kind_of.items() if k == kind]
        colour, marker = KIND_STYLES.get(kind, KIND_STYLES["other"])
        if len(names) == 1:
            colour_of[names[0]], marker_of[names[0]] = colour, marker
            continue
        for j, (name, t) in enumerate(zip(names, np.linspace(-0.5, 0.5, len(names)))):
            colour_of[name], marker_of[name] = shade(colour, float(t)), MARKERS[j % len(MARKERS)]
    return {n: colour_of[n] for n in kind_of}, {n: marker_of[n] for n in kind_of}
