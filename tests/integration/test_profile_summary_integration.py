"""The end-to-end tests of tests/test_profile.py (real store, CLI or service), marked `integration` by this folder's
conftest.py."""

from __future__ import annotations

import pytest
from test_profile import NSYS_NEW, PROFILES, _cli, needs_profiles


@needs_profiles
def test_summary_logged_on_a_run(store_copy):
    from scalestudy.store import load_runs

    run_id = load_runs(store_copy).query("experiment == 'horovod-docs'")["run_id"].iloc[0]
    proc = _cli(PROFILES / NSYS_NEW, "--run", run_id, store=store_copy)
    assert proc.returncode == 0, proc.stderr
    run = load_runs(store_copy).set_index("run_id").loc[run_id]
    assert run["profile_nccl_ms"] == pytest.approx(25.402, abs=5e-4)
    assert run["profile_kernels"] == 4010
    missing = _cli(PROFILES / NSYS_NEW, "--run", "0" * 32, store=store_copy)
    assert missing.returncode == 2 and "is not in the store" in missing.stderr
