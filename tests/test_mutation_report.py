"""scripts/mutation_report.py (make mutation-check): mutmut's results read per module, the score, and the triage file
checked; on meta files written here in mutmut's format (a real run takes hours)."""

import json
import shutil
from pathlib import Path

import pytest
from helpers import REPO, load_script

mutation_report = load_script("mutation_report")
ledgers = load_script("mutation_ledger")


def meta(root, module: str, codes: dict) -> None:
    path = root / "mutants" / "src" / f"{module}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes, "durations_by_key": {}}))


def test_results_per_module_and_the_score(tmp_path, monkeypatch):
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)
    name = "scalestudy.derive.x_f__mutmut_"
    # 1 and 3: pytest failed (killed); 0: passed (survived); 33: no test calls it; 36: timed out; None: not run
    meta(tmp_path, "scalestudy/derive.py", {f"{name}{i}": c for i, c in enumerate([1, 3, 0, 33, 36, None], 1)})
    meta(tmp_path, "scalestudy/ingest/fetch.py", {"scalestudy.ingest.fetch.x_g__mutmut_1": 1})
    meta(tmp_path, "scalestudy/gone.py", {"scalestudy.gone.x_h__mutmut_1": 0})  # moved away since: not reported
    for module in ("derive.py", "ingest/fetch.py"):
        (tmp_path / "src" / "scalestudy" / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / "scalestudy" / module).write_text("")
    found = mutation_report.results()
    assert found == {
        "scalestudy/derive.py": {f"{name}1": "killed", f"{name}2": "killed", f"{name}3": "survived",
                                 f"{name}4": "no tests", f"{name}5": "timeout", f"{name}6": "not checked"},
        "scalestudy/ingest/fetch.py": {"scalestudy.ingest.fetch.x_g__mutmut_1": "killed"},
    }  # fmt: skip
    monkeypatch.setattr(mutation_report, "diff", lambda name, module: f"- old\n+ new ({name})")
    text, score = mutation_report.report(found, {f"{name}3": "equivalent: x"}, seconds=90)
    # derive.py: 3 caught (2 killed, 1 timeout) of 5 checked = 60 %; all: 4 of 6 = 66.7 %
    assert "| scalestudy/derive.py | 6 | 2 | 1 | 1 | 1 | 0 | 0 | 1 | 60.0 | 1/2 |" in text
    assert "| **all** | 7 | 3 | 1 | 1 | 1 | 0 | 0 | 1 | **66.7** | 1/2 |" in text
    # the figure returned (and the exit status's): killed of all 7 mutants, the unchecked one counted as not killed
    assert score == pytest.approx(400 / 7)
    assert ("Killed (or timed out) of all 7 mutants: **57.1 %**; checked 6, of which 66.7 % killed; not killed: 2, "
            "of them 1 open") in text  # fmt: skip
    assert f"### `{name}3`: survived\n\nTriage: equivalent: x\n\n```diff\n- old\n+ new ({name}3)\n```" in text
    assert f"### `{name}4`: no tests\n\nTriage: **open**" in text
    assert f"`{name}1`" not in text and f"`{name}6`" not in text  # killed and unchecked mutants have no entry
    assert "Run time of this call: 1.5 min." in text


def test_a_triage_entry_without_a_reason_is_refused(tmp_path, monkeypatch):
    triage = tmp_path / "triage.yaml"
    triage.write_text("scalestudy.derive.x_f__mutmut_3: ''\n")
    monkeypatch.setattr(mutation_report, "TRIAGE", triage)
    with pytest.raises(ValueError, match=r"triage\.yaml: scalestudy\.derive\.x_f__mutmut_3: the reason must be"):
        mutation_report.load_triage()
    triage.write_text("scalestudy.derive.x_f__mutmut_3: equivalent, the value is the same\n")
    assert mutation_report.load_triage() == {"scalestudy.derive.x_f__mutmut_3": "equivalent, the value is the same"}


def test_every_triaged_mutant_names_a_module_that_is_mutated():
    """docs/mutation-triage.yaml names mutants as mutmut does: <module>.x_<function>__mutmut_<n>, the module one
    that [tool.mutmut] mutates."""
    import tomllib

    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    prefixes = [g.removeprefix("src/").removesuffix(".py").removesuffix("*").replace("/", ".") for g in globs]
    for name in mutation_report.load_triage():
        module, _, rest = name.partition(".x")
        assert rest and "__mutmut_" in rest, name
        assert any(f"{module}.".startswith(p) for p in prefixes), name  # a package: its __init__.py


