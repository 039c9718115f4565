"""Intel's Xeon SPR logs (v2.1 result_1.txt; v3.0 result_0.txt, republished as v3.1's): the timed window that the
MLPerf importer reads (its blocks rule), against the 35 epochs the run trained, and the three throughputs it stores,
each against values worked out by hand from the log lines (file:line in the comments, paths relative to the
dataset's raw folder; 1281167 images an epoch, :184). The window is a documented choice
(experiments/reference/mlperf-training-resnet/README.md, "Where this reading differs from the corpus README's"):
one block_start (:186, epoch_count 3), nine block_stops all labelled 1, of which the first (:199) closes it."""

from __future__ import annotations

import pytest
from helpers import REFERENCE, raw_files_of, reference_source

from scalestudy.ingest import mlperf_training as mt
from scalestudy.ingest.fetch import cache_dir
from scalestudy.ingest.logs.mlperf_events import events
from scalestudy.ingest.mlperf_reading import _blocks, _by_key
from scalestudy.schema import NOT_STATED, SchemaError

FOLDER = REFERENCE / "mlperf-training-resnet"
V21 = "v2.1/Intel/results/16-nodes-SPR-pytorch/resnet/result_1.txt"
V30 = "v3.0/Intel/results/16-nodes-SPR-pytorch/resnet/result_0.txt"
SYSTEMS = ("v2.1/Intel/systems/16-nodes-SPR-pytorch.json", "v3.0/Intel/systems/16-nodes-SPR-pytorch.json")
IMAGES = 1281167  # :184 train_samples, both logs
SECONDS = 1e-6

# Each log by hand, in ms from its lines: :183 run_start, :186 block_start (epoch 1's first; :187 epoch_start 1),
# :195 epoch_stop 3, :196 eval_start and :198 eval_stop of epoch 3, :199 block_stop (= :198), :323 epoch_stop 35,
# :328 run_stop; the 35 epoch_start -> epoch_stop intervals summed with awk over the integer ms stamps.
HAND = {
    V21: {
        "run": (1665443897665, 1665449210835),
        "block": (1665443899914, 1665444361035),
        "eval": (1665444353828, 1665444361035),
        "epoch_1_start": 1665443899964,
        "epoch_3_stop": 1665444353738,
        "epoch_sum_ms": 5242989,
        "accuracy": 0.7634000000000001,  # :325, epoch 35
    },
    V30: {
        "run": (1683589232171, 1683594524233),
        "block": (1683589235908, 1683589698206),
        "eval": (1683589692464, 1683589698206),
        "epoch_1_start": 1683589235988,
        "epoch_3_stop": 1683589692433,
        "epoch_sum_ms": 5238068,
        "accuracy": 0.7610600000000001,  # :325, epoch 35
    },
}


@pytest.fixture(scope="module")
def corpus():
    files = raw_files_of("mlperf-training-resnet", V21, V30, *SYSTEMS)
    read_at = {str(file.resolve()): path for path, file in files.items()}
    source = reference_source("mlperf-training-resnet")
    source = {**source, "raw_dir": str(cache_dir() / FOLDER.name), "raw_read_at": read_at}
    entries = {e["log"]: e for e in source["results"]}
    return files, source, entries


def record_of(corpus, log: str):
    files, source, entries = corpus
    fmt, reading = mt._parse_one(str(files[log]))
    entry = entries[log]
    return mt.record(source, entry, files[log], files[entry["system_file"]], fmt, reading, [], "ab" * 32)


@pytest.mark.parametrize("log", [V21, V30])
def test_the_window_is_the_first_block_of_three_epochs(corpus, log):
    files = corpus[0]
    _, found = events(files[log], files[log].read_text())
    keyed = _by_key(found)
    hand = HAND[log]
    stops = [e.line for e in keyed["block_stop"]]
    assert stops == [199, 215, 231, 247, 263, 279, 295, 311, 327]  # after the evals of epochs 3, 7, ..., 35
    assert {e.meta["first_epoch_num"] for e in keyed["block_stop"]} == {1}
    # one closed block: :186 -> :199, epoch_count 3; the 8 later stops have no start left to close
    window = [(a.line, b.line, a.t, b.t, count) for a, b, count in _blocks(keyed)]
    assert window == [(186, 199, hand["block"][0] / 1000, hand["block"][1] / 1000, 3)]
    # the epochs inside it are 1 to 3 (:187 .. :195); the run trained 35 (:323, the last epoch_stop)
    inside = [e for e in keyed["epoch_stop"] if hand["block"][0] / 1000 <= e.t <= hand["block"][1] / 1000]
    assert [e.meta["epoch_num"] for e in inside] == [1, 2, 3]
    assert keyed["epoch_start"][0].t == hand["epoch_1_start"] / 1000 and inside[-1].t == hand["epoch_3_stop"] / 1000
    assert (keyed["epoch_stop"][-1].line, keyed["epoch_stop"][-1].meta["epoch_num"]) == (323, 35)


