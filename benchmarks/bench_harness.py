"""How much does the harness cost? A bare Horovod synthetic training loop against `scalestudy.train`.

  .venv-train/bin/python benchmarks/bench_harness.py                       # resnet50, 2 ranks, 224 px, batch 8
  .venv-train/bin/python benchmarks/bench_harness.py --image-size 32 --batch 4 --steps 20 --workers 2

Both sides run the same Keras model, image size, batch per rank, rank count, warm-up and step count
on this machine, one after the other, in this one invocation:
- bare: the shape of Horovod's TensorFlow 2 synthetic benchmark (horovod.tensorflow, a
  DistributedGradientTape, one tf.function step, variables broadcast after the first step, random
  data made once on the device); after the warm-up the measured steps are timed as one block, with
  no per-step synchronisation. Each rank's images/s are gathered and summed (Horovod's own script
  prints rank 0's number times N instead; both are printed here).
- harness: `python -m scalestudy.train` with the same settings, which syncs and reads the clock
  after every step and records an MLflow run (in a throw-away store unless --keep-runs).
Printed: both totals (images/s over all ranks) and harness / bare, per pair of runs. --repeat N
runs N pairs in ABBA order (bare first in pairs 1, 4, 5, 8, ..., the harness first in the others), so
a machine that slows down or speeds up over the benchmark does not favour one side, and prints the
median ratio, its range, and the mean ratio with a 95 % interval: on a shared 2-core machine one pair
varies by several per cent either way. Wall time of each side's whole command is printed too, but the
ratio compares throughput over the measured steps only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KERAS = {
    "resnet50": "ResNet50",
    "resnet101": "ResNet101",
    "vgg16": "VGG16",
    "vgg19": "VGG19",
    "inception3": "InceptionV3",
}


def bare_rank(args) -> None:
    """One rank of the bare loop (run under horovodrun by bare())."""
    import horovod.tensorflow as hvd
    import numpy as np
    import tensorflow as tf

    hvd.init()
    tf.config.set_visible_devices([], "GPU")
    threads = int(os.environ.get("OMP_NUM_THREADS", "0"))
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.keras.utils.set_random_seed(1337)
    model = getattr(tf.keras.applications, KERAS[args.model])(
        weights=None, input_shape=(args.image_size, args.image_size, 3), classes=1000, classifier_activation=None
    )
    opt = tf.keras.optimizers.legacy.SGD(0.01 * hvd.size(), momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    images = tf.random.uniform((args.batch, args.image_size, args.image_size, 3), seed=1337)
    labels = tf.random.uniform((args.batch,), maxval=1000, dtype=tf.int64, seed=1337)

    @tf.function
    def step(first: bool):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if first:  # after the first step, when the optimizer's slots exist
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)
        return loss

    step(True).numpy()
    for _ in range(args.warmup - 1):
        step(False)
    step(False).numpy()  # the warm-up has finished
    start = time.perf_counter()
    for _ in range(args.steps - 1):
        step(False)
    step(False).numpy()  # the last measured step has finished
    rate = args.batch * args.steps / (time.perf_counter() - start)
    rates = hvd.allgather_object(rate)
    if hvd.rank() == 0:
        Path(args.result).write_text(json.dumps({"rates": rates}))
        print(
            f"bare: rank 0 {rate:.2f} img/s; Horovod-style total {rate * hvd.size():.2f}; "
            f"sum of ranks {np.sum(rates):.2f}",
            flush=True,
        )


def horovodrun(workers: int) -> list[str]:
    return [
        str(Path(sys.executable).parent / "horovodrun"),
        "-np",
        str(workers),
        "-H",
        f"localhost:{workers}",
        "--gloo",
    ]


def bare(args, tmp: Path) -> tuple[float, float, float]:
    """(sum over ranks, rank 0 x N, wall s) of the bare loop."""
    result = tmp / "bare.json"
    cmd = horovodrun(args.workers) + [
        sys.executable,
        __file__,
        "--bare-rank",
        "--result",
        str(result),
        *[f"--{k.replace('_', '-')}={v}" for k, v in common(args).items()],
    ]
    env = dict(
        os.environ,
        CUDA_VISIBLE_DEVICES="",
        TF_CPP_MIN_LOG_LEVEL="1",
        OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // args.workers)),
    )
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bare loop failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    rates = json.loads(result.read_text())["rates"]
    return sum(rates), rates[0] * len(rates), wall


def harness(args, tmp: Path) -> tuple[float, dict, float]:
    """(throughput_total, the run's summary line, wall s) of `python -m scalestudy.train`."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") if args.keep_runs else f"sqlite:///{tmp / 'store.db'}"
    cmd = [
        sys.executable,
        "-m",
        "scalestudy.train",
        "framework=tensorflow",
        f"model={args.model}",
        f"workers={args.workers}",
        "data=synthetic",
        f"data.image_size={args.image_size}",
        f"batch_per_worker={args.batch}",
        f"warmup_steps={args.warmup}",
        f"steps={args.steps}",
        "min_measured_steps=2",
        "tracking.experiment=bench-harness",
        f"hydra.run.dir={tmp / 'job'}",
    ]
    env = dict(os.environ, **({"MLFLOW_TRACKING_URI": uri} if uri else {}))
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"harness failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    summary = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    return float(summary["throughput_total"]), summary, wall


def common(args) -> dict:
    return {
        "model": args.model,
        "image_size": args.image_size,
        "batch": args.batch,
        "warmup": args.warmup,
        "steps": args.steps,
    }


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `make bench-harness ARGS=...` (python benchmarks/bench_harness.py ...)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet50", choices=sorted(KERAS))
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=8, help="images per rank and step")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="measured steps after the warm-up")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs, interleaved (bare, harness, ...)")
    parser.add_argument("--keep-runs", action="store_true", help="log the harness run to MLFLOW_TRACKING_URI")
    parser.add_argument("--bare-rank", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    parser = argument_parser()
    args = parser.parse_args()
    if args.bare_rank:
        return bare_rank(args)
    settings = ", ".join(f"{k}={v}" for k, v in common(args).items())
    print(f"same settings on both sides: {settings}, workers={args.workers} (TensorFlow, CPU, Gloo)", flush=True)
    ratios = []
    for i in range(args.repeat):
        bare_first = i % 4 in (0, 3)  # ABBA: drift over the benchmark falls on both sides alike
        with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
            if not bare_first:
                total_ours, summary, wall_ours = harness(args, Path(tmp))
            total_bare, horovod_style, wall_bare = bare(args, Path(tmp))
            if bare_first:
                total_ours, summary, wall_ours = harness(args, Path(tmp))
        ratios.append(total_ours / total_bare)
        print(f"[{i + 1}/{args.repeat}] ({'bare' if bare_first else 'harness'} ran first)")
        print(
            f"[{i + 1}/{args.repeat}] bare Horovod loop : {total_bare:10.2f} img/s total "
            f"(sum of ranks; rank 0 x N = {horovod_style:.2f}), command {wall_bare:.1f} s"
        )
        ci = f"95 % CI {summary.get('throughput_ci95_low')} .. {summary.get('throughput_ci95_high')}"
        print(
            f"[{i + 1}/{args.repeat}] scalestudy.train  : {total_ours:10.2f} img/s total ({ci}), "
            f"command {wall_ours:.1f} s"
        )
        print(f"[{i + 1}/{args.repeat}] ratio harness / bare: {ratios[-1]:.3f}", flush=True)
    if args.repeat > 1:
        from scalestudy.harness.timing import mean_interval

        ci = mean_interval(ratios)
        print(
            f"ratio harness / bare: median {statistics.median(ratios):.3f}, "
            f"range {min(ratios):.3f} .. {max(ratios):.3f} over {args.repeat} pairs; "
            f"mean {ci['mean']:.3f}, 95 % interval {ci['ci_low']:.3f} .. {ci['ci_high']:.3f}"
        )


if __name__ == "__main__":
    main()
