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
TOP_KEYS = ("fit.experiment", "fit.runs.COLUMN", "fit.group", "fit_max_workers", "prediction_fit", "envelope.level")
UNKNOWN = object()


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
        elif OmegaConf.select(base, key, default=UNKNOWN) is UNKNOWN and not key.startswith("fit.runs."):
            known = ", ".join([*base.predict.keys(), *TOP_KEYS])
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

    if args[:1] and args[0] in ("help", "-h", "--help"):
        print(predict_help(load_settings([])))
        return 0
    try:
        settings = load_settings(args)
        p = settings["predict"]
        runs = _runs()
        if settings["fit"]["experiment"] is not None:
            return predict_yours(runs, settings)
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
    # a rate of your own GPU replaces the device's: the device named would be one not used
    gpu = (
        f"GPUs of your own ({p['throughput_1gpu']:g} img/s at one GPU)"
        if p.get("throughput_1gpu")
        else (f"{p['device']} GPUs")
    )
    per_node = min(workers, net.gpus_per_node)
    nodes = -(-workers // per_node)
    print(
        f"{p['model']} on {workers} {gpu} ({per_node} per node, {nodes} nodes), batch "
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


def predict_help(settings: dict) -> str:
    """What `predict` takes, with the values each key allows (from conf/scaling/default.yaml and the sizes table)."""
    from .sizes import read_sizes

    models = sorted({row["model"] for row in read_sizes()})
    p = settings["predict"]
    return "\n".join(
        [
            "python -m scalestudy.scaling predict [KEY=VALUE...]: the model's efficiency at `workers` GPUs",
            "",
            f"  model=M            one of {', '.join(models)} (default {p['model']})",
            f"  workers=N          GPUs to predict, 1 to 10,000,000 (default {p['workers']})",
            f"  device=D           {', '.join(settings['devices'])} (TF 2017's 1-GPU runs), or any device with a 1-GPU "
            f"run of the model in the store (default {p['device']})",
            f"  batch_per_worker=B images per GPU and step (default {p['batch_per_worker']})",
            f"  classes=C          the model's output classes, for its gradient bytes (default {p['classes']})",
            f"  gpus_per_node=G    (default {p['gpus_per_node']})",
            f"  intra=L, network=L links inside and between nodes: {', '.join(settings['networks'])} "
            f"(default {p['intra']}, {p['network']})",
            "  fp16=true|false    gradients compressed to half precision (default false)",
            "  throughput_1gpu=R  images/s of one GPU of your own at batch_per_worker (default: the device's run)",
            f"  prediction_fit=F   the dataset whose fitted overlap is used: {', '.join(settings['datasets'])}",
            "  fit.experiment=E   fit your own experiment's runs instead (any source); fit.runs.COLUMN=VALUE narrows "
            "them, fit.group='[model,device,...]' groups them (default model, device, platform, variable_update)",
            "  envelope.level=P   the F-test region's level, between 0 and 1 (default 0.95)",
        ]
    )


def predict_yours(runs, settings: dict) -> int:
    """`predict fit.experiment=NAME`: the fit to your runs (each with its residual), then each group of the model
    predicted up to `workers` GPUs with its measured points beside."""
    from .yours import fit_experiment

    p, experiment = settings["predict"], str(settings["fit"]["experiment"])
    fitted, frame, groups, skipped = fit_experiment(runs, settings, experiment, str(p["model"]))
    multi = frame[frame["workers"] > 1]
    links = f"{settings['networks'][p['intra']]['label']} / {settings['networks'][p['network']]['label']}"
    print(f"fitted to experiment {experiment}: {len(multi)} multi-GPU run(s) in {multi['group'].nunique()} group(s), "
          f"links bounded by {links} (inside / between nodes), {p['gpus_per_node']} GPUs per node")  # fmt: skip
    for note in skipped:
        print(f"  left out: {note}")
    print(f"\n  {'GPUs':>5}  {'measured':>8}  {'fitted':>6}  {'residual':>8}  run")
    for r in multi.itertuples():
        model_e = fitted.predict(int(r.workers), float(r.compute_s), float(r.nbytes))["efficiency"]
        print(f"  {r.workers:>5}  {r.efficiency_speed:>8.3f}  {model_e:>6.3f}  {r.efficiency_speed - model_e:>+8.3f}  "
              f"{r.run_name} ({r.run_id})")  # fmt: skip
    for name, v in fitted.summary().items():
        print(f"  {name:<11} {v['value']:9.3f}  (envelope {v['low']:.3f} .. {v['high']:.3f}; bound {v['cap']:g})")
    print(f"  residual rms {100 * fitted.residual_rms:.1f} points (envelope: up to {100 * fitted.threshold_rms:.1f})")
    workers = int(p["workers"])
    for g in groups.itertuples():
        measured = frame[frame["group"] == g.group]
        print(f"\n{g.group}: predicted at batch {g.batch_per_worker} per GPU, one GPU {1e3 * g.compute_s:.1f} ms "
              f"per step (run {g.run_id})")  # fmt: skip
        print(
            f"  {'GPUs':>5}  {'efficiency':>10}  {'envelope':>13}  {'images/s':>10}  measured (bN: at batch N per GPU)"
        )
        steps = {int(2**k) for k in range(int(np.log2(workers)) + 1)} | {workers}
        for n in sorted(steps | {int(w) for w in measured["workers"] if w <= workers}):
            e = fitted.predict(n, float(g.compute_s), float(g.nbytes))
            rate = n * int(g.batch_per_worker) / float(g.compute_s) * e["efficiency"]
            at = measured[measured["workers"] == n]
            seen = ", ".join(
                _measured(v, b, g.batch_per_worker) for v, b in zip(at.efficiency_speed, at.batch_per_worker)
            )
            seen = seen or "-"
            print(f"  {n:>5}  {e['efficiency']:>10.3f}  {e['low']:>6.3f}..{e['high']:<6.3f}  {rate:>10.0f}  {seen}")
    return 0


def _measured(efficiency: float, batch: int, predicted_batch: int) -> str:
    """A measured efficiency as the prediction's table shows it: its batch per GPU named where it is not the one
    predicted (a strong-scaling run splits the batch of its 1-GPU run)."""
    return f"{efficiency:.3f}" + ("" if int(batch) == int(predicted_batch) else f" (b{int(batch)})")


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
