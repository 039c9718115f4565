"""python -m scalestudy.paper TARGET... [OVERRIDE...]

TARGET: figure-N, table-N, `figures`, `tables` or `all`. OVERRIDE: Hydra overrides applied to every
target's config, e.g. `source=measured` or `figure.plot.median=false`. The store is queried once
for the whole build, however many targets are asked for.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from ..cli import one_line, run
from ..config import CONF_DIR, name_order
from ..files import remove_stale_temporaries
from ..provenance import git_commit
from ..store import load_runs, tracking_uri
from .selection import NoRunsDeclared
from .sidecars import set_files

GROUPS = ("figure", "table", "numbers")  # what the builder makes: conf/<group>/<group>-N.yaml


def expand(targets: list[str]) -> list[tuple[str, str]]:
    """[('figure', 'figure-3'), ('table', 'table-1'), ...] in the order asked; an unknown name lists the known."""
    known = {g: sorted((p.stem for p in (CONF_DIR / g).glob("*.yaml")), key=name_order) for g in GROUPS}
    groups = {"figures": ["figure"], "tables": ["table"], "all": list(GROUPS)}
    out: list[tuple[str, str]] = []
    for target in targets:
        if target in groups:
            out += [(g, name) for g in groups[target] for name in known[g]]
            continue
        group = target.split("-", 1)[0]
        if target not in known.get(group, []):
            choices = ", ".join([n for g in GROUPS for n in known[g]] + list(groups))
            raise LookupError(f"unknown target {target!r} (no conf/{group}/{target}.yaml): choose from {choices}")
        out.append((group, target))
    return out


def split_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the targets asked for, default `all`; the Hydra overrides): an argument with `=` is an override."""
    return [a for a in argv if "=" not in a] or ["all"], [a for a in argv if "=" in a]


def compose_targets(targets: list[tuple[str, str]], overrides: list[str]) -> list[tuple[str, str, DictConfig]]:
    """[(group, name, its config: conf/paper.yaml with `group=name` and the overrides)]; nothing is built. A bad
    override is a ValueError with Hydra's message."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="paper"):
        try:
            return [(group, name, compose("paper", [f"{group}={name}", *overrides])) for group, name in targets]
        except HydraException as err:
            raise ValueError(f"configuration: {err}") from None


def main(argv: list[str]) -> int:
    asked, overrides = split_arguments(argv)
    targets = expand(asked)
    started = time.perf_counter()
    commit = git_commit()
    configs = compose_targets(targets, overrides)
    uri = configs[0][2].tracking_uri or tracking_uri()
    runs = load_runs(uri)
    from .figures import build_figure  # matplotlib is imported only once the config is known to be good
    from .numbers import build_numbers
    from .tables import build_table

    builders = {"figure": build_figure, "table": build_table, "numbers": build_numbers}

    failed = skipped = 0
    for group, name, cfg in configs:
        spec = OmegaConf.to_container(cfg[group], resolve=True)
        spec["tracking_uri"] = uri
        out_dir = Path(cfg.out_dir) / ("figures" if group == "figure" else "tables")
        remove_stale_temporaries(out_dir, set_files)  # left by a build that was killed (SIGKILL) while writing
        try:
            written = builders[group](spec, runs, source=cfg.source, out_dir=out_dir, commit=commit)
        except NoRunsDeclared as err:
            if name in asked:
                print(f"error: {one_line(err)}; {out_dir / name}.* left as they were", file=sys.stderr)
                failed += 1
            else:  # `figures`, `all`: a figure of measured runs only has nothing to draw from published ones
                print(f"{name}: skipped, {err}")
                skipped += 1
            continue
        except (LookupError, ValueError, TypeError) as err:
            print(f"error: {one_line(err)}; {out_dir / name}.* left as they were", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: " + ", ".join(str(p) for p in written))
    print(
        f"built {len(configs) - failed - skipped} of {len(configs)} targets"
        + (f" ({skipped} with no runs of this source)" if skipped else "")
        + f" from {len(runs)} runs "
        f"(read by {runs.attrs.get('reader', '?')}) in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run(main))
