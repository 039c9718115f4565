"""Hydra's conventions in the entry points (issue 43): `--help` and `--cfg job` of the builder and of train, typed
values refused in one line, the overrides and the config's hash in each sidecar and PDF, and one line naming the
command that makes the runs a build lacks."""

from __future__ import annotations

import hashlib
import json

import yaml
from helpers import REPO, run_here, run_module
from omegaconf import OmegaConf
from test_figure_files import pdf_info

from scalestudy.config import CONF_DIR, flags_conflict
from scalestudy.paper.cli_args import known_targets


def every_target() -> list[str]:
    return [name for names in known_targets().values() for name in names]


def test_the_builders_help_lists_its_targets_and_config(tmp_path):
    done = run_module("scalestudy.paper", "--help", uri=f"sqlite:///{tmp_path}/none.db")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and done.stderr == ""
    figures = sorted(p.stem for p in (CONF_DIR / "figure").glob("*.yaml"))
    tables = sorted(p.stem for p in (CONF_DIR / "table").glob("*.yaml"))
    assert len(figures) >= 12 and len(tables) >= 7
    (figure_line,) = [line for line in lines if line.startswith("figure: ")]
    (table_line,) = [line for line in lines if line.startswith("table: ")]
    assert sorted(figure_line.removeprefix("figure: ").split(", ")) == figures
    assert sorted(table_line.removeprefix("table: ").split(", ")) == tables
    assert "source: published" in lines and "out_dir: paper" in lines  # the config, composed
    assert any(line.startswith("--cfg, -c job|hydra|all") for line in lines)
    assert not (tmp_path / "none.db").exists()  # no store opened


def test_h_is_help(monkeypatch, capsys, tmp_path):
    done = run_here("scalestudy.paper", "-h", uri=f"sqlite:///{tmp_path}/none.db", monkeypatch=monkeypatch,
                    capsys=capsys)  # fmt: skip
    assert done.returncode == 0 and "== Targets ==" in done.stdout


def test_cfg_job_prints_the_composed_config_and_builds_nothing(tmp_path):
    done = run_module("scalestudy.paper", "figure-3", "table-1", "source=all", "--cfg", "job",
                      f"out_dir={tmp_path}/out", uri=f"sqlite:///{tmp_path}/none.db")  # fmt: skip
    head, *rest = done.stdout.split("# table-1\n")
    assert head.startswith("# figure-3\n") and len(rest) == 1
    figure = yaml.safe_load(head)
    table = yaml.safe_load(rest[0])
    declared = yaml.safe_load((CONF_DIR / "figure" / "figure-3.yaml").read_text())
    assert figure["source"] == "all" and figure["out_dir"] == f"{tmp_path}/out"
    assert figure["figure"]["plot"] == declared["plot"] and figure["figure"]["runs"] == declared["runs"]
    assert table["table"]["name"] == "table-1" and "figure" not in table
    assert not (tmp_path / "out").exists() and not (tmp_path / "none.db").exists()


def test_a_bare_cfg_job_prints_every_target(monkeypatch, capsys, tmp_path):
    done = run_here("scalestudy.paper", "--cfg", "job", uri=f"sqlite:///{tmp_path}/none.db", monkeypatch=monkeypatch,
                    capsys=capsys)  # fmt: skip
    assert [line[2:] for line in done.stdout.splitlines() if line.startswith("# ")] == every_target()


def test_info_prints_hydras_defaults_of_a_target(monkeypatch, capsys, tmp_path):
    done = run_here("scalestudy.paper", "figure-7", "--info", "defaults", uri=f"sqlite:///{tmp_path}/none.db",
                    monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert done.returncode == 0
    assert "figure/figure-7" in done.stdout and "scaling/default" in done.stdout


def test_a_mistyped_boolean_is_refused_naming_the_key_and_its_values(tmp_path):
    done = run_module("scalestudy.paper", "figure-3", "figure.plot.median=flase", f"out_dir={tmp_path}/out",
                      uri=f"sqlite:///{tmp_path}/store.db", check=False)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "error: conf/figure/figure-3.yaml: figure.plot.median='flase' is not a boolean (allowed: true, false)\n"
    )
    assert list(tmp_path.iterdir()) == []  # no store opened, no file written


