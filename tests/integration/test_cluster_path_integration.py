"""The reviewer's path of docs/cluster.md, "A rehearsal on one machine", run as written: the documented sweep on a
two-node Slurm cluster, every rank inside the CPU image's SIF, then figure 1 from the three runs.

What the docs' setup commands make, the session's fixtures make the same way: `make train-env` is the training
environment the tests run in, `make image-cpu` and `make sif IMAGE=scalestudy:cpu` are the `cpu_image` and
`cpu_sif` fixtures (tests/image_fixtures.py, the same make targets), `make cluster-up` and the SLURM_CONF it
prints are the `slurm_cluster` fixture (tests/slurm_cluster.py, the same scripts/cluster.py). The sweep command is
run by bash exactly as the docs print it, in a folder that holds what `$PWD` names there (the checkout's
.venv-train and scripts/, the SIF as scalestudy.sif). `make figure-1 source=measured` is run as written with
ARGS=out_dir=... added, so that the checkout's paper/figures is left as it was."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from doc_commands import fenced_commands
from helpers import REPO
from test_rehearsal_cluster_integration import _hosts
from test_slurm import _artifact_files
from test_slurm_integration import _need_training_python

from scalestudy.store import load_runs

DOC = REPO / "docs" / "cluster.md"
SECTION = "## A rehearsal on one machine"
# What the session's fixtures stand in for, in the docs' order (the test fails when the docs' setup changes).
SETUP = [
    "make train-env",
    "make image-cpu",
    "make sif IMAGE=scalestudy:cpu",
    "make cluster-up",
    "export SLURM_CONF=$PWD/.cluster/slurm.conf",
    "sinfo",
]


def rehearsal_commands() -> list[str]:
    """The shell commands of the docs' rehearsal section, comments dropped, in order."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return [c.text.split(" # ")[0].strip() for c in fenced_commands(str(DOC), text[start:end])]


def test_the_docs_rehearsal_is_setup_sweep_figure_and_down():
    commands = rehearsal_commands()
    assert commands[: len(SETUP)] == SETUP
    assert commands[len(SETUP)].startswith(".venv-train/bin/python -m scalestudy.train -m cluster=rehearsal ")
    assert commands[len(SETUP) + 1 :] == ["make figure-1 source=measured", "make cluster-down"]


def _rehearsal_folder(tmp_path: Path, sif: Path) -> Path:
    """What the docs' `$PWD` holds after their setup: the training environment, scripts/ and scalestudy.sif."""
    here = tmp_path / "checkout"
    here.mkdir()
    for name in (".venv-train", "scripts"):
        (here / name).symlink_to(REPO / name)
    (here / "scalestudy.sif").symlink_to(sif)
    return here


def test_the_documented_sweep_runs_inside_the_sif_on_two_nodes_and_draws_figure_1(slurm_cluster, cpu_sif, tmp_path):
    _need_training_python()
    sweep = rehearsal_commands()[len(SETUP)]
    here = _rehearsal_folder(tmp_path, cpu_sif)
    store = here / ".mlflow" / "store.db"
    store.parent.mkdir()
    env = dict(slurm_cluster.env, MLFLOW_TRACKING_URI=f"sqlite:///{store}", TF_CPP_MIN_LOG_LEVEL="2")
    start = time.monotonic()
    proc = subprocess.run(["bash", "-c", sweep], cwd=here, env=env, capture_output=True, text=True, timeout=1500)
    seconds = time.monotonic() - start
    uri = env["MLFLOW_TRACKING_URI"]
    runs = load_runs(uri).sort_values("workers")
    assert proc.returncode == 0, proc.stderr[-5000:] + slurm_cluster.log_tails()
    print(f"the documented rehearsal sweep (workers=1,2,4, inside the SIF): {seconds:.0f} s")
    assert runs.workers.tolist() == [1, 2, 4] and set(runs.status) == {"FINISHED"}, runs.failure.tolist()
    assert "3 run(s) of" in proc.stderr and set(runs.study) == {"figure-1"} and set(runs.source) == {"measured"}
    # 128 images of 4 per rank and step: 32, 16 and 8 steps, 2 of them warm-up
    assert runs.measured_steps.tolist() == [30, 14, 6] and (runs.throughput_total > 0).all()
    jobs = {run.workers: Path(run.job_dir) for run in runs.itertuples()}
    assert _hosts(jobs[4]) == {0: "node1", 1: "node1", 2: "node2", 3: "node2"}
    launcher = (jobs[4] / "launcher.log").read_text()
    runtime = (here / "scripts" / "sif-exec").resolve()  # the config's path, made absolute
    assert f"{runtime} exec" in launcher and f"{here}/scalestudy.sif" in launcher, launcher[-3000:]
    for job in jobs.values():  # every rank ran the image's Python, in the SIF (named as Apptainer names it)
        ranks = json.loads((job / "result.json").read_text())["ranks"]
        assert {(r["python"], r["container"]) for r in ranks} == {("/opt/venv/bin/python", str(cpu_sif.resolve()))}
    files = _artifact_files(uri, runs.iloc[2].run_id)
    assert {f"logs/rank-logs/rank.{r}/stdout" for r in range(4)} <= {f.rsplit("/", 1)[0] for f in files}
    assert any(f.startswith("slurm/") and f.endswith("_log.err") for f in files), files

    out = tmp_path / "paper"
    figure = subprocess.run(
        ["make", "--no-print-directory", "figure-1", "source=measured", f"ARGS=out_dir={out}"],
        cwd=REPO,
        env=dict(os.environ, MLFLOW_TRACKING_URI=uri),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert figure.returncode == 0, figure.stderr[-3000:]
    sidecar = json.loads((out / "figures" / "figure-1.json").read_text())
    assert sorted(r["run_id"] for r in sidecar["mlflow_runs"]) == sorted(runs.run_id)
    assert (out / "figures" / "figure-1.pdf").read_bytes().startswith(b"%PDF")
