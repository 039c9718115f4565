#!/usr/bin/env python3
"""Mutation testing with mutmut over the modules that compute, parse, fetch and store ([tool.mutmut] of
pyproject.toml), and a report: killed / survived / timeout / no tests per module, each survivor's diff, and the
triage of docs/mutation-triage.yaml (why a survivor is equivalent).

    make mutation-check                                   # every module (hours on 2 cores; resumes where it stopped)
    .venv/bin/python scripts/mutation_report.py --run 'scalestudy.derive*'   # the mutants of one module
    .venv/bin/python scripts/mutation_report.py --run 'scalestudy.derive*' --again  # those not killed, again
    .venv/bin/python scripts/mutation_report.py --run --again --relink       # every mutant not killed, fast first
    .venv/bin/python scripts/mutation_report.py                              # the report of what has run

mutmut copies src/ (and also_copy) into mutants/, generates every mutant of a function behind a trampoline, and runs
the fast tests (`-m "not integration"`) that call that function in a forked pytest, the mutant chosen by
MUTANT_UNDER_TEST. Here:
- the published runs are imported once, with the unmutated code, and every test session copies that store
  (SCALESTUDY_TEST_PUBLISHED_STORE, tests/conftest.py): a mutant of an importer is caught only by tests that import
  in the test's own process, which is what the report should count.
- PYTHONPATH puts mutants/src first, so a test that runs `python -m scalestudy...` in a subprocess runs the mutant too
  (mutmut links a test to a function only by calls made in the test's own process, though).
- the raw-file mirror is named by its absolute path: the tests run inside mutants/, away from ../shared/reference.
Exit code 0 when the killed share of the checked mutants reaches --target, 1 when not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out" / "mutation"
TRIAGE = REPO / "docs" / "mutation-triage.yaml"
# mutmut's exit codes of a mutant's test run, as its `results` names them (mutmut/stats.py).
STATUS = {1: "killed", 3: "killed", 37: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          None: "not checked"}  # fmt: skip
# A mutant whose tests ran past their limit counts as caught, as mutmut counts it: an infinite loop is a bug found.
CAUGHT = ("killed", "timeout")


def mirror() -> str | None:
    if os.environ.get("SCALESTUDY_DATA_MIRROR"):
        return str(Path(os.environ["SCALESTUDY_DATA_MIRROR"]).resolve())
    shared = REPO.parent / "shared" / "reference"
    cache = Path(os.environ.get("SCALESTUDY_DATA_CACHE", Path.home() / ".cache" / "scalestudy"))
    return next((str(p.resolve()) for p in (shared, cache) if p.is_dir()), None)


def published_store(env: dict) -> Path:
    """The published runs imported by the unmutated code (src/), once per run of this script."""
    store = OUT / "published" / "store.db"
    store.parent.mkdir(parents=True, exist_ok=True)
    for old in (store, store.parent / "store-artifacts"):
        subprocess.run(["rm", "-rf", str(old)], check=True)
    env = {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{store}", "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "scalestudy.ingest"], cwd=REPO, env=env, capture_output=True,
                          text=True)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the import of the published runs failed:\n{proc.stderr[-2000:]}")
    return store


def tree_copy(dest: Path) -> None:
    """The working tree's files (tracked and untracked, not ignored) outside src/ (mutmut writes that), copied into
    `dest` and committed there as a git repository of its own: tests that ask git what the checkout holds (no raw
    file committed) then ask mutants/, not the checkout around it, which ignores mutants/."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")  # fmt: skip
    # what an earlier copy left that the tree no longer has (a moved test would be collected twice); src/ and
    # mutmut's own files stay: they hold its mutants and results
    for entry in dest.iterdir() if dest.is_dir() else []:
        if entry.name not in ("src", ".git") and not entry.name.startswith("mutmut"):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for name in filter(None, files):
        if not name.startswith("src/") and (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    (dest / "src").mkdir(exist_ok=True)
    git = ["git", "-c", "user.name=mutation-check", "-c", "user.email=mutation-check@localhost"]
    if not (dest / ".git").exists():
        subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text("*.meta\n*.spans\n__pycache__/\n")
    subprocess.run([*git, "add", "-A", "."], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "the tree under mutation"], cwd=dest, check=True)


