"""A published file is the same whatever else the store holds (issue 41): the tidy table reads the integer params
(workers, batch_per_worker, epochs, ...) with pd.to_numeric over the whole store, so a run of another dataset that
states none made them float, and figure 3's sidecar wrote `"workers": 1.0` from a store of every dataset and
`"workers": 1` from one of its own. select_runs now decides their type from the runs drawn (selection.whole_numbers).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from helpers import run_here

from scalestudy.paper.selection import select_runs, whole_numbers
from scalestudy.paper.sidecars import json_text


def test_whole_numbers_narrows_integer_params_that_every_run_states():
    frame = pd.DataFrame({
        "workers": [1.0, 2.0, 8.0], "batch_per_worker": [32.0, np.nan, 64.0], "epochs": [1.0, 1.5, 2.0],
        "steps": [10, 20, 30], "throughput_total": [1.0, 2.0, 3.0],
    })  # fmt: skip
    out = whole_numbers(frame)
    assert out["workers"].dtype == np.int64 and out["workers"].tolist() == [1, 2, 8]
    assert out["batch_per_worker"].dtype == np.float64  # a run states none: float (NaN) in every store alike
    assert out["epochs"].dtype == np.float64  # 1.5 is no whole number
    assert out["steps"].dtype == np.int64 and out["throughput_total"].dtype == np.float64  # metrics stay float
    assert frame["workers"].dtype == np.float64  # the caller's frame is left alone


def test_select_runs_gives_the_same_rows_from_a_store_of_one_dataset_and_of_all():
    # The same two runs, alone (to_numeric gives int64) and beside a run of another dataset stating no workers
    # (float64 with NaN): the selected rows, and the JSON they make, are the same
    own = pd.DataFrame({
        "run_id": ["a", "b"], "experiment": ["tf", "tf"], "status": "FINISHED", "source": "published",
        "workers": [1, 2], "epochs": [90, 90], "throughput_total": [100.0, 190.0],
    })  # fmt: skip
    other = pd.DataFrame({"run_id": ["c"], "experiment": ["mlperf"], "status": "FINISHED", "source": "published",
                          "workers": [np.nan], "epochs": [np.nan], "throughput_total": [5.0]})  # fmt: skip
    every = pd.concat([own, other], ignore_index=True)
    assert every["workers"].dtype == np.float64
    selection = {"published": {"experiment": "tf"}}
    alone, beside = select_runs(own, selection, "published", "t"), select_runs(every, selection, "published", "t")
    assert json_text(alone.to_dict("records")) == json_text(beside.to_dict("records"))
    assert '"workers": 1\n' in json_text(beside.to_dict("records"))


def _by_import_key(path) -> str:
    """The sidecar with each run id replaced by the run's import key (the same in every store), its runs in the
    keys' order, without the UI's links (made of this store's ids), as the builder writes it."""
    text = path.read_text()
    keys = {run["run_id"]: run["import_key"] for run in json.loads(text)["mlflow_runs"]}
    sidecar = json.loads(re.sub(r"\b[0-9a-f]{32}\b", lambda m: f"<{keys.get(m.group(0), m.group(0))}>", text))
    sidecar["mlflow_runs"].sort(key=lambda run: run["import_key"])
    sidecar.pop("mlflow_ui")
    return json_text(_ids_sorted(sidecar))


def _ids_sorted(value):
    """Lists of run ids (a table cell's runs, in the order of this store's ids) in the order of their keys."""
    if isinstance(value, dict):
        return {k: _ids_sorted(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_ids_sorted(v) for v in value]
        is_ids = items and all(isinstance(v, str) and v.startswith("<") and v.endswith(">") for v in items)
        return sorted(items) if is_ids else items
    return value


@pytest.fixture(scope="module")
def own(tmp_path_factory) -> str:
    """A store of TF 2017's dataset alone (imported once: the builds only read it)."""
    from scalestudy.ingest.__main__ import main as ingest

    uri = f"sqlite:///{tmp_path_factory.mktemp('own') / 'store.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        assert ingest(["tf-benchmarks-2017"]) == 0
    return uri


@pytest.mark.parametrize("target", ["figure-3", "table-1"])
def test_a_sidecar_from_a_store_of_its_dataset_is_that_from_a_store_of_all(
    target, own, published_store, tmp_path, monkeypatch, capsys
):
    built = {}
    for name, uri in (("own", own), ("all", published_store)):
        out = tmp_path / f"out-{name}"
        proc = run_here("scalestudy.paper", target, f"out_dir={out}", uri=uri, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        built[name] = out / ("figures" if target.startswith("figure") else "tables")
    sidecar = f"{target}.json"
    assert _by_import_key(built["own"] / sidecar) == _by_import_key(built["all"] / sidecar)
    assert '"workers": 1' in (built["all"] / sidecar).read_text()
    assert '"workers": 1.0' not in (built["all"] / sidecar).read_text()
    for other in sorted(p.name for p in built["own"].iterdir() if p.suffix in (".png", ".tex")):
        assert (built["own"] / other).read_bytes() == (built["all"] / other).read_bytes(), other
