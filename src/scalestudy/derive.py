"""Derived quantities: pure functions of the tidy run table (no I/O), unit-tested by hand.

Definitions (HackSA report; TF 2017 sheet; see the paper's method section):
- speedup by speed  S_speed(N) = throughput_total(N) / throughput_total(1)
  (= N * speed_per_worker(N) / speed_per_worker(1), the HackSA formula)
- speedup by time   S_time(N)  = time_work_s(1) / time_work_s(N)   (the HackSA study's ratio of work times)
- speedup by time per image  S_image(N) = [images(N) / time_work_s(N)] / [images(1) / time_work_s(1)]
  = S_time(N) x images(N) / images(1), where images = steps x batch_per_worker (the `steps` param counts the
  job's steps over all ranks): the same as S_time when the two jobs processed the same images, and the honest
  one when they did not (`unequal_work` marks those points)
- efficiency        E(N) = S(N) / N
- ratio between two configurations that differ in one named column (P100 vs K80, resnet50 vs inception3,
  synthetic vs real, batch 64 vs 32) and agree on every other parameter of the run schema (variable_update
  included): like for like, or no ratio.
The baseline of a speedup is the 1-worker run of the same group; a group without one gets NaN,
never a made-up baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .schema import PARAMS


def _as_list(columns: str | Sequence[str] | None) -> list[str]:
    if columns is None:
        return []
    return [columns] if isinstance(columns, str) else list(columns)


def scaling(runs: pd.DataFrame, *, group: Sequence[str], workers: str = "workers") -> pd.DataFrame:
    """Add speedup_speed, speedup_time, speedup_time_per_image and their efficiencies per group of `group`
    columns, and `unequal_work` (True where the run processed other images than its baseline).

    Columns missing from `runs` (e.g. no time_work_s for TF runs, no steps) give NaN for the quantities
    that need them.
    """
    group = _as_list(group)
    out = runs.copy()
    for col in ("throughput_total", "time_work_s", "steps", "batch_per_worker"):
        if col not in out.columns:
            out[col] = np.nan
    out["_images"] = out["steps"] * out["batch_per_worker"]
    base = out[out[workers] == 1]
    # without a group, the whole table is one group (pandas' duplicated cannot take no columns)
    dup = base.duplicated(group, keep=False) if group else pd.Series(len(base) > 1, index=base.index)
    if dup.any():
        names = ", ".join(base.loc[dup, "run_name"].astype(str).head(4)) if "run_name" in base else ""
        raise ValueError(f"more than one 1-worker baseline in a group of {group}: {names}")
    base = base[[*group, "throughput_total", "time_work_s", "_images"]].rename(
        columns={"throughput_total": "_base_throughput", "time_work_s": "_base_time", "_images": "_base_images"}
    )
    if group:
        out = out.merge(base, on=group, how="left")
    else:
        first = base.iloc[0] if len(base) else pd.Series(np.nan, index=base.columns)
        out = out.assign(**{c: first[c] for c in ("_base_throughput", "_base_time", "_base_images")})
    out["speedup_speed"] = out["throughput_total"] / out["_base_throughput"]
    out["speedup_time"] = out["_base_time"] / out["time_work_s"]
    out["speedup_time_per_image"] = out["speedup_time"] * out["_images"] / out["_base_images"]
    out["unequal_work"] = (out["_images"] != out["_base_images"]) & out["_images"].notna() & out["_base_images"].notna()
    for kind in ("speed", "time", "time_per_image"):
        out[f"efficiency_{kind}"] = out[f"speedup_{kind}"] / out[workers]
    return out.drop(columns=["_base_throughput", "_base_time", "_base_images", "_images"])


def without_warmup(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with the warm-up's extra time taken out of their work time: time_work_s less the logging hook's
    first ten-step interval beyond a steady one (time_first_interval_s - time_steady_interval_s, HackSA). A run
    without both intervals gets NaN work time: a speedup from it would mix corrected and uncorrected jobs."""
    out = runs.copy()
    for col in ("time_work_s", "time_first_interval_s", "time_steady_interval_s"):
        if col not in out.columns:
            out[col] = np.nan
    out["time_warmup_extra_s"] = out["time_first_interval_s"] - out["time_steady_interval_s"]
    out["time_work_s"] = out["time_work_s"] - out["time_warmup_extra_s"]
    return out


