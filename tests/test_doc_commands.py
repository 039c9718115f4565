"""Every command in the docs runs as written (issue 40): each command of README.md and docs/*.md is found
(tests/doc_commands.py) and checked without running it (tests/doc_checks.py), one test per command named by its
file and line; then the checks themselves are shown to refuse what does not run."""

from __future__ import annotations

import re

import pytest
from doc_checks import (
    ARGS_PARSERS,
    EXTERNAL_PROGRAMS,
    PAPER_TARGETS,
    DocCommandError,
    check_command,
    check_make,
    make_database,
)
from doc_commands import DocCommand, documented_commands, simple_commands
from hydra.errors import HydraException

COMMANDS = documented_commands()


def command_ids(commands: list[DocCommand]) -> list[str]:
    """file:line, and file:line#2 for a second command that starts on the same line."""
    seen: dict[str, int] = {}
    ids = []
    for command in commands:
        seen[command.where] = seen.get(command.where, 0) + 1
        ids.append(command.where + (f"#{seen[command.where]}" if seen[command.where] > 1 else ""))
    return ids


# What a check raises for a command that would not run: its own error, Hydra's, a parser's or the builder's.
REFUSED = (DocCommandError, HydraException, ValueError, LookupError)


@pytest.mark.parametrize("command", COMMANDS, ids=command_ids(COMMANDS))
def test_documented_command_runs_as_written(command):
    try:
        check_command(command)
    except REFUSED as err:
        pytest.fail(f"{command.where}: `{command.text}` would not run as written: {' '.join(str(err).split())}")


def test_the_docs_commands_are_found():
    """Each kind of source gives commands: a bash block of the README, an indented block of a list (cluster.md),
    inline spans, a multi-line span; at least one per page that shows commands."""
    found = {c.where.split(":")[0] for c in COMMANDS}
    assert {"README.md", "docs/cluster.md", "docs/harness.md", "docs/data.md", "docs/ui.md"} <= found
    texts = {c.text for c in COMMANDS}
    assert any(text.startswith("make figure-3    # -> paper/figures/figure-3.pdf") for text in texts)
    assert any(c.text.startswith(".venv-train/bin/python -m scalestudy.train -m cluster=slurm") for c in COMMANDS)
    assert any(c.inline and c.text == "make test-fast" for c in COMMANDS)
    assert len(COMMANDS) > 100


# --------------------------------------------------------------------------------------------
# The checks refuse what would not run


@pytest.mark.parametrize(
    "text",
    [
        "make nosuchtarget",
        "make figure-99",
        "make table-N7",
        "make run-figure-3",  # figure 3 has no sweep (conf/experiment/figure-3.yaml)
        "make figure-3 sourc=measured",  # a variable the Makefile does not read
        "make test source=measured",  # read by the builder's targets, not by `test`
        "make figure-3 ARGS='figure.plot.mediann=false'",
        "make figure-3 source=nowhere ARGS='+x=1 figure=figure-99'",
        "make run-figure-1 ARGS='cluster.partitionx=gpu'",
        "make run-figure-1 ARGS='nosuchkey=1,2'",
        "make ui ARGS=--no-such-option",
        "make bench-harness ARGS='--model nosuchmodel'",
        "make mutation-check ARGS=--agian",
    ],
)
def test_make_checks_refuse(text):
    with pytest.raises(REFUSED):
        check_command(DocCommand("test:1", text))


