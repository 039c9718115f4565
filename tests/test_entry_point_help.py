"""What each entry point prints for its usage, word for word: `--help` of every `python -m scalestudy.X` and of its
subcommands, and the usage error of a command given none (issue 45: the entry points inside the mutation runs; a
help text, a program name or a metavar changed is a change a user reads).

The texts are in tests/golden/help/, one file per call: the exit status, then stdout, then stderr. Made with
`SCALESTUDY_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/test_entry_point_help.py` and read by hand before they
were committed; a change of a text is a change of that file in the same commit. 120 columns, as argparse wraps at
$COLUMNS.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers import run_here

GOLDEN = Path(__file__).parent / "golden" / "help"
CALLS = [
    ("scalestudy.store", "--help"),
    ("scalestudy.store", "accept", "--help"),
    ("scalestudy.store",),
    ("scalestudy.ingest", "--help"),
    ("scalestudy.ingest", "data", "--help"),
    ("scalestudy.scaling", "--help"),
    ("scalestudy.scaling", "-h"),
    ("scalestudy.scaling",),
    ("scalestudy.scaling", "fit"),
    ("scalestudy.profile", "--help"),
    ("scalestudy.profile", "summarize", "--help"),
    ("scalestudy.profile",),
    ("scalestudy.paper", "--help"),
]


def golden_name(call: tuple[str, ...]) -> str:
    return "-".join([call[0].split(".")[1], *(re.sub(r"\W", "", arg) for arg in call[1:])]) + ".txt"


@pytest.mark.parametrize("call", CALLS, ids=golden_name)
def test_each_usage_text_is_the_reviewed_one(call, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "120")
    try:
        done = run_here(call[0], *call[1:], uri="sqlite:///unused.db", monkeypatch=monkeypatch, capsys=capsys)
        status, out, err = done.returncode, done.stdout, done.stderr
    except SystemExit as stop:  # argparse's --help and usage errors
        captured = capsys.readouterr()
        status, out, err = stop.code, captured.out, captured.err
    text = f"exit {status}\n--- stdout\n{out}--- stderr\n{err}"
    path = GOLDEN / golden_name(call)
    if os.environ.get("SCALESTUDY_WRITE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"python -m {' '.join(call)}: its text differs from {path}"


def test_store_accept_says_why_it_accepts_nothing(monkeypatch, capsys, tmp_path, empty_store):
    """Its three lines besides the runs it accepts: a store without a ledger, a store that is not there, nothing."""

    def accept(uri: str) -> tuple[int, str, str]:
        done = run_here("scalestudy.store", "accept", uri=uri, monkeypatch=monkeypatch, capsys=capsys)
        return done.returncode, done.stdout, done.stderr

    assert accept("http://127.0.0.1:9/") == (2, "", "error: store http://127.0.0.1:9/: the ledger is kept in a "
                                             "SQLite store's file only; this store has none to accept runs into "
                                             "(docs/reliability.md, threat model)\n")  # fmt: skip
    missing = tmp_path / "none" / "store.db"
    assert accept(f"sqlite:///{missing}") == (2, "", f"error: tracking store {missing} does not exist\n")
    assert accept(empty_store) == (0, "", "nothing to accept: every run matches the ledger\n")


# Every dataset but the timelines (figure 9's alone) is drawn by a table (the experiments of conf/table/*.yaml).
EVERY = ("tf-benchmarks-2017 keras-backends-2017 hacksa-2019 horovod-docs malik-2018 keras-multi-gpu-2017 "
         "horovod-timelines-2019 mlperf-training-resnet")  # fmt: skip


@pytest.mark.parametrize(
    ("targets", "listed"),
    [
        (["tables"], EVERY.replace("horovod-timelines-2019 ", "")),
        (["figures"], EVERY),
        (["all"], EVERY),
        (["figure-9", "table-2"], "keras-backends-2017 horovod-timelines-2019"),  # in the import's order
    ],
)
def test_ingest_list_for_groups_of_targets(targets, listed, monkeypatch, capsys):
    done = run_here("scalestudy.ingest", "--list", "--for", *targets, uri="sqlite:///unused.db",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert (done.returncode, done.stdout.split(), done.stderr) == (0, listed.split(), "")


def test_ingest_for_an_unknown_target_names_the_known_ones(monkeypatch, capsys):
    done = run_here("scalestudy.ingest", "--list", "--for", "figure-99", uri="sqlite:///unused.db",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    known = [f"figure-{n}" for n in range(1, 13)] + [f"table-{n}" for n in range(1, 8)]
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: unknown figure or table 'figure-99'; known: {', '.join(sorted(known))}\n"
