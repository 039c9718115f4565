#!/usr/bin/env python3
"""Plant representative bugs one at a time in a scratch copy of the tree and report which the fast tests catch.

    .venv/bin/python scripts/mutation_check.py                 # every list of scripts/mutations.yaml
    .venv/bin/python scripts/mutation_check.py --list holdout  # one list; --only ID runs one bug
    make mutation-check

The real tree is never modified: its files (tracked and untracked, not ignored) are copied to a temporary folder
made a git repository of its own, and the tests run there with this environment's Python and `src/` of the copy
first on PYTHONPATH (so the planted bug is what they import, in subprocesses too). For each bug: the file is
restored, the one substitution made (its `old` text must occur exactly once), and `pytest -x -q -m "not
integration"` run on the bug's own test files only (`tests:` in the list: the fast tests that should catch it, a
subset chosen per bug to keep each run short), under a time limit. First the same test files run on the
unchanged copy: a bug counts as caught only by tests that pass without it.

The published runs are imported once, on the unchanged copy, and each run copies that store
(SCALESTUDY_TEST_PUBLISHED_STORE, tests/conftest.py), except for bugs planted in the importers, the schema or
store/, whose runs import again. Exit code 0 when every bug is caught, 1 when one is not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MUTATIONS = REPO / "scripts" / "mutations.yaml"
FIELDS = ("id", "kind", "breaks", "file", "old", "new", "tests")
# Code a prebuilt store would hide a bug in: bugs planted here import the published runs again.
IMPORT_PATH = ("src/scalestudy/ingest/", "src/scalestudy/schema.py", "src/scalestudy/store/")


def load(path: Path) -> dict[str, list[dict]]:
    lists = yaml.safe_load(path.read_text())
    for name, bugs in lists.items():
        seen = set()
        for i, bug in enumerate(bugs):
            missing = [f for f in FIELDS if f not in bug]
            if missing:
                raise ValueError(f"{path.name}: {name}[{i}] lacks {missing}")
            if bug["id"] in seen:
                raise ValueError(f"{path.name}: {name}: id {bug['id']!r} repeats")
            seen.add(bug["id"])
    return lists


def scratch_copy(dest: Path) -> None:
    """The working tree's files (tracked and untracked, not ignored), as a git repository of its own."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git = ["git", "-c", "user.name=mutation-check", "-c", "user.email=mutation-check@localhost"]
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "mutation-check scratch copy"], cwd=dest, check=True)


def environment(copy: Path, store: Path | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(copy / "src"), PYTHONDONTWRITEBYTECODE="1")
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{copy / '.mlflow' / 'store.db'}"
    env.pop("SCALESTUDY_REQUIRE_ALL", None)
    # The copy lies in a temporary folder, away from the mirror beside the checkout (../shared/reference) that the
    # tests read the third-party raw files from: point them at it, or they skip.
    mirror = REPO.parent / "shared" / "reference"
    if not env.get("SCALESTUDY_DATA_MIRROR") and mirror.is_dir():
        env["SCALESTUDY_DATA_MIRROR"] = str(mirror)
    if store:
        env["SCALESTUDY_TEST_PUBLISHED_STORE"] = str(store)
    else:
        env.pop("SCALESTUDY_TEST_PUBLISHED_STORE", None)
    return env