def test_a_glob_triages_a_whole_function_after_the_mutants_own_entries():
    triage = {"scalestudy.derive.x_f__mutmut_3": "own", "scalestudy.derive.x_f__mutmut_*": "the function needs X"}
    assert mutation_report.reason("scalestudy.derive.x_f__mutmut_3", triage) == "own"
    assert mutation_report.reason("scalestudy.derive.x_f__mutmut_12", triage) == "the function needs X"
    assert mutation_report.reason("scalestudy.derive.x_fg__mutmut_1", triage) is None
    assert mutation_report.reason("scalestudy.derive.x_f__mutmut_", {"scalestudy.derive.x_f__mutmut_": "x"}) == "x"


def test_each_run_looks_again_for_the_tests_of_mutants_that_had_none(tmp_path, monkeypatch):
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)
    name = "scalestudy.derive.x_f__mutmut_"
    meta(tmp_path, "scalestudy/derive.py", {f"{name}{i}": c for i, c in enumerate([1, 0, 33, 5, None], 1)})
    meta(tmp_path, "scalestudy/paper/numbers.py", {"scalestudy.paper.numbers.x_g__mutmut_1": 1})
    before = (tmp_path / "mutants/src/scalestudy/paper/numbers.py.meta").read_text()
    stats = tmp_path / "mutants" / "mutmut-stats.json"
    stats.write_text("{}")
    mutation_report.forget(relink=False)
    codes = json.loads((tmp_path / "mutants/src/scalestudy/derive.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{name}1": 1, f"{name}2": 0, f"{name}3": None, f"{name}4": None, f"{name}5": None}
    assert (tmp_path / "mutants/src/scalestudy/paper/numbers.py.meta").read_text() == before and stats.exists()
    mutation_report.forget(relink=True)
    assert not stats.exists()


def test_again_without_names_makes_every_mutant_not_caught_unchecked(tmp_path, monkeypatch):
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)
    name = "scalestudy.derive.x_f__mutmut_"
    meta(tmp_path, "scalestudy/derive.py", {f"{name}{i}": c for i, c in enumerate([1, 0, 33, 36, 34, 99, None], 1)})
    mutation_report.forget(False, mutation_report.AGAIN)
    codes = json.loads((tmp_path / "mutants/src/scalestudy/derive.py.meta").read_text())["exit_code_by_key"]
    # 36, a timeout, is tested again too (on a loaded machine a slow test times out)
    assert codes == {f"{name}1": 1, f"{name}2": None, f"{name}3": None, f"{name}4": None, f"{name}5": None,
                     f"{name}6": None, f"{name}7": None}  # fmt: skip


