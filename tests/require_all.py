"""A pytest plugin: under SCALESTUDY_REQUIRE_ALL=1 every skipped test fails, saying why it would have skipped.

`make test` runs where every real component can be started (it installs them, as root): there a skipped test is a
component that did not start (Slurm as a non-root user, a missing browser), not something to pass over. The
Makefile sets the variable for `make test`; `make test-fast` and a plain pytest keep skips, listed with their
reasons (-rs in pyproject's addopts). A test marked `may_skip` keeps its skip: it needs input data (third-party
files outside the repository) that make test cannot fetch, not a component it could start.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_ALL = "SCALESTUDY_REQUIRE_ALL"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    allowed = item.get_closest_marker("may_skip")  # input data make test cannot fetch, not a component
    if os.environ.get(REQUIRE_ALL) == "1" and report.skipped and not hasattr(report, "wasxfail") and not allowed:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under {REQUIRE_ALL}=1 (make test runs everything): {reason}"
