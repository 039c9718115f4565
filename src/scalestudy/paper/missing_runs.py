"""When targets find no runs: one line for all of them, naming the command that makes the runs they lack.

After `make figure-3` the store holds figure 3's dataset only, so a bare `python -m scalestudy.paper` (every target)
finds nothing for most targets. Each target's error said the same thing ("no run matches the filter"); the line
here names those targets once, the experiments the store lacks, and what makes their runs: `make import` for the
published datasets, `make run-figure-N` (a figure's sweep, conf/experiment/figure-N.yaml) or `python -m
scalestudy.train` for measured runs. Where the store has every experiment named, the filter itself excludes
the runs (an override), and the line says so instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..config import CONF_DIR
from ..schema import SOURCES


def experiments_named(spec, source: str) -> set[str]:
    """Every MLflow experiment a target's config names for `source` (`experiment:` of its `published` or
    `measured` run filters, at any depth)."""
    found: set[str] = set()
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key in SOURCES and source not in (key, "all"):
                continue
            if key == "experiment" and isinstance(value, (str, list)):
                found |= {value} if isinstance(value, str) else {str(v) for v in value}
            else:
                found |= experiments_named(value, source)
    elif isinstance(spec, list):
        for value in spec:
            found |= experiments_named(value, source)
    return found


def makers(names: Iterable[str], source: str) -> str:
    """The commands that make the runs of targets `names` for `source` (published, measured, all)."""
    said = []
    if source in ("published", "all"):
        said.append("`make import` imports the published runs (`make figure-N`, `make table-N` those they draw)")
    if source in ("measured", "all"):
        with_sweep = [n for n in names if (CONF_DIR / "experiment" / f"{n}.yaml").is_file()]
        sweeps = [f"`make run-figure-{n.split('-')[-1]}`" for n in with_sweep]
        runs = f"{', '.join(sweeps)} or " if sweeps else "a figure's sweep (`make run-figure-N`) or "
        said.append(f"{runs}`python -m scalestudy.train` makes measured runs")
    return "; ".join(said)


def missing_line(failed: dict[str, str], named: set[str], present: set[str], source: str, uri: str) -> str:
    """One line for the targets that found no runs: {target: its error} (one error is quoted whole), the
    experiments their configs name that the store lacks (`named`) and those it holds (`present`)."""
    absent = sorted(named - present)
    if len(failed) == 1:
        what = next(iter(failed.values()))
    else:
        left = "their files left as they were"
        what = f"{len(failed)} targets found no runs (source={source}), {left}: {', '.join(failed)}"
    if not absent:
        return f"{what}; the store has their experiments: the filter (or an override of it) matches none of their runs"
    return f"{what}; the store {uri} has no runs of {', '.join(absent)}: {makers(failed, source)}"
