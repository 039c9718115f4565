"""What a tf_cnn_benchmarks text log and its folder say, read without --platform/--device (issue 43): the GPU from
TensorFlow's device lines, the GPU count from the header, the platform from a Lambda benchmark folder's name
(ingest/logs/resolve.py), each with its `<param>_basis` tag; an option still wins, the log's words kept in a tag.
On the real az-2xm-60 trace of ../shared/reference/keras-multi-gpu-2017 (line numbers read by hand in the comments)
and the real device lines of ../shared/reference/hacksa-2019/logs/1.err, copied at test time into folders named as
Lambda's benchmark.sh names them; never committed. The GPU names the harness gives go through the same table."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import REPO, shared_reference
from omegaconf import OmegaConf

from scalestudy.harness.record import device_label
from scalestudy.ingest.hacksa_log import DEVICE_RE
from scalestudy.ingest.logs import LogOptions, device_name, gpu_names, read_logs, user_source
from scalestudy.ingest.logs.command import main
from scalestudy.ingest.logs.resolve import folder_platform
from scalestudy.schema import canonical_device

SHARED = shared_reference("keras-multi-gpu-2017", "hacksa-2019") or REPO / "absent"
TRACE = SHARED / "keras-multi-gpu-2017" / "benchmark_batch_inception3_az-2xm-60.txt"
HACKSA = SHARED / "hacksa-2019" / "logs" / "1.err"
pytestmark = [
    pytest.mark.may_skip,
    pytest.mark.skipif(not (TRACE.is_file() and HACKSA.is_file()), reason=f"{SHARED} (real logs) is not here"),
]
# The trace's first run (lines 1-54): `++ python ./tf_cnn_benchmarks.py --model inception3 --num_gpus 1` (:2),
# `name: Tesla M60` (:9, :16: the machine's two GPUs), `Batch size:  32 global` (:31), `32 per device` (:32),
# `Devices:     ['/gpu:0']` (:33), `total images/sec: 47.49` (:54).
FIRST_RUN = slice(0, 54)
LAMBDA_RUN = "syn-replicated-fp32-1gpus/inception3-32/throughput/1"  # benchmark.sh's path under its folder


def lines(path: Path) -> list[str]:
    return path.read_text().split("\n")


def first_run(tmp_path: Path, folder: str, edit=lambda text: text) -> Path:
    """The trace's first run, as a Lambda throughput log under `folder` (edited by `edit` where a test says so)."""
    log = tmp_path / folder / LAMBDA_RUN
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(edit(x) for x in lines(TRACE)[FIRST_RUN]) + "\n")
    return log


def read_one(log: Path, **given) -> object:
    (rec,) = read_logs([log], LogOptions(source=user_source("mine"), **given))
    return rec


def test_tensorflow_device_lines_name_the_gpu():
    hacksa = lines(HACKSA)
    # 1.err:33 `name: Tesla V100-SXM2-16GB major: 7 minor: 0 memoryClockRate(GHz): 1.53` (TF 1.x, one line) and
    # 1.err:40 `Created TensorFlow device (... name: Tesla V100-SXM2-16GB, pci bus id: 0035:04:00.0, ...)`
    assert gpu_names(hacksa[32]) == gpu_names(hacksa[39]) == "Tesla V100-SXM2-16GB"
    assert device_name("Tesla V100-SXM2-16GB") == "V100" == DEVICE_RE.search(hacksa[32])["gpu"]  # hacksa-2019's
    assert gpu_names(lines(TRACE)[8]) == "Tesla M60" and device_name("Tesla M60") == "M60"  # trace :9


def test_the_harness_names_gpus_as_the_importers_do():
    cfg = OmegaConf.create({"device": "gpu"})
    for full, short in [("NVIDIA GeForce RTX 3090", "RTX 3090"), ("GeForce RTX 3080", "RTX 3080"),
                        ("NVIDIA H100 80GB HBM3", "H100"), ("Tesla V100-SXM2-16GB", "V100"),
                        ("NVIDIA A100 80GB PCIe", "A100"), ("NVIDIA GeForce RTX 3080 Ti", "RTX 3080 Ti")]:  # fmt: skip
        ranks = SimpleNamespace(result={"ranks": [{"device_name": full}]})
        assert device_label(cfg, ranks, {}) == canonical_device(full) == device_name(full) == short
        assert device_label(cfg, None, {"gpus": [f"{full}, 24576 MiB"]}) == short  # nvidia-smi's manifest line
    assert device_label(OmegaConf.create({"device": "cpu"}), None, {}) == "cpu"


def test_folder_named_by_host_and_gpu_gives_the_platform(tmp_path):
    # the real run under a folder of its own GPU plus a software suffix: host 3990X, GPU Tesla_M60, TF1_3 dropped
    rec = read_one(first_run(tmp_path, "3990X-Tesla_M60_TF1_3.logs"))
    assert rec.params["device"] == "M60" and rec.params["platform"] == "3990X-Tesla_M60"
    assert rec.params["workers"] == 1 and rec.params["batch_per_worker"] == 32  # 32 global / 32 per device
    assert rec.tags["device_basis"] == "log:line 9" and rec.tags["device_name"] == "Tesla M60"
    assert (
        rec.tags["platform_basis"] == "folder name (3990X-Tesla_M60_TF1_3.logs), '_TF1_3' after the GPU's name left out"
    )
    assert rec.tags["workers_basis"] == "log:line 31 (32 global / 32 per device); line 33 lists 1 device(s)"
    assert rec.metrics == {"throughput_total": 47.49}  # :54
    # a folder naming another GPU than the log's: the folder's whole name, the log's GPU
    rec = read_one(first_run(tmp_path, "7662-GeForce_RTX_3090.logs"))
    assert (rec.params["platform"], rec.params["device"]) == ("7662-GeForce_RTX_3090", "M60")
    assert rec.tags["platform_basis"] == "folder name (7662-GeForce_RTX_3090.logs)"


