"""`make compare EXPERIMENT=mine` (issue 43): a user's real logs imported into `mine` (a tf_cnn_benchmarks trace
and a Keras log of rossumai/keras-multi-gpu, an MLPerf result), then figures 2 and 10 built beside the published
store with `compare=mine`. Every value of `mine` drawn is checked against throughput(N) / (N throughput(1))
worked out here from the store; the sidecar names the runs of `mine` drawn and not drawn; the title and caption
say what was drawn; the files go to compare/mine/, never into paper/."""

from __future__ import annotations

import json

import pytest
from helpers import run_here, shared_reference

from scalestudy.store import load_runs

REFERENCE = shared_reference("keras-multi-gpu-2017", "logs")
pytestmark = pytest.mark.skipif(REFERENCE is None, reason="no ../shared/reference beside the checkout")
LOGS = (
    ["keras-multi-gpu-2017/benchmark_batch_inception3_az-2xm-60.txt",
     "keras-multi-gpu-2017/benchmark_inception3_resnet50_results_7gforce.txt"]
)  # fmt: skip
MLPERF = "logs/mlperf"
# figure 10's grouping of a user's runs (derive.efficiency_at_scale's default) and figure 2's derive group plus
# the set-ups that differ among the user's runs (paper/compare.py)
FIG10_GROUP = ["model", "device", "data", "batch_per_worker", "variable_update", "platform"]
FIG2_GROUP = ["model", "framework", "device", "data", "batch_per_worker", "variable_update", "platform"]


@pytest.fixture(scope="module")
def mine_store(published_store, tmp_path_factory) -> str:
    """A copy of the published store with the user's logs imported into `mine` (once: the builds only read it)."""
    import shutil

    from scalestudy.ingest.__main__ import main as ingest

    folder = tmp_path_factory.mktemp("compare-store")
    shutil.copy(published_store[len("sqlite:///") :], folder / "store.db")
    uri = f"sqlite:///{folder / 'store.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        assert (
            ingest(["logs", *(str(REFERENCE / log) for log in LOGS), "--experiment", "mine", "--platform", "lab"]) == 0
        )
        assert ingest(["logs", str(REFERENCE / MLPERF), "--experiment", "mine"]) == 0
    return uri


@pytest.fixture
def mine(mine_store, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # compare/mine/ and paper/ relative to where the user runs the builder
    return mine_store


def by_hand(uri: str, group: list[str]) -> dict[str, float]:
    """run id -> efficiency by speed of each finished run of `mine` in a group holding a 1-GPU run and a
    multi-GPU run (the 1-GPU run: 1.0)."""
    runs = load_runs(uri)
    runs = runs[(runs.experiment == "mine") & (runs.status == "FINISHED")].copy()
    runs["key"] = runs[group].astype(str).agg("|".join, axis=1)
    out = {}
    for _, rows in runs.groupby("key"):
        ones = rows[rows.workers == 1]
        if len(ones) == 1 and (rows.workers > 1).any():
            base = float(ones.throughput_total.iloc[0])
            out |= {r.run_id: r.throughput_total / (r.workers * base) for r in rows.itertuples()}
    return out


def build(uri, monkeypatch, capsys, *args):
    return run_here("scalestudy.paper", *args, uri=uri, monkeypatch=monkeypatch, capsys=capsys)


def test_your_runs_are_drawn_beside_the_study_as_their_own_series(mine, monkeypatch, capsys, tmp_path):
    built = build(mine, monkeypatch, capsys, "figure-1", "figure-2", "figure-10", "compare=mine")
    assert built.returncode == 0, built.stderr
    folder = tmp_path / "compare" / "mine" / "figures"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"figure-{n}.{ext}" for n in (1, 2, 10) for ext in ("pdf", "png", "json", "caption.tex")
    )
    assert not (tmp_path / "paper").exists()  # the paper's folder is never written
    runs = load_runs(mine).set_index("run_id")
    n_mine = int(((runs.experiment == "mine") & (runs.status == "FINISHED")).sum())
    for name, group, series, x, per in (("figure-10", FIG10_GROUP, "yours: mine, by speed", "accelerators", 1),
                                        ("figure-2", FIG2_GROUP, "Inception-v3 · yours: mine", "workers", 1),
                                        ("figure-1", FIG2_GROUP, "yours: mine", "workers", 0)):  # fmt: skip
        expected = by_hand(mine, group)
        # figure 1 draws the speedup: the efficiency times the GPUs
        values = {i: v * (1 if per else runs.loc[i, "workers"]) for i, v in expected.items()}
        sidecar = json.loads((folder / f"{name}.json").read_text())
        assert sidecar["compare"]["experiment"] == "mine"
        assert sidecar["compare"]["drawn"] == sorted(expected)
        assert len(sidecar["compare"]["drawn"]) + len(sidecar["compare"]["not_drawn"]) == n_mine
        assert set(sidecar["compare"]["drawn"]) <= {r["run_id"] for r in sidecar["mlflow_runs"]}
        drawn = sorted((p[x], round(p["value"], 12)) for p in sidecar["points"] if "yours: mine" in p["series"])
        assert {p["series"] for p in sidecar["points"] if "yours: mine" in p["series"]} == {series}
        assert drawn == sorted((runs.loc[i, "workers"], round(v, 12)) for i, v in values.items())
        caption = (folder / f"{name}.caption.tex").read_text()
        assert f"experiment mine: {len(expected)} of its {n_mine} finished runs" in " ".join(caption.split())
        assert sidecar["title"].endswith(", beside mine") and "(" not in sidecar["title"]
    # the M60 trace's parameter server on the GPU at 1 and 2 GPUs: 94.72 / (2 x 47.49) = 0.99726...
    assert pytest.approx(94.72 / (2 * 47.49)) in by_hand(mine, FIG10_GROUP).values()


def test_a_figure_none_of_your_runs_fits_is_skipped_and_tables_are_not_compared(mine, monkeypatch, capsys, tmp_path):
    built = build(mine, monkeypatch, capsys, "figure-9", "table-1", "compare=mine")
    assert built.returncode == 0, built.stderr
    assert (
        "figure-9: skipped, figure figure-9: none of the 31 runs of experiment mine is of the kind it draws"
        in built.stdout
    )
    assert "table-1: skipped, compare=mine draws figures; table-1 is a table" in built.stdout
    assert not (tmp_path / "compare").exists() or not any((tmp_path / "compare").rglob("*.pdf"))


def test_compare_refuses_the_papers_folder_and_an_experiment_without_runs(mine, monkeypatch, capsys, tmp_path):
    inside = build(mine, monkeypatch, capsys, "figure-2", "compare=mine", "out_dir=paper/mine")
    assert inside.returncode != 0
    assert "out_dir=paper/mine: compare=mine writes beside the paper, not into paper/" in inside.stderr
    none = build(mine, monkeypatch, capsys, "figure-2", "figure-10", "compare=theirs")
    assert none.returncode == 2 and none.stderr == (
        "error: compare=theirs: no finished run in experiment theirs (import yours: python -m scalestudy.ingest logs "
        "PATH... --experiment theirs); nothing was written\n"
    )  # once, not once per figure
    assert not (tmp_path / "paper").exists() and not (tmp_path / "compare").exists()


def test_your_logs_are_tagged_yours_not_published(mine):
    runs = load_runs(mine)
    assert set(runs.loc[runs.experiment == "mine", "source"]) == {"yours"}
    assert "yours" not in set(runs.loc[runs.experiment != "mine", "source"])
