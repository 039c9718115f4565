"""Which store, and can it be used: the URI checked before anything is opened, in one line when it is bad."""

from __future__ import annotations

import os
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

DEFAULT_STORE = Path(".mlflow") / "store.db"
# MLflow database schema revisions whose tables the direct reader (and the relocation) was checked against.
KNOWN_SCHEMA_REVISIONS = {"dc11669786a5"}  # mlflow 3.17.2
SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "file", "databricks")
IMPORT_STATE = "scalestudy.import"  # experiment tag: writing | complete
IMPORT_RUNS = "scalestudy.runs"  # experiment tag: how many runs its last import left (a reader finding fewer refuses)
CONTENT_HASH = "content_hash"  # run tag written last: a run without it is incomplete
HTTP_TIMEOUT_S = float(os.environ.get("SCALESTUDY_HTTP_TIMEOUT", "10"))


class StoreError(RuntimeError):
    """The tracking store cannot be read or written as asked (the message says which store and why)."""


class ServerGone(StoreError):
    """An http(s) store stopped answering while being written: nothing more can be sent to it, not even the
    clean-up of a write cut short (the experiment stays marked `writing`; the next import completes it)."""


def http_timeout() -> str:
    """The seconds MLflow's client waits for an answer (check_server sets it from SCALESTUDY_HTTP_TIMEOUT)."""
    return os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", f"{HTTP_TIMEOUT_S:g}")


def server_gone(err: BaseException) -> bool:
    """Whether `err` (or what it was raised while handling) is a connection to a tracking server that failed or
    timed out: MLflow wraps requests' errors in an MlflowException without `from`, so the chain is followed."""
    import requests

    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


@contextmanager
def answering(uri: str) -> Iterator[None]:
    """Reading through a tracking server: one that stops answering is one line naming it, not MLflow's traceback."""
    try:
        yield
    except Exception as err:
        if not server_gone(err):
            raise
        raise ServerGone(
            f"tracking server {uri} stopped answering (no answer within {http_timeout()} s, "
            "SCALESTUDY_HTTP_TIMEOUT): start it again and run the command again; nothing was written"
        ) from None


# --------------------------------------------------------------------------------------------
# Which store, and can it be used


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else the git-ignored SQLite file .mlflow/store.db under the cwd."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return check_uri(uri)
    return f"sqlite:///{(Path.cwd() / DEFAULT_STORE).resolve()}"


def check_uri(uri: str) -> str:
    """The URI, if it names a kind of store this project can use; else StoreError saying what one looks like."""
    scheme = urlparse(uri).scheme
    if scheme not in SCHEMES:
        raise StoreError(
            f"tracking URI {uri!r} is not a store URI: use sqlite:///path/to/store.db (relative), "
            "sqlite:////abs/path/store.db or http://host:port (an mlflow server)"
        )
    if scheme == "sqlite":
        sqlite_path(uri)
    return uri


def sqlite_path(uri: str) -> Path | None:
    """The database file of a sqlite URI (sqlite:///rel.db -> rel.db, sqlite:////abs.db -> /abs.db), or None for
    any other kind of store."""
    if urlparse(uri).scheme != "sqlite":
        return None
    if not uri.startswith("sqlite:///") or len(uri) == len("sqlite:///"):
        raise StoreError(
            f"tracking URI {uri!r}: a SQLite store is sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    return Path(unquote(uri[len("sqlite:///") :].split("?", 1)[0]))


def artifact_root(uri: str) -> Path | None:
    """Where a SQLite store keeps its artifacts: beside the database, one folder per store."""
    path = sqlite_path(uri)
    if path is None:
        return None  # a server decides
    return (path.parent / f"{path.stem}-artifacts").resolve()


def auth_db(uri: str) -> Path | None:
    """Where the MLflow UI with --auth keeps its users and permissions for a SQLite store: <store>-auth.db beside
    it (ui.auth_config); None for any other store."""
    path = sqlite_path(uri)
    return None if path is None else (path.parent / f"{path.stem}-auth.db").resolve()


def check_writable(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"store {path}: cannot create its folder {path.parent}: {err.strerror}") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise StoreError(f"store {path}: its folder {path.parent} is not writable for this user")
    if path.exists() and not os.access(path, os.W_OK):
        raise StoreError(f"store {path} is read-only for this user: writing runs needs write access")


def check_server(uri: str) -> None:
    """Fail in seconds, not minutes, when nothing answers at an http(s) store, or what answers is not MLflow."""
    # No retries: each would wait the timeout again (a hung server took 70 s to fail with MLflow's default 2 and its
    # clean-up calls); an import cut short is completed by the next one, so failing at once loses nothing
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    # SCALESTUDY_HTTP_TIMEOUT, where set, wins over an MLflow timeout inherited from the environment: it is the
    # setting the errors name; where not, a timeout set for MLflow stays
    timeout = str(max(1, round(HTTP_TIMEOUT_S)))  # MLflow reads whole seconds
    if "SCALESTUDY_HTTP_TIMEOUT" in os.environ:
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = timeout
    else:
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", timeout)
    # MLflow prints two "View run ... at" lines per run written to a server (and asks the server for the run to
    # do so): some 1,500 lines per `make import`; our own summary says what was written
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    probe = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1"
    try:
        with urllib.request.urlopen(probe, timeout=HTTP_TIMEOUT_S) as resp:
            body = resp.read(1 << 20)
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            return  # an MLflow server with --auth: the API calls say more, with the user's credentials
        raise StoreError(
            f"tracking URI {uri} answers, but not as an MLflow server (GET {probe}: HTTP {err.code}): "
            "set MLFLOW_TRACKING_URI to the MLflow server's address"
        ) from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise StoreError(
            f"tracking server {uri} does not answer ({reason}) within {HTTP_TIMEOUT_S:g} s "
            "(SCALESTUDY_HTTP_TIMEOUT): start it, or set MLFLOW_TRACKING_URI to another store"
        ) from None
    try:
        import json

        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("experiments", []), list):
        raise StoreError(
            f"tracking URI {uri} answers, but not as an MLflow server (GET {probe} gave no MLflow JSON): "
            "set MLFLOW_TRACKING_URI to the MLflow server's address"
        )
    check_server_answers_unknown(uri)


