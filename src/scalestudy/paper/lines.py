"""The generic figure: lines of y against x, one axes per panel (conf/figure/figure-N.yaml's `plot`).

`draw_lines` runs its steps in order: the colour and line style of every series across the figure, then per
panel the lines, the lines another line covers, the points, the extra crosses, the reference lines (ideal,
median) and the axes; last the legend."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..derive import matches
from .formats import label
from .style import (
    LINESTYLES,
    MARKERS,
    legend_below,
    log_axis_ticks,
    new_figure,
    series_kind,
    series_looks,
    series_of,
    sort_key,
    tick_number,
    workers_unit,
)


def _panels(table: pd.DataFrame, plot: dict) -> list[tuple[str | None, pd.DataFrame, dict]]:
    panels = plot["panels"]
    facet = plot.get("facet")
    if not facet:
        # A panel's `where` ({column: value or list}) draws only those rows (e.g. one kind of run per panel).
        return [(p.get("title"), _rows_where(table, p.get("where")), p) for p in panels]
    values = sorted(table[facet].dropna().unique(), key=sort_key)
    return [(label(facet, v), table[table[facet] == v], panels[0]) for v in values]


def _rows_where(table: pd.DataFrame, where) -> pd.DataFrame:
    mask = pd.Series(True, index=table.index)
    for column, wanted in (where or {}).items():
        if column not in table.columns:
            raise ValueError(f"a panel's where names {column!r}, which the runs do not have")
        mask &= matches(table[column], wanted)
    return table[mask]


def _categorical(values: pd.Series) -> bool:
    """Whether an x column holds categories (variable_update) rather than numbers (workers)."""
    return pd.to_numeric(values.dropna(), errors="coerce").isna().any()


def _style_axes(ax, plot: dict, panel: dict, xs: np.ndarray, unit: str) -> None:
    ax.set_xlabel(unit if plot["x"] == "workers" else panel.get("xlabel") or plot.get("xlabel") or plot["x"])
    ax.set_ylabel(panel.get("ylabel") or ", ".join(panel["y"]))
    if plot.get("xscale") == "log2":
        ax.set_xscale("log", base=2)
        ticks = [float(t) for t in panel.get("xticks") or plot.get("xticks") or sorted({float(x) for x in xs if x > 0})]
        ax.set_xticks(ticks)
        ax.set_xticklabels([tick_number(t) for t in ticks])
    if panel.get("yscale"):
        ax.set_yscale(panel["yscale"])
        if panel["yscale"] == "log":
            # Plain numbers: the default 10^3 sets its exponent at 70 % of the tick size, under 6 pt in print.
            log_axis_ticks(ax.yaxis)
    if panel.get("ylim"):
        lo, hi = panel["ylim"]
        ax.set_ylim(bottom=lo, top=hi)
    ax.grid(True, alpha=0.3)


def draw_lines(fig_cfg: dict, table: pd.DataFrame, runs: pd.DataFrame) -> tuple[plt.Figure, list[dict]]:
    """Lines of y against x, one axes per panel: colour per `hue` combination; line style per y column, or per
    `style` combination (e.g. protocol: the same set-up under two protocols keeps its colour). A panel may draw
    only some rows (`where`), set its own `hue`, `style`, `x` and `ideal`; an x of categories (variable_update)
    is drawn as markers at 0, 1, ... in the panel's `order`, ticks named by `xlabels`.

    `plot.flag` ({column, legend, y: [columns]}) draws hollow the points of those y columns (default: all) where
    `column` is true (a run whose work differs from its baseline's, a published value that contradicts the
    source's own total); `plot.extra` ({y, where, legend, beside}) adds column y as a cross at the points where
    `where` is true, in the panel that draws `beside` (default: the first panel's y): the source's own number,
    kept visible beside the one the line uses. A series every point of which another series also has is drawn
    last, dashed and hollow, and named so: never hidden. Returns the figure and every plotted point."""
    points: list[dict] = []
    plot = fig_cfg["plot"]
    several_sources = "source" in table.columns and table["source"].nunique() > 1
    panels = _panels(table, plot)
    fig, axes = new_figure(fig_cfg, len(panels))
    colour_of, marker_of, dash_of = _series_styles(table, runs, panels, plot, several_sources)
    entries: dict = {}
    for ax, (title, part, panel) in zip(axes, panels):
        hue, style_by = _columns_of(plot, panel, several_sources)
        x = panel.get("x", plot["x"])
        part, categories = _on_categories(part, x, panel)
        lines = _panel_lines(fig_cfg, part, panel, x, (hue, style_by), (colour_of, marker_of, dash_of))
        _mark_covered(lines, x)
        points += _draw_panel_lines(ax, lines, x, panel, plot, categories, title, entries)
        points += _draw_extra(ax, part, x, hue, plot, panel["y"], colour_of, title)
        points += _reference_lines(ax, part, x, panel, plot, title, len(panels) > 1, entries)
        _axes_of_panel(ax, part, x, panel, plot, categories, workers_unit(runs))
        if title:
            ax.set_title(title)
    _marker_legend(entries, points, plot)
    legend_below(fig, entries)
    return fig, points


def _columns_of(plot: dict, panel: dict, several_sources: bool) -> tuple[list[str], list[str]]:
    """A panel's hue and style columns (its own `hue`/`style`, else the figure's), with source where both
    sources are drawn."""
    hue = list(panel.get("hue", plot.get("hue") or []) or [])
    style_by = list(panel.get("style", plot.get("style") or []) or [])
    if several_sources and "source" not in hue + style_by:
        hue.append("source")
    return hue, style_by


def _series_styles(table: pd.DataFrame, runs: pd.DataFrame, panels: list, plot: dict, several: bool) -> tuple:
    """One colour and marker per hue value and one line style per style value across the whole figure, so a
    series looks the same in every panel (numbered in the order the panels first draw them); a series of one
    accelerator kind looks as that kind does in every figure (style.series_looks)."""
    kind_of: dict[str, str | None] = {}
    dash_of: dict[str, int] = {}
    # The figure's own hue first (over all its runs, as before panels could set theirs), where a panel uses it.
    uses_figure_hue = any("hue" not in panel for _, _, panel in panels)
    for _, part, panel in [(None, table, {})] * uses_figure_hue + panels:
        hue, style_by = _columns_of(plot, panel, several)
        for name, rows in series_of(part, hue):
            if name not in kind_of:
                kind_of[name] = series_kind(rows, runs)
        for name, _ in series_of(part, style_by) if style_by else ():
            dash_of.setdefault(name, len(dash_of))
    return (*series_looks(kind_of), dash_of)


def _on_categories(part: pd.DataFrame, x: str, panel: dict) -> tuple[pd.DataFrame, list]:
    """Categories on x (e.g. variable_update) become 0, 1, ... in the panel's `order`; numbers stay."""
    if not _categorical(part[x]):
        return part, []
    order = [str(v) for v in panel.get("order") or sorted(part[x].dropna().astype(str).unique())]
    categories = [c for c in order if c in set(part[x].astype(str))]
    return part.assign(**{x: part[x].astype(str).map({c: i for i, c in enumerate(categories)})}), categories


def _panel_lines(fig_cfg: dict, part: pd.DataFrame, panel: dict, x: str, columns: tuple, styles: tuple) -> list:
    """[legend, series name, y, rows, style, line name] of every line of a panel: per hue, style and y column;
    `lines_by` splits a series into lines that share its legend entry (one line per MLPerf scale family)."""
    (hue, style_by), (colour_of, marker_of, dash_of) = columns, styles
    flag = fig_cfg["plot"].get("flag") or {}
    labels = fig_cfg.get("labels") or {}
    ys = list(panel["y"])
    lines_by = list(panel.get("lines_by", fig_cfg["plot"].get("lines_by")) or [])
    lines = []
    for hue_name, hue_rows in series_of(part, hue):
        for style_name, style_rows in series_of(hue_rows, style_by):
            name = " · ".join(s for s in (hue_name, style_name) if s)
            for line_name, rows, j, y in _splits(style_rows, lines_by, ys):
                line = rows[[x, y, *([flag["column"]] if flag else [])]].dropna(subset=[x, y]).sort_values(x)
                line = line.loc[:, ~line.columns.duplicated()]
                if line.empty:
                    continue
                if line[x].duplicated().any():
                    raise ValueError(
                        f"figure {fig_cfg['name']}: series {' · '.join(filter(None, (name, line_name))) or y!r} "
                        f"has several points at one {x}; add the column that tells them apart to plot.hue"
                    )
                k = dash_of[style_name] if style_by else j
                style = {
                    "color": colour_of[hue_name],
                    "linestyle": LINESTYLES[k % len(LINESTYLES)],
                    "marker": MARKERS[j % len(MARKERS)] if len(ys) > 1 else marker_of[hue_name],
                }
                if style_by and dash_of[style_name] % 2:
                    style["markerfacecolor"] = "white"  # the second style value: hollow markers too
                legend = " · ".join(s for s in (name, labels.get(y, y) if len(ys) > 1 else "") if s)
                lines.append([legend, name, y, line, style, line_name])
    return lines


def _splits(rows: pd.DataFrame, lines_by: list[str], ys: list[str]):
    """(line name, rows, index of y, y) of each line of one series: per `lines_by` value and y column."""
    for line_name, split in series_of(rows, lines_by):
        for j, y in enumerate(ys):
            yield line_name, split, j, y


def _mark_covered(lines: list, x: str) -> None:
    """A line whose every point another (visible) line has too is drawn dashed, hollow and on top, and its
    legend says which lines it lies on."""
    where = {}  # (y, x, value) -> legends of the lines through that point
    for legend, _, y, line, *_ in lines:
        for px, py in zip(line[x], line[y]):
            where.setdefault((y, round(float(px), 9), round(float(py), 9)), []).append(legend)
    covered: set[str] = set()
    for entry in reversed(lines):
        legend, _, y, line, style, _ = entry
        others = [{o for o in where[(y, round(float(px), 9), round(float(py), 9))] if o not in {legend, *covered}}
                  for px, py in zip(line[x], line[y])]  # fmt: skip
        if all(others):
            covered.add(legend)
            entry[0] = f"{legend} (on {' and '.join(sorted(set.union(*others)))})"
            entry[4] = {**style, "linestyle": (0, (3, 3)), "markerfacecolor": "none", "markersize": 7, "zorder": 5}


def _draw_panel_lines(ax, lines: list, x: str, panel: dict, plot: dict, categories: list, title, entries: dict) -> list:
    """Draw a panel's lines, the flagged points hollow on top; returns every point drawn."""
    flag, ys = plot.get("flag") or {}, list(panel["y"])
    points = []
    # `dodge`: each line's points shifted sideways by a step (a fraction of a doubling on a log2 axis, else in
    # x units) so that series with nearly equal values stay visible; the sidecar keeps the true x.
    dodge, xscale = float(panel.get("dodge", 0)), (None if categories else panel.get("xscale", plot.get("xscale")))
    for i, (legend, name, y, line, style, line_name) in enumerate(lines):
        shift = (i - (len(lines) - 1) / 2) * dodge
        drawn_x = line[x] * 2.0**shift if xscale == "log2" else line[x] + shift
        flagged = flag and y in flag.get("y", ys)
        odd = line[flag["column"]].fillna(False).astype(bool) if flagged else pd.Series(False, index=line.index)
        points += [{"panel": title, "series": name, "y": y, x: categories[int(px)] if categories else px,
                    "value": py, **({"line": line_name} if line_name else {}),
                    **({"flagged": flag["column"], "marker": style["marker"]} if hit else {})}
                   for px, py, hit in zip(line[x], line[y], odd)]  # fmt: skip
        if categories:  # categories are not a scale: markers, no line between them
            style = {**style, "linestyle": "none"}
        (handle,) = ax.plot(drawn_x, line[y], label=legend or None, **{"zorder": 3, **style})
        if legend:
            entries.setdefault(legend, handle)
        if odd.any():
            ax.plot(drawn_x[odd], line.loc[odd, y], linestyle="none", marker=style["marker"], markersize=7,
                    zorder=6, markerfacecolor="white", markeredgecolor=style["color"])  # fmt: skip
    return points


def _draw_extra(ax, part: pd.DataFrame, x: str, hue: list, plot: dict, ys: list, colour_of: dict, title) -> list:
    """`plot.extra`: column y as a cross where `where` holds, in the panel that draws `beside`."""
    extra = plot.get("extra") or {}
    if not extra or extra.get("beside", ys[0]) not in ys:
        return []
    points = []
    for hue_name, rows in series_of(part, hue):
        odd = rows[rows[extra["where"]].fillna(False).astype(bool)].dropna(subset=[x, extra["y"]])
        ax.plot(odd[x], odd[extra["y"]], linestyle="none", marker="x", markersize=6,
                color=colour_of[hue_name], zorder=6)  # fmt: skip
        points += [{"panel": title, "series": hue_name, "y": extra["y"], x: px, "value": py, "extra": True}
                   for px, py in zip(odd[x], odd[extra["y"]])]  # fmt: skip
    return points


def _reference_lines(ax, part: pd.DataFrame, x: str, panel: dict, plot: dict, title, several: bool, entries) -> list:
    """The ideal (speedup y = x, efficiency y = 1, or a number) and the median of the panel's values."""
    xs = part[x].dropna().to_numpy(dtype=float)
    ideal = panel.get("ideal", plot.get("ideal"))
    if ideal == "speedup" and xs.size:
        grid = np.array(sorted(set(xs)))
        # The ideal does not set the y range: where the data fall far below it, it leaves the panel at the top
        # rather than squeeze the data into its bottom (checks.squeezed_data).
        # (added as an artist: the data limits, which autoscaling reads, do not include it).
        ideal_line = plt.Line2D(grid, grid, color="grey", linewidth=1, alpha=0.6, zorder=1, transform=ax.transData)
        entries.setdefault("ideal", ax.add_artist(ideal_line))
    elif ideal == "efficiency" and xs.size:
        entries.setdefault("ideal", ax.axhline(1.0, color="grey", linewidth=1, alpha=0.6, zorder=1))
    elif isinstance(ideal, (int, float)) and not isinstance(ideal, bool):
        entries.setdefault("ideal", ax.axhline(float(ideal), color="grey", linewidth=1, alpha=0.6, zorder=1))
    points = _vline(ax, part, x, panel, plot, title, entries) + _hline(ax, part, panel, title, entries)
    if not plot.get("median"):
        return points
    ys = list(panel["y"])
    values = part[ys].to_numpy(dtype=float).ravel()
    values = values[~np.isnan(values)]
    if not values.size:
        return points
    med = float(np.median(values))
    handle = ax.axhline(med, color="black", linewidth=1.2, linestyle="--", zorder=2)
    if several:  # one legend entry for the kind of line; each panel names its own value beside it
        entries.setdefault("median of the panel", handle)
        ax.annotate(f"median {med:.2f}×", xy=(0.98, med), xycoords=("axes fraction", "data"), ha="right",
                    va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")  # fmt: skip
    else:
        entries[f"median {med:.2f}×"] = handle
    return [*points, {"panel": title, "series": "median", "y": ",".join(ys), "value": med}]


def _vline(ax, part: pd.DataFrame, x: str, panel: dict, plot: dict, title, entries: dict) -> list:
    """`vline` ({column, legend}): a claim at an x without a number, a dotted line at each value of column."""
    vline = panel.get("vline", plot.get("vline")) or {}
    if not vline or vline["column"] not in part.columns:
        return []
    points = []
    for at in sorted(set(part[vline["column"]].dropna().astype(float))):
        entries.setdefault(vline["legend"], ax.axvline(at, color="dimgray", linestyle=":", linewidth=1.2))
        points.append({"panel": title, "series": vline["legend"], "y": vline["column"], x: at})
    return points


def _hline(ax, part: pd.DataFrame, panel: dict, title, entries: dict) -> list:
    """A panel's `hline` ({column, legend}): a bound the data state (a link's rate), a dashed line at each value of
    column, its value written at the right end."""
    hline = panel.get("hline") or {}
    if not hline or hline["column"] not in part.columns:
        return []
    points = []
    for at in sorted(set(part[hline["column"]].dropna().astype(float))):
        entries.setdefault(hline["legend"], ax.axhline(at, color="black", linestyle="--", linewidth=1.0))
        ax.annotate(f"{at:g}", xy=(1.0, at), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                    xytext=(-2, 1), textcoords="offset points")  # fmt: skip
        points.append({"panel": title, "series": hline["legend"], "y": hline["column"], "value": at})
    return points


def _axes_of_panel(ax, part: pd.DataFrame, x: str, panel: dict, plot: dict, categories: list, unit: str) -> None:
    xs = part[x].dropna().to_numpy(dtype=float)
    if not categories:
        _style_axes(ax, {**plot, "x": x}, panel, xs, unit)
        return
    _style_axes(ax, {"x": x, "xlabel": panel.get("xlabel")}, panel, xs, unit)
    names = panel.get("xlabels") or {}
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels([str(names.get(c, c)) for c in categories], rotation=90)
    ax.set_xlim(-0.5, len(categories) - 0.5)


def _marker_legend(entries: dict, points: list[dict], plot: dict) -> None:
    """Legend entries for the hollow (flagged) markers and the crosses (extra), where any is drawn."""
    flag, extra = plot.get("flag") or {}, plot.get("extra") or {}
    marker = {"linestyle": "none", "color": "dimgray"}
    hollow = [p for p in points if p.get("flagged")]
    if hollow:
        entries[flag["legend"]] = plt.Line2D(
            [], [], marker=hollow[0]["marker"], markersize=7, markerfacecolor="white", **marker
        )
    if extra and any(p.get("extra") for p in points):
        entries[extra["legend"]] = plt.Line2D([], [], marker="x", markersize=6, **marker)
