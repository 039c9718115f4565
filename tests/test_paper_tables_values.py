"""paper/tables.py's pure parts in the test's own process: the multi-level column headers and table 1's marks of
the sheet's own values where they show differently from the recomputed ones, against values written out here."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalestudy.paper.tables import _mark_sheet_differences, header_levels, render_numbers


def test_header_levels_by_hand():
    columns = [{"model": "vgg16", "workers": 2}, {"model": "vgg16", "workers": 4},
               {"model": "resnet50", "workers": 4}, {"model": "vgg16", "workers": 4}]  # fmt: skip
    assert header_levels(columns, ["model", "workers"]) == [
        # equal models next to each other share a span; the later VGG-16 is a span of its own
        [{"text": "VGG-16", "start": 1, "end": 2}, {"text": "ResNet-50", "start": 3, "end": 3},
         {"text": "VGG-16", "start": 4, "end": 4}],
        # the same count under another model is another span: the prefix is (model, workers)
        [{"text": "2 GPUs", "start": 1, "end": 1}, {"text": "4 GPUs", "start": 2, "end": 2},
         {"text": "4 GPUs", "start": 3, "end": 3}, {"text": "4 GPUs", "start": 4, "end": 4}],
    ]  # fmt: skip
    assert header_levels(columns[:2], ["model"]) == [[{"text": "VGG-16", "start": 1, "end": 2}]]
    assert header_levels([], ["model"]) == [[]]


def test_sheet_values_kept_only_where_they_read_differently():
    data = {"panels": [
        {"key": "speed", "overall_median": 1.004, "rows": [
            {"values": [1.001, 2.5], "median": 1.75},
            {"values": [3.0, None], "median": 3.0},
        ], "sheet": {"overall_median": 1.0, "rows": [
            {"values": [1.004, 2.6], "median": 1.751},  # 1.00 = 1.00 at 2 decimals; 2.50 != 2.60
            {"values": [3.0, 4.0], "median": 3.2},
        ]}},
        {"key": "speed", "overall_median": 2.0, "rows": [{"values": [1.0], "median": 1.0}]},  # no sheet: no marks
    ]}  # fmt: skip
    _mark_sheet_differences(data, {"speed": "fixed2"})
    first, second = data["panels"]
    assert "sheet" not in first and "sheet" not in second  # taken out of the data the template sees
    assert [(r["sheet_values"], r["sheet_median"]) for r in first["rows"]] == [([None, 2.6], None), ([None, 4.0], 3.2)]
    assert first["sheet_overall_median"] is None  # 1.00 either way
    assert second["rows"][0]["sheet_values"] == [None] and second["rows"][0]["sheet_median"] is None
    assert second["sheet_overall_median"] is None
    data["panels"][0]["sheet"] = {"overall_median": 1.1, "rows": [{"values": [1.001, 2.5], "median": 1.75}] * 2}
    _mark_sheet_differences(data, {"speed": "fixed2"})
    assert data["panels"][0]["sheet_overall_median"] == 1.1


def test_numbers_file_from_the_real_template_by_hand():
    """table-4-numbers.tex (render_numbers): a head naming the table and commit, one macro per number, formatted,
    a minus in math mode, a missing value as the template's dash; the file ends in exactly one newline."""
    template = Path(__file__).resolve().parents[1] / "paper" / "templates" / "table-4-numbers.tex.j2"
    spec = {"name": "table-4", "numbers_template": str(template)}
    data = {"numbers": [{"key": "a-mae", "value": 0.0314, "format": "percent1"},
                        {"key": "b-error", "value": -0.052, "format": "percent1"},
                        {"key": "c-points", "value": 7.0, "format": "integer"},
                        {"key": "d-rms", "value": None, "format": "percent1"}]}  # fmt: skip
    text = render_numbers(spec, data, commit="abc1234")
    lines = text.split("\n")
    assert lines[0] == "% table-4: numbers for the text, generated with the table (git commit abc1234); do not edit."
    assert text.endswith("}\n") and not text.endswith("\n\n")
    macros = [line for line in lines if line.startswith("\\expandafter")]
    assert macros == [
        "\\expandafter\\def\\csname modelnum@a-mae\\endcsname{3.1}",
        "\\expandafter\\def\\csname modelnum@b-error\\endcsname{$-$5.2}",
        "\\expandafter\\def\\csname modelnum@c-points\\endcsname{7}",
        "\\expandafter\\def\\csname modelnum@d-rms\\endcsname{--}",
    ]


def test_numbers_template_missing_is_named(tmp_path):
    missing = tmp_path / "nope.tex.j2"
    with pytest.raises(LookupError) as err:
        render_numbers({"name": "table-9", "numbers_template": str(missing)}, {}, commit="c")
    assert str(err.value) == f"table table-9: numbers template {missing} does not exist (conf/table/table-9.yaml)"
    # a template of its own: the name, the data and the commit reach it; trailing blank lines become one newline
    own = tmp_path / "own.tex.j2"
    own.write_text("((( table.name ))) ((( data.x ))) ((( commit )))\n\n\n")
    assert render_numbers({"name": "t", "numbers_template": str(own)}, {"x": 5}, commit="c9") == (
        "% t: numbers for the text, generated with the table (git commit c9); do not edit.\nt 5 c9\n"
    )
