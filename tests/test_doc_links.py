"""Every cross-reference of the docs and the code resolves (issue 44, "docs that state facts"): a Markdown link of
README.md or docs/*.md to a file that exists and, with `#anchor`, to a heading of it (GitHub's slugs); a path
`docs/NAME.md` named anywhere (docs, code comments, configs, recipes); and a named section, `README, "X"`,
`docs/data.md "X"`, `the README's "X"` or `the corpus README, "X"`, to a heading (or a bold lead-in, `**X.**`) of
that file. External links are checked for their form only (no network)."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest
from helpers import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CODE_FOLDERS = ("src", "conf", "scripts")
RECIPES = ("Makefile", "Dockerfile", "Singularity.def")
CODE_SUFFIXES = {".py", ".yaml", ".sh", ".toml", ".cfg", ""}

MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOC_PATH = re.compile(r"(?<![\w/.-])(docs/[\w-]+\.md)(#[\w-]+)?")
# README, "X" / the README's "X" / docs/data.md "X" / [cluster.md](cluster.md), "X" / README section "X"
NAMED_SECTION = re.compile(
    r"(?P<file>corpus README|README(?:\.md)?|(?:[\w.-]+/)*[\w-]+\.md)(?:\]\([^)]*\))?(?:'s|,|:)? \(?(?:section )?"
    r"\"(?P<section>[^\"\n]{2,80})\""
)
EXTERNAL = re.compile(r"^(https?|mailto):(//)?[\w.-]+\.[a-z]{2,}(:\d+)?([/?#][^\s<>\"]*)?$|^http://127\.0\.0\.1[:/]")


def code_files() -> list[Path]:
    files = [REPO / name for name in RECIPES]
    for folder in CODE_FOLDERS:
        files += [p for p in (REPO / folder).rglob("*") if p.is_file() and p.suffix in CODE_SUFFIXES]
    return sorted(p for p in files if "__pycache__" not in p.parts)


def without_code_blocks(text: str) -> str:
    """The Markdown without its fenced blocks and inline code spans (a link there is not a link); lines kept."""
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (links as their text) lowercased, punctuation dropped, spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def headings(path: Path) -> tuple[str, ...]:
    """The headings of a Markdown file, outside its fenced blocks."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return tuple(m.group(1).strip() for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.M))


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading's slug, a repeated one with GitHub's -1, -2 ... suffixes."""
    seen: dict[str, int] = {}
    found = set()
    for slug in map(github_slug, headings(path)):
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return frozenset(found)


@functools.cache
def section_names(path: Path) -> frozenset[str]:
    """What a prose reference may name: a heading, the part of it before a colon or without its parentheses, or a
    bold lead-in (`**X.**`)."""
    names = set()
    for heading in headings(path):
        names |= {heading, heading.split(":")[0], re.sub(r" *\([^)]*\)", "", heading)}
    names |= {m.group(1).rstrip(".:") for m in re.finditer(r"\*\*([^*\n]+)\*\*", path.read_text())}
    return frozenset(" ".join(name.split()).lower() for name in names)


def corpus_readme() -> Path | None:
    """The MLPerf corpus's own README, where the mirror of the raw files is (the code cites its sections)."""
    mirror = os.environ.get("SCALESTUDY_DATA_MIRROR") or str(REPO.parent / "shared" / "reference")
    path = Path(mirror) / "mlperf-training-resnet" / "README.md"
    return path if path.is_file() else None


def referenced_file(name: str, where: Path) -> Path | None:
    """The file a reference names, seen from the file it is in: beside it, from the repository's root, in docs/;
    `README` is the repository's (a dataset folder's own README in that folder); None for the corpus README where
    the mirror is missing."""
    if name == "corpus README" or name.startswith("../"):  # outside the checkout: the mirror, where it is
        return (
            corpus_readme()
            if name == "corpus README"
            else ((REPO / name).resolve() if (REPO / name).is_file() else None)
        )
    if name.startswith("README"):
        own = where.parent / "README.md"
        return own if where.is_relative_to(REPO / "experiments") and own.is_file() else REPO / "README.md"
    for folder in (where.parent, REPO, REPO / "docs"):
        if (folder / name).is_file():
            return (folder / name).resolve()
    return REPO / name  # missing: reported by the test


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


