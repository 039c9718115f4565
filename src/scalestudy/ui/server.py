"""python -m scalestudy.ui [--host 127.0.0.1] [--port 5000] [--paper DIR] [--auth]: the study's home page and
the MLflow UI on this repository's store, with a link to each experiment's runs and to the runs behind each figure
and table.

Before serving, it saves in the store a view of the runs table (links.py) for each experiment (all its runs,
with the params and metrics that matter here as columns) and for each figure and table whose sidecar exists
(DIR/figures/NAME.json, DIR/tables/NAME.json: exactly the runs it lists), then prints the links that open
them, and writes the study's home page (home.py) beside the store. It runs `mlflow server` on
store.tracking_uri() through front_server.py (MLflow's server with front.py's app in front of MLflow's: the home page
at /, MLflow's UI under /mlflow/), bound to loopback, with one worker and without MLflow's background job runner;
the server's log goes to a file beside the store, so the links stay on the screen. With --auth the server is
MLflow's basic-auth app: every request to MLflow needs a user and password (the home page and its thumbnails,
the paper's own figures, do not).
`serve(uri, port)` starts the same server for tests and stops it (its whole process group) on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ..config import name_order
from ..store import StoreError, artifact_root, load_runs, relocate_artifacts, save_views, sqlite_path, tracking_uri
from . import front
from .home import MLFLOW_PATH, Dataset, Entry, caption_of, home_page, thumbnail_of, title_of
from .links import SHOWN_METRICS, SHOWN_PARAMS, experiment_view, owned, runs_view

LOOPBACK = ("127.0.0.1", "localhost", "::1")
ADMIN_PASSWORD_ENV = "MLFLOW_AUTH_ADMIN_PASSWORD"
MIN_PASSWORD = 12  # MLflow 3.17 refuses a shorter admin password


class UIError(RuntimeError):
    """The UI cannot start as asked; the message is the one line to show."""


def server_command(uri: str, host: str = "127.0.0.1", port: int = 5000, auth: bool = False) -> list[str]:
    """The `mlflow server` command line for the store at `uri`."""
    if host not in LOOPBACK:
        raise ValueError(f"host {host!r}: the UI binds to loopback only ({', '.join(LOOPBACK)})")
    cmd = [
        sys.executable,
        "-m",
        "scalestudy.ui.front_server",
        "server",
        "--backend-store-uri",
        uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
        "--static-prefix",
        MLFLOW_PATH.rstrip("/"),
    ]
    path = sqlite_path(uri)
    if path is not None:
        artifacts = artifact_root(uri)  # where the store puts the store's artifacts
        artifacts.mkdir(parents=True, exist_ok=True)
        cmd += ["--default-artifact-root", artifacts.as_uri(), "--no-serve-artifacts"]
    if auth:
        cmd += ["--app-name", "basic-auth"]
    return cmd


def _url(host: str, port: int) -> str:
    return f"http://{'[::1]' if host == '::1' else host}:{port}"


def server_env(auth_config: Path | None = None, home: Path | None = None, paper: Path | None = None) -> dict[str, str]:
    """The server's environment: MLflow's switches, and where the front finds the home page and thumbnails."""
    env = dict(os.environ)
    env.update(
        {
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # no huey job runner next to the UI
            "MLFLOW_DISABLE_TELEMETRY": "true",  # also hides the UI's telemetry banner
            "DO_NOT_TRACK": "true",
            "MLFLOW_ENABLE_REMOTE_ASSISTANT": "false",
            "MLFLOW_ENABLE_ASSISTANT_SANDBOX": "false",
        }
    )
    if home is not None:
        env[front.HOME_ENV] = str(home.resolve())
    if paper is not None:
        env[front.PAPER_ENV] = str(paper.resolve())
    if auth_config is not None:
        env["MLFLOW_AUTH_CONFIG_PATH"] = str(auth_config)
        # The auth app's CSRF protection needs a secret; one per server start is enough for one server.
        env.setdefault("MLFLOW_FLASK_SERVER_SECRET_KEY", secrets.token_hex(32))
    return env


def _beside_store(uri: str, suffix: str) -> Path:
    """A file next to a SQLite store (.mlflow/store.db -> .mlflow/store<suffix>), else under ./.mlflow."""
    path = sqlite_path(uri)
    base = path.parent / path.stem if path is not None else Path.cwd() / ".mlflow" / "ui"
    return Path(f"{base}{suffix}").resolve()


def auth_config(uri: str) -> Path:
    """The basic-auth app's config (users in <store>-auth.db; a user MLflow does not know gets nothing, a user
    the admin creates may read every experiment), written beside the store. The admin user is created on the
    first start, with the password in MLFLOW_AUTH_ADMIN_PASSWORD."""
    ini, db = _beside_store(uri, "-auth.ini"), _beside_store(uri, "-auth.db")
    if not db.exists():
        password = os.environ.get(ADMIN_PASSWORD_ENV, "")
        if len(password) < MIN_PASSWORD:
            raise UIError(
                f"--auth: the first start creates the user 'admin' (users are kept in {db}): set {ADMIN_PASSWORD_ENV} "
                f"to its password, {MIN_PASSWORD} characters or more"
            )
    text = (
        "[mlflow]\n"
        "default_permission = READ\n"
        f"database_uri = sqlite:///{db}\n"
        "admin_username = admin\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    ini.parent.mkdir(parents=True, exist_ok=True)
    if not ini.exists() or ini.read_text() != text:
        ini.write_text(text)
    ini.chmod(0o600)
    return ini


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port (binding it fails)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection's TIME_WAIT is no user
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Terminate the server's process group (mlflow CLI, uvicorn and its worker), then kill it."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)  # anything left in the group?
            except ProcessLookupError:
                proc.wait()
                return
            time.sleep(0.1)
    proc.wait()


def _wait_until_healthy(proc: subprocess.Popen, base_url: str, timeout_s: float) -> str | None:
    """None once GET <base_url>/health answers 200 (MLflow's UI's base URL), else what went wrong."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            return f"exited with status {proc.returncode}"
        try:
            with urllib.request.urlopen(f"{base_url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return None
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            return f"did not answer {base_url}/health within {timeout_s:.0f} s"
        time.sleep(0.25)


def _start(uri: str, host: str, port: int, auth: bool, log, home: Path | None = None, paper: Path | None = None):
    if port_in_use(host, port):  # fail fast, and never talk to another server
        raise UIError(f"{_url(host, port)} is already in use (another MLflow UI?): stop it or pick another --port")
    env = server_env(auth_config(uri) if auth else None, home, paper)
    return subprocess.Popen(
        server_command(uri, host, port, auth),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def mlflow_url(base_url: str) -> str:
    """MLflow's UI under the study's front at `base_url` (no trailing slash)."""
    return base_url + MLFLOW_PATH.rstrip("/")


@contextlib.contextmanager
def serve(uri: str, port: int, host: str = "127.0.0.1", timeout_s: float = 60.0, auth: bool = False) -> Iterator[str]:
    """Start `mlflow server` on `uri`, wait until GET /mlflow/health answers, yield MLflow's UI's base URL
    (http://HOST:PORT/mlflow), stop it."""
    base_url = mlflow_url(_url(host, port))
    with tempfile.TemporaryFile() as log:
        proc = _start(uri, host, port, auth, log)
        try:
            problem = _wait_until_healthy(proc, base_url, timeout_s)
            if problem:
                log.seek(0)
                output = log.read().decode(errors="replace")[-4000:]
                raise RuntimeError(f"mlflow server on {uri} {problem}; its output:\n{output}")
            yield base_url
        finally:
            _stop(proc)


# --------------------------------------------------------------------------------------------
# The views and the links


def _sidecars(paper: Path) -> list[tuple[str, Path, dict]]:
    """(name, path, content) of every figure and table sidecar under `paper`, figures first, in number order."""
    found = []
    for folder in ("figures", "tables"):
        for path in (paper / folder).glob("*.json"):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            name = data.get("figure") or data.get("table")
            if name and isinstance(data.get("mlflow_runs"), list):
                found.append((str(name), path, data))
    return sorted(found, key=lambda item: (item[1].parent.name, name_order(item[0])))


def published_sources() -> dict[str, dict[str, str]]:
    """Each published dataset's source.yaml (citation, url) by experiment name."""
    from ..ingest import read_source, reference_dir

    sources = {}
    for folder in sorted(reference_dir().glob("*/")):
        with contextlib.suppress(Exception):  # a broken source.yaml is the importer's to report
            source = read_source(folder)
            sources[str(source["experiment"])] = source
    return sources


def _dataset(experiment: str, n_runs: int, view, sources: dict) -> Dataset:
    source = sources.get(experiment)
    if source is None:
        about, url = "runs of this machine: measured by the harness or imported with `ingest logs`", ""
    else:
        about, url = str(source["citation"]), str(source.get("url") or "")
    return Dataset(experiment, about, url, n_runs, MLFLOW_PATH + view.link)


def _entry(name: str, path: Path, data: dict, n_runs: int, link: str, problem: str = "") -> Entry:
    caption = caption_of(path, data)
    commit = str(data.get("git_commit") or "unknown")
    return Entry(name, title_of(data, caption), caption, commit, n_runs, link, thumbnail_of(path), problem)


def _sidecar_run_ids(data: dict, where: dict, by_key: dict) -> list[str]:
    """A sidecar's run ids in this store: a run of another store (the paper's, on a reader's fresh import) is
    found by its experiment and import key, which every store that imported the dataset shares."""
    found = []
    for run in data["mlflow_runs"]:
        key = (run.get("experiment"), run.get("import_key"))
        found.append(str(run["run_id"]) if run["run_id"] in where else by_key.get(key, run["run_id"]))
    return found


def publish_views(uri: str, paper: Path, base_url: str, home: Path | None = None) -> list[str]:
    """Save the runs-table views of every experiment and of every sidecar under `paper` in the store at `uri`,
    and return the lines that show their links (relative links made absolute with `base_url`, MLflow's UI's
    base URL); with `home`, write the study's home page there too."""
    runs = load_runs(uri, sealed=False)  # the UI shows what the store holds; the builder refuses a changed run
    where = {
        r.run_id: (r.experiment_id, r.experiment) for r in runs[["run_id", "experiment_id", "experiment"]].itertuples()
    }
    by_key = {}
    if "import_key" in runs:
        for r in runs[["run_id", "experiment", "import_key"]].dropna().itertuples():
            by_key[(r.experiment, r.import_key)] = r.run_id
    views: dict[str, dict[str, str]] = {}
    entries: list[Entry] = []
    datasets: list[Dataset] = []

    def keep(view, place: int) -> str:
        for experiment_id in view.experiment_ids:
            views.setdefault(experiment_id, {})[view.key] = view.tag_value(place)
        return f"{base_url}/{view.link}"

    columns = ", ".join([*SHOWN_PARAMS, *SHOWN_METRICS])
    lines = [f"Each experiment's runs (columns {columns}, where its runs have them):"]
    counts = runs.groupby(["experiment", "experiment_id"]).size()
    sources = published_sources() if home is not None else {}
    for (experiment, experiment_id), n in counts.items():
        view = experiment_view(str(experiment_id))
        lines.append(f"  {experiment:<22} {n:>4} runs  {keep(view, 0)}")
        datasets.append(_dataset(str(experiment), int(n), view, sources))

    lines.append(
        f"The runs behind each figure and table (the run ids in its sidecar, {paper}/figures|tables/NAME.json):"
    )
    sidecars = _sidecars(paper)
    for place, (name, path, data) in enumerate(sidecars, start=1):
        run_ids = _sidecar_run_ids(data, where, by_key)
        missing = [r for r in run_ids if r not in where]
        if missing or not run_ids:
            problem = (
                f"{len(missing)} of its {len(run_ids)} runs are not in this store "
                f"(built from another store?): rebuild it with `make {name}`"
            )
            lines.append(f"  {name:<22} {path}: {problem}")
            entries.append(_entry(name, path, data, len(set(run_ids)), "", problem))
            continue
        view = runs_view(name, [(r, *where[r]) for r in run_ids], str(data.get("title") or ""))
        line = f"  {name:<22} {len(set(run_ids)):>4} runs  {keep(view, place)}"
        if (data.get("mlflow_ui") or {}).get("link") not in (None, view.link):
            line += f"  ({path} has another link: rebuild it with `make {name}`)"
        lines.append(line)
        entries.append(_entry(name, path, data, len(set(run_ids)), MLFLOW_PATH + view.link))
    if not sidecars:
        lines.append(f"  none yet under {paper}: `make figures tables` builds them")
    save_views(views, owned, uri)
    if home is not None:
        home.parent.mkdir(parents=True, exist_ok=True)
        home.write_text(home_page(entries, datasets, uri))
    return lines


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `python -m scalestudy.ui [--auth] [--port N]...`."""
    ap = argparse.ArgumentParser(prog="python -m scalestudy.ui", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1", choices=LOOPBACK)
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--paper", type=Path, default=Path("paper"), help="where the figure and table sidecars are")
    ap.add_argument(
        "--auth",
        action="store_true",
        help=f"MLflow's basic-auth app: every request needs a user and password (first start: {ADMIN_PASSWORD_ENV})",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = argument_parser()
    args = ap.parse_args(argv)
    uri = tracking_uri()
    path = sqlite_path(uri)
    base_url = _url(args.host, args.port)
    log_path = _beside_store(uri, f"-ui-{args.port}.log")
    home = _beside_store(uri, f"-ui-{args.port}.html")
    if path is not None and not path.exists():
        print(f"error: no store at {path}: import the published runs first (make import)", file=sys.stderr)
        return 2
    try:
        if port_in_use(args.host, args.port):
            raise UIError(f"{base_url} is already in use (another MLflow UI?): stop it or pick another --port")
        relocate_artifacts(uri)  # a store that moved shows its artifacts from where they are now
        lines = publish_views(uri, args.paper, mlflow_url(base_url), home)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("wb") as log:  # the server keeps its own handle
            proc = _start(uri, args.host, args.port, args.auth, log, home, args.paper)
    except (UIError, StoreError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so `finally` stops the server group
    # Ctrl-C stops the UI even where it was started with SIGINT ignored (a background job of a script inherits
    # SIG_IGN, and Python then raises no KeyboardInterrupt).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        problem = _wait_until_healthy(proc, mlflow_url(base_url), 120.0)
        if problem:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            print(f"error: mlflow server on {uri} {problem}: {tail[0]} (its log: {log_path})", file=sys.stderr)
            return 1
        auth = " (basic auth)" if args.auth else ""
        print(
            f"The study's home page at {base_url}/, MLflow's UI on {uri} at {mlflow_url(base_url)}/{auth}; "
            f"its log: {log_path}"
        )
        print("\n".join(lines))
        print(
            f"From {base_url}/ by clicks: a figure's thumbnail opens its runs; in MLflow's UI an experiment's "
            "'Views' menu lists the views above. Ctrl-C stops the UI.",
            flush=True,
        )
        returncode = proc.wait()
        print(f"error: mlflow server stopped with status {returncode} (its log: {log_path})", file=sys.stderr)
        return returncode or 1
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(proc)


if __name__ == "__main__":  # python -m scalestudy.ui.server; python -m scalestudy.ui is __main__.py
    sys.exit(main())
