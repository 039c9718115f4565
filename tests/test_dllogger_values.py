"""ingest/logs/dllogger.py in this process: every param, metric, tag and time of the real DLLogger excerpt in
../shared/reference/logs/dllogger (read by hand: line numbers in the comments), and each refusal as its exact line
on an edited copy where the real file takes the other branch (said so at each edit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, shared_reference

from scalestudy.ingest.logs import LogOptions, user_source
from scalestudy.ingest.logs.dllogger import parse, sniff
from scalestudy.schema import SchemaError

DLL = (shared_reference("logs") or REPO / "absent") / "logs" / "dllogger"
EXCERPT = DLL / "raport.EXCERPT_lines_1-69.json"
pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(not EXCERPT.is_file(), reason=f"{EXCERPT} is not here")]


def options(**given) -> LogOptions:
    return LogOptions(source=user_source("logs-test"), **{"platform": "dgx", "device": "A100", **given})


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return EXCERPT.read_text().split("\n")


def edited(tmp_path: Path, lines: list[str], change=lambda x: x) -> Path:
    path = tmp_path / "raport.json"
    path.write_text("\n".join(change(list(lines))))
    return path


def test_excerpt_every_field():
    (rec,) = parse(EXCERPT, options())
    name = EXCERPT.name
    # :1 PARAMETER: arch resnet50, batch_size 128, world_size 8, data_backend dali-cpu, amp true, fp16 false
    assert rec.params == {
        "model": "resnet50", "framework": "pytorch", "api": "deeplearningexamples", "workers": 8, "device": "A100",
        "data": "real", "batch_per_worker": 128, "platform": "dgx",
    }  # fmt: skip
    # :68 the end of epoch 1 ("step": [1]): train.total_ips 7766.159344405196, val.top1 68.28164859693878 (%)
    assert rec.metrics == {"throughput_total": 7766.159344405196, "accuracy_test": 68.28164859693878 / 100}
    tags = {
        k: v
        for k, v in rec.tags.items()
        if k not in ("log_path", "log_sha256", "log_bytes_sha256", "mlflow.note.content")
    }
    assert tags == {
        "epochs_logged": "2",  # epochs 0 (:42) and 1 (:68)
        "throughput_epoch": "1",
        "precision": "amp",
        "citation": "benchmark logs imported into logs-test",
        "dataset": "logs-test",
        "log_file": name,
        "log_format": "dllogger",
        "source": "yours",
        "source_line": f"{name}:68",
        "source_lines": f"throughput_total: {name}:68; model: {name}:1; workers: {name}:1; batch_per_worker: "
        f"{name}:1; accuracy_test: {name}:68",
        "source_url": "",
    }
    # :1 timestamp 1609395313.095243, :68 timestamp 1609395702.362223
    assert (rec.start_ms, rec.end_ms) == (1609395313095, 1609395702362)
    assert rec.where == f"{EXCERPT}:1" and rec.status == "FINISHED"
    assert f"`{name}` line 68 (" in rec.tags["mlflow.note.content"]


def test_parameters_read_otherwise(lines, tmp_path):
    def param(old: str, new: str):
        return lambda ls: [ls[0].replace(old, new, 1), *ls[1:]]

    def fp16(ls):  # amp off, fp16 on
        return param('"amp": true', '"amp": false')(param('"fp16": false', '"fp16": true')(ls))

    assert parse(edited(tmp_path, lines, fp16), options())[0].tags["precision"] == "fp16"
    rec = parse(edited(tmp_path, lines, param('"amp": true', '"amp": false')), options())[0]
    assert "precision" not in rec.tags
    for backend, data in (("syntetic", "synthetic"), ("synthetic", "synthetic"), ("pytorch", "real")):
        path = edited(tmp_path, lines, param('"data_backend": "dali-cpu"', f'"data_backend": "{backend}"'))
        assert parse(path, options())[0].params["data"] == data
    for world in ('"world_size": 0', '"world_size": "8"'):  # not a GPU count: --workers must say it
        path = edited(tmp_path, lines, param('"world_size": 8', world))
        with pytest.raises(SchemaError, match=r"raport\.json:1: .*workers: give it with --workers"):
            parse(path, options())
        assert parse(path, options(workers=4))[0].params["workers"] == 4
    path = edited(
        tmp_path, lines, lambda ls: [x.replace('"val.top1": 68.28164859693878', '"val.top1": 168.0') for x in ls]
    )
    assert "accuracy_test" not in parse(path, options())[0].metrics  # over 100 %: not an accuracy


def test_refusals_name_the_line(lines, tmp_path):
    def refused(change, pattern: str) -> None:
        with pytest.raises(SchemaError, match=pattern):
            parse(edited(tmp_path, lines, change), options())

    r = str(tmp_path / "raport.json").replace(".", r"\.")
    refused(lambda ls: ls[1:], rf"^{r}:1: no DLLL PARAMETER line \(the run's arguments\)$")
    refused(lambda ls: [*ls[:3], "DLLL {cut", *ls[3:]], rf"^{r}:4: DLLL line is not valid JSON \(cut short\?\): ")
    refused(lambda ls: [*ls[:3], 'DLLL {"step": []}', *ls[3:]], rf"^{r}:4: DLLL line without a 'type'$")
    refused(lambda ls: [*ls[:3], "DLLL [1]", *ls[3:]], rf"^{r}:4: DLLL line without a 'type'$")
    bad = lambda ls: [x.replace('"train.total_ips": 7766.159344405196', '"train.total_ips": "fast"') for x in ls]  # noqa: E731
    refused(bad, rf"^{r}:68: train\.total_ips 'fast' is not a number$")
    first = lambda ls: ls[:41]  # noqa: E731  (epoch 0's iterations, not its end-of-epoch lines :42-:43)
    refused(first, rf"^{r}:41: no end-of-epoch train\.total_ips line: the run stopped before its first epoch ended, ")
    # :44 the first line of epoch 1 ("step": [1, 100], train. values)
    refused(
        lambda ls: ls[:66], rf"^{r}:66: epoch 1 started \(line 44\) and did not end, and the log has no end-of-run "
    )
    ended = edited(tmp_path, lines, lambda ls: [*ls[:66], '  DLLL {"type": "LOG", "step": [], "data": {}}'])
    (rec,) = parse(ended, options())  # an end-of-run line (indented): the cut epoch is not an error; epoch 0 counts
    assert rec.metrics["throughput_total"] == 7749.540281160681 and rec.tags["throughput_epoch"] == "0"  # :42
    assert rec.tags["epochs_logged"] == "1" and rec.metrics["accuracy_test"] == 71.9009088010204 / 100


def test_evaluation_only_run_is_refused():
    why = r"it has no training throughput \(no end-of-epoch train\.total_ips\) and is not imported$"
    with pytest.raises(
        SchemaError, match=rf'^\S*experiment_raport\.json:1: an evaluation-only run \("evaluate": true\): {why}'
    ):
        parse(DLL / "experiment_raport.json", options())


def test_sniff():
    assert sniff(["x"] * 19 + ['\t DLLL {"type": "LOG"}']) and not sniff(["x"] * 20 + ['DLLL {"type": "LOG"}'])
    assert not sniff(["DLLL [1]"])


def test_options_beside_the_log(lines, tmp_path):
    # the log states no platform (nor device): the refusal names the option; values given beside the log's win and
    # the log's own value is kept in a log_<name> tag
    with pytest.raises(
        SchemaError, match=rf"^{EXCERPT}:1: the log does not say the run's platform: give it with --platform$"
    ):
        parse(EXCERPT, LogOptions(source=user_source("logs-test"), device="A100"))
    (rec,) = parse(EXCERPT, options(framework="mxnet", data="synthetic", workers=4))
    assert (rec.params["framework"], rec.params["data"], rec.params["workers"]) == ("mxnet", "synthetic", 4)
    assert (rec.tags["log_framework"], rec.tags["log_data"], rec.tags["log_workers"]) == ("pytorch", "real", "8")
    one = edited(tmp_path, lines, lambda ls: [ls[0].replace('"world_size": 8', '"world_size": 1'), *ls[1:]])
    assert parse(one, options())[0].params["workers"] == 1  # one GPU is a count too


def test_model_and_accuracy_edges(lines, tmp_path):
    def first(old: str, new: str):
        return lambda ls: [ls[0].replace(old, new, 1), *ls[1:]]

    for arch, shown in (('"arch": "nonet"', "'nonet'"), ('"archi": "resnet50"', "''")):  # unknown, and none given
        with pytest.raises(SchemaError, match=rf"^{tmp_path / 'raport.json'}:1: unknown model name {shown} \(known: "):
            parse(edited(tmp_path, lines, first('"arch": "resnet50"', arch)), options())
    top1 = '"val.top1": 68.28164859693878'
    for value, stored in (("0", 0.0), ("100", 1.0)):  # the bounds are accuracies
        path = edited(tmp_path, lines, lambda ls, v=value: [x.replace(top1, f'"val.top1": {v}') for x in ls])
        assert parse(path, options())[0].metrics["accuracy_test"] == stored


def test_times_and_lines_that_are_not_the_logger_s(lines, tmp_path):
    # :68 (the end of epoch 1) without a timestamp: no end time; a first timestamp of 0: no start time either
    stamp = '"timestamp": "1609395702.362223", '
    path = edited(tmp_path, lines, lambda ls: [x.replace(stamp, "") for x in ls])
    (rec,) = parse(path, options())
    assert (rec.start_ms, rec.end_ms) == (1609395313095, None)
    zero = lambda ls: [ls[0].replace('"timestamp": "1609395313.095243"', '"timestamp": "0"'), *ls[1:]]  # noqa: E731
    (rec,) = parse(edited(tmp_path, lines, zero), options())
    assert (rec.start_ms, rec.end_ms) == (None, None)
    bare = lambda ls: [x.replace('"timestamp": ', '"stamp": ') for x in ls]  # noqa: E731  (no line has a timestamp)
    assert parse(edited(tmp_path, lines, bare), options())[0].start_ms is None
    # lines that are not DLLogger's (a stdout copy: text, a form feed, an X before the prefix) are skipped
    noise = lambda ls: [ls[0], "epoch 1 done", "\fDLLL {cut", "XDLLL {cut", *ls[1:]]  # noqa: E731
    (rec,) = parse(edited(tmp_path, lines, noise), options())
    assert rec.metrics["throughput_total"] == 7766.159344405196 and rec.tags["source_line"] == "raport.json:71"
    assert not sniff(["\fDLLL {", "XDLLL {"])


def test_which_lines_start_an_epoch(lines, tmp_path):
    r = str(tmp_path / "raport.json").replace(".", r"\.")
    # epoch 1's first iteration lines (:44-:45) numbered [1, 0]: the epoch number, not the iteration, says it started
    step0 = lambda ls: [x.replace('"step": [1, 100]', '"step": [1, 0]') for x in ls[:66]]  # noqa: E731
    with pytest.raises(SchemaError, match=rf"^{r}:66: epoch 1 started \(line 44\) and did not end"):
        parse(edited(tmp_path, lines, step0), options())
    # an iteration of the epoch that has ended (after :69), then an end-of-run line holding a train. value: complete
    late = '{"type": "LOG", "step": [1, 1300], "data": {"train.loss": 2.9}}'
    end = '{"type": "LOG", "step": [], "data": {"train.total_ips": 7700.0}}'
    for tail in ([f"DLLL {late}"], [f"DLLL {late}", f"DLLL {end}"]):
        (rec,) = parse(edited(tmp_path, lines, lambda ls, t=tail: [*ls[:69], *t]), options())
        assert rec.metrics["throughput_total"] == 7766.159344405196 and rec.tags["throughput_epoch"] == "1"
