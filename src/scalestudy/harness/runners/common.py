"""What both runners share and no framework needs: the step plan, the CIFAR-10 archive, the test-only
fault, and rank 0's result file. A rank imports only its own framework; this module imports neither."""

from __future__ import annotations

import json
import math
import os
import pickle
import signal
import socket
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...files import write_text


@dataclass
class Plan:
    total_steps: int
    steps_per_epoch: int  # epoch boundaries are marked every this many steps


def plan_steps(cfg, size: int, images_per_rank: int) -> Plan:
    """Steps to run: warm-up + steps, or whole epochs of `images_per_rank` when cfg.epochs is set."""
    batch = int(cfg.batch_per_worker)
    per_epoch = images_per_rank // batch
    if per_epoch < 1:
        raise ValueError(f"data: {images_per_rank} images per rank is less than one batch of batch_per_worker={batch}")
    if cfg.get("epochs"):
        return Plan(total_steps=int(cfg.epochs) * per_epoch, steps_per_epoch=per_epoch)
    return Plan(total_steps=int(cfg.warmup_steps) + int(cfg.steps), steps_per_epoch=per_epoch)


@dataclass
class RankData:
    """What one rank trains and tests on, and how many steps it runs."""

    plan: Plan
    train: Shard | None = None  # CIFAR-10: this rank's shard of the training set; None: synthetic images
    test: tuple[np.ndarray, np.ndarray] | None = None  # CIFAR-10: this rank's part of the test set

    @property
    def real(self) -> bool:
        return self.train is not None


def rank_data(cfg, rank: int, size: int) -> RankData:
    """CIFAR-10 shards from the local archive (data=cifar10), or, for synthetic images (which the runner
    makes once, on its device), only the step plan."""
    if cfg.data.name == "synthetic":
        return RankData(plan=plan_steps(cfg, size, math.ceil(int(cfg.data.num_images) / size)))
    x_train, y_train, x_test, y_test = load_cifar10(cfg.data.path, cfg.data.limit_train, cfg.data.limit_test)
    shard = Shard(x_train, y_train, rank, size, int(cfg.batch_per_worker), int(cfg.seed))
    return RankData(
        plan=plan_steps(cfg, size, shard.per_rank), train=shard, test=eval_shard(x_test, y_test, rank, size)
    )


# --------------------------------------------------------------------------------------------
# CIFAR-10 (python version archive): data_batch_1..5 and test_batch, pickled dicts of uint8 rows


def load_cifar10(path: str | Path, limit_train: int | None = None, limit_test: int | None = None):
    """(x_train, y_train, x_test, y_test): uint8 NHWC images and int64 labels, from the archive."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"data.path: CIFAR-10 archive {path.resolve()} does not exist "
            "(the python version, cifar-10-python.tar.gz; nothing is downloaded)"
        )
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if not (name.startswith("data_batch_") or name == "test_batch"):
                continue
            batch = pickle.load(tar.extractfile(member), encoding="bytes")
            x = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
            parts[name] = (x, np.asarray(batch[b"labels"], dtype=np.int64))
    train = [parts[k] for k in sorted(parts) if k.startswith("data_batch_")]
    if not train or "test_batch" not in parts:
        raise ValueError(f"data.path: {path} lacks data_batch_* or test_batch (is it the python version?)")
    x_train, y_train = np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train])
    x_test, y_test = parts["test_batch"]
    if limit_train:
        x_train, y_train = x_train[:limit_train], y_train[:limit_train]
    if limit_test:
        x_test, y_test = x_test[:limit_test], y_test[:limit_test]
    return x_train, y_train, x_test, y_test


class Shard:
    """This rank's share of a labelled set, reshuffled each epoch with the run's seed (same order on
    every rank, so the shards never overlap), served in batches of a fixed size."""

    def __init__(self, x: np.ndarray, y: np.ndarray, rank: int, size: int, batch: int, seed: int):
        self.x, self.y, self.rank, self.size, self.batch, self.seed = x, y, rank, size, batch, seed
        self.per_rank = len(x) // size
        self.epoch = -1
        self._order = np.arange(0)
        self._pos = 0

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pos + self.batch > len(self._order):
            self.epoch += 1
            order = np.random.default_rng(self.seed + self.epoch).permutation(len(self.x))
            self._order = order[self.rank * self.per_rank : (self.rank + 1) * self.per_rank]
            self._pos = 0
        idx = self._order[self._pos : self._pos + self.batch]
        self._pos += self.batch
        return self.x[idx], self.y[idx]


def eval_shard(x: np.ndarray, y: np.ndarray, rank: int, size: int):
    """This rank's part of the test set (every size-th image), for a summed accuracy."""
    return x[rank::size], y[rank::size]


# --------------------------------------------------------------------------------------------
# Test-only fault injection


def maybe_fault(cfg, rank: int, step: int) -> None:
    """If cfg.fault names this rank and step: die at once (kill) or stop answering (hang)."""
    fault = cfg.get("fault") or {}
    if fault.get("kill_rank") is None or int(fault["kill_rank"]) != rank or int(fault.get("at_step") or 0) != step:
        return
    print(f"fault injection: rank {rank} {fault.get('mode', 'kill')} at step {step}", file=sys.stderr, flush=True)
    if fault.get("mode", "kill") == "hang":
        while True:
            time.sleep(3600)
    os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------------------------
# What a rank reports, and rank 0's result file


def rank_info(rank: int, local_rank: int, size: int, **extra) -> dict:
    """Who this rank is (for the result file): its ids, host, pid and program start, and `extra`."""
    from . import PROGRAM_START_UNIX

    return {
        "rank": rank,
        "local_rank": local_rank,
        "size": size,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "process_start_unix": PROGRAM_START_UNIX,
        "python": sys.executable,  # the image's (/opt/venv/bin/python) when the rank ran in one
        "container": os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER"),
        **extra,
    }


def write_result(cfg, records: list[dict], **extra) -> Path:
    """Rank 0 writes every rank's record (sorted by rank) as the job's result file, whole or not at all."""
    path = Path(cfg.launch.result_file)
    write_text(path, json.dumps({"ranks": sorted(records, key=lambda r: r["rank"]), **extra}, indent=1))
    return path


def profile_dir(cfg, rank: int) -> Path:
    """Where this rank's framework profiler writes (profile=tf|mxnet): <job>/profile/rank-N/."""
    path = Path(cfg.launch.job_dir) / "profile" / f"rank-{rank}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def log(rank: int, message: str) -> None:
    print(f"[rank {rank}] {message}", flush=True)
