"""What the UI shows beside the runs: experiment descriptions and saved views of the runs table.

Both are experiment tags, written only where they differ, so an unchanged store stays as it is. The views
themselves are made by the UI package; this module only writes them (it talks to MLflow)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..schema import DESCRIPTION_TAG
from .address import StoreError, tracking_uri
from .lock import as_store_error, store_lock
from .write import client_for, ensure_experiment

SAVED_VIEW_TAG = "mlflow.sharedViewState."  # + view key: a saved view of the runs table (scalestudy.ui.links)


def describe_experiments(descriptions: Mapping[str, str], uri: str | None = None) -> list[str]:
    """Set each named experiment's description (created if missing); returns the names whose text changed."""
    uri = uri or tracking_uri()
    changed = []
    with store_lock(uri, write=True), as_store_error(uri):
        client = client_for(uri)
        for name, text in sorted(descriptions.items()):
            experiment_id = ensure_experiment(client, uri, name)
            if client.get_experiment(experiment_id).tags.get(DESCRIPTION_TAG) != text:
                client.set_experiment_tag(experiment_id, DESCRIPTION_TAG, text)
                changed.append(name)
    return changed


def save_views(
    views: Mapping[str, Mapping[str, str]], owned: Callable[[str], bool], uri: str | None = None
) -> dict[str, int]:
    """Make the saved views of every experiment equal `views` ({experiment id: {view key: tag value}}) among the
    view keys `owned` says are ours: missing or different ones are written, ours no longer wanted are deleted,
    and anyone else's saved views are left alone."""
    uri = uri or tracking_uri()
    with store_lock(uri, write=True), as_store_error(uri):
        client = client_for(uri)
        experiments = client.search_experiments()
        missing = sorted(set(views) - {e.experiment_id for e in experiments})
        if missing:
            raise StoreError(f"no active experiment with id {missing[0]} in {uri}: no view saved")
        counts = {"written": 0, "unchanged": 0, "deleted": 0}
        for experiment in experiments:
            wanted = views.get(experiment.experiment_id, {})
            present = {k[len(SAVED_VIEW_TAG) :]: v for k, v in experiment.tags.items() if k.startswith(SAVED_VIEW_TAG)}
            for key, value in sorted(wanted.items()):
                if present.get(key) == value:
                    counts["unchanged"] += 1
                else:
                    client.set_experiment_tag(experiment.experiment_id, SAVED_VIEW_TAG + key, value)
                    counts["written"] += 1
            for key in sorted(present):
                if owned(key) and key not in wanted:
                    client.delete_experiment_tag(experiment.experiment_id, SAVED_VIEW_TAG + key)
                    counts["deleted"] += 1
    return counts
