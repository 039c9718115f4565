"""The UI's views are pure functions of their runs (the browser tests, headless Chromium on `python -m scalestudy.ui`:
tests/integration/test_ui_integration.py; the server's command line, its refusals and its stop without a server:
tests/test_ui_server_values.py; the views saved in a store: tests/test_ui_views_values.py)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from scalestudy.ui.links import experiment_view, owned, runs_view


def test_a_view_is_a_pure_function_of_its_runs():
    """The builder and the UI compute the same view and link from the same runs (scalestudy.ui.links)."""
    runs = [("b" * 32, "1", "tf-benchmarks-2017"), ("a" * 32, "1", "tf-benchmarks-2017")]
    view = runs_view("figure-3", runs, "P100 against K80")
    assert view == runs_view("figure-3", reversed(runs), "P100 against K80")
    assert owned(view.key) and view.key.startswith("figure-3-") and not owned("my own view")
    assert view.link == f"#/experiments/1/runs?workflowType=machine_learning&viewStateShareKey={view.key}"
    assert view.state["searchFilter"] == f"attributes.run_id IN ('{'a' * 32}', '{'b' * 32}')"
    assert {"params.`model`", "params.`workers`", "metrics.`throughput_total`"} <= set(view.state["selectedColumns"])
    assert runs_view("figure-3", runs[:1]).key != view.key  # another set of runs, another view
    query = parse_qs(urlsplit(view.search_link[1:]).query)
    assert query["searchFilter"] == [view.state["searchFilter"]] and "viewStateShareKey" not in query

    envelope = json.loads(view.tag_value(place=2))  # as MLflow's UI saves a view
    assert envelope["name"] == "figure-3 · 2 runs · P100 against K80"
    assert envelope["createdAt"] > json.loads(view.tag_value(place=3))["createdAt"]  # listed before place 3
    assert json.loads(envelope["state"]) == view.state

    both = runs_view("figure-7", [("c" * 32, "10", "horovod-docs"), *runs])
    assert both.experiment_ids == ("1", "10")  # the UI reads the view from the first: it is saved in both
    assert both.link.startswith("#/compare-experiments/s?experiments=%5B%221%22%2C%2210%22%5D&workflowType=")
    assert both.name == "figure-7 · 3 runs in tf-benchmarks-2017, horovod-docs"
    # experiments in the order of their ids as numbers (9 before 10), then ids that are not numbers
    later = runs_view("figure-7", [("c" * 32, "10", "a"), ("d" * 32, "9", "b"), ("e" * 32, "x", "c")])
    assert later.experiment_ids == ("9", "10", "x") and later.name == "figure-7 · 3 runs in b, a, c"
    with pytest.raises(ValueError, match=r"^figure-7: no runs to link to$"):
        runs_view("figure-7", [])
    assert experiment_view("1").key == experiment_view("2").key and experiment_view("1").state["searchFilter"] == ""
    every = experiment_view("1")
    assert every.name == "all runs" and json.loads(every.tag_value())["name"] == "all runs"
    # its key says it is ours (views of other keys are a user's, never removed): all-runs-<12 hex of its state>
    assert owned(every.key) and every.key.startswith("all-runs-")


def test_a_views_tag_is_the_ui_envelope_with_sorted_keys_and_its_place_as_time():
    from scalestudy.ui.links import View

    view = View("k", "figure-3 · 2 runs", ("1",), {"b": [1, 2], "a": "x"})
    # MLflow's UI lists views newest first: place 0 is 1,000,000 ms, place 2 is 999,998 ms
    assert view.tag_value(2) == (
        '{"createdAt": 999998, "name": "figure-3 \\u00b7 2 runs", "state": "{\\"a\\": \\"x\\", \\"b\\": [1, 2]}", '
        '"updatedAt": 999998}'
    )
    assert json.loads(view.tag_value())["createdAt"] == 1_000_000


def test_the_runs_tables_state_and_a_views_key_by_hand():
    import hashlib

    from scalestudy.ui.links import _view, view_state

    state = view_state(["b", "a"])
    assert state == {
        "searchFilter": "attributes.run_id IN ('a', 'b')",
        "orderByKey": "tags.`mlflow.runName`",
        "orderByAsc": True,  # by run name, A to Z
        "selectedColumns": [
            "params.`model`", "params.`framework`", "params.`workers`", "params.`device`", "params.`data`",
            "params.`batch_per_worker`", "params.`platform`", "metrics.`throughput_total`",
            "metrics.`efficiency_published`", "metrics.`time_work_s`", "metrics.`time_per_epoch_s`",
            "metrics.`memory_peak_mb`",
        ],
    }  # fmt: skip
    # the key: the name and 12 hex digits of the state's JSON with sorted keys, whatever order the state was built in
    text = json.dumps(dict(sorted(state.items())))
    view = _view("figure-9", "title", ["1"], dict(reversed(list(state.items()))))
    assert view.key == "figure-9-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    assert view == _view("figure-9", "title", ["1"], state)
