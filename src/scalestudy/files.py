"""Files written whole, and the signals that would leave them half-written.

`atomic_files` / `write_text`: every file is written under a temporary name beside its target and renamed onto it
only once all of a set are complete, and the set is renamed as a whole (a journal lists its renames first; a
SIGKILL between two is completed by the next writer in the folder); on any error (or SIGINT/SIGTERM, which the
command-line entry points turn into exceptions through `exit_on_termination`) the temporary files are removed. A
SIGKILL can leave one behind: `remove_stale_temporaries` (called before a build writes) removes those of dead
processes.

Standard library only: the rank processes, the driver and the builder all use it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")


def _temporary(target: Path) -> Path:
    """The hidden temporary name of `target` for this process: .<name>.<pid>.tmp, in the same folder."""
    return target.parent / f".{target.name}.{os.getpid()}.tmp"


JOURNAL = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.set$")


@contextmanager
def atomic_files(*targets: Path) -> Iterator[list[Path]]:
    """Yield one temporary path per target; when the block succeeds, rename every one onto its target.

    Nothing is renamed until all are written, so a failing block leaves every target as it was; the
    temporary files are removed on any exit. The renames replace the set as a whole: before the first, a journal
    (.<first target>.<pid>.set, beside it) lists them, and SIGTERM, SIGINT and SIGHUP wait until the last is
    done; a SIGKILL between two renames leaves the journal, and the next writer in that folder
    (remove_stale_temporaries) completes the set from it, so old and new files never stay side by side.
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
        _rename_as_a_set(list(zip(temporaries, targets)))
    finally:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)


def _test_signal() -> None:
    """SCALESTUDY_SIGNAL_BEFORE_RENAME=KILL|TERM: the tests' way to stop a writer with all temporary files written
    and none renamed yet."""
    name = os.environ.get("SCALESTUDY_SIGNAL_BEFORE_RENAME")
    if name:
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))


def _journal(first: Path, pid: int | None = None) -> Path:
    return first.parent / f".{first.name}.{pid or os.getpid()}.set"


def _rename_as_a_set(pairs: list[tuple[Path, Path]]) -> None:
    journal = _journal(pairs[0][1])
    stopping = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    blocked = hasattr(signal, "pthread_sigmask")
    if blocked:
        signal.pthread_sigmask(signal.SIG_BLOCK, stopping)  # delivered after the last rename
    try:
        if len(pairs) > 1:
            _write_journal(journal, pairs)
        for n, (tmp, target) in enumerate(pairs, 1):
            _test_kill_at_rename(n)
            os.replace(tmp, target)
        _test_kill_at_rename(len(pairs) + 1)
        journal.unlink(missing_ok=True)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)


def _write_journal(journal: Path, pairs: list[tuple[Path, Path]]) -> None:
    tmp = journal.with_name(journal.name + ".part")
    with tmp.open("w") as handle:
        json.dump([[str(a.resolve()), str(b.resolve())] for a, b in pairs], handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, journal)


def _test_kill_at_rename(n: int) -> None:
    """SCALESTUDY_KILL_AT_RENAME=N: the tests' way to SIGKILL a writer just before the N-th rename of a set
    (N = the set's size + 1: after the last rename, before its journal is removed)."""
    if os.environ.get("SCALESTUDY_KILL_AT_RENAME") == str(n):
        os.kill(os.getpid(), signal.SIGKILL)


def complete_interrupted_sets(folder: Path) -> list[Path]:
    """Finish the renames of every set a killed writer left half-done in `folder` (from its journal): the
    targets completed. Called before a build writes there; a reader finding a .NAME.PID.set journal knows the
    set NAME belongs to is being replaced."""
    done: list[Path] = []
    if not folder.is_dir():
        return done
    for journal in sorted(folder.iterdir()):
        match = JOURNAL.match(journal.name)
        if not match or _alive(int(match["pid"])):
            continue
        try:
            pairs = json.loads(journal.read_text())
        except (OSError, ValueError):
            pairs = []  # cut short while written: no rename had started
        for tmp, target in pairs:
            if Path(tmp).is_file():
                os.replace(tmp, target)
                done.append(Path(target))
        journal.unlink(missing_ok=True)
    return done


def write_text(target: Path, text: str) -> None:
    with atomic_files(target) as (tmp,):
        tmp.write_text(text)


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files that processes no longer alive left in `folder` (after a SIGKILL)."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    completed = complete_interrupted_sets(folder)
    if completed:
        print(f"completed the renames of a set of files a killed build left half-replaced: "
              f"{', '.join(p.name for p in completed)}", file=sys.stderr)  # fmt: skip
    for path in folder.iterdir():
        match = TEMPORARY.match(path.name) or re.match(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.set\.part$", path.name)
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
