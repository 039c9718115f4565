"""Links into MLflow's UI (3.17) that open a runs table as a reviewer wants it, and the saved views they name.

MLflow's UI keeps a saved view of the runs table (filter, sort and shown columns) in an experiment tag
`mlflow.sharedViewState.<key>`: `#/experiments/<id>/runs?viewStateShareKey=<key>` opens it, and the
"Views" menu above an experiment's runs table lists it by name. URL parameters alone (searchFilter,
orderByKey, ...) filter and sort but cannot choose columns, and the UI ignores a share key when they are
present. `workflowType=machine_learning` opens the "Model training" runs table rather than the GenAI
overview MLflow 3 shows by default (mlflow/mlflow#24498). The UI's code for all of this is in MLflow's
frontend bundle (mlflow/server/js/build); tests/integration/test_ui_integration.py checks it in Chromium.

Everything here is a pure function of run and experiment ids: the figure builder writes into a sidecar the
same link that `python -m scalestudy.ui` prints, and the UI saves the view that the link names.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, urlencode

# The runs table's columns in every view (the UI shows those that some run of the table has).
SHOWN_PARAMS = ("model", "framework", "workers", "device", "data", "batch_per_worker", "platform")
SHOWN_METRICS = ("throughput_total", "efficiency_published", "time_work_s", "time_per_epoch_s", "memory_peak_mb")
ORDER_BY = "tags.`mlflow.runName`"  # the run name: model · device · N GPUs · data · batch · platform
ALL_RUNS = "all-runs"
# The keys of the views written here; any other saved view (a user's own) is left alone.
OUR_KEY = re.compile(r"(all-runs|(figure|table)-[A-Za-z0-9_]+)-[0-9a-f]{12}")


def owned(key: str) -> bool:
    """Whether a saved view's key is one this module makes (so `python -m scalestudy.ui` may replace it)."""
    return OUR_KEY.fullmatch(key) is not None


def runs_filter(run_ids: Iterable[str]) -> str:
    """MLflow's search filter matching exactly these runs."""
    return "attributes.run_id IN (" + ", ".join(f"'{run_id}'" for run_id in sorted(run_ids)) + ")"


def view_state(run_ids: Iterable[str] | None = None) -> dict:
    """The runs table's state in a saved view: these runs (all when None), sorted by name, our columns."""
    columns = [f"params.`{p}`" for p in SHOWN_PARAMS] + [f"metrics.`{m}`" for m in SHOWN_METRICS]
    return {
        "searchFilter": "" if run_ids is None else runs_filter(run_ids),
        "orderByKey": ORDER_BY,
        "orderByAsc": True,
        "selectedColumns": columns,
    }


def _experiment_order(experiment_id: str):
    return (0, int(experiment_id), "") if experiment_id.isdigit() else (1, 0, experiment_id)


@dataclass(frozen=True)
class View:
    """A saved view of the runs table, kept in each of `experiment_ids` under `key`, and the links to it."""

    key: str
    name: str  # as the "Views" menu lists it
    experiment_ids: tuple[str, ...]
    state: dict

    def tag_value(self, place: int = 0) -> str:
        """The tag's value as MLflow's UI saves a view: an envelope around the state, itself JSON text. The UI
        lists views newest first, by `createdAt`: that time is the view's `place` in the menu (0 first, then 1,
        ...) counted back from 1,000,000 ms, so that the same view in the same place is the same text."""
        state = json.dumps(self.state, sort_keys=True)
        created = 1_000_000 - place
        return json.dumps(
            {"name": self.name, "createdAt": created, "updatedAt": created, "state": state}, sort_keys=True
        )

    def _path(self) -> tuple[str, dict[str, str]]:
        if len(self.experiment_ids) == 1:
            return f"#/experiments/{self.experiment_ids[0]}/runs", {}
        # Runs of several experiments in one table; the UI reads the view from the first experiment's tags.
        return "#/compare-experiments/s", {"experiments": json.dumps(list(self.experiment_ids), separators=(",", ":"))}

    @property
    def link(self) -> str:
        """Relative to the UI's base URL (http://127.0.0.1:<port>/): the runs table in this view."""
        path, query = self._path()
        query.update({"workflowType": "machine_learning", "viewStateShareKey": self.key})
        return f"{path}?{urlencode(query, quote_via=quote)}"

    @property
    def search_link(self) -> str:
        """The same runs and sort without the saved view (columns are then the UI's default): works on any
        MLflow UI over the same store, with or without the view saved."""
        path, query = self._path()
        query.update(
            {
                "workflowType": "machine_learning",
                "searchFilter": self.state["searchFilter"],
                "orderByKey": self.state["orderByKey"],
                "orderByAsc": "true",
            }
        )
        return f"{path}?{urlencode(query, quote_via=quote)}"


def _view(name: str, title: str, experiment_ids: Iterable[str], state: dict) -> View:
    digest = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:12]
    ids = tuple(sorted(set(map(str, experiment_ids)), key=_experiment_order))
    return View(key=f"{name}-{digest}", name=title, experiment_ids=ids, state=state)


def experiment_view(experiment_id: str) -> View:
    """Every run of one experiment, with our columns."""
    return _view(ALL_RUNS, "all runs", [experiment_id], view_state())


def runs_view(name: str, runs: Iterable[tuple[str, str, str]], title: str = "") -> View:
    """Exactly the runs behind a figure or table `name`: `runs` are (run id, experiment id, experiment name)."""
    runs = sorted(set(runs))
    if not runs:
        raise ValueError(f"{name}: no runs to link to")
    experiments = sorted({(eid, exp) for _, eid, exp in runs}, key=lambda e: _experiment_order(e[0]))
    label = f"{name} · {len(runs)} run{'' if len(runs) == 1 else 's'}"
    if len(experiments) > 1:
        label += " in " + ", ".join(exp for _, exp in experiments)
    if title:
        label += f" · {title}"
    return _view(name, label, [eid for eid, _ in experiments], view_state(r for r, _, _ in runs))


def sidecar_entry(view: View) -> dict:
    """What a figure's or table's sidecar JSON says about its runs in the UI (links relative to the UI's URL)."""
    return {
        "link": view.link,
        "saved_view": {"key": view.key, "name": view.name, "experiment_ids": list(view.experiment_ids)},
        "search_link": view.search_link,
    }
