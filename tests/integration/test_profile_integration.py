"""profile=timeline|mxnet end to end: real 2-rank Horovod jobs over Gloo record their timeline (or MXNet's
profile), the run gets the step split as metrics and the files as artifacts, the summarizer reads the recorded
timeline, and figure 9 draws the run. Needs the training environment (TensorFlow, MXNet, Horovod with Gloo)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, run_module

from scalestudy.profile import ProfileError, summarize
from scalestudy.scaling.sizes import size_of
from scalestudy.store import load_runs

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("horovod") is None,
        reason=f"horovod is not importable by {sys.executable}: run in the training environment (.venv-train)",
    )
]
WARMUP, STEPS = 2, 4
TINY = [
    "workers=2",
    "model=resnet50",
    "data=synthetic",
    "data.image_size=32",
    "batch_per_worker=4",
    f"warmup_steps={WARMUP}",
    f"steps={STEPS}",
    "min_measured_steps=3",
    "timeout_s=400",
    "platform=test-box",
    "study=figure-9",
]


def train(tmp_path: Path, uri: str, *overrides: str) -> Path:
    job = tmp_path / "job"
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    args = [sys.executable, "-m", "scalestudy.train", f"hydra.run.dir={job}", *TINY, *overrides]
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    return job


@pytest.mark.parametrize(("framework", "sizes"), [("tensorflow", "keras"), ("mxnet", "gluon")])
def test_two_gloo_ranks_record_and_summarize_their_timeline(tmp_path, framework, sizes):
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    job = train(tmp_path, uri, f"framework={framework}", "profile=timeline")
    (run,) = load_runs(uri).to_dict("records")
    timeline = job / "horovod_timeline.json"
    assert timeline.is_file()
    # the run: the measured steps' split, from the timeline and the ranks' clocks
    assert run["timeline_steps"] == STEPS
    gradients = size_of("resnet50", 1000, framework=sizes)["trainable_parameters"]
    assert run["step_allreduce_mb"] == pytest.approx(gradients * 4 / 1e6)  # every gradient, float32, every step
    result = json.loads((job / "result.json").read_text())
    per_rank = [np.diff([r["loop_start_unix"], *r["step_end_unix"]]) for r in result["ranks"]]
    step_ms = 1e3 * np.max(np.vstack(per_rank), axis=0)[WARMUP:].mean()
    assert run["step_time_ms"] == pytest.approx(step_ms)
    assert 0 < run["step_comm_ms"] < run["step_time_ms"]
    assert 0 <= run["step_comm_exposed_ms"] <= run["step_comm_ms"]
    assert run["step_compute_ms"] == pytest.approx(run["step_time_ms"] - run["step_comm_exposed_ms"])
    assert run["step_comm_share"] == pytest.approx(run["step_comm_ms"] / run["step_time_ms"])
    assert run["step_allreduces"] >= 1 and 0 <= run["step_comm_overlap_share"] <= 1
    # the artifact is the timeline itself, and the summarizer reads it
    stored = list((tmp_path / "store-artifacts").rglob("profile/horovod_timeline.json"))
    assert len(stored) == 1 and stored[0].read_bytes() == timeline.read_bytes()
    summary = summarize(timeline)
    # every step's allreduces are there; the job's last collective (the result's allgather) may be left open when
    # the ranks exit before Horovod's writer records its end (seen with MXNet)
    assert summary.facts["steps"] == WARMUP + STEPS and summary.facts["open_spans"] <= 2
    assert {"ALLREDUCE", "GLOO_ALLREDUCE", "NEGOTIATE_ALLREDUCE"} <= {c["class"] for c in summary.classes}
    start = summary.facts["start_unix"]
    assert result["ranks"][0]["process_start_unix"] - 60 < start < result["ranks"][0]["step_end_unix"][0]
    proc = subprocess.run(
        [sys.executable, "-m", "scalestudy.profile", "summarize", str(timeline)], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "GLOO_ALLREDUCE" in proc.stdout and "per step" in proc.stdout
    # figure 9 draws the run
    build = run_module("scalestudy.paper", "figure-9", "source=measured", f"out_dir={tmp_path / 'paper'}", uri=uri)
    points = json.loads((tmp_path / "paper" / "figures" / "figure-9.json").read_text())["points"]
    assert {p["y"] for p in points} == {"step_time_ms", "step_negotiate_ms", "step_comm_ms", "step_comm_exposed_ms"}
    drawn = {p["y"]: p["value"] for p in points}
    assert drawn["step_comm_ms"] == pytest.approx(run["step_comm_ms"])
    assert "figure-9" in build.stdout


def test_mxnet_profiler_output_is_kept_and_is_not_taken_for_a_timeline(tmp_path):
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    job = train(tmp_path, uri, "framework=mxnet", "profile=mxnet", "profile_steps=2")
    (run,) = load_runs(uri).to_dict("records")
    assert run["measured_steps"] == STEPS  # the profiled steps ran after the timed ones, untimed
    for rank in (0, 1):
        trace = job / "profile" / f"rank-{rank}" / "profile.json"
        assert json.loads(trace.read_text())["traceEvents"]  # Chrome trace format: chrome://tracing, Perfetto
        assert "MXNDArrayWaitAll" in (trace.parent / "aggregate.txt").read_text()
        stored = list((tmp_path / "store-artifacts").rglob(f"profile/rank-{rank}/profile.json"))
        assert len(stored) == 1
        with pytest.raises(ProfileError, match="not a Horovod timeline"):
            summarize(trace)  # a real Chrome trace, of another kind: refused in one line
    assert "step_comm_ms" not in run or run["step_comm_ms"] != run["step_comm_ms"]  # no timeline, no split


def test_a_profiler_of_the_other_framework_is_refused(tmp_path):
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    args = [
        sys.executable,
        "-m",
        "scalestudy.train",
        f"hydra.run.dir={tmp_path / 'job'}",
        "framework=mxnet",
        "profile=tf",
    ]
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "config profile='tf'" in proc.stderr and "other framework" in proc.stderr
