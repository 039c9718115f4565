"""scripts/mutation_report.py (make mutation-check): mutmut's results read per module, the score, and the triage file
checked; on meta files written here in mutmut's format (a real run takes hours)."""

import json

import pytest
from helpers import REPO, load_script

mutation_report = load_script("mutation_report")


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
    assert score == pytest.approx(400 / 6)
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
    mutation_report.forget(False, ("survived", "no tests", "skipped", "suspicious"))
    codes = json.loads((tmp_path / "mutants/src/scalestudy/derive.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{name}1": 1, f"{name}2": None, f"{name}3": None, f"{name}4": 36, f"{name}5": None,
                     f"{name}6": None, f"{name}7": None}  # fmt: skip
