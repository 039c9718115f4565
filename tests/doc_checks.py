"""Checks of the documented commands (found by tests/doc_commands.py): a project command is composed or parsed as
the program itself would, nothing runs; any other program must be in EXTERNAL_PROGRAMS, so that a new project
command cannot slip by unchecked.

- `make [VAR=value] TARGET... [VAR=value]`: each TARGET is a rule of the Makefile (read from make's own database),
  a pattern rule's stem names a config (figure-3: conf/figure/figure-3.yaml); N stands for any stem
  (`make figure-N`) and is checked with the first (figure-1). What the target runs is checked with the variables
  it reads: the builder's targets compose `source=` and `ARGS` in each figure's or table's config, run-figure-N
  composes every job of its sweep (the Makefile's CPU settings unless SIZE=full, then ARGS), and ARGS of the UI,
  the harness benchmark and the mutation checks go through their argument parsers. A variable no target reads
  fails.
- `python -m scalestudy.MODULE ARGS`: scalestudy.train composes its config (with -m, every job of the sweep, as
  Hydra's BasicSweeper makes them); scalestudy.paper composes each target with the overrides; the other modules'
  argument parsers accept the arguments. An inline code span that names an entry point alone (`python -m
  scalestudy.ingest logs`: the module, and maybe its subcommand) only needs the module and subcommand to exist.
- `scripts/NAME ARGS`: the script exists, is executable, and handles its first argument (a `case` label).
- `docker run ... IMAGE ARGS` of the study's image: ARGS are the training entry point's overrides.
- `VAR=value` before a command: the project reads VAR (the Makefile, scripts/, src/, the recipes).
Paths and names that stand for the reader's own (REGISTRY, /data/..., $PWD, PATH...) are fine: composing a
config does not look at paths.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import subprocess
import tomllib

from doc_commands import REPO, DocCommand, SimpleCommand, simple_commands, split_words
from helpers import load_script

# Programs the docs may show that are not the project's: checked by nobody here. A program not listed, not `make`,
# not a project Python module and not a script of scripts/ fails the test (add it here if it is really external).
EXTERNAL_PROGRAMS = {"apptainer", "singularity", "docker", "scp", "ssh", "git", "sbatch", "srun", "squeue", "scancel",
                     "sinfo"}  # fmt: skip
PYTHONS = {"python", "python3", "python3.11", ".venv/bin/python", ".venv-train/bin/python"}
CONSOLE_SCRIPTS = {"scalestudy", ".venv/bin/scalestudy", ".venv-train/bin/scalestudy"}
PLACEHOLDER_STEM = "N"  # `make figure-N`: any figure
# A pattern rule's stem names a config: figure-% is conf/figure/figure-%.yaml.
PATTERN_CONFIGS = {"figure-%": "figure/figure-%", "table-%": "table/table-%", "run-figure-%": "experiment/figure-%"}
# The variables of the Makefile that one target reads and another does not (the others are global settings).
TARGET_VARIABLES = ("source", "ARGS", "SIZE", "TARGET", "EXPERIMENT", "FIGURES")
# What each make target that reads ARGS, source or SIZE runs; tests/test_doc_commands.py checks this list against
# the Makefile's recipes.
PAPER_TARGETS = {"figures": "figures", "tables": "tables", "all": "all", "paper": "all"}
# {target: (the program its ARGS go to, what the recipe puts before them, that program's argument parser)}
ARGS_PARSERS = {
    "ui": ("scalestudy.ui", [], lambda: module_parser("scalestudy.ui")),
    "bench-harness": ("benchmarks/bench_harness.py", [], lambda: bench_harness().argument_parser()),
    "mutation-check": (
        "scripts/mutation_report.py",
        ["--run"],
        lambda: load_script("mutation_report").argument_parser(),
    ),
    "mutation-lists": ("scripts/mutation_check.py", [], lambda: load_script("mutation_check").argument_parser()),
}
# docker run's options that take a value (an option not listed here or below fails: the image would be misread).
DOCKER_RUN_VALUED = {"-v", "--volume", "-e", "--env", "--env-file", "--network", "--gpus", "--name", "-w",
                     "--workdir", "-u", "--user", "--mount", "-p", "--publish", "--shm-size", "--cpus"}  # fmt: skip
DOCKER_RUN_FLAGS = {"--rm", "-i", "-t", "-it", "-d", "--init", "--privileged"}
STUDY_IMAGE = re.compile(r"^([\w.-]+/)*scalestudy:[\w.-]+$")  # scalestudy:cpu, REGISTRY/scalestudy:TAG


class DocCommandError(Exception):
    """A documented command that would not run as written: why."""


def check_command(command: DocCommand) -> None:
    """Check every simple command of a documented line; DocCommandError (or Hydra's, argparse's error) if one
    would not run as written."""
    for simple in simple_commands(command):
        check_simple(simple, named_only_ok=command.inline)


def check_simple(command: SimpleCommand, named_only_ok: bool = False) -> None:
    if not command.words:
        raise DocCommandError(f"{command.where}: only variable settings, no command: {command.env}")
    for setting in command.env:
        check_environment_variable(setting.split("=", 1)[0])
    synopsis = [w for w in command.words if "=" not in w and (w.startswith("[") or w.endswith("]"))]
    if synopsis:
        raise DocCommandError(f"{' '.join(synopsis)}: a usage synopsis ([OPTION]), not a command a shell can run")
    program, args = command.words[0], list(command.words[1:])
    if program == "export":  # the shell's: each NAME=value must be a variable the project (or Slurm) reads
        for setting in args:
            check_environment_variable(setting.split("=", 1)[0])
    elif program == "make":
        check_make(args)
    elif program in PYTHONS:
        check_python(args, named_only_ok)
    elif program.startswith("scripts/"):
        check_script(program, args)
    elif program == "docker":
        check_docker(args)
    elif program in CONSOLE_SCRIPTS:
        check_console_script(program, args)
    elif program not in EXTERNAL_PROGRAMS:
        raise DocCommandError(f"{program!r} is neither a project command nor in EXTERNAL_PROGRAMS")


# --------------------------------------------------------------------------------------------
# make


@functools.cache
def make_database() -> tuple[dict[str, str], dict[str, str]]:
    """({rule: its recipe}, {variable: its value}) from make's database of the Makefile (make -pRrq prints it and
    runs nothing); files that are only prerequisites (`# Not a target:`) are no rules. MAKEFLAGS is left out: under
    `make test-fast ARGS=...` the outer make's settings would come in."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    command = ["make", "-pRrq", "-f", "Makefile", ":"]
    printed = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True).stdout
    variables_part, _, rules_part = printed.partition("\n# Implicit Rules\n")
    variables = {}
    for line in variables_part.splitlines():
        variable = re.match(r"^([A-Za-z_][A-Za-z0-9_]*) :?= ?(.*)$", line)
        if variable:
            variables.setdefault(variable.group(1), variable.group(2))
    return make_rules(rules_part.splitlines()), variables


