"""The committed gradient-size table is what the models say: regenerated in the training environment (Keras and
Gluon, one process each) and compared cell by cell. Several minutes: it builds every model twice and profiles
the Keras ones' FLOPs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from helpers import REPO

from scalestudy.scaling.sizes import SIZES_FILE, read_sizes

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("mxnet") is None,
        reason=f"{sys.executable} has no TensorFlow or no MXNet: run in the training environment (.venv-train)",
    )
]


def test_regenerated_table_equals_the_committed_one(tmp_path):
    out = tmp_path / "gradient_sizes.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "scalestudy.scaling", "sizes", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_sizes(out) == read_sizes(SIZES_FILE)
    assert out.read_text() == SIZES_FILE.read_text()
