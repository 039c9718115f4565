"""python -m scalestudy.ui.launch server ARGS...: `mlflow server ARGS...` serving the study's front (front.py) in
place of MLflow's app: the same command line, store set-up and uvicorn, with the app uvicorn imports swapped
(MLflow's `mlflow.server.fastapi_app:app` -> `scalestudy.ui.front:create_app`, and the basic-auth app's factory
-> `scalestudy.ui.front:create_auth_app`).
"""

from __future__ import annotations

import sys

FRONTS = {
    "mlflow.server.fastapi_app:app": "scalestudy.ui.front:create_app",
    "mlflow.server.auth:create_app": "scalestudy.ui.front:create_auth_app",
}


def front_command(build):
    """MLflow's uvicorn command builder, wrapped: the same command with our front's factory as the app."""

    def build_with_front(uvicorn_opts, host, port, workers, app_name, env_file=None, is_factory=False):
        if app_name not in FRONTS:
            raise SystemExit(f"scalestudy.ui.launch: MLflow asked uvicorn for {app_name!r}, which has no front")
        return build(uvicorn_opts, host, port, workers, FRONTS[app_name], env_file, True)

    return build_with_front


def main() -> None:
    import mlflow.server
    from mlflow.cli import cli

    mlflow.server._build_uvicorn_command = front_command(mlflow.server._build_uvicorn_command)
    cli(args=sys.argv[1:], prog_name="mlflow")


if __name__ == "__main__":
    main()
