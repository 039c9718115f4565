"""`python -m scalestudy.scaling predict|validate`: the model on the command line, over the published runs.

Settings come from conf/scaling/default.yaml; KEY=VALUE arguments override its `predict` keys (model, workers,
device, batch_per_worker, classes, gpus_per_node, intra, network, fp16, throughput_1gpu) or its top-level ones
(fit_max_workers, prediction_fit, envelope.level, ...). The published runs are read from the MLflow store
(`make import` first).
"""

from __future__ import annotations

import sys

import numpy as np
from omegaconf import OmegaConf

from ..config import CONF_DIR

SETTINGS_FILE = CONF_DIR / "scaling" / "default.yaml"
MLPERF_FILE = CONF_DIR / "scaling" / "mlperf.yaml"  # MLPerf's test of the model
EXTRA_PREDICT_KEYS = {"throughput_1gpu": None}  # images/s of one GPU of your own (null: the device's published run)


def load_settings(overrides: list[str]) -> dict:
    """conf/scaling/default.yaml with KEY=VALUE overrides (predict keys without the `predict.` prefix)."""
    base = OmegaConf.load(SETTINGS_FILE)
    base.mlperf = OmegaConf.load(MLPERF_FILE)
    base.predict = OmegaConf.merge(base.predict, EXTRA_PREDICT_KEYS)
    dotted = []
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"argument {item!r}: write KEY=VALUE (e.g. workers=512)")
        key, value = item.split("=", 1)
        if key in base.predict:
            key = f"predict.{key}"
        elif OmegaConf.select(base, key) is None and key not in base:
            known = ", ".join([*base.predict.keys(), "fit_max_workers", "prediction_fit", "envelope.level"])
            raise ValueError(f"unknown key {key!r} (known: {known})")
        dotted.append(f"{key}={value}")
    settings = OmegaConf.to_container(OmegaConf.merge(base, OmegaConf.from_dotlist(dotted)), resolve=True)
    check_predict(settings["predict"])
    check_envelope(settings)
    return settings


# Whole numbers >= 1 and at most: a count beyond these is a typing slip (the largest MLPerf system had 4,320
# accelerators); unbounded, workers=99999999999999999999999 reached numpy as an object it cannot take the log of.
COUNT_KEYS = {"workers": 10**7, "batch_per_worker": 10**7, "classes": 10**7, "gpus_per_node": 10**4}


def check_predict(p: dict) -> None:
    """The predict keys that are counts are whole numbers in [1, their most], fp16 true or false, and
    throughput_1gpu a finite rate > 0 (or null); else SchemaError naming the argument (workers=2.5 is not silently
    2, fp16=maybe not silently true, throughput_1gpu=-5 not a negative rate)."""
    from ..schema import POSITIVE, SchemaError, check_count, check_value

    for key, most in COUNT_KEYS.items():
        check_count(f"argument {key}", p[key], 1)
        if float(p[key]) > most:
            raise SchemaError(
                f"argument {key} is {p[key]!r}, more than {most:,}: give a whole number from 1 to {most:,}"
            )
    if not isinstance(p.get("fp16"), bool):
        raise SchemaError(f"argument fp16 is {p.get('fp16')!r}: write fp16=true or fp16=false")
    if p.get("throughput_1gpu") is not None:
        check_value("argument throughput_1gpu (images/s)", p["throughput_1gpu"], *POSITIVE)


def check_envelope(settings: dict) -> None:
    """envelope.level a probability strictly between 0 and 1 (an F-test region's level), fit_max_workers a whole
    number >= 2; else SchemaError naming the argument."""
    from ..schema import SchemaError, check_count

    level = settings["envelope"]["level"]
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise SchemaError(f"argument envelope.level is {level!r}, not a number between 0 and 1 (e.g. 0.95)")
    for key in ("overlaps", "bandwidths"):
        check_count(f"argument envelope.{key}", settings["envelope"][key], 2)
        if float(settings["envelope"][key]) > 10**4:
            raise SchemaError(f"argument envelope.{key} is {settings['envelope'][key]!r}, more than 10,000 grid steps")
    check_count("argument fit_max_workers", settings["fit_max_workers"], 2)


def _runs():
    from ..store import load_runs

    return load_runs()


