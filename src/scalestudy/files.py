"""Files written whole, and the signals that would leave them half-written.

`atomic_files` / `write_text`: every file is written under a temporary name beside its target and renamed onto it
only once all of a set are complete; on any error (or SIGINT/SIGTERM, which the command-line entry points turn
into exceptions through `exit_on_termination`) the temporary files are removed. A SIGKILL can leave one behind:
`remove_stale_temporaries` (called before a build writes) removes those of dead processes.

Standard library only: the rank processes, the driver and the builder all use it.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")


def _temporary(target: Path) -> Path:
    """The hidden temporary name of `target` for this process: .<name>.<pid>.tmp, in the same folder."""
    return target.parent / f".{target.name}.{os.getpid()}.tmp"


@contextmanager
def atomic_files(*targets: Path) -> Iterator[list[Path]]:
    """Yield one temporary path per target; when the block succeeds, rename every one onto its target.

    Nothing is renamed until all are written, so a failing block leaves every target as it was; the
    temporary files are removed on any exit.
    """
    targets = tuple(Path(t) for t in targets)
    temporaries = [_temporary(t) for t in targets]
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield temporaries
        for tmp, target in zip(temporaries, targets):
            if not tmp.is_file():
                raise FileNotFoundError(f"{target}: nothing was written to its temporary file {tmp}")
            os.chmod(tmp, 0o644)
        _test_signal()
        for tmp, target in zip(temporaries, targets):
            os.replace(tmp, target)
    finally:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)


def _test_signal() -> None:
    """SCALESTUDY_SIGNAL_BEFORE_RENAME=KILL|TERM: the tests' way to stop a writer with all temporary files written
    and none renamed yet (the one moment a kill could leave a set of files half old, half new)."""
    name = os.environ.get("SCALESTUDY_SIGNAL_BEFORE_RENAME")
    if name:
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))


def write_text(target: Path, text: str) -> None:
    with atomic_files(target) as (tmp,):
        tmp.write_text(text)


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files that processes no longer alive left in `folder` (after a SIGKILL)."""
    removed = []
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        match = TEMPORARY.match(path.name)
        if not match or _alive(int(match["pid"])):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_on_termination() -> None:
    """Turn SIGTERM (and SIGHUP) into SystemExit, so `finally` blocks remove temporary files as on Ctrl-C."""

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
