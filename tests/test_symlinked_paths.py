"""Paths behind symbolic links (issue 45): the mirror (SCALESTUDY_DATA_MIRROR), the data cache (SCALESTUDY_DATA_CACHE)
and the checkout reached through a link give the same runs, and name files as the caller named them. Before the
fix, a system file was found from the resolved log path, so `ingest logs` named it by the link's target while the
caller had named the link (test_ingest_logs_import.py's one-call-at-a-time test failed with the mirror linked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REFERENCE, REPO, shared_reference

from scalestudy.ingest import hacksa, mlperf_training
from scalestudy.ingest.__main__ import main
from scalestudy.ingest.logs.mlperf_system import system_file
from scalestudy.store import load_runs

SHARED = shared_reference("mlperf-training-resnet", "hacksa-2019")
# Real third-party files beside the checkout: a skip allowed under make test.
pytestmark = [
    pytest.mark.may_skip,
    pytest.mark.skipif(SHARED is None, reason="../shared/reference (mlperf-training-resnet, hacksa-2019) is not here"),
]
DELLEMC = "mlperf-training-resnet/v0.7/DellEMC/results/C4140/resnet/result_0.txt"  # spells 'number of nodes'
DELLEMC_SYSTEM = "mlperf-training-resnet/v0.7/DellEMC/systems/C4140.json"


def linked(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=target.is_dir())
    return link


def runs_of(records) -> list[tuple]:
    return sorted((r.key, r.params, r.metrics, r.tags, r.status) for r in records)


def test_a_system_file_is_named_through_the_link_the_log_was_named_by(tmp_path, monkeypatch):
    mirror = linked(tmp_path / "mirror", SHARED)
    assert system_file(mirror / DELLEMC) == mirror / DELLEMC_SYSTEM
    # relative, through `..`: absolute, the `..` folded, the link kept
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert system_file(Path("..") / "mirror" / DELLEMC) == mirror / DELLEMC_SYSTEM
    # a log that is itself a link, with no systems/ beside it: its target's system file
    log = linked(tmp_path / "mine" / "results" / "C4140" / "resnet" / "result_0.txt", SHARED / DELLEMC)
    assert system_file(log) == (SHARED / DELLEMC_SYSTEM).resolve()


def test_ingest_logs_through_a_linked_mirror_warns_naming_the_linked_file(empty_store, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    mirror = linked(tmp_path / "mirror", SHARED)
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(mirror))
    assert main(["logs", str(mirror / DELLEMC), "--experiment", "mine", "--workers", "4"]) == 0
    err = capsys.readouterr().err
    assert err == (f"warning: {mirror / DELLEMC_SYSTEM}:6: the system description spells 'number_of_nodes' as "
                   "'number of nodes': not read\n")  # fmt: skip
    assert len(load_runs(empty_store)) == 1


def test_a_dataset_read_through_a_linked_mirror_and_cache_gives_the_same_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(SHARED))
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(tmp_path / "cache"))
    plain = runs_of(hacksa.read(REFERENCE / "hacksa-2019"))
    monkeypatch.setenv("SCALESTUDY_DATA_MIRROR", str(linked(tmp_path / "mirror", SHARED)))
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(linked(tmp_path / "cache-link", tmp_path / "linked-cache")))
    (tmp_path / "linked-cache").mkdir()
    through_links = runs_of(hacksa.read(REFERENCE / "hacksa-2019"))
    assert through_links == plain and len(plain) == 16
    assert (tmp_path / "linked-cache" / "hacksa-2019" / "logs").is_dir()  # fetched through the link
    for _, _, _, tags, _ in through_links:
        assert tags["mlflow.note.content"].startswith("Published measurement, read from `experiments/reference/"
                                                      "hacksa-2019/logs/")  # fmt: skip


def test_the_mlperf_corpus_read_through_a_linked_cache_names_each_log_by_its_path(data_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("SCALESTUDY_DATA_CACHE", str(linked(tmp_path / "cache", data_cache)))
    records = mlperf_training.read(REFERENCE / "mlperf-training-resnet", progress=False)
    assert len(records) == 330
    for rec in records:
        shown = f"read from `experiments/reference/mlperf-training-resnet/{rec.key}` line "
        assert shown in rec.tags["mlflow.note.content"], rec.key


def test_a_dataset_imported_from_a_linked_checkout(empty_store, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    checkout = linked(tmp_path / "checkout", REPO)
    monkeypatch.chdir(checkout)  # as `make import` runs, in the checkout reached through the link
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    assert main(["hacksa-2019"]) == 0
    client = MlflowClient(tracking_uri=empty_store)
    runs = client.search_runs([client.get_experiment_by_name("hacksa-2019").experiment_id])
    assert len(runs) == 16
    for run in runs:
        assert run.data.tags["mlflow.note.content"].startswith("Published measurement, read from `experiments/"
                                                               "reference/hacksa-2019/logs/")  # fmt: skip