def make_rules(lines: list[str]) -> dict[str, str]:
    """{rule: its recipe lines} of the rules part of make's database."""
    rules = {}
    for n, line in enumerate(lines):
        rule = re.match(r"^([^#\s:=][^:=]*):(?!=)", line)
        if rule and lines[n - 1] != "# Not a target:":
            recipe = []
            for following in lines[n + 1 :]:
                if following.startswith("\t"):
                    recipe.append(following.strip())
                elif not following.startswith("#"):
                    break
            rules[rule.group(1)] = "\n".join(recipe)
    return rules


def check_make(args: list[str]) -> None:
    options = [a for a in args if a.startswith("-")]
    if options:
        raise DocCommandError(f"make option(s) {options}: not checked here")
    settings = dict(a.split("=", 1) for a in args if "=" in a)
    targets = [a for a in args if "=" not in a]
    makefile = (REPO / "Makefile").read_text()
    for name in settings:
        if not re.search(rf"\$[({{]{re.escape(name)}[)}}]", makefile):
            raise DocCommandError(f"make {name}=...: the Makefile reads no variable {name}")
    unread = {name for name in settings if name in TARGET_VARIABLES}
    for target in targets or ["help"]:
        unread -= check_make_target(target, settings)
    if unread:
        raise DocCommandError(f"make {' '.join(targets)}: {', '.join(sorted(unread))} read by none of these targets")