def predict_command(args: list[str]) -> int:
    from .cost import Network, hierarchical_allreduce_s, ring_allreduce_s
    from .sizes import SizeError, gradient_bytes
    from .study import compute_time, fit_dataset, network_link, predict

    if args[:1] == ["help"]:
        print(__doc__)
        return 0
    try:
        settings = load_settings(args)
        p = settings["predict"]
        runs = _runs()
        nbytes = gradient_bytes(str(p["model"]), int(p["classes"])) / (2 if p["fp16"] else 1)
        if p.get("throughput_1gpu"):
            compute_s, basis = int(p["batch_per_worker"]) / float(p["throughput_1gpu"]), "given"
        else:
            compute_s, basis = compute_time(
                runs, settings, str(p["device"]), str(p["model"]), int(p["batch_per_worker"])
            )
        fitted, _, _ = fit_dataset(runs, settings, settings["prediction_fit"])
        net = Network(
            network_link(settings, str(p["intra"])), network_link(settings, str(p["network"])), int(p["gpus_per_node"])
        )
    except (ValueError, LookupError, SizeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    workers = int(p["workers"])
    per_node = min(workers, net.gpus_per_node)
    nodes = -(-workers // per_node)
    print(
        f"{p['model']} on {workers} {p['device']} GPUs ({per_node} per node, {nodes} nodes), batch "
        f"{p['batch_per_worker']} per GPU, {settings['networks'][p['intra']]['label']} inside and "
        f"{settings['networks'][p['network']]['label']} between nodes (line rate)"
        f"{', fp16 compression' if p['fp16'] else ''}\n"
        f"  one GPU: {1e3 * compute_s:.1f} ms per step ({basis}); gradients {nbytes / 1e6:.1f} MB per step\n"
        f"  allreduce: {1e3 * ring_allreduce_s(per_node, nbytes, net.intra):.1f} ms inside a node + "
        f"{1e3 * ring_allreduce_s(nodes, nbytes, net.inter):.1f} ms between nodes = "
        f"{1e3 * hierarchical_allreduce_s(workers, nbytes, net):.1f} ms\n"
        f"  overlap fitted on {settings['prediction_fit']}: {fitted.values[2]:.2f} (the data allow "
        f"{fitted.envelope[:, 2].min():.2f} to {fitted.envelope[:, 2].max():.2f})"
    )
    print(
        f"\n  envelope: what the fitted points allow inside the hardware's bounds ({100 * fitted.level:.0f} % F-test "
        "region, conf/scaling/default.yaml envelope); not a calibrated prediction interval"
    )
    print(f"\n  {'GPUs':>5}  {'efficiency':>10}  {'envelope':>13}  {'images/s':>10}")
    for n in sorted({int(2**k) for k in range(int(np.log2(workers)) + 1)} | {workers}):
        e = predict(
            fitted,
            settings,
            workers=n,
            compute_s=compute_s,
            nbytes=nbytes,
            gpus_per_node=int(p["gpus_per_node"]),
            intra=str(p["intra"]),
            network=str(p["network"]),
        )
        rate = n * int(p["batch_per_worker"]) / compute_s * e["efficiency"]
        print(f"  {n:>5}  {e['efficiency']:>10.3f}  {e['low']:>6.3f}..{e['high']:<6.3f}  {rate:>10.0f}")
    return 0


def validate_command(args: list[str]) -> int:
    from .study import validation

    try:
        settings = load_settings(args)
        results = validation(_runs(), settings)
    except (ValueError, LookupError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for res in results:
        params = res["parameters"]
        print(
            f"{res['dataset']} ({res['label']}; {res['allreduce']}): fitted on {res['fit_points']} points at "
            f"{res['fit_workers']} GPUs, residual rms {100 * res['residual_rms']:.1f} points (envelope: up to "
            f"{100 * res['threshold_rms']:.1f})"
        )
        for name, v in params.items():
            print(f"  {name:<11} {v['value']:9.3f}  (envelope {v['low']:.3f} .. {v['high']:.3f}; cap {v['cap']:g})")
        for h in res["held_out"]:
            print(
                f"  {h['group']:<28} {h['workers']:>3} GPUs: observed {h['observed']:.3f}, predicted "
                f"{h['predicted']:.3f} ({h['low']:.3f} .. {h['high']:.3f}), error {100 * h['error']:+.1f} points"
            )
        if res["held_out"]:
            print(
                f"  held-out error: mean |error| {100 * res['mean_abs_error']:.1f}, "
                f"max {100 * res['max_abs_error']:.1f} points; the envelope covers {res['covered']} of "
                f"{len(res['held_out'])}"
            )
        for note in res["skipped"]:
            print(f"  not modelled: {note}")
    return 0
