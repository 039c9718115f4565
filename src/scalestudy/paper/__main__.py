"""python -m scalestudy.paper [TARGET...] [OVERRIDE...] [--help] [--cfg job] [--info]

TARGET: figure-N, table-N, numbers-*, `figures`, `tables` or `all` (the default). OVERRIDE: Hydra overrides applied
to every target's config, e.g. `source=measured` or `figure.plot.median=false`, typed by the builder's structured
config (conf_schema.py). Hydra's flags as its apps read them (cli_args.py). The store is queried once for the
whole build, however many targets are asked for. Each sidecar records the overrides and the config's sha256.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from ..cli import entry, one_line, run
from ..config import CONF_DIR, shown_config
from ..files import remove_stale_temporaries
from ..provenance import git_commit
from ..store import load_runs, tracking_uri
from .cli_args import GROUPS, base_config_yaml, expand, help_text, parse, split_arguments
from .compare import NothingOfYours, out_dir_of, yours_of
from .conf_schema import typed
from .missing_runs import experiments_named, missing_line
from .selection import EmptySelection, NoRunsDeclared
from .sidecars import config_record, set_files

__all__ = ["GROUPS", "compose_targets", "expand", "main", "split_arguments"]


def compose_targets(
    targets: list[tuple[str, str]], overrides: list[str], with_hydra: bool = False
) -> list[tuple[str, str, DictConfig]]:
    """[(group, name, its config: conf/paper.yaml with `group=name` and the overrides, typed)]; nothing is built.
    A bad override, or a value not of its key's type, is a ValueError with Hydra's or the schema's message."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="paper"):
        try:
            composed = [
                (group, name, compose("paper", [f"{group}={name}", *overrides], return_hydra_config=with_hydra))
                for group, name in targets
            ]
        except HydraException as err:
            raise ValueError(f"configuration: {err}") from None
    return [(group, name, typed(cfg, f"conf/{group}/{name}.yaml")) for group, name, cfg in composed]


def show_info(targets: list[tuple[str, str]], overrides: list[str], what: str) -> int:
    """Hydra's --info for each target's composition. Hydra logs it through the root logger, which it sets to
    DEBUG on stdout: the root logger is put back as it was (a test's process goes on)."""
    import logging

    from hydra.core.global_hydra import GlobalHydra

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="paper"):
            for group, name in targets:
                print(f"# {name}", flush=True)
                GlobalHydra.instance().hydra.show_info(what, "paper", [f"{group}={name}", *overrides])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return 0


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.help:
        print(help_text(base_config_yaml()))
        return 0
    targets = expand(args.targets)
    if args.info:
        return show_info(targets, args.overrides, args.info)
    configs = compose_targets(targets, args.overrides, with_hydra=args.cfg in ("hydra", "all"))
    if args.cfg:
        for _, name, cfg in configs:
            print(f"# {name}\n" + shown_config(cfg, args.cfg, args.package, args.resolve), end="")
        return 0
    return build(configs, args.targets, args.overrides)


@dataclass
class Tally:
    """What a build has done so far: targets failed and skipped, and those that found no runs (said together)."""

    failed: int = 0
    skipped: int = 0
    missing: dict[str, str] = field(default_factory=dict)  # {target: its error}
    lacking: set[str] = field(default_factory=set)  # the experiments they name that the store does not hold


def build(configs: list[tuple[str, str, DictConfig]], asked: list[str], overrides: list[str]) -> int:
    """Build each target from one query of the store; one line for the targets that found no runs."""
    started = time.perf_counter()
    commit = git_commit()
    uri = configs[0][2].tracking_uri or tracking_uri()
    runs = load_runs(uri)
    present = set(runs["experiment"].astype(str)) if "experiment" in runs else set()
    if configs[0][2].compare:  # your experiment must have runs: said once, not once per figure
        try:
            yours_of(runs, configs[0][2].compare)
        except LookupError as err:
            print(f"error: {one_line(err)}; nothing was written", file=sys.stderr)
            return 2
    tally = Tally()
    for group, name, cfg in configs:
        spec = OmegaConf.to_container(cfg[group], resolve=True)
        spec["tracking_uri"] = uri
        out_dir = (out_dir_of(cfg.out_dir, cfg.compare) if cfg.compare else Path(cfg.out_dir)) / (
            "figures" if group == "figure" else "tables"
        )
        try:
            written = build_one(group, spec, runs, cfg, out_dir, commit, config_record(cfg, overrides))
        except (LookupError, ValueError, TypeError) as err:
            lacking = experiments_named(spec, cfg.source) - present
            note_failure(tally, err, name, name in asked, lacking, f"{out_dir / name}.* left as they were")
            continue
        print(f"{name}: " + ", ".join(str(p) for p in written))
    if tally.missing:
        source = configs[0][2].source
        print(f"error: {missing_line(tally.missing, tally.lacking, present, source, uri)}", file=sys.stderr)
    failures = tally.failed + len(tally.missing)
    print(
        f"built {len(configs) - failures - tally.skipped} of {len(configs)} targets"
        + (f" ({tally.skipped} with no runs of this source)" if tally.skipped else "")
        + f" from {len(runs)} runs "
        f"(read by {runs.attrs.get('reader', '?')}) in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return 1 if failures else 0


def note_failure(tally: Tally, err: Exception, name: str, asked: bool, lacking: set[str], kept: str) -> None:
    """Say or keep why target `name` was not built: a target of `figures` or `all` that declares no runs of the
    source is skipped; one whose runs are missing from the store (its filter matched none, or it names an
    experiment the store lacks) waits for the build's one line; any other error is printed now."""
    if isinstance(err, NothingOfYours) or (isinstance(err, NoRunsDeclared) and not asked):
        # a figure of measured runs only, or none of your runs of its kind: nothing to draw beside the study's
        print(f"{name}: skipped, {err}")
        tally.skipped += 1
    elif not isinstance(err, NoRunsDeclared) and (isinstance(err, EmptySelection) or lacking):
        tally.missing[name] = f"{one_line(err)}; {kept}"
        tally.lacking |= lacking
    else:
        print(f"error: {one_line(err)}; {kept}", file=sys.stderr)
        tally.failed += 1


def build_one(group: str, spec: dict, runs, cfg: DictConfig, out_dir: Path, commit: str, config: dict) -> list[Path]:
    """One target's files (the builder of its group), after removing what a killed build left."""
    from .figures import build_figure  # matplotlib is imported only once the config is known to be good
    from .numbers import build_numbers
    from .tables import build_table

    remove_stale_temporaries(out_dir, set_files)  # left by a build that was killed (SIGKILL) while writing
    builders = {"figure": build_figure, "table": build_table, "numbers": build_numbers}
    if cfg.compare:  # your runs beside the study's: figures only
        if group != "figure":
            raise NothingOfYours(f"compare={cfg.compare} draws figures; {spec['name']} is a {group}")
        return build_figure(spec, runs, source=cfg.source, out_dir=out_dir, commit=commit, config=config,
                            compare=cfg.compare)  # fmt: skip
    return builders[group](spec, runs, source=cfg.source, out_dir=out_dir, commit=commit, config=config)


if __name__ == "__main__":
    sys.exit(run(entry(__spec__)))
