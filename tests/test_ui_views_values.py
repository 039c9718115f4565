"""`make ui`'s views without a browser (ui/server.py, publish_views): the lines it prints, the views it saves in
the store and their order, on a copy of the published store with sidecars written here from its runs. The browser tests
(test_ui.py, integration) click through the same views; these run in the fast tests, so a bug in the views fails
`make test-fast`."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow import MlflowClient

from scalestudy.store import SAVED_VIEW_TAG, load_runs
from scalestudy.ui.links import experiment_view, runs_view
from scalestudy.ui.server import publish_views

BASE = "http://127.0.0.1:5999"
# Runs per dataset, counted in the files: data rows of experiments/reference/tf-benchmarks-2017/tf_benchmarks_2017.csv
# (207), of horovod-docs/claims.csv and malik-2018/claims.csv (3 each).
COUNTS = {"tf-benchmarks-2017": 207, "horovod-docs": 3, "malik-2018": 3}


def sidecar(folder: Path, kind: str, name: str, run_ids: list[str], **more) -> Path:
    path = folder / f"{kind}s" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({kind: name, "mlflow_runs": [{"run_id": r} for r in run_ids], **more}))
    return path


def saved_views(uri: str) -> dict[str, dict[str, str]]:
    """{experiment name: {view key: tag value}} as the store holds them."""
    client = MlflowClient(tracking_uri=uri)
    return {
        e.name: {k[len(SAVED_VIEW_TAG) :]: v for k, v in e.tags.items() if k.startswith(SAVED_VIEW_TAG)}
        for e in client.search_experiments()
    }


def test_views_of_each_experiment_and_each_sidecar(store_copy, tmp_path):
    runs = load_runs(store_copy)
    ids = {e: sorted(runs.loc[runs.experiment == e, "run_id"]) for e in COUNTS}
    eid = dict(zip(runs.experiment, runs.experiment_id.astype(str)))
    paper = tmp_path / "paper"
    fig3 = ids["tf-benchmarks-2017"][:2]
    mixed = [ids["horovod-docs"][0], ids["tf-benchmarks-2017"][5]]
    sidecar(paper, "figure", "figure-10", fig3[:1], title="ten")  # after figure-3 though "10" < "3" as text
    sidecar(paper, "figure", "figure-3", fig3 + fig3[:1], title="P100 against K80")  # a run listed twice
    sidecar(paper, "table", "table-2", mixed)
    stale = sidecar(paper, "figure", "figure-5", [fig3[0], "f" * 32])
    (paper / "figures" / "notes.json").write_text(json.dumps({"note": "not a sidecar"}))
    (paper / "figures" / "broken.json").write_text("{")

    lines = publish_views(store_copy, paper, BASE)

    view3 = runs_view(
        "figure-3", [(r, eid["tf-benchmarks-2017"], "tf-benchmarks-2017") for r in fig3], "P100 against K80"
    )
    view10 = runs_view("figure-10", [(fig3[0], eid["tf-benchmarks-2017"], "tf-benchmarks-2017")], "ten")
    table2 = runs_view("table-2", [(r, eid[runs.set_index("run_id").loc[r, "experiment"]],
                                    runs.set_index("run_id").loc[r, "experiment"]) for r in mixed])  # fmt: skip
    every = experiment_view("0")
    assert lines[0] == (
        "Each experiment's runs (columns model, framework, workers, device, data, batch_per_worker, platform, "
        "throughput_total, efficiency_published, time_work_s, time_per_epoch_s, memory_peak_mb, where its runs have "
        "them):"
    )
    head = next(i for i, line in enumerate(lines) if line.startswith("The runs behind each figure"))
    per_experiment = {line.split()[0]: line for line in lines[1:head]}
    assert len(per_experiment) == runs["experiment"].nunique()  # one line per experiment of the store
    for experiment, n in COUNTS.items():
        link = (
            f"{BASE}/#/experiments/{eid[experiment]}/runs?workflowType=machine_learning&viewStateShareKey={every.key}"
        )
        assert per_experiment[experiment] == f"  {experiment:<22} {n:>4} runs  {link}"
    assert (
        lines[head]
        == f"The runs behind each figure and table (the run ids in its sidecar, {paper}/figures|tables/NAME.json):"
    )
    assert lines[head + 1 :] == [
        f"  {'figure-3':<22}    2 runs  {BASE}/{view3.link}",
        f"  {'figure-5':<22} {stale}: 1 of its 2 runs are not in this store (built from another store?): "
        "rebuild it with `make figure-5`",
        f"  {'figure-10':<22}    1 runs  {BASE}/{view10.link}",
        f"  {'table-2':<22}    2 runs  {BASE}/{table2.link}",
    ]

    saved = saved_views(store_copy)
    # every experiment holds its all-runs view, first in the menu (place 0); a figure's view is saved in each
    # experiment its runs come from, at its place in the list (figure-3: 1, figure-5 skipped at 2, figure-10: 3...)
    assert saved["malik-2018"] == {every.key: every.tag_value(0)}
    wanted = {every.key: every.tag_value(0), view3.key: view3.tag_value(1), view10.key: view10.tag_value(3)}
    assert saved["tf-benchmarks-2017"] == {**wanted, table2.key: table2.tag_value(4)}
    assert saved["horovod-docs"] == {every.key: every.tag_value(0), table2.key: table2.tag_value(4)}

    # the same again writes nothing new; a sidecar gone takes its view away, a user's own view stays
    MlflowClient(tracking_uri=store_copy).set_experiment_tag(eid["malik-2018"], SAVED_VIEW_TAG + "mine", "{}")
    (paper / "tables" / "table-2.json").unlink()
    publish_views(store_copy, paper, BASE)
    after = saved_views(store_copy)
    assert after["horovod-docs"] == {every.key: every.tag_value(0)}
    assert after["malik-2018"] == {every.key: every.tag_value(0), "mine": "{}"}
    assert after["tf-benchmarks-2017"] == wanted


def test_a_sidecar_with_another_link_says_so_and_no_sidecars_says_how_to_build_them(store_copy, tmp_path):
    runs = load_runs(store_copy)
    one = sorted(runs.loc[runs.experiment == "malik-2018", "run_id"])[:1]
    view = runs_view("figure-9", [(one[0], str(runs.set_index("run_id").loc[one[0], "experiment_id"]), "malik-2018")])
    paper = tmp_path / "paper"
    path = sidecar(paper, "figure", "figure-9", one, mlflow_ui={"link": "#/experiments/99/runs"})
    assert publish_views(store_copy, paper, BASE)[-1] == (
        f"  {'figure-9':<22}    1 runs  {BASE}/{view.link}  ({path} has another link: rebuild it with `make figure-9`)"
    )
    path.write_text(
        json.dumps({"figure": "figure-9", "mlflow_runs": [{"run_id": one[0]}], "mlflow_ui": {"link": view.link}})
    )
    assert publish_views(store_copy, paper, BASE)[-1] == f"  {'figure-9':<22}    1 runs  {BASE}/{view.link}"
    empty = tmp_path / "nothing"
    assert publish_views(store_copy, empty, BASE)[-1] == (
        f"  none yet under {empty}: `make figures tables` builds them"
    )


def test_the_ui_shows_a_store_with_a_changed_run_and_skips_sidecars_without_a_name_or_a_run_list(store_copy, tmp_path):
    """A metric changed through MLflow's API after the import: the builder refuses the store (load_runs' seal check),
    the UI still shows every run it holds (it passes sealed=False). A JSON file under figures/ with runs but no name,
    or with a name but no list of runs, is no sidecar."""
    import pytest

    from scalestudy.store import StoreError

    runs = load_runs(store_copy)
    changed = sorted(runs.loc[runs.experiment == "malik-2018", "run_id"])[0]
    MlflowClient(tracking_uri=store_copy).log_metric(changed, "throughput_total", 1.0)
    with pytest.raises(StoreError):
        load_runs(store_copy)
    paper = tmp_path / "paper"
    (paper / "figures").mkdir(parents=True)
    (paper / "figures" / "nameless.json").write_text(json.dumps({"mlflow_runs": [{"run_id": changed}]}))
    (paper / "figures" / "figure-7.json").write_text(json.dumps({"figure": "figure-7", "mlflow_runs": "all"}))
    lines = publish_views(store_copy, paper, BASE)
    assert any(line.startswith(f"  {'malik-2018':<22}    3 runs  {BASE}/") for line in lines)
    assert lines[-1] == f"  none yet under {paper}: `make figures tables` builds them"