def test_rtx_3090_log_in_its_lambda_folder(tmp_path):
    # the first run with its GPU lines naming a GeForce RTX 3090, in TF 1.x's one-line form (edited: :9, :16) and
    # in its device creation lines (edited: :26, :27)
    def to_3090(x: str) -> str:
        if x == "name: Tesla M60":
            return "name: GeForce RTX 3090 major: 8 minor: 6 memoryClockRate(GHz): 1.695"
        return x.replace("name: Tesla M60,", "name: GeForce RTX 3090,")

    rec = read_one(first_run(tmp_path, "7662-GeForce_RTX_3090.logs", to_3090))
    assert (rec.params["device"], rec.tags["device_name"], rec.tags["device_basis"]) == (
        "RTX 3090", "GeForce RTX 3090", "log:line 9")  # fmt: skip
    assert rec.params["platform"] == "7662-GeForce_RTX_3090"
    assert rec.tags["platform_basis"] == "folder name (7662-GeForce_RTX_3090.logs)"

    # hacksa's real one-line device line in its place (1.err:33): the V100 from the same table
    def to_v100(x: str) -> str:
        return lines(HACKSA)[32] if x == "name: Tesla M60" else x.replace("name: Tesla M60,", "name: Tesla V100,")

    rec = read_one(first_run(tmp_path / "v", "7662-Tesla_V100-SXM2-16GB.logs", to_v100))
    assert (rec.params["device"], rec.params["platform"]) == ("V100", "7662-Tesla_V100-SXM2-16GB")


def test_options_still_win_and_keep_the_log_words(tmp_path):
    log = first_run(tmp_path, "3990X-Tesla_M60_TF1_3.logs")
    rec = read_one(log, platform="my-cluster", device="K80")
    assert (rec.params["platform"], rec.params["device"]) == ("my-cluster", "K80")
    assert rec.tags["log_platform"] == "3990X-Tesla_M60" and rec.tags["log_device"] == "M60"
    assert rec.tags["platform_basis"] == "given (--platform)" and rec.tags["device_basis"] == "given (--device)"


def test_command_needs_no_platform_in_a_lambda_folder(tmp_path, capsys):
    log = first_run(tmp_path, "3990X-Tesla_M60_TF1_3.logs")
    assert main([str(log), "--experiment", "mine", "--dry-run"]) == 0
    assert "1 runs (0 failed) from 1 file(s) would be in experiment 'mine'" in capsys.readouterr().out
    elsewhere = tmp_path / "plain" / "run.txt"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(log.read_bytes())
    assert main([str(elsewhere), "--experiment", "mine", "--dry-run"]) == 2  # no folder names it: --platform
    assert "does not say the run's platform: give it with --platform" in capsys.readouterr().err


def test_folder_rule_alone():
    assert folder_platform(Path("/x/3990X-GeForce_RTX_3080_XLA_TF1_15.logs/a/b/1"), "GeForce RTX 3080") == (
        "3990X-GeForce_RTX_3080",
        "folder name (3990X-GeForce_RTX_3080_XLA_TF1_15.logs), '_XLA_TF1_15' after the GPU's name left out",
    )
    # nvidia-smi's newer name (NVIDIA ...) against TensorFlow's: the same GPU; 'Ti' is part of it
    assert folder_platform(Path("/x/7662-NVIDIA_GeForce_RTX_3080_Ti_TF2.logs/1"), "GeForce RTX 3080 Ti")[0] == (
        "7662-NVIDIA_GeForce_RTX_3080_Ti"
    )
    assert folder_platform(Path("/x/3990X-GeForce_RTX_3080.logs/1"), None)[0] == "3990X-GeForce_RTX_3080"
    assert folder_platform(Path("/x/logs/run.logs.txt"), "Tesla M60") is None  # no <HOST>-<GPU>.logs folder


def test_every_nvidia_name_of_the_mlperf_corpus_is_the_short_name_the_harness_gives():
    """All accelerator names of MLPerf's 330 runs (tests/golden/mlperf_runs.csv, read independently of the
    importer): each NVIDIA GPU's name gives a bare model (A100, H100, L40S, RTX 4090, V100S...), the same the
    harness gives for that GPU as nvidia-smi names it (`NVIDIA A100-SXM4-80GB`), so a measured and a published run
    of one GPU always match."""
    import csv
    import re

    golden = Path(__file__).parent / "golden" / "mlperf_runs.csv"
    names = {row["accelerator_model"] for row in csv.DictReader(golden.open())}
    nvidia = sorted(n for n in names if re.search(r"nvidia|^A100", n, re.IGNORECASE))
    assert len(nvidia) >= 40  # the corpus's spellings of NVIDIA GPUs
    bare = re.compile(r"^(RTX )?[A-Z]{0,2}\d{1,4}[A-Z]?S?$")
    shown = {n: canonical_device(n) for n in nvidia}
    assert {n: d for n, d in shown.items() if not bare.match(d)} == {}
    cfg = OmegaConf.create({"device": "gpu"})
    for name, short in shown.items():
        smi = re.sub(r"\s*\(.*?\)", "", name if name.startswith("NVIDIA") else f"NVIDIA {name}")
        assert device_label(cfg, None, {"gpus": [f"{smi}, 81920 MiB"]}) == short, name
    assert shown["NVIDIA A100-SXM-80GB CTS"] == "A100" and shown["NVIDIA H100-SXM5-80GB"] == "H100"