def check_make_target(target: str, settings: dict[str, str]) -> set[str]:
    """Check one target and what it runs with these settings; the target variables it reads."""
    rules, _ = make_database()
    if target in rules and "%" not in target:
        return check_make_run(target, None, settings)
    for pattern, config in PATTERN_CONFIGS.items():
        prefix = pattern.removesuffix("%")
        if pattern in rules and target.startswith(prefix):
            return check_make_run(pattern, pattern_stem(config, target.removeprefix(prefix)), settings)
    raise DocCommandError(f"make {target}: no such rule in the Makefile (nor a figure, table or sweep it names)")


def pattern_stem(config: str, stem: str) -> str:
    """The stem to check: itself where its config exists; for the placeholder N, the first that exists (composing
    every figure's sweep for `make run-figure-N` would take seconds: the docs name each one they run)."""
    folder, _, pattern = config.partition("/")
    prefix = pattern.removesuffix("%")
    known = sorted(p.stem.removeprefix(prefix) for p in (REPO / "conf" / folder).glob(f"{prefix}*.yaml"))
    if stem == PLACEHOLDER_STEM and known:
        return min(known, key=lambda s: (len(s), s))
    if stem not in known:
        raise DocCommandError(f"no conf/{folder}/{prefix}{stem}.yaml (known: {', '.join(known)})")
    return stem


def check_make_run(rule: str, stem: str | None, settings: dict[str, str]) -> set[str]:
    """What `make rule` runs, checked with the settings it reads; the names of those settings."""
    args = split_words(settings.get("ARGS", ""))
    if rule in PAPER_TARGETS or rule in ("figure-%", "table-%"):
        target = PAPER_TARGETS.get(rule) or rule.replace("%", stem)
        source = [f"source={settings['source']}"] if "source" in settings else []
        check_paper([target, *source, *args])
        return {"source", "ARGS"}
    if rule == "run-figure-%":
        _, variables = make_database()
        cpu_run = split_words(variables[f"RUN_ARGS_{stem}"]) if settings.get("SIZE") != "full" else []
        check_train(["-m", f"experiment=figure-{stem}", *cpu_run, *args])
        return {"SIZE", "ARGS"}
    if rule == "compare":  # make compare EXPERIMENT=NAME [FIGURES=...]: the builder's targets with compare=NAME
        _, variables = make_database()
        figures = split_words(settings.get("FIGURES", "")) or split_words(variables["COMPARE_FIGURES"])
        if not settings.get("EXPERIMENT"):
            raise DocCommandError("make compare: EXPERIMENT=NAME is required")
        check_paper([*figures, f"compare={settings['EXPERIMENT']}", *args])
        return {"EXPERIMENT", "FIGURES", "ARGS"}
    if rule == "import-for":
        check_ingest(["--list", "--for", *split_words(settings.get("TARGET", ""))])
        return {"TARGET"}
    if rule in ARGS_PARSERS:
        name, before, parser = ARGS_PARSERS[rule]
        parse_with(parser().parse_args, [*before, *args], name)
        return {"ARGS"}
    return set()


# --------------------------------------------------------------------------------------------
# python -m scalestudy.MODULE


def check_python(args: list[str], named_only_ok: bool) -> None:
    if args[:1] != ["-m"] or len(args) < 2:
        script = REPO / args[0] if args else None
        if script is None or not script.is_file():
            raise DocCommandError(f"python {' '.join(args)}: neither `-m scalestudy.MODULE` nor a file of the project")
        return
    module, rest = args[1], args[2:]
    if module not in MODULE_CHECKS:
        raise DocCommandError(f"python -m {module}: not an entry point of the project ({', '.join(MODULE_CHECKS)})")
    if named_only_ok and len(rest) <= 1 and set(rest) <= subcommands(module):
        return  # prose naming the entry point (or its subcommand), not a command to run as it stands
    MODULE_CHECKS[module](rest)


