"""ingest/logs/mlperf_events.py in this process: each format's event (key, value, time, line, metadata) on lines of
the real MLPerf logs (experiments/reference/mlperf-training-resnet's raw files, quoted with their file:line), the
format detection, de-duplication, and each refusal as its exact line. The readings of whole real logs are pinned in
tests/test_mlperf_reading_values.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalestudy.ingest.logs.mlperf_events import Event, _bare_value, detect, events, mllog_entry
from scalestudy.schema import SchemaError

P = Path("x.txt")
# v1.1/Graphcore/results/ipu-pod16-TF1/resnet/result_0.txt:138
MLLOG_STOP = (
    ':::MLLOG {"namespace": "resnet", "time_ms": 1636170592706, "event_type": "POINT_IN_TIME", "key": "run_stop", '
    '"value": {"success": false}, "metadata": {"file": "train.py", "lineno": 921, "epoch_num": 38, '
    '"status": "aborted"}}'
)
# v0.6/Google/results/tpu-v3-32/resnet/result_0.txt:21 and :1
MLL_START = ':::MLL 1558420845.819 run_start: {"value": null, "metadata": {"lineno": 681, "file": "resnet_main.py"}}'
MLL_SETTING = ':::MLL 0.0 submission_benchmark: {"value": "resnet", "metadata": {"lineno": 0, "file": "N/A"}}'
# v0.5/v0.5.0/nvidia/submission/results/dgx1_ngc18.11_mxnet/resnet/result_0.txt:447 and :449
MLP05_EVAL = (":::MLPv0.5.0 resnet 1541728484.694621563 (/workspace/image_classification/mlperf_log_utils.py:49) "
              'eval_accuracy: {"epoch": 62, "value": 0.7522}')  # fmt: skip
MLP05_STOP = (
    ":::MLPv0.5.0 resnet 1541728484.695488691 (/workspace/image_classification/mlperf_log_utils.py:49) run_stop"
)
# v0.6/Alibaba/results/sinian/resnet/result_1.txt:510 and :16
BRACKET_EVAL = 'MLPerf: resnet [06/13/19 00:55:21], eval_accuracy: {"value": 75.98000%, "epoch": 79}'
BRACKET_SEED = "MLPerf: resnet [06/13/19 00:30:57], run_set_random_seed:2019"


def test_each_format_event():
    text = "launcher noise\n[1,0]<stdout>:" + MLLOG_STOP + "\r\n"
    assert events(P, text) == (
        "mllog",
        [Event("run_stop", {"success": False}, 1636170592.706, 2, {"file": "train.py", "lineno": 921, "epoch_num": 38,
                                                                  "status": "aborted"})],
    )  # fmt: skip
    assert events(P, MLL_SETTING + "\n" + MLL_START) == (
        "mll",
        [
            Event("submission_benchmark", "resnet", None, 1, {"lineno": 0, "file": "N/A"}),  # stamped 0.0: no time
            Event("run_start", None, 1558420845.819, 2, {"lineno": 681, "file": "resnet_main.py"}),
        ],
    )
    # a bare key with blanks after it (and a CRLF file's \r) is the key's event
    assert events(P, "0: " + MLP05_EVAL + "\n" + MLP05_STOP + " \t\r\n") == (
        "mlp05",
        [
            Event("eval_accuracy", {"epoch": 62, "value": 0.7522}, 1541728484.694621563, 1, {"benchmark": "resnet"}),
            Event("run_stop", None, 1541728484.695488691, 2, {"benchmark": "resnet"}),
        ],
    )
    assert events(P, BRACKET_EVAL + "\n" + BRACKET_SEED) == (
        "mlperf-bracket",
        [
            Event("eval_accuracy", {"value": 0.7598, "epoch": 79}, 1560387321.0, 1, {"benchmark": "resnet"}),
            Event("run_set_random_seed", 2019, 1560385857.0, 2, {"benchmark": "resnet"}),  # 2019-06-13 00:30:57 UTC
        ],
    )


def test_lines_once_but_every_init_start():
    init = ':::MLLOG {"time_ms": 5, "key": "init_start", "value": null}'
    text = "\n".join([MLLOG_STOP, "0: " + MLLOG_STOP, init, "1: " + init])
    _, found = events(P, text)
    assert [(e.key, e.line) for e in found] == [("run_stop", 1), ("init_start", 3), ("init_start", 4)]
    # the marker is searched from the line's start: a value quoting the marker stays in the value
    quoted = ':::MLLOG {"time_ms": 5, "key": "note", "value": "see :::MLLOG lines"}'
    assert events(P, quoted)[1][0].value == "see :::MLLOG lines"
    # lines of a format that its pattern does not match (cut by another process) are not events
    assert events(P, MLL_START + "\n:::MLL cut") == events(P, MLL_START)
    assert [e.key for e in events(P, MLP05_STOP + "\n:::MLPv0.5.0 cut")[1]] == ["run_stop"]
    assert [e.key for e in events(P, BRACKET_SEED + "\nMLPerf: resnet [06/13/19 00:30:57], ")[1]] == [
        "run_set_random_seed"
    ]


def test_detect():
    assert detect(MLLOG_STOP + MLL_START) == "mllog" and detect(MLL_START + MLP05_STOP) == "mll"
    assert detect(MLP05_STOP + BRACKET_SEED) == "mlp05" and detect("x\n" + BRACKET_SEED) == "mlperf-bracket"
    assert detect("MLPerf: a log that only names MLPerf") is None and detect("") is None


def test_mllog_entry_times_and_refusals():
    assert mllog_entry('{"key": "k", "time_ms": 1500}', "w")["t_s"] == 1.5
    assert mllog_entry('{"key": "k", "time_s": 2}', "w")["t_s"] == 2.0  # v0.7 Alibaba
    assert mllog_entry('{"key": "k", "time_ms": 1000, "time_s": 9}', "w")["t_s"] == 1.0
    with pytest.raises(SchemaError, match=r"^f:3: MLLOG line is not valid JSON \(cut short\?\): Expecting "):
        mllog_entry('{"key": "k", "time_ms"', "f:3")
    for text in ("[1]", '{"time_ms": 1}', '{"key": 5, "time_ms": 1}'):
        with pytest.raises(SchemaError, match=r"^f:3: MLLOG line without a 'key'$"):
            mllog_entry(text, "f:3")
    for text in ('{"key": "k"}', '{"key": "k", "time_ms": true}', '{"key": "k", "time_s": false}',
                 '{"key": "k", "time_ms": "1"}'):  # fmt: skip
        with pytest.raises(SchemaError, match=r"^f:3: MLLOG line 'k' has no numeric time_ms \(or time_s\)$"):
            mllog_entry(text, "f:3")


def test_refusals_name_the_line():
    with pytest.raises(SchemaError, match=r"^x\.txt:2: MLLOG line is not valid JSON"):
        events(P, MLLOG_STOP + "\n:::MLLOG {cut")
    with pytest.raises(SchemaError, match=r"^x\.txt:2: MLL line 'run_stop': the value is not JSON$"):
        events(P, MLL_START + "\n:::MLL 1558423379.276 run_stop: {cut")
    with pytest.raises(SchemaError, match=r"^x\.txt:1: no MLPerf log line \(:::MLLOG, :::MLL, :::MLPv0\.5\.0 or "):
        events(P, "nothing\nhere")


def test_bare_values():
    assert [_bare_value(v) for v in (None, "", "  ", " 208", ' {"a": 1}', " none", "2019")] == [
        None, None, None, 208, {"a": 1}, "none", 2019,
    ]  # fmt: skip
    assert _bare_value(' {"value": 14.48800%, "epoch": 3}') == {"value": 0.14488, "epoch": 3}
    assert _bare_value(' {"value": 25.5%}') == {"value": 0.255}
    assert _bare_value(' {"value": 1.0%, "epoch": -1}') == {"value": 0.01, "epoch": -1}


def test_bare_mll_payload_and_bracket_times_in_utc(monkeypatch):
    import time

    assert events(P, ":::MLL 1558420845.819 seed: 7")[1] == [Event("seed", 7, 1558420845.819, 1, {})]
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # the bracket's dates carry no zone: read as UTC, not as local time
    time.tzset()
    try:
        assert events(P, BRACKET_SEED)[1][0].t == 1560385857.0
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