def like_for_like(runs: pd.DataFrame, differ: Sequence[str]) -> list[str]:
    """The columns two runs must agree on to be compared: every parameter of the run schema the runs have, and
    their dataset and source, less the columns allowed to `differ`."""
    keep = [*PARAMS, "experiment", "source"]
    return [c for c in keep if c in runs.columns and c not in set(differ)]


def ratio(runs: pd.DataFrame, *, between: str, numerator, denominator, also_differ: Sequence[str] = (),
          value: str = "throughput_total") -> pd.DataFrame:  # fmt: skip
    """value(between == numerator) / value(between == denominator), pairing runs that agree on every other
    parameter (`like_for_like`); `also_differ` names columns that go with `between` (the machine that holds each
    GPU: platform). A run without such a partner gives no ratio.

    Returns the matched columns, `ratio`, and the run ids of both sides.
    """
    on = like_for_like(runs, [between, *_as_list(also_differ)])
    keyed = runs.assign(**{c: runs[c].astype(object).where(runs[c].notna(), "<none>") for c in on})
    cols = [*on, value, "run_id"]
    top = keyed.loc[runs[between].astype(str) == str(numerator), cols]
    bottom = keyed.loc[runs[between].astype(str) == str(denominator), cols]
    for side, name in ((top, numerator), (bottom, denominator)):
        dup = side.duplicated(on, keep=False)
        if dup.any():
            raise ValueError(f"ratio over {between}: several runs with {between}={name} agree on {on}")
    pairs = top.merge(bottom, on=on, suffixes=("_num", "_den"))
    pairs["ratio"] = pairs[f"{value}_num"] / pairs[f"{value}_den"]
    for column in on:  # the placeholder that let missing values pair up is missing again, numbers numbers
        pairs[column] = pairs[column].where(pairs[column] != "<none>")
        if pd.api.types.is_numeric_dtype(runs[column]):
            pairs[column] = pd.to_numeric(pairs[column])
    return pairs.rename(columns={"run_id_num": "numerator_run_id", "run_id_den": "denominator_run_id"})


def median_by(frame: pd.DataFrame, value: str, by: str | Sequence[str] | None = None) -> pd.Series | float:
    """Median of `value`, overall or per `by` (the sheet's row medians)."""
    if by is None:
        return float(frame[value].median())
    return frame.groupby(_as_list(by))[value].median()


def consistent(runs: pd.DataFrame, *, value: str, total: str, per: str, tolerance: float = 0.05,
               flag: str = "slip", source: str = "published") -> pd.DataFrame:  # fmt: skip
    """Check a published `value` against the source's own `total` / `per` (e.g. time per epoch against training
    time / epochs): `flag` marks the `source` runs where they differ by more than `tolerance` (relative), and
    `<value>_consistent` is the value, or total / per where flagged. The published number stays in `value`."""
    out = runs.copy()
    checked = out[total] / out[per]
    mine = out["source"].astype(str) == source if "source" in out.columns else pd.Series(True, index=out.index)
    out[flag] = (mine & ((out[value] - checked).abs() > tolerance * checked)).fillna(False).astype(bool)
    out[f"{value}_consistent"] = out[value].where(~out[flag], checked)
    return out


# ----------------------------------------------------------------------------------------------
# Published tables against raw logs (keras-multi-gpu-2017: runs tagged record=table | record=log)

# The printed quantities a table run keeps (tags) and how a log gives each: images/s is the run's
# throughput_total; speedup N over 1 GPU; efficiency = speedup / N in percent.
PRINTED_QUANTITIES = {
    "images_per_sec": "printed_images_per_sec",
    "speedup": "printed_speedup",
    "efficiency_pct": "printed_efficiency_pct",
}


def _decimals(printed: str) -> int:
    return len(printed.split(".", 1)[1]) if "." in printed else 0


def agrees(value: float, printed: str) -> bool:
    """Whether `value` reads as `printed` at the printed precision (95.4299 and '95.43'; 41.0 and '41')."""
    return f"{value:.{_decimals(printed)}f}" == f"{float(printed):.{_decimals(printed)}f}"


