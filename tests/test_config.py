"""Every config in conf/ composes (Hydra's compose API, nothing runs), resolves, and names functions that exist."""

from __future__ import annotations

import importlib.util

import pytest
from hydra.utils import get_method
from omegaconf import OmegaConf

from scalestudy.config import CONF_DIR, compose

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
    assert users["mlperf-training-resnet"] == ["figure-7", "figure-10", "figure-11", "figure-12", "table-4", "table-6",
                                              "table-7"]  # fmt: skip
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
