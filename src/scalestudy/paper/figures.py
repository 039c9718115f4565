"""One generic drawing path for every figure: select runs -> derive -> draw panels -> write files.

A figure is declared in conf/figure/figure-N.yaml: which runs, which derived quantity (`derive._target_`, a
function of derive.py), which axes, series and panels. A figure that needs its own drawing names it
(`draw._target_: scalestudy.paper.figures.draw_warmup`); everything else goes through `draw_lines`.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import numpy as np
import pandas as pd

from ..config import call
from ..derive import matches, mser
from ..files import atomic_files
from ..store import load_series
from .formats import label
from .latex import tex
from .selection import select_runs, ui_entry
from .sidecars import json_text

# 20 distinguishable colours: tab20's dark shades first, then its light ones.
COLORS = plt.get_cmap("tab20").colors[0::2] + plt.get_cmap("tab20").colors[1::2]
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
    """What `workers` counts in these runs: GPUs, or ranks on CPUs (measured here), or both."""
    cpu = runs["device"].astype(str).str.lower().eq("cpu") if "device" in runs else pd.Series(False, index=runs.index)
    return "CPU ranks" if cpu.all() else "GPUs" if not cpu.any() else "GPUs or CPU ranks"


def derived_table(runs: pd.DataFrame, fig_cfg: dict) -> pd.DataFrame:
    """Apply the figure's `derive` step ({_target_: scalestudy.derive.<function>, **kwargs}), or nothing."""
    spec = fig_cfg.get("derive")
    return call(spec, runs, where=f"conf/figure/{fig_cfg['name']}.yaml derive") if spec else runs


def _panels(table: pd.DataFrame, plot: dict) -> list[tuple[str | None, pd.DataFrame, dict]]:
    panels = plot["panels"]
    facet = plot.get("facet")
    if not facet:
        # A panel's `where` ({column: value or list}) draws only those rows (e.g. one kind of run per panel).
        return [(p.get("title"), _rows_where(table, p.get("where")), p) for p in panels]
    values = sorted(table[facet].dropna().unique(), key=_sort_key)
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


def _sort_key(value):
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _style_axes(ax, plot: dict, panel: dict, xs: np.ndarray, unit: str) -> None:
    ax.set_xlabel(unit if plot["x"] == "workers" else plot.get("xlabel") or plot["x"])
    ax.set_ylabel(panel.get("ylabel") or ", ".join(panel["y"]))
    if plot.get("xscale") == "log2":
        ax.set_xscale("log", base=2)
        ticks = sorted({float(x) for x in xs if x > 0})
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}" for t in ticks])
    if panel.get("yscale"):
        ax.set_yscale(panel["yscale"])
        if panel["yscale"] == "log":
            # Plain numbers: the default 10^3 sets its exponent at 70 % of the tick size, under 6 pt in print.
            ax.yaxis.set_major_formatter(ticker.LogFormatter(labelOnlyBase=False))
            ax.yaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    if panel.get("ylim"):
        lo, hi = panel["ylim"]
        ax.set_ylim(bottom=lo, top=hi)
    ax.grid(True, alpha=0.3)


