"""The store and the builder under interruption, concurrency and bad data (issue 12): a run is written whole or
not seen, an interrupted import is completed by the next one, concurrent imports serialise, bad input is one
line naming the file and line with the store left byte for byte as it was, and a figure's files change together.

Each case runs the command-line programs as a user does, on real SQLite stores, with real published data."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers import run_here, run_module

from scalestudy.paper.selection import EmptySelection, select_runs


def build(uri: str, out: Path, *targets: str, **kw) -> subprocess.CompletedProcess:
    return run_module("scalestudy.paper", *targets, f"out_dir={out}", uri=uri, check=False, **kw)


def one_line_error(proc: subprocess.CompletedProcess, *expected: str) -> str:
    """The process failed with exit 2 and one line of error, no traceback, holding every `expected` text."""
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    for text in expected:
        assert text in lines[0], (text, lines[0])
    return lines[0]


# --------------------------------------------------------------------------------------------
# 1. An import killed at any point is detected, refused by readers, and completed by the next import


# --------------------------------------------------------------------------------------------
# 2. Concurrent imports serialise on the store's lock; builds wait for them and see whole datasets


# --------------------------------------------------------------------------------------------
# 3. Bad input: one line naming the file (and line), exit 2, the store unchanged byte for byte


# --------------------------------------------------------------------------------------------
# 4. A figure's four files change together; temporary files do not outlive the build


# --------------------------------------------------------------------------------------------
# 5. Smaller: numbers compare as numbers, settings name their key, a moved store writes where it now is


def test_a_numeric_filter_matches_numbers_whatever_their_type():
    runs = pd.DataFrame({"source": ["published"] * 3, "status": ["FINISHED"] * 3, "epochs": [10.0, 25.0, None]})
    assert len(select_runs(runs, {"published": {"epochs": 10}}, "published", "t")) == 1
    assert len(select_runs(runs, {"published": {"epochs": "10"}}, "published", "t")) == 1
    assert len(select_runs(runs, {"published": {"epochs": [10, 25]}}, "published", "t")) == 2
    with pytest.raises(EmptySelection):
        select_runs(runs, {"published": {"epochs": 11}}, "published", "t")


def test_an_unknown_figure_lists_the_known_ones(tmp_path, monkeypatch, capsys):
    proc = run_here("scalestudy.paper", "figure-99", f"out_dir={tmp_path}", uri="sqlite:///unused.db",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    line = one_line_error(proc, "figure-99", "figure-1", "figure-7", "table-3")
    assert line.count(",") >= 9
