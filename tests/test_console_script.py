"""The `scalestudy` console script (pyproject.toml's [project.scripts]) and what each command's --help lists
(issue 44: commands that explain themselves)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import REPO, run_here

from scalestudy import cli

FIGURES = sorted(p.stem for p in (REPO / "conf" / "figure").glob("figure-*.yaml"))


def test_pyproject_declares_the_console_script():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"scalestudy": "scalestudy.cli:console"}


@pytest.mark.parametrize(
    ("argv", "module", "args"),
    [
        (["figure", "3"], "scalestudy.paper", ["figure-3"]),
        (["figure", "3", "11", "source=all"], "scalestudy.paper", ["figure-3", "figure-11", "source=all"]),
        (["table", "1"], "scalestudy.paper", ["table-1"]),
        (
            ["ingest", "logs", "a.log", "--experiment", "mine"],
            "scalestudy.ingest",
            ["logs", "a.log", "--experiment", "mine"],
        ),
        (["predict", "workers=512"], "scalestudy.scaling", ["predict", "workers=512"]),
        (["ui", "--auth"], "scalestudy.ui", ["--auth"]),
        (["train", "-m", "experiment=figure-1"], "scalestudy.train", ["-m", "experiment=figure-1"]),
    ],
)
def test_each_subcommand_runs_its_module(argv, module, args):
    assert cli.console_module(argv) == (module, args)


@pytest.mark.parametrize("argv", [["figure"], ["table", "source=all"], ["nosuchcommand"]])
def test_a_subcommand_without_its_target_is_refused(argv, capsys):
    assert cli.console(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: scalestudy ")
    if argv[0] == "figure":
        assert "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12" in err


def test_the_console_help_lists_every_subcommand_and_the_figures(capsys):
    assert cli.console(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n  {name} " in out for name in cli.SUBCOMMANDS)
    assert "ingest logs PATH... --experiment NAME" in out
    assert f"figures: {' '.join(f.removeprefix('figure-') for f in sorted(FIGURES, key=len))}" in out


def test_the_installed_script_runs_without_an_activated_environment(tmp_path):
    """.venv/bin/scalestudy (installed by scripts/make-env.sh with the project) runs with a PATH that holds no
    environment: what the README shows."""
    script = Path(sys.executable).parent / "scalestudy"
    assert script.is_file(), f"{script}: not installed (make env installs the project with its console script)"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run([str(script), "ingest", "--list", "--for", "figure-3"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "tf-benchmarks-2017\n", "")


@pytest.mark.parametrize(
    ("module", "listed"),
    [
        ("scalestudy.ingest", ["logs PATH... --experiment NAME", "data cifar10", "tf-benchmarks-2017"]),
        ("scalestudy.scaling", ["predict", "validate", "sizes"]),
        ("scalestudy.profile", ["{summarize}"]),
        ("scalestudy.store", ["{accept}"]),
        ("scalestudy.paper", [", ".join(sorted(FIGURES, key=len)), "table-1", "numbers-study", "figures", "all"]),
    ],
)
def test_each_help_lists_its_subcommands_and_choices(module, listed, monkeypatch, capsys):
    try:
        done = run_here(module, "--help", uri="sqlite:///unused.db", monkeypatch=monkeypatch, capsys=capsys)
        out = done.stdout
    except SystemExit as stop:  # argparse's --help
        assert stop.code == 0
        out = capsys.readouterr().out
    missing = [word for word in listed if word not in " ".join(out.split())]
    assert not missing, f"python -m {module} --help does not list {missing}:\n{out}"


def test_the_ui_help_lists_its_hosts():
    from scalestudy.ui.server import argument_parser

    assert "{127.0.0.1,localhost,::1}" in argument_parser().format_help()
