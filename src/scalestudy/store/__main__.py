"""python -m scalestudy.store accept [RUN_ID ...]: accept measured runs as the store holds them now (make accept-runs).

A measured run changed after the harness wrote it (its status, name, params, tags, a metric's history), deleted,
or written by another program, is refused by the builder: it is no longer the measurement. Measure it again, or
accept it here: its ledger entry (store/ledger.py) is written anew from what the store holds, a deleted one leaves
the ledger, and a line saying who accepted what, and when, is printed and appended to <store>-ledger.log beside
the store. Published runs are never accepted: `make import` repairs them from their sources.
"""

from __future__ import annotations

import argparse
import sys

from .. import cli
from .address import StoreError, check_uri, sqlite_path, tracking_uri
from .ledger import accept, log_path
from .lock import store_lock


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m scalestudy.store", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    one = sub.add_parser("accept", help="accept measured runs as they are now (all that differ, or those named)")
    one.add_argument("runs", nargs="*", metavar="RUN_ID", help="only these runs (default: every measured run that "
                     "differs from the ledger)")  # fmt: skip
    args = ap.parse_args(argv)
    uri = check_uri(tracking_uri())
    path = sqlite_path(uri)
    if path is None:
        raise StoreError(f"store {uri}: the ledger is kept in a SQLite store's file only; this store has none to "
                         "accept runs into (docs/reliability.md, threat model)")  # fmt: skip
    if not path.is_file():
        raise StoreError(f"tracking store {path} does not exist")
    with store_lock(uri, write=True):
        accepted, left = accept(path, args.runs or None)
    for line in accepted:
        print(line)
    for finding in left:
        print(f"not accepted: {finding.line()}: a published run; `make import` repairs it from its source")
    if accepted:
        print(f"{len(accepted)} accepted, logged in {log_path(path)}", file=sys.stderr)
    elif not left:
        print("nothing to accept: every run matches the ledger", file=sys.stderr)
    return 2 if left else 0


if __name__ == "__main__":
    sys.exit(cli.run(cli.entry(__spec__)))