def check_train(args: list[str]) -> None:
    """Hydra's command line of scalestudy.train: composed (every job of a multirun), nothing runs."""
    from hydra._internal.utils import get_args_parser

    from scalestudy.config import compose, sweep_jobs

    parsed = parse_with(get_args_parser().parse_args, args, "python -m scalestudy.train")
    if parsed is None:
        return
    if parsed.multirun:
        cached(sweep_jobs, "train", tuple(parsed.overrides))
    else:
        cached(compose, "train", tuple(parsed.overrides))


def check_paper(args: list[str]) -> None:
    """The builder's command line (its flags as Hydra's apps read them): each target composed with the overrides."""
    from scalestudy.paper.__main__ import compose_targets, expand
    from scalestudy.paper.cli_args import parse

    parsed = parse_with(parse, args, "python -m scalestudy.paper")
    if parsed is None or parsed.help:
        return
    targets = expand(parsed.targets)
    if parsed.overrides:  # every config composes without overrides (tests/test_config.py)
        for target in targets:
            cached(compose_targets, (target,), tuple(parsed.overrides))


def check_ingest(args: list[str]) -> None:
    if args[:1] == ["logs"]:
        from scalestudy.ingest.logs.command import argument_parser

        parse_with(argument_parser().parse_args, args[1:], "python -m scalestudy.ingest logs")
        return
    from scalestudy.ingest.__main__ import data_parser, parse_args

    if args[:1] == ["data"]:
        parse_with(data_parser().parse_args, args[1:], "python -m scalestudy.ingest data")
        return

    parse_with(parse_args, args, "python -m scalestudy.ingest")


def check_scaling(args: list[str]) -> None:
    """scalestudy.scaling's hand-made command line: a command, then KEY=VALUE settings (predict, validate)."""
    from scalestudy.scaling.__main__ import COMMANDS
    from scalestudy.scaling.command_line import load_settings

    command, rest = (args[0], args[1:]) if args else ("--help", [])
    if command in ("-h", "--help"):
        return
    if command not in COMMANDS:
        raise DocCommandError(f"python -m scalestudy.scaling {command}: no such command ({', '.join(COMMANDS)})")
    if command in ("predict", "validate") and rest not in (["help"], ["-h"], ["--help"]):
        load_settings(rest)
    elif command == "sizes" and rest and (len(rest) != 2 or rest[0] != "--out"):
        raise DocCommandError(f"python -m scalestudy.scaling sizes {' '.join(rest)}: only --out PATH")


def module_parser(module: str) -> argparse.ArgumentParser:
    if module == "scalestudy.ui":
        from scalestudy.ui.server import argument_parser
    elif module == "scalestudy.profile":
        from scalestudy.profile.__main__ import argument_parser
    else:
        from scalestudy.harness.slurm.__main__ import argument_parser
    return argument_parser()


def check_arguments(module: str, args: list[str]) -> None:
    parse_with(module_parser(module).parse_args, args, f"python -m {module}")


MODULE_CHECKS = {
    "scalestudy.train": check_train,
    "scalestudy.paper": check_paper,
    "scalestudy.ingest": check_ingest,
    "scalestudy.scaling": check_scaling,
    "scalestudy.ui": functools.partial(check_arguments, "scalestudy.ui"),
    "scalestudy.profile": functools.partial(check_arguments, "scalestudy.profile"),
    "scalestudy.harness.slurm": functools.partial(check_arguments, "scalestudy.harness.slurm"),
}


