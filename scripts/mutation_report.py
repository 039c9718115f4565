#!/usr/bin/env python3
"""Mutation testing with mutmut over the modules that compute, parse, fetch and store ([tool.mutmut] of
pyproject.toml), and a report: killed / survived / timeout / no tests per module, each survivor's diff, and the
triage of docs/mutation-triage.yaml (why a survivor is equivalent).

    make mutation-check                                   # every module (hours on 2 cores; resumes where it stopped)
    .venv/bin/python scripts/mutation_report.py --run 'scalestudy.derive*'   # the mutants of one module
    .venv/bin/python scripts/mutation_report.py --run 'scalestudy.derive*' --again  # those not killed nor triaged
    .venv/bin/python scripts/mutation_report.py --run --again --relink       # every mutant not killed nor triaged
    .venv/bin/python scripts/mutation_report.py                              # the report of what has run
    .venv/bin/python scripts/mutation_report.py --run --fresh                # every mutant again, ledger ignored

mutmut copies src/ (and also_copy) into mutants/, generates every mutant of a function behind a trampoline, and runs
the fast tests (`-m "not integration"`) that call that function in a forked pytest, the mutant chosen by
MUTANT_UNDER_TEST. Here:
- the published runs are imported once, with the unmutated code, and every test session copies that store
  (SCALESTUDY_TEST_PUBLISHED_STORE, tests/conftest.py): a mutant of an importer is caught only by tests that import
  in the test's own process, which is what the report should count.
- PYTHONPATH puts mutants/src first, so a test that runs `python -m scalestudy...` in a subprocess runs the mutant too
  (mutmut links a test to a function only by calls made in the test's own process, though).
- the raw-file mirror is named by its absolute path: the tests run inside mutants/, away from ../shared/reference.
- the results live on in benchmarks/mutation-results.json (committed, the ledger): a run in a new checkout starts from
  them, and mutmut tests again only the functions whose source changed since (mutmut keeps a result while the
  function's hash is the same); each run adds what it checked. A full run is hours on 2 cores: it accumulates over
  several sessions. `--fresh` ignores the ledger (every mutant tested against today's tests).
Exit code 0 when the killed share of all mutants (those not checked yet count as not killed) reaches --target, 1 when
not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: the ledger's module beside this one
import mutation_ledger as ledgers
from mutation_ledger import CAUGHT, STATUS, prefix_of

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out" / "mutation"
TRIAGE = REPO / "docs" / "mutation-triage.yaml"
LEDGER = REPO / "benchmarks" / "mutation-results.json"
# What `--run --again` (no names) tests again: every mutant not killed outright and not triaged. A timeout too: on a
# loaded machine a slow test passes its limit, and that counted as caught.
AGAIN = ("survived", "no tests", "skipped", "suspicious", "timeout")


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
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"the tree under mutation: {commit_of(REPO)}"],
                   cwd=dest, check=True)  # fmt: skip


def commit_of(repo: Path) -> str:
    """The checkout's commit, '+' when files differ from it: what a run's results were measured on."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True,
                           text=True).stdout.strip()  # fmt: skip
    return (head.stdout.strip() or "unknown") + ("+" if dirty else "")


def forget(relink: bool, statuses: tuple[str, ...] = ("no tests",), spare=lambda name: False) -> None:
    """Mark the mutants of these statuses as unchecked, so that mutmut (run without names) runs them again. By default
    those it found no test for: this run looks for their tests again (new tests, or with `relink` the whole record of
    which test calls which function, made again: the stats file). `spare(name)`: true for a mutant to leave as it is
    (a triaged survivor: testing it again costs all its tests' time and tells what the triage says)."""
    if relink:
        (REPO / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    for meta in (REPO / "mutants" / "src").rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        again = {k for k, c in codes.items() if STATUS.get(c, "suspicious") in statuses and not spare(k)}
        if again:
            data["exit_code_by_key"] = {k: None if k in again else c for k, c in codes.items()}
            meta.write_text(json.dumps(data))


def keep(ledger: dict, seconds: float, ran: bool = True) -> None:
    """Merge mutants/'s results into the ledger and save it, with an entry for this run: when it ended, on which
    commit, how long, and the ledger's totals after it (a run that stopped early leaves older results standing)."""
    merged = ledgers.record(ledger, REPO)
    counts = Counter(status for mutants in ledgers.statuses(merged).values() for status in mutants.values())
    checked = sum(counts.values()) - counts["not checked"]
    entry = {**run_entry(seconds), "mutants": sum(counts.values()), "checked": checked,
             "caught": sum(counts[s] for s in CAUGHT)}  # fmt: skip
    ledgers.save({**merged, "runs": merged["runs"] + ([entry] if ran else [])}, LEDGER)  # mutmut failed: no run


def run_entry(seconds: float) -> dict:
    """When the run ended, on which commit, how long."""
    # the commit tree_copy wrote into mutants/'s own history (the checkout may have moved on since the run began)
    made = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=REPO / "mutants", capture_output=True, text=True)
    prefix = "the tree under mutation: "
    commit = made.stdout.strip().removeprefix(prefix) if made.stdout.startswith(prefix) else commit_of(REPO)
    return {"ended": time.strftime("%Y-%m-%d %H:%M"), "commit": commit or "unknown", "minutes": round(seconds / 60, 1)}


