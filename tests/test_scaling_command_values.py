"""`python -m scalestudy.scaling predict` (scaling.command_line.predict_command) in the test's own process: every
line it prints, against values worked out here. The fit and the prediction are replaced by values written out
(tests/test_scaling*.py test those); the allreduce times are the cost model's, on links set by overrides to round
numbers; the gradient size is the committed table's (scaling/gradient_sizes.csv)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from scalestudy.scaling import command_line, study
from scalestudy.scaling.command_line import SETTINGS_FILE, predict_command

LABELS = {k: v["label"] for k, v in yaml.safe_load(SETTINGS_FILE.read_text())["networks"].items()}
LINKS = ["networks.pcie3.gbit_s=80", "networks.pcie3.latency_us=100",  # 10 GB/s, 0.1 ms a message
         "networks.ethernet-25g.gbit_s=8", "networks.ethernet-25g.latency_us=1000"]  # 1 GB/s, 1 ms  # fmt: skip
RESNET50_KERAS_1000 = 25_583_592  # gradient_sizes.csv: resnet50,keras,1000 trainable parameters


@pytest.fixture
def fakes(monkeypatch):
    calls = {"predict": []}
    runs = object()
    # the envelope's overlaps run from 0.604 to 0.896 (its bandwidths play no part in what is printed)
    fitted = SimpleNamespace(values=np.array([0.1, 0.2, 0.754]), level=0.9,
                             envelope=np.array([[0.1, 0.2, 0.7], [5.0, 0.1, 0.604], [0.3, 9.0, 0.896]]))  # fmt: skip
    monkeypatch.setattr(command_line, "_runs", lambda: runs)

    def fit_dataset(r, settings, name):
        assert r is runs and name == settings["prediction_fit"] == "hacksa-2019"
        return fitted, None, None

    def compute_time(r, settings, device, model, batch):
        calls["compute_time"] = (r is runs, device, model, batch)
        return 0.25, "P100's published run"

    def predict(f, settings, **kw):
        assert f is fitted
        calls["predict"].append(kw)
        n = kw["workers"]
        return {"efficiency": 1 - n / 100, "low": 0.9 - n / 100, "high": 1 - n / 200}

    for name, fake in [("fit_dataset", fit_dataset), ("compute_time", compute_time), ("predict", predict)]:
        monkeypatch.setattr(study, name, fake)
    return calls


ENVELOPE_NOTE = ("  envelope: what the fitted points allow inside the hardware's bounds (90 % F-test region, "
                 "conf/scaling/default.yaml envelope); not a calibrated prediction interval")  # fmt: skip


def test_predict_prints_every_number_by_hand(fakes, capsys):
    code = predict_command(["model=resnet50", "workers=6", "batch_per_worker=50", "gpus_per_node=4",
                            "throughput_1gpu=250", "fp16=true", *LINKS])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0 and out.err == ""
    # fp16 halves the 4-byte gradients: 25,583,592 x 2 bytes = 51.167184 MB; one GPU: 50 images / 250 per s = 0.2 s
    # inside a node (4 GPUs, 10 GB/s, 0.1 ms): 2 * 3/4 * 51.167184e6 / 1e10 + 2 * 3 * 1e-4 = 8.2750776 ms
    # between the 2 nodes (1 GB/s, 1 ms): 2 * 1/2 * 51.167184e6 / 1e9 + 2 * 1 * 1e-3 = 53.167184 ms; sum 61.4422616
    assert out.out.splitlines()[:4] == [
        f"resnet50 on 6 GPUs of your own (250 img/s at one GPU) (4 per node, 2 nodes), batch 50 per GPU, "
        f"{LABELS['pcie3']} inside and "
        f"{LABELS['ethernet-25g']} between nodes (line rate), fp16 compression",
        "  one GPU: 200.0 ms per step (given); gradients 51.2 MB per step",
        "  allreduce: 8.3 ms inside a node + 53.2 ms between nodes = 61.4 ms",
        "  overlap fitted on hacksa-2019: 0.75 (the data allow 0.60 to 0.90)",  # the envelope's least and most
    ]
    assert out.out.splitlines()[4:8] == ["", ENVELOPE_NOTE, "", f"  {'GPUs':>5}  {'efficiency':>10}  "
                                         f"{'envelope':>13}  {'images/s':>10}"]  # the fit's level  # fmt: skip
    rows = out.out.splitlines()[-5:]
    assert rows[0].split() == ["GPUs", "efficiency", "envelope", "images/s"]
    # 1, 2, 4 (the powers of two up to 6) and 6 itself; images/s = n x 50 / 0.2 x efficiency
    assert rows[1:] == [
        "      1       0.990   0.890..0.995          248",
        "      2       0.980   0.880..0.990          490",
        "      4       0.960   0.860..0.980          960",
        "      6       0.940   0.840..0.970         1410",
    ]
    assert [c["workers"] for c in fakes["predict"]] == [1, 2, 4, 6]
    assert fakes["predict"][3] == {"workers": 6, "compute_s": 0.2, "nbytes": RESNET50_KERAS_1000 * 2.0,
                                   "gpus_per_node": 4, "intra": "pcie3", "network": "ethernet-25g"}  # fmt: skip
    assert "compute_time" not in fakes  # a throughput given: no published run asked


def test_predict_from_the_devices_run_and_fp32(fakes, capsys):
    assert predict_command(["workers=3", "model=vgg16", "batch_per_worker=32", "gpus_per_node=8", "device=K80",
                            *LINKS]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert fakes["compute_time"] == (True, "K80", "vgg16", 32)
    assert out[0].startswith("vgg16 on 3 K80 GPUs (3 per node, 1 nodes), batch 32 per GPU,")
    assert out[0].endswith("between nodes (line rate)")  # no fp16
    gradient_mb = 4 * 138_357_544 / 1e6  # gradient_sizes.csv: vgg16,keras,1000; 4 bytes each
    assert out[1] == f"  one GPU: 250.0 ms per step (P100's published run); gradients {gradient_mb:.1f} MB per step"
    # one node of 3 GPUs: 2 * 2/3 * nbytes / 1e10 + 4 * 1e-4; one node: nothing between
    inside = 1e3 * (4 / 3 * 4 * 138_357_544 / 1e10 + 4e-4)
    assert out[2] == f"  allreduce: {inside:.1f} ms inside a node + 0.0 ms between nodes = {inside:.1f} ms"
    assert [r.split()[0] for r in out[-3:]] == ["1", "2", "3"]
    assert [c["nbytes"] for c in fakes["predict"]] == [4.0 * 138_357_544] * 3


def test_predict_errors_and_help(fakes, capsys):
    assert predict_command(["modle=vgg16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown key 'modle' (known: model, workers,") and err.endswith("\n")
    assert predict_command(["model=googlenet"]) == 2
    assert capsys.readouterr().err.startswith("error: no gradient size for model=googlenet with 1000 classes")
    assert predict_command(["network=token-ring"]) == 2
    assert capsys.readouterr().err.startswith("error: network=token-ring: choose one of ")
    assert predict_command(["help", "workers=3"]) == 0
    assert capsys.readouterr().out == command_line.predict_help(command_line.load_settings([])) + "\n"


def test_predict_across_nodes_with_the_classes_given(fakes, capsys):
    assert predict_command(["workers=16", "model=vgg16", "classes=10", "batch_per_worker=32", "gpus_per_node=8",
                            "throughput_1gpu=320", *LINKS]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    # gradient_sizes.csv: vgg16,keras,10 classes: 134,301,514 parameters x 4 bytes = 537.206056 MB
    assert out[1] == "  one GPU: 100.0 ms per step (given); gradients 537.2 MB per step"
    # inside (8 GPUs, 10 GB/s, 0.1 ms): 2 * 7/8 * 537.206056e6 / 1e10 + 2 * 7 * 1e-4 = 95.41106 ms;
    # between the 2 nodes (1 GB/s, 1 ms): 2 * 1/2 * 537.206056e6 / 1e9 + 2 * 1e-3 = 539.206056 ms
    assert out[2] == "  allreduce: 95.4 ms inside a node + 539.2 ms between nodes = 634.6 ms"
    assert out[4:6] == ["", ENVELOPE_NOTE]
    assert [r.split()[0] for r in out[-5:]] == ["1", "2", "4", "8", "16"]  # 16 is a power of two: not twice


def test_settings_take_values_with_an_equals_sign_and_resolve_interpolations():
    settings = command_line.load_settings(["model=a=b", "fit_max_workers=${envelope.overlaps}"])
    assert settings["predict"]["model"] == "a=b"  # split at the first "=" only
    assert settings["fit_max_workers"] == settings["envelope"]["overlaps"] == 101  # conf/scaling/default.yaml's
    # a dotted key sets one value of the envelope, the others stay
    level = command_line.load_settings(["envelope.level=0.9"])["envelope"]
    assert level == {"level": 0.9, "overlaps": 101, "bandwidths": 48}
    with pytest.raises(ValueError) as err:
        command_line.load_settings(["nope=1"])
    assert str(err.value).startswith("unknown key 'nope' (known: model, ")
    assert str(err.value).endswith(
        ", throughput_1gpu, fit.experiment, fit.runs.COLUMN, fit.group, fit_max_workers, prediction_fit, "
        "envelope.level)"
    )
    with pytest.raises(ValueError, match=r"^unknown key 'seed'"):  # the bootstrap's settings are gone
        command_line.load_settings(["seed=1"])
