"""Every config in conf/ composes (Hydra's compose API, nothing runs), resolves, and names functions that exist;
a multirun's jobs compose as Hydra makes them."""

from __future__ import annotations

import importlib.util
import re

import pytest
from helpers import run_module
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_method
from omegaconf import OmegaConf

from scalestudy.config import CONF_DIR, compose, show_sweep_configs, sweep_jobs

GROUPS = {
    group: sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    for group in ("model", "data", "framework", "cluster", "tracking", "experiment")
}
TRAIN_CHOICES = [(group, name) for group, names in GROUPS.items() for name in names]


def targets(node) -> list[str]:
    """Every `_target_` in a config tree."""
    if isinstance(node, dict):
        found = [node["_target_"]] if "_target_" in node else []
        return found + [t for v in node.values() for t in targets(v)]
    if isinstance(node, list):
        return [t for v in node for t in targets(v)]
    return []


@pytest.mark.parametrize("group, name", TRAIN_CHOICES, ids=[f"{g}={n}" for g, n in TRAIN_CHOICES])
def test_every_training_choice_composes_and_resolves(group, name):
    if name == "slurm" and importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        pytest.fail("cluster=slurm needs hydra-submitit-launcher (the test extra installs it)")
    cfg = compose("train", [f"{group}={name}"])  # `experiment=figure-1`, no `+`: train.yaml declares the group
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["model"]["name"] and resolved["framework"]["name"]
    for target in targets(resolved):
        assert callable(get_method(target)), target
    if group == "experiment":
        assert resolved["study"], f"{name} sets no study (figures select their sweep's runs by it)"


@pytest.mark.parametrize("group", ["figure", "table"])
def test_every_figure_and_table_composes_and_names_functions_that_exist(group):
    names = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    assert names
    for name in names:
        spec = OmegaConf.to_container(compose("paper", [f"{group}={name}"])[group], resolve=True)
        # a figure of runs measured here only (figure-9) declares no published runs
        assert spec["name"] == name and any(spec["runs"].get(src) is not None for src in ("published", "measured"))
        for target in targets(spec):
            assert callable(get_method(target)), f"{name}: {target}"


def test_the_experiment_group_is_declared_null_by_default():
    assert compose("train").get("study") is None
    assert compose("train", ["experiment=figure-5"]).study == "figure-5"


def test_experiment_users_are_read_from_the_figure_and_table_configs():
    from scalestudy.config import experiment_users

    users = experiment_users()
    assert users["tf-benchmarks-2017"] == ["figure-3", "figure-4", "figure-7", "figure-10", "table-1", "table-4",
                                           "table-7"]  # fmt: skip
    assert users["horovod-docs"] == ["figure-7", "figure-10", "table-4", "table-7"]  # these name several
    assert users["hacksa-2019"] == ["figure-1", "figure-2", "figure-5", "figure-7", "figure-10", "table-3", "table-4",
                                    "table-7"]  # fmt: skip
    # figure 7 and table 4 no longer read MLPerf's runs: its test's error widens none of their ranges
    assert users["mlperf-training-resnet"] == ["figure-10", "figure-11", "figure-12", "table-6", "table-7"]
    assert users["measured"] == ["figure-1", "figure-2", "figure-5", "figure-6", "figure-9", "table-2", "table-3"]


def test_under_make_test_a_skipped_test_fails_and_says_why(pytester, monkeypatch):
    pytester.makepyfile(test_widget="import pytest\n\ndef test_w():\n    pytest.skip('no widget here')\n")
    monkeypatch.delenv("SCALESTUDY_REQUIRE_ALL", raising=False)
    plain = pytester.runpytest_inprocess("-p", "require_all", "-rs", "-p", "no:cacheprovider")
    plain.assert_outcomes(skipped=1)
    plain.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_widget.py:4: no widget here"])
    monkeypatch.setenv("SCALESTUDY_REQUIRE_ALL", "1")
    strict = pytester.runpytest_inprocess("-p", "require_all", "-p", "no:cacheprovider")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(
        ["*skipped under SCALESTUDY_REQUIRE_ALL=1 (make test runs everything): *no widget here"]
    )
    # a test that needs third-party files make test cannot fetch may still skip
    data = "import pytest\n\n@pytest.mark.may_skip\ndef test_w():\n    pytest.skip('no data')\n"
    pytester.makepyfile(test_widget=data)
    pytester.makeini("[pytest]\nmarkers =\n    may_skip: data\n")
    pytester.runpytest_inprocess("-p", "require_all", "-p", "no:cacheprovider").assert_outcomes(skipped=1)


