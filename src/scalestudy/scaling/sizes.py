"""Gradient sizes (and forward FLOPs) of the study's models, counted on the models themselves.

`gradient_sizes.csv` (committed beside this file) holds, per model, framework and number of classes, the
trainable parameters (one gradient each, allreduced every step) and the forward FLOPs of one image at the
model's native size. It is generated in the training environment, which has TensorFlow and MXNet:

    make model-sizes        # = .venv-train/bin/python -m scalestudy.scaling sizes

Each framework runs in its own process (a rank never holds both, and neither does this). The light
environment only reads the table. Keras counts trainable variables; Gluon counts parameters whose grad_req
is not 'null' (batch-norm running statistics are neither trained nor reduced). FLOPs come from TensorFlow's
profiler on the frozen forward graph (a multiply-add counts 2); Gluon models get none.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import yaml

from ..config import CONF_DIR
from ..files import write_text

SIZES_FILE = Path(__file__).with_name("gradient_sizes.csv")
COLUMNS = ["model", "framework", "classes", "image_size", "trainable_parameters", "forward_flops"]
CLASSES = (1000, 10)  # ImageNet (TF benchmarks, Horovod) and CIFAR-10 at ImageNet size (HackSA)
# Models of the published claims that no conf/model file names (they cannot be trained here with both
# frameworks): AlexNet (Gluon only). GoogLeNet and Inception-v4 exist in neither Keras nor Gluon.
EXTRA_MODELS = {"alexnet": {"image_size": 224, "keras": None, "gluon": "alexnet"}}


class SizeError(LookupError):
    """No counted size for the model asked for."""


def model_specs() -> dict[str, dict]:
    """Canonical model name -> {image_size, keras, gluon}, from conf/model/*.yaml and EXTRA_MODELS."""
    specs = {}
    for path in sorted((CONF_DIR / "model").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        specs[spec["name"]] = {k: spec.get(k) for k in ("image_size", "keras", "gluon")}
    return {**specs, **EXTRA_MODELS}


def read_sizes(path: Path = SIZES_FILE) -> list[dict]:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key in ("classes", "image_size", "trainable_parameters"):
            row[key] = int(row[key])
        row["forward_flops"] = int(row["forward_flops"]) if row["forward_flops"] else None
    return rows


def size_of(model: str, classes: int = 1000, framework: str | None = None, path: Path = SIZES_FILE) -> dict:
    """The table's row of `model` with `classes` outputs: Keras's where Keras has the model, else Gluon's."""
    rows = [r for r in read_sizes(path) if r["model"] == model and r["classes"] == int(classes)]
    if framework:
        rows = [r for r in rows if r["framework"] == framework]
    rows.sort(key=lambda r: r["framework"] != "keras")
    if not rows:
        raise SizeError(
            f"no gradient size for model={model} with {classes} classes in {path} "
            f"(models counted: {', '.join(sorted({r['model'] for r in read_sizes(path)}))}); "
            "a model neither Keras nor Gluon provides cannot be sized here"
        )
    return rows[0]


def gradient_bytes(model: str, classes: int = 1000, bytes_per_value: int = 4) -> float:
    """Bytes allreduced per step: trainable parameters x bytes per value (4 for fp32, 2 with fp16 compression)."""
    return float(size_of(model, classes)["trainable_parameters"] * bytes_per_value)


# --------------------------------------------------------------------------------------------
# Generating the table (training environment)


def count_keras(name: str, keras_name: str, image_size: int) -> list[dict]:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    from tensorflow.python.profiler.model_analyzer import profile
    from tensorflow.python.profiler.option_builder import ProfileOptionBuilder

    rows = []
    for classes in CLASSES:
        model = getattr(tf.keras.applications, keras_name)(
            weights=None, input_shape=(image_size, image_size, 3), classes=classes
        )
        flops = None
        if classes == 1000:
            spec = tf.TensorSpec([1, image_size, image_size, 3], tf.float32)
            graph = convert_variables_to_constants_v2(
                tf.function(lambda x, m=model: m(x, training=False)).get_concrete_function(spec)
            ).graph
            options = ProfileOptionBuilder(ProfileOptionBuilder.float_operation()).with_empty_output().build()
            flops = int(profile(graph, options=options).total_float_ops)
        trainable = sum(int(tf.size(v)) for v in model.trainable_variables)
        rows.append(_row(name, "keras", classes, image_size, trainable, flops))
        tf.keras.backend.clear_session()
    return rows


def count_gluon(name: str, gluon_name: str, image_size: int) -> list[dict]:
    import mxnet as mx

    rows = []
    for classes in CLASSES:
        net = mx.gluon.model_zoo.vision.get_model(gluon_name, classes=classes, pretrained=False)
        net.initialize()
        net(mx.nd.zeros((1, 3, image_size, image_size)))  # materialise the deferred shapes
        trainable = sum(int(p.data().size) for p in net.collect_params().values() if p.grad_req != "null")
        rows.append(_row(name, "gluon", classes, image_size, trainable, None))
    return rows


def _row(model, framework, classes, image_size, trainable, flops) -> dict:
    return dict(zip(COLUMNS, [model, framework, classes, image_size, trainable, flops]))


def count_framework(framework: str) -> list[dict]:
    """Rows of every model `framework` provides (run in a process of its own)."""
    rows = []
    for name, spec in sorted(model_specs().items()):
        builder = spec.get(framework)
        if builder:
            count = count_keras if framework == "keras" else count_gluon
            rows += count(name, builder, int(spec["image_size"]))
            print(f"{framework} {name}: {rows[-1]['trainable_parameters']:,} trainable", file=sys.stderr, flush=True)
    return rows


def generate(out: Path = SIZES_FILE) -> list[dict]:
    """Count every model in Keras and Gluon (one process per framework) and write the table whole."""
    rows = []
    for framework in ("keras", "gluon"):
        proc = subprocess.run(
            [sys.executable, "-m", "scalestudy.scaling", "count", framework], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"counting the {framework} models failed:\n{proc.stderr[-3000:]}")
        rows += json.loads(proc.stdout.strip().splitlines()[-1])
    rows.sort(key=lambda r: (r["model"], r["framework"], -r["classes"]))
    lines = [",".join(COLUMNS)]
    lines += [",".join("" if r[c] is None else str(r[c]) for c in COLUMNS) for r in rows]
    write_text(out, "\n".join(lines) + "\n")
    return rows
