"""One TensorFlow/Keras rank: `train(cfg)`, called by python -m scalestudy.harness.runners JOB_CONFIG.yaml

Reads like Horovod's Keras examples: init, pin the device by local rank, build the model, wrap
the optimizer, broadcast the initial variables, train with the shared timer. The train step is a
tf.function whose loss comes back as numpy, so the clock is read after the device finished.
"""

from __future__ import annotations

import os
import time

from ..timing import StepTimer, peak_rss_mb
from .common import log, maybe_fault, profile_dir, rank_data, rank_info, write_result


def train(cfg) -> None:
    # Imported here, not at the top: a rank imports only its own framework.
    import horovod.tensorflow.keras as hvd
    import tensorflow as tf
    from horovod.tensorflow import allgather_object, broadcast_variables

    # 1. Horovod, and one device per rank.
    hvd.init()
    rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
    device_name = pin_device(tf, cfg, local_rank)
    tf.keras.utils.set_random_seed(int(cfg.seed))  # the same initial weights everywhere, broadcast anyway
    if cfg.xla:
        tf.config.optimizer.set_jit("autoclustering")  # Horovod's ops stay outside the XLA clusters
    if cfg.mixed_precision:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")

    # 2. The model (Keras applications, random weights) and the data.
    channels_first = cfg.data_format == "NCHW"
    tf.keras.backend.set_image_data_format("channels_first" if channels_first else "channels_last")
    size_px, classes, batch = int(cfg.data.image_size), int(cfg.data.num_classes), int(cfg.batch_per_worker)
    shape = (3, size_px, size_px) if channels_first else (size_px, size_px, 3)
    model = getattr(tf.keras.applications, cfg.model.keras)(
        weights=None, input_shape=shape, classes=classes, classifier_activation=None
    )
    data = rank_data(cfg, rank, size)
    real, plan = data.real, data.plan
    if not real:
        with tf.device("/GPU:0" if cfg.device == "gpu" else "/CPU:0"):  # made once, on the device
            synthetic = (
                tf.random.uniform((batch, *shape), seed=int(cfg.seed)),
                tf.random.uniform((batch,), maxval=classes, dtype=tf.int64, seed=int(cfg.seed)),
            )

    def prepare(images):
        """uint8 NHWC CIFAR images -> float model input of the configured size and layout."""
        x = tf.cast(images, tf.float32) / 255.0 - 0.5
        if size_px != x.shape[1]:
            x = tf.image.resize(x, (size_px, size_px))
        return tf.transpose(x, (0, 3, 1, 2)) if channels_first else x

    # 3. SGD (learning rate scaled by the number of ranks), wrapped by Horovod; broadcast from rank 0.
    opt = tf.keras.optimizers.legacy.SGD(
        learning_rate=float(cfg.optimizer.lr) * size, momentum=float(cfg.optimizer.momentum)
    )
    compression = hvd.Compression.fp16 if cfg.fp16_allreduce else hvd.Compression.none
    opt = hvd.DistributedOptimizer(opt, compression=compression)
    if cfg.mixed_precision:
        opt = tf.keras.mixed_precision.LossScaleOptimizer(opt)  # scales the loss; Horovod reduces inside
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    broadcast_variables(model.variables, root_rank=0)

    @tf.function
    def train_step(images, labels):
        if real:
            images = prepare(images)
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = loss_fn(labels, logits)
        opt.minimize(loss, model.trainable_variables, tape=tape)  # gradients are allreduced in minimize
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.int64))
        return loss, correct

    # 4. Train: the clock is read after each step's loss is on the host.
    timer = StepTimer(images_per_step=batch, steps_per_epoch=plan.steps_per_epoch)
    train_correct = train_seen = 0
    log(rank, f"{size} ranks, {plan.total_steps} steps of {batch} images ({cfg.model.name}, {shape}, {device_name})")
    timer.start()
    for step in range(plan.total_steps):
        maybe_fault(cfg, rank, step)
        images, labels = data.train.next() if real else synthetic
        loss, correct = train_step(images, labels)
        loss, correct = loss.numpy(), int(correct.numpy())  # synchronises: the step has finished
        timer.step_done()
        if step >= plan.total_steps - plan.steps_per_epoch:  # the last epoch's worth of steps
            train_correct, train_seen = train_correct + correct, train_seen + batch
    log(rank, f"trained {plan.total_steps} steps, last loss {loss:.4f}")
    if cfg.get("profile") == "tf":  # TensorFlow's profiler on a few more steps, after the timed ones
        profile_steps(tf, cfg, rank, plan.total_steps, lambda: train_step(*(data.train.next() if real else synthetic)))

    # 5. Test accuracy (real data; not timed), then rank 0 gathers every rank's numbers.
    accuracy = {}
    if real:
        test_correct, test_seen = held_out_counts(tf, model, prepare, data.test, batch)
        accuracy = dict(
            train_correct=train_correct, train_seen=train_seen, test_correct=test_correct, test_seen=test_seen
        )
    gpu = cfg.device == "gpu"
    me = rank_info(
        rank, local_rank, size, device_name=device_name, threads=tf.config.threading.get_intra_op_parallelism_threads()
    )
    memory = {
        "memory_peak_mb": tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20 if gpu else peak_rss_mb(),
        "memory_kind": "gpu_peak" if gpu else "rss_peak",
    }
    records = allgather_object(timer.record(**me, **memory, last_loss=float(loss), **accuracy))
    if rank == 0:
        write_result(
            cfg,
            records,
            framework={
                "name": "tensorflow",
                "tensorflow": tf.__version__,
                "horovod": hvd.__version__ if hasattr(hvd, "__version__") else "",
            },
            written_unix=time.time(),
        )
        log(rank, f"result written to {cfg.launch.result_file}")


def pin_device(tf, cfg, local_rank: int) -> str:
    """One GPU per rank (by local rank, memory grown as needed), or the CPU with OMP_NUM_THREADS threads; the
    device's name."""
    gpus = tf.config.list_physical_devices("GPU")
    if cfg.device == "gpu":
        if local_rank >= len(gpus):
            raise SystemExit(f"device=gpu: local rank {local_rank} but only {len(gpus)} GPUs visible")
        tf.config.experimental.set_memory_growth(gpus[local_rank], True)
        tf.config.set_visible_devices(gpus[local_rank], "GPU")
        return tf.config.experimental.get_device_details(gpus[local_rank]).get("device_name", "GPU")
    tf.config.set_visible_devices([], "GPU")
    threads = int(os.environ.get("OMP_NUM_THREADS", "0")) or None
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(2)
    return "cpu"


def profile_steps(tf, cfg, rank: int, first_step: int, one_step) -> None:
    """profile=tf: TensorFlow's profiler on cfg.profile_steps more steps (one_step() runs one), after the timed ones."""
    logdir = profile_dir(cfg, rank)
    tf.profiler.experimental.start(str(logdir))
    for step in range(first_step, first_step + int(cfg.profile_steps)):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):  # step markers for TensorBoard
            one_step()[0].numpy()
    tf.profiler.experimental.stop()
    log(rank, f"profiled {cfg.profile_steps} steps into {logdir}")


def held_out_counts(tf, model, prepare, test, batch: int) -> tuple[int, int]:
    """(correct, seen) of the model on the test images, in batches (not timed)."""
    (x_test, y_test), correct = test, 0
    for i in range(0, len(x_test), batch):
        logits = model(prepare(x_test[i : i + batch]), training=False)
        correct += int(tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y_test[i : i + batch]), tf.int64)))
    return correct, len(x_test)
