"""The figure builder, run as a user runs it (`python -m scalestudy.paper ...`) on a real imported store."""

import json
import shutil

import pytest
import yaml
from helpers import REPO, run_here, run_module

from scalestudy.store import load_runs


def build(uri, out_dir, *args, check=True):
    return run_module("scalestudy.paper", *args, f"out_dir={out_dir}", uri=uri, check=check)


def build_here(uri, out_dir, *args, monkeypatch, capsys) -> tuple[int, str]:
    """The same command in this process (helpers.run_here): its exit status and stderr."""
    proc = run_here("scalestudy.paper", *args, f"out_dir={out_dir}", uri=uri, monkeypatch=monkeypatch, capsys=capsys)
    return proc.returncode, proc.stderr


@pytest.fixture(scope="module")
def figures_dir(published_figures):
    return published_figures["dir"]  # every figure, built once per session (conftest.published_figures)


def test_figure3_files_and_the_runs_behind_them(figures_dir, published_store):
    for ext in ("pdf", "png", "json"):
        assert (figures_dir / f"figure-3.{ext}").stat().st_size > 1000
    sidecar = json.loads((figures_dir / "figure-3.json").read_text())
    runs = load_runs(published_store)
    expected = runs[
        (runs.experiment == "tf-benchmarks-2017")
        & runs.platform.isin(["nvidia-dgx-1", "gce-n1-standard-32-k80x8"])
        & runs.model.isin(["inception3", "resnet50"])
        & runs.batch_per_worker.isin([32, 64])
    ]
    assert len(expected) == 64  # 2 models x 2 data x 2 batches x 4 GPU counts x 2 machines
    assert sorted(r["run_id"] for r in sidecar["mlflow_runs"]) == sorted(expected.run_id)
    assert sidecar["git_commit"] and sidecar["source"] == "published"
    # the link to exactly these runs in MLflow's UI, with this store's experiment id (python -m scalestudy.ui
    # saves the view it names; tests/test_ui.py opens it)
    experiment_id = expected.experiment_id.iloc[0]
    link = sidecar["mlflow_ui"]["link"]
    assert link.startswith(
        f"#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey=figure-3-"
    )
    assert all(run_id in sidecar["mlflow_ui"]["search_link"] for run_id in expected.run_id)
    pdf = (figures_dir / "figure-3.pdf").read_bytes()
    assert sidecar["git_commit"].encode() in pdf
    assert all(run_id.encode() in pdf for run_id in expected.run_id)


def test_rebuild_from_the_same_store_gives_the_same_files(figures_dir, published_store, tmp_path):
    # figure-3 alone, against the session's bulk build of every figure: the same bytes
    build(published_store, tmp_path, "figure-3")
    for ext in ("pdf", "png", "json"):
        assert (tmp_path / "figures" / f"figure-3.{ext}").read_bytes() == (figures_dir / f"figure-3.{ext}").read_bytes()


