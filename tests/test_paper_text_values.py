"""How numbers and names read in the paper (paper/formats.py) and the LaTeX environment its tables render in
(paper/latex.py), each output against a value worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from scalestudy.paper import formats
from scalestudy.paper.latex import environment, render


def test_labels_of_run_values():
    label = formats.label
    assert label("model", "resnet50") == "ResNet-50" and label("model", "mystery") == "mystery"
    assert label("framework", "mxnet") == "MXNet" and label("framework", "jax") == "jax"
    assert label("parameter_server", "cpu") == "PS on CPU" and label("parameter_server", "GPU") == "PS on GPU"
    assert label("parameter_server", "none") == "none"
    assert label("batch_per_worker", 64.0) == "batch 64" and label("batch_per_worker", "64") == "batch 64"
    assert label("batch_per_worker", "not stated") == "batch not stated"
    assert label("batch_per_worker", 2.5) == "batch 2.5"
    assert [label("workers", n) for n in (1, 2.0, "8")] == ["1 GPU", "2 GPUs", "8 GPUs"]
    assert label("workers", 1, unit="CPU ranks") == "1 rank" and label("workers", 4, unit="CPU ranks") == "4 ranks"
    assert label("workers", "many") == "many"  # not a whole number: as it is
    assert label("gpu", 3.0) == "3" and label("gpu", 3.5) == "3.5" and label("gpu", "P100") == "P100"
    assert label("gpu", None) == "None"


def test_whole_numbers_only():
    assert [formats._integral(v) for v in (64, 64.0, "64", "64.5", None, "x", float("nan"))] == [
        64, 64, 64, None, None, None, None
    ]  # fmt: skip


def test_each_number_format_by_hand():
    assert formats.fixed(12.345) == "12.35" and formats.fixed(12.345, 1) == "12.3" and formats.fixed(2.5, 0) == "2"
    assert formats.percent(0.9456) == "94.6" and formats.percent(0.9456, 2) == "94.56"
    assert formats.figs(0.0) == "0" and formats.figs(-0.0123456) == "-0.0123" and formats.figs(12345.6) == "12346"
    assert formats.figs(1.0) == "1.00" and formats.figs(9.999) == "10.00" and formats.figs(0.5, 2) == "0.50"
    assert formats.trim(2.0) == "2" and formats.trim(2.50) == "2.5" and formats.trim(0.004) == "0"
    assert formats.trim(1.23456, 3) == "1.235" and formats.trim(100.0, 0) == "100" and formats.trim(10.0) == "10"
    assert formats.missing(None) and formats.missing(float("nan")) and not formats.missing(0.0)
    assert not formats.missing("nan")  # text is not a missing number


def test_every_named_format():
    # each name's own digits, on one value: 1234.5678 (0.12345 for the percentages)
    expected = {"trim2": "1234.57", "figs3": "1235", "fixed0": "1235", "fixed1": "1234.6", "fixed2": "1234.57",
                "fixed3": "1234.568", "integer": "1235"}  # fmt: skip
    assert {name: formats.fmt(1234.5678, name) for name in expected} == expected
    assert [formats.fmt(0.12345, p) for p in ("percent2", "percent1", "percent0")] == ["12.35", "12.3", "12"]
    assert formats.fmt(None, "figs3") == "--"
    with pytest.raises(ValueError, match=r"unknown number format 'nope' \(known: trim2, figs3, fixed0, .*integer\)"):
        formats.fmt(1.0, "nope")


def test_a_rows_cells():
    assert formats.fmt_row([1.5, 2.25, None], "trim2") == ["1.50", "2.25", "--"]
    assert formats.fmt_row([3.0, 4.0], "trim2") == ["3", "4"]  # no decimals anywhere: none invented
    assert formats.fmt_row([3.0, 4.1], "trim2") == ["3.0", "4.1"]
    assert formats.fmt_row([1.2345, 2.0], "trim2") == ["1.23", "2.00"]  # at most 2 decimals, whatever the value has
    assert formats.fmt_row([None, None], "trim2") == ["--", "--"]
    assert formats.fmt_row([0.5, 0.123], "percent1") == ["50.0", "12.3"]  # other formats: cell by cell


TEMPLATE = (
    "((= a comment, gone =))\n"
    "  ((* for v, p in zip(values, shares) *))\n"
    "(((v | fixed))) & (((p | percent))) & (((v | figs))) & (((v | integer))) & (((v | trim))) & "
    "(((v | fmt('fixed1'))))\n"
    "  ((* endfor *))\n"
    "(((' & '.join(row | fmt_row('trim2'))))) | (((name | tex))) | (((raw))) | (((MISSING)))\n"
    "(((64 | label('batch_per_worker')))) | (((2 | label('workers')))) | ((('resnet50' | label('model')))) | "
    "((('vgg16' | label)))\n"
)


def test_the_environment_renders_its_delimiters_whitespace_and_every_filter(tmp_path):
    (tmp_path / "t.tex").write_text(TEMPLATE)
    text = (
        environment(tmp_path)
        .get_template("t.tex")
        .render(values=[1234.5678, 0.5], shares=[0.25, 1.0], row=[1.5, 2.25], name="a_b & 50%", raw="<&>")
    )
    # the comment and the block lines leave nothing (trim_blocks, lstrip_blocks); the last newline is kept; no
    # HTML escaping (autoescape off)
    assert text == (
        "1234.57 & 25.0 & 1235 & 1235 & 1234.57 & 1234.6\n"
        "0.50 & 100.0 & 0.500 & 0 & 0.5 & 0.5\n"
        "1.50 & 2.25 | a\\_b \\& 50\\% | <&> | --\n"
        "batch 64 | 2 GPUs | ResNet-50 | vgg16\n"
    )


def test_render_names_the_template_and_line_of_an_error(tmp_path):
    path = tmp_path / "t.tex"
    path.write_text("fine\n((( missing_name )))\n")
    with pytest.raises(ValueError, match=rf"^table 9: {path}:2: UndefinedError: 'missing_name' is undefined$"):
        render(path, "table 9")
    path.write_text("((( 'x' | fixed )))\n")  # a filter's own error (float('x')) has no template line of its own
    with pytest.raises(ValueError, match=rf"^table 9: {path}:1: ValueError: could not convert"):
        render(path, "table 9")
    path.write_text("((( a.b )))\n")
    assert render(path, "table 9", a={"b": 3}) == "3\n"
    with pytest.raises(ValueError, match=rf"^table 9: {path}:1: UndefinedError: "):
        render(path, "table 9", a={})


def test_render_without_a_line_to_name(tmp_path):
    path = tmp_path / "gone.tex"  # no such template: no line in it to name
    with pytest.raises(ValueError, match=rf"^table 9: {path}: TemplateNotFound: 'gone.tex' not found"):
        render(path, "table 9")
    syntax = tmp_path / "bad.tex"
    syntax.write_text("one\ntwo\n((* if *))\n")
    with pytest.raises(ValueError, match=rf"^table 9: {syntax}:3: TemplateSyntaxError: "):
        render(syntax, "table 9")


# ------------------------------------------------------------------------------------------------
# Which runs a figure or table uses (paper/selection.py)

RUNS = pd.DataFrame({
    "run_id": ["p1", "p2", "p3", "m1", "m2"], "source": ["published"] * 3 + ["measured"] * 2,
    "status": ["FINISHED", "FINISHED", "FAILED", "FINISHED", "FINISHED"], "model": ["a", "b", "a", "a", "b"],
    "batch_per_worker": [64, 64.0, 64, "64", 32], "experiment": ["e1", "e2", "e1", "m", "m"],
    "experiment_id": [1, 2, 1, 3, 3], "run_name": ["n1", "n2", "n3", "n4", "n5"],
    "import_key": ["k1", "k2", "k3", None, None],
}, index=[10, 11, 12, 13, 14])  # fmt: skip


def test_select_runs_by_source_filter_and_status():
    from scalestudy.paper.selection import select_runs

    chosen = select_runs(RUNS, {"published": {"model": "a"}, "measured": {"model": "a"}}, "published", "figure 9")
    assert list(chosen["run_id"]) == ["p1"] and list(chosen.index) == [0]  # FINISHED unless said; index anew
    assert list(chosen.columns) == list(RUNS.columns)  # the old index dropped, not kept as a column
    assert list(select_runs(RUNS, {"measured": {"model": "a"}}, "all", "f")["run_id"]) == ["m1"]  # after an empty one
    assert list(select_runs(RUNS, {"published": {"model": "a", "status": "FAILED"}}, "published", "f")["run_id"]) == [
        "p3"
    ]
    both = select_runs(RUNS, {"published": {"batch_per_worker": 64}, "measured": {"batch_per_worker": 64}}, "all", "f")
    assert list(both["run_id"]) == ["p1", "p2", "m1"]  # 64, 64.0 and "64" are one number; published first
    anyof = select_runs(RUNS, {"published": [{"model": "a"}, {"experiment": "e2"}]}, "all", "f")
    assert list(anyof["run_id"]) == ["p1", "p2"]  # a list of filters: runs matching any; no measured filter: skipped
    with pytest.raises(LookupError, match="no run matches"):  # without a source column no run is of a source
        select_runs(RUNS.drop(columns="source"), {"published": {}, "measured": {}}, "all", "f")


def test_select_runs_errors_name_what_and_source():
    from scalestudy.paper.selection import EmptySelection, NoRunsDeclared, select_runs

    with pytest.raises(ValueError, match=r"^figure 9: source='both'; choose published, measured or all$"):
        select_runs(RUNS, {"published": {}}, "both", "figure 9")
    with pytest.raises(NoRunsDeclared, match=r"^figure 9: declares no runs for source=measured \(its `runs.measured`"):
        select_runs(RUNS, {"published": {}}, "measured", "figure 9")
    with pytest.raises(NoRunsDeclared, match="source=published"):
        select_runs(RUNS, None, "published", "figure 9")
    nothing = r"^figure 9: no run matches the filter \{'published': \{'model': 'z'\}\} \(source=published\)$"
    with pytest.raises(EmptySelection, match=nothing):
        select_runs(RUNS, {"published": {"model": "z"}}, "published", "figure 9")
    with pytest.raises(EmptySelection, match=r"the filter \{'published': None, 'measured': None\} \(source=all\)"):
        select_runs(RUNS, {}, "all", "figure 9")


def test_the_runs_a_derived_table_names():
    from scalestudy.paper.selection import contributing

    chosen = RUNS.reset_index(drop=True)
    one = contributing(chosen, pd.DataFrame({"run_id": ["p2", "m1", "p2"], "speedup": [1.0, 2.0, 3.0]}))
    assert list(one["run_id"]) == ["p2", "m1"] and list(one.columns) == list(chosen.columns)
    assert list(one.index) == [0, 1]
    ratio = pd.DataFrame({"numerator_run_id": ["p1"], "denominator_run_id": ["m2"], "ratio": [0.5]})
    assert list(contributing(chosen, ratio)["run_id"]) == ["p1", "m2"]
    assert contributing(chosen, pd.DataFrame({"speedup": [1.0]})) is chosen  # names none: all of them


def test_the_sidecars_run_list_and_ui_link():
    from scalestudy.paper.selection import run_entries, ui_entry

    entries = run_entries(RUNS.iloc[[3, 1]], "model")
    assert entries == [
        {"run_id": "m1", "import_key": None, "run_name": "n4", "experiment": "m", "source": "measured", "model": "a"},
        {"run_id": "p2", "import_key": "k2", "run_name": "n2", "experiment": "e2", "source": "published",
         "model": "b"},
    ]  # sorted by run id; a measured run has no import key  # fmt: skip
    assert [e["import_key"] for e in run_entries(RUNS.drop(columns="import_key").iloc[:2])] == [None, None]
    entry = ui_entry("figure-9", RUNS.iloc[[1, 0]], "speedup")
    assert entry["saved_view"]["name"] == "figure-9 · 2 runs in e1, e2 · speedup"
    assert ui_entry("figure-9", RUNS.iloc[[0]])["saved_view"]["name"] == "figure-9 · 1 run"  # no title
    assert entry["saved_view"]["experiment_ids"] == ["1", "2"]
    assert entry["link"].startswith("#/compare-experiments/s?experiments=%5B%221%22%2C%222%22%5D&")
    assert "attributes.run_id%20IN%20%28%27p1%27%2C%20%27p2%27%29" in entry["search_link"]