def check_server_answers_unknown(uri: str) -> None:
    """A server that answers every request with 200 and `{}` passes the search above (MLflow leaves out an empty
    list): asked for an experiment that does not exist, MLflow answers 404 RESOURCE_DOES_NOT_EXIST; what answers
    otherwise is not MLflow, and writing to it would report runs created that were never stored."""
    import json
    import uuid

    probe = (
        uri.rstrip("/") + f"/api/2.0/mlflow/experiments/get-by-name?experiment_name=scalestudy-probe-{uuid.uuid4().hex}"
    )
    code, body = 200, b""
    try:
        with urllib.request.urlopen(probe, timeout=HTTP_TIMEOUT_S) as resp:
            body = resp.read(1 << 16)
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            return
        code, body = err.code, err.read(1 << 16)
    except (urllib.error.URLError, OSError) as err:
        raise StoreError(
            f"tracking server {uri} does not answer ({getattr(err, 'reason', err)}) within {HTTP_TIMEOUT_S:g} s "
            "(SCALESTUDY_HTTP_TIMEOUT): start it, or set MLFLOW_TRACKING_URI to another store"
        ) from None
    try:
        said = json.loads(body).get("error_code")
    except (ValueError, AttributeError):
        said = None
    if code != 404 or said != "RESOURCE_DOES_NOT_EXIST":
        raise StoreError(
            f"tracking URI {uri} answers, but not as an MLflow server (GET {probe.split('?')[0]} of an experiment "
            f"that does not exist gave HTTP {code} {' '.join(body[:60].decode('utf-8', 'replace').split())!r}, not "
            "404 RESOURCE_DOES_NOT_EXIST): set MLFLOW_TRACKING_URI to the MLflow server's address; nothing was written"
        )


def half_made(path: Path, heads: set[str] = KNOWN_SCHEMA_REVISIONS) -> str | None:
    """Why the SQLite store at `path` is half-made, or None: a first writer killed while MLflow created its tables
    leaves some tables and a schema revision short of the head (or none), and no run nor experiment yet. Such a
    store holds nothing, so it may be made again; MLflow itself would fail on it ("table ... already exists")."""
    if not path.is_file() or path.stat().st_size == 0:
        return None  # MLflow makes an empty file's tables
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return None
    try:
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        row = con.execute("SELECT version_num FROM alembic_version").fetchone() if "alembic_version" in tables else None
        if row is not None and row[0] in heads:
            return None
        runs = con.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
        named = "experiments" in tables and con.execute(
            "SELECT count(*) FROM experiments WHERE experiment_id != 0").fetchone()[0]  # fmt: skip
        if runs or named:
            return None  # an older store with runs in it: not ours to remake (MLflow says how to upgrade it)
        return f"schema revision {row[0] if row else 'none'}, {len(tables)} tables, no run"
    except sqlite3.DatabaseError:
        return None  # not a database at all: the reader says so
    finally:
        con.close()


HALF_MADE = (
    "store {path} is half-made ({why}): an import was stopped while MLflow created its tables; "
    "run `make import` (python -m scalestudy.ingest), which makes it again"
)