def test_the_ledger_keeps_results_per_function_hash_and_a_new_checkout_starts_from_them(tmp_path, monkeypatch):
    """benchmarks/mutation-results.json: what mutants/ checked is merged in (a function of the same hash keeps what
    mutants/ did not check again; a changed hash takes mutants/'s alone; a module gone from src/ is dropped), it reads
    back, a report is made from it alone, and restore() writes it as mutmut's meta files where there are none."""
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)
    monkeypatch.setattr(mutation_report, "LEDGER", tmp_path / "ledger.json")
    monkeypatch.setattr(ledgers, "mutmut_version", lambda: "3.8.1")
    for module in ("derive.py", "ingest/logs/__init__.py"):
        (tmp_path / "src" / "scalestudy" / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / "scalestudy" / module).write_text("")
    ledger = {"mutmut": "3.8.1", "runs": [{"minutes": 30.0, "ended": "2026-11-25 10:00", "commit": "abc"}],
              "modules": {"scalestudy/derive.py": {"x_f": ["h1", {"1": 1, "2": 0, "3": 1}], "x_g": ["old", {"1": 1}],
                                                   "x_gone": ["h9", {"1": 1}]},
                          "scalestudy/removed.py": {"x_h": ["h", {"1": 0}]}}}  # fmt: skip
    d = "scalestudy.derive."
    path = tmp_path / "mutants/src/scalestudy/derive.py.meta"
    path.parent.mkdir(parents=True)
    # x_f unchanged: mutant 2 checked again (now killed), 3 not run here; x_g changed: only mutants/'s results
    path.write_text(json.dumps({"exit_code_by_key": {f"{d}x_f__mutmut_1": None, f"{d}x_f__mutmut_2": 1,
                                                     f"{d}x_f__mutmut_3": None, f"{d}x_g__mutmut_1": None,
                                                     f"{d}x_g__mutmut_2": 0},
                                "hash_by_function_name": {"x_f": "h1", "x_g": "new"}}))  # fmt: skip
    merged = ledgers.record(ledger, tmp_path, {"minutes": 12.5, "ended": "2026-11-26 05:00", "commit": "def"})
    assert merged["modules"] == {"scalestudy/derive.py": {"x_f": ["h1", {"1": 1, "2": 1, "3": 1}],
                                                          "x_g": ["new", {"1": None, "2": 0}]}}  # fmt: skip
    assert [r["commit"] for r in merged["runs"]] == ["abc", "def"]
    ledgers.save(merged, tmp_path / "ledger.json")
    assert ledgers.load(tmp_path / "ledger.json") == merged
    written = (tmp_path / "ledger.json").read_text()
    assert '      "x_f": ["h1",[1,1,1]],\n      "x_g": ["new",[null,0]]\n' in written  # a line per function
    assert ledgers.as_list({"3": 0, "1": 1}) == [1, None, 0]  # mutant n at n - 1
    # a new checkout: no mutants/; the report comes from the ledger (5 mutants, 3 killed, one survivor, one unchecked)
    path.unlink()
    found = mutation_report.results()
    assert found == {"scalestudy/derive.py": {f"{d}x_f__mutmut_1": "killed", f"{d}x_f__mutmut_2": "killed",
                                              f"{d}x_f__mutmut_3": "killed", f"{d}x_g__mutmut_1": "not checked",
                                              f"{d}x_g__mutmut_2": "survived"}}  # fmt: skip
    text, share = mutation_report.report(found, {}, None, merged["runs"])
    assert share == pytest.approx(60.0)
    assert "Runs in ledger.json: 2, 0.7 h of mutmut in all, the last ended 2026-11-26 05:00 on commit def." in text
    assert "(no diff: mutants/ is not made here" in text
    # restore: meta files in mutmut's format, the names of a package's __init__ without it
    merged["modules"]["scalestudy/ingest/logs/__init__.py"] = {"x_k": ["h2", {"1": 36}]}
    assert ledgers.restore(merged, tmp_path) == 6
    written = json.loads(path.read_text())
    assert written["exit_code_by_key"][f"{d}x_g__mutmut_2"] == 0 and written["hash_by_function_name"]["x_g"] == "new"
    assert set(written) == {"exit_code_by_key", "hash_by_function_name", "durations_by_key",
                            "estimated_durations_by_key"}  # fmt: skip
    init = json.loads((tmp_path / "mutants/src/scalestudy/ingest/logs/__init__.py.meta").read_text())
    assert init["exit_code_by_key"] == {"scalestudy.ingest.logs.x_k__mutmut_1": 36}
    # a meta file already there (a run under way) is left as it is
    path.write_text("{}")
    assert ledgers.restore(merged, tmp_path) == 0 and path.read_text() == "{}"
    # another mutmut version may number mutants otherwise: its ledger is not used
    monkeypatch.setattr(ledgers, "mutmut_version", lambda: "3.9.0")
    assert ledgers.load(tmp_path / "ledger.json")["modules"] == {}


def test_a_triage_entry_naming_a_killed_or_unknown_mutant_is_stale():
    d = "scalestudy.derive.x_f__mutmut_"
    found = {"scalestudy/derive.py": {f"{d}1": "killed", f"{d}2": "survived", f"{d}3": "timeout", f"{d}4": "no tests"}}
    triage = {f"{d}1": "a", f"{d}2": "b", f"{d}3": "c", f"{d}4": "d", f"{d}9": "renumbered", f"{d}*": "glob",
              "scalestudy.paper.numbers.x_g__mutmut_1": "module not run yet"}  # fmt: skip
    assert mutation_report.stale(found, triage) == {f"{d}1": "killed", f"{d}3": "timeout", f"{d}9": "no such mutant"}
    assert mutation_report.stale(found, triage, {"src/scalestudy/derive.py"}) == {}  # results of older code
    assert set(mutation_report.changed_since("HEAD")) <= {str(p.relative_to(REPO)) for p in (REPO / "src").rglob("*")}
    assert mutation_report.changed_since("no-such-commit") >= {"src/scalestudy/derive.py"}