def forget(relink: bool, statuses: tuple[str, ...] = ("no tests",)) -> None:
    """Mark the mutants of these statuses as unchecked, so that mutmut (run without names) runs them again. By default
    those it found no test for: this run looks for their tests again (new tests, or with `relink` the whole record of
    which test calls which function, made again: the stats file)."""
    if relink:
        (REPO / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    for meta in (REPO / "mutants" / "src").rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        if any(STATUS.get(code, "suspicious") in statuses for code in codes.values()):
            data["exit_code_by_key"] = {
                k: None if STATUS.get(c, "suspicious") in statuses else c for k, c in codes.items()
            }
            meta.write_text(json.dumps(data))


def run_mutmut(names: list[str], max_children: int, log: Path, relink: bool = False) -> int:
    # Made before Python starts (a PYTHONPATH entry missing at start-up is cached as absent for good).
    tree_copy(REPO / "mutants")
    forget(relink)
    # mutmut_site/sitecustomize.py: what a test's `python -m scalestudy...` child calls counts for the test
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'mutants' / 'src'}:{REPO / 'scripts' / 'mutmut_site'}")
    env.pop("SCALESTUDY_REQUIRE_ALL", None)
    found = mirror()
    if not found:
        print("error: no mirror of the third-party raw files (../shared/reference or the cache)", file=sys.stderr)
        return 2
    env["SCALESTUDY_DATA_MIRROR"] = found
    env["SCALESTUDY_TEST_PUBLISHED_STORE"] = str(published_store(env))
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{OUT / 'scratch-store.db'}"  # never the user's .mlflow
    cmd = [str(Path(sys.executable).parent / "mutmut"), "run", "--max-children", str(max_children), *names]
    shown = " ".join(cmd[:4] + names[:3]) + (f" ... ({len(names)} names)" if len(names) > 3 else "")
    print(f"{shown}  (log: {log})", flush=True)
    with log.open("w") as out:
        return subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT).returncode


def module_of(meta: Path) -> str:
    """mutants/src/scalestudy/ingest/fetch.py.meta -> scalestudy/ingest/fetch.py"""
    return str(meta.relative_to(REPO / "mutants" / "src"))[: -len(".meta")]


def results() -> dict[str, dict[str, str]]:
    """{module: {mutant name: status}} from mutmut's meta files."""
    found = {}
    for meta in sorted((REPO / "mutants" / "src").rglob("*.py.meta")):
        if not (REPO / "src" / module_of(meta)).is_file():  # a module since moved or removed
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        found[module_of(meta)] = {name: STATUS.get(code, "suspicious") for name, code in codes.items()}
    return found


def diff(name: str, module: str) -> str:
    """The mutant's diff, from mutants/src/<module> (a module since moved or removed in src/ still has one)."""
    os.chdir(REPO)  # mutmut reads mutants/ relative to the working folder
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    try:
        return get_diff_for_mutant(name, path=Path("src") / module)
    except Exception as err:  # a mutants/ copy older than mutmut's index of it
        return f"(no diff: {type(err).__name__}: {err})"


def load_triage() -> dict[str, str]:
    """{mutant name: why it is equivalent or not worth a test} from docs/mutation-triage.yaml."""
    if not TRIAGE.is_file():
        return {}
    entries = yaml.safe_load(TRIAGE.read_text()) or {}
    for name, why in entries.items():
        if not isinstance(why, str) or not why.strip():
            raise ValueError(f"{TRIAGE.name}: {name}: the reason must be a non-empty text")
    return entries


def reason(name: str, triage: dict[str, str]) -> str | None:
    """The triage of mutant `name`: its own entry, else that of a glob over it (a whole function that no fast test
    can reach, e.g. `scalestudy.scaling.sizes.x_count_keras__mutmut_*`: it needs TensorFlow)."""
    if name in triage:
        return triage[name]
    return next((why for key, why in triage.items() if "*" in key and fnmatch.fnmatchcase(name, key)), None)