def _series(frame: pd.DataFrame, hue: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) of each series of `frame`, one per value of the `hue` columns, in a stable order."""
    if not hue:
        return [("", frame)]
    # Keys as tuples (np.atleast_1d would make a mixed key all strings, NaN included).
    groups = [(key if isinstance(key, tuple) else (key,), rows) for key, rows in frame.groupby(hue, dropna=False)]
    groups.sort(key=lambda kv: [_sort_key(v) for v in kv[0]])
    # A column that one source does not have is left out of the label (no "nan").
    return [(" · ".join(label(c, v) for c, v in zip(hue, key) if not pd.isna(v)), rows) for key, rows in groups]


def _figure(fig_cfg: dict, columns: int) -> tuple[plt.Figure, np.ndarray]:
    """A figure of `columns` panels, as wide as the printed text; the legend goes below the panels."""
    height = setting(fig_cfg, "height", 2.9)
    fig, axes = plt.subplots(1, columns, figsize=(PRINT_WIDTH_IN, height), squeeze=False, layout="constrained",
                             sharey=bool(fig_cfg["plot"].get("sharey", False)))  # fmt: skip
    fig.suptitle(fig_cfg["title"])
    return fig, axes[0]


def _legend_below(fig: plt.Figure, entries: dict) -> None:
    """One legend for the whole figure, under its panels, in as many columns as its longest label allows."""
    if not entries:
        return
    longest = max(len(text) for text in entries)  # about 3.6 pt a character at 7 pt, and 30 pt for the key
    columns = max(1, min(len(entries), int(PRINT_WIDTH_IN * 72 / (3.6 * longest + 30))))
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=columns, frameon=False)


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
    plot_hue, plot_style = list(plot.get("hue") or []), list(plot.get("style") or [])
    several_sources = "source" in table.columns and table["source"].nunique() > 1
    labels = fig_cfg.get("labels") or {}
    flag, extra = plot.get("flag") or {}, plot.get("extra") or {}
    panels = _panels(table, plot)
    fig, axes = _figure(fig_cfg, len(panels))

    def columns_of(panel: dict) -> tuple[list[str], list[str]]:
        """A panel's hue and style columns (its own `hue`/`style`, else the figure's), with source where both
        sources are drawn."""
        hue, style_by = list(panel.get("hue", plot_hue) or []), list(panel.get("style", plot_style) or [])
        if several_sources and "source" not in hue + style_by:
            hue.append("source")
        return hue, style_by

    # One colour per hue value and one line style per style value across the whole figure, so a series looks
    # the same in every panel (numbered in the order the panels first draw them).
    colour_of: dict[str, tuple] = {}
    dash_of: dict[str, int] = {}
    # The figure's own hue first (over all its runs, as before panels could set theirs), where a panel uses it.
    uses_figure_hue = any("hue" not in panel for _, _, panel in panels)
    for _, part, panel in [(None, table, {})] * uses_figure_hue + panels:
        hue, style_by = columns_of(panel)
        for name, _ in _series(part, hue):
            colour_of.setdefault(name, COLORS[len(colour_of) % len(COLORS)])
        for name, _ in _series(part, style_by) if style_by else ():
            dash_of.setdefault(name, len(dash_of))
    entries: dict = {}
    for ax, (title, part, panel) in zip(axes, panels):
        hue, style_by = columns_of(panel)
        x = panel.get("x", plot["x"])
        categories: list = []
        if _categorical(part[x]):  # categories on x (e.g. variable_update): at 0, 1, ... in the panel's order
            order = [str(v) for v in panel.get("order") or sorted(part[x].dropna().astype(str).unique())]
            categories = [c for c in order if c in set(part[x].astype(str))]
            part = part.assign(**{x: part[x].astype(str).map({c: i for i, c in enumerate(categories)})})
        ys = list(panel["y"])
        lines = []  # (legend, series name, y, rows, style) of every line of this panel
        for hue_name, hue_rows in _series(part, hue):
            for style_name, rows in _series(hue_rows, style_by):
                name = " · ".join(s for s in (hue_name, style_name) if s)
                for j, y in enumerate(ys):
                    line = rows[[x, y, *([flag["column"]] if flag else [])]].dropna(subset=[x, y]).sort_values(x)
                    line = line.loc[:, ~line.columns.duplicated()]
                    if line.empty:
                        continue
                    if line[x].duplicated().any():
                        raise ValueError(
                            f"figure {fig_cfg['name']}: series {name or y!r} has several points at one "
                            f"{x}; add the column that tells them apart to plot.hue"
                        )
                    k = dash_of[style_name] if style_by else j
                    style = {
                        "color": colour_of[hue_name],
                        "linestyle": LINESTYLES[k % len(LINESTYLES)],
                        "marker": MARKERS[(j if len(ys) > 1 else list(colour_of).index(hue_name)) % len(MARKERS)],
                    }
                    if style_by and dash_of[style_name] % 2:
                        style["markerfacecolor"] = "white"  # the second style value: hollow markers too
                    legend = " · ".join(s for s in (name, labels.get(y, y) if len(ys) > 1 else "") if s)
                    lines.append([legend, name, y, line, style])  # fmt: skip
        where = {}  # (y, x, value) -> legends of the lines through that point
        for legend, _, y, line, _ in lines:
            for px, py in zip(line[x], line[y]):
                where.setdefault((y, round(float(px), 9), round(float(py), 9)), []).append(legend)
        covered: set[str] = set()
        for entry in reversed(lines):  # a line whose every point another (visible) line has too: dashed, on top
            legend, _, y, line, style = entry
            others = [{o for o in where[(y, round(float(px), 9), round(float(py), 9))] if o not in {legend, *covered}}
                      for px, py in zip(line[x], line[y])]  # fmt: skip
            if all(others):
                covered.add(legend)
                entry[0] = f"{legend} (on {' and '.join(sorted(set.union(*others)))})"
                entry[4] = {**style, "linestyle": (0, (3, 3)), "markerfacecolor": "none", "markersize": 7, "zorder": 5}
        # `dodge`: each line's points shifted sideways by a step (a fraction of a doubling on a log2 axis, else in
        # x units) so that series with nearly equal values stay visible; the sidecar keeps the true x.
        dodge, xscale = float(panel.get("dodge", 0)), (None if categories else panel.get("xscale", plot.get("xscale")))
        for i, (legend, name, y, line, style) in enumerate(lines):
            shift = (i - (len(lines) - 1) / 2) * dodge
            drawn_x = line[x] * 2.0**shift if xscale == "log2" else line[x] + shift
            flagged = flag and y in flag.get("y", ys)
            odd = line[flag["column"]].fillna(False).astype(bool) if flagged else pd.Series(False, index=line.index)
            points += [{"panel": title, "series": name, "y": y, x: categories[int(px)] if categories else px,
                        "value": py, **({"flagged": flag["column"], "marker": style["marker"]} if hit else {})}
                       for px, py, hit in zip(line[x], line[y], odd)]  # fmt: skip
            if categories:  # categories are not a scale: markers, no line between them
                style = {**style, "linestyle": "none"}
            (handle,) = ax.plot(drawn_x, line[y], label=legend or None, **{"zorder": 3, **style})
            if legend:
                entries.setdefault(legend, handle)
            if odd.any():
                ax.plot(drawn_x[odd], line.loc[odd, y], linestyle="none", marker=style["marker"], markersize=7,
                        zorder=6, markerfacecolor="white", markeredgecolor=style["color"])  # fmt: skip
        if extra and extra.get("beside", ys[0]) in ys:
            for hue_name, rows in _series(part, hue):
                odd = rows[rows[extra["where"]].fillna(False).astype(bool)].dropna(subset=[x, extra["y"]])
                ax.plot(odd[x], odd[extra["y"]], linestyle="none", marker="x", markersize=6,
                        color=colour_of[hue_name], zorder=6)  # fmt: skip
                points += [{"panel": title, "series": hue_name, "y": extra["y"], x: px, "value": py, "extra": True}
                           for px, py in zip(odd[x], odd[extra["y"]])]  # fmt: skip
        xs = part[x].dropna().to_numpy(dtype=float)
        ideal = panel.get("ideal", plot.get("ideal"))  # speedup (y = x), efficiency (y = 1) or a number (y = it)
        if ideal == "speedup" and xs.size:
            grid = np.array(sorted(set(xs)))
            entries.setdefault("ideal", ax.plot(grid, grid, color="grey", linewidth=1, alpha=0.6, zorder=1)[0])
        elif ideal == "efficiency" and xs.size:
            entries.setdefault("ideal", ax.axhline(1.0, color="grey", linewidth=1, alpha=0.6, zorder=1))
        elif isinstance(ideal, (int, float)) and not isinstance(ideal, bool):
            entries.setdefault("ideal", ax.axhline(float(ideal), color="grey", linewidth=1, alpha=0.6, zorder=1))
        if plot.get("median"):
            values = part[ys].to_numpy(dtype=float).ravel()
            values = values[~np.isnan(values)]
            if values.size:
                med = float(np.median(values))
                points.append({"panel": title, "series": "median", "y": ",".join(ys), "value": med})
                handle = ax.axhline(med, color="black", linewidth=1.2, linestyle="--", zorder=2)
                entries[f"median {med:.2f}×" + (f" ({title})" if len(panels) > 1 else "")] = handle
        if categories:
            _style_axes(ax, {"x": x, "xlabel": panel.get("xlabel")}, panel, xs, workers_unit(runs))
            names = panel.get("xlabels") or {}
            ax.set_xticks(range(len(categories)))
            ax.set_xticklabels([str(names.get(c, c)) for c in categories], rotation=90)
            ax.set_xlim(-0.5, len(categories) - 0.5)
        else:
            _style_axes(ax, {**plot, "x": x}, panel, xs, workers_unit(runs))
        if title:
            ax.set_title(title)
    marker = {"linestyle": "none", "color": "dimgray"}
    hollow = [p for p in points if p.get("flagged")]
    if hollow:
        entries[flag["legend"]] = plt.Line2D(
            [], [], marker=hollow[0]["marker"], markersize=7, markerfacecolor="white", **marker
        )
    if extra and any(p.get("extra") for p in points):
        entries[extra["legend"]] = plt.Line2D([], [], marker="x", markersize=6, **marker)
    _legend_below(fig, entries)
    return fig, points


def draw_warmup(fig_cfg: dict, table: pd.DataFrame, runs: pd.DataFrame) -> tuple[plt.Figure, list[dict]]:
    """Per-step throughput against elapsed time, one panel per `facet` value, one colour per GPU count, with the
    study's cut (end of initialisation, dotted) and the warm-up end MSER-5 finds on the series (dashed; none
    where the series is too short to tell). The data are drawn above the lines, so a one-point series shows."""
    plot = fig_cfg["plot"]
    series_name = plot["series"]
    series = load_series(runs["run_id"], [series_name], fig_cfg["tracking_uri"])
    if series.empty:
        raise LookupError(f"{fig_cfg['name']}: the selected runs have no '{series_name}' series")
    unit = workers_unit(runs)
    facet = plot["facet"]
    values = sorted(runs[facet].unique(), key=_sort_key)
    fig, axes = _figure(fig_cfg, len(values))
    # Runs of one panel are told apart by their rank count, and by framework and source where those differ.
    differ = [c for c in ("framework", "source") if c in runs.columns and runs[c].nunique() > 1]
    kinds = sorted({(r.workers, *(getattr(r, c) for c in differ)) for r in runs.itertuples()}, key=_sort_key_tuple)
    color_of = {kind: COLORS[i % len(COLORS)] for i, kind in enumerate(kinds)}
    points: list[dict] = []
    entries: dict = {}
    for ax, value in zip(axes, values):
        rows = runs[runs[facet] == value].sort_values(["workers", *differ])
        for run in rows.itertuples():
            history = series[series.run_id == run.run_id].sort_values("step")
            if history.empty:
                continue
            kind = (run.workers, *(getattr(run, c) for c in differ))
            color = color_of[kind]
            elapsed = (history.timestamp_ms.to_numpy() - run.start_ms) / 1000.0
            rate, steps = history.value.to_numpy(), history.step.to_numpy()
            if plot.get("per_worker"):
                rate = rate / run.workers
            legend = " · ".join([label("workers", run.workers, unit), *(str(v) for v in kind[1:])])
            (handle,) = ax.plot(elapsed, rate, color=color, marker="o", markersize=3, zorder=3)
            entries.setdefault(legend, handle)
            init = getattr(run, "time_init_s", float("nan"))
            if not math.isnan(init):
                ax.axvline(init, color=color, linestyle=":", linewidth=0.9, alpha=0.7, zorder=1)
            cut = mser(rate)
            if cut.outcome == "cut":
                ax.axvline(elapsed[cut.step], color=color, linestyle="--", linewidth=0.9, alpha=0.7, zorder=1)
            points.append({
                "run_id": run.run_id, "series": run.run_name, "panel": label(facet, value), "legend": legend,
                "steps": steps.tolist(), "elapsed_s": elapsed.round(3).tolist(), "value": rate.tolist(),
                "init_end_s": None if math.isnan(init) else float(init),
                "warmup": cut.outcome, "warmup_batches": cut.batches,
                "warmup_end_step": int(steps[cut.step]) if cut.outcome == "cut" else None,
                "warmup_end_s": float(elapsed[cut.step]) if cut.outcome == "cut" else None,
            })  # fmt: skip
        ax.set_title(label(facet, value))
        ax.set_xlabel(plot.get("xlabel", "time since job start (s)"))
        ax.set_ylabel(plot.get("ylabel", "images/s"))
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    line = {"color": "dimgray", "linewidth": 0.9}
    entries["end of initialisation (the study's cut)"] = plt.Line2D([], [], linestyle=":", **line)
    entries["end of warm-up, MSER-5"] = plt.Line2D([], [], linestyle="--", **line)
    _legend_below(fig, entries)
    return fig, points


def _sort_key_tuple(values: tuple) -> list:
    return [_sort_key(v) for v in values]


def build_figure(fig_cfg: dict, runs: pd.DataFrame, *, source: str, out_dir: Path, commit: str) -> list[Path]:
    """Select, derive, draw and write paper/figures/<name>.{pdf,png,json,caption.tex}, all four together."""
    name = fig_cfg["name"]
    chosen = select_runs(runs, fig_cfg["runs"], source, f"figure {name}")
    fig_cfg = for_source(fig_cfg, chosen, source)
    table = derived_table(chosen, fig_cfg)
    draw = fig_cfg.get("draw") or {"_target_": "scalestudy.paper.figures.draw_lines"}
    with plt.rc_context(STYLE):
        fig, points = call(draw, fig_cfg, table, chosen, where=f"conf/figure/{name}.yaml draw")
    run_ids = sorted(chosen["run_id"])
    meta_pdf = {
        "Title": f"{name}: {fig_cfg['title']}",
        "Creator": "scalestudy (make " + name + ")",
        "Subject": f"git commit {commit}; source={source}; {len(run_ids)} MLflow runs",
        "Keywords": "mlflow-run-ids: " + " ".join(run_ids),
        "CreationDate": None,
        "Producer": None,
    }
    meta_png = {"Software": None, "Title": meta_pdf["Title"], "Description": meta_pdf["Subject"]}
    sidecar = {
        "figure": name,
        "title": fig_cfg["title"],
        "git_commit": commit,
        "source": source,
        "runs": fig_cfg["runs"],
        "derive": fig_cfg.get("derive"),
        "points": points,
        "mlflow_runs": [
            {"run_id": r.run_id, "run_name": r.run_name, "experiment": r.experiment, "source": r.source}
            for r in chosen.sort_values("run_id").itertuples()
        ],
        # Opens exactly these runs in MLflow's UI (python -m scalestudy.ui prints the same link).
        "mlflow_ui": ui_entry(name, chosen, fig_cfg["title"]),
    }
    paths = [out_dir / f"{name}.{ext}" for ext in ("pdf", "png", "json", "caption.tex")]
    try:
        with atomic_files(*paths) as (pdf, png, json_file, caption), plt.rc_context(STYLE):
            fig.savefig(pdf, format="pdf", metadata=meta_pdf)
            fig.savefig(png, format="png", dpi=200, metadata=meta_png)
            json_file.write_text(json_text(sidecar))
            caption.write_text(caption_tex(fig_cfg, chosen, source))
    finally:
        plt.close(fig)
    return paths


def for_source(fig_cfg: dict, chosen: pd.DataFrame, source: str) -> dict:
    """The figure's config with a title and caption true of the runs drawn.

    A config's title and caption describe its published runs (e.g. "V100, batch 64 per GPU"). Measured runs are
    whatever the sweep ran, so for them the title is `measured_title` and the caption says what the measured
    runs were, read from the runs themselves."""
    if source == "published":
        return fig_cfg
    measured = chosen[chosen["source"].astype(str) == "measured"]
    said = []
    for column, what in (
        ("device", "device"),
        ("data", "data"),
        ("batch_per_worker", "images per rank and step"),
        ("platform", "platform"),
    ):
        if column in measured.columns:
            values = sorted({label("", v) for v in measured[column].dropna()}, key=_sort_key)
            said.append(f"{what} {', '.join(values)}")
    described = f"Measured runs ({len(measured)}): " + "; ".join(said) + "."
    title = str(fig_cfg.get("measured_title") or fig_cfg["title"])
    if source == "measured":
        return {**fig_cfg, "title": title, "caption": described}
    title += ": published and measured runs"
    return {**fig_cfg, "title": title, "caption": f"Published: {fig_cfg.get('caption', '')} {described}"}


def caption_tex(fig_cfg: dict, chosen: pd.DataFrame, source: str) -> str:
    """The figure's LaTeX caption, from its config and the runs it drew (paper/main.tex inputs it)."""
    name = fig_cfg["name"]
    experiments = ", ".join(sorted(chosen["experiment"].astype(str).unique()))
    runs = (
        f"Runs: {len(chosen)} MLflow runs ({source}) of experiment(s) {experiments}; "
        f"their ids are in figures/{name}.json."
    )
    return (
        f"% {name}: built from conf/figure/{name}.yaml by `make {name}`\n"
        f"\\caption[{tex(fig_cfg['title'])}]{{\\textbf{{{tex(fig_cfg['title'])}.}} "
        f"{tex(' '.join(str(fig_cfg.get('caption', '')).split()))} {tex(runs)}}}\n"
    )
