"""One generic drawing path for every figure: select runs -> derive -> draw panels -> write files.

A figure is declared in conf/figure/figure-N.yaml: which runs, which derived quantity (`derive._target_`, a
function of derive.py), which axes, series and panels. A figure that needs its own drawing names it
(`draw._target_: scalestudy.paper.figures.draw_warmup`); everything else goes through `draw_lines` (lines.py).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from ..config import call
from ..derive import mser
from ..files import atomic_files, writing
from ..store import load_series
from . import compare as beside
from .checks import caption_problems, figure_problems
from .formats import label
from .latex import tex
from .lines import draw_lines
from .selection import EmptySelection, contributing, run_entries, select_runs, ui_entry
from .sidecars import FIGURE_FILES, config_said, json_text
from .style import COLORS, STYLE, legend_below, new_figure, sort_key, tick_number, workers_unit

__all__ = ["COLORS", "build_figure", "draw_lines", "draw_warmup"]


def derived_table(runs: pd.DataFrame, fig_cfg: dict) -> pd.DataFrame:
    """Apply the figure's `derive` step ({_target_: scalestudy.derive.<function>, **kwargs}), or nothing."""
    spec = fig_cfg.get("derive")
    return call(spec, runs, where=f"conf/figure/{fig_cfg['name']}.yaml derive") if spec else runs


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
    values = sorted(runs[facet].unique(), key=sort_key)
    intervals = _intervals_drawn(plot, runs)
    fig, axes = new_figure(fig_cfg, len(values), rows=2 if intervals else 1)
    axes, below = (axes[0], axes[1]) if intervals else (axes, None)
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
    if intervals:
        for ax, value in zip(below, values):
            rows = runs[runs[facet] == value].sort_values(["workers", *differ])
            kinds = [(r.workers, *(getattr(r, c) for c in differ)) for r in rows.itertuples()]
            points += _draw_intervals(ax, rows, intervals, [color_of[k] for k in kinds], label(facet, value), unit)
        marker = {"color": "black", "linestyle": "none", "marker": "o", "markersize": 5}
        entries[intervals["first_legend"]] = plt.Line2D([], [], **marker)
        entries[intervals["steady_legend"]] = plt.Line2D([], [], markerfacecolor="white", **marker)
    legend_below(fig, entries)
    return fig, points


def _intervals_drawn(plot: dict, runs: pd.DataFrame) -> dict | None:
    """`plot.intervals` ({first, steady: run columns; ylabel, first_legend, steady_legend}) where a run has them."""
    spec = plot.get("intervals")
    if not spec or spec["first"] not in runs.columns or not runs[spec["first"]].notna().any():
        return None
    return spec


def _draw_intervals(ax, rows: pd.DataFrame, spec: dict, colours: list, panel: str, unit: str) -> list[dict]:
    """The second row of figure 5: per run, at its GPU count, the logging hook's first ten-step interval (filled)
    above a steady one (hollow), joined by a thin line, in the run's colour of the row above."""
    points = []
    for run, colour in zip(rows.itertuples(), colours):
        first, steady = getattr(run, spec["first"], math.nan), getattr(run, spec["steady"], math.nan)
        if math.isnan(first):
            continue
        if not math.isnan(steady):
            ax.plot([run.workers] * 2, [steady, first], color=colour, linewidth=0.9, zorder=2)
            ax.plot([run.workers], [steady], color=colour, marker="o", markersize=5, markerfacecolor="white", zorder=3)
        ax.plot([run.workers], [first], color=colour, marker="o", markersize=5, linestyle="none", zorder=3)
        points.append({
            "run_id": run.run_id, "series": run.run_name, "panel": f"{panel} · ten-step intervals",
            "workers": run.workers, "first_interval_s": float(first),
            "steady_interval_s": None if math.isnan(steady) else float(steady),
            "ratio": None if math.isnan(steady) else float(first / steady),
        })  # fmt: skip
    ax.set_xscale("log", base=2)
    ticks = sorted({float(w) for w in rows["workers"]})
    ax.set_xticks(ticks, [tick_number(t) for t in ticks])
    ax.set_xlabel(unit)
    ax.set_ylabel(spec.get("ylabel", "s per ten steps"))
    top = max((p["first_interval_s"] for p in points), default=1.0)
    ax.set_ylim(0, top * 1.12)  # room above the highest marker
    ax.grid(True, alpha=0.3)
    return points


def _sort_key_tuple(values: tuple) -> list:
    return [sort_key(v) for v in values]


