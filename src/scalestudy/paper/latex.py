"""LaTeX text: escaping, and the Jinja2 environment the table templates (paper/templates/) render in.

Templates use LaTeX-friendly delimiters: ((* block *)), ((( variable ))), ((= comment =)); their filters are
the number formats of formats.py, `label` and `tex`.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import jinja2

from .formats import MISSING, figs, fixed, fmt, fmt_row, integer, label, percent, trim

_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def tex(text) -> str:
    """Escape text for LaTeX (run names, reasons, config strings)."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in str(text))


def environment(folder: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        block_start_string="((*",
        block_end_string="*))",
        variable_start_string="(((",
        variable_end_string=")))",
        comment_start_string="((=",
        comment_end_string="=))",
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters.update(
        tex=tex,
        fixed=fixed,
        percent=percent,
        figs=figs,
        integer=integer,
        trim=trim,
        fmt=fmt,
        fmt_row=fmt_row,
        label=lambda value, column="": label(column, value),
    )
    env.globals.update(zip=zip, MISSING=MISSING)
    return env


def render(path: Path, what: str, **context) -> str:
    """Render the template at `path`; an error names the template file and line."""
    env = environment(path.parent)
    try:
        return env.get_template(path.name).render(**context)
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError) as err:
        line = getattr(err, "lineno", None) or next(
            (f.lineno for f in reversed(traceback.extract_tb(err.__traceback__)) if f.filename == str(path)), None
        )
        raise ValueError(f"{what}: {path}{f':{line}' if line else ''}: {type(err).__name__}: {err}") from err
