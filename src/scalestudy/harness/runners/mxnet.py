"""One MXNet/Gluon rank: `train(cfg)`, called by python -m scalestudy.harness.runners JOB_CONFIG.yaml

Reads like Horovod's Gluon examples: init, pin the context by local rank, build the model, wrap
the trainer, broadcast the initial parameters, train with the shared timer. MXNet runs
asynchronously, so each step ends with mx.nd.waitall() before the clock is read.
"""

from __future__ import annotations

import os
import time

from ..timing import StepTimer, peak_rss_mb
from .common import log, maybe_fault, profile_dir, rank_data, rank_info, write_result


def train(cfg) -> None:
    # Imported here, not at the top: a rank imports only its own framework.
    import horovod.mxnet as hvd
    import mxnet as mx
    from mxnet import autograd, gluon

    # 1. Horovod, and one context per rank.
    hvd.init()
    rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
    ctx, device_name = pin_context(mx, cfg, local_rank)
    mx.random.seed(int(cfg.seed))
    if cfg.mixed_precision:
        from mxnet.contrib import amp

        amp.init(target_dtype="float16" if cfg.device == "gpu" else "bfloat16")

    # 2. The model (Gluon model zoo, random weights) and the data.
    size_px, classes, batch = int(cfg.data.image_size), int(cfg.data.num_classes), int(cfg.batch_per_worker)
    net = gluon.model_zoo.vision.get_model(cfg.model.gluon, classes=classes, pretrained=False)
    if cfg.model.name == "inception3" and size_px != 299:
        net.features = global_pool_features(gluon, net)
    net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2), ctx=ctx)
    net.hybridize(static_alloc=True, static_shape=True)
    net(mx.nd.zeros((1, 3, size_px, size_px), ctx=ctx))  # materialise the deferred-shape parameters
    data = rank_data(cfg, rank, size)
    real, plan = data.real, data.plan
    if not real:  # made once, on the device
        synthetic = (
            mx.nd.random.uniform(shape=(batch, 3, size_px, size_px), ctx=ctx),
            mx.nd.random.randint(0, classes, shape=(batch,), ctx=ctx).astype("float32"),
        )

    def prepare(images, labels):
        """uint8 NHWC CIFAR images -> float NCHW model input of the configured size, on the context."""
        x = mx.nd.array(images, ctx=ctx, dtype="uint8").astype("float32").transpose((0, 3, 1, 2)) / 255.0 - 0.5
        if size_px != x.shape[2]:
            x = mx.nd.contrib.BilinearResize2D(x, height=size_px, width=size_px)
        return x, mx.nd.array(labels, ctx=ctx, dtype="float32")

    # 3. SGD (learning rate scaled by the number of ranks) in Horovod's trainer; broadcast from rank 0.
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)
    compression = hvd.Compression.fp16 if cfg.fp16_allreduce else hvd.Compression.none
    trainer = hvd.DistributedTrainer(
        params,
        "sgd",
        {
            "learning_rate": float(cfg.optimizer.lr) * size,
            "momentum": float(cfg.optimizer.momentum),
            "multi_precision": bool(cfg.mixed_precision),
        },
        compression=compression,
    )
    if cfg.mixed_precision:
        amp.init_trainer(trainer)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def train_step(data, label):
        with autograd.record():
            out = net(data)
            loss = loss_fn(out, label)
            if cfg.mixed_precision:
                with amp.scale_loss(loss, trainer) as scaled:
                    autograd.backward(scaled)
            else:
                loss.backward()
        trainer.step(batch)  # allreduces the gradients, then updates
        return loss.mean(), (out.argmax(axis=1) == label).sum()

    # 4. Train: the clock is read after MXNet's engine finished everything the step queued.
    timer = StepTimer(images_per_step=batch, steps_per_epoch=plan.steps_per_epoch)
    train_correct = train_seen = 0
    gpu_peak = 0.0
    log(
        rank,
        f"{size} ranks, {plan.total_steps} steps of {batch} images ({cfg.model.name}, {size_px} px, {device_name})",
    )
    timer.start()
    for step in range(plan.total_steps):
        maybe_fault(cfg, rank, step)
        images, labels = prepare(*data.train.next()) if real else synthetic
        loss, correct = train_step(images, labels)
        mx.nd.waitall()  # synchronises: the step (update included) has finished
        timer.step_done()
        loss, correct = float(loss.asscalar()), int(correct.asscalar())
        if cfg.device == "gpu":
            free, total = mx.context.gpu_memory_info(local_rank)
            gpu_peak = max(gpu_peak, (total - free) / 2**20)
        if step >= plan.total_steps - plan.steps_per_epoch:  # the last epoch's worth of steps
            train_correct, train_seen = train_correct + correct, train_seen + batch
    log(rank, f"trained {plan.total_steps} steps, last loss {loss:.4f}")
    if cfg.get("profile") == "mxnet":  # MXNet's profiler on a few more steps, after the timed ones
        profile_steps(mx, cfg, rank, lambda: train_step(*(prepare(*data.train.next()) if real else synthetic)))

    # 5. Test accuracy (real data; not timed), then rank 0 gathers every rank's numbers.
    accuracy = {}
    if real:
        test_correct, test_seen = held_out_counts(net, prepare, data.test, batch)
        accuracy = dict(train_correct=train_correct, train_seen=train_seen)
        accuracy.update(test_correct=test_correct, test_seen=test_seen)
    gpu = cfg.device == "gpu"
    me = rank_info(rank, local_rank, size, device_name=device_name, threads=int(os.environ.get("OMP_NUM_THREADS", "0")))
    memory = {
        "memory_peak_mb": gpu_peak if gpu else peak_rss_mb(),
        "memory_kind": "gpu_used_peak" if gpu else "rss_peak",
    }
    records = hvd.allgather_object(timer.record(**me, **memory, last_loss=loss, **accuracy))
    if rank == 0:
        write_result(cfg, records, framework={"name": "mxnet", "mxnet": mx.__version__}, written_unix=time.time())
        log(rank, f"result written to {cfg.launch.result_file}")