def test_other_values_of_the_wrong_type_are_refused(monkeypatch, capsys, tmp_path):
    cases = {
        "source=publish": "source='publish' is not one of the allowed values: published, measured, all",
        "figure.plot.xscale=log3": "figure.plot.xscale='log3' is not one of the allowed values: linear, log2",
        "+figure.plot.height=abc": "figure.plot.height='abc' is not a number",
        "+figure.plot.heigth=3": "figure.plot.heigth: no such key (allowed: x, xscale,",
    }
    for override, said in cases.items():
        done = run_here("scalestudy.paper", "figure-3", override, f"out_dir={tmp_path}", uri=f"sqlite:///{tmp_path}/x",
                        monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
        assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_typed_value_is_converted_as_its_type():
    from scalestudy.paper.__main__ import compose_targets

    ((_, _, cfg),) = compose_targets([("figure", "figure-3")], ["figure.plot.median=off"])
    assert cfg.figure.plot.median is False and "height" not in cfg.figure.plot  # unset keys stay unset


def test_the_sidecar_and_the_pdf_record_the_overrides_and_the_configs_hash(
    published_store, published_figures, tmp_path, monkeypatch, capsys
):
    override = "figure.plot.median=false"
    shown = run_here("scalestudy.paper", "figure-3", override, "--cfg", "job", "--resolve", uri=published_store,
                     monkeypatch=monkeypatch, capsys=capsys).stdout  # fmt: skip
    job = yaml.safe_load(shown.split("\n", 1)[1])
    del job["out_dir"], job["tracking_uri"]  # where the files go and the store: not what is drawn
    expected = hashlib.sha256(OmegaConf.to_yaml(OmegaConf.create(job)).encode()).hexdigest()

    built = run_here("scalestudy.paper", "figure-3", override, f"out_dir={tmp_path}", uri=published_store,
                     monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    assert built.returncode == 0, built.stderr
    sidecar = json.loads((tmp_path / "figures" / "figure-3.json").read_text())
    assert sidecar["config"] == {"overrides": [override], "sha256": expected}
    subject = pdf_info(tmp_path / "figures" / "figure-3.pdf")["Subject"]
    assert subject.endswith(f"; config sha256 {expected}; overrides: {override}")

    paper = json.loads((published_figures["dir"] / "figure-3.json").read_text())  # the paper's: no override
    assert paper["config"]["overrides"] == [] and len(paper["config"]["sha256"]) == 64
    assert paper["config"]["sha256"] != expected
    assert pdf_info(published_figures["dir"] / "figure-3.pdf")["Subject"].endswith("; overrides: none")


def test_a_build_with_no_runs_says_in_one_line_what_makes_them(empty_store, tmp_path, monkeypatch, capsys):
    done = run_here("scalestudy.paper", f"out_dir={tmp_path}/out", uri=empty_store, monkeypatch=monkeypatch,
                    capsys=capsys)  # fmt: skip
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 1 and "no run matches" not in error
    assert error.startswith(f"error: {len(every_target())} targets found no runs (source=published)")
    assert "tf-benchmarks-2017" in error and error.endswith(
        "`make import` imports the published runs (`make figure-N`, `make table-N` those they draw)"
    )
    measured = run_here("scalestudy.paper", "figure-1", "figure-2", "source=measured", f"out_dir={tmp_path}/out",
                        uri=empty_store, monkeypatch=monkeypatch, capsys=capsys)  # fmt: skip
    (error,) = [line for line in measured.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith("error: 2 targets found no runs (source=measured)")
    assert error.endswith(
        "`make run-figure-1`, `make run-figure-2` or `python -m scalestudy.train` makes measured runs"
    )
    assert not (tmp_path / "out" / "figures" / "figure-1.json").exists()


def test_trains_help_lists_its_own_groups_only(tmp_path):
    done = run_module("scalestudy.train", "--help", uri="sqlite:///unused.db", cwd=REPO)
    groups = [line.split(":")[0] for line in done.stdout.split("== Config ==")[0].splitlines() if ": " in line]
    assert groups == ["cluster", "data", "experiment", "framework", "model", "tracking"]
    assert "figure-3" not in done.stdout.split("== Config ==")[0]  # the builder's groups are not train's
    assert "workers: 1" in done.stdout


def test_trains_sweep_prints_every_config_without_a_traceback(tmp_path):
    done = run_module("scalestudy.train", "-m", "experiment=figure-1", "--cfg", "all", "--resolve",
                      uri="sqlite:///unused.db", cwd=tmp_path)  # fmt: skip
    assert "Traceback" not in done.stderr and done.stdout.count("# job ") == 6
    assert "subdir: 0_vgg19_tensorflow_w1" in done.stdout  # hydra's own keys resolved, as Hydra's --resolve does
    assert list(tmp_path.iterdir()) == []


def test_flags_hydra_refuses_together_are_one_line():
    assert flags_conflict(["-m", "--info"]).startswith("only one of --run, --multirun, --cfg, --info")
    assert flags_conflict(["-m", "workers=1,2", "--cfg", "job", "--info"])
    assert flags_conflict(["-m", "workers=1,2", "--cfg", "job"]) is None
    assert flags_conflict(["--cfg", "job"]) is None


def test_trains_mistyped_values_are_refused_in_one_line_before_anything_runs(tmp_path):
    done = run_module("scalestudy.train", "xla=flase", uri=f"sqlite:///{tmp_path}/store.db", cwd=tmp_path,
                      check=False)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: configuration: xla='flase' is not a boolean (allowed: true, false)\n"
    assert list(tmp_path.iterdir()) == []  # no job folder, no store


def test_trains_sweep_and_typed_values():
    from scalestudy.config import compose, train_refusal

    sweep = ["-m", "experiment=figure-1", "workers=1,two", "--cfg", "job"]
    assert train_refusal(sweep) == "configuration: workers='1,two' is not a whole number"  # as typed
    assert train_refusal(["-m", "experiment=figure-1", "workers=1,2"]) is None
    assert train_refusal(["--help", "xla=flase"]) is None  # Hydra's own flags answer for themselves
    cfg = compose("train", ["xla=yes", "optimizer.lr=1"])
    assert cfg.xla is True and cfg.optimizer.lr == 1 and cfg.device == "cpu"