# --------------------------------------------------------------------------------------------
# What the files reference: (where, the reference, the problem or "")


def link_problems(path: Path) -> list[str]:
    text = without_code_blocks(path.read_text())
    problems = []
    for match in MARKDOWN_LINK.finditer(text):
        target, where = match.group(1), f"{path.relative_to(REPO)}:{line_of(text, match.start())}"
        if re.match(r"^[a-z]+:", target):
            if not EXTERNAL.match(target):
                problems.append(f"{where}: {target}: not a well-formed external link")
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{where}: {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{where}: {target}: no heading of {linked.name} has the anchor #{anchor}")
    return problems


def path_problems(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    problems = []
    for match in DOC_PATH.finditer(text):
        named, anchor = REPO / match.group(1), (match.group(2) or "").removeprefix("#")
        where = f"{path.relative_to(REPO)}:{line_of(text, match.start())}"
        if not named.is_file():
            problems.append(f"{where}: {match.group(1)}: no such file")
        elif anchor and anchor not in anchors(named):
            problems.append(f"{where}: {match.group(0)}: no such heading")
    return problems


def section_problems(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    problems = []
    for match in NAMED_SECTION.finditer(text):
        named = referenced_file(match.group("file"), path)
        if named is None:
            continue  # the corpus README: only where the mirror is
        where = f"{path.relative_to(REPO)}:{line_of(text, match.start())}"
        section = " ".join(match.group("section").split()).lower()
        if not named.is_file():
            problems.append(f"{where}: {match.group(0)}: no such file {named.relative_to(REPO)}")
        elif section not in section_names(named):
            problems.append(f"{where}: {match.group(0)}: {named.name} has no section of that name")
    return problems


# --------------------------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_of_the_docs_resolves(path):
    problems = link_problems(path) + path_problems(path) + section_problems(path)
    assert not problems, "\n".join(problems)


def test_every_reference_of_the_code_resolves():
    problems = [problem for path in code_files() for problem in path_problems(path) + section_problems(path)]
    assert not problems, "\n".join(problems)


def test_github_slugs():
    assert github_slug("Mutation testing with mutmut") == "mutation-testing-with-mutmut"
    assert github_slug("Run schema (`src/scalestudy/schema.py`)") == "run-schema-srcscalestudyschemapy"
    assert github_slug("Layer order and build times (measured here, 2 shared cores)") == (
        "layer-order-and-build-times-measured-here-2-shared-cores"
    )
    assert github_slug("The rehearsal cluster (scripts/cluster.py, cluster_network.py: make cluster-up)") == (
        "the-rehearsal-cluster-scriptsclusterpy-cluster_networkpy-make-cluster-up"
    )


def test_the_checks_find_what_is_wrong(tmp_path):
    """A made-up page with a broken link, anchor, path and section reference: each is reported."""
    page = REPO / "docs" / "reliability.md"
    text = (
        "[a](nosuch.md) [b](reliability.md#no-such-anchor) [c](reliability.md#threat-model) [d](http//x)\n"
        'docs/nosuch.md and docs/reliability.md#threat-model; README, "No such section"; '
        'docs/reliability.md, "Threat model"; README section "The verbs"\n'
    )
    fake = tmp_path / "page.md"
    fake.write_text(text)
    found = {m.group(0) for m in NAMED_SECTION.finditer(text)}
    assert found == {'README, "No such section"', 'docs/reliability.md, "Threat model"', 'README section "The verbs"'}
    assert "threat-model" in anchors(page) and "threat model" in section_names(page)
    assert github_slug("No such anchor") not in anchors(page)
    assert "the verbs" in section_names(REPO / "README.md")
    assert not EXTERNAL.match("http//x") and EXTERNAL.match("https://github.com/horovod/horovod#readme")
