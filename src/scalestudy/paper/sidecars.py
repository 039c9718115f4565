"""A figure's or table's sidecar (paper/figures|tables/NAME.json: the commit, the MLflow run ids, the numbers) as
JSON text: the same payload gives the same bytes, so two builds compare with cmp."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping


def plain(value):
    """A JSON-ready copy: numpy scalars as Python numbers, tuples as lists, NaN as None."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar
        return plain(value.item())
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def json_text(payload) -> str:
    return json.dumps(plain(payload), indent=2, sort_keys=True, default=str) + "\n"


FIGURE_FILES = ("pdf", "png", "json", "caption.tex")  # a figure's set: NAME.pdf first, its sidecar NAME.json


def set_files(first: str) -> set[str]:
    """The files of the set whose first file is `first`, as the builders write them: a figure's four
    (figure-3.pdf: figure-3.{pdf,png,json,caption.tex}); a table's or numbers' LaTeX, sidecar and numbers
    (table-1.tex: table-1.tex, table-1.json, table-1-numbers.tex). A journal naming anything else is refused
    (files.journal_pairs)."""
    stem, dot, ext = first.rpartition(".")
    if dot and ext == "pdf":
        return {f"{stem}.{e}" for e in FIGURE_FILES}
    if dot and ext == "tex":
        return {f"{stem}.tex", f"{stem}.json", f"{stem}-numbers.tex"}
    return set()


# Where the builder writes and which store it reads: they say nothing of what is drawn (the sidecar's run ids name
# the runs), so a figure built into another folder is the same file, its overrides and hash those of the paper's.
LOCATIONS = ("out_dir", "tracking_uri")


def config_record(cfg, overrides: list[str]) -> dict:
    """The sidecar's `config`: the command line's overrides (but `out_dir=`, `tracking_uri=`) and the sha256 of
    the composed config (`cfg`, typed; without those keys and `hydra`) as resolved YAML."""
    import hashlib

    from omegaconf import OmegaConf

    job = OmegaConf.masked_copy(cfg, [key for key in cfg if key not in (*LOCATIONS, "hydra")])
    text = OmegaConf.to_yaml(job, resolve=True)
    kept = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in LOCATIONS]
    return {"overrides": kept, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def config_said(config: dict | None) -> str:
    """The config record as the PDF's Subject and the PNG's Description end: '' where none was recorded."""
    if config is None:
        return ""
    return f"; config sha256 {config['sha256']}; overrides: {' '.join(config['overrides']) or 'none'}"
