"""Every table's rows can be told apart (issue 41: table 6 had two rows reading "v2.0 H3C A100 mxnet C", the v2.0
H3C families of A100-SXM-80GB and A100-PCIe-80GB): each section's row labels, read from the tables as built from
the published store, are unique."""

from __future__ import annotations

import re

# The label columns of each table: the cells that name a row, the rest being its numbers. Tables not listed
# (4 and 7, the scaling model's) name a row by its cells up to and including its first number (claim or model,
# GPU, batch or GPUs). A blank first cell repeats the row above's (table 7's claim).
LABEL_CELLS = {"table-1": 1, "table-2": 1, "table-3": 1, "table-5": 5, "table-6": 5}
NUMBER = re.compile(r"^[\d.,\s\-+$%]+$")


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)&", row)]


def _label(name: str, cells: list[str]) -> tuple[str, ...]:
    if name in LABEL_CELLS:
        return tuple(cells[: LABEL_CELLS[name]])
    plain = [re.sub(r"\\[a-zA-Z]+|[{}]", "", c).strip() for c in cells]
    first = next((i for i, c in enumerate(plain) if i and c and NUMBER.match(c)), len(cells) - 1)
    return tuple(cells[: first + 1])


def table_rows(name: str, tex: str) -> list[list[tuple[str, ...]]]:
    """The labels of each section's rows (a section: the rows between two rules or headings) of every tabular."""
    sections: list[list[tuple[str, ...]]] = []
    for body in re.findall(r"\\midrule(.*?)\\bottomrule", tex, flags=re.S):
        current: list[tuple[str, ...]] = []
        above: list[str] = []
        for row in body.split("\\\\"):
            row = "\n".join(line for line in row.strip().splitlines() if not line.lstrip().startswith("%")).strip()
            if not row or row.startswith(("\\midrule", "\\multicolumn", "\\cmidrule")) or "&" not in row:
                if current:
                    sections.append(current)
                current, above = [], []
                continue
            cells = _cells(row)
            if not cells[0] and above:
                cells[0] = above[0]
            above = cells
            current.append(_label(name, cells))
        if current:
            sections.append(current)
    return sections


def test_table_rows_of_one_label_are_found():
    tex = (
        "\\midrule\nv2.0 & H3C & A100 & mxnet & C & 4--16 & 89 \\\\\nv2.0 & H3C & A100 & mxnet & C & 1--8 & 101 \\\\\n"
    )
    (section,) = table_rows("table-6", tex + "\\bottomrule")
    assert section[0] == section[1]
    tex = "\\midrule\nHorovod & VGG-16 & P100 & 512 & 68.0 \\\\\n & VGG-16 & K80 & 512 & 1 \\\\\n\\bottomrule"
    assert table_rows("table-7", tex) == [[("Horovod", "VGG-16", "P100", "512"), ("Horovod", "VGG-16", "K80", "512")]]


def test_every_table_row_label_is_unique(published_tables):
    for n in range(1, 8):
        name = f"table-{n}"
        sections = table_rows(name, (published_tables / "tables" / f"{name}.tex").read_text())
        assert sections, name
        for labels in sections:
            repeated = sorted({label for label in labels if labels.count(label) > 1})
            assert not repeated, f"{name}: rows that read alike: {repeated}"
