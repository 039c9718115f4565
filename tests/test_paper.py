"""The paper: main.tex against the figure and table configs, and (integration) the whole chain on a fresh
store: import -> `python -m scalestudy.paper all` -> latexmk -> the PDF's text shows every caption."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from helpers import REPO, printed_latex

MAIN = REPO / "paper" / "main.tex"
FIGURES = sorted((REPO / "conf" / "figure").glob("figure-*.yaml"), key=lambda p: int(p.stem.split("-")[1]))
TABLES = sorted((REPO / "conf" / "table").glob("table-*.yaml"), key=lambda p: int(p.stem.split("-")[1]))


# ------------------------------------------------------------------------------------------------
# No result typed by hand: every number of the text that the runs can give is a macro the builder writes
# (\num... of tables/numbers-study.tex, \modelnum{...} of tables/table-4-numbers.tex, the tables' own macros).
# What the text may still spell in digits is what no run gives: the names of things (ResNet-50, CIFAR-10,
# P100), the configuration a number is quoted at (8 GPUs, batch 64, 25 Gbit/s), years, versions, document
# numbers, and the method constants below, each with the reason it is not data.
METHOD_CONSTANTS = {
    "1 (100\\,\\%) is ideal": "the definition of efficiency",
    "skip 10 steps and average the next 100": "tf_cnn_benchmarks' defaults (num_warmup_batches, num_batches)",
    "batch 64 against 32": "the two batch sizes a ratio compares (configurations)",
    "exceed 100\\,\\%": "the threshold of superlinear efficiency",
    "rank~0": "a rank's id",
    "steps 0 to 10": "the logging hook's first interval (it logs every tenth step from step 0)",
    "less than 80\\,\\%": "the threshold (four fifths) that systems are counted below, a choice",
    "the 95\\,\\% F-test region": "the envelope's level (conf/scaling/default.yaml envelope.level), a choice of method",
}
COORDINATE = re.compile(
    r"(\s+(to|and)\s+\d+)?[\s~-]*(\\,)?(GPUs?|K80s?|V100s?|P100s?|K40s?|Pascal|servers?|ranks?|CPU|nodes?|hosts?"
    r"|instances|-core|Gbit/s|GB/s)\b"
)
VERSIONED = re.compile(r"(Python|TensorFlow|Keras|MXNet|Horovod|MLflow|Hydra|CUDA|PCIe|NVLink)[~ ]$")
ARGUMENTS_NOT_PROSE = [  # commands whose argument is a name, a reference or a file, not prose
    *("texttt", "path", "url", "label", "ref", "eqref", "input", "cite", "IfFileExists", "includegraphics"),
    *("figurefile", "figurecaption", "tablefile", "providecommand", "newcommand", "renewcommand"),
    *("setlength", "setcounter", "hspace", "vspace", "begin", "end", "fbox", "parbox"),
]


def _drop_arguments(text: str, commands: list[str]) -> str:
    """`text` with each `\\command[..]{...}` (balanced braces) replaced by a space."""
    pattern = re.compile(r"\\(" + "|".join(commands) + r")\*?\s*(\[[^\]]*\])?\s*\{")
    out, i = [], 0
    while m := pattern.search(text, i):
        out.append(text[i : m.start()] + " ")
        j, depth = m.end(), 1
        while depth and j < len(text):
            if text[j - 1] != "\\":
                depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    return "".join(out) + text[i:]


def prose(tex: str) -> str:
    """The running text of main.tex's body up to the artifact appendix (software, not results), or of a section:
    no comments, math, verbatim, column specs or command arguments that are names."""
    tex = tex.split("\\begin{document}", 1)[-1].split("\\appendix", 1)[0]
    tex = re.sub(r"(?<!\\)%.*", "", tex)
    tex = re.sub(r"\\begin\{(verbatim|align\*?|equation\*?)\}.*?\\end\{\1\}", " ", tex, flags=re.S)
    tex = re.sub(r"\\begin\{tabular\}\{(?:[^{}]|\{[^{}]*\})*\}", " ", tex)
    tex = re.sub(r"\$[^$]*\$|\[\d+\]", " ", tex)  # math; a macro's argument count
    return re.sub(r"\s+", " ", _drop_arguments(tex, ARGUMENTS_NOT_PROSE))


def typed_numbers(text: str) -> list[str]:
    """The digits in `text` that are none of the allowed kinds above, with their context."""
    allowed = [(m.start(), m.end()) for phrase in METHOD_CONSTANTS for m in re.finditer(re.escape(phrase), text)]
    found = []
    for m in re.finditer(r"\d+(?:\.\d+)*", text):
        before, after = text[max(0, m.start() - 12) : m.start()], text[m.end() : m.end() + 40]
        if (
            re.search(r"[A-Za-z]$|[A-Za-z0-9]-$", before)  # ResNet-50, VGG-19, DGX-1, ResNet-v2-101, x86-64
            or re.match(r"[A-Za-z]", after)  # fp16 (caught above), p2.8xlarge, 2B
            or COORDINATE.match(after)
            or re.search(r"(batch|seed|document)[ -]$|Seed $", before)
            or re.fullmatch(r"(19|20)\d\d", m.group())  # a year
            or (VERSIONED.search(before) and "." in m.group())
            or any(a <= m.start() < b for a, b in allowed)
        ):
            continue
        found.append(f"{m.group()!r} in '...{text[max(0, m.start() - 40) : m.end() + 30]}...'".replace("\n", " "))
    return found


def test_the_check_for_typed_numbers_finds_them():
    assert typed_numbers(prose("a median of 4.40 over 42 pairs")) == [
        "'4.40' in '...a median of 4.40 over 42 pairs...'",
        "'42' in '...a median of 4.40 over 42 pairs...'",
    ]
    assert typed_numbers(prose("we keep 94\\,\\% (ResNet-50) at 64 GPUs")) == [
        "'94' in '...we keep 94\\,\\% (ResNet-50) at 64 GPUs...'"
    ]
    fine = "ResNet-v2-101 on 8 GPUs, 1 to 16 K80, batch 64, Keras 1.2.2, 2017, $E(1)=1$ % 3.14\n\\ref{fig:3}"
    assert typed_numbers(prose(fine)) == []


def test_no_result_is_typed_by_hand_in_the_text():
    texts = [MAIN, *sorted((MAIN.parent / "sections").glob("*.tex"))]
    typed = [f"{p.name}: {hit}" for p in texts for hit in typed_numbers(prose(p.read_text()))]
    assert not typed, "numbers typed by hand (make them macros of conf/numbers/):\n" + "\n".join(typed)


def test_main_tex_has_every_figure_and_table():
    # main.tex and the sections it inputs (paper/sections/*.tex)
    tex = "\n".join(p.read_text() for p in [MAIN, *sorted((MAIN.parent / "sections").glob("*.tex"))])
    assert all(re.fullmatch(r"figure-\d+", p.stem) for p in FIGURES) and len(FIGURES) >= 7
    for path in FIGURES:
        spec = yaml.safe_load(path.read_text())
        assert f"\\figurefile{{{spec['name']}}}" in tex, spec["name"]
        # the caption is the one the builder writes from the figure's config
        assert f"\\figurecaption{{{spec['name']}}}" in tex, spec["name"]
    for path in TABLES:
        assert f"\\tablefile{{{path.stem}}}" in tex, path.stem


def test_the_printed_latex_check_finds_it():
    text = "Figure 8: Speedup at $N$ GPUs.\n\nFigure 3: P100 at N GPUs.\n\nFigure 9: tf\\_cnn.\n\n"
    assert printed_latex(text) == ["Figure 8: Speedup at $N$ GPUs.\n\n", "Figure 9: tf\\_cnn.\n\n"]


def latex_log_problems(log: str) -> list[str]:
    """The lines of a LaTeX log that say something is wrong: overfull boxes, undefined or multiply defined
    references and citations, undefined control sequences. TeX wraps its log at 79 characters, so a warning is
    read with its continuation lines joined."""
    joined = re.sub(r"(?m)^(.{79})\n", r"\1", log)  # a full 79-character line continues on the next
    patterns = (
        r"Overfull \\[hv]box",
        r"(LaTeX|Package \w+) Warning: (Reference|Citation) `[^']*' on page \S+ undefined",
        r"There were undefined references",
        r"multiply defined",
        r"Undefined control sequence",
    )
    return [line for line in joined.splitlines() if any(re.search(p, line) for p in patterns)]


def test_the_latex_log_check_finds_what_latex_writes():
    # as pdfTeX writes them (a citation warning wrapped at 79 characters, as TeX wraps its log)
    wrapped = "LaTeX Warning: Citation `sergeev2018horovod-distributed-tf-key' on page 3 undefined on input line 57."
    log = (
        f"{wrapped[:79]}\n{wrapped[79:]}\n"
        "LaTeX Warning: Reference `fig:missing' on page 2 undefined on input line 12.\n"
        "Overfull \\hbox (4.2pt too wide) in paragraph at lines 30--31\n"
        "LaTeX Warning: There were undefined references.\n"
        "LaTeX Font Info:    External font `lmex10' loaded for size\n"
    )
    assert len(wrapped) > 79
    found = latex_log_problems(log)
    assert len(found) == 4 and "sergeev2018horovod" in found[0] and "fig:missing" in found[1]
    assert latex_log_problems("LaTeX Font Info:    External font `lmex10' loaded for size\n") == []


def pdf_chars(path: Path):
    """(page number, character) for every character pdfminer finds in the PDF at `path`."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar, LTContainer

    def chars(item):
        if isinstance(item, LTChar):
            yield item
        elif isinstance(item, LTContainer):
            for child in item:
                yield from chars(child)

    for number, page in enumerate(extract_pages(path), start=1):
        for char in chars(page):
            yield number, char


def glyph_size(char) -> float:
    """The font size of one character of the PDF: pdfminer's `size` is the height of its box, which for text
    rotated by 90 degrees (y-axis labels) is the glyph's width; the box's other side is the font size there."""
    a, b = char.matrix[:2]
    return char.width if abs(a) < abs(b) else char.height


def test_the_font_size_reader_on_a_figure_with_known_sizes(tmp_path):
    # A figure with 7-pt text upright and rotated, and 4-pt text: the reader gives those sizes back.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(3, 3))
    fig.text(0.1, 0.5, "Wide", fontsize=7)
    fig.text(0.5, 0.5, "Wide", fontsize=7, rotation=90)
    fig.text(0.1, 0.2, "tiny", fontsize=4)
    with plt.rc_context({"pdf.fonttype": 42}):
        fig.savefig(tmp_path / "f.pdf")

    sizes = {}
    for _, char in pdf_chars(tmp_path / "f.pdf"):
        sizes.setdefault(char.get_text(), set()).add(round(glyph_size(char), 1))
    assert sizes["W"] == {7.0} and sizes["i"] == {7.0, 4.0} and sizes["y"] == {4.0}
