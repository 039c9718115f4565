"""The builder's config, typed: a structured config (dataclasses) that every composed target is merged into.

Hydra's overrides are text: without a type, `figure.plot.median=flase` is the string 'flase', which is true.
Merged into the schema, a value that is not of its key's type (a boolean, a number, one of a set of names) is
refused before anything is read or written, in one line naming the key and the values it takes. Keys the schema
leaves open (`runs`, `derive`, a table's `compute`: their functions check their own arguments) take any value; a
key no figure declares is refused, as Hydra refuses it. A key a config does not set stays unset (the schema's
None defaults are not added: the drawing code tells an absent key from a null one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from omegaconf import DictConfig, OmegaConf, ValidationError, open_dict
from omegaconf.errors import ConfigKeyError

from ..config import type_refusal


class Source(Enum):
    published = 1
    measured = 2
    all = 3


class XScale(Enum):
    linear = 1
    log2 = 2


@dataclass
class PlotConfig:
    x: str | None = None
    xscale: XScale | None = None
    xlabel: str | None = None
    ylabel: str | None = None
    hue: list[str] | None = None
    facet: str | None = None
    lines_by: list[str] | None = None
    panels: list[Any] | None = None
    ideal: Any = None  # speedup, efficiency or a number (lines.py)
    median: bool | None = None
    per_worker: bool | None = None
    sharey: bool | None = None
    height: float | None = None
    height_in: float | None = None
    note: str | None = None
    series: str | None = None
    style: list[Any] | None = None
    xticks: list[Any] | None = None
    flag: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    intervals: dict[str, Any] | None = None
    vline: dict[str, Any] | None = None
    ylim: dict[str, Any] | None = None


@dataclass
class FigureConfig:
    name: str = ""
    title: str = ""
    measured_title: str | None = None
    caption: str | None = None
    runs: dict[str, Any] | None = None
    derive: Any = None
    draw: Any = None
    plot: PlotConfig = field(default_factory=PlotConfig)
    labels: dict[str, Any] | None = None


@dataclass
class TableConfig:
    name: str = ""
    caption: str | None = None
    continued_caption: str | None = None
    label: str | None = None
    template: str | None = None
    numbers_template: str | None = None
    sheet_note: str | None = None
    runs: dict[str, Any] | None = None
    compute: Any = None
    columns: list[Any] | None = None
    labels: dict[str, Any] | None = None
    log_labels: dict[str, Any] | None = None


@dataclass
class PaperConfig:
    source: Source = Source.published
    tracking_uri: str | None = None
    out_dir: str = "paper"
    compare: str | None = None
    figure: FigureConfig | None = None
    table: TableConfig | None = None
    numbers: dict[str, Any] | None = None  # named anchors and `numbers`: each number's function checks it


def typed(cfg: DictConfig, where: str) -> DictConfig:
    """`cfg` (a composed conf/paper.yaml, `hydra` node included or not) with its values of the schema's types
    (`median: 'false'` as False); ValueError naming `where`, the key and the values it takes where one is not."""
    job = OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])
    try:
        merged = OmegaConf.merge(OmegaConf.structured(PaperConfig), job)
    except (ValidationError, ConfigKeyError) as err:
        raise ValueError(refusal(err, job, where)) from None
    given = OmegaConf.to_container(job)
    out = OmegaConf.create(_set_only(OmegaConf.to_container(merged, enum_to_str=True), given))
    if "hydra" in cfg:
        with open_dict(out):
            out.hydra = cfg.hydra
    return out


def _set_only(merged, given):
    """`merged` without the keys `given` does not have (the schema's defaults), at every level of mappings."""
    if not isinstance(merged, dict) or not isinstance(given, dict):
        return merged
    return {key: _set_only(value, given[key]) for key, value in merged.items() if key in given}


def refusal(err: ValidationError | ConfigKeyError, job: DictConfig, where: str) -> str:
    """One line naming `where`, the key and the values it takes (config.type_refusal)."""
    key = str(err.full_key or "")
    value = OmegaConf.select(job, key, default=None, throw_on_resolution_failure=False) if key else None
    return type_refusal(err, PaperConfig, where, value)
