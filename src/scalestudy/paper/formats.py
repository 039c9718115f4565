"""How values read in the paper: a run value in a legend, panel title or table header (`label`), and a
number in a table cell (`fmt` with a format name that a config gives). Missing numbers read '--'."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..schema import MODELS

MISSING = "--"  # what a cell without a number shows (never 0, never 'nan')
FRAMEWORKS = {"tensorflow": "TensorFlow", "mxnet": "MXNet"}


def _integral(value) -> int | None:
    """`value` as an int when it is a whole number (64, 64.0, '64'), else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def label(column: str, value, unit: str = "GPUs") -> str:
    """How `value` of run column `column` reads: model names spelled out, 'batch 64', '2 GPUs' or '2 ranks'."""
    if column == "model":
        return MODELS.get(str(value), str(value))
    if column == "framework":
        return FRAMEWORKS.get(str(value), str(value))
    if column == "parameter_server" and str(value).lower() in ("cpu", "gpu"):
        return f"PS on {str(value).upper()}"
    whole = _integral(value)
    if column == "batch_per_worker":
        return f"batch {whole if whole is not None else value}"
    if column == "workers" and whole is not None:
        word = "rank" if unit == "CPU ranks" else "GPU"
        return f"{whole} {word}{'s' if whole != 1 else ''}"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --------------------------------------------------------------------------------------------
# Numbers in tables


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fixed(value, digits: int = 2) -> str:
    """12.345 -> '12.35' (digits after the point)."""
    return MISSING if missing(value) else f"{float(value):.{int(digits)}f}"


def percent(value, digits: int = 1) -> str:
    """A fraction as a percentage without the sign: 0.9456 -> '94.6'."""
    return MISSING if missing(value) else f"{100.0 * float(value):.{int(digits)}f}"


def figs(value, n: int = 3) -> str:
    """`n` significant figures, never rounding the integer part: 30.5, 99.0, 142, 1131."""
    if missing(value):
        return MISSING
    value = float(value)
    if value == 0:
        return "0"
    decimals = max(0, int(n) - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def integer(value) -> str:
    return MISSING if missing(value) else f"{float(value):.0f}"


def trim(value, digits: int = 2) -> str:
    """At most `digits` decimals, trailing zeros dropped: 1609.32, 15860.5, 10738."""
    if missing(value):
        return MISSING
    text = f"{float(value):.{int(digits)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


FORMATS: dict[str, Callable[[object], str]] = {
    "trim2": lambda v: trim(v, 2),
    "figs3": lambda v: figs(v, 3),
    "fixed0": lambda v: fixed(v, 0),
    "fixed1": lambda v: fixed(v, 1),
    "fixed2": lambda v: fixed(v, 2),
    "fixed3": lambda v: fixed(v, 3),
    "percent2": lambda v: percent(v, 2),
    "percent1": lambda v: percent(v, 1),
    "percent0": lambda v: percent(v, 0),
    "integer": integer,
}


def fmt_row(values, spec: str) -> list[str]:
    """A table row's cells: `fmt` of each, except that `trim2` gives every cell of the row the decimals of its
    most precise cell (160.93, 97.19, 41.80: consistent decimals in a row, none invented beyond 2)."""
    if spec != "trim2":
        return [fmt(v, spec) for v in values]
    decimals = max((len(t.partition(".")[2]) for t in (trim(v, 2) for v in values) if t != MISSING), default=0)
    return [fixed(v, decimals) for v in values]


def fmt(value, spec: str) -> str:
    """Format by the name of a FORMATS entry (the name a config gives a panel or metric)."""
    try:
        return FORMATS[spec](value)
    except KeyError:
        raise ValueError(f"unknown number format {spec!r} (known: {', '.join(FORMATS)})") from None