def test_no_triage_entry_names_a_mutant_the_committed_results_record_killed_or_unknown(tmp_path, monkeypatch):
    """A function changed since its survivors were triaged renumbers its mutants: the entry then speaks of another
    mutant (benchmarks/mutation-results.json holds the last results of every mutant run so far)."""
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)  # no mutants/ here: the committed results alone
    found = mutation_report.results()
    runs = ledgers.load(mutation_report.LEDGER)["runs"]
    monkeypatch.setattr(mutation_report, "REPO", REPO)
    # the modules changed since the last run have results of older code (renumbered since): not judged
    changed = mutation_report.changed_since(runs[-1]["commit"]) if runs else set()
    assert mutation_report.stale(found, mutation_report.load_triage(), changed) == {}


def test_the_docs_state_the_committed_results_as_a_new_checkout_reads_them(tmp_path, monkeypatch):
    """The score, counts and run time docs/testing.md gives ("Where the results stand") are those of
    benchmarks/mutation-results.json read without mutants/ (a fresh clone), and none of its survivors is open."""
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)
    found = mutation_report.results()
    monkeypatch.setattr(mutation_report, "REPO", REPO)
    runs = ledgers.load(mutation_report.LEDGER)["runs"]
    statuses = [status for mutants in found.values() for status in mutants.values()]
    caught = sum(status in mutation_report.CAUGHT for status in statuses)
    unchecked = statuses.count("not checked")
    checked = len(statuses) - unchecked
    triage = mutation_report.load_triage()
    open_ = [
        n
        for mutants in found.values()
        for n, s in mutants.items()
        if s not in mutation_report.CAUGHT and s != "not checked" and mutation_report.reason(n, triage) is None
    ]
    assert open_ == []
    testing = (REPO / "docs" / "testing.md").read_text()
    item = testing[testing.index("- **Where the results stand.**") :].split("\n- ", 1)[0]
    row = " ".join(item.split())
    hours = sum(r["minutes"] for r in runs) / 60
    for figure in (
        f"mutmut's {len(statuses):,} mutants",
        f"{hours:.1f} h of mutmut in {len(runs)} runs",
        f"{checked:,} checked, {100 * caught / checked:.1f} % of them killed",
        f"**{100 * caught / len(statuses):.1f} % of all mutants**",
        f"the {unchecked:,} not checked",
    ):
        assert figure in row, figure


def test_mutmut_keeps_the_restored_results_when_it_makes_the_mutants_of_a_new_checkout(tmp_path, monkeypatch):
    """The ledger's whole point, with mutmut's own code: in a checkout without mutants/, restore() writes the meta
    file and mutmut's generation of that module's mutants keeps every result of a function whose hash is the same,
    and resets those of a function that changed (two small functions; one recorded under another hash)."""
    from mutmut.__main__ import create_mutants_for_file

    module = "scalestudy/scaling/cost.py"
    # a module of its own (under mutmut the checkout's src/ holds mutated code, which is no source to mutate)
    source = "def f(a, b):\n    return a + 2 * b\n\n\ndef g(x):\n    return x - 1 if x > 3 else x\n"
    (tmp_path / "src" / module).parent.mkdir(parents=True)
    (tmp_path / "src" / module).write_text(source)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mutants" / "src" / module
    out.parent.mkdir(parents=True)
    create_mutants_for_file(Path("src") / module, out)
    made = json.loads((tmp_path / "mutants" / "src" / f"{module}.meta").read_text())
    digests = made["hash_by_function_name"]
    assert len(digests) >= 2 and all(code is None for code in made["exit_code_by_key"].values())
    # a ledger that knows every mutant: exit code 1 (killed) for all, the first function's recorded under another hash
    first = sorted(digests)[0]
    names = sorted(made["exit_code_by_key"])
    numbers = {f: {n.rsplit("__mutmut_", 1)[1]: 1 for n in names if ledgers.function_of(n) == f} for f in digests}
    functions = {f: [digests[f] if f != first else "0ld", numbers[f]] for f in digests}
    shutil.rmtree(tmp_path / "mutants")
    assert ledgers.restore({"modules": {module: functions}}, tmp_path) == len(names)
    out.parent.mkdir(parents=True, exist_ok=True)
    create_mutants_for_file(Path("src") / module, out)
    kept = json.loads((tmp_path / "mutants" / "src" / f"{module}.meta").read_text())["exit_code_by_key"]
    assert {n: c for n, c in kept.items() if ledgers.function_of(n) != first} == {
        n: 1 for n in names if ledgers.function_of(n) != first
    }
    assert {c for n, c in kept.items() if ledgers.function_of(n) == first} == {None}  # its hash differs: tested again


