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
import numpy as np
import pandas as pd

from ..config import call
from ..provenance import atomic_files, json_text
from ..tracking import load_series
from ..warmup import warmup_end
from .formats import label
from .latex import tex
from .selection import select_runs, ui_entry

# 20 distinguishable colours: tab20's dark shades first, then its light ones.
COLORS = plt.get_cmap("tab20").colors[0::2] + plt.get_cmap("tab20").colors[1::2]
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


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
        return [(p.get("title"), table, p) for p in panels]
    values = sorted(table[facet].dropna().unique(), key=_sort_key)
    return [(label(facet, v), table[table[facet] == v], panels[0]) for v in values]


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


def draw_lines(fig_cfg: dict, table: pd.DataFrame, runs: pd.DataFrame) -> tuple[plt.Figure, list[dict]]:
    """Lines of y against x: colour per `hue` combination, line style per y column, one axes per panel.

    Returns the figure and the plotted points (for the sidecar: the numbers behind the figure)."""
    points: list[dict] = []
    plot = fig_cfg["plot"]
    x = plot["x"]
    hue = list(plot.get("hue") or [])
    if "source" in table.columns and table["source"].nunique() > 1 and "source" not in hue:
        hue.append("source")
    labels = fig_cfg.get("labels") or {}
    panels = _panels(table, plot)
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(setting(fig_cfg, "panel_width", 4.6) * len(panels), 3.6),
        squeeze=False,
        sharey=bool(plot.get("sharey", False)),
    )
    # One colour per series across the whole figure, so a series looks the same in every panel.
    style_index = {name: i for i, (name, _) in enumerate(_series(table, hue))}
    for ax, (title, part, panel) in zip(axes[0], panels):
        ys = list(panel["y"])
        for name, rows in _series(part, hue):
            i = style_index[name]
            for j, y in enumerate(ys):
                line = rows[[x, y]].dropna().sort_values(x)
                if line.empty:
                    continue
                if line[x].duplicated().any():
                    raise ValueError(
                        f"figure {fig_cfg['name']}: series {name or y!r} has several points at one "
                        f"{x}; add the column that tells them apart to plot.hue"
                    )
                legend = " · ".join(s for s in (name, labels.get(y, y) if len(ys) > 1 else "") if s)
                points += [
                    {"panel": title, "series": name, "y": y, x: px, "value": py} for px, py in zip(line[x], line[y])
                ]
                ax.plot(
                    line[x],
                    line[y],
                    color=COLORS[i % len(COLORS)],
                    linestyle=LINESTYLES[j % len(LINESTYLES)],
                    marker=MARKERS[(j if len(ys) > 1 else i) % len(MARKERS)],
                    markersize=4,
                    label=legend or None,
                )
        xs = part[x].dropna().to_numpy(dtype=float)
        if plot.get("ideal") == "speedup" and xs.size:
            grid = np.array(sorted(set(xs)))
            ax.plot(grid, grid, color="grey", linewidth=1, linestyle="-", alpha=0.6, label="ideal")
        elif plot.get("ideal") == "efficiency" and xs.size:
            ax.axhline(1.0, color="grey", linewidth=1, alpha=0.6, label="ideal")
        if plot.get("median"):
            values = part[ys].to_numpy(dtype=float).ravel()
            values = values[~np.isnan(values)]
            if values.size:
                med = float(np.median(values))
                points.append({"panel": title, "series": "median", "y": ",".join(ys), "value": med})
                ax.axhline(med, color="black", linewidth=1.2, linestyle="--", label=f"median {med:.2f}×")
        _style_axes(ax, plot, panel, xs, workers_unit(runs))
        if title:
            ax.set_title(title, fontsize=10)
        if plot.get("legend") == "outside":
            ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        elif plot.get("legend") != "figure":
            ax.legend(fontsize=6.5, loc=plot.get("legend", "best"), frameon=False)
    if plot.get("legend") == "figure":  # one legend for all panels, below them
        entries = {}
        for ax in axes[0]:
            for handle, text in zip(*ax.get_legend_handles_labels()):
                entries.setdefault(text, handle)
        fig.legend(
            entries.values(),
            entries.keys(),
            loc="lower center",
            ncol=min(4, len(entries)),
            fontsize=6.5,
            frameon=False,
            bbox_to_anchor=(0.5, 0.03),
        )
    if plot.get("note"):
        fig.text(0.01, 0.005, plot["note"], fontsize=7, color="dimgray", ha="left", va="bottom")
    fig.suptitle(fig_cfg["title"], fontsize=11)
    bottom = 0.03 if plot.get("note") else 0
    if plot.get("legend") == "figure":
        bottom += 0.035 * (1 + (len(axes[0][0].get_legend_handles_labels()[1]) + 3) // 4) + 0.02
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig, points


def draw_warmup(fig_cfg: dict, table: pd.DataFrame, runs: pd.DataFrame) -> tuple[plt.Figure, list[dict]]:
    """Per-step throughput against elapsed time, with the study's cut (end of initialisation) and
    the warm-up end that warmup.warmup_end detects on the series itself."""
    plot = fig_cfg["plot"]
    series_name = plot["series"]
    series = load_series(runs["run_id"], [series_name], fig_cfg["tracking_uri"])
    if series.empty:
        raise LookupError(f"{fig_cfg['name']}: the selected runs have no '{series_name}' series")
    unit = workers_unit(runs)
    facet = plot["facet"]
    values = sorted(runs[facet].unique(), key=_sort_key)
    fig, axes = plt.subplots(1, len(values), figsize=(4.6 * len(values), 3.6), squeeze=False)
    tolerance = setting(fig_cfg, "tolerance", 0.10)
    # Runs of one panel are told apart by their rank count, and by framework and source where those differ.
    differ = [c for c in ("framework", "source") if c in runs.columns and runs[c].nunique() > 1]
    points: list[dict] = []
    for ax, value in zip(axes[0], values):
        rows = runs[runs[facet] == value].sort_values(["workers", *differ])
        for i, run in enumerate(rows.itertuples()):
            history = series[series.run_id == run.run_id].sort_values("step")
            if history.empty:
                continue
            elapsed = (history.timestamp_ms.to_numpy() - run.start_ms) / 1000.0
            rate, steps = history.value.to_numpy(), history.step.to_numpy()
            if plot.get("per_worker"):
                rate = rate / run.workers
            color = COLORS[i % len(COLORS)]
            legend = " · ".join([label("workers", run.workers, unit), *(str(getattr(run, c)) for c in differ)])
            ax.plot(elapsed, rate, color=color, marker=".", markersize=3, label=legend)
            init = getattr(run, "time_init_s", float("nan"))
            if not math.isnan(init):
                ax.axvline(init, color=color, linestyle=":", linewidth=1)
                ax.axvspan(0, init, color=color, alpha=0.04, linewidth=0)
            cut = warmup_end(rate, tolerance=tolerance)
            ax.axvline(elapsed[cut], color=color, linestyle="--", linewidth=1)
            points.append(
                {
                    "run_id": run.run_id,
                    "series": run.run_name,
                    "logged_steps": int(rate.size),
                    "init_end_s": None if math.isnan(init) else float(init),
                    "warmup_end_s": float(elapsed[cut]),
                    "warmup_end_step": int(steps[cut]),
                }
            )
        ax.set_title(label(facet, value), fontsize=10)
        ax.set_xlabel(plot.get("xlabel", "elapsed time since job start (s)"))
        ax.set_ylabel(plot.get("ylabel", "images/s"))
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6.5, frameon=False)
    fig.text(0.01, 0.005, plot.get("note", ""), fontsize=7, color="dimgray", ha="left", va="bottom")
    fig.suptitle(fig_cfg["title"], fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig, points


def build_figure(fig_cfg: dict, runs: pd.DataFrame, *, source: str, out_dir: Path, commit: str) -> list[Path]:
    """Select, derive, draw and write paper/figures/<name>.{pdf,png,json,caption.tex}, all four together."""
    name = fig_cfg["name"]
    chosen = select_runs(runs, fig_cfg["runs"], source, f"figure {name}")
    fig_cfg = for_source(fig_cfg, chosen, source)
    table = derived_table(chosen, fig_cfg)
    draw = fig_cfg.get("draw") or {"_target_": "scalestudy.paper.figures.draw_lines"}
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
        with atomic_files(*paths) as (pdf, png, json_file, caption):
            fig.savefig(pdf, format="pdf", metadata=meta_pdf)
            fig.savefig(png, format="png", dpi=150, metadata=meta_png)
            json_file.write_text(json_text(sidecar))
            caption.write_text(caption_tex(fig_cfg, chosen, source))
    finally:
        plt.close(fig)
    return paths


def for_source(fig_cfg: dict, chosen: pd.DataFrame, source: str) -> dict:
    """The figure's config with a title, note and caption true of the runs drawn.

    A config's title, caption and note describe its published runs (e.g. "V100, batch 64 per GPU"). Measured
    runs are whatever the sweep ran, so for them the title is `measured_title` and the note says what the
    measured runs were, read from the runs themselves."""
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
    plot = dict(fig_cfg["plot"])
    title = str(fig_cfg.get("measured_title") or fig_cfg["title"])
    if source == "measured":
        plot["note"] = described
        caption = described
    else:
        title += ": published and measured runs"
        plot["note"] = f"Published: {plot['note']}  {described}" if plot.get("note") else described
        caption = f"{fig_cfg.get('caption', '')} {described}"
    return {**fig_cfg, "title": title, "caption": caption, "plot": plot}


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
