"""malik-2018 (seed 004): a claim in words recorded as published runs, with its citation and no number."""

from __future__ import annotations

import pytest
from helpers import dataset_copy

from scalestudy.ingest import registry
from scalestudy.ingest.malik import read
from scalestudy.schema import SchemaError


def test_one_run_per_model_with_the_claim_and_no_metric(tmp_path):
    records = read(dataset_copy(tmp_path, "malik-2018"))
    assert [r.params["model"] for r in records] == ["alexnet", "googlenet", "resnet50"]
    for rec in records:
        rec.validate()
        assert rec.params["workers"] == 256 and rec.params["device"] == "K40/K80/P100"
        assert rec.params["data"] == "synthetic" and rec.params["batch_per_worker"] == "not stated"
        assert rec.metrics == {}  # the abstract gives no number
        assert rec.tags["claim"] == "almost linear throughput (images/sec) scalability up to 256 GPUs"
        assert rec.tags["source"] == "published" and "Malik" in rec.tags["citation"]
    assert registry()["malik-2018"] is read


def test_a_row_without_its_claim_is_refused_naming_the_line(tmp_path):
    folder = dataset_copy(tmp_path, "malik-2018")
    path = folder / "claims.csv"
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rsplit(",", 1)[0] + ","
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaError, match=r"claims\.csv:3: column 'claim' is empty"):
        read(folder)