def pin_context(mx, cfg, local_rank: int):
    """(MXNet context, device name): the GPU of this local rank, or the CPU."""
    if cfg.device != "gpu":
        return mx.cpu(), "cpu"
    if local_rank >= mx.context.num_gpus():
        raise SystemExit(f"device=gpu: local rank {local_rank} but only {mx.context.num_gpus()} GPUs visible")
    name = os.popen(f"nvidia-smi --query-gpu=name --format=csv,noheader -i {local_rank}").read().strip() or "GPU"
    return mx.gpu(local_rank), name


def global_pool_features(gluon, net):
    """gluon's Inception3 ends with an 8x8 average pool sized for 299 px; a global pool is the same there and
    serves any other size."""
    features = gluon.nn.HybridSequential(prefix="")
    for block in list(net.features)[:-2]:
        features.add(block)
    features.add(gluon.nn.GlobalAvgPool2D(), gluon.nn.Dropout(0.5))
    return features


def profile_steps(mx, cfg, rank: int, one_step) -> None:
    """profile=mxnet: MXNet's profiler on cfg.profile_steps more steps (one_step() runs one), after the timed ones:
    a Chrome trace and the time per operator as a table."""
    trace = profile_dir(cfg, rank) / "profile.json"  # Chrome trace format
    mx.profiler.set_config(profile_all=True, aggregate_stats=True, filename=str(trace))
    mx.profiler.set_state("run")
    for _ in range(int(cfg.profile_steps)):
        one_step()
        mx.nd.waitall()
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    (trace.parent / "aggregate.txt").write_text(mx.profiler.dumps())
    log(rank, f"profiled {cfg.profile_steps} steps into {trace}")


def held_out_counts(net, prepare, test, batch: int) -> tuple[int, int]:
    """(correct, seen) of the network on the test images, in batches (not timed)."""
    (x_test, y_test), correct = test, 0
    for i in range(0, len(x_test), batch):
        images, labels = prepare(x_test[i : i + batch], y_test[i : i + batch])
        correct += int((net(images).argmax(axis=1) == labels).sum().asscalar())
    return correct, len(x_test)
