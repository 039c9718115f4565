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
from omegaconf import OmegaConf

from ..config import CONF_DIR
from ..provenance import git_commit
from ..tracking import StoreError, load_runs, tracking_uri
from .selection import EmptySelection, NoRunsDeclared


def expand(targets: list[str]) -> list[tuple[str, str]]:
    """[('figure', 'figure-3'), ('table', 'table-1'), ...] in the order asked."""
    groups = {"figures": "figure", "tables": "table"}
    out: list[tuple[str, str]] = []
    for target in targets:
        names = [target]
        if target in groups or target == "all":
            wanted = ["figure", "table"] if target == "all" else [groups[target]]
            names = [p.stem for g in wanted for p in sorted((CONF_DIR / g).glob("*.yaml"), key=_natural)]
        for name in names:
            group = name.split("-", 1)[0]
            if group not in ("figure", "table"):
                raise SystemExit(f"unknown target {target!r}: use figure-N, table-N, figures, tables or all")
            out.append((group, name))
    return out


def _natural(path: Path):
    stem = path.stem
    head, _, tail = stem.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (stem, 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    overrides = [a for a in argv if "=" in a]
    asked = [a for a in argv if "=" not in a] or ["all"]
    targets = expand(asked)
    started = time.perf_counter()
    commit = git_commit()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="paper"):
        try:
            configs = [
                (group, name, compose("paper", overrides=[f"{group}={name}", *overrides])) for group, name in targets
            ]
        except HydraException as err:
            print(f"configuration error: {err}", file=sys.stderr)
            return 2
    try:
        uri = configs[0][2].tracking_uri or tracking_uri() if configs else tracking_uri()
        runs = load_runs(uri)
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from .figures import build_figure  # matplotlib is imported only once the config is known to be good
    from .tables import build_table

    failed = skipped = 0
    for group, name, cfg in configs:
        spec = OmegaConf.to_container(cfg[group], resolve=True)
        spec["tracking_uri"] = uri
        out_dir = Path(cfg.out_dir) / ("figures" if group == "figure" else "tables")
        try:
            builder = build_figure if group == "figure" else build_table
            written = builder(spec, runs, source=cfg.source, out_dir=out_dir, commit=commit)
        except NoRunsDeclared as err:
            if name in asked:
                print(f"error: {err}; {out_dir / name}.* left as it was", file=sys.stderr)
                failed += 1
            else:  # `figures`, `all`: a figure of measured runs only has nothing to draw from published ones
                print(f"{name}: skipped, {err}")
                skipped += 1
            continue
        except (EmptySelection, LookupError, ValueError) as err:
            print(f"error: {err}; {out_dir / name}.* left as it was", file=sys.stderr)
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
    sys.exit(main())
