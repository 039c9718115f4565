"""Every test in this folder is an integration test (real services: MLflow through the CLI or a server, Chromium,
latexmk, Slurm daemons, Horovod ranks, a container engine): `make test-fast` deselects them with
-m "not integration", `make test` runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)
