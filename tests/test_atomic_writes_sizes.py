"""A writer killed at any rename of a set, for every size of set and every kind of file the builder writes (issue
45, item 3): a figure's four files, a table's two (three with its numbers), a numbers file's two, and a single file.
After the kill the next writer in the folder (remove_stale_temporaries with the builder's set_files, as
paper/__main__.py calls it) leaves each set all old or all new, never mixed, and nothing hidden behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from test_atomic_writes import tiny_figure
from test_numbers import hacksa_like
from test_tables import config, tf_runs

from scalestudy import files
from scalestudy.paper import figures, numbers, tables
from scalestudy.paper.sidecars import FIGURE_FILES, set_files

# Each kind's files in the order its builder passes them to atomic_files (figures.build_figure,
# tables.build_table, numbers.build_numbers, files.write_text).
KINDS = {
    "figure": [f"figure-3.{ext}" for ext in FIGURE_FILES],
    "table": ["table-1.tex", "table-1.json"],
    "table-with-numbers": ["table-4.tex", "table-4.json", "table-4-numbers.tex"],
    "numbers": ["numbers-study.tex", "numbers-study.json"],
    "single": ["report.json"],
}
# Killed before the 1st .. n-th rename, or after the n-th (before the journal is removed).
CASES = [(kind, at) for kind, names in KINDS.items() for at in range(1, len(names) + 2)]
WRITER = (
    "import sys; from pathlib import Path; from scalestudy.files import atomic_files\n"
    "folder = Path(sys.argv[1])\n"
    "with atomic_files(*(folder / n for n in sys.argv[2:])) as temporaries:\n"
    "    for tmp in temporaries: tmp.write_text('new')\n"
)


def killed_writer(folder, names: list[str], at: int) -> int:
    env = dict(os.environ, SCALESTUDY_KILL_AT_RENAME=str(at))
    proc = subprocess.run([sys.executable, "-c", WRITER, str(folder), *names], env=env, capture_output=True)
    return proc.returncode


def test_the_kinds_are_the_sets_set_files_names():
    for names in KINDS.values():
        if len(names) > 1:  # a journal is written for a set of two or more, named after its first file
            assert set(names) <= set_files(names[0])


@pytest.mark.parametrize(("kind", "at"), CASES, ids=[f"{k}-at-{a}" for k, a in CASES])
def test_a_set_killed_at_any_rename_is_all_old_or_all_new_after_the_next_writer(tmp_path, kind, at):
    names = KINDS[kind]
    for name in names:
        (tmp_path / name).write_text("old")
    assert killed_writer(tmp_path, names, at) == -signal.SIGKILL
    files.remove_stale_temporaries(tmp_path, set_files)
    states = {(tmp_path / name).read_text() for name in names}
    assert len(states) == 1, f"{kind} killed before rename {at}: mixed old and new files"
    assert states == ({"old"} if len(names) == 1 and at == 1 else {"new"})  # a journal completes a begun set
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # no journal or temporary left


@pytest.mark.parametrize("kind", [k for k in KINDS if len(KINDS[k]) > 1])
def test_a_set_killed_before_its_first_rename_leaves_a_journal_a_reader_sees(tmp_path, kind):
    names = KINDS[kind]
    assert killed_writer(tmp_path, names, 1) == -signal.SIGKILL
    journals = [p.name for p in tmp_path.iterdir() if files.JOURNAL.match(p.name)]
    assert len(journals) == 1 and journals[0].startswith(f".{names[0]}.")


def journaled_sets(monkeypatch) -> list[list[str]]:
    """The names of each set whose journal is written from now on, in their order of renaming."""
    seen: list[list[str]] = []
    real = files._write_journal

    def record(journal, pairs):
        seen.append([target.name for _, target in pairs])
        real(journal, pairs)

    monkeypatch.setattr(files, "_write_journal", record)
    return seen


NUMBERS_SPEC = {"name": "numbers-study", "numbers": {"Steps": {
    "runs": {"published": {"experiment": "e"}}, "format": "integer",
    "value": {"_target_": "scalestudy.paper.numbers.value", "column": "steps", "where": {"workers": 4}}}}}  # fmt: skip


def test_the_builders_rename_their_sets_in_the_order_tested_here(tmp_path, monkeypatch):
    """The kill test's sets are the builders' own: each builder's first file names its set (set_files)."""
    seen = journaled_sets(monkeypatch)
    figures.build_figure(*tiny_figure("t"), source="published", out_dir=tmp_path, commit="c")
    tables.build_table(config("table-1"), tf_runs(), source="published", out_dir=tmp_path, commit="c")
    runs = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    numbers.build_numbers(NUMBERS_SPEC, runs, source="published", out_dir=tmp_path, commit="c")
    assert seen == [[n.replace("figure-3", "figure-t") for n in KINDS["figure"]], KINDS["table"], KINDS["numbers"]]
