"""MLflow's server, as the UI's front (ui/front.py, ui/front_server.py) uses it: its ASGI apps, its page, and its
`mlflow server` command with the app uvicorn imports swapped. Here because only the store imports MLflow."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path


def mlflow_app():
    """MLflow's default app (uvicorn's `mlflow.server.fastapi_app:app`)."""
    from mlflow.server.fastapi_app import app

    return app


def basic_auth_app():
    """MLflow's basic-auth app (`mlflow server --app-name basic-auth`)."""
    from mlflow.server.auth import create_app

    return create_app()


def mlflow_index_html() -> str:
    """The page MLflow's UI starts from (its frontend bundle's index.html)."""
    from mlflow.server import app as flask_app

    return (Path(flask_app.static_folder) / "index.html").read_text()


def swapped_app_command(build: Callable, apps: Mapping[str, str]) -> Callable:
    """MLflow's uvicorn command builder, wrapped: the same command with `apps[app]`, a factory, as the app."""

    def build_with(uvicorn_opts, host, port, workers, app_name, env_file=None, is_factory=False):
        if app_name not in apps:
            raise SystemExit(f"MLflow asked uvicorn for {app_name!r}, which has no front")
        return build(uvicorn_opts, host, port, workers, apps[app_name], env_file, True)

    return build_with


def run_mlflow_cli(args: list[str], apps: Mapping[str, str]) -> None:
    """`mlflow ARGS...` (its own CLI), uvicorn importing `apps[MLflow's app]` in place of MLflow's app."""
    import mlflow.server
    from mlflow.cli import cli

    mlflow.server._build_uvicorn_command = swapped_app_command(mlflow.server._build_uvicorn_command, apps)
    cli(args=args, prog_name="mlflow")