def build_figure(
    fig_cfg: dict,
    runs: pd.DataFrame,
    *,
    source: str,
    out_dir: Path,
    commit: str,
    config: dict | None = None,
    compare: str | None = None,
) -> list[Path]:
    """Select, derive, draw and write paper/figures/<name>.{pdf,png,json,caption.tex}, all four together.
    `config`: the command line's overrides and the composed config's sha256 (sidecars.config_record), in the
    sidecar and the PDF's Subject. `compare`: an experiment of yours drawn beside (compare.py)."""
    name = fig_cfg["name"]
    try:
        chosen = select_runs(runs, fig_cfg["runs"], source, f"figure {name}")
    except EmptySelection:
        if not compare:
            raise
        chosen = runs.iloc[:0]  # your runs alone: the study's are not in the store
    fig_cfg = for_source(fig_cfg, chosen, source)
    table = derived_table(chosen, fig_cfg) if len(chosen) else chosen
    yours = None
    if compare:
        chosen, table, fig_cfg, yours = with_yours(fig_cfg, runs, chosen, table, compare)
    draw = fig_cfg.get("draw") or {"_target_": "scalestudy.paper.lines.draw_lines"}
    with plt.rc_context(STYLE):
        fig, points = call(draw, fig_cfg, table, chosen, where=f"conf/figure/{name}.yaml draw")
    said = source if yours is None else f"{source} and {beside.PREFIX}{compare}"  # the caption's runs
    chosen = contributing(chosen, table)  # the runs behind the figure: not those that pair with nothing
    caption = caption_tex(fig_cfg, chosen, said)
    run_ids = sorted(chosen["run_id"])
    meta_pdf = {
        "Title": f"{name}: {fig_cfg['title']}",
        "Creator": "scalestudy (make " + name + ")",
        "Subject": f"git commit {commit}; source={source}; {len(run_ids)} MLflow runs" + config_said(config),
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
        "config": config,
        "runs": fig_cfg["runs"],
        "derive": fig_cfg.get("derive"),
        "points": points,
        "mlflow_runs": run_entries(chosen),
        # Opens exactly these runs in MLflow's UI (python -m scalestudy.ui prints the same link).
        "mlflow_ui": ui_entry(name, chosen, fig_cfg["title"]),
    }
    if yours is not None:
        sidecar["compare"] = yours
    paths = [out_dir / f"{name}.{ext}" for ext in FIGURE_FILES]
    try:
        with atomic_files(*paths) as (pdf, png, json_file, caption_file), plt.rc_context(STYLE):
            with writing(paths[0]):
                fig.savefig(pdf, format="pdf", metadata=meta_pdf)
            with writing(paths[1]):
                fig.savefig(png, format="png", dpi=200, metadata=meta_png)
            # Checked as saved (the layout of the last save), kept in the sidecar: tests/test_figures.py requires
            # none in the paper's figures; a build of other runs warns.
            sidecar["problems"] = figure_problems(fig) + caption_problems(caption)
            for problem in sidecar["problems"]:
                print(f"warning: {name}: {problem}", file=sys.stderr)
            with writing(paths[2]):
                json_file.write_text(json_text(sidecar))
            with writing(paths[3]):
                caption_file.write_text(caption)
    finally:
        plt.close(fig)
    return paths


def with_yours(fig_cfg: dict, runs: pd.DataFrame, chosen: pd.DataFrame, table: pd.DataFrame, experiment: str):
    """(the runs drawn, the derived table, the config, the sidecar's `compare`) with your experiment's runs added,
    derived apart from the study's (compare.py); NothingOfYours where none of them is drawn."""
    mine = beside.yours_of(runs, experiment)
    spec = beside.derive_spec(fig_cfg.get("derive"), mine)
    theirs = beside.at_scale(derived_table(mine, {**fig_cfg, "derive": spec}), spec)
    ys = [y for panel in fig_cfg["plot"].get("panels") or [] for y in panel.get("y", []) if y in theirs]
    theirs = theirs[theirs[ys].notna().any(axis=1)] if ys else theirs  # a run without a value is not drawn
    theirs = beside.named_by_setup(beside.scaled_only(theirs, spec), spec, fig_cfg["plot"])
    drawn = contributing(mine, theirs) if len(theirs) else mine.iloc[:0]
    if drawn.empty:
        raise beside.NothingOfYours(
            f"figure {fig_cfg['name']}: none of the {len(mine)} runs of experiment {experiment} is of the kind it "
            "draws (e.g. no 1-GPU run of their set-up to scale from)"
        )
    table = pd.concat([table, theirs], ignore_index=True)
    fig_cfg = beside.described(fig_cfg, drawn, mine, experiment, len(chosen))
    return pd.concat([chosen, drawn], ignore_index=True), table, fig_cfg, beside.sidecar_entry(drawn, mine, experiment)


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
            values = sorted({label("", v) for v in measured[column].dropna()}, key=sort_key)
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
