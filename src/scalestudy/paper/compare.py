"""Your runs beside the study's: `python -m scalestudy.paper figure-10 compare=NAME` (`make compare EXPERIMENT=NAME`).

The runs of your experiment NAME (imported logs or measured runs, any source) are drawn with the figure's own runs
as their own series: their `source` reads `yours: NAME`, which the figure's legend names (lines.py adds the source
to a series' name where several are drawn). They are derived apart from the study's runs, grouped also by
variable_update and platform (a cluster of yours may have run several set-ups), so that they never pair with a
published baseline. The title and caption say what was drawn of yours; the files go to compare/NAME/, never into
the paper's folder; the sidecar names your runs drawn and those that were not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ..derive import where_mask
from .selection import NoRunsDeclared, whole_numbers

PREFIX = "yours: "
PAPER_DIR = Path("paper")
# What a derive step groups your runs by besides its own columns: the set-ups of one cluster.
SETUP = ("variable_update", "platform")


class NothingOfYours(NoRunsDeclared):
    """None of your runs is of the kind a figure draws (no 1-GPU run to scale from, no timeline...)."""


def yours_of(runs: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The finished runs of your experiment, their `source` marked `yours: NAME`; LookupError where it has none."""
    mine = runs[where_mask(runs, {"experiment": experiment, "status": "FINISHED"})] if "experiment" in runs else runs
    if mine.empty:
        raise LookupError(
            f"compare={experiment}: no finished run in experiment {experiment} (import yours: python -m "
            f"scalestudy.ingest logs PATH... --experiment {experiment})"
        )
    return whole_numbers(mine.assign(source=PREFIX + experiment).reset_index(drop=True))


def out_dir_of(out_dir: str, experiment: str) -> Path:
    """compare/NAME where the command line names no folder of its own; never the paper's folder."""
    chosen = Path(out_dir)
    if chosen.resolve() == PAPER_DIR.resolve():
        return Path("compare") / experiment
    if PAPER_DIR.resolve() in chosen.resolve().parents:
        raise ValueError(f"out_dir={out_dir}: compare={experiment} writes beside the paper, not into {PAPER_DIR}/")
    return chosen


AT_SCALE = "scalestudy.derive.efficiency_at_scale"
AT_SCALE_GROUP = ["experiment", "model", "device", "data", "batch_per_worker", "variable_update", "platform"]


def derive_spec(spec, mine: pd.DataFrame):
    """The figure's derive step for your runs: its `group` also by your set-ups that differ among your runs.
    Figure 10's (families, claims, the study's points by experiment) becomes `derive.scaling` by set-up, its
    efficiency by speed renamed by `at_scale`."""
    if isinstance(spec, dict) and spec.get("_target_") == AT_SCALE:
        return {"_target_": "scalestudy.derive.scaling", "group": AT_SCALE_GROUP}
    if not isinstance(spec, dict) or "group" not in spec:
        return spec
    group = list(spec["group"])
    extra = [c for c in SETUP if c in mine.columns and c not in group and mine[c].nunique(dropna=True) > 1]
    return {**spec, "group": group + extra}


def at_scale(theirs: pd.DataFrame, spec) -> pd.DataFrame:
    """Figure 10's rows of yours (derive.efficiency_at_scale's columns): efficiency by speed over the 1-GPU run of
    the set-up, one line per set-up, the series named by the source."""
    if not isinstance(spec, dict) or spec.get("group") != AT_SCALE_GROUP:
        return theirs
    line = theirs[AT_SCALE_GROUP].astype(str).agg(" · ".join, axis=1)
    return theirs.assign(efficiency=theirs["efficiency_speed"], accelerators=pd.to_numeric(theirs["workers"]),
                         series=theirs["source"] + ", by speed", line=line)  # fmt: skip