def test_a_runs_entry_counts_the_ledger_after_the_merge(tmp_path, monkeypatch):
    """A run stopped early leaves older results standing: its entry counts the merged ledger (mutant 1 killed in
    this run, mutant 2's survival from an earlier one), not mutants/ alone (where 2 is unchecked again)."""
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)
    monkeypatch.setattr(mutation_report, "LEDGER", tmp_path / "ledger.json")
    (tmp_path / "src" / "scalestudy").mkdir(parents=True)
    (tmp_path / "src" / "scalestudy" / "derive.py").write_text("")
    d = "scalestudy.derive.x_f__mutmut_"
    meta(tmp_path, "scalestudy/derive.py", {f"{d}1": 1, f"{d}2": None})
    path = tmp_path / "mutants/src/scalestudy/derive.py.meta"
    path.write_text(json.dumps({**json.loads(path.read_text()), "hash_by_function_name": {"x_f": "h"}}))
    earlier = {"mutmut": "3.8.1", "runs": [], "modules": {"scalestudy/derive.py": {"x_f": ["h", {"1": None, "2": 0}]}}}
    mutation_report.keep(earlier, 90)
    (run,) = json.loads((tmp_path / "ledger.json").read_text())["runs"]
    assert (run["minutes"], run["mutants"], run["checked"], run["caught"]) == (1.5, 2, 2, 1)


