"""The seal of a run's values (store/seal.py) and the builder's check of it (store/read.check_sealed), worked by
hand: a planted change in any value the builder reads must break the seal, and nothing else may."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from scalestudy.schema import RunRecord
from scalestudy.store import StoreError
from scalestudy.store.read import check_sealed
from scalestudy.store.seal import changed_parts, differences, expected_history, expected_values, values_digest

PARAMS = {"model": "resnet50", "workers": "8"}
METRICS = {"throughput_total": 1656.0}
TAGS = {"source": "published", "import_key": "k", "mlflow.runName": "r", "content_hash": "abc"}


def test_the_digest_by_hand():
    def part(items):
        return hashlib.sha256(json.dumps(sorted(items.items()), separators=(",", ":")).encode()).hexdigest()[:12]

    expected = (f"params:{part(PARAMS)} metrics:{part({'throughput_total': '1656.0'})} "
                f"tags:{part({'source': 'published', 'import_key': 'k'})}")  # fmt: skip
    assert values_digest(PARAMS, METRICS, TAGS) == expected


@pytest.mark.parametrize(
    "params, metrics, tags, part",
    [
        ({**PARAMS, "workers": "9"}, METRICS, TAGS, "params"),
        (PARAMS, {"throughput_total": 1656.0000000000002}, TAGS, "metrics"),  # one ulp
        (PARAMS, {**METRICS, "extra": 1.0}, TAGS, "metrics"),
        (PARAMS, METRICS, {**TAGS, "source": "measured"}, "tags"),
        (PARAMS, METRICS, {**TAGS, "new": "x"}, "tags"),
    ],
)
def test_any_change_breaks_the_seal_and_names_its_part(params, metrics, tags, part):
    sealed = values_digest(PARAMS, METRICS, TAGS)
    assert changed_parts(sealed, values_digest(params, metrics, tags)) == [part]


def test_what_the_seal_leaves_out():
    """MLflow's own tags (description, run name) and the two hash tags do not change the numbers."""
    sealed = values_digest(PARAMS, METRICS, TAGS)
    tags = {**TAGS, "mlflow.note.content": "edited", "content_hash": "other", "values_hash": sealed}
    assert values_digest(PARAMS, {"throughput_total": 1656}, tags) == sealed  # an int reads back as the same double
    assert changed_parts(None, sealed) == ["no values_hash"]


def test_a_records_latest_values_and_history():
    # a series' latest point is MLflow's: the largest step, then timestamp, then value
    points = [(1, 5, 7.0), (3, 4, 9.0), (3, 4, 8.0), (2, 9, 1.0)]  # (step, timestamp, value)
    rec = RunRecord(experiment="e", key="k", params={"workers": 2}, metrics={"throughput_total": 10.0},
                    tags={"source": "measured"}, series={"step_throughput_total": points})  # fmt: skip
    params, latest, tags = expected_values(rec)
    assert params == {"workers": "2"}
    assert latest == {"throughput_total": 10.0, "step_throughput_total": 9.0}
    assert tags == {"source": "measured", "import_key": "k"}
    assert expected_history(rec) == [("step_throughput_total", 1, 7.0), ("step_throughput_total", 2, 1.0),
                                     ("step_throughput_total", 3, 8.0), ("step_throughput_total", 3, 9.0),
                                     ("throughput_total", 0, 10.0)]  # fmt: skip


def test_differences_say_what_was_and_what_the_source_says():
    stored = ({**PARAMS, "workers": "16"}, {"throughput_total": 2190.0}, {**TAGS, "extra": "x"})
    assert differences(stored, (PARAMS, METRICS, TAGS)) == [
        "param workers was 16, the source says 8",
        "metric throughput_total was 2190.0, the source says 1656.0",
        "tag extra was x, the source says absent",
    ]


def _frames(value: float, recorded: str, runs_in_table: int = 1):
    runs = pd.DataFrame({"run_id": ["r1"], "experiment": ["e"], "run_name": ["one"]})
    kv = lambda d: pd.DataFrame([{"run_id": "r1", "key": k, "value": v} for k, v in d.items()])  # noqa: E731
    return runs, kv(PARAMS), kv({"throughput_total": value}), kv({**TAGS, "values_hash": recorded})


def test_the_builder_refuses_a_run_changed_after_it_was_written():
    sealed = values_digest(PARAMS, METRICS, TAGS)
    check_sealed(*_frames(1656.0, sealed), {"e": "1"})  # as written: accepted
    with pytest.raises(StoreError, match=r"^run r1 \(e: one\): its metrics changed after it was written"):
        check_sealed(*_frames(1657.0, sealed), {})
    with pytest.raises(StoreError, match=r"^experiment e holds 1 runs, its import left 2: a run was deleted"):
        check_sealed(*_frames(1656.0, sealed), {"e": "2"})


def test_where_a_source_was_found_is_not_a_change():
    """A log imported again from another folder (its log_path tag differs) is the same run (issue 21's content
    keys): the import compares what the source says, not where it lay."""
    stored = (PARAMS, METRICS, {**TAGS, "log_path": "/old/place/result_0.txt"})
    expected = (PARAMS, METRICS, {**TAGS, "log_path": "/new/place/result_0.txt"})
    assert differences(stored, expected, ignore_tags=frozenset({"log_path"})) == []
    assert differences(stored, expected) == [
        "tag log_path was /old/place/result_0.txt, the source says /new/place/result_0.txt"
    ]


def test_an_imports_check_of_a_run_says_whether_its_seal_is_missing_wrong_or_right():
    """store/verify.changed_values on a run as MLflow returns it: a run written before runs were sealed (a store
    of an earlier version) is told apart from one whose seal no longer matches its values."""
    from types import SimpleNamespace

    from scalestudy.store.verify import changed_values

    named = {"model": "resnet50", "device": "P100", "data": "synthetic", "batch_per_worker": 64, "platform": "p"}
    rec = RunRecord(experiment="e", key="k", params={"workers": 8, **named}, metrics={"throughput_total": 1656.0},
                    tags={"source": "published"})  # fmt: skip
    params, metrics, tags = expected_values(rec)
    history = expected_history(rec)

    def run(extra_tags, status="FINISHED", name=rec.run_name):
        return SimpleNamespace(data=SimpleNamespace(params=params, metrics=metrics, tags={**tags, **extra_tags}),
                               info=SimpleNamespace(status=status, run_name=name))  # fmt: skip

    assert changed_values(run({}), rec, history) == ["it has no values_hash tag (written before runs were sealed)"]
    assert changed_values(run({"values_hash": "params:x"}), rec, history) == [
        "its values_hash tag is not the hash of its values"
    ]
    sealed = {"values_hash": values_digest(params, metrics, tags)}
    assert changed_values(run(sealed), rec, history) == []
    # status and name are outside the seal (MLflow's update_run changes them): compared with the record itself
    assert changed_values(run(sealed, status="FAILED"), rec, history) == ["status was FAILED, the source says FINISHED"]
    assert changed_values(run(sealed, name="fake"), rec, history) == [
        f"run name was 'fake', the source says {rec.run_name!r}"
    ]
