"""How the command-line entry points fail: one line saying what and where, a non-zero exit, no traceback.

    sys.exit(cli.run(main))      # in a module's `if __name__ == "__main__":`

Expected failures (bad input, a store that cannot be used, a filter that matches nothing) exit 2 with their
message; anything else is a bug and exits 1 with its type and message. `--debug` or SCALESTUDY_DEBUG=1 lets
the traceback through. SIGTERM and SIGHUP become SystemExit, so temporary files are removed as on Ctrl-C.

Two choices for the whole process, made when `run` is its command (argv not given; not for a test's call):
- MLflow's usage telemetry is off (MLFLOW_DISABLE_TELEMETRY=true) unless the user's environment sets it: the
  study's commands send nothing to a third party, and on a machine without network (a cluster's compute node)
  each command that imports MLflow would otherwise spend 1.6 to 1.7 s on it here (its records, and a wait for its
  sender at exit).
- When the command has ended, the objects it made are frozen out of the garbage collector (gc.freeze): the
  interpreter's exit then skips its final collections over them, which took 1.1 s after an import of the
  published runs and 0.5 s after drawing the figures (measured 2026-11-29). Memory goes back to the system anyway.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable

from .files import exit_on_termination


def progress(items: list, what: str, unit: str) -> object:
    """One tqdm bar over `items` on stderr where it is a terminal (its line redrawn in place, gone when done);
    elsewhere (a pipe, a log file, CI) the items themselves: a bar there is a line per redraw."""
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, desc=what, unit=unit, file=sys.stderr, leave=False)


def one_line(text: object) -> str:
    """A message on one line: newlines and tabs (Hydra's lists of choices) become single spaces."""
    return " ".join(str(text).split())


def entry(spec) -> Callable[[list[str]], int]:
    """The `main` of the module `python -m` runs (its __spec__), imported under its package's name: the name its
    functions are known by where it is imported (the console script, the tests, mutmut's mutants), not __main__."""
    import importlib

    return importlib.import_module(spec.name).main


def run(main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    command = argv is None
    argv = list(sys.argv[1:] if command else argv)
    debug = "--debug" in argv or os.environ.get("SCALESTUDY_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    exit_on_termination()
    if command:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        return main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # what reads the output stopped (`| head`): stop quietly, as other Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the flush at exit fails again
        return 141  # 128 + SIGPIPE, as a shell reports a tool the signal stopped
    except (LookupError, ValueError, RuntimeError, OSError) as err:  # SchemaError, StoreError, EmptySelection...
        if debug:
            raise
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 2
    except Exception as err:
        if debug:
            raise
        print(f"error: {type(err).__name__}: {one_line(err)} (a bug: SCALESTUDY_DEBUG=1 shows where)", file=sys.stderr)
        return 1
    finally:
        if command:
            gc.freeze()


# ---------------------------------------------------------------------------------------------
# The `scalestudy` command (pyproject.toml's [project.scripts]): `.venv/bin/scalestudy figure 3` works without an
# activated environment. Each subcommand runs one entry point exactly as `python -m MODULE ARGS` does.

SUBCOMMANDS = {  # {subcommand: (the module it runs, its arguments, what it does)}
    "figure": ("scalestudy.paper", "N... [OVERRIDE...]", "figures, e.g. `figure 3 source=all`"),
    "table": ("scalestudy.paper", "N... [OVERRIDE...]", "tables, e.g. `table 1`"),
    "paper": ("scalestudy.paper", "[TARGET...] [OVERRIDE...]", "the builder: figures, tables, all, numbers-study..."),
    "ingest": ("scalestudy.ingest", "[DATASET...]", "import the published datasets (--help: logs, data)"),
    "predict": ("scalestudy.scaling", "[KEY=VALUE...]", "the scaling model's prediction (`predict help`: the keys)"),
    "scaling": ("scalestudy.scaling", "predict|validate|sizes", "the scaling model"),
    "profile": ("scalestudy.profile", "summarize FILE...", "profile summaries (Nsight Systems, nvprof, Horovod)"),
    "store": ("scalestudy.store", "accept [RUN_ID...]", "accept measured runs as the store holds them now"),
    "ui": ("scalestudy.ui", "[--port PORT] [--auth]", "the MLflow UI on the study's store"),
    "train": ("scalestudy.train", "[OVERRIDE...]", "one training job, -m a sweep (the training environment)"),
}


def console_usage() -> str:
    """`scalestudy --help`: every subcommand, and the figures and tables that exist."""
    lines = ["usage: scalestudy COMMAND [ARGS...]   (`scalestudy COMMAND --help` says more)", ""]
    lines += [f"  {name + ' ' + args:38} {text}" for name, (_, args, text) in SUBCOMMANDS.items()]
    lines += [f"  {'ingest logs PATH... --experiment NAME':38} import your own benchmark logs (docs/data.md)"]
    lines += ["", f"figures: {' '.join(paper_numbers('figure'))}", f"tables: {' '.join(paper_numbers('table'))}"]
    return "\n".join(lines)


def paper_numbers(kind: str) -> list[str]:
    """The numbers N of conf/<kind>/<kind>-N.yaml, in order (1, 2, ..., 10)."""
    from .config import CONF_DIR

    stems = [p.stem.removeprefix(f"{kind}-") for p in (CONF_DIR / kind).glob(f"{kind}-*.yaml")]
    return sorted(stems, key=lambda n: (len(n), n))


def console_module(argv: list[str]) -> tuple[str, list[str]]:
    """(the module, its arguments) that `scalestudy ARGV` runs; ValueError for an unknown subcommand."""
    command, rest = argv[0], argv[1:]
    if command not in SUBCOMMANDS:
        raise ValueError(f"scalestudy {command}: no such command; choose from {', '.join(SUBCOMMANDS)}")
    module = SUBCOMMANDS[command][0]
    if command in ("figure", "table"):
        rest = [f"{command}-{word}" if word.isdigit() else word for word in rest]
        if not any(word.startswith(f"{command}-") for word in rest):
            known = ", ".join(paper_numbers(command))
            raise ValueError(f"scalestudy {command} N: which {command}? ({known}; `scalestudy {command} 3`)")
    if command == "predict":
        rest = ["predict", *rest]
    return module, rest


def console(argv: list[str] | None = None) -> int:
    """The `scalestudy` console script: runs the subcommand's module as `python -m` would (its own exit code)."""
    import runpy

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(console_usage())
        return 0 if argv else 2
    try:
        module, args = console_module(argv)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    sys.argv = [f"scalestudy {argv[0]}", *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0