@pytest.mark.parametrize("log", [V21, V30])
def test_the_window_and_whole_run_throughputs(corpus, log):
    rec = record_of(corpus, log)
    hand = HAND[log]
    run_s = (hand["run"][1] - hand["run"][0]) / 1000
    # the block minus its evaluation: v2.1 461.121 - 7.207 = 453.914 s; v3.0 462.298 - 5.742 = 456.556 s
    train_s = (hand["block"][1] - hand["block"][0] - (hand["eval"][1] - hand["eval"][0])) / 1000
    epoch_s = hand["epoch_sum_ms"] / 1000
    want = {
        "time_total_s": run_s,
        "time_train_s": train_s,
        "time_init_s": {V21: 8.254, V30: 18.222}[log],  # :183 run_start - :7 init_start
        "throughput_total": 3 * IMAGES / train_s,  # the window: epochs 1 to 3
        "throughput_run": 35 * IMAGES / run_s,  # the whole run
        "throughput_epochs": 35 * IMAGES / epoch_s,  # the corpus README's reading of these logs
        "accuracy_test": hand["accuracy"],
    }
    assert set(rec.metrics) == set(want)  # no throughput_per_worker: the system file states no accelerator
    for name, value in want.items():
        assert rec.metrics[name] == pytest.approx(value, rel=1e-9, abs=SECONDS), name
    # the same, worked out on paper (img/s): v2.1 8467.47, 8439.57, 8552.53; v3.0 8418.47, 8473.23, 8560.57
    paper = {V21: (8467.47, 8439.57, 8552.53), V30: (8418.47, 8473.23, 8560.57)}[log]
    got = (rec.metrics["throughput_total"], rec.metrics["throughput_run"], rec.metrics["throughput_epochs"])
    assert got == pytest.approx(paper, abs=0.005)
    assert rec.params["epochs"] == 35 and rec.params["workers"] == NOT_STATED and rec.params["device"] == "cpu"
    assert rec.tags["train_time_basis"] == "blocks: sum of closed blocks minus the evaluations inside them"
    assert rec.tags["accelerators"] == "0" and rec.tags["problems"] == "none"
    assert "throughput_total: " + log.rsplit("/", 1)[1] + ":199" in rec.tags["source_lines"]


@pytest.mark.parametrize("log", [V21, V30])
def test_the_log_importer_reads_the_epochs_and_warns_of_the_stops_that_close_no_block(corpus, log, tmp_path):
    """`python -m scalestudy.ingest logs` on the same file (a CPU system: the system file names no accelerator, so
    the user gives the workers and the device): throughput over the 35 epochs, the 8 block_stops after :199 a
    warning naming the first (:215). The same file with its epoch lines renamed (line numbers kept) leaves the
    blocks to read: then the stray stop is an error at :215 (the copy has no system file beside it: the framework is
    given too)."""
    from scalestudy.ingest.logs import LogOptions, read_logs, user_source

    hand, path = HAND[log], corpus[0][log]
    options = LogOptions(source=user_source("logs-test"), workers=16, device="Xeon 8480+")
    (rec,) = read_logs([path], options)
    run_s = (hand["run"][1] - hand["run"][0]) / 1000
    assert rec.metrics["throughput_total"] == pytest.approx(35 * IMAGES / (hand["epoch_sum_ms"] / 1000), rel=SECONDS)
    assert rec.metrics["throughput_run"] == pytest.approx(35 * IMAGES / run_s, rel=SECONDS)
    assert rec.metrics["time_total_s"] == pytest.approx(run_s, abs=SECONDS)
    assert rec.metrics["accuracy_test"] == hand["accuracy"]
    assert rec.tags["throughput_intervals"] == "35 epoch_start -> epoch_stop intervals"
    assert f"{path}:215: 8 block_stop lines close no block_start (not used: the epochs are)" in rec.tags[
        "import_warning"
    ].split(" | ")
    lines = dict(item.split(": ", 1) for item in rec.tags["source_lines"].split("; "))
    # the platform is the system's folder in the layout: no line of the log says it
    assert rec.params["platform"] == "16-nodes-SPR-pytorch"
    assert lines["platform"] == "its folder results/16-nodes-SPR-pytorch/"
    assert lines["throughput_total"] == f"{path.name}:323" and lines["throughput_run"] == f"{path.name}:328"
    cut = tmp_path / "results" / "16-nodes-SPR-pytorch" / "resnet" / path.name
    cut.parent.mkdir(parents=True)
    cut.write_text(path.read_text().replace('"key": "epoch_st', '"key": "renamed_epoch_st'))
    with pytest.raises(SchemaError, match=rf"{path.name}:215: block_stop without a block_start before it$"):
        read_logs([cut], LogOptions(source=user_source("logs-test"), workers=16, device="Xeon", framework="pytorch"))
