"""What build_figure writes, file by file, against values written out by hand: the PDF's and the PNG's metadata
(the title, the commit, the source and the run ids a reader finds with `pdfinfo`), the PDF's fonts, the PNG's
resolution, the sidecar's keys, the caption and the warnings of a figure with a problem."""

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from pdfminer.pdfdocument import PDFDocument
from pdfminer.pdfparser import PDFParser
from PIL import Image
from test_atomic_writes import tiny_figure

from scalestudy.paper import figures
from scalestudy.paper.style import PRINT_WIDTH_IN

DERIVE = {"_target_": "scalestudy.derive.scaling", "group": ["experiment"]}


def spec_and_runs(source: str) -> tuple[dict, pd.DataFrame]:
    """tests/test_atomic_writes.py's two-run figure of `source`'s runs on CPUs, with a measured title, a caption that
    prints literally and a derive step; the runs in reverse order (the files list them sorted)."""
    spec, runs = tiny_figure("Throughput")
    spec.update(measured_title="Measured throughput", caption="over $N$ GPUs", runs={source: {"experiment": "e"}},
                derive=DERIVE)  # fmt: skip
    return spec, runs.iloc[::-1].reset_index(drop=True).assign(source=source, device="cpu")


def pdf_info(path) -> dict[str, str]:
    with open(path, "rb") as handle:
        info = PDFDocument(PDFParser(handle)).info[0]
    return {key: value.decode() if isinstance(value, bytes) else value for key, value in info.items()}


@pytest.fixture
def published(tmp_path, capsys):
    spec, runs = spec_and_runs("published")
    before = plt.get_fignums()  # figures other tests of the session left open
    paths = figures.build_figure(spec, runs, source="published", out_dir=tmp_path, commit="c1")
    assert plt.get_fignums() == before  # the build closed the figure it drew
    return paths, capsys.readouterr().err


def test_the_pdf_names_the_figure_its_commit_source_and_runs_and_nothing_else(published):
    (pdf, *_), _ = published
    assert pdf_info(pdf) == {
        "Title": "figure-t: Throughput",
        "Creator": "scalestudy (make figure-t)",
        "Subject": "git commit c1; source=published; 2 MLflow runs",
        "Keywords": "mlflow-run-ids: r1 r2",
    }  # no Producer (matplotlib's version) and no CreationDate: a rebuild of the same runs is the same file
    data = pdf.read_bytes()
    # the style's pdf.fonttype 42: TrueType outlines (FontFile2), text stays text; the default is Type 3
    assert b"/FontFile2" in data and b"/Subtype /Type3" not in data


def test_the_png_has_the_same_title_and_description_at_200_dpi(published):
    (_, png, *_), _ = published
    with Image.open(png) as image:
        info, width = image.info, image.size[0]
    assert info["Title"] == "figure-t: Throughput"
    assert info["Description"] == "git commit c1; source=published; 2 MLflow runs"
    assert "Software" not in info  # matplotlib's version would make rebuilds differ
    assert info["dpi"] == pytest.approx((200, 200), abs=0.01)
    assert width == round(PRINT_WIDTH_IN * 200)


def test_the_sidecar_keeps_the_config_the_runs_and_the_ui_link(published):
    (_, _, sidecar, _), _ = published
    data = json.loads(sidecar.read_text())
    assert data["figure"] == "figure-t" and data["title"] == "Throughput"
    assert data["git_commit"] == "c1" and data["source"] == "published"
    assert data["runs"] == {"published": {"experiment": "e"}}
    assert data["derive"] == DERIVE
    assert [run["run_id"] for run in data["mlflow_runs"]] == ["r1", "r2"]
    assert data["mlflow_ui"]["saved_view"]["name"] == "figure-t · 2 runs · Throughput"
    assert sorted(data["mlflow_ui"]["saved_view"]) == ["experiment_ids", "key", "name"]
    assert data["mlflow_ui"]["saved_view"]["experiment_ids"] == ["1"] and data["mlflow_ui"]["saved_view"]["key"]


def test_the_caption_and_a_problem_of_it_are_written_and_warned(published):
    (*_, sidecar, caption), err = published
    assert caption.read_text() == (
        "% figure-t: built from conf/figure/figure-t.yaml by `make figure-t`\n"
        "\\caption[Throughput]{\\textbf{Throughput.} over \\$N\\$ GPUs Runs: 2 MLflow runs (published) of "
        "experiment(s) e; their ids are in figures/figure-t.json.}\n"
    )
    problem = "caption: '\\\\$' prints literally"
    assert problem in json.loads(sidecar.read_text())["problems"]
    assert f"warning: figure-t: {problem}\n" in err


def test_a_measured_figure_has_the_measured_title_and_caption(tmp_path):
    spec, runs = spec_and_runs("measured")
    pdf, _, sidecar, caption = figures.build_figure(spec, runs, source="measured", out_dir=tmp_path, commit="c2")
    assert pdf_info(pdf)["Title"] == "figure-t: Measured throughput"
    assert json.loads(sidecar.read_text())["title"] == "Measured throughput"
    assert caption.read_text().splitlines()[1] == (
        "\\caption[Measured throughput]{\\textbf{Measured throughput.} Measured runs (2): device cpu. Runs: 2 MLflow "
        "runs (measured) of experiment(s) e; their ids are in figures/figure-t.json.}"
    )


def test_a_draw_that_does_not_exist_is_an_error_naming_the_config_key(tmp_path):
    spec, runs = spec_and_runs("published")
    spec["draw"] = {"_target_": "scalestudy.paper.lines.no_such_draw"}
    with pytest.raises(ValueError, match=r"conf/figure/figure-t\.yaml draw"):
        figures.build_figure(spec, runs, source="published", out_dir=tmp_path, commit="c1")
    assert list(tmp_path.iterdir()) == []
