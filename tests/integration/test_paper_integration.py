"""The end-to-end tests of tests/test_paper.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest
import yaml
from helpers import printed_latex, run_module
from test_paper import FIGURES, MAIN, TABLES, glyph_size, latex_log_problems, pdf_chars


def squeeze(text: str) -> str:
    """Text for comparing across line breaks, hyphenation, ligatures and LaTeX markup: letters and digits only."""
    text = unicodedata.normalize("NFKC", text)
    return re.sub(r"[^0-9a-z]", "", text.lower())


@pytest.fixture(scope="module")
def built(published_store, tmp_path_factory) -> Path:
    """Every figure, table and number built from a fresh store of the published runs, then the paper (latexmk)."""
    if not shutil.which("latexmk") or not shutil.which("pdftotext"):
        pytest.fail("latexmk and pdftotext are needed (make test installs latexmk, texlive-*, poppler-utils)")
    paper = tmp_path_factory.mktemp("paper")
    proc = run_module("scalestudy.paper", "all", f"out_dir={paper}", uri=published_store, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shutil.copy(MAIN, paper / "main.tex")  # the build's out_dir is the paper's folder: the repo's stays as it is
    shutil.copytree(MAIN.parent / "sections", paper / "sections")
    latex = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-cd", str(paper / "main.tex")],
        capture_output=True,
        text=True,
    )
    log = (paper / "main.log").read_text(errors="replace") if (paper / "main.log").exists() else ""
    assert latex.returncode == 0, latex.stdout[-2000:] + log[-3000:]
    return paper


def pdf_text(paper: Path) -> str:
    return subprocess.run(
        ["pdftotext", "-enc", "UTF-8", str(paper / "main.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout


def test_the_paper_builds_from_a_fresh_store(built):
    for spec in map(lambda p: yaml.safe_load(p.read_text()), FIGURES):
        if spec["runs"].get("published"):  # a figure of runs measured here (figure 9) is drawn after make run-figure-9
            assert (built / "figures" / f"{spec['name']}.pdf").is_file(), f"{spec['name']} was not built"
            assert (built / "figures" / f"{spec['name']}.json").is_file()
    for path in TABLES:
        tex = (built / "tables" / f"{path.stem}.tex").read_text()
        assert tex.startswith("%") and f"make {path.stem}" in tex.splitlines()[1]
        assert (built / "tables" / f"{path.stem}.json").is_file()

    info = subprocess.run(["pdfinfo", str(built / "main.pdf")], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, flags=re.MULTILINE).group(1))
    assert pages >= 10
    text = pdf_text(built)
    flat = squeeze(text)
    title = re.search(r"\\title\{(.*?)\}\n", MAIN.read_text(), flags=re.S).group(1).replace("\\\\", " ")
    assert squeeze(title) in flat and "Horovod" not in title  # the title says what the data are
    for path in FIGURES:
        spec = yaml.safe_load(path.read_text())
        if spec["runs"].get("published"):
            n = spec["name"].split("-")[1]
            assert squeeze(f"Figure {n}: {spec['title']}") in flat, f"caption of {spec['name']} not in the PDF"
    for path in TABLES:
        n = path.stem.split("-")[1]
        assert re.search(rf"Table {n}:", text), f"table {n} has no caption in the PDF"
    assert "not built yet" not in text
    assert "??" not in text  # no undefined reference, no \\modelnum without a value
    assert "failed: Horovod stall; Slurm time limit" in text
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)
    for section in ("Discussion", "Threats to validity", "Conclusion"):
        assert re.search(rf"^\f?\d+\s+{section}$", text, flags=re.MULTILINE), section


def test_the_latex_log_has_no_overfull_box_or_undefined_reference(built):
    log = (built / "main.log").read_text(errors="replace")
    assert latex_log_problems(log) == []


def test_no_text_in_the_pdf_is_below_6_pt(built):
    small, in_figures = [], 0
    for number, char in pdf_chars(built / "main.pdf"):
        if not char.get_text().strip():
            continue
        in_figures += "DejaVu" in char.fontname  # matplotlib's font: the figures' text is text, measured too
        if glyph_size(char) < 5.95:
            small.append(f"page {number}: {char.get_text()!r} {glyph_size(char):.1f} pt ({char.fontname})")
    assert in_figures > 1000, "the figures' text was not found in the PDF (drawn as paths?)"
    assert not small, small[:20]


def test_no_caption_prints_latex_as_typed(built):
    assert printed_latex(pdf_text(built)) == []