def run_mutmut(
    names: list[str],
    max_children: int,
    log: Path,
    relink: bool = False,
    ledger: dict | None = None,
    again: tuple[str, ...] = (),
    triage: dict[str, str] | None = None,
) -> int:
    """mutmut run; `ledger`: the results to start from where mutants/ has none (None: every mutant afresh); `again`:
    the statuses to test again (after the ledger is restored: a new checkout has no mutants/ before that), but not
    the mutants `triage` explains."""
    # Made before Python starts (a PYTHONPATH entry missing at start-up is cached as absent for good).
    tree_copy(REPO / "mutants")
    if ledger is None:
        forget(relink, tuple(set(STATUS.values()) | {"suspicious"}))
    else:
        print(f"{ledgers.restore(ledger, REPO)} results restored from {LEDGER.relative_to(REPO)}")
        forget(relink, ("no tests",))
        forget(False, again, spare=lambda name: reason(name, triage or {}) is not None)
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
        return run_stoppable(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def run_stoppable(cmd: list[str], grace: float = 120, **popen) -> int:
    """Run mutmut (`cmd`) to its end; its exit code. Stopped (Ctrl-C, or SIGTERM: both raise KeyboardInterrupt here),
    it sends SIGINT to mutmut alone (mutmut runs in a session of its own: its workers' interrupted tests would read
    as killed mutants) and waits up to `grace` seconds: mutmut then stops its workers and writes its results, which
    this script keeps after. A SIGINT that mutmut lost (during its set-up) is sent once more; past a second grace,
    mutmut and its workers are killed (mutmut killed alone would leave its forked workers running)."""
    # SIGINT handled before mutmut starts: a run started in the background by a shell without job control inherits
    # SIGINT ignored, and an ignored signal stays ignored in the child (a handled one is reset to its default)
    old = [signal.signal(sig, signal.default_int_handler) for sig in (signal.SIGTERM, signal.SIGINT)]
    try:
        proc = subprocess.Popen(cmd, start_new_session=True, **popen)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the save short
            for _ in range(2):
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            else:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
    finally:
        signal.signal(signal.SIGTERM, old[0])
        signal.signal(signal.SIGINT, old[1])


def module_of(meta: Path) -> str:
    return ledgers.module_of(meta, REPO)


def results() -> dict[str, dict[str, str]]:
    """{module: {mutant name: status}} from mutmut's meta files; without mutants/ (a new checkout), from the
    ledger."""
    if not any((REPO / "mutants" / "src").rglob("*.py.meta")):
        return ledgers.statuses(ledgers.load(LEDGER))
    found = {}
    for meta in sorted((REPO / "mutants" / "src").rglob("*.py.meta")):
        if not (REPO / "src" / module_of(meta)).is_file():  # a module since moved or removed
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        found[module_of(meta)] = {name: STATUS.get(code, "suspicious") for name, code in codes.items()}
    return found


def diff(name: str, module: str) -> str:
    """The mutant's diff, from mutants/src/<module> (a module since moved or removed in src/ still has one)."""
    if not (REPO / "mutants" / "src" / module).is_file():
        return "(no diff: mutants/ is not made here; make mutation-check makes it)"
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


def module_prefix(name: str) -> str:
    """scalestudy.derive.x_f__mutmut_3 -> scalestudy.derive"""
    return name.rsplit("__mutmut_", 1)[0].rpartition(".")[0]


def stale(found: dict[str, dict[str, str]], triage: dict[str, str], changed: set[str] = frozenset()) -> dict[str, str]:
    """Triage entries that name no survivor, with the mutant's status: killed, or no such mutant in its module's
    results (a function changed since renumbers its mutants: the entry then likely speaks of another mutant).
    Mutants of modules with no results yet, or `changed` since (src/ paths: results of older code), are not judged."""
    status = {name: st for mutants in found.values() for name, st in mutants.items()}
    modules = {module_prefix(name) for name in status} - {prefix_of(m.removeprefix("src/")) for m in changed}
    status = {name: st for name, st in status.items() if module_prefix(name) in modules}
    return {
        name: status.get(name, "no such mutant")
        for name in sorted(triage)
        if "*" not in name and (status.get(name) in CAUGHT or (name not in status and module_prefix(name) in modules))
    }


def changed_since(commit: str) -> set[str]:
    """The src/ files that differ from `commit` in the checkout (committed since, or not committed); every module when
    git cannot tell (a commit not in this history)."""
    diff = ["git", "diff", "--name-only", commit.rstrip("+"), "--", "src"]
    proc = subprocess.run(diff, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        return {str(p.relative_to(REPO)) for p in (REPO / "src").rglob("*.py")}
    return set(proc.stdout.split())


def report(
    found: dict[str, dict[str, str]], triage: dict[str, str], seconds: float | None, runs: list[dict] = ()
) -> tuple[str, float]:
    """The report's text and the killed share of all mutants, in %."""
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
    # the figure that counts: killed of every mutant, those not checked yet counted as not killed
    share = 100 * sum(total[s] for s in CAUGHT) / sum(total.values()) if total else 0
    lines += ["", f"Killed (or timed out) of all {sum(total.values())} mutants: **{share:.1f} %**; checked "
              f"{checked}, of which {score:.1f} % killed; not killed: {opened}, of them {opened - triaged} open "
              "(neither killed by a test nor triaged)."]  # fmt: skip
    if runs:
        lines += ["", f"Runs in {LEDGER.relative_to(REPO)}: {len(runs)}, {sum(r['minutes'] for r in runs) / 60:.1f} h "
                  f"of mutmut in all, the last ended {runs[-1]['ended']} on commit {runs[-1]['commit']}."]  # fmt: skip
    gone = stale(found, triage, changed_since(runs[-1]["commit"]) if runs else set())
    if gone:
        lines += ["", f"Triage entries that name no survivor (remove them, or check what they name): {len(gone)}", ""]
        lines += [f"- `{name}`: {status}" for name, status in gone.items()]
    lines += ["", "## Mutants not killed", ""]
    for module, mutants in found.items():
        for name, status in mutants.items():
            if status in CAUGHT or status == "not checked":
                continue
            why = reason(name, triage)
            lines += [f"### `{name}`: {status}", "", f"Triage: {why}" if why else "Triage: **open**", ""]
            lines += ["```diff", diff(name, module), "```", ""]
    return "\n".join(lines) + "\n", share


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `make mutation-check ARGS=...` (scripts/mutation_report.py --run ...)."""
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
    parser.add_argument(
        "--fresh",
        action="store_true",
        help=f"with --run: every mutant tested again, the results of {LEDGER.name} not used (and replaced)",
    )
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--report", type=Path, default=OUT / "report.md", help="where the report goes")
    parser.add_argument("--target", type=float, default=85.0,
                        help="the killed share of all mutants wanted, in %% (default 85)")  # fmt: skip
    parser.add_argument(
        "--record",
        metavar="MINUTES",
        type=float,
        help=f"merge mutants/'s results into {LEDGER.name} as a run of MINUTES (after a run stopped otherwise)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    try:
        triage = load_triage()
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.record is not None:
        if not any((REPO / "mutants" / "src").rglob("*.py.meta")):
            print("error: --record: no mutmut results under mutants/ to record", file=sys.stderr)
            return 2
        keep(ledgers.load(LEDGER), 60 * args.record)
    OUT.mkdir(parents=True, exist_ok=True)
    seconds = None
    if args.run is not None:
        started = time.monotonic()
        names, again = args.run, ()
        if args.again and not args.run:  # every mutant not killed outright (a timeout may be a slow test under load)
            again = AGAIN
        elif args.again:  # mutmut reruns a mutant that has a result only when it is named
            globs, known = args.run, [name for mutants in results().values() for name in mutants]
            # a triaged survivor only when named exactly: tested again it costs all its tests' time to say the same
            names = [name for mutants in results().values() for name, status in mutants.items()
                     if status not in CAUGHT and any(fnmatch.fnmatchcase(name, g) for g in globs)
                     and (name in globs or reason(name, triage) is None)]  # fmt: skip
            # a glob no known mutant matches (a module or function new since the last run) goes as it is
            names += [g for g in globs if not any(fnmatch.fnmatchcase(name, g) for name in known)]
            if not names:
                print("every mutant of those names is killed already")
                names = None
        ledger = ledgers.empty() if args.fresh else ledgers.load(LEDGER)
        code = 0
        try:
            if names is not None:
                code = run_mutmut(
                    names,
                    args.max_children,
                    OUT / "mutmut.log",
                    args.relink,
                    None if args.fresh else ledger,
                    again,
                    triage,
                )
        except KeyboardInterrupt:
            code = 130
        finally:  # a run stopped with Ctrl-C keeps what it checked
            seconds = time.monotonic() - started
            if names is not None:
                keep(ledger, seconds, ran=code in (0, 1, 130))
        if code == 130:
            print(f"stopped (Ctrl-C): what was checked is kept in {LEDGER.relative_to(REPO)}", file=sys.stderr)
        elif code not in (0, 1):
            print(f"error: mutmut stopped with exit code {code}; see {OUT / 'mutmut.log'}", file=sys.stderr)
            return 2
    found = results()
    if not found:
        print("error: no mutmut results under mutants/ (run with --run first)", file=sys.stderr)
        return 2
    text, share = report(found, triage, seconds, ledgers.load(LEDGER)["runs"])
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text)
    print(text.split("\n## ")[0])
    print(f"report: {args.report}")
    return 0 if share >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