def test_filter_matching_nothing_fails_and_keeps_the_previous_file(
    figures_dir, published_store, tmp_path, monkeypatch, capsys
):
    (tmp_path / "figures").mkdir()
    for ext in ("pdf", "png", "json", "caption.tex"):  # the previous build's files
        shutil.copyfile(figures_dir / f"figure-3.{ext}", tmp_path / "figures" / f"figure-3.{ext}")
    before = {p.name: p.read_bytes() for p in (tmp_path / "figures").iterdir()}
    status, err = build_here(published_store, tmp_path, "figure-3", "figure.runs.published.model=[lenet]",
                             monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert status != 0
    assert "figure figure-3" in err and "lenet" in err
    assert {p.name: p.read_bytes() for p in (tmp_path / "figures").iterdir()} == before  # no temp files left


def test_source_without_a_filter_is_an_error(published_store, tmp_path, monkeypatch, capsys):
    status, err = build_here(published_store, tmp_path, "figure-3", "source=measured", monkeypatch=monkeypatch,
                             capsys=capsys)  # fmt: skip
    assert status != 0 and "source=measured" in err


def test_every_figure_builds_in_one_query(published_figures):
    stdout, stderr, folder = published_figures["stdout"], published_figures["stderr"], published_figures["dir"]
    configs = {p.stem: yaml.safe_load(p.read_text()) for p in (REPO / "conf/figure").glob("figure-*.yaml")}
    names = sorted(name for name, spec in configs.items() if spec["runs"].get("published"))
    measured_only = sorted(set(configs) - set(names))  # e.g. figure-9: measured here, no published runs
    assert len(names) >= 7
    for name in measured_only:
        assert f"{name}: skipped" in stdout and not (folder / f"{name}.json").exists()
    for name in names:
        sidecar = json.loads((folder / f"{name}.json").read_text())
        assert sidecar["mlflow_runs"] and sidecar["points"], name
        assert (folder / f"{name}.png").stat().st_size > 1000
        caption = (folder / f"{name}.caption.tex").read_text()
        assert caption.count("\\caption[") == 1 and f"figures/{name}.json" in caption
    assert f"built {len(names)} of {len(configs)} targets" in stderr


def test_a_series_has_one_colour_in_every_panel():
    """source=all: a model with published runs only must not give `published` the colour `measured` has elsewhere."""
    import pandas as pd

    from scalestudy.paper.figures import draw_lines

    # `protocol` is a column only the published runs have (as in figure 6): its label part is left out, not "nan".
    rows = [
        {
            "model": m,
            "source": s,
            "workers": w,
            "speedup_speed": float(w),
            "protocol": "plain" if s == "published" else float("nan"),
        }
        for m, sources in (("inception4", ["published"]), ("vgg19", ["measured", "published"]))
        for s in sources
        for w in (1, 2)
    ]
    spec = {
        "name": "figure-x",
        "title": "x",
        "plot": {"x": "workers", "hue": ["protocol"], "facet": "model", "panels": [{"y": ["speedup_speed"]}]},
    }
    fig, _ = draw_lines(spec, pd.DataFrame(rows), pd.DataFrame(rows))
    colour = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            colour.setdefault(line.get_label(), set()).add(line.get_color())
    # a series under another is drawn again on top, dashed, in its own colour: "(on measured)"
    covered = colour.pop("plain · published (on measured)")
    assert covered == colour["plain · published"]
    colour = {"measured": colour["measured"], "published": colour["plain · published"], **colour}
    assert set(colour) == {"measured", "published", "plain · published"}
    assert all(len(c) == 1 for c in colour.values()), colour
    assert colour["measured"] != colour["published"]


def test_measured_runs_get_a_title_and_note_true_of_them():
    import pandas as pd

    from scalestudy.paper.figures import for_source

    spec = yaml_figure("figure-1")
    runs = pd.DataFrame(
        [
            {"source": "published", "device": "V100", "data": "cifar10", "batch_per_worker": 64, "platform": "hacksa"},
            {"source": "measured", "device": "cpu", "data": "synthetic-75", "batch_per_worker": 8, "platform": "vm"},
            {"source": "measured", "device": "cpu", "data": "synthetic-75", "batch_per_worker": 16, "platform": "vm"},
        ]
    )
    assert for_source(spec, runs, "published") is spec  # the paper's figures are exactly as configured
    measured = for_source(spec, runs[runs.source == "measured"], "measured")
    assert measured["title"] == spec["measured_title"] and "V100" not in measured["title"]
    said = "Measured runs (2): device cpu; data synthetic-75; images per rank and step 8, 16; platform vm."
    assert measured["caption"] == said and "V100" not in measured["caption"]
    both = for_source(spec, runs, "all")
    assert both["title"] == f"{spec['measured_title']}: published and measured runs"
    assert both["caption"] == f"Published: {spec['caption']} {said}"
    # a figure without a measured title or a caption: its title, and nothing published to say
    bare = {k: v for k, v in spec.items() if k not in ("measured_title", "caption")}
    assert for_source(bare, runs, "measured")["title"] == spec["title"]
    assert for_source(bare, runs, "all") == {**bare, "title": f"{spec['title']}: published and measured runs",
                                             "caption": f"Published:  {said}"}  # fmt: skip


def yaml_figure(name: str) -> dict:
    import yaml

    return yaml.safe_load((REPO / "conf" / "figure" / f"{name}.yaml").read_text())


def test_figure8_points_by_hand(published_store, figures_dir):
    """Figure 8: speedups by speed of seed 002's runs: the tf_cnn_benchmarks tables, the Keras logs (finished runs
    only) and the variable-update modes of the az-2x-m60 trace; values from measurements.csv and the logs."""
    sidecar = json.loads((figures_dir / "figure-8.json").read_text())
    points = sidecar["points"]
    point = {(p["panel"], p["series"], p.get("workers", p.get("variable_update"))): p["value"] for p in points}
    # the 7gforce tf_cnn_benchmarks table (measurements.md:174, :177): 351.98 / 78.44
    assert point[("tf_cnn, PS on CPU (tables):\nbatch per GPU fixed", "7gforce · Inception-v3", 6)] == pytest.approx(
        351.98 / 78.44
    )
    # the 7gforce Keras log: kuza55, Inception-v3, 4 GPUs, PS on the CPU (line 265) over 1 GPU (line 54)
    assert point[("Keras, Inception-v3:\nglobal batch fixed", "7gforce · kuza55 · PS on CPU", 4)] == pytest.approx(
        60.38 / 39.07
    )
    # kuza55 failed at 6 GPUs: no point; avolkov1 did not
    keras6 = {p["series"] for p in sidecar["points"] if p["panel"].startswith("Keras") and p.get("workers") == 6}
    assert keras6 == {"7gforce · avolkov1 · PS on CPU", "7gforce · avolkov1 · PS on GPU"}
    # the trace's modes: 2 GPUs over its 1-GPU run (line 54), e.g. replicated without NCCL (line 272)
    modes = {p["variable_update"]: p["value"] for p in sidecar["points"] if p["panel"] == "tf_cnn modes (log)"}
    assert modes["replicated (gpu, no nccl)"] == pytest.approx(95.33 / 47.49) and len(modes) == 5
    assert {p["y"] for p in sidecar["points"]} == {"speedup_speed"}
    # the runs behind it: 12 table rows (7gforce 1, 2, 4, 6 and az-2x-m60 1, 2 GPUs, two models) and the 42
    # finished log runs; the caption names the distribution strategies
    runs = load_runs(published_store).set_index("run_id")
    drawn = runs.loc[[r["run_id"] for r in sidecar["mlflow_runs"]]]
    assert (drawn["status"] == "FINISHED").all() and len(drawn) == 54
    assert (drawn["record"] == "log").sum() == 42
    caption = (figures_dir / "figure-8.caption.tex").read_text()
    assert "parameter server" in caption and "replicated" in caption and "Horovod" in caption


# --- The figure checks (scalestudy.paper.checks): every built figure passes them, and each catches its fault ---


def test_every_built_figure_passes_the_figure_checks(published_figures):
    folder = published_figures["dir"]
    sidecars = sorted(folder.glob("figure-*.json"))
    assert len(sidecars) >= 8
    for path in sidecars:
        assert json.loads(path.read_text())["problems"] == [], path.name
    assert "warning:" not in published_figures["stderr"]


def _checked(draw, legend=False):
    """Problems of a small figure drawn by `draw(ax)` at the paper's style, saved as the builder saves it."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scalestudy.paper.checks import figure_problems
    from scalestudy.paper.style import STYLE

    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
        draw(ax)
        if legend:
            fig.legend(loc="outside lower center")
        fig.savefig(io.BytesIO(), format="png", dpi=200)
        problems = figure_problems(fig)
        plt.close(fig)
    return problems


def test_the_check_finds_a_marker_cut_by_the_axes():
    def cut(ax):  # figure 6's fault: a hollow marker at the bottom of a log axis, on the frame
        ax.plot([1, 16], [160, 30.4], marker="^", markersize=7, label="a")
        ax.set_yscale("log")
        ax.set_ylim(30.4, 200)

    problems = _checked(cut)
    assert len(problems) == 1 and "cut by the axes" in problems[0] and "(16, 30.4)" in problems[0]
    assert _checked(lambda ax: ax.plot([1, 16], [160, 30.4], marker="^", markersize=7)) == []


def test_the_check_finds_data_squeezed_into_a_corner():
    def squeezed(ax):  # figure 8's fault: the ideal line to 6 sets the range, the data stay below 1.7
        ax.plot([1, 2, 4], [1, 1.6, 1.2], marker="o")
        ax.plot([1, 6], [1, 6], color="grey")

    problems = _checked(squeezed)
    assert len(problems) == 1 and "of the y range" in problems[0]
    assert _checked(lambda ax: ax.plot([1, 2, 4], [1, 1.6, 1.2], marker="o")) == []

    def fixed(ax):  # a range the config fixes on purpose (figure 8's 2-GPU panel) is the config's choice
        ax.plot([0, 1], [1.99, 2.01], marker="o")
        ax.set_ylim(1, 2.2)

    assert _checked(fixed) == []


def test_the_check_finds_one_colour_for_two_legend_entries():
    def grey_twice(ax):  # figure 8's fault: grey is the ideal and a series
        ax.plot([1, 2], [1, 2], color="grey", label="ideal")
        ax.plot([1, 2], [1, 1.5], color=(0.498, 0.498, 0.498), marker="o", linestyle="--", label="kuza55")
        ax.plot([1, 2], [1, 1.2], color="tab:blue", marker="s", label="avolkov1")

    problems = _checked(grey_twice, legend=True)
    assert problems == ["legend: 'ideal' and 'kuza55' have one colour"]

    def one_series_two_styles(ax):  # figure 6's design: one colour per model, solid and dashed per protocol
        ax.plot([1, 2], [1, 2], color="tab:green", marker="^", label="ResNet-50 · plain")
        ax.plot([1, 2], [1, 1.8], color="tab:green", marker="^", linestyle="--", label="ResNet-50 · reduced")
        ax.plot([1, 2], [1, 1.2], color="grey", label="ideal")

    assert _checked(one_series_two_styles, legend=True) == []

    def drawn_alike(ax):
        ax.plot([1, 2], [1, 2], color="tab:green", marker="^", label="a")
        ax.plot([1, 2], [1, 1.8], color="tab:green", marker="^", label="b")
        ax.plot([1, 2], [1, 1.2], color="tab:blue", marker="s", label="c")

    assert _checked(drawn_alike, legend=True) == ["legend: 'a' and 'b' have one colour"]


def test_the_check_finds_latex_a_caption_prints_literally():
    import pandas as pd

    from scalestudy.paper.checks import caption_problems
    from scalestudy.paper.figures import caption_tex

    runs = pd.DataFrame({"experiment": ["keras-multi-gpu-2017"]})
    broken = {"name": "figure-8", "title": "x", "caption": r"speedup at $N$ GPUs of tf\_cnn\_benchmarks"}
    problems = caption_problems(caption_tex(broken, runs, "published"))
    assert problems == [
        "caption: '\\\\$' prints literally",
        "caption: '\\\\$' prints literally",
        "caption: '\\\\textbackslash' prints literally",
        "caption: '\\\\textbackslash' prints literally",
    ]
    plain = {"name": "figure-8", "title": "x", "caption": "speedup at N GPUs of tf_cnn_benchmarks, 100 %"}
    assert caption_problems(caption_tex(plain, runs, "published")) == []


# --- Provenance across stores (issue 24, finding 7) ---


def test_figure4_lists_only_the_runs_of_its_ratios_with_their_import_keys(published_figures, published_store):
    """A run that pairs with no other gives no ratio, so it is not behind the figure; every run carries its
    import key, which a reader's store shares though its run ids differ."""
    runs = load_runs(published_store)
    tf = runs[(runs.experiment == "tf-benchmarks-2017") & runs.model.isin(["inception3", "resnet50"])]
    key = ["platform", "device", "data", "batch_per_worker", "workers", "framework"]
    both = tf[tf.model == "resnet50"].merge(tf[tf.model == "inception3"], on=key)
    like = both[both.variable_update_x.fillna("-") == both.variable_update_y.fillna("-")]
    expected = set(like.run_id_x) | set(like.run_id_y)
    listed = json.loads((published_figures["dir"] / "figure-4.json").read_text())["mlflow_runs"]
    assert {r["run_id"] for r in listed} == expected and len(expected) == 2 * len(like) < len(tf)
    keys = tf.set_index("run_id")["import_key"]
    assert all(r["import_key"] == keys[r["run_id"]] for r in listed)
    caption = (published_figures["dir"] / "figure-4.caption.tex").read_text()
    assert f"Runs: {len(expected)} MLflow runs" in caption


def test_the_ui_finds_a_sidecars_runs_by_import_key_in_another_store(published_figures, store_copy, tmp_path):
    """The paper's sidecars name the run ids of the store they were built from; a reader's store has other ids
    for the same imported runs: the UI links resolve them by experiment and import key."""
    from scalestudy.ui.server import publish_views

    paper = tmp_path / "paper"
    (paper / "figures").mkdir(parents=True)
    sidecar = json.loads((published_figures["dir"] / "figure-3.json").read_text())
    for run in sidecar["mlflow_runs"]:  # as another store would have numbered them
        run["run_id"] = "f" * 28 + run["run_id"][:4]
    (paper / "figures" / "figure-3.json").write_text(json.dumps(sidecar))
    lines = publish_views(store_copy, paper, "http://127.0.0.1:5000")
    (line,) = [x for x in lines if "figure-3" in x]
    assert "64 runs" in line and "not in this store" not in line
    for run in sidecar["mlflow_runs"]:  # a run without its key cannot be found
        run["import_key"] = None
    (paper / "figures" / "figure-3.json").write_text(json.dumps(sidecar))
    (line,) = [x for x in publish_views(store_copy, paper, "http://127.0.0.1:5000") if "figure-3" in x]
    assert "64 of its 64 runs are not in this store" in line
