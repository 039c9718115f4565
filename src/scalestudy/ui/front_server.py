"""python -m scalestudy.ui.front_server server ARGS...: `mlflow server ARGS...` serving the study's front (front.py)
in place of MLflow's app: the same command line, store set-up and uvicorn, with the app uvicorn imports swapped
(MLflow's `mlflow.server.fastapi_app:app` -> `scalestudy.ui.front:create_app`, and the basic-auth app's factory
-> `scalestudy.ui.front:create_auth_app`; store/mlflow_apps.py does the swap).
"""

from __future__ import annotations

import sys

from ..store.mlflow_apps import run_mlflow_cli

FRONTS = {
    "mlflow.server.fastapi_app:app": "scalestudy.ui.front:create_app",
    "mlflow.server.auth:create_app": "scalestudy.ui.front:create_auth_app",
}

if __name__ == "__main__":
    run_mlflow_cli(sys.argv[1:], FRONTS)