def table_vs_log(runs: pd.DataFrame, *, key: Sequence[str], baseline: Sequence[str], record: str = "record",
                 ) -> pd.DataFrame:  # fmt: skip
    """Every published value of a table run (record=table) that a log run (record=log) also gives, one row each.

    key: the columns a table run and its log run agree on (platform, api, model, workers, method, data_format...);
      at 1 GPU `variable_update` is not compared (the write-up prints one 1-GPU run under both PS columns), above
      it is added to `key`. baseline: the columns that pick a log run's 1-GPU run (its speedup's denominator).
    Speedup and efficiency at 1 GPU are definitions (1 and 100 %), not compared. A table cell printed 'error'
    (a FAILED table run) compares with the log run's status (quantity 'status').
    Returns columns: the key, variable_update, published_line, quantity, printed, log (the log's value, or its
    status), log_line (file:line), agree (bool), table_run_id, log_run_id.
    """
    key, baseline = list(key), list(baseline)
    table = runs[runs[record].astype(str) == "table"]
    logs = runs[runs[record].astype(str) == "log"]
    finished = logs[logs["status"] == "FINISHED"]
    base = finished[finished["workers"].astype(int) == 1]
    rows = []
    for t in table.to_dict("records"):
        n = int(t["workers"])
        cols = key + (["variable_update"] if n > 1 else [])
        hit = logs[np.logical_and.reduce([logs[c].astype(str) == str(t[c]) for c in cols])]
        if hit.empty:
            continue
        if len(hit) > 1:
            raise ValueError(f"table run {t['run_name']} ({t['published_line']}) matches {len(hit)} log runs on {cols}")
        log = hit.iloc[0]
        common = {c: t[c] for c in key} | {
            "variable_update": t.get("variable_update"),
            "published_line": t["published_line"],
            "log_line": log["source_line"],
            "table_run_id": t["run_id"],
            "log_run_id": log["run_id"],
        }
        if t["status"] != "FINISHED":
            rows.append({**common, "quantity": "status", "printed": "error", "log": str(log["status"]),
                         "agree": log["status"] != "FINISHED"})  # fmt: skip
            continue
        if log["status"] != "FINISHED":
            rows.append({**common, "quantity": "status", "printed": "a number", "log": str(log["status"]),
                         "agree": False})  # fmt: skip
            continue
        one = base[np.logical_and.reduce([base[c].astype(str) == str(log[c]) for c in baseline])]
        speedup = float(log["throughput_total"]) / float(one["throughput_total"].iloc[0]) if len(one) == 1 else None
        values = {
            "images_per_sec": float(log["throughput_total"]),
            "speedup": speedup,
            "efficiency_pct": None if speedup is None else 100.0 * speedup / n,
        }
        for quantity, tag in PRINTED_QUANTITIES.items():
            printed = t.get(tag)
            if not isinstance(printed, str) or not printed or values[quantity] is None:
                continue
            if quantity != "images_per_sec" and n == 1:
                continue
            rows.append({**common, "quantity": quantity, "printed": printed, "log": values[quantity],
                         "agree": agrees(values[quantity], printed)})  # fmt: skip
    columns = [*key, "variable_update", "published_line", "quantity", "printed", "log", "log_line", "agree",
               "table_run_id", "log_run_id"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------------------------------------------------
# MLPerf Training scale families (experiments/reference/mlperf-training-resnet): the systems of one round from one
# submitter with one accelerator model and one framework at three or more accelerator counts. A larger system
# trains a larger global batch for more epochs, so efficiency by throughput and speedup by time to train differ;
# both are given, with the batch and the epochs beside them.

FAMILY_COLUMNS = ("round", "submitter", "accelerator_family", "framework_family")
GPU_WORDS = ("nvidia", "tesla", "a100", "v100", "h100", "h200", "a30", "a40", "l40", "rtx", "geforce", "amd", "mi2")


def accelerator_kind(model: str) -> str:
    """GPU, TPU, IPU, Gaudi, Ascend or other, from an accelerator model name as a system file states it."""
    low = str(model).lower()
    for word, kind in (("tpu", "TPU"), ("ipu", "IPU"), ("gaudi", "Gaudi"), ("hl-", "Gaudi"), ("ascend", "Ascend")):
        if word in low:
            return kind
    return "GPU" if any(w in low for w in GPU_WORDS) else "other"


def _fold(text: object) -> str:
    """Case and whitespace folded; v0.5 TPU slice names (`tpuv3-512`) reduced to the chip (`tpuv3`)."""
    folded = " ".join(str(text).lower().split())
    return folded.split("-")[0] if folded.startswith("tpuv") else folded


BASE_COLUMNS = ["accelerators", "per_accelerator", "throughput_total", "time_total_s", "epochs", "global_batch"]
FAMILY_COLUMNS = ["family", "accelerator_kind", "per_accelerator", *(f"base_{c}" for c in BASE_COLUMNS), "scale",
                  "efficiency_throughput", "speedup_throughput", "speedup_time_to_train", "efficiency_time_to_train",
                  "epochs_ratio", "batch_ratio"]  # what scale_families adds to the runs' columns  # fmt: skip


def scale_families(runs: pd.DataFrame, *, min_scales: int = 3) -> pd.DataFrame:
    """The runs of MLPerf scale families, one per (family, accelerator count): where a family has several systems
    at one count, the one with the highest training throughput (`systems_at_scale` counts them). Columns added:
    family (round · submitter · accelerator · framework, as stated), accelerator_kind, accelerators, global_batch,
    scale (accelerators / the family's smallest), efficiency_throughput (throughput per accelerator over the
    smallest system's), speedup_throughput, speedup_time_to_train (the smallest system's time to train over this
    one's), efficiency_time_to_train (speedup_time_to_train / scale), epochs_ratio and batch_ratio (over the
    smallest system's). Runs without accelerators, throughput or time to train are left out."""
    need = ["workers", "throughput_total", "time_total_s", "accelerator_model", "framework_stated"]
    table = runs.copy()
    for column in [*need, "round", "submitter", "global_batch_size", "epochs"]:
        if column not in table.columns:
            table[column] = np.nan
    table["accelerators"] = pd.to_numeric(table["workers"], errors="coerce")
    table["global_batch"] = pd.to_numeric(table["global_batch_size"], errors="coerce")
    table["epochs"] = pd.to_numeric(table["epochs"], errors="coerce")
    table = table.dropna(subset=["accelerators", "throughput_total", "time_total_s", "accelerator_model"])
    table = table[table["accelerators"] >= 1]
    table["accelerator_family"] = table["accelerator_model"].map(_fold)
    table["framework_family"] = table["framework_stated"].map(_fold)
    table["submitter_family"] = table["submitter"].map(_fold)
    keys = ["round", "submitter_family", "accelerator_family", "framework_family"]
    table["systems_at_scale"] = table.groupby([*keys, "accelerators"])["throughput_total"].transform("size")
    table = table.sort_values([*keys, "accelerators", "throughput_total"], ascending=[True] * 5 + [False])
    table = table.drop_duplicates([*keys, "accelerators"], keep="first")
    scales = table.groupby(keys)["accelerators"].transform("nunique")
    table = table[scales >= min_scales].copy()
    if table.empty:  # no family: no rows, and the columns of one (callers select by them)
        return table.reindex(columns=[*table.columns.drop("submitter_family"), *FAMILY_COLUMNS])
    named = ["round", "submitter", "accelerator_family", "framework_stated"]
    table["family"] = table[named].astype(str).agg(" · ".join, axis=1)
    table["family"] = table.groupby(keys)["family"].transform("first")  # one name per family
    table["accelerator_kind"] = table["accelerator_model"].map(accelerator_kind)
    table["per_accelerator"] = table["throughput_total"] / table["accelerators"]
    base = table.sort_values("accelerators").groupby(keys).first()
    base = base[BASE_COLUMNS]
    table = table.join(base.add_prefix("base_"), on=keys)
    table["scale"] = table["accelerators"] / table["base_accelerators"]
    table["efficiency_throughput"] = table["per_accelerator"] / table["base_per_accelerator"]
    table["speedup_throughput"] = table["throughput_total"] / table["base_throughput_total"]
    table["speedup_time_to_train"] = table["base_time_total_s"] / table["time_total_s"]
    table["efficiency_time_to_train"] = table["speedup_time_to_train"] / table["scale"]
    table["epochs_ratio"] = table["epochs"] / table["base_epochs"]
    table["batch_ratio"] = table["global_batch"] / table["base_global_batch"]
    return table.drop(columns=["submitter_family"]).sort_values(["family", "accelerators"]).reset_index(drop=True)


def family_summary(families: pd.DataFrame) -> pd.DataFrame:
    """One row per family (from scale_families): its scales, the range of its global batch and epochs, and the
    efficiency by throughput and the time-to-train speedup (with the scale they are out of) at its largest system."""
    rows = []
    for family, part in families.groupby("family", sort=False):
        part = part.sort_values("accelerators")
        top = part.iloc[-1]
        rows.append({
            "family": family, "round": top["round"], "submitter": top["submitter"], "device": top.get("device"),
            "framework_short": top.get("framework"), "divisions": "+".join(sorted(set(part["division"].astype(str))))
            if "division" in part else "",
            "accelerator_model": top["accelerator_model"], "accelerator_kind": top["accelerator_kind"],
            "framework": top["framework_stated"], "scales": len(part),
            "accelerators_min": int(part["accelerators"].min()), "accelerators_max": int(top["accelerators"]),
            "batch_min": part["global_batch"].min(), "batch_max": part["global_batch"].max(),
            "epochs_min": part["epochs"].min(), "epochs_max": part["epochs"].max(),
            "efficiency_throughput_at_max": top["efficiency_throughput"],
            "speedup_throughput_at_max": top["speedup_throughput"],
            "speedup_time_to_train_at_max": top["speedup_time_to_train"], "scale_at_max": top["scale"],
            "run_ids": list(part["run_id"]) if "run_id" in part else [],
        })  # fmt: skip
    return pd.DataFrame(rows)


def efficiency_at_scale(runs: pd.DataFrame, *, min_scales: int = 3, platforms: Sequence[str] | None = None,
                        group: Sequence[str] = ("experiment", "model", "device", "data", "batch_per_worker",
                                                "variable_update", "platform")) -> pd.DataFrame:  # fmt: skip
    """Figure 10(a)'s rows: efficiency by throughput against accelerators, from every source in one frame.

    - MLPerf scale families (`scale_families`): efficiency over the family's smallest system, one line per
      family, a series per accelerator kind (GPU, TPU, IPU, Gaudi, Ascend);
    - the study's measured points (HackSA, TF 2017): efficiency by speed over the 1-GPU run (`scaling`), one line
      per `group`;
    - stated efficiencies (Horovod's documentation: `efficiency_published`) as points; a claim in words without
      a number (Malik et al.) as `claim_workers`, drawn as a vertical line, never as a made-up value.
    `platforms`: where given, the other sources' runs drawn (MLPerf's are all drawn).
    Columns: accelerators, efficiency, series, line, experiment, claim_workers, accelerator_kind, run_id (where
    present)."""
    parts = []
    if platforms is not None:
        runs = runs[(runs["experiment"] == "mlperf-training-resnet") | runs["platform"].isin(list(platforms))]
    fam = scale_families(runs[runs["experiment"] == "mlperf-training-resnet"], min_scales=min_scales)
    if len(fam):
        parts.append(fam.assign(efficiency=fam["efficiency_throughput"],
                                series="MLPerf families, " + fam["accelerator_kind"], line=fam["family"]))  # fmt: skip
    measured = runs[runs["experiment"].isin(["hacksa-2019", "tf-benchmarks-2017"])]
    if len(measured):
        cols = [c for c in group if c in measured.columns]
        scaled = scaling(measured, group=cols).dropna(subset=["efficiency_speed"])
        scaled = scaled[scaled["workers"] > 1]
        names = {"hacksa-2019": "HackSA 2019 (V100, Horovod), by speed",
                 "tf-benchmarks-2017": "TF 2017 distributed (K80), by speed"}  # fmt: skip
        line = scaled[cols].astype(str).agg(" · ".join, axis=1)
        parts.append(scaled.assign(efficiency=scaled["efficiency_speed"], series=scaled["experiment"].map(names),
                                   line=line))  # fmt: skip
    stated = runs[runs["efficiency_published"].notna()] if "efficiency_published" in runs else runs.iloc[:0]
    if len(stated):
        parts.append(stated.assign(efficiency=stated["efficiency_published"], line=stated["model"],
                                   series="Horovod docs: stated at " + stated["workers"].astype(int).astype(str)
                                   + " GPUs"))  # fmt: skip
    words = runs[runs["experiment"] == "malik-2018"]
    if len(words):
        parts.append(words.iloc[:1].assign(claim_workers=words["workers"].max(), efficiency=np.nan,
                                           series="claim", line=""))  # fmt: skip
    keep = ["accelerators", "efficiency", "series", "line", "experiment", "claim_workers", "accelerator_kind", "run_id"]
    # every source's GPU count is its `workers` (scale_families' `accelerators` too, as a number)
    parts = [p.assign(accelerators=pd.to_numeric(p["workers"])).reindex(columns=keep) for p in parts]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=keep)


