"""scripts/mutations.yaml stays in step with the code: every planted bug still names text that occurs exactly once
in its file (else `make mutation-check` would stop on it), and the two lists cover the same kinds of bug."""

import importlib.util

import pytest
from helpers import REPO

spec = importlib.util.spec_from_file_location("mutation_check", REPO / "scripts" / "mutation_check.py")
mutation_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation_check)
LISTS = mutation_check.load(mutation_check.MUTATIONS)


@pytest.mark.parametrize("bug", [b for bugs in LISTS.values() for b in bugs], ids=lambda b: b["id"])
def test_each_bug_names_text_found_once_and_tests_that_exist(bug):
    assert (REPO / bug["file"]).read_text().count(bug["old"]) == 1, bug["file"]
    assert bug["old"] != bug["new"]
    assert all((REPO / test.split("::")[0]).is_file() for test in bug["tests"])


def test_main_and_holdout_cover_the_same_kinds_at_other_places():
    kinds = {name: {b["kind"] for b in bugs} for name, bugs in LISTS.items()}
    assert kinds["main"] == kinds["holdout"]
    assert {"figure quantity", "filter", "write atomicity", "process cleanup", "validation"} <= kinds["main"]
    places = {name: {(b["file"], b["old"]) for b in bugs} for name, bugs in LISTS.items()}
    assert not places["main"] & places["holdout"]


def test_a_bug_whose_text_is_not_there_is_refused(tmp_path):
    (tmp_path / "f.py").write_text("x = 1\nx = 1\n")
    for old in ("y = 2", "x = 1"):  # found 0 times, then twice
        with pytest.raises(ValueError, match=r"bug b: its `old` text occurs [02] times in f\.py"):
            mutation_check.plant(tmp_path, {"id": "b", "file": "f.py", "old": old, "new": "z"})