# --------------------------------------------------------------------------------------------
# A multirun's jobs, composed as Hydra's BasicSweeper makes them: `python -m scalestudy.train -m ... --cfg job`
# (issue 40; Hydra alone refuses --cfg with -m)


def test_a_command_line_sweep_replaces_the_experiments_sweep_of_the_same_key():
    jobs = sweep_jobs("train", ["experiment=figure-1", "workers=1,2,4"])
    models = 3  # conf/experiment/figure-1.yaml: vgg19, resnet101_v2, inception3
    assert len(jobs) == 3 * models
    assert sorted({cfg.workers for _, cfg in jobs}) == [1, 2, 4]
    assert {cfg.model.name for _, cfg in jobs} == {"vgg19", "resnet101_v2", "inception3"}
    assert jobs[0][0] == ["model=vgg19", "workers=1", "experiment=figure-1"]
    assert [cfg.hydra.job.num for _, cfg in jobs] == list(range(len(jobs)))


def test_a_hydra_override_of_one_sweep_value_sets_it():
    jobs = sweep_jobs("train", ["experiment=figure-9", "hydra.sweeper.params.model=vgg16", "framework=mxnet"])
    assert [job for job, _ in jobs] == [
        ["framework=mxnet", "model=vgg16", f"workers={n}", "experiment=figure-9"] for n in (1, 2)
    ]
    assert {cfg.model.name for _, cfg in jobs} == {"vgg16"}


def test_cfg_job_prints_each_job_of_a_sweep(capsys):
    argv = ["-m", "experiment=figure-1", "model=vgg19", "workers=1,2,4", "--cfg", "job"]
    assert show_sweep_configs("train", argv) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("# job ")]
    assert headers == [f"# job {n} of 3: model=vgg19 workers={w} experiment=figure-1" for n, w in enumerate((1, 2, 4))]
    assert re.findall(r"^workers: (\d+)$", out, re.M) == ["1", "2", "4"]
    assert "hydra:" not in out and "sweeper" not in out and out.count("study: figure-1") == 3
    assert not HydraConfig.initialized()  # no job of the sweep left as the process's own (harness/record.py reads it)


def test_cfg_hydra_and_package(capsys):
    sweep = ["-m", "experiment=figure-9", "model=vgg16", "framework=mxnet"]
    show_sweep_configs("train", [*sweep, "--cfg", "hydra", "--package", "hydra.job"])
    out = capsys.readouterr().out
    assert out.count("# @package hydra.job") == 2 and "num: 1" in out and "workers: " not in out


def test_a_bad_override_is_a_value_error_with_hydras_message():
    for bad in ("cluster.partitionx=gpu", "hydra.sweeper.params.workers=1,2,4"):
        with pytest.raises(ValueError, match=r"^configuration: "):
            show_sweep_configs("train", ["-m", "experiment=figure-1", bad, "--cfg", "job"])


def test_the_entry_point_prints_a_sweeps_configs_or_one_line_and_exit_2(tmp_path):
    """python -m scalestudy.train -m ... --cfg job: Hydra alone ends in a ValueError traceback (--cfg with -m)."""
    done = run_module("scalestudy.train", "-m", "experiment=figure-1", "cluster.partitionx=gpu", "--cfg", "job",
                      uri="sqlite:///unused.db", cwd=tmp_path, check=False)  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("error: configuration: Could not override 'cluster.partitionx'")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # no job folder: nothing ran