def scaled_only(theirs: pd.DataFrame, spec) -> pd.DataFrame:
    """Your derived rows less the groups (the derive step's `group`) that hold a 1-GPU run only: a lone baseline at
    1 says nothing of scaling."""
    group = [c for c in (spec.get("group", []) if isinstance(spec, dict) else []) if c in theirs]
    if not group or "workers" not in theirs or theirs.empty:
        return theirs
    key = theirs[group].astype(str).agg(" · ".join, axis=1)
    scaled = set(key[pd.to_numeric(theirs["workers"], errors="coerce") > 1])
    return theirs[key.isin(scaled)]


def named_by_setup(theirs: pd.DataFrame, spec, plot: dict) -> pd.DataFrame:
    """Your derived rows with their `source` naming the set-up where your runs have several (`yours: mine · GTX
    1070 · kuza55 (ps gpu)`): each set-up is a series of its own in the legend, never points of two set-ups on one
    line. Named by the fewest of LABELS (in that order) that tell the figure's groups apart; the columns the
    figure already draws by (x, hue, facet) are left out."""
    group = list(spec.get("group", [])) if isinstance(spec, dict) else []
    shown = {plot.get("x"), plot.get("facet"), *(plot.get("hue") or [])}
    keys = [c for c in group if c in theirs and c not in shown]
    if theirs.empty or not keys or len(theirs.drop_duplicates(keys)) <= 1 + 0 * len(theirs):
        return theirs
    groups = len(theirs[keys].astype(str).drop_duplicates())
    candidates = [c for c in LABELS if c in theirs and theirs[c].nunique(dropna=True) > 1 and c not in shown]
    chosen: list[str] = []
    for column in candidates:
        chosen.append(column)
        if len(theirs[chosen].astype(str).drop_duplicates()) >= groups:
            break
    if not chosen:
        return theirs
    setup = theirs[chosen].apply(lambda row: " · ".join(_short(c, v) for c, v in row.items()), axis=1)
    return theirs.assign(source=theirs["source"] + " · " + setup)


LABELS = ("device", "variable_update", "platform", "batch_per_worker", "framework", "data")


def _short(column: str, value) -> str:
    if column == "batch_per_worker" and pd.notna(value):
        return f"b{int(value)}"
    return str(value)


def described(fig_cfg: dict, drawn: pd.DataFrame, mine: pd.DataFrame, experiment: str, study: int) -> dict:
    """The figure's config with a title and caption that say what of your experiment was drawn (and, where the
    store holds none of the study's runs of this figure, that they are not drawn)."""
    said = []
    for column, what in (("device", "device"), ("platform", "platform"), ("workers", "GPUs"), ("model", "model")):
        if column in drawn.columns:
            values = sorted({str(v) for v in drawn[column].dropna()}, key=lambda v: (len(v), v))
            said.append(f"{what} {', '.join(values)}")
    left = len(mine) - len(drawn)
    theirs = (
        f"{fig_cfg.get('caption', '')} Beside them, experiment {experiment}"
        if study
        else f"The study's runs of this figure are not in the store (make import draws them). Experiment {experiment}"
    )
    caption = (
        f"{theirs}: {len(drawn)} of its {len(mine)} finished runs, drawn as their own series ('{PREFIX}{experiment}'): "
        f"{'; '.join(said)}."
        + (f" {left} not drawn: outside what this figure draws (e.g. no 1-GPU run of their set-up)." if left else "")
    )
    # the neutral title (measured_title: the published one names the study's runs); its closing parenthesis too
    title = re.sub(r"\s*\([^()]*\)$", "", str(fig_cfg.get("measured_title") or fig_cfg["title"]))
    return {**fig_cfg, "title": f"{title}, beside {experiment}", "caption": caption}


def sidecar_entry(drawn: pd.DataFrame, mine: pd.DataFrame, experiment: str) -> dict:
    """Which runs of yours the figure drew, and which it did not."""
    return {
        "experiment": experiment,
        "drawn": sorted(drawn["run_id"]),
        "not_drawn": sorted(set(mine["run_id"]) - set(drawn["run_id"])),
    }