def test_again_in_a_new_checkout_tests_the_ledgers_survivors_again(tmp_path, monkeypatch):
    # a new checkout has no mutants/ until the ledger is restored: what --again forgets must be forgotten after that
    monkeypatch.setattr(mutation_report, "REPO", tmp_path)
    monkeypatch.setattr(mutation_report, "LEDGER", tmp_path / "ledger.json")
    name = "scalestudy.derive.x_f__mutmut_"
    restored = {f"{name}{i}": c for i, c in enumerate([1, 0, 36, 33, 0], 1)}
    monkeypatch.setattr(mutation_report, "tree_copy", lambda dest: None)
    monkeypatch.setattr(mutation_report.ledgers, "restore", lambda ledger, repo: meta(repo, "scalestudy/derive.py",
                                                                                      restored) or 4)  # fmt: skip
    monkeypatch.setattr(mutation_report, "mirror", lambda: None)  # stops the run right after the set-up
    triage = {f"{name}5": "equivalent: a reason"}  # a triaged survivor is not tested again (all its tests' time)
    assert mutation_report.run_mutmut([], 2, tmp_path / "log", ledger={}, again=mutation_report.AGAIN,
                                      triage=triage) == 2  # fmt: skip
    codes = json.loads((tmp_path / "mutants/src/scalestudy/derive.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{name}1": 1, f"{name}2": None, f"{name}3": None, f"{name}4": None, f"{name}5": 0}
    mutation_report.run_mutmut([], 2, tmp_path / "log", ledger={})  # without --again: only "no tests" again
    codes = json.loads((tmp_path / "mutants/src/scalestudy/derive.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{name}1": 1, f"{name}2": 0, f"{name}3": 36, f"{name}4": None, f"{name}5": 0}
    seen = {}
    monkeypatch.setattr(mutation_report, "run_mutmut", lambda *args: seen.update(again=args[5], triage=args[6]))
    monkeypatch.setattr(mutation_report, "keep", lambda *args, **kw: None)
    monkeypatch.setattr(mutation_report, "OUT", tmp_path / "out")
    mutation_report.main(["--run", "--again", "--report", str(tmp_path / "report.md")])
    assert seen["again"] == mutation_report.AGAIN and seen["triage"] == mutation_report.load_triage()


def test_again_with_globs_leaves_out_the_caught_and_the_triaged_unless_named_exactly(tmp_path, monkeypatch):
    name = "scalestudy.derive.x_f__mutmut_"
    found = {"scalestudy/derive.py": {f"{name}{i}": s for i, s in enumerate(
        ["killed", "survived", "survived", "no tests", "timeout", "survived"], 1)}}  # fmt: skip
    monkeypatch.setattr(mutation_report, "results", lambda: found)
    monkeypatch.setattr(mutation_report, "load_triage", lambda: {f"{name}3": "equivalent: a reason",
                                                                 f"{name}6": "equivalent: another"})  # fmt: skip
    seen = {}
    monkeypatch.setattr(mutation_report, "run_mutmut", lambda *args: seen.update(names=args[0]))
    monkeypatch.setattr(mutation_report, "keep", lambda *args, **kw: None)
    monkeypatch.setattr(mutation_report, "OUT", tmp_path / "out")
    monkeypatch.setattr(mutation_report, "report", lambda *args, **kw: ("", 0.0))
    mutation_report.main(["--run", "scalestudy.derive.*", f"{name}6", "--again", "--report", str(tmp_path / "r.md")])
    # 1 killed and 5 timed out (caught), 3 triaged: not again; 6 triaged but named exactly: again
    assert seen["names"] == [f"{name}2", f"{name}4", f"{name}6"]


def test_a_stopped_run_lets_mutmut_stop_and_write_its_results(tmp_path):
    # SIGTERM (or Ctrl-C) to this script: mutmut gets SIGINT and time to stop its workers and save; a SIGINT it lost
    # is sent again; past the grace, mutmut's whole session (its workers too) is killed
    import os
    import signal
    import sys
    import threading

    ready, saved = tmp_path / "ready", tmp_path / "saved"

    def stop_when_ready(stop=signal.SIGTERM) -> None:  # once "mutmut" has set up its signals
        ready.unlink(missing_ok=True)

        def stop_it():
            while not ready.exists():
                threading.Event().wait(0.02)
            os.kill(os.getpid(), stop)

        threading.Thread(target=stop_it, daemon=True).start()

    # the first SIGINT lost (as in mutmut's set-up), the second stops it: it saves and exits
    script = (
        "import pathlib, signal, sys, time\n"
        "seen = []\n"
        "def stop(*_):\n"
        "    seen.append(1)\n"
        f"    if len(seen) == 2: time.sleep(0.1); pathlib.Path({str(saved)!r}).write_text('results'); sys.exit(3)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        f"pathlib.Path({str(ready)!r}).write_text('')\n"
        "while True: time.sleep(0.01)\n"
    )
    before, sigint = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    stop_when_ready()
    with pytest.raises(KeyboardInterrupt):
        mutation_report.run_stoppable([sys.executable, "-c", script], grace=0.5)
    assert saved.read_text() == "results"
    assert signal.getsignal(signal.SIGTERM) is before and signal.getsignal(signal.SIGINT) is sigint
    # deaf to SIGINT: killed after two graces, with the worker it forked. This script started with SIGINT ignored (in
    # the background of a shell without job control): SIGINT stops it all the same, and mutmut starts hearing SIGINT
    worker, heard = tmp_path / "worker", tmp_path / "heard"
    script = (
        "import os, pathlib, signal, subprocess, sys, time\n"
        f"pathlib.Path({str(heard)!r}).write_text(str(signal.getsignal(signal.SIGINT) is signal.default_int_handler))\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(worker)!r}).write_text(str(child.pid))\n"
        f"pathlib.Path({str(ready)!r}).write_text('')\n"
        "time.sleep(60)\n"
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        stop_when_ready(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            mutation_report.run_stoppable([sys.executable, "-c", script], grace=0.2)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # as it was
    finally:
        signal.signal(signal.SIGINT, sigint)
    assert heard.read_text() == "True"
    pid = int(worker.read_text())
    for _ in range(100):  # the worker, an orphan now, is reaped by init once killed
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break
        threading.Event().wait(0.02)
    else:
        raise AssertionError(f"mutmut's worker {pid} still runs")
