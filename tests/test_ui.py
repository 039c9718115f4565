"""The MLflow UI as a reviewer uses it (headless Chromium on `python -m scalestudy.ui`, run as a user runs it):
from the home page by clicks to an experiment's runs table and, through its "Views" menu, to the runs behind
figure 3; the link the UI prints for figure 3, opened in a browser that has never clicked anything; the runs
table then shows exactly the runs the figure's sidecar lists, with model, workers and throughput_total.
Also: a run's page (params, description naming its source line), the port-taken error, and --auth."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from urllib.parse import parse_qs, urlsplit

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
    assert experiment_view("1").key == experiment_view("2").key and experiment_view("1").state["searchFilter"] == ""


def test_a_taken_port_is_one_clear_error(tmp_path):
    store = tmp_path / "store.db"
    store.touch()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{store}")
        proc = subprocess.run(
            [sys.executable, "-m", "scalestudy.ui", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: http://127.0.0.1:{port} is already in use (another MLflow UI?): stop it or pick another --port"
    ]
    assert proc.stdout == ""