@pytest.mark.parametrize(
    "text",
    [
        "python -m scalestudy.train -m experiment=figure-1 'hydra.sweeper.params.workers=1,2,4'",  # Hydra refuses it
        "python -m scalestudy.train workers=1,2",  # a sweep without -m
        "python -m scalestudy.train -m experiment=figure-1 modell=vgg19,resnet50",
        "python -m scalestudy.paper figure-3 figure.plot.nosuchkey=1",
        "python -m scalestudy.paper figure-99",
        "python -m scalestudy.ingest no-such-dataset",
        "python -m scalestudy.ingest logs monday.txt",  # --experiment is required
        "python -m scalestudy.scaling predict nosuchkey=1",
        "python -m scalestudy.scaling predicts",
        "python -m scalestudy.profile summarize",
        "python -m scalestudy.harness.slurm record",
        "python -m scalestudy.nosuchmodule",
        "python -m scalestudy.ui --auth --nosuchoption",
        "python -m scalestudy.harness.slurm record multirun/train/<time>",  # a redirection, as the shell reads it
        "python -m scalestudy.profile summarize FILE [--json]",  # a usage synopsis
        "docker run --rm scalestudy:cpu framework=nosuchframework",
        "docker run --rm --nosuchoption scalestudy:cpu",
        "scripts/container.sh nosuchcommand",
        "scripts/nosuchscript.sh",
        "NOSUCHVARIABLE_OF_THE_PROJECT=1 make figure-3",
        "scalestudy figure-3",  # the console script's subcommand is `figure 3`
        ".venv/bin/scalestudy figure 99",
        ".venv/bin/scalestudy ingest logs monday.txt",  # --experiment is required
        "scalestudy predict nosuchkey=1",
        "scalestudy table",  # which table?
        "rsync -a a b",  # an external program nobody listed
    ],
)
def test_other_checks_refuse(text):
    with pytest.raises(REFUSED):
        check_command(DocCommand("test:1", text))


def test_only_an_inline_span_may_name_an_entry_point_alone():
    check_command(DocCommand("test:1", "python -m scalestudy.ingest logs", inline=True))
    check_command(DocCommand("test:1", "python -m scalestudy.harness.slurm rendezvous", inline=True))
    with pytest.raises(REFUSED):
        check_command(DocCommand("test:1", "python -m scalestudy.ingest logs"))
    with pytest.raises(REFUSED):
        check_command(DocCommand("test:1", "python -m scalestudy.harness.slurm rendezvouz", inline=True))


def test_the_checks_pass_what_runs():
    for text in [
        "make figure-3 source=all ARGS='figure.plot.median=false'",
        "make run-figure-9 ARGS='model=vgg16 framework=mxnet'",
        "SIF_FROM_ARCHIVE=scalestudy.tar make sif",
        "make figure-3 & make figure-4  # both at once",
        "docker run --rm -v $PWD/work:/work REGISTRY/scalestudy:TAG framework=mxnet workers=2",
        "docker run --rm --entrypoint bash scalestudy:cpu -c 'echo any'",  # not the harness: not composed
        ".venv/bin/scalestudy figure 3 source=all",
        "scalestudy table 1 2",
        ".venv/bin/scalestudy ingest logs monday.txt --experiment mine",
        "scalestudy predict model=vgg16 workers=512",
        "scalestudy store accept",
        "scalestudy --help",
    ]:
        check_command(DocCommand("test:1", text))


def test_lines_are_split_as_a_shell_reads_them():
    (command,) = simple_commands(DocCommand("t:1", "FOO=1 make run-figure-1 ARGS='a=1 b=2'  # a comment"))
    assert command.env == ("FOO=1",) and command.words == ("make", "run-figure-1", "ARGS=a=1 b=2")
    both = simple_commands(DocCommand("t:1", "docker save x -o x.tar && scp x.tar host:dir/ 2>/dev/null"))
    assert [c.words for c in both] == [("docker", "save", "x", "-o", "x.tar"), ("scp", "x.tar", "host:dir/")]


# --------------------------------------------------------------------------------------------
# The checks' tables against the Makefile


def test_every_target_that_reads_args_has_a_check():
    """A recipe that passes ARGS, BUILD_ARGS (source=, ARGS), SIZE or TARGET on is one the checks know how to
    check."""
    rules, _ = make_database()
    reading = {name for name, recipe in rules.items() if re.search(r"\$\((ARGS|BUILD_ARGS|SIZE|TARGET)\)", recipe)}
    known = set(PAPER_TARGETS) | set(ARGS_PARSERS) | {"figure-%", "table-%", "run-figure-%", "import-for", "compare"}
    assert reading <= known, f"make targets passing ARGS on that tests/doc_checks.py does not check: {reading - known}"
    sweep = "scalestudy.train -m experiment=figure-$* $(if $(filter full,$(SIZE)),,$(RUN_ARGS_$*)) $(ARGS)"
    assert sweep in rules["run-figure-%"], "run-figure-% runs something else than tests/doc_checks.py composes"
    assert "scalestudy.paper $@ $(BUILD_ARGS)" in rules["figure-%"]


def test_the_external_programs_are_not_the_projects():
    assert not EXTERNAL_PROGRAMS & {"make", "python", "scalestudy"}
    check_make(["figure-3"])  # the database is read (make is there)
