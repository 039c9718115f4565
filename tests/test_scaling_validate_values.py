"""`python -m scalestudy.scaling validate`'s printout in the test's own process: every line from a validation result
written here (the fit and its held-out points are tested in tests/test_scaling*.py), and its one-line errors."""

from __future__ import annotations

import pandas as pd

from scalestudy.scaling import command_line, study

RESULT = {
    "dataset": "tf-benchmarks-2017",
    "label": "K80, parameter server",
    "allreduce": "ring",
    "fit_points": 6,
    "fit_workers": "1-16",
    "residual_rms": 0.1,  # 10.0 points (101 x would read 10.1)
    "threshold_rms": 0.12345,  # 12.3 points
    "parameters": {
        "intra_GBps": {"value": 9.87654, "low": 8.1, "high": 11.25, "floor": 0.01, "cap": 15.75},
        "overlap": {"value": 0.5, "low": 0.0004, "high": 0.9996, "floor": 0.0, "cap": 1.0},
    },
    "covered": 1,  # of the two held-out points, VGG-16's
    "held_out": [
        {
            "group": "Inception-v3 · batch 64",
            "workers": 64,
            "observed": 0.9381,
            "predicted": 0.8123,
            "low": 0.7001,
            "high": 0.9299,  # 0.9381 is above it: not covered
            "error": -0.1258,
        },
        {"group": "VGG-16", "workers": 32, "observed": 0.5, "predicted": 0.52, "low": 0.4, "high": 0.6, "error": 0.02},
    ],
    "mean_abs_error": 0.0729,
    "max_abs_error": 0.1258,
    "skipped": ["ResNet-50 at batch 32: one GPU count"],
}


def test_every_line_of_the_printout(monkeypatch, capsys):
    seen = {}

    def validation(runs, settings):
        seen["runs"], seen["settings"] = runs, settings
        return [RESULT, {**RESULT, "dataset": "hacksa-2019", "held_out": [], "skipped": []}]

    runs = pd.DataFrame({"run_id": ["a"]})
    monkeypatch.setattr(command_line, "_runs", lambda: runs)
    monkeypatch.setattr(study, "validation", validation)
    assert command_line.validate_command(["envelope.level=0.8"]) == 0
    assert seen["runs"] is runs and seen["settings"]["envelope"]["level"] == 0.8
    block = [
        "(K80, parameter server; ring): fitted on 6 points at 1-16 GPUs, residual rms 10.0 points (envelope: up to "
        "12.3)",
        "  intra_GBps      9.877  (envelope 8.100 .. 11.250; cap 15.75)",
        "  overlap         0.500  (envelope 0.000 .. 1.000; cap 1)",
    ]
    assert capsys.readouterr().out.splitlines() == [
        "tf-benchmarks-2017 " + block[0],
        *block[1:],
        "  Inception-v3 · batch 64       64 GPUs: observed 0.938, predicted 0.812 (0.700 .. 0.930), error -12.6 points",
        "  VGG-16                        32 GPUs: observed 0.500, predicted 0.520 (0.400 .. 0.600), error +2.0 points",
        "  held-out error: mean |error| 7.3, max 12.6 points; the envelope covers 1 of 2",
        "  not modelled: ResNet-50 at batch 32: one GPU count",
        "hacksa-2019 " + block[0],
        *block[1:],
    ]


def test_errors_are_one_line(monkeypatch, capsys):
    monkeypatch.setattr(command_line, "_runs", lambda: pd.DataFrame())
    assert command_line.validate_command(["envelope"]) == 2
    assert capsys.readouterr().err == "error: argument 'envelope': write KEY=VALUE (e.g. workers=512)\n"

    def refuse(runs, settings):
        raise LookupError("no run of tf-benchmarks-2017 in the store")

    monkeypatch.setattr(study, "validation", refuse)
    assert command_line.validate_command([]) == 2
    out = capsys.readouterr()
    assert out.err == "error: no run of tf-benchmarks-2017 in the store\n" and out.out == ""