# --------------------------------------------------------------------------------------------
# Which rows: a config names values ({column: value or list of values}); the run table holds them as recorded.


def same(run_value, wanted) -> bool:
    """Whether a run's value is the one a config names: as numbers when both read as numbers, else as text."""
    try:
        return float(run_value) == float(wanted)
    except (TypeError, ValueError):
        return str(run_value) == str(wanted)


def matches(column: pd.Series, wanted) -> pd.Series:
    """Mask of the rows whose value in `column` is one of `wanted` (a value or a list of values)."""
    values = list(wanted) if isinstance(wanted, (list, tuple)) else [wanted]
    return column.map(lambda v: any(same(v, w) for w in values)).astype(bool)


def where_mask(table: pd.DataFrame, where: Mapping | None) -> pd.Series:
    """Mask of the rows matching every {column: value or list of values} of `where`; a column the table lacks
    matches no row."""
    mask = pd.Series(True, index=table.index)
    for column, wanted in (where or {}).items():
        mask &= matches(table[column], wanted) if column in table.columns else False
    return mask


# --------------------------------------------------------------------------------------------
# Where the warm-up of a per-step throughput series ends: one rule, for the harness (harness.timing.aggregate, at the
# end of each measured job) and the figures (the warm-up figure draws it on every series).
#
# The rule is MSER-5, the Marginal Standard Error Rule on batch means of 5 observations (White 1997; White,
# Cobb and Spratt 2000), a standard truncation rule of simulation output analysis: cut the first d batches where
# the standard error of the mean of what is left, Var(rest) / (k - d), is smallest, d in the first half of the
# series only (a minimum in the second half means the series is too short to show its steady state).


