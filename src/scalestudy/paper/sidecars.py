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