def report(found: dict[str, dict[str, str]], triage: dict[str, str], seconds: float | None) -> tuple[str, float]:
    statuses = ("killed", "timeout", "survived", "no tests", "skipped", "suspicious", "not checked")
    lines = ["# Mutation testing (mutmut)", ""]
    if seconds is not None:
        lines += [f"Run time of this call: {seconds / 60:.1f} min.", ""]
    lines += ["| module | mutants | " + " | ".join(statuses) + " | killed % | triaged |",
              "|---|" + "---:|" * (len(statuses) + 3)]  # fmt: skip
    total, triaged, opened = Counter(), 0, 0
    for module, mutants in found.items():
        counts = Counter(mutants.values())
        total.update(counts)
        checked = sum(counts.values()) - counts["not checked"]
        score = 100 * sum(counts[s] for s in CAUGHT) / checked if checked else 0
        open_ = [n for n, s in mutants.items() if s not in CAUGHT and s != "not checked"]
        cells = " | ".join(str(counts[s]) for s in statuses)
        shown = f"{score:.1f}" if checked else "not run"
        known = sum(reason(n, triage) is not None for n in open_)
        triaged, opened = triaged + known, opened + len(open_)
        lines.append(f"| {module} | {len(mutants)} | {cells} | {shown} | {known}/{len(open_)} |")
    checked = sum(total.values()) - total["not checked"]
    score = 100 * sum(total[s] for s in CAUGHT) / checked if checked else 0
    lines.append(f"| **all** | {sum(total.values())} | " + " | ".join(str(total[s]) for s in statuses)
                 + f" | **{score:.1f}** | {triaged}/{opened} |")  # fmt: skip
    lines += ["", "## Mutants not killed", ""]
    for module, mutants in found.items():
        for name, status in mutants.items():
            if status in CAUGHT or status == "not checked":
                continue
            why = reason(name, triage)
            lines += [f"### `{name}`: {status}", "", f"Triage: {why}" if why else "Triage: **open**", ""]
            lines += ["```diff", diff(name, module), "```", ""]
    return "\n".join(lines) + "\n", score


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", nargs="*", metavar="NAME", help="run mutmut first (on these mutant names/globs)")
    parser.add_argument(
        "--again",
        action="store_true",
        help="with --run: only the mutants of those names/globs not killed yet (after new tests); no names: all",
    )
    parser.add_argument(
        "--relink",
        action="store_true",
        help="with --run: make mutmut's record of which test calls which function again (all tests)",
    )
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--report", type=Path, default=OUT / "report.md", help="where the report goes")
    parser.add_argument("--target", type=float, default=85.0, help="the killed share wanted, in %% (default 85)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    seconds = None
    if args.run is not None:
        started = time.monotonic()
        names = args.run
        if args.again and not args.run:  # every mutant not caught: unchecked again, run in mutmut's own order
            forget(False, ("survived", "no tests", "skipped", "suspicious"))
        elif args.again:  # mutmut reruns a mutant that has a result only when it is named
            globs, known = args.run, [name for mutants in results().values() for name in mutants]
            names = [name for mutants in results().values() for name, status in mutants.items()
                     if status not in CAUGHT and any(fnmatch.fnmatchcase(name, g) for g in globs)]  # fmt: skip
            # a glob no known mutant matches (a module or function new since the last run) goes as it is
            names += [g for g in globs if not any(fnmatch.fnmatchcase(name, g) for name in known)]
            if not names:
                print("every mutant of those names is killed already")
                names = None
        code = run_mutmut(names, args.max_children, OUT / "mutmut.log", args.relink) if names is not None else 0
        seconds = time.monotonic() - started
        if code not in (0, 1):
            print(f"error: mutmut stopped with exit code {code}; see {OUT / 'mutmut.log'}", file=sys.stderr)
            return 2
    try:
        triage = load_triage()
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    found = results()
    if not found:
        print("error: no mutmut results under mutants/ (run with --run first)", file=sys.stderr)
        return 2
    text, score = report(found, triage, seconds)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text)
    print(text.split("\n## ")[0])
    print(f"report: {args.report}")
    return 0 if score >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
