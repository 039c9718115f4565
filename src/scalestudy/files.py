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

import errno
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")


def _temporary(target: Path) -> Path:
    """The hidden temporary name of `target` for this process: .<name>.<pid>.tmp, in the same folder."""
    return target.parent / f".{target.name}.{os.getpid()}.tmp"


JOURNAL = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.set$")
# (the first target's name) -> the names of every file of its set (journal_pairs)
SetNames = Callable[[str], "set[str] | None"]


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
        with writing(*targets):
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


class WriteError(OSError):
    """A file could not be written (a full disk, a folder that cannot be written): the message names the file, the
    reason and what to do, on one line (cli.run prints it, exit 2)."""


def _os_error_in(err: BaseException) -> OSError | None:
    """The OSError behind `err`: itself, or one it was raised from or while handling (matplotlib turns a failed
    write of a PDF into "AttributeError: 'Stream' object has no attribute 'pos'" raised while handling it)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


@contextmanager
def writing(*targets: Path) -> Iterator[None]:
    """Any error of the block that comes from an OSError becomes a WriteError naming the file written (the first
    of `targets`, with the others of its set) and what to do; the block's temporaries are removed by its caller."""
    try:
        yield
    except WriteError:
        raise
    except Exception as err:
        cause = _os_error_in(err)
        if cause is None:
            raise
        target = Path(targets[0])
        others = f" (and {len(targets) - 1} other file(s) of its set)" if len(targets) > 1 else ""
        if cause.errno == errno.ENOSPC:
            why = "no space left on the device: free some space on it"
        elif cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            why = f"{cause.strerror.lower()}: make {target.parent} writable for this user"
        else:
            why = f"{(cause.strerror or str(cause)).lower()}: check {target.parent}"
        failed = WriteError(f"{target}{others} could not be written: {why}, and build again; the files already "
                            "there are left as they were")  # fmt: skip
        failed.errno = cause.errno
        raise failed from None


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


def complete_interrupted_sets(folder: Path, set_names: SetNames | None = None) -> list[Path]:
    """Finish the renames of every set a killed writer left half-done in `folder` (from its journal): the
    targets completed. Called before a build writes there; a reader finding a .NAME.PID.set journal knows the
    set NAME belongs to is being replaced.

    A journal is checked before it is used (journal_pairs): one that is not what atomic_files writes is set aside,
    renamed .NAME.PID.set.rejected with nothing renamed from it, and said in one line (kept, not removed: it is
    not this program's, so its owner may want to read it; it no longer counts as a journal)."""
    done: list[Path] = []
    if not folder.is_dir():
        return done
    for journal in sorted(folder.iterdir()):
        match = JOURNAL.match(journal.name)
        if not match or _alive(int(match["pid"])):
            continue
        try:
            pairs = journal_pairs(journal, set_names)
        except ValueError as err:
            _set_aside(journal, str(err), match["name"])
            continue
        for tmp, target in pairs:
            if tmp.is_file():
                try:
                    os.replace(tmp, target)
                except OSError as err:
                    raise OSError(err.errno, f"{journal}: renaming {tmp.name} onto {target} failed "
                                  f"({err.strerror}): remove the journal and build again") from None  # fmt: skip
                done.append(target)
        journal.unlink(missing_ok=True)
    return done


JOURNAL_MOST_BYTES = 64 * 1024  # a journal lists a few paths


def journal_pairs(journal: Path, set_names: SetNames | None = None) -> list[tuple[Path, Path]]:
    """The renames a journal lists, if it is what atomic_files writes: a JSON list of [temporary, target] pairs,
    at least two; every target a distinct file directly in the journal's folder (no '..', no other folder), the
    first the one the journal is named after; every temporary that target's temporary name for the journal's pid
    (.<target>.<pid>.tmp, in the same folder); every target of the set's files (`set_names` of the first: the
    builder's set, e.g. figure-3.pdf: figure-3.{pdf,png,json,caption.tex}; else the first's stem: figure-3.*,
    figure-3-*). Else ValueError saying what is wrong."""
    match = JOURNAL.match(journal.name)
    if match is None:
        raise ValueError("not named .NAME.PID.set")
    if journal.is_symlink() or not journal.is_file():
        raise ValueError("not a regular file")
    if journal.stat().st_size > JOURNAL_MOST_BYTES:
        raise ValueError(f"{journal.stat().st_size} bytes, more than a journal's {JOURNAL_MOST_BYTES}")
    try:
        listed = json.loads(journal.read_bytes())
    except (OSError, ValueError) as err:
        raise ValueError(f"not JSON ({' '.join(str(err).split())[:80]})") from None
    if (
        not isinstance(listed, list)
        or len(listed) < 2
        or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in listed)
    ):
        raise ValueError("not a list of at least two [temporary, target] pairs of paths")
    folder, pid = journal.parent.resolve(), match["pid"]
    first = match["name"]
    allowed = set_names(first) if set_names else None
    stem = first.split(".", 1)[0]
    pairs: list[tuple[Path, Path]] = []
    for tmp_text, target_text in listed:
        target = Path(target_text)
        if target.parent != folder or target.name in ("", ".", ".."):
            raise ValueError(f"target {target_text[:120]!r} is not a file of {folder}")
        if Path(tmp_text) != folder / f".{target.name}.{pid}.tmp":
            raise ValueError(f"temporary {tmp_text[:120]!r} is not {target.name}'s for pid {pid}")
        if allowed is not None and target.name not in allowed:
            raise ValueError(
                f"target {target.name!r} is not one of the files of {first}'s set ({', '.join(sorted(allowed))})"
            )
        if allowed is None and not (target.name.startswith(stem + ".") or target.name.startswith(stem + "-")):
            raise ValueError(f"target {target.name!r} is not a file of {first}'s set ({stem}.*)")
        if target.is_symlink() or target.is_dir():
            raise ValueError(f"target {target.name!r} is a link or a folder")
        pairs.append((Path(tmp_text), target))
    if pairs[0][1].name != first:
        raise ValueError(f"its first target is {pairs[0][1].name!r}, not {first!r} that names it")
    if len({t for _, t in pairs}) != len(pairs):
        raise ValueError("a target is listed twice")
    return pairs


def _set_aside(journal: Path, why: str, first: str) -> None:
    aside = journal.with_name(journal.name + ".rejected")
    try:
        os.replace(journal, aside)
        done = f"set aside as {aside.name} (nothing renamed from it; delete it once read)"
    except OSError as err:
        done = f"could not be set aside ({err.strerror}): remove it by hand"
    print(f"warning: {journal}: not a journal of a set of files this builder writes ({why}); {done}; if {first}'s "
          "set was being replaced, build it again", file=sys.stderr)  # fmt: skip


def write_text(target: Path, text: str) -> None:
    with atomic_files(target) as (tmp,):
        tmp.write_text(text)


def remove_stale_temporaries(folder: Path, set_names: SetNames | None = None) -> list[Path]:
    """Remove the temporary files that processes no longer alive left in `folder` (after a SIGKILL), once the sets
    they left half-renamed are completed (`set_names`: see journal_pairs)."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    completed = complete_interrupted_sets(folder, set_names)
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
