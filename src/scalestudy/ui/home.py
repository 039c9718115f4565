"""The study's home page, served at the UI's root (front.py): each figure and table (its thumbnail, title, caption,
the commit it was built from and its run count, read from its sidecar and the files beside it) linking to its runs
in MLflow's UI, each dataset with its source and run count, and how to import your own runs.

Everything here is a pure function of what `python -m scalestudy.ui` gathered (`Entry`, `Dataset`): the page is
written once per start, beside the store, and the front serves that file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

MLFLOW_PATH = "/mlflow/"  # MLflow's UI, beside the home page (`mlflow server --static-prefix /mlflow`)
THUMBNAILS_PATH = "/study/"  # the builder's PNGs, paper/figures/NAME.png, as /study/figures/NAME.png
PAGE_SIZE = 100  # the runs MLflow's runs table loads at a time
IMPORT_COMMAND = "python -m scalestudy.ingest logs PATH --experiment NAME"


@dataclass(frozen=True)
class Entry:
    """A figure or table on the home page."""

    name: str  # figure-3, table-1
    title: str
    caption: str  # plain text
    commit: str  # the commit the builder ran at
    n_runs: int
    link: str  # relative to the UI's root: /mlflow/#/experiments/...
    thumbnail: str | None  # relative to the UI's root: /study/figures/figure-3.png, or None (a table)
    problem: str = ""  # why the link is missing (its runs are not in this store)


@dataclass(frozen=True)
class Dataset:
    """An experiment of the store on the home page."""

    experiment: str
    source: str  # the citation of a published dataset, else where its runs come from
    url: str
    n_runs: int
    link: str


def runs_label(n_runs: int) -> str:
    """The link text of a view of `n_runs` runs: the true count, and how MLflow's table shows more than a page."""
    text = f"{n_runs} run{'' if n_runs == 1 else 's'}"
    if n_runs > PAGE_SIZE:
        text += f" (MLflow's table shows {PAGE_SIZE} at a time: 'Load more' at its end shows the rest)"
    return text


_LATEX_WORD = re.compile(r"\\(?:textbf|emph|textit|texttt|mathrm|text)\{([^{}]*)\}")


def plain_caption(tex: str) -> str:
    """A figure's caption (NAME.caption.tex: a comment line, then \\caption[short]{long}) as plain text."""
    lines = [line for line in tex.splitlines() if not line.lstrip().startswith("%")]
    text = " ".join(lines).strip()
    text = re.sub(r"^\\caption(\[[^\]]*\])?", "", text)
    for _ in range(3):  # nested markup
        text = _LATEX_WORD.sub(r"\1", text)
    text = text.replace("\\_", "_").replace("\\%", "%").replace("~", " ").replace("$", "")
    text = text.replace("\\times", "×").replace("\\", "")
    return " ".join(text.replace("{", "").replace("}", "").split())


def caption_of(sidecar: Path, data: dict) -> str:
    """A table's caption from its sidecar; a figure's from NAME.caption.tex beside it; '' when neither says."""
    if data.get("caption"):
        return plain_caption(str(data["caption"]))
    tex = sidecar.with_suffix(".caption.tex")
    return plain_caption(tex.read_text()) if tex.is_file() else ""


def title_of(data: dict, caption: str) -> str:
    """The sidecar's title, else the caption's first sentence."""
    if data.get("title"):
        return str(data["title"])
    return caption.split(". ")[0].rstrip(".") if caption else ""


def thumbnail_of(sidecar: Path) -> str | None:
    """Where the front serves the PNG beside a sidecar, when the builder wrote one."""
    png = sidecar.with_suffix(".png")
    return f"{THUMBNAILS_PATH}{sidecar.parent.name}/{png.name}" if png.is_file() else None


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #1f2328; }
h1 { margin-bottom: 0.2em; } nav a { margin-right: 1.5em; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(24em, 1fr)); gap: 1.2em; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 0.8em; }
.card img { width: 100%; border: 1px solid #eee; }
.meta { color: #57606a; font-size: 0.9em; } .caption { font-size: 0.9em; }
table.datasets td, table.datasets th { padding: 0.3em 0.8em; text-align: left; vertical-align: top; }
code, pre { background: #f6f8fa; padding: 0.1em 0.3em; }
"""


def _entry_html(entry: Entry) -> str:
    name, title = escape(entry.name), escape(entry.title)
    image = f'<img src="{escape(entry.thumbnail)}" alt="{name}: {title}">' if entry.thumbnail else ""
    if entry.problem:
        runs = f"<p class='meta'>{escape(entry.problem)}</p>"
        head = f"<h3>{name}: {title}</h3>{image}"
    else:
        label = f"Open its {escape(runs_label(entry.n_runs))} in MLflow"
        runs = f'<p><a class="runs" data-name="{name}" href="{escape(entry.link)}">{label}</a></p>'
        thumbnail = f'<a class="thumbnail" data-name="{name}" href="{escape(entry.link)}">{image}</a>'
        head = f"<h3>{name}: {title}</h3>{thumbnail}"
    commit = escape(entry.commit[:12] + (" (uncommitted changes)" if entry.commit.endswith("-dirty") else ""))
    return (
        f'<div class="card" id="{name}">{head}{runs}'
        f"<p class='meta'>built at commit {commit}</p><p class='caption'>{escape(entry.caption)}</p></div>"
    )


def _dataset_html(dataset: Dataset) -> str:
    source = escape(dataset.source)
    if dataset.url:
        source = f'{source} (<a href="{escape(dataset.url)}">{escape(dataset.url)}</a>)'
    runs = f'<a href="{escape(dataset.link)}">{escape(runs_label(dataset.n_runs))}</a>'
    return f"<tr><td>{escape(dataset.experiment)}</td><td>{runs}</td><td>{source}</td></tr>"


def home_page(entries: list[Entry], datasets: list[Dataset], store: str) -> str:
    """The home page's HTML."""
    figures = "".join(_entry_html(e) for e in entries if e.name.startswith("figure-"))
    tables = "".join(_entry_html(e) for e in entries if not e.name.startswith("figure-"))
    rows = "".join(_dataset_html(d) for d in datasets)
    empty = "<p>None built yet: <code>make figures tables</code> builds them.</p>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Scaling study: figures, tables and runs</title>
<style>{STYLE}</style></head><body>
<h1>Distributed-training scaling study</h1>
<nav><a href="#figures">Figures</a><a href="#tables">Tables</a><a href="#datasets">Datasets</a>
<a href="#import">Import your own runs</a>
<a id="mlflow" href="{MLFLOW_PATH}#/experiments?workflowType=machine_learning">All experiments in MLflow</a></nav>
<p class="meta">Every figure and table of the paper, each linking to exactly the runs it draws, in MLflow's runs
table; the store: <code>{escape(store)}</code>.</p>
<h2 id="figures">Figures</h2><div class="grid">{figures or empty}</div>
<h2 id="tables">Tables</h2><div class="grid">{tables or empty}</div>
<h2 id="datasets">Datasets</h2>
<table class="datasets"><tr><th>Experiment</th><th>Runs</th><th>Source</th></tr>{rows}</table>
<h2 id="import">Import your own runs</h2>
<p>A training log (tf_cnn_benchmarks, Horovod, MLPerf, Keras and the other formats of docs/data.md) becomes a run of
an experiment of its own:</p>
<pre>{escape(IMPORT_COMMAND)}</pre>
<p>then restart <code>make ui</code>: the experiment is listed above, with a link to its runs (docs/data.md).</p>
</body></html>
"""