def subcommands(module: str) -> set[str]:
    """The words a module takes first (its argparse subcommands; `logs` of ingest; scaling's commands)."""
    if module == "scalestudy.ingest":
        return {"logs", "data"}
    if module == "scalestudy.scaling":
        from scalestudy.scaling.__main__ import COMMANDS

        return set(COMMANDS)
    if module in ("scalestudy.train", "scalestudy.paper"):
        return set()
    actions = module_parser(module)._actions
    return {choice for a in actions if isinstance(a, argparse._SubParsersAction) for choice in a.choices}


# --------------------------------------------------------------------------------------------
# scripts, docker, environment variables


def check_script(program: str, args: list[str]) -> None:
    path = REPO / program
    if not path.is_file() or not path.stat().st_mode & 0o111:
        raise DocCommandError(f"{program}: no such executable script")
    if path.suffix == ".sh" and args and not re.search(rf"^\s*{re.escape(args[0])}\)", path.read_text(), re.M):
        raise DocCommandError(f"{program} {args[0]}: the script has no `{args[0]})` case")


def check_docker(args: list[str]) -> None:
    """`docker run ... IMAGE ARGS` of the study's image: ARGS go to its entry point, python -m scalestudy.train."""
    if args[:1] != ["run"]:
        return
    rest = args[1:]
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option.startswith("--entrypoint"):
            return  # another program than the harness
        if option in DOCKER_RUN_VALUED:
            rest.pop(0)
        elif option.split("=", 1)[0] not in DOCKER_RUN_VALUED | DOCKER_RUN_FLAGS:
            raise DocCommandError(f"docker run {option}: an option this check does not know (DOCKER_RUN_VALUED?)")
    if rest and STUDY_IMAGE.match(rest[0]):
        check_train(rest[1:])


@functools.cache
def project_text() -> str:
    """Everything that may read an environment variable: the Makefile, the recipes, scripts/ and the package."""
    files = [REPO / "Makefile", REPO / "Dockerfile", REPO / "Singularity.def", *(REPO / "scripts").glob("*")]
    files += (REPO / "src" / "scalestudy").rglob("*.py")
    return "\n".join(p.read_text(errors="replace") for p in files if p.is_file())


def check_environment_variable(name: str) -> None:
    if not re.search(rf"\b{re.escape(name)}\b", project_text()):
        raise DocCommandError(f"{name}=...: nothing of the project reads {name}")


# --------------------------------------------------------------------------------------------
# helpers


def parse_with(parse, args: list[str], name: str):
    """parse(args) as the program would (an argument parser's parse_args, or the program's own parse function); an
    argparse exit becomes a DocCommandError with argparse's message. None for --help."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parse(args)
    except SystemExit as stop:
        if stop.code in (0, None):  # --help
            return None
        raise DocCommandError(f"{name} {' '.join(args)}: {errors.getvalue().strip().splitlines()[-1]}") from None


@functools.cache
def cached(function, *args):
    """One composition per distinct command (the docs repeat `make figure-3`): Hydra's take about 0.1 s each."""
    return function(*args)


@functools.cache
def bench_harness():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_harness", REPO / "benchmarks" / "bench_harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_console_script(program: str, args: list[str]) -> None:
    """A console script of pyproject.toml: `scalestudy COMMAND ARGS` is checked as the `python -m MODULE ARGS` its
    subcommand runs (scalestudy.cli.console_module)."""
    from scalestudy import cli

    name = program.rsplit("/", 1)[-1]
    declared = tomllib.loads((REPO / "pyproject.toml").read_text()).get("project", {}).get("scripts", {})
    if declared.get(name) != "scalestudy.cli:console":
        raise DocCommandError(f"{program}: no such console script in pyproject.toml's [project.scripts]")
    if not args or args[0] in ("-h", "--help", "help"):
        return
    try:
        module, rest = cli.console_module(args)
    except ValueError as err:
        raise DocCommandError(str(err)) from None
    if module == "scalestudy.store" and rest[:1] != ["accept"]:
        raise DocCommandError(f"{program} {' '.join(args)}: the store's one command is `accept`")
    if module != "scalestudy.store":
        MODULE_CHECKS[module](rest)