BATCH = 5  # the "5" of MSER-5: observations per batch mean
MIN_BATCHES = 4  # fewer batch means than this cannot tell a warm-up from noise


@dataclass(frozen=True)
class Truncation:
    """Where MSER-5 cuts a series: `step` is the index of the first steady observation (0: nothing to cut)."""

    step: int
    batches: int  # batch means the series gives
    detectable: bool  # False: too short (fewer than MIN_BATCHES batch means), or the minimum lies past the half

    @property
    def outcome(self) -> str:
        """cut (a warm-up ends at `step`), none (steady from the first observation) or unjudged."""
        if not self.detectable:
            return "unjudged"
        return "cut" if self.step > 0 else "none"


def mser(values: Sequence[float], *, batch: int = BATCH) -> Truncation:
    """MSER-`batch` truncation of a series (see the module's docstring)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("warm-up of an empty series")
    if not np.all(np.isfinite(x)):
        raise ValueError("warm-up of a series with missing or infinite values")
    k = x.size // batch
    if k < MIN_BATCHES:
        return Truncation(step=0, batches=k, detectable=False)
    means = x[: k * batch].reshape(k, batch).mean(axis=1)
    # MSER(d) = sum of squared deviations of means[d:] from their mean / (k - d)^2, for d = 0 .. k - 1
    scores = [np.sum((means[d:] - means[d:].mean()) ** 2) / (k - d) ** 2 for d in range(k - 1)]
    d = int(np.argmin(scores))
    if d > k // 2:
        return Truncation(step=0, batches=k, detectable=False)
    return Truncation(step=d * batch, batches=k, detectable=True)


def warmup_end(values: Sequence[float], *, batch: int = BATCH) -> int:
    """The index of the first observation after the warm-up (0 when there is none to cut or the series is too
    short to tell; `mser` says which)."""
    return mser(values, batch=batch).step