def pytest(copy: Path, tests: list[str], env: dict, timeout: float) -> tuple[str, str, float]:
    """(outcome, the failing tests or the tail of the output, seconds): passed, failed, error, timeout or skipped
    (all ran or were deselected, but some skipped: the unchanged copy must not, and a bug it hides is not caught)."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not integration",
           "-rfEs", *tests]  # fmt: skip
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"no result in {timeout:g} s", time.monotonic() - started
    seconds = time.monotonic() - started
    failed = re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", proc.stdout, flags=re.MULTILINE)
    skipped = re.findall(r"^SKIPPED \[\d+\] (.+)$", proc.stdout, flags=re.MULTILINE)
    if proc.returncode == 0 and skipped:  # a test that did not run proves nothing: neither caught nor passed
        return "skipped", "; ".join(skipped[:3]), seconds
    if proc.returncode == 0:
        return "passed", "", seconds
    if proc.returncode == 1 and failed:
        return "failed", ", ".join(failed), seconds
    return "error", (failed and ", ".join(failed)) or proc.stdout[-400:] + proc.stderr[-400:], seconds


def plant(copy: Path, bug: dict) -> str:
    """Make the bug's substitution in the copy; returns the original text to restore."""
    path = copy / bug["file"]
    text = path.read_text()
    count = text.count(bug["old"])
    if count != 1:
        raise ValueError(f"{MUTATIONS.name}: bug {bug['id']}: its `old` text occurs {count} times in {bug['file']}")
    path.write_text(text.replace(bug["old"], bug["new"]))
    return text


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `make mutation-lists ARGS=...` (scripts/mutation_check.py ...)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bugs", type=Path, default=MUTATIONS, help="the YAML of bugs (default scripts/mutations.yaml)"
    )
    parser.add_argument("--list", default="all", help="which list of the file (main, holdout, ..., kinds45) or all")
    parser.add_argument("--only", action="append", help="run only the bug with this id (repeatable)")
    parser.add_argument("--timeout", type=float, default=240, help="seconds per test run (default 240)")
    parser.add_argument("--markdown", type=Path, help="also write the result table to this file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    try:
        lists = load(args.bugs)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    chosen = [(name, bug) for name, bugs in lists.items() if args.list in ("all", name) for bug in bugs
              if not args.only or bug["id"] in args.only]  # fmt: skip
    if not chosen:
        print("error: no bug chosen", file=sys.stderr)
        return 2

    workdir = Path(tempfile.mkdtemp(prefix="scalestudy-mutation-"))
    copy = workdir / "tree"
    started = time.monotonic()
    rows = []
    try:
        scratch_copy(copy)
        probe = subprocess.run([sys.executable, "-c", "import scalestudy; print(scalestudy.__file__)"],
                               cwd=copy, env=environment(copy, None), capture_output=True, text=True)  # fmt: skip
        if not probe.stdout.strip().startswith(str(copy)):
            print(f"error: the scratch copy's package is not the one imported: {probe.stdout}{probe.stderr}")
            return 2
        store = workdir / "published" / "store.db"
        print(f"scratch copy: {copy}; importing the published runs once", flush=True)
        env = {**environment(copy, None), "MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
        ingest = subprocess.run([sys.executable, "-m", "scalestudy.ingest"], cwd=copy, capture_output=True,
                                text=True, env=env)  # fmt: skip
        if ingest.returncode != 0:
            print(f"error: the import on the unchanged copy failed:\n{ingest.stderr[-2000:]}", file=sys.stderr)
            return 2
        files = sorted({t.split("::")[0] for _, bug in chosen for t in bug["tests"]})
        outcome, detail, seconds = pytest(copy, files, environment(copy, store), args.timeout * 2)
        print(f"unchanged copy: {' '.join(files)}: {outcome} ({seconds:.0f} s)", flush=True)
        if outcome != "passed":
            print(f"error: the tests fail without any bug planted: {detail}", file=sys.stderr)
            return 2
        for name, bug in chosen:
            original = plant(copy, bug)
            try:
                prebuilt = None if bug["file"].startswith(IMPORT_PATH) else store
                outcome, detail, seconds = pytest(copy, bug["tests"], environment(copy, prebuilt), args.timeout)
            finally:
                (copy / bug["file"]).write_text(original)
            caught = outcome in ("failed", "error", "timeout")
            rows.append({"list": name, **bug, "outcome": outcome, "caught": caught, "by": detail, "s": seconds})
            print(f"[{name}] {bug['id']}: {'caught' if caught else 'NOT CAUGHT'} ({outcome}, {seconds:.0f} s) "
                  f"{detail[:300]}", flush=True)  # fmt: skip
    finally:
        if args.keep:
            print(f"kept: {copy}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    table = report(rows, time.monotonic() - started)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 0 if all(r["caught"] for r in rows) else 1


def report(rows: list[dict], seconds: float) -> str:
    lines = []
    for name in dict.fromkeys(r["list"] for r in rows):
        mine = [r for r in rows if r["list"] == name]
        lines.append(f"{name}: {sum(r['caught'] for r in mine)} of {len(mine)} planted bugs caught")
    lines += [
        f"({seconds / 60:.1f} min)",
        "",
        "| list | bug | kind | what it breaks | caught by |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        by = r["by"] if r["outcome"] == "failed" else f"{r['outcome']}: {r['by'][:80]}"
        by = re.sub(r"\[([^\]-]*-[^\]-]*)-[^\]]*\]", r"[\1]", by)  # a parametrised id: its first two values
        by = "**not caught**" if not r["caught"] else by.replace("|", "\\|").replace("tests/", "")
        lines.append(f"| {r['list']} | `{r['id']}` | {r['kind']} | {r['breaks']} | {by} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
