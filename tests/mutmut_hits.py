"""Under mutmut's stats run only (MUTANT_UNDER_TEST=stats; scripts/mutation_report.py): the mutated functions a
test reached through a subprocess (`python -m scalestudy...`) count as called by that test, as those it calls in
its own process do. The children write what they called to the file named by SCALESTUDY_MUTMUT_HITS
(scripts/mutmut_site/sitecustomize.py); this plugin names a file per test, then hands its lines to mutmut's record
before mutmut's own teardown hook reads it. The published figures, drawn by a child once per session in the
first test that asks for them, count for every test that reads them."""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import pytest

HITS = "SCALESTUDY_MUTMUT_HITS"
ACTIVE = os.environ.get("MUTANT_UNDER_TEST") == "stats"
FOLDER = Path(tempfile.mkdtemp(prefix="mutmut-hits-")) if ACTIVE else None
# the functions the published figures' build called, once it has run
PUBLISHED = FOLDER / "published-figures" if ACTIVE else None
NUMBER = itertools.count()


def read(path: Path) -> set[str]:
    return set(path.read_text().split()) if path.is_file() else set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if ACTIVE:
        os.environ[HITS] = str(FOLDER / f"test-{next(NUMBER)}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    if not ACTIVE:
        return
    from mutmut.state import state

    path = Path(os.environ.pop(HITS))
    state()._stats.update(read(path))
    path.unlink(missing_ok=True)
    if "published_figures" in item.fixturenames:
        state()._stats.update(read(PUBLISHED))


def published_build_hits() -> str | None:
    """The file the published figures' build writes its calls to (None outside the stats run)."""
    return str(PUBLISHED) if ACTIVE else None
