"""The UI's front: one ASGI app in front of MLflow's own, run by `mlflow server` itself (front_server.py).

- `/` is the study's home page (home.py; the file SCALESTUDY_UI_HOME, written by `python -m scalestudy.ui`),
- `/study/figures|tables/NAME.png` the builder's thumbnails (from the folder SCALESTUDY_UI_PAPER),
- `/mlflow/` MLflow's page (index.html) with MLflow's own browser settings preset where the browser has none
  (BROWSER_DEFAULTS: the "Model training" runs table rather than the GenAI home, the telemetry notice read and
  telemetry off, the assistant's panel closed and not opened on the first load), and its own home page (#/, the
  GenAI start page with its "Start Demo") skipped for the experiments list; the home page presets them too,
- everything else is MLflow's app, served under /mlflow/ (`--static-prefix /mlflow`), except its demo-data
  endpoints: the study's store takes no demo experiments (MLflow's "Start demo" gets 403).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..store.mlflow_apps import basic_auth_app, mlflow_app, mlflow_index_html
from .home import MLFLOW_PATH

HOME_ENV = "SCALESTUDY_UI_HOME"
PAPER_ENV = "SCALESTUDY_UI_PAPER"
THUMBNAIL = re.compile(r"/study/(figures|tables)/((?:figure|table)-[A-Za-z0-9_-]+\.png)")
DEMO = re.compile(r"/mlflow/(ajax-)?api/[0-9.]+/mlflow/demo/")
# MLflow 3.17's UI keeps these settings in the browser's localStorage, as JSON under "<key>_v<version>"
# (its frontend bundle, mlflow/server/js/build: useLocalStorage).
BROWSER_DEFAULTS = {
    "mlflow.workflowType_v1": "machine_learning",
    "mlflow.telemetry.info.alert.dismissed_v1": True,
    "mlflow.settings.telemetry.enabled_v1": False,
    "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": True,
    "mlflow.assistant.panelOpen_v1": False,
}


def defaults_script() -> str:
    """A <script> that sets each of BROWSER_DEFAULTS the browser does not have yet (a choice made is kept)."""
    values = json.dumps({key: json.dumps(value) for key, value in BROWSER_DEFAULTS.items()}, sort_keys=True)
    return (
        f"<script>(function(d){{for(var k in d){{if(window.localStorage.getItem(k)===null)"
        f"window.localStorage.setItem(k,d[k]);}}}})({values});</script>"
    )


# MLflow's home (#/) is its GenAI start page ("Start Demo", the GenAI tour): its page goes to the experiments list.
AWAY_FROM_HOME = (
    "<script>(function(){function away(){var h=window.location.hash;"
    "if(h===''||h==='#'||h==='#/')window.location.replace('#/experiments?workflowType=machine_learning');}"
    "away();window.addEventListener('hashchange',away);})();</script>"
)


# MLflow 3.17 marks every element of its assistant (the corner button, its pane) `data-assistant-ui`: hidden, as
# no server setting turns the button off for a local server.
NO_ASSISTANT = "<style>[data-assistant-ui]{display:none !important}</style>"


def mlflow_page(index_html: str) -> str:
    """MLflow's index.html with the defaults set, its assistant hidden and its home page skipped, before its own
    scripts run."""
    return index_html.replace("<head>", "<head>" + defaults_script() + NO_ASSISTANT + AWAY_FROM_HOME, 1)


def _mlflow_index() -> tuple[int, bytes, str]:
    return 200, mlflow_page(mlflow_index_html()).encode(), "text/html; charset=utf-8"


async def _send(send, status: int, body: bytes, content_type: str) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    headers.append((b"cache-control", b"no-store"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _home() -> tuple[int, bytes, str]:
    path = Path(os.environ.get(HOME_ENV, ""))
    if not path.is_file():
        return 404, b"no home page: start the UI with `make ui`", "text/plain"
    return 200, path.read_text().replace("<head>", "<head>" + defaults_script(), 1).encode(), "text/html; charset=utf-8"


def _thumbnail(folder: str, name: str) -> tuple[int, bytes, str]:
    path = Path(os.environ.get(PAPER_ENV, "paper")) / folder / name
    if not path.is_file():
        return 404, f"no {folder}/{name}: build it with `make {Path(name).stem}`".encode(), "text/plain"
    return 200, path.read_bytes(), "image/png"


def answer(method: str, path: str) -> tuple[int, bytes, str] | None:
    """What the front answers itself to `method path`; None for MLflow's app."""
    if DEMO.match(path):
        return 403, b"this store takes no demo data", "text/plain"
    if method not in ("GET", "HEAD"):
        return None
    if path in ("/", "/index.html"):
        return _home()
    if path in (MLFLOW_PATH, MLFLOW_PATH + "index.html"):
        return _mlflow_index()
    match = THUMBNAIL.fullmatch(path)
    return _thumbnail(*match.groups()) if match else None


def front(mlflow_app):
    """The ASGI app: the study's pages, then `mlflow_app`."""

    async def app(scope, receive, send):
        if scope["type"] == "http":
            answered = answer(scope["method"], scope["path"])
            if answered is not None:
                await _send(send, *answered)
                return
        await mlflow_app(scope, receive, send)

    return app


def create_app():
    """uvicorn's factory (--factory): the front around MLflow's default app."""
    return front(mlflow_app())


def create_auth_app():
    """uvicorn's factory: the front around MLflow's basic-auth app (`--app-name basic-auth`)."""
    return front(basic_auth_app())
