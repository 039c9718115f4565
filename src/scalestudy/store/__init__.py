"""The one package that talks to MLflow (nothing else imports it): it writes runs and reads them as one tidy table.

Writes always go through MLflow's client. Reads have two paths that return the same table:
- a SQLite store is read directly (read-only) from MLflow's tables: `import mlflow` alone costs
  about 3.7 s here and `search_runs` grows slow on large stores, so the figure builder reads the
  store with one SQL query per table instead (`make figure-3` stays well under 5 s);
- any other store (an `mlflow server`) goes through `MlflowClient.search_runs`, paginated.
tests/test_store.py checks that both paths give the same table on the same store.

What a reader can rely on (docs/reliability.md, "What the store guarantees, and what it does not"):
- A URI is checked before anything is opened: `sqlite:///relative.db` or `sqlite:////absolute.db` (writers need
  its folder writable), `http(s)://host:port` (it must answer within SCALESTUDY_HTTP_TIMEOUT seconds, 10 by
  default; MLflow's own retries are cut to 2), or another scheme MLflow knows. A bad one is one line, no traceback.
- One lock per store (`store_lock`) serialises writers and keeps readers out while runs change: filelock's
  ReadWriteLock beside a SQLite store on a local disk, its SoftReadWriteLock on a network file system (NFS,
  Lustre, GPFS, BeeGFS, CIFS; SCALESTUDY_LOCK=soft for one not recognised); for any other store, one lock per
  URI in this machine's temp folder.
- A run is complete or invisible: it gets its content hash last, after its final status; readers skip runs
  without one, and the next import deletes them. A dataset's import is one transaction to readers: its
  experiment is tagged `scalestudy.import=writing` while its runs change and `complete` after, and a reader
  refuses an experiment an import left half-done (an importer killed by SIGKILL): `make import` completes it.
- A run is in the ledger (ledger.py): two tables of a SQLite store's file that MLflow's API cannot reach hold, per
  run, its status, name, lifecycle and digests of its params, tags and every metric's whole history, and per
  experiment its name, lifecycle and run set. The builder refuses a store that differs from it; the next import
  compares every published run with its source and repairs what differs; `make accept-runs` accepts a changed
  measured run (logged). A store read through the API (an `mlflow server`) is checked by the runs' values_hash
  seal (seal.py) and the experiments' run counts only.
- A half-made store (a first writer killed while MLflow made its tables; it holds nothing) is made again.
- A SQLite store that moved (a copied or moved checkout) has its artifact locations re-pointed to the folder
  beside it before anything is written, so no run writes into the old place.

Its modules, each using only those before it: `address` (which store, and can it be used), `lock` (one lock per
store), `seal` (the hash of a run's values), `ledger` (what each run held when written, out of the API's reach),
`read` (the tidy table, the series), `verify` (does a run
still hold what its record says; who else may change an experiment), `write` (runs; an import as one
transaction; a moved store's artifacts), `views` (what the UI shows beside the runs: experiment descriptions
and saved views).
"""

from .address import ServerGone, StoreError, artifact_root, check_uri, sqlite_path, tracking_uri
from .lock import store_lock
from .read import load_runs, load_series, run_tag_values
from .views import SAVED_VIEW_TAG, describe_experiments, save_views
from .write import (
    SyncPlan,
    check_records,
    log_measured_run,
    log_metrics,
    relocate_artifacts,
    sync_experiment,
    sync_runs,
)

__all__ = [
    "SAVED_VIEW_TAG",
    "ServerGone",
    "StoreError",
    "SyncPlan",
    "artifact_root",
    "check_records",
    "check_uri",
    "describe_experiments",
    "load_runs",
    "load_series",
    "log_measured_run",
    "log_metrics",
    "relocate_artifacts",
    "run_tag_values",
    "save_views",
    "sqlite_path",
    "store_lock",
    "sync_experiment",
    "sync_runs",
    "tracking_uri",
]
