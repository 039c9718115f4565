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
  published runs and 0.5 s after drawing the figures (docs/benchmarks.md). Memory goes back to the system anyway.
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
