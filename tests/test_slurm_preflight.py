"""The checks before sbatch (scalestudy.harness.slurm.preflight), on sinfo's and scontrol's own output formats.

tests/integration/test_slurm_integration.py runs them against the real cluster: a sweep refused before sbatch
submits nothing."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from scalestudy.harness.slurm import preflight
from scalestudy.harness.slurm.preflight import Partition

# `sinfo --noheader --format='%P %a %D'` of a cluster with one partition split over two node states
SINFO = "debug* up 1\ndebug* up 1\ngpu up 4\nold down 2\n"
SHOW = {
    "debug": "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL Default=YES Nodes=node[1-2]",
    "gpu": "PartitionName=gpu AllowGroups=ALL AllowAccounts=physics,chem AllowQos=ALL Default=NO Nodes=g[1-4]",
    "old": "PartitionName=old AllowGroups=ALL DenyAccounts=guest AllowQos=ALL Default=NO Nodes=o[1-2]",
}


def answer(*cmd, timeout=30):
    if cmd[0] == "sinfo":
        return SINFO
    assert cmd[:3] == ("scontrol", "show", "partition") and cmd[4] == "--oneliner"
    return SHOW[cmd[3]]


def partitions():
    return preflight.query_partitions(answer)


def job(tmp_path, **over):
    image = tmp_path / "scalestudy.sif"
    image.write_bytes(b"SIF")
    base = {
        "workers": 4,
        "data": {"name": "synthetic", "path": None},
        "cluster": {"partition": "debug", "account": None, "nodes": 2, "image": str(image)},
    }
    cfg = OmegaConf.create(base)
    for key, value in over.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    return cfg


def test_sinfo_lines_add_up_per_partition_and_mark_the_default():
    found = partitions()
    assert found["debug"] == Partition("debug", True, 2, True, ("ALL",), ())
    assert found["gpu"] == Partition("gpu", True, 4, False, ("physics", "chem"), ())
    assert found["old"] == Partition("old", False, 2, False, ("ALL",), ("guest",))


def test_a_sweep_that_fits_has_no_problem(tmp_path):
    assert preflight.sweep_problems([job(tmp_path), job(tmp_path, workers=2)], partitions) == []


def test_a_missing_image_is_one_line_naming_the_key_and_the_remedy(tmp_path):
    (problem,) = preflight.sweep_problems([job(tmp_path, **{"cluster.image": "/nowhere/x.sif"})], partitions)
    assert problem.startswith("config cluster.image=/nowhere/x.sif: no such file") and "make sif" in problem
    assert "\n" not in problem


def test_a_missing_data_file_is_refused_only_for_data_read_from_a_file(tmp_path):
    cifar = {"data.name": "cifar10", "data.path": str(tmp_path / "cifar-10-python.tar.gz")}
    (problem,) = preflight.sweep_problems([job(tmp_path, **cifar)], partitions)
    assert problem.startswith(f"config data.path={tmp_path}/cifar-10-python.tar.gz: no such file")
    assert "make data-cifar10" in problem
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"x")
    assert preflight.sweep_problems([job(tmp_path, **cifar)], partitions) == []
    assert preflight.sweep_problems([job(tmp_path, **{"data.path": "/nowhere"})], partitions) == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        (
            {"cluster.partition": "gpux"},
            "config cluster.partition=gpux: no such partition (sinfo lists: debug, gpu, old)",
        ),
        ({"cluster.partition": "old"}, "config cluster.partition=old: the partition is not up (sinfo)"),
        ({"cluster.nodes": 3}, "config cluster.nodes=3: partition debug has 2 node(s) (sinfo)"),
        (
            {"cluster.partition": "gpu", "cluster.account": "bio"},
            "config cluster.account=bio: partition gpu does not take it "
            "(AllowAccounts=physics,chem, DenyAccounts=none)",
        ),
    ],
)
def test_each_partition_problem_is_said_as_sinfo_says_it(tmp_path, over, expected):
    assert preflight.sweep_problems([job(tmp_path, **over)], partitions) == [expected]


def test_accounts_a_partition_takes_or_denies(tmp_path):
    assert (
        preflight.sweep_problems([job(tmp_path, **{"cluster.partition": "gpu", "cluster.account": "chem"})], partitions)
        == []
    )
    denied = job(tmp_path, **{"cluster.partition": "old", "cluster.account": "guest", "cluster.nodes": 1})
    assert preflight.sweep_problems([denied], partitions)[1].endswith("(AllowAccounts=ALL, DenyAccounts=guest)")


def test_no_partition_named_takes_the_default_or_says_there_is_none(tmp_path):
    assert preflight.sweep_problems([job(tmp_path, **{"cluster.partition": None})], partitions) == []
    no_default = lambda: {"gpu": Partition("gpu", True, 4, False)}  # noqa: E731
    (problem,) = preflight.sweep_problems([job(tmp_path, **{"cluster.partition": None})], no_default)
    assert problem == "config cluster.partition=null but the cluster has no default partition (sinfo lists: gpu)"


def test_every_job_is_checked_each_problem_said_once_and_slurm_asked_once(tmp_path):
    calls = []

    def counted():
        calls.append(1)
        return partitions()

    jobs = [
        job(tmp_path, **{"cluster.image": "/a.sif"}),
        job(tmp_path, **{"cluster.image": "/a.sif", "cluster.nodes": 4}),
    ]
    problems = preflight.sweep_problems(jobs, counted)
    assert len(calls) == 1
    assert [p.split(":")[0] for p in problems] == ["config cluster.image=/a.sif", "config cluster.nodes=4"]


def test_a_machine_without_slurm_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    problems = preflight.sweep_problems([job(tmp_path), job(tmp_path)])
    assert problems == ["sinfo not found: this is not a Slurm login node (or Slurm is not on PATH)"]


def test_slurms_refusal_is_its_own_message_on_one_line(tmp_path, monkeypatch):
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(
        "#!/bin/sh\necho 'sinfo: error: Unable to contact slurm controller' >&2\necho '(connect failure)' >&2\nexit 1\n"
    )
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(preflight.SlurmAnswerError) as err:
        preflight.query_partitions()
    assert str(err.value) == (
        "sinfo --noheader '--format=%P %a %D': sinfo: error: Unable to contact slurm controller (connect failure)"
    )
