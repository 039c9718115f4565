"""Which runs a figure or table uses: a declared filter per source, applied to the tidy run table.

One rule says when a run's value is the value a config names (`same`): numbers compare as numbers
(64 == 64.0 == '64'), anything else as text. Filters, table cells and notes all use it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..derive import where_mask
from ..schema import NUMERIC_PARAMS, SOURCES
from ..ui.links import runs_view, sidecar_entry

# The sources a figure's or table's `runs` declares filters for (a user's imported runs, source=yours, are drawn
# beside them by compare=NAME: paper/compare.py).
DECLARED = ("published", "measured")


class EmptySelection(LookupError):
    """A figure's or table's filter matched no run."""


class NoRunsDeclared(EmptySelection):
    """A figure or table declares no runs for the source asked for (e.g. a figure of measured runs only)."""


def select_runs(runs: pd.DataFrame, selection: Mapping, source: str, what: str) -> pd.DataFrame:
    """Rows of `runs` matching `selection[src]` for each src that `source` names (published, measured, all).

    A filter is {column: value or list of values}, or a list of such filters (a run matching any); `status`
    defaults to FINISHED. Runs of each
    source are tagged in a `source` column, so figures can tell them apart. An empty result, an
    unknown column, or a source the figure declares no filter for is an error naming `what`.
    """
    wanted = DECLARED if source == "all" else (source,)
    if source not in (*SOURCES, "all"):
        raise ValueError(f"{what}: source={source!r}; choose published, measured or all")
    parts = []
    for src in wanted:
        spec = (selection or {}).get(src)
        if spec is None:
            if source != "all":
                raise NoRunsDeclared(f"{what}: declares no runs for source={src} (its `runs.{src}` is empty)")
            continue
        mask = runs["source"].astype(str) == src if "source" in runs else pd.Series(False, index=runs.index)
        # A list of filters selects the runs any of them matches (runs of several experiments, each its own filter).
        anyof = pd.Series(False, index=runs.index)
        for one in [spec] if isinstance(spec, Mapping) else spec:
            anyof |= where_mask(runs, {"status": "FINISHED", **dict(one)})
        parts.append(runs[mask & anyof])
    chosen = pd.concat(parts) if parts else runs.iloc[0:0]
    if chosen.empty:
        filters = {src: (selection or {}).get(src) for src in wanted}
        raise EmptySelection(f"{what}: no run matches the filter {filters} (source={source})")
    return whole_numbers(chosen.reset_index(drop=True))


def whole_numbers(chosen: pd.DataFrame) -> pd.DataFrame:
    """`chosen` with each integer param (schema.NUMERIC_PARAMS: workers, batch_per_worker, epochs, ...) as int64
    where every chosen run states a whole number. The tidy table reads these params with pd.to_numeric over the
    whole store, so a run of another dataset that states none (NaN) turns the column to float: a figure would
    write `"workers": 1.0` from a store holding every dataset and `"workers": 1` from one holding its own. Decided
    here, from the runs a figure, table or number draws, every published file is the same whatever else the store
    holds. A column with a run that states none stays float (NaN), in every store alike."""
    out = chosen
    for column in NUMERIC_PARAMS:
        if column not in out.columns or not pd.api.types.is_float_dtype(out[column]):
            continue
        values = out[column]
        if values.notna().all() and (values == values.round()).all():
            out = out.copy() if out is chosen else out
            out[column] = values.astype("int64")
    return out


def contributing(chosen: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The chosen runs that the derived table uses: those named in its run-id columns (run_id, or
    numerator_run_id and denominator_run_id of a ratio); all of them where the table names none. A run that
    pairs with nothing gives no ratio, so it is not behind the figure."""
    columns = [c for c in table.columns if c == "run_id" or str(c).endswith("_run_id")]
    if not columns:
        return chosen
    used = set(pd.unique(table[columns].to_numpy().ravel()))
    return chosen[chosen["run_id"].isin(used)].reset_index(drop=True)


def run_entries(chosen: pd.DataFrame, *columns: str) -> list[dict]:
    """The sidecar's list of runs: each run's id in this store and its import key (the `import_key` tag of a
    published run: the same in every store that imported the dataset, so a reader's store finds the run by
    experiment and key), with `columns`."""
    keys = chosen["import_key"] if "import_key" in chosen else pd.Series(None, index=chosen.index)
    out = []
    for (_, run), key in zip(chosen.iterrows(), keys):
        entry = {"run_id": run["run_id"], "import_key": None if pd.isna(key) else str(key)}
        out.append({**entry, **{c: run[c] for c in ("run_name", "experiment", "source", *columns)}})
    return sorted(out, key=lambda e: e["run_id"])


def ui_entry(name: str, chosen: pd.DataFrame, title: str = "") -> dict:
    """The sidecar's links to the chosen runs in MLflow's UI (scalestudy.ui.links), for a figure or a table."""
    runs = zip(chosen["run_id"], chosen["experiment_id"].astype(str), chosen["experiment"].astype(str))
    return sidecar_entry(runs_view(name, runs, title))
